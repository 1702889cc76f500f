"""Before a command opens anything: can the bot write where the settings say, and listen where they say?

Each check really tries (a file created and removed, a file opened for writing, a socket bound), so permission
bits, read-only mounts and root-owned leftovers of a `sudo` run all show up, and each problem is one
`SetupError` line. `check` prints them; the other commands stop on the first with exit status 2.
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

from bot.config.settings import Settings
from bot.core.host import SetupError, cannot_listen, cannot_look_into, cannot_write
from bot.store.instance_lock import lock_path


class Unreachable(Exception):
    """A folder on the way to a path cannot be looked into: the path's own state cannot even be known."""

    def __init__(self, folder: Path, error: OSError) -> None:
        super().__init__(f"cannot look into {folder}: {error}")
        self.folder = folder
        self.error = error


def nearest_existing(path: Path) -> Path:
    """`path`, or its closest ancestor that exists: where a missing folder would be created.

    Raises Unreachable naming the folder that cannot be looked into when `stat` fails on the way up for another
    reason than absence (Python 3.11 raises PermissionError where a parent of mode 0700 belongs to another user).
    """
    error: OSError | None = None
    while path.parent != path:
        try:
            if path.exists():
                break
        except OSError as exc:
            error = exc  # the folder that refuses it is further up: the first one whose own stat works
        path = path.parent
    if error is not None:
        raise Unreachable(path, error)
    return path


def reach_problem(setting: str, path: Path) -> SetupError | None:
    """A folder on the way to `path` that this user may not look into, or None."""
    try:
        nearest_existing(path)
    except Unreachable as exc:
        return cannot_look_into(setting, exc.folder, exc.error)
    return None


def folder_problem(setting: str, folder: Path) -> SetupError | None:
    """Why the bot could not create files in `folder` (made if missing), or None."""
    try:
        existing = nearest_existing(folder)
    except Unreachable as exc:
        return cannot_look_into(setting, exc.folder, exc.error)
    if not existing.is_dir():
        return cannot_write(setting, existing, NotADirectoryError(20, "Not a directory"))
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return cannot_write(setting, existing, exc)
    return None


def file_problem(setting: str, path: Path) -> SetupError | None:
    """Why the bot could not write the existing file `path`, or None (also when there is no such file).

    Opened for writing and closed, nothing written: harmless beside a running bot.
    """
    try:
        if not path.exists():
            return None
        if path.is_dir():
            return cannot_write(setting, path, IsADirectoryError(21, "Is a directory"), folder=False)
        with path.open("r+b"):
            pass
    except OSError as exc:
        return cannot_write(setting, path, exc, folder=False)
    return None


def database_problem(settings: Settings) -> SetupError | None:
    """The SQLite file, the files SQLite keeps beside it, and the process lock (None for PostgreSQL)."""
    if settings.database_url is not None:
        return None
    path = settings.database_path
    setting = settings.database_setting
    problem = folder_problem(setting, path.parent)
    for beside in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"), lock_path(path)):
        problem = problem or file_problem(setting, beside)
    return problem


def videos_problem(settings: Settings) -> SetupError | None:
    return folder_problem("VIDEO_STORAGE_DIR", settings.video_storage_dir)


def heartbeat_problem(settings: Settings) -> SetupError | None:
    path = settings.heartbeat_path
    if path is None:
        return None
    return folder_problem("HEARTBEAT_PATH", path.parent) or file_problem("HEARTBEAT_PATH", path)


def port_problem(settings: Settings) -> SetupError | None:
    """Can /metrics listen where METRICS_HOST and METRICS_PORT say? Bound and let go at once."""
    if settings.metrics_port is None:
        return None
    host, port = settings.metrics_host, settings.metrics_port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return SetupError("METRICS_HOST", f"{host} is not an address of this machine",
                          "set METRICS_HOST to one of its addresses, such as 127.0.0.1")
    family, kind, proto, _name, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as sock:
            # As the server binds: a port in TIME_WAIT after the last run is free, one in use is not.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        return cannot_listen("METRICS_PORT", "METRICS_HOST", host, port, exc)
    return None


def run_problems(settings: Settings) -> list[SetupError]:
    """Everything `run` needs of the host, in the order `check` lists it."""
    found = [database_problem(settings), videos_problem(settings), heartbeat_problem(settings),
             port_problem(settings)]
    return [problem for problem in found if problem is not None]


def require(*problems: SetupError | None) -> None:
    """Raise the first problem: a command that cannot work stops before it opens anything."""
    for problem in problems:
        if problem is not None:
            raise problem
