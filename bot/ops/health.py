"""The heartbeat file: touched by the running bot, checked by Docker's HEALTHCHECK.

`python -m bot.ops.health PATH [MAX_AGE_SECONDS]` exits 0 while the file is fresh, 1 otherwise.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

DEFAULT_MAX_AGE = 120.0


def write_heartbeat(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{int(time.time())}\n")


def heartbeat_age(path: Path, now: float | None = None) -> float | None:
    """Seconds since the heartbeat was last written, or None if it never was."""
    try:
        written = path.stat().st_mtime
    except FileNotFoundError:
        return None
    return (time.time() if now is None else now) - written


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 2:
        print("usage: python -m bot.ops.health PATH [MAX_AGE_SECONDS]", file=sys.stderr)
        return 2
    max_age = float(argv[1]) if len(argv) == 2 else DEFAULT_MAX_AGE
    age = heartbeat_age(Path(argv[0]))
    if age is None:
        print("unhealthy: no heartbeat yet", file=sys.stderr)
        return 1
    if age > max_age:
        print(f"unhealthy: last heartbeat {age:.0f} s ago", file=sys.stderr)
        return 1
    print(f"healthy: last heartbeat {age:.0f} s ago")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
