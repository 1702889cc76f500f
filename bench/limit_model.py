"""Poll orders in the limited run, compared on a model of its rules with no bot and no latency.

`ours-1000-limited` sends 1,000 creates at once under a pacing of 20 requests a second, and the job durations
are uniform over 60-180 s. Its rules: creates are not delayed to flatter lag (they go first), a finished job's
download goes before any poll, and two polls of one job are at least the interval apart. Here every slot of the
pacing is used, every answer is instant, and the first poll of a job comes at its shortest duration; what is
left to choose is the order of the polls. Lag is from a job's end to the poll that finds it done, so the
benchmark's lag (which adds the download and the post) cannot be lower than the model's for the same order.

    .venv/bin/python -m bench.limit_model

The order the worker uses (the longest-waiting poll first) is `due`; `chance` ranks by how likely each job is
done by now, which moves the median down and the 99th percentile up.
"""

from __future__ import annotations

import argparse
import heapq
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: A poll's rank (lower goes first): from the job's creation, the moment it became due, its duration's range
#: start and the last moment it was seen running (None before its first poll).
Order = Callable[[float, float, float, float | None], float]


def due_order(created: float, due: float, shortest: float, seen_running: float | None) -> float:
    return due


def chance_order(created: float, due: float, shortest: float, seen_running: float | None, *,
                 longest: float = 180.0) -> float:
    """By the chance that a job seen running at `seen_running` is done at `due` (uniform durations)."""
    seen = max(shortest, (seen_running if seen_running is not None else created + shortest) - created)
    age = due - created
    return -max(0.0, min(age, longest) - seen) / max(longest - seen, 1e-9)


@dataclass(frozen=True)
class Outcome:
    lag_p50: float
    lag_p99: float
    lag_max: float
    polls_per_job: float
    span: float


def run(order: Order, *, jobs: int = 1000, rate: float = 20.0, interval: float = 20.0, shortest: float = 60.0,
        longest: float = 180.0, seed: int = 0) -> Outcome:
    rng = random.Random(seed)
    durations = [rng.uniform(shortest, longest) for _ in range(jobs)]
    created: list[float] = []
    seen_running: dict[int, float] = {}
    due: list[tuple[float, int]] = []  # (due, job)
    ready: list[tuple[float, int]] = []  # (rank, job)
    downloads: deque[int] = deque()
    lags: list[float] = []
    polls = 0
    now = 0.0
    while len(lags) < jobs or downloads:
        while due and due[0][0] <= now:
            at, job = heapq.heappop(due)
            heapq.heappush(ready, (order(created[job], at, shortest, seen_running.get(job)), job))
        if len(created) < jobs:
            heapq.heappush(due, (now + shortest, len(created)))
            created.append(now)
        elif downloads:
            downloads.popleft()
        elif ready:
            _, job = heapq.heappop(ready)
            polls += 1
            ends = created[job] + durations[job]
            if ends <= now:
                lags.append(now - ends)
                downloads.append(job)
            else:
                seen_running[job] = now
                heapq.heappush(due, (now + interval, job))
        now += 1.0 / rate
    lags.sort()

    def quantile(q: float) -> float:
        return lags[min(len(lags) - 1, int(q * len(lags)))]

    return Outcome(quantile(0.5), quantile(0.99), lags[-1], polls / jobs, now)


ORDERS: dict[str, Order] = {"due": due_order, "chance": chance_order}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.limit_model", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="duration draws to run (default 5)")
    args = parser.parse_args(argv)
    print("| order | seed | lag p50 s | lag p99 s | lag max s | polls/job | span s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, order in ORDERS.items():
        for seed in range(args.seeds):
            out = run(order, seed=seed)
            print(f"| {name} | {seed} | {out.lag_p50:.1f} | {out.lag_p99:.1f} | {out.lag_max:.1f} | "
                  f"{out.polls_per_job:.2f} | {out.span:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
