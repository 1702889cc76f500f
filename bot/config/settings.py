"""Settings read from the environment (after loading `.env`; real environment variables win)."""

from __future__ import annotations

import errno
import io
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dotenv import load_dotenv

from bot.config.database_url import is_postgres_url, password_of, redacted, sqlite_path_of
from bot.config.shards import ShardPlan, shard_problems
from bot.core.addresses import is_local_host

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: How long a lease (bot/store/leases.py) lasts without renewal unless LEASE_SECONDS says otherwise: well above
#: the HTTP timeout (30 s), so a request in flight cannot outlive its process's lease while the process lives.
DEFAULT_LEASE_SECONDS = 60.0
#: The service asks for polls every 15 to 30 s; lower values exist only for tests and dry runs.
RECOMMENDED_MIN_POLL_SECONDS = 15.0

_LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
_LOG_FORMATS = ("text", "json")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class EnvFile:
    """Where `.env` was looked for, and whether one was there: named at start and in every settings error."""

    path: Path
    found: bool

    def describe(self) -> str:
        return str(self.path) if self.found else f"none found at {self.path}"

    def explain(self) -> str:
        """Where the settings came from, and what to do if they are not there."""
        if self.found:
            return f"settings come from the environment and from {self.path} (the environment wins)"
        return (f"no .env file at {self.path}: settings come from the environment and from .env in the folder the "
                f"bot starts in. Copy .env.example to {self.path} and fill it in, or start the bot from the folder "
                "that holds your .env (under systemd: WorkingDirectory=)")


class SettingsError(Exception):
    """Every problem found in the settings, listed at once (and, once known, where `.env` was looked for)."""

    def __init__(self, problems: list[str], env_file: EnvFile | None = None) -> None:
        self.problems = problems
        self.env_file = env_file
        text = "invalid settings:\n" + "\n".join(f"  - {p}" for p in problems)
        if env_file is not None:
            text += "\n" + env_file.explain()
        super().__init__(text)


class EnvFileUnreadable(SettingsError):
    """`.env` is there but cannot be read: one line naming the file and the fix, instead of a traceback."""

    def __init__(self, env_file: EnvFile, problem: str, fix: str) -> None:
        super().__init__([problem], env_file)
        self.args = (f"cannot read {env_file.path}{problem}; {fix}",)


def _unreadable(env_file: EnvFile, error: OSError | UnicodeDecodeError, data: bytes = b"") -> EnvFileUnreadable:
    path = env_file.path
    if isinstance(error, UnicodeDecodeError):
        line = data[: error.start].count(b"\n") + 1
        return EnvFileUnreadable(env_file, f": line {line} is not UTF-8 text", "save the file as UTF-8")
    if error.errno in (errno.EACCES, errno.EPERM):
        uid = os.getuid() if hasattr(os, "getuid") else None
        if uid is None or uid == 0:
            return EnvFileUnreadable(
                env_file, f" (permission denied{', even for root' if uid == 0 else ''})",
                "give the bot's user read access to it, or start the bot from a folder whose .env it can read")
        # It holds the token and the key: readable by the bot's user alone.
        return EnvFileUnreadable(env_file, f" (permission denied for user {uid})",
                                 f"give user {uid} read access to it, keeping it private (sudo chown {uid} {path} "
                                 f"&& sudo chmod 600 {path})")
    return EnvFileUnreadable(env_file, f" ({error.strerror or type(error).__name__})",
                             "replace it with a readable copy, or start the bot from another folder")


@dataclass(frozen=True)
class Settings:
    discord_token: str = field(repr=False)
    video_api_base_url: str
    video_api_key: str = field(repr=False)
    database_path: Path = Path("data/bot.sqlite3")
    # DATABASE_URL=postgresql://…: the shared database of one or more processes (SQLite at database_path when
    # None). It may hold a password: never in a repr; `database_shown` is the form for logs and messages.
    database_url: str | None = field(default=None, repr=False)
    video_storage_dir: Path = Path("data/videos")
    poll_interval_seconds: float = 20.0
    http_timeout_seconds: float = 30.0
    download_timeout_seconds: float = 600.0
    discord_guild_id: int | None = None
    log_level: str = "INFO"
    log_format: str = "text"
    keep_delivered_videos: bool = False
    max_concurrent_polls: int = 8
    max_requests_per_second: float = 20.0
    heartbeat_path: Path | None = None
    video_cooldown_seconds: float = 60.0
    max_active_jobs_per_user: int = 2
    guild_daily_budget_yen: int | None = None
    budget_timezone: str = "Asia/Tokyo"
    allowed_channel_ids: frozenset[int] = frozenset()
    required_role_id: int | None = None
    # These three, like the cooldown, jobs in flight, daily cap, time zone, channels and role above, are only
    # the defaults of the per-server settings (bot/community/server_rules.py); admins override them with /settings.
    guild_monthly_budget_yen: int | None = None
    member_daily_budget_yen: int | None = None
    member_monthly_budget_yen: int | None = None
    # The host's control above the servers: which servers may use the bot (empty: all), and whether to leave others.
    allowed_guild_ids: frozenset[int] = frozenset()
    leave_unlisted_guilds: bool = False
    #: The host's explicit acceptance that, with a public application and no ALLOWED_GUILD_IDS, anyone who adds the
    #: bot to a server of their own spends the key (bot/community/trust.py `public_bot_refusal`).
    allow_public_bot_spending: bool = False
    prompt_retention_days: int = 90
    # The Prometheus endpoint (/metrics) is off unless a port is set; loopback only unless told otherwise.
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    # The model catalogue (TOML, see bot/service/catalogue.py); None: the service spec's one model.
    models_file: Path | None = None
    # How long a button that spends money (a re-roll's Confirm, Generate) waits for its click.
    offer_seconds: float = 60.0
    # How long a process's hold on a job lasts without renewal (bot/store/leases.py): a survivor takes a dead
    # process's jobs after this.
    lease_seconds: float = DEFAULT_LEASE_SECONDS

    @property
    def database_shown(self) -> str:
        """Where the database is, its password replaced by `***`."""
        return redacted(self.database_url) if self.database_url else str(self.database_path)

    @property
    def database_secrets(self) -> tuple[str, ...]:
        """What log lines must never show of the database's address."""
        password = password_of(self.database_url) if self.database_url else None
        return (password,) if password else ()
    # Discord sharding (bot/config/shards.py): None and None is automatic, every shard in this one process.
    shard_count: int | None = None
    shard_ids: tuple[int, ...] | None = None
    # The setting the SQLite file came from (DATABASE_URL=sqlite:///… wins over DATABASE_PATH), for messages.
    database_setting: str = "DATABASE_PATH"
    # The `.env` looked for (None: read from a mapping alone, as tests do).
    env_file: EnvFile | None = None

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.budget_timezone)

    @property
    def shards(self) -> ShardPlan:
        return ShardPlan(self.shard_count, self.shard_ids)


class _Reader:
    """Collects problems instead of stopping at the first one."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.problems: list[str] = []
        self._unquoted: set[str] = set()

    def raw(self, name: str) -> str | None:
        value = self.env.get(name)
        if value is None:
            return None
        value = value.strip().strip(_INVISIBLE).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            # `docker run --env-file` keeps a line's quotes in the value: a quoted key passes, then gets HTTP 401.
            value = value[1:-1].strip()
            if name not in self._unquoted:  # some settings are read twice: one warning each
                self._unquoted.add(name)
                log.warning("%s is wrapped in quotes, which `docker run --env-file` keeps as part of the value: "
                            "using what is inside; remove the quotes to silence this warning", name)
        return value or None

    def required(self, name: str) -> str:
        value = self.raw(name)
        if value is None:
            self.problems.append(f"{name} is required but not set")
            return ""
        return value

    def parsed(self, name: str, default: _T, parse: Callable[[str], _T], expected: str) -> _T:
        value = self.raw(name)
        if value is None:
            return default
        try:
            return parse(value)
        except ValueError:
            # Never echo the value: a misplaced secret must not reach the terminal.
            self.problems.append(f"{name} must be {expected}")
            return default


#: Whitespace and invisible characters a copy from a web page or a chat brings along: stripped from the ends
#: of every value (str.strip() knows the first, not the zero-width ones or a byte-order mark).
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"
#: What a pasted secret sometimes starts with: the header's scheme, which the bot adds itself.
_SECRET_PREFIXES = {"VIDEO_API_KEY": "Bearer ", "DISCORD_TOKEN": "Bot "}


def _secret(r: _Reader, name: str) -> str:
    """A key or token as pasted: a scheme prefix dropped with a warning; refused (without ever showing the value)
    if it holds what no key or token can: full-width or other non-ASCII characters, spaces, control characters."""
    value = r.required(name)
    prefix = _SECRET_PREFIXES[name]
    if value[: len(prefix)].lower() == prefix.lower():
        value = value[len(prefix):].strip(" \t")
        log.warning("%s starts with %r, which the bot adds itself: using the rest; remove %r from the setting to "
                    "silence this warning", name, prefix.strip(), prefix.strip())
    problem = _secret_problem(value)
    if problem is not None:
        r.problems.append(f"{name} {problem} (the value is not shown here)")
        return ""
    return value


def _secret_problem(value: str) -> str | None:
    for position, char in enumerate(value, start=1):
        if "\uff01" <= char <= "\uff5e" or char == "\u3000":
            return (f"holds full-width characters (the first is character {position}): type it again in half-width "
                    "(ASCII) characters, or copy it again from where it was issued")
        if char.isspace():
            return (f"holds a space or line break inside (at character {position}), which no key or token has: "
                    "copy it again in one piece")
        if not char.isascii() or not char.isprintable():
            return (f"holds a character that no key or token has (character {position}, perhaps an invisible "
                    "one): copy it again from where it was issued")
    return None


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise ValueError(text)
    return value


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(text)


def _log_level(text: str) -> str:
    upper = text.upper()
    if upper not in _LOG_LEVELS:
        raise ValueError(text)
    return upper


def _log_format(text: str) -> str:
    lowered = text.lower()
    if lowered not in _LOG_FORMATS:
        raise ValueError(text)
    return lowered


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise ValueError(text)
    return value


def _id_set(text: str) -> frozenset[int]:
    return frozenset(_positive_int(part.strip()) for part in text.split(",") if part.strip())


def _shard_list(text: str) -> tuple[int, ...]:
    ids = tuple(int(part.strip()) for part in text.split(",") if part.strip())
    if not ids or any(i < 0 for i in ids):
        raise ValueError(text)
    return ids


def _zone(text: str) -> str:
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(text) from exc
    return text


def read_settings(env: Mapping[str, str]) -> Settings:
    """Build settings from a mapping; raises SettingsError listing every problem."""
    r = _Reader(env)
    token = _secret(r, "DISCORD_TOKEN")
    base_url = r.required("VIDEO_API_BASE_URL")
    if base_url:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            r.problems.append("VIDEO_API_BASE_URL must be an http(s) address such as https://api.example.com")
        elif parts.username or parts.password or parts.query:
            r.problems.append("VIDEO_API_BASE_URL must not carry credentials or a query: the key goes in VIDEO_API_KEY")
        elif parts.scheme == "http" and not is_local_host(parts.hostname or ""):
            # The key goes in every request's header: over plain http to another network, anyone on the way reads it.
            r.problems.append(
                f"VIDEO_API_BASE_URL is plain http:// to a remote host, which would send the API key unencrypted: use "
                f"https://{parts.netloc}{parts.path} (only a local or private address, such as http://127.0.0.1:8080 "
                "for the simulator, may use http://)"
            )
    api_key = _secret(r, "VIDEO_API_KEY")
    database_path = Path(r.raw("DATABASE_PATH") or "data/bot.sqlite3")
    database_url = r.raw("DATABASE_URL")
    database_setting = "DATABASE_PATH"
    if database_url is not None:
        sqlite_path = sqlite_path_of(database_url)
        if sqlite_path is not None:
            database_path, database_url = sqlite_path, None  # DATABASE_URL wins over DATABASE_PATH
            database_setting = "DATABASE_URL"
        elif not is_postgres_url(database_url):
            # Never echo it: it may hold a password.
            r.problems.append("DATABASE_URL must be sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE")
            database_url = None
    settings = Settings(
        discord_token=token,
        video_api_base_url=base_url.rstrip("/"),
        video_api_key=api_key,
        database_path=database_path,
        database_url=database_url,
        video_storage_dir=Path(r.raw("VIDEO_STORAGE_DIR") or "data/videos"),
        poll_interval_seconds=r.parsed("POLL_INTERVAL_SECONDS", 20.0, _positive_float, "a number of seconds above 0"),
        http_timeout_seconds=r.parsed("HTTP_TIMEOUT_SECONDS", 30.0, _positive_float, "a number of seconds above 0"),
        download_timeout_seconds=r.parsed(
            "DOWNLOAD_TIMEOUT_SECONDS", 600.0, _positive_float, "a number of seconds above 0"
        ),
        discord_guild_id=r.parsed("DISCORD_GUILD_ID", None, _positive_int, "a server (guild) id: digits only"),
        log_level=r.parsed("LOG_LEVEL", "INFO", _log_level, "one of " + ", ".join(_LOG_LEVELS)),
        log_format=r.parsed("LOG_FORMAT", "text", _log_format, "text or json"),
        keep_delivered_videos=r.parsed("KEEP_DELIVERED_VIDEOS", False, _bool, "true or false"),
        max_concurrent_polls=r.parsed("MAX_CONCURRENT_POLLS", 8, _positive_int, "a whole number above 0"),
        max_requests_per_second=r.parsed(
            "MAX_REQUESTS_PER_SECOND", 20.0, _positive_float, "a number of requests per second above 0"
        ),
        heartbeat_path=Path(hb) if (hb := r.raw("HEARTBEAT_PATH")) else None,
        video_cooldown_seconds=r.parsed(
            "VIDEO_COOLDOWN_SECONDS", 60.0, _non_negative_float, "a number of seconds, 0 or more"
        ),
        max_active_jobs_per_user=r.parsed("MAX_ACTIVE_JOBS_PER_USER", 2, _positive_int, "a whole number above 0"),
        guild_daily_budget_yen=r.parsed("GUILD_DAILY_BUDGET_YEN", None, _positive_int, "a whole number of yen"),
        budget_timezone=r.parsed("BUDGET_TIMEZONE", "Asia/Tokyo", _zone, "an IANA time zone such as Asia/Tokyo"),
        allowed_channel_ids=r.parsed(
            "ALLOWED_CHANNEL_IDS", frozenset(), _id_set, "a comma-separated list of channel ids"
        ),
        required_role_id=r.parsed("REQUIRED_ROLE_ID", None, _positive_int, "a role id: digits only"),
        guild_monthly_budget_yen=r.parsed("GUILD_MONTHLY_BUDGET_YEN", None, _positive_int, "a whole number of yen"),
        member_daily_budget_yen=r.parsed("MEMBER_DAILY_BUDGET_YEN", None, _positive_int, "a whole number of yen"),
        member_monthly_budget_yen=r.parsed(
            "MEMBER_MONTHLY_BUDGET_YEN", None, _positive_int, "a whole number of yen"
        ),
        allowed_guild_ids=r.parsed("ALLOWED_GUILD_IDS", frozenset(), _id_set, "a comma-separated list of server ids"),
        leave_unlisted_guilds=r.parsed("LEAVE_UNLISTED_GUILDS", False, _bool, "true or false"),
        allow_public_bot_spending=r.parsed("ALLOW_PUBLIC_BOT_SPENDING", False, _bool, "true or false"),
        prompt_retention_days=r.parsed("PROMPT_RETENTION_DAYS", 90, _positive_int, "a whole number of days above 0"),
        metrics_port=r.parsed("METRICS_PORT", None, _port, "a TCP port from 1 to 65535"),
        metrics_host=r.raw("METRICS_HOST") or "127.0.0.1",
        models_file=Path(models) if (models := r.raw("MODELS_FILE")) else None,
        offer_seconds=r.parsed("OFFER_SECONDS", 60.0, _positive_float, "a number of seconds above 0"),
        lease_seconds=r.parsed("LEASE_SECONDS", DEFAULT_LEASE_SECONDS, _positive_float, "a number of seconds above 0"),
        shard_count=r.parsed("SHARD_COUNT", None, _positive_int, "a whole number of shards, 1 or more"),
        shard_ids=r.parsed("SHARD_IDS", None, _shard_list,
                           "a comma-separated list of shard ids (whole numbers from 0), such as 0,1"),
        database_setting=database_setting,
    )
    if settings.shard_count is not None or r.raw("SHARD_COUNT") is None:  # a bad count is reported already
        r.problems.extend(shard_problems(settings.shard_count, settings.shard_ids))
    if r.problems:
        raise SettingsError(r.problems)
    if settings.poll_interval_seconds < RECOMMENDED_MIN_POLL_SECONDS:
        log.warning(
            "POLL_INTERVAL_SECONDS=%s is below the service's 15 s guidance; use it only for tests and dry runs",
            settings.poll_interval_seconds,
        )
    return settings


def load_settings(dotenv_path: Path | None = None) -> Settings:
    """Load `.env` from the working directory (real environment wins), then read and validate.

    The settings (and any SettingsError) name the `.env` looked for, and whether it was there.
    """
    path = (dotenv_path or Path.cwd() / ".env").absolute()
    data = b""
    try:
        env_file = EnvFile(path, path.is_file())
        if env_file.found:
            data = path.read_bytes()
            load_dotenv(stream=io.StringIO(data.decode("utf-8")), override=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(EnvFile(path, True), exc, data) from None
    try:
        settings = read_settings(os.environ)
    except SettingsError as exc:
        raise SettingsError(exc.problems, env_file) from None
    return replace(settings, env_file=env_file)
