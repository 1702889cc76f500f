"""This process's resident memory, read from /proc (Linux), with getrusage as the fallback."""

from __future__ import annotations

import os
import re
import resource
import sys
import threading
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int | None:
    try:
        match = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def rss_kib() -> int:
    """Resident memory now."""
    now = _status_kib("VmRSS")
    return now if now is not None else peak_rss_kib()


def peak_rss_kib() -> int:
    """Peak resident memory since start, or since the last reset_peak()."""
    peak = _status_kib("VmHWM")
    if peak is not None:
        return peak
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss // 1024 if sys.platform == "darwin" else maxrss  # macOS reports bytes


def reset_peak() -> bool:
    """Start a new peak from the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def cpu_by_thread() -> dict[str, float]:
    """CPU seconds so far of each of this process's live threads, by kind (the event loop, aiosqlite's
    connection thread, the executor's file work, anything else), read from /proc (Linux; empty elsewhere)."""
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    split: dict[str, float] = {}
    for task in Path("/proc/self/task").glob("*"):
        try:
            fields = task.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        name = names.get(int(task.name), "")
        if name == "MainThread":
            kind = "event loop"
        elif "_connection_worker_thread" in name:
            kind = "sqlite"
        elif name.startswith("asyncio_"):
            kind = "executor"
        else:
            kind = "other"
        # utime and stime: fields 14 and 15 of stat, 12 and 13 after the command's closing parenthesis.
        split[kind] = split.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return split


def _stat_fields(pid: str) -> list[str]:
    """The fields of /proc/PID/stat after the command's closing parenthesis (the command may hold spaces)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_tree_cpu(pid: int) -> float:
    """CPU seconds so far of a process and all its children, live or ended (Linux: /proc; 0.0 elsewhere).

    For a server such as PostgreSQL's, which forks a process per connection: the ended ones it reaped count
    in its cutime and cstime, the live ones are read from their own stat. Differences of two readings are
    the server's CPU in between.
    """
    tick = os.sysconf("SC_CLK_TCK")
    try:
        own = _stat_fields(str(pid))
    except OSError:
        return 0.0
    # After the parenthesis: ppid is the 2nd field; utime, stime, cutime and cstime the 12th to 15th.
    total = sum(int(value) for value in own[11:15])
    live: dict[int, tuple[int, int]] = {}  # pid -> (parent, utime + stime)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = _stat_fields(entry.name)
            except (OSError, IndexError):
                continue  # ended meanwhile
            live[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree = {pid}
    grown = True
    while grown:  # children of children too
        children = {child for child, (parent, _) in live.items() if parent in tree} - tree
        total += sum(live[child][1] for child in children)
        tree |= children
        grown = bool(children)
    return total / tick
