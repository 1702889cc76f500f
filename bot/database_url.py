"""DATABASE_URL: `sqlite:///PATH` (SQLite, the embedded default) or `postgresql://USER:PASSWORD@HOST:PORT/NAME`.

Only the redacted form of an address (its password replaced by `***`) may reach a log line or a message.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql", "postgres")
_SQLITE_PREFIX = "sqlite:///"


def sqlite_path_of(url: str) -> Path | None:
    """The file of a `sqlite:///PATH` address (relative; `sqlite:////abs/path` for an absolute one), else None."""
    if not url.startswith(_SQLITE_PREFIX) or len(url) == len(_SQLITE_PREFIX):
        return None
    return Path(url[len(_SQLITE_PREFIX):])


def is_postgres_url(url: str) -> bool:
    """A `postgresql://` address naming a server (a host, or a socket in its query) and a database."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return parts.scheme in POSTGRES_SCHEMES and bool(parts.netloc or parts.query) and bool(parts.path.strip("/"))


def password_of(url: str) -> str | None:
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def redacted(url: str) -> str:
    """The address without its password, for log lines and messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(an address that cannot be read)"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username or ''}:***@{host}" + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
