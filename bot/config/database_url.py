"""DATABASE_URL: `sqlite:///PATH` (SQLite, the embedded default) or `postgresql://USER:PASSWORD@HOST:PORT/NAME`.

Only the redacted form of an address (its password replaced by `***`) may reach a log line or a message.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

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


#: Query parameters of a libpq address that hold a secret (libpq also takes the password there).
_SECRET_PARAMETERS = ("password", "sslpassword")


def password_of(url: str) -> str | None:
    """The password in the address, in its user part or in its query (`?password=…`)."""
    try:
        parts = urlsplit(url)
        if parts.password:
            return parts.password
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name in _SECRET_PARAMETERS and value:
                return value
    except ValueError:
        return None
    return None


def redacted(url: str) -> str:
    """The address without its password (in the user part or in the query), for log lines and messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return "(an address that cannot be read)"
    secret_in_query = any(name in _SECRET_PARAMETERS for name, _ in query)
    if parts.password is None and not secret_in_query:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{parts.username or ''}:***@{host}" + (f":{port}" if port else "")
    shown_query = "&".join(
        f"{name}=***" if name in _SECRET_PARAMETERS else f"{name}={value}" for name, value in query
    ) if secret_in_query else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, shown_query, parts.fragment))
