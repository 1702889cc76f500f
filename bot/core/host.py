"""A mistake in the host's set-up, told in one line: the setting, what is wrong, and the fix.

The host's own mistakes (a folder the bot cannot write, a database file left to another user, a port in use)
are not the bot's failures: they get no traceback, only the line, and the command exits with status 2. The
same words serve `python -m bot check`, which finds them first.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from bot.core.errors import BotError, Rejected, ServiceUnreachable

#: What a log line about a failure the host can look into ends with: the command that says what is wrong.
CHECK_HINT = "`python -m bot check` tells what is wrong"


def check_hint(error: BaseException) -> str:
    """What a log line about a service that cannot be reached, or that refuses the key, ends with; else ""."""
    if isinstance(error, ServiceUnreachable) or (isinstance(error, Rejected) and error.status in (401, 403)):
        return f"; {CHECK_HINT}"
    return ""


class SetupError(BotError):
    """A mistake in the host's set-up: its one line names the setting, what is wrong and the fix."""

    def __init__(self, setting: str, problem: str, fix: str) -> None:
        self.setting = setting
        self.problem = problem
        self.fix = fix
        super().__init__(f"{setting}: {problem}; {fix}")


def _user() -> str:
    return f"user {os.getuid()}" if hasattr(os, "getuid") else "this user"


def cannot_write(setting: str, path: Path, error: OSError, *, folder: bool = True) -> SetupError:
    """The bot cannot create files in the folder `path` (or, with `folder=False`, write the file `path`)."""
    what = "in the folder" if folder else "the file"
    path = path.absolute()
    if error.errno == errno.EROFS:
        return SetupError(setting, f"{path} is on a read-only file system",
                          f"mount it read-write, or set {setting} to a writable place")
    if error.errno in (errno.EACCES, errno.EPERM):
        uid = os.getuid() if hasattr(os, "getuid") else None
        if uid == 0:  # root is refused only where nobody may write (/sys, /proc): no owner to change
            return SetupError(setting, f"cannot write {what} {path} (permission denied, even for root)",
                              f"set {setting} to another place")
        owner = f" (sudo chown -R {uid} {path})" if uid is not None else ""
        return SetupError(setting, f"cannot write {what} {path} (permission denied for {_user()})",
                          f"give that user write access{owner}, or set {setting} to a place it can write")
    if error.errno == errno.ENOTDIR or (folder and path.exists() and not path.is_dir()):
        return SetupError(setting, f"{path} is a file, not a folder", f"move that file away, or set {setting} "
                                                                      "to another path")
    if error.errno == errno.EISDIR:
        return SetupError(setting, f"{path} is a folder, not a file", f"set {setting} to a file's path")
    reason = error.strerror or type(error).__name__
    return SetupError(setting, f"cannot write {what} {path} ({reason})",
                      f"set {setting} to a place the bot can write")


def cannot_look_into(setting: str, folder: Path, error: OSError) -> SetupError:
    """A folder on the way to the path that this user may not open (another user's home, mode 0700): nothing in
    it can be reached. Only its search (x) permission is wanted: the fix never hands the folder itself over."""
    if error.errno not in (errno.EACCES, errno.EPERM):
        return cannot_write(setting, folder, error)
    folder = folder.absolute()
    uid = os.getuid() if hasattr(os, "getuid") else None
    if uid == 0:
        return SetupError(setting, f"cannot look into the folder {folder} (permission denied, even for root)",
                          f"set {setting} to another place")
    return SetupError(setting, f"cannot look into the folder {folder} (permission denied for {_user()})",
                      f"let that user open it (its x permission; what is inside can stay private), or set {setting} "
                      "to another place")


def not_a_database(setting: str, path: Path, *, damaged: bool, reason: str) -> SetupError:
    """The file at the database's path is not a SQLite database (a file named by mistake), or a damaged one."""
    path = path.absolute()
    if damaged:
        return SetupError(setting, f"{path} is damaged ({reason})",
                          f"restore a backup, or point {setting} at the bot's database")
    return SetupError(setting, f"{path} is not a SQLite database",
                      f"point {setting} at the bot's database, or restore a backup")


def cannot_listen(setting: str, host_setting: str, host: str, port: int, error: OSError) -> SetupError:
    """The bot cannot serve on `host`:`port`, which the settings `setting` and `host_setting` name."""
    where = f"{host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return SetupError(setting, f"port {port} on {host} is already in use",
                          f"stop the program that uses it, or set {setting} to a free port")
    if error.errno in (errno.EACCES, errno.EPERM):
        return SetupError(setting, f"not allowed to listen on {where} (ports below 1024 need root)",
                          f"set {setting} to a port from 1024 up")
    if error.errno == errno.EADDRNOTAVAIL:
        return SetupError(host_setting, f"{host} is not an address of this machine",
                          f"set {host_setting} to one of its addresses, such as 127.0.0.1")
    reason = error.strerror or type(error).__name__
    return SetupError(setting, f"cannot listen on {where} ({reason})", f"set {setting} to another port")
