"""`python -m bench.profile FILE [--thread NAME] [--top N]`: read a `python -m bench --profile` sample file.

py-spy's raw format is one line per distinct stack: `thread (tid): name;frame;frame;... count`. This
prints, per thread, the share of samples, then the frames with the most samples inclusive (the frame
anywhere on the stack, counted once per stack) and exclusive (the innermost frame), so a cost can be
followed from the bot's code down to the library that spends it. At py-spy's default 100 samples a
second (the suite asks for 200), samples / rate ≈ seconds of CPU.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: "name (path/to/file.py:123)" -> "name (path/to/file.py)": lines of one function count together.
_LINE = re.compile(r":\d+\)$")
#: Innermost frames of a thread that waits (py-spy's own idle detection misses them in containers):
#: the event loop in epoll, aiosqlite's thread and the thread pool's workers at their queues.
IDLE = (
    re.compile(r"^EpollSelector\.select \(selectors\.py"),
    re.compile(r"^_connection_worker_thread \(aiosqlite/core\.py:59\)"),
    re.compile(r"^_worker \(concurrent/futures/thread\.py:81\)"),
)


@dataclass
class Thread:
    samples: int = 0
    inclusive: Counter[str] = field(default_factory=Counter)
    exclusive: Counter[str] = field(default_factory=Counter)


def _thread_name(head: str) -> str:
    """`thread (812): MainThread` -> `MainThread`; a nameless `thread (812)` keeps its id."""
    name = head.partition(": ")[2]
    return name or head


def read(path: Path, *, idle: bool = False) -> dict[str, Thread]:
    """Samples per thread; waiting ones (IDLE) left out unless `idle`."""
    threads: dict[str, Thread] = {}
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        head, *frames = stack.split(";")
        if not idle and frames and any(pattern.match(frames[-1]) for pattern in IDLE):
            continue
        # Thread-pool threads differ only by number: aiosqlite's connection thread keeps its own name.
        name = re.sub(r"_\d+$", "_N", _thread_name(head))
        thread = threads.setdefault(name, Thread())
        thread.samples += count
        functions = [_LINE.sub(")", frame) for frame in frames]
        for function in set(functions):
            thread.inclusive[function] += count
        if functions:
            thread.exclusive[functions[-1]] += count
    return threads


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--thread", default="MainThread", help="thread to detail (default %(default)s)")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--grep", default=None, help="only frames containing this text")
    parser.add_argument("--idle", action="store_true", help="keep the samples of threads waiting for work")
    args = parser.parse_args(argv)
    threads = read(args.file, idle=args.idle)
    total = sum(thread.samples for thread in threads.values())
    for name, thread in sorted(threads.items(), key=lambda item: -item[1].samples):
        print(f"{thread.samples:7d} {100 * thread.samples / total:5.1f} %  {name}")
    detailed = threads.get(args.thread)
    if detailed is None:
        print(f"no thread {args.thread!r}")
        return 1
    for title, counter in (("inclusive", detailed.inclusive), ("exclusive", detailed.exclusive)):
        print(f"\n{args.thread}, {title} (share of the thread's samples):")
        shown = 0
        for function, count in counter.most_common():
            if args.grep and args.grep not in function:
                continue
            print(f"{count:7d} {100 * count / detailed.samples:5.1f} %  {function}")
            shown += 1
            if shown >= args.top:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
