"""How long the service takes per model, learned from completed jobs: one model for the poller and ETAs.

Two estimates per model, both cheap and both kept in the database (the `meta` table) so a restart
keeps them:

- the recent durations (a window of the last `window` completed jobs), for quantiles, the likely
  completion window and an estimated ready time;
- the first-poll offset, tracked directly: a job's first poll should find it complete only rarely
  (`first_hit` of the time). Each first poll nudges the offset in log space, down when the job was
  already complete, up when not (a stochastic-approximation quantile tracker). That is what notices a
  service that got faster: the recorded durations of jobs complete at their first poll are only
  bounded from above, so a window of them alone would never move below the old first poll;
- how late to send the first poll past a gap where no job ends (`probe_factor`), tracked the same way on the
  polls sent there: the recorded durations place the far side of a gap up to an interval early (a job found
  done was recorded at the middle of the interval it ended in), and polls there never learn better, since
  every one finds its job running.

Before there is data, the prior stands in: the service says generation "normally takes 1 to 3
minutes", clamped to 3 to 9 poll intervals so a short test interval starts polling in proportion.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from bot.store.jobs import meta

log = logging.getLogger(__name__)

#: The service's own words: "Generation normally takes 1 to 3 minutes."
PRIOR_SECONDS = (60.0, 180.0)
#: In poll intervals at most, so a test or dry run with a short interval is not made to wait minutes.
PRIOR_INTERVALS = (3.0, 9.0)
#: A first poll sent this close to the offset (a moment of scheduling delay) still counts as at it.
_SLACK = 1.02


class MetaStore(Protocol):
    """Where the model is kept (the job store's `meta` table)."""

    async def get_meta(self, key: str) -> str | None: ...

    async def set_meta(self, key: str, value: str) -> None: ...

    async def meta_with_prefix(self, prefix: str) -> dict[str, str]: ...


#: The polls past a gap may find their job done more often: each hit ended at most a few seconds before it
#: (a share of a mode's front), and a smaller step keeps the tracker's sawtooth inside the mode.
PROBE_HIT = 0.2
PROBE_STEP = 0.04
PROBE_FACTOR_RANGE = (0.8, 1.25)
PROBE_DOUBLINGS = 3


@dataclass
class _Tracker:
    """A quantile tracker of when a poll is worth sending: it moves in log space, down after a poll there found
    its job done (a hit), up after one did not, and is at rest when `hit_share` of the polls are hits.

    Hits in a row may double the step (`doublings`): at rest they are rare, while after the jobs started ending
    earlier they are the rule, so a small step (a small sawtooth at rest) still follows that within a few dozen
    jobs. Only the polls past a gap use it: on the first polls it moved the second polls of a bimodal run to
    just before its quick jobs' end, where a few of them were then skipped past the gap (a lag of 80 s in one
    simulated draw).
    """

    value: float
    streak: int = 0  # hits in a row

    def nudge(self, *, completed: bool, hit_share: float, step: float, doublings: int = 0) -> None:
        """One poll's outcome; hits in a row double the step, `doublings` times at most."""
        if completed:
            self.streak += 1
            self.value *= math.exp(-step * (1 - hit_share) * 2 ** min(self.streak - 1, doublings))
        else:
            self.streak = 0
            self.value *= math.exp(step * hit_share)


@dataclass
class _Learned:
    first: _Tracker  # seconds after acceptance for a job's first poll
    # How much later than its recorded durations a poll past a gap goes.
    probe: _Tracker = field(default_factory=lambda: _Tracker(1.0))
    recent: deque[float] = field(default_factory=deque)  # arrival order, for eviction
    ordered: list[float] = field(default_factory=list)  # the same values, sorted, for quantiles


def _positive(value: object, name: str) -> float:
    number = float(value)  # type: ignore[arg-type]  # json: a TypeError for anything but a number or a string
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} is {value!r}, not a positive number")
    return number


class DurationModel:
    """Job durations per model (seconds from acceptance to completion).

    `window`: how many recent durations the quantiles use. `first_hit`: the share of first polls that
    may find the job already complete. `step`: how far one first poll moves the offset (in log space).
    """

    def __init__(
        self,
        prior: tuple[float, float] = PRIOR_SECONDS,
        *,
        window: int = 200,
        first_hit: float = 0.05,
        step: float = 0.06,
        min_samples: int = 10,
    ) -> None:
        if not 0 < prior[0] <= prior[1]:
            raise ValueError("the prior must be 0 < low <= high")
        self.prior = prior
        self._window = window
        self._first_hit = first_hit
        self._step = step
        self._min_samples = min_samples
        self._models: dict[str, _Learned] = {}
        self.dirty = False

    @classmethod
    def for_interval(cls, poll_interval: float) -> DurationModel:
        """The default prior, at most 3 to 9 poll intervals."""
        low = min(PRIOR_SECONDS[0], PRIOR_INTERVALS[0] * poll_interval)
        high = min(PRIOR_SECONDS[1], PRIOR_INTERVALS[1] * poll_interval)
        return cls((low, high))

    def _learned(self, model: str) -> _Learned:
        learned = self._models.get(model)
        if learned is None:
            learned = self._models[model] = _Learned(_Tracker(self.prior[0]))
        return learned

    # -- learning -------------------------------------------------------------------------------

    def record(self, model: str, duration: float) -> None:
        """A completed job of `model` took `duration` seconds from acceptance."""
        if not math.isfinite(duration) or duration < 0:
            return
        learned = self._learned(model)
        learned.recent.append(duration)
        bisect.insort(learned.ordered, duration)
        if len(learned.recent) > self._window:
            old = learned.recent.popleft()
            del learned.ordered[bisect.bisect_left(learned.ordered, old)]
        self.dirty = True

    def first_poll_outcome(self, model: str, age: float, *, completed: bool) -> bool:
        """A job's first poll, `age` seconds after acceptance, found it complete or not.

        Only an outcome on the far side of the current offset says anything about it: complete at or
        before it (the offset is too late), or still running at or after it (maybe too early).
        Returns True when the offset moved earlier.
        """
        learned = self._learned(model)
        if (age <= learned.first.value * _SLACK) if completed else (age >= learned.first.value / _SLACK):
            learned.first.nudge(completed=completed, hit_share=self._first_hit, step=self._step)
            self.dirty = True
            return completed
        return False

    def probe_outcome(self, model: str, age: float, planned: float, *, completed: bool) -> None:
        """A poll planned `planned` seconds after acceptance, past a gap, was sent at `age` and found the job
        complete or not. As for a first poll, only an outcome on the far side of the plan says anything."""
        if (age <= planned * _SLACK) if completed else (age >= planned / _SLACK):
            learned = self._learned(model)
            learned.probe.nudge(completed=completed, hit_share=PROBE_HIT, step=PROBE_STEP, doublings=PROBE_DOUBLINGS)
            # Bounded, so a run of stray jobs ending inside a gap cannot pin it where no poll is a probe any more.
            learned.probe.value = min(max(learned.probe.value, PROBE_FACTOR_RANGE[0]), PROBE_FACTOR_RANGE[1])
            self.dirty = True

    def probe_factor(self, model: str, *, at_most: float = math.inf) -> float:
        """How much later than its recorded durations a poll past a gap is worth sending (1 before data).

        Held at `at_most` where that binds (and kept so): the tracker moves from where the polls go, or it would
        drift past the bound where no outcome moves the polls, and take as long to come back when the jobs
        past the gap start ending earlier.
        """
        learned = self._models.get(model)
        if learned is None:
            return min(1.0, at_most)
        if learned.probe.value > at_most:
            learned.probe.value = max(at_most, PROBE_FACTOR_RANGE[0])
            self.dirty = True
        return learned.probe.value

    # -- what it knows --------------------------------------------------------------------------

    def samples(self, model: str) -> int:
        learned = self._models.get(model)
        return len(learned.ordered) if learned is not None else 0

    def quantile(self, model: str, q: float) -> float:
        """The `q` quantile of `model`'s recent durations (the prior, spread uniformly, before data)."""
        q = min(1.0, max(0.0, q))
        learned = self._models.get(model)
        if learned is None or len(learned.ordered) < self._min_samples:
            low, high = self.prior
            return low + q * (high - low)
        ordered = learned.ordered
        position = (len(ordered) - 1) * q
        below = math.floor(position)
        above = min(below + 1, len(ordered) - 1)
        return ordered[below] + (ordered[above] - ordered[below]) * (position - below)

    def share_done_by(self, model: str, age: float, *, spread: float = 0.0) -> float | None:
        """The share of recent jobs done within `age` seconds; None before there is enough data.

        `spread`: a recorded duration is known only to within this much either way (its job was found done
        some time in an interval): it counts in proportion to how much of that range lies within `age`.
        """
        learned = self._models.get(model)
        if learned is None or len(learned.ordered) < self._min_samples:
            return None
        ordered = learned.ordered
        if spread <= 0:
            return bisect.bisect_right(ordered, age) / len(ordered)
        surely = bisect.bisect_right(ordered, age - spread)
        partly = ordered[surely:bisect.bisect_left(ordered, age + spread, lo=surely)]
        return (surely + sum(age + spread - duration for duration in partly) / (2 * spread)) / len(ordered)

    def first_poll_after(self, model: str) -> float:
        """Seconds after acceptance at which a new job of `model` is first worth polling."""
        return self._learned(model).first.value if model in self._models else self.prior[0]

    def expected_ready_at(self, model: str, accepted_at: float) -> float:
        """When a job of `model` accepted at `accepted_at` is most likely ready (the median)."""
        return accepted_at + self.quantile(model, 0.5)

    # -- persistence ----------------------------------------------------------------------------

    def dumps(self) -> dict[str, str]:
        """Each model's state as a `meta` value."""
        return {
            meta.DURATIONS_PREFIX + model: json.dumps(
                {
                    "first_offset": learned.first.value,
                    "probe_factor": learned.probe.value,
                    "recent": list(learned.recent),
                }
            )
            for model, learned in self._models.items()
        }

    def loads(self, model: str, value: str) -> None:
        """One model's state from its `meta` value. A number no run wrote (not finite, or not positive) raises
        ValueError: a NaN offset would plan every first poll at NaN, and the heap would order nothing. One out of
        reason is bounded: the first poll never after the longest duration known, the probe factor in its range.
        """
        data = json.loads(value)
        stored = [float(duration) for duration in data["recent"][-self._window:]]
        if any(not math.isfinite(duration) for duration in stored):
            raise ValueError("a recorded duration is not finite")
        recent = [duration for duration in stored if duration >= 0]  # as `record` drops them
        first = _positive(data["first_offset"], "first_offset")
        # A row from before the probes were tracked has no factor: it starts from the records again.
        probe = _positive(data.get("probe_factor", 1.0), "probe_factor")
        learned = self._models[model] = _Learned(
            _Tracker(min(first, max([self.prior[1], *recent]))),
            _Tracker(min(max(probe, PROBE_FACTOR_RANGE[0]), PROBE_FACTOR_RANGE[1])),
        )
        learned.recent.extend(recent)
        learned.ordered = sorted(recent)

    async def save(self, store: MetaStore) -> None:
        """Write what was learned since the last save (one small row per model)."""
        if not self.dirty:
            return
        self.dirty = False
        for key, value in self.dumps().items():
            await store.set_meta(key, value)

    async def load(self, store: MetaStore) -> None:
        """Read what an earlier run learned, for every model it saw (the catalogue may have changed since);
        a damaged row is ignored (the prior stands)."""
        for key, value in (await store.meta_with_prefix(meta.DURATIONS_PREFIX)).items():
            model = key.removeprefix(meta.DURATIONS_PREFIX)
            try:
                self.loads(model, value)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring the stored durations of %s: %s", model, exc)
                self._models.pop(model, None)
