"""The Docker files, read the way Docker reads them (no container engine is available to build them here).

The environment a container sees is resolved in Docker's order: the image's `ENV`, then compose's `env_file`
(`.env`, which a host copies from `.env.example`), then compose's `environment:`; a later one wins.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from bot.cli import demo as demo_command

REPO_ROOT = Path(__file__).resolve().parents[1]
IMAGE_OWNED = ("DATABASE_PATH", "VIDEO_STORAGE_DIR", "HEARTBEAT_PATH", "DEMO_OUTPUT_DIR")
#: The image's ENV for Python, pip and the shell, not for the bot.
TOOL_ENV = ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK", "PATH")


# --- readers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions in order: comments dropped, backslash continuations joined."""
    instructions: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction is dropped by Docker too
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def image_env(instructions: list[Instruction]) -> dict[str, str]:
    """Every `ENV` of the final stage: `ENV K=V K2=V2` and the legacy `ENV K V`."""
    env: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "FROM":
            env = {}
        elif ins.keyword == "ENV":
            words = shlex.split(ins.args)
            if "=" not in words[0]:
                env[words[0]] = " ".join(words[1:])
            else:
                for word in words:
                    key, _, value = word.partition("=")
                    env[key] = value
    return env


def parse_env_file(text: str) -> dict[str, str]:
    """A compose `env_file`: KEY=VALUE lines; `#` starts a comment line; `KEY=` sets the empty string."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ")
        key, sep, value = line.partition("=")
        if not sep:
            continue  # a bare KEY is taken from the shell running compose: not set by the file
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = re.split(r"\s+#", value, maxsplit=1)[0]
        values[key.strip()] = value
    return values


def compose_environment(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        pairs = [item.split("=", 1) for item in environment if "=" in item]
        return {key: value for key, value in pairs}
    return {key: "" if value is None else str(value) for key, value in environment.items()}


def compose_env_files(service: dict[str, Any]) -> list[str]:
    env_file = service.get("env_file") or []
    entries = [env_file] if isinstance(env_file, str) else env_file
    return [entry if isinstance(entry, str) else entry["path"] for entry in entries]


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile((REPO_ROOT / "Dockerfile").read_text())


BOT_SERVICES = ("bot", "bot-shard-0", "bot-shard-1")


def compose_services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((REPO_ROOT / "compose.yaml").read_text())["services"]
    return services


@pytest.fixture(scope="module", params=BOT_SERVICES)
def service(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each bot process compose can run: every check of the image's paths holds for all of them."""
    bot: dict[str, Any] = compose_services()[request.param]
    return bot


@pytest.fixture(scope="module")
def dot_env() -> dict[str, str]:
    # A new host's .env is a copy of .env.example with the required values filled in.
    return parse_env_file((REPO_ROOT / ".env.example").read_text())


def one(instructions: list[Instruction], keyword: str) -> Instruction:
    found = [ins for ins in instructions if ins.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {len(found)}"
    return found[0]


def volume_targets(dockerfile: list[Instruction], service: dict[str, Any]) -> set[PurePosixPath]:
    declared = {PurePosixPath(path) for path in json.loads(one(dockerfile, "VOLUME").args)}
    mounted = {PurePosixPath(str(volume).split(":")[1]) for volume in service["volumes"]}
    assert declared <= mounted, "compose mounts a named volume on every VOLUME of the image"
    return declared


# --- the environment and the health check -------------------------------------------------------------------


def test_the_readers_resolve_in_dockers_order() -> None:
    # The readers themselves, on the failure a host hit: an empty line in .env beats the image's value.
    env = image_env(parse_dockerfile("FROM x\nENV A=/img \\\n    B=/img/b\nENV C /img/c\n"))
    env |= parse_env_file("# c\nA=\nB='q # r'\nC=v # comment\nD\n")
    assert env == {"A": "", "B": "q # r", "C": "v"}
    env |= compose_environment({"environment": ["A=/compose"]})
    assert env["A"] == "/compose"


def test_under_compose_the_image_owned_paths_are_absolute_and_inside_the_volume(
    dockerfile: list[Instruction], service: dict[str, Any], dot_env: dict[str, str]
) -> None:
    assert compose_env_files(service) == [".env"]
    image = image_env(dockerfile)
    effective = image | dot_env | compose_environment(service)
    volumes = volume_targets(dockerfile, service)
    for key in IMAGE_OWNED:
        path = PurePosixPath(effective[key])
        assert path.is_absolute(), f"{key}={effective[key]!r}"
        assert any(volume in path.parents for volume in volumes), f"{key}={path} is outside the volume"
        assert effective[key] == image[key], f"{key}: compose and the image disagree"


def test_every_setting_the_image_sets_is_set_alike_by_compose(
    dockerfile: list[Instruction], service: dict[str, Any]
) -> None:
    # The Dockerfile says compose sets the same values as its ENV: a setting added to one is added to the other.
    settings = {key: value for key, value in image_env(dockerfile).items() if key not in TOOL_ENV}
    assert set(settings) == set(IMAGE_OWNED)
    environment = compose_environment(service)
    assert {key: environment.get(key) for key in settings} == settings


def test_compose_pins_the_image_owned_paths_so_env_cannot_override_them(service: dict[str, Any]) -> None:
    # Whatever a host writes into .env, `environment:` wins over it.
    pinned = compose_environment(service)
    hostile = dict.fromkeys(IMAGE_OWNED, "")
    for key in IMAGE_OWNED:
        assert (hostile | pinned)[key] != "", f"compose.yaml does not set {key}"


def test_dot_env_example_leaves_the_image_owned_paths_alone(
    dockerfile: list[Instruction], dot_env: dict[str, str]
) -> None:
    # `docker run --env-file .env` has no compose `environment:`: the image's values must survive .env alone.
    assert not set(IMAGE_OWNED) & set(dot_env), "set only by the image (commented out in .env.example)"
    effective = image_env(dockerfile) | dot_env
    assert all(effective[key].startswith("/") for key in IMAGE_OWNED)


def test_the_healthcheck_reads_the_heartbeat_the_bot_writes(
    dockerfile: list[Instruction], service: dict[str, Any], dot_env: dict[str, str]
) -> None:
    heartbeat = (image_env(dockerfile) | dot_env | compose_environment(service))["HEARTBEAT_PATH"]
    _, _, command = one(dockerfile, "HEALTHCHECK").args.partition("CMD ")
    assert json.loads(command)[:4] == ["python", "-m", "bot.ops.health", heartbeat]
    # compose keeps the image's health check (it may not switch it off or point it elsewhere).
    if "healthcheck" in service:
        assert not service["healthcheck"].get("disable")
        assert heartbeat in " ".join(service["healthcheck"]["test"])


def test_the_demo_in_the_container_saves_its_video_inside_the_volume(
    dockerfile: list[Instruction], dot_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `docker compose run --rm bot python -m bot demo`: the bot service's environment and volume. The image's
    # user cannot write /app (the WORKDIR, where ./demo-output would be), only the volume it owns.
    service = compose_services()["bot"]
    effective = image_env(dockerfile) | dot_env | compose_environment(service)
    out = PurePosixPath(effective["DEMO_OUTPUT_DIR"])
    assert any(volume in out.parents for volume in volume_targets(dockerfile, service)), f"{out} is outside"
    owned = " ".join(ins.args for ins in dockerfile if ins.keyword == "RUN")
    assert re.search(rf"chown 10001:10001 {re.escape(str(out.parent))}\b", owned), "the volume is the user's"
    monkeypatch.setenv("DEMO_OUTPUT_DIR", str(out))
    assert str(demo_command.default_out_dir()) == str(out)  # what `demo` saves to without --out
    # And the documentation shows the command, and where the video lands.
    operations = (REPO_ROOT / "docs" / "operations.md").read_text()
    assert "docker compose run --rm bot python -m bot demo" in operations and str(out) in operations


# --- the image ----------------------------------------------------------------------------------------------


def test_the_container_runs_as_a_numeric_non_root_user(dockerfile: list[Instruction]) -> None:
    users = [ins.args for ins in dockerfile if ins.keyword == "USER"]
    assert users, "no USER: the bot would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, users[-1]
    assert not gid or (gid.isdigit() and int(gid) != 0), users[-1]
    # The uid exists in the image (created with exactly that number), so files it writes have an owner.
    runs = " ".join(ins.args for ins in dockerfile if ins.keyword == "RUN")
    assert re.search(rf"useradd\b[^&;]*--uid {uid}\b", runs)


def test_the_base_image_is_pinned_to_the_python_the_project_is_checked_against(dockerfile: list[Instruction]) -> None:
    image = one(dockerfile, "FROM").args.split()[0]
    match = re.fullmatch(r"python:(\d+\.\d+\.\d+)-slim-[a-z]+(@sha256:[0-9a-f]{64})?", image)
    assert match, f"{image}: not an exact version tag"
    version = Version(match.group(1))
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert version in SpecifierSet(pyproject["project"]["requires-python"])
    assert f"{version.major}.{version.minor}" == pyproject["tool"]["mypy"]["python_version"]


def test_dependencies_are_a_layer_of_their_own_installed_from_the_lock_before_the_source(
    dockerfile: list[Instruction],
) -> None:
    def index(predicate: Any) -> int:
        found = [i for i, ins in enumerate(dockerfile) if predicate(ins)]
        assert found, "missing instruction"
        return found[0]

    deps = index(lambda ins: ins.keyword == "RUN" and "--require-hashes -r requirements.lock" in ins.args)
    lock_copy = index(lambda ins: ins.keyword == "COPY" and ins.args.split() == ["requirements.lock", "./"])
    source_copies = [i for i, ins in enumerate(dockerfile)
                     if ins.keyword in ("COPY", "ADD") and ins.args.split()[0] != "requirements.lock"]
    project = index(lambda ins: ins.keyword == "RUN" and re.search(r"pip install --no-deps \.$", ins.args))
    assert source_copies, "the source is never copied"
    assert lock_copy < deps < min(source_copies), "a code change must not invalidate the dependency layer"
    assert max(source_copies) < project
    # One pip install per layer, and nothing else resolved from the index.
    assert dockerfile[deps].args.count("pip install") == 1 and dockerfile[project].args.count("pip install") == 1
    assert (REPO_ROOT / "requirements.lock").is_file()


# --- compose ------------------------------------------------------------------------------------------------


def test_a_configuration_error_is_not_restarted_forever(service: dict[str, Any]) -> None:
    match = re.fullmatch(r"on-failure:(\d+)", str(service["restart"]))
    assert match and 1 <= int(match.group(1)) <= 10, service["restart"]


def test_logs_are_rotated(service: dict[str, Any]) -> None:
    logging = service["logging"]
    assert logging["driver"] == "json-file"
    assert re.fullmatch(r"\d+[kmg]", logging["options"]["max-size"])
    assert int(logging["options"]["max-file"]) >= 1


# --- the build context --------------------------------------------------------------------------------------


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last matching pattern decides; a pattern matching a folder covers what is inside."""

    def regex(pattern: str) -> re.Pattern[str]:
        out = ""
        for token in re.split(r"(\*\*/|\*\*|\*|\?)", pattern.strip("/")):
            out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
        return re.compile(out)

    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        compiled = regex(pattern.removeprefix("!"))
        if any(compiled.fullmatch(prefix) for prefix in prefixes):
            excluded = not negated
    return excluded


def test_the_build_context_has_what_the_image_copies_and_no_local_state(dockerfile: list[Instruction]) -> None:
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for kept in [src for ins in dockerfile if ins.keyword == "COPY" for src in ins.args.split()[:-1]]:
        assert not dockerignore_excludes(patterns, kept), f"{kept} is copied but ignored"
    for left_out in [".env", ".env.local", ".venv/bin/python", "data/bot.sqlite3", "bot.sqlite3-wal",
                     ".pytest_cache/v/cache", ".mypy_cache/3.11/x.json", ".ruff_cache/x", "bot/__pycache__/a.pyc",
                     "tests/test_docker.py", "bench/results/latest.json", ".git/HEAD"]:
        assert dockerignore_excludes(patterns, left_out), f"{left_out} would be sent to the build"
    assert not dockerignore_excludes(patterns, ".env.example")


# --- the scale profile: two processes, one PostgreSQL database ------------------------------------------------


def test_compose_runs_only_the_bot_unless_the_scale_profile_is_asked_for() -> None:
    services = compose_services()
    assert set(services) == {*BOT_SERVICES, "postgres"}
    always = [name for name, service in services.items() if not service.get("profiles")]
    assert always == ["bot"]
    assert all(services[name]["profiles"] == ["scale"] for name in services if name != "bot")
    assert "DATABASE_URL" not in compose_environment(services["bot"]), "the default stays on SQLite"


def test_the_scaled_processes_split_the_shards_and_share_one_database() -> None:
    services = compose_services()
    scaled = [compose_environment(services[name]) for name in ("bot-shard-0", "bot-shard-1")]
    assert {env["SHARD_COUNT"] for env in scaled} == {"2"}
    shard_ids = [int(shard) for env in scaled for shard in env["SHARD_IDS"].split(",")]
    assert sorted(shard_ids) == [0, 1], "every shard once, in exactly one process"
    urls = {env["DATABASE_URL"] for env in scaled}
    assert len(urls) == 1 and next(iter(urls)).startswith("postgresql://bot:"), urls
    assert "@postgres:5432/bot" in next(iter(urls)), "the compose service, its user and its database"
    postgres = compose_environment(services["postgres"])
    assert postgres["POSTGRES_USER"] == "bot" and postgres["POSTGRES_DB"] == "bot"
    # No host shares a disk: each process keeps its videos in a volume of its own.
    volumes = [services[name]["volumes"][0].split(":")[0] for name in BOT_SERVICES]
    assert len(set(volumes)) == len(volumes), volumes
    for name in ("bot-shard-0", "bot-shard-1"):
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_the_postgres_password_comes_from_dot_env_not_from_the_file(dot_env: dict[str, str]) -> None:
    services = compose_services()
    assert compose_environment(services["postgres"])["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-}"
    assert "POSTGRES_PASSWORD" not in dot_env, "a host sets it (commented out in .env.example)"
    assert "POSTGRES_PASSWORD" in (REPO_ROOT / ".env.example").read_text()
