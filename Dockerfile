# The bot in a container, installed the way the README installs it, run as a non-root user.
# An exact tag (same minor as requires-python) so a rebuild does not silently move Python or Debian.
FROM python:3.11.17-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A numeric uid/gid, so an orchestrator can verify "not root" without reading /etc/passwd.
RUN groupadd --gid 10001 bot \
    && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin bot \
    && mkdir -p /app/data && chown 10001:10001 /app/data

WORKDIR /app
RUN python3 -m venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH

# Dependencies first, from the hash-pinned lock alone: this layer is rebuilt only when the lock changes,
# not on every code change.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock

# Then the project itself; its dependencies are already in place and pinned.
COPY pyproject.toml README.md LICENSE ./
COPY bot ./bot
RUN pip install --no-deps .

# Image-owned paths, all inside the volume. compose.yaml sets the same four values in `environment:` so that a
# line in .env cannot move them out of the volume (tests/test_docker.py checks that they agree). The demo
# (`docker compose run --rm bot python -m bot demo`) saves its video in the volume too: /app itself is not
# the bot user's to write.
ENV DATABASE_PATH=/app/data/bot.sqlite3 \
    VIDEO_STORAGE_DIR=/app/data/videos \
    HEARTBEAT_PATH=/app/data/heartbeat \
    DEMO_OUTPUT_DIR=/app/data/demo-output

USER 10001:10001
# The database and videos waiting for delivery outlive the container.
VOLUME ["/app/data"]

# Healthy while the bot is connected to Discord and its worker runs: both keep the heartbeat fresh.
HEALTHCHECK --interval=60s --timeout=10s --start-period=90s --retries=3 \
    CMD ["python", "-m", "bot.ops.health", "/app/data/heartbeat", "120"]

# Secrets come from the environment at run time (compose.yaml passes .env); none are baked in.
CMD ["python", "-m", "bot"]
