"""When to poll each job: a heap of due times planned from the learned durations (bot/jobs/durations.py).

A new job is first polled near the low end of its model's durations, then every interval while it
runs; a stretch where (by the recent jobs) no job of that model finishes is skipped, to where the polls
sent past it learned the jobs start ending again. Two polls of one job are never closer than the
interval: the next one is counted from the answer of the last.

Everything here is in memory and costs O(log n) per poll; the worker writes the planned times to the
database in batches (`take_changed`), so a restart resumes the schedule.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass

from bot.jobs.durations import DurationModel
from bot.store.jobs import Job

#: The likely completion window of a model opens at this quantile of its recent durations (or at the
#: first poll, if sooner), one interval early; it has no far end for ordering (see `worth_from`).
WINDOW_QUANTILE_LOW = 0.0
#: After a poll that found the job running, the next is an interval later, unless fewer than this share of the
#: jobs still running by then are expected to end within that interval (by the recent durations): a gap where
#: no job ends, skipped.
GAP_SHARE = 0.1
#: A skip goes to where this share of the jobs recorded past the gap's start are done (one stray record, such as
#: a job found late, does not decide it).
SKIP_TO_SHARE = 0.03
#: First polls not yet sent are brought forward once the first-poll offset fell by this share.
REPLAN_SHARE = 0.05


@dataclass(slots=True, eq=False)
class Plan:
    """One job's place in the schedule: when its next poll is due, and what its polls so far found. Mutable, and
    one per job: two plans are the same plan or different ones, whatever their values."""

    job: Job
    accepted_at: float
    due: float
    polls: int = 0
    running_at: float = 0.0  # age (s after acceptance) at which the job was last seen unfinished
    sent_age: float = 0.0  # age at which the poll now out was sent
    probe_age: float = 0.0  # the age the poll now planned was planned at, if past a gap (0 if not)


class PollSchedule:
    def __init__(self, durations: DurationModel, interval: float) -> None:
        self.durations = durations
        self.interval = interval
        self._plans: dict[int, Plan] = {}
        self._heap: list[tuple[float, int]] = []  # (due, job id); stale entries are skipped when popped
        self._changed: dict[int, float] = {}
        # Jobs whose first poll is still ahead, by model, and the offset they were planned with.
        self._awaiting_first: dict[int, Plan] = {}
        self._planned_offset: dict[str, float] = {}
        # The same for the polls planned past a gap, and the probe factor they were planned with.
        self._awaiting_probe: dict[int, Plan] = {}
        self._planned_probe: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._plans)

    def __contains__(self, job_id: int) -> bool:
        return job_id in self._plans

    def __iter__(self) -> Iterator[int]:
        """The ids of the planned jobs (a copy: dropping while iterating is fine)."""
        return iter(list(self._plans))

    def get(self, job_id: int) -> Plan | None:
        return self._plans.get(job_id)

    # -- planning -------------------------------------------------------------------------------

    def add(self, job: Job, due: float | None = None) -> Plan:
        """Plan `job`: at `due` (a time already recorded), or its first poll from the model."""
        accepted = job.accepted_at if job.accepted_at is not None else job.created_at
        if due is None:
            due = accepted + self.durations.first_poll_after(job.model)
            self._changed[job.id] = due
        plan = Plan(job, accepted, due)
        self._plans[job.id] = plan
        self._awaiting_first[job.id] = plan
        self._planned_offset[job.model] = self.durations.first_poll_after(job.model)
        heapq.heappush(self._heap, (due, job.id))
        return plan

    def _push(self, plan: Plan, due: float) -> None:
        plan.due = due
        self._changed[plan.job.id] = due
        heapq.heappush(self._heap, (due, plan.job.id))

    def next_due(self) -> float | None:
        """The earliest planned poll, or None."""
        heap = self._heap
        while heap:
            due, job_id = heap[0]
            plan = self._plans.get(job_id)
            if plan is not None and plan.due == due:
                return due
            heapq.heappop(heap)
        return None

    def pop_due(self, now: float) -> list[tuple[float, Plan]]:
        """The plans due by `now` with their due times, taken off the heap (back once the answer is in)."""
        due: list[tuple[float, Plan]] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, job_id = heapq.heappop(heap)
            plan = self._plans.get(job_id)
            if plan is not None and plan.due == at:
                plan.due = math.inf  # out for polling: no second poll until it is planned again
                due.append((at, plan))
        return due

    def sending(self, plan: Plan, now: float) -> None:
        """The poll of `plan` leaves now."""
        plan.sent_age = now - plan.accepted_at

    def worth_from(self, plan: Plan, due: float) -> float:
        """The moment a poll of `plan` due at `due` becomes worth its request: the ready order of the worker.

        That is its due time, or the opening of its model's likely completion window if that comes later,
        so a job in its window goes before one that is not there yet. A job past the window's far end keeps
        its due time: it is overdue, as likely done as any, and a window learned early in a batch (from its
        quickest jobs only: measured, a 99th percentile of 59 s for 60-180 s jobs) ends far too soon. Ranking
        it last starved it behind every newer poll under a binding limit (lag 200 s).
        """
        model = plan.job.model
        opens = min(self.durations.first_poll_after(model), self.durations.quantile(model, WINDOW_QUANTILE_LOW))
        return max(due, plan.accepted_at + opens - self.interval)

    # -- answers --------------------------------------------------------------------------------

    def running(self, plan: Plan, answered: float) -> float:
        """The job was still running at the poll just answered: plan the next one and return its time."""
        first = plan.polls == 0
        plan.polls += 1
        plan.running_at = max(plan.running_at, plan.sent_age)
        model = plan.job.model
        if first:
            self._awaiting_first.pop(plan.job.id, None)
            self.durations.first_poll_outcome(model, plan.sent_age, completed=False)
        elif plan.probe_age:
            self._awaiting_probe.pop(plan.job.id, None)
            self.durations.probe_outcome(model, plan.sent_age, plan.probe_age, completed=False)
        after_gap = plan.accepted_at + self._skip_to(model, plan.running_at)
        due = max(answered + self.interval, after_gap)
        plan.probe_age = 0.0
        if after_gap > answered + self.interval:
            plan.probe_age = after_gap - plan.accepted_at
            self._awaiting_probe[plan.job.id] = plan
            self._planned_probe[model] = self.durations.probe_factor(model)
        self._push(plan, due)
        return due

    def _skip_to(self, model: str, age: float) -> float:
        """Where the next poll is worth making for a job still running at `age`, by the recent durations: 0 for
        an interval on, as usual, or where jobs end again after a gap in which (almost) none do.

        A recorded duration is the middle of the interval in which its job was found done (`finished`): the
        job may have ended up to half an interval either side of it, and is counted so. Counted as exact, the
        quick jobs of a bimodal run found done at 60 s after a poll at 40 s (all recorded at 50 s) made a job
        seen running at 57 s look past the whole quick mode, and its next poll skipped to the slow one (a lag
        of 87 s in one run of bench/).
        """
        spread = self.interval / 2
        done = self.durations.share_done_by(model, age, spread=spread)
        if done is None or done >= 1.0:
            return 0.0
        ahead = self.durations.share_done_by(model, age + self.interval, spread=spread)
        assert ahead is not None
        if ahead - done >= GAP_SHARE * (1 - done):
            return 0.0
        # Past the gap: where a few of the jobs recorded wholly after `age` are done (a stray record alone, such
        # as a job found late, does not move it), as early as their records allow.
        started = self.durations.share_done_by(model, age + spread)
        assert started is not None
        recorded = self.durations.quantile(model, started + SKIP_TO_SHARE * (1 - started))
        # As early as that record allows, or later by what the polls sent there learned (`probe_factor`); never
        # past where it ended (`recorded + spread`), which keeps the lag of a job past the gap within an interval.
        earliest, latest = recorded - spread, recorded + spread
        if earliest <= 0:
            return earliest
        return min(earliest * self.durations.probe_factor(model, at_most=latest / earliest), latest)

    def finished(self, plan: Plan, answered: float, *, completed: bool) -> None:
        """The job ended (done or failed) at or before `answered`: learn its duration and drop it."""
        self.drop(plan.job.id)
        if not completed:
            return
        model = plan.job.model
        age = answered - plan.accepted_at
        if plan.polls == 0 and self.durations.first_poll_outcome(model, plan.sent_age, completed=True):
            self._bring_forward(model, answered)
        elif plan.probe_age:
            self.durations.probe_outcome(model, plan.sent_age, plan.probe_age, completed=True)
            self._bring_probes_forward(model, answered)
        # Done somewhere after the last poll that saw it running: assume within the last interval.
        self.durations.record(model, age - min(age - plan.running_at, self.interval) / 2)

    def retry(self, plan: Plan, at: float) -> None:
        """The poll did not get an answer (an error, a 429) or its outcome was not recorded: again at `at`."""
        if plan.job.id not in self._plans:
            self._plans[plan.job.id] = plan
        self._push(plan, at)

    def _bring_forward(self, model: str, now: float) -> None:
        """The first-poll offset moved earlier (the service got faster): so do the first polls not yet sent.

        Only once it has moved a step worth the O(jobs waiting) pass (a few % of the offset).
        """
        offset = self.durations.first_poll_after(model)
        if offset > self._planned_offset.get(model, math.inf) * (1 - REPLAN_SHARE):
            return
        self._planned_offset[model] = offset
        for plan in self._awaiting_first.values():
            if plan.job.model == model and plan.due != math.inf:
                earlier = max(now, plan.accepted_at + offset)
                if earlier < plan.due:
                    self._push(plan, earlier)

    def _bring_probes_forward(self, model: str, now: float) -> None:
        """The polls past a gap found jobs done before them (the jobs there now end earlier): so do the polls
        planned past a gap and not yet sent come earlier, in proportion, once it is worth the pass."""
        factor = self.durations.probe_factor(model)
        planned = self._planned_probe.get(model)
        if planned is None or factor > planned * (1 - REPLAN_SHARE):
            return
        self._planned_probe[model] = factor
        for plan in self._awaiting_probe.values():
            if plan.job.model == model and plan.due != math.inf:
                plan.probe_age *= factor / planned
                earlier = max(now, plan.accepted_at + plan.probe_age)
                if earlier < plan.due:
                    self._push(plan, earlier)

    def drop(self, job_id: int) -> None:
        """Stop polling a job (it ended, or another path took it over)."""
        self._awaiting_first.pop(job_id, None)
        self._awaiting_probe.pop(job_id, None)
        self._plans.pop(job_id, None)
        self._changed.pop(job_id, None)

    def take_changed(self) -> dict[int, float]:
        """The planned times changed since the last call, for one batched write."""
        changed, self._changed = self._changed, {}
        return {job_id: at for job_id, at in changed.items() if job_id in self._plans}
