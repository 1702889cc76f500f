# The bot in a container: the package installed the way the README installs it, run as a non-root user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY cogs ./cogs
# The README's install step, without the dev tools (tests/test_packaging.py installs the same way).
RUN python3 -m venv .venv && .venv/bin/pip install . \
    && useradd --create-home --uid 10001 bot \
    && mkdir -p /app/data && chown bot:bot /app/data

ENV PATH=/app/.venv/bin:$PATH \
    DATABASE_PATH=/app/data/bot.sqlite3 \
    VIDEO_STORAGE_DIR=/app/data/videos \
    HEARTBEAT_PATH=/app/data/heartbeat

USER bot
# The database and videos waiting for delivery outlive the container.
VOLUME ["/app/data"]

# Healthy while the bot is connected to Discord and its worker runs: both keep the heartbeat fresh.
HEALTHCHECK --interval=60s --timeout=10s --start-period=90s --retries=3 \
    CMD ["python", "-m", "bot.health", "/app/data/heartbeat", "120"]

# Secrets come from the environment at run time (compose.yaml passes .env); none are baked in.
CMD ["python", "-m", "bot"]
