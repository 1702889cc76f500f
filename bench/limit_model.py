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

`fluid_lag_p99` estimates the lowest lag p99 any order can reach under the same rules. A poll finds a job done
at most one gap after its end, so a lag of at most G takes each running job's polls at most G apart: in every
stretch of G seconds, one poll of each job whose window had opened and that was still running at the
stretch's start, on top of the creates and the downloads of that stretch, all within the rate. At each moment
that gives the shortest gap the rate allows; a job ending within a gap waits anywhere in it, evenly, so the
p99 follows from how many jobs end while the gaps are long. It is a fluid estimate (every job at the same gap
at each moment, which is what the fewest polls need), not a proof.
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

#: Jobs created together counted as one group in the fluid estimate (1,000 jobs: 200 groups).
_FLUID_GROUP = 5
#: Resolution of the fluid estimate, seconds: the moments it checks and the gaps it tries.
_FLUID_STEP = 0.5


@dataclass(frozen=True)
class FluidEstimate:
    lag_p99: float
    longest_gap: float


def fluid_lag_p99(*, jobs: int = 1000, rate: float = 20.0, interval: float = 20.0, shortest: float = 60.0,
                  longest: float = 180.0) -> FluidEstimate:
    """The lowest lag p99 any poll order reaches under the limited run's rules, as a fluid estimate (module doc)."""
    span = longest - shortest
    groups = [(start / rate, min(_FLUID_GROUP, jobs - start)) for start in range(0, jobs, _FLUID_GROUP)]

    def requests(start: float, gap: float) -> float:
        """Requests a stretch [start, start + gap) needs with every running job polled once in it."""
        end = start + gap
        needed = 0.0
        for created, count in groups:
            age = start - created
            if age >= shortest:
                needed += count * min(1.0, max(0.0, (longest - age) / span))  # running: one poll
            ending = min(end - created, longest) - max(age, shortest)
            if ending > 0:
                needed += count * ending / span  # ends in the stretch: its download
            if start <= created < end:
                needed += count  # its create
        return needed

    def fits(start: float, gap: float) -> bool:
        return requests(start, gap) <= rate * gap

    def shortest_gap(start: float) -> float:
        if fits(start, interval):
            return interval
        low, high = interval, 2 * interval
        while not fits(start, high):
            low, high = high, 2 * high
        while high - low > _FLUID_STEP:  # the budget grows with the gap faster than the need does
            middle = (low + high) / 2
            low, high = (low, middle) if fits(start, middle) else (middle, high)
        return high

    moments = [shortest + i * _FLUID_STEP for i in range(int((jobs / rate + span) / _FLUID_STEP) + 1)]
    gaps = [shortest_gap(moment) for moment in moments]
    # How many jobs end at each moment: those whose age then is inside the window.
    ending = [sum(count for created, count in groups if shortest <= moment - created < longest) for moment in moments]
    total = sum(ending)

    def share_over(lag: float) -> float:
        return sum(n * max(0.0, gap - lag) / gap for n, gap in zip(ending, gaps, strict=True)) / total

    lag = 0.0
    while share_over(lag) > 0.01:
        lag += 0.1
    return FluidEstimate(round(lag, 1), max(gaps))


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
    fluid = fluid_lag_p99()
    print(f"\nFluid estimate of the lowest lag p99 any order reaches: {fluid.lag_p99:.1f} s "
          f"(its longest gap between two polls of a job {fluid.longest_gap:.1f} s).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
