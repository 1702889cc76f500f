"""The poll schedule on a deterministic clock: first polls, spacing, speed-ups and priority."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from bot.jobs.durations import DurationModel
from bot.jobs.schedule import Plan, PollSchedule
from bot.store.jobs import Job, JobState
from tests.conftest import StoreOpener

MODEL = "provider/video-model-2.0-fast"
INTERVAL = 20.0


def job(job_id: int, accepted_at: float) -> Job:
    return Job(
        id=job_id, state=JobState.PENDING, model=MODEL, prompt="p", seed=None, user_id=1, guild_id=1,
        channel_id=1, locale="en-US", service_job_id=f"vid_{job_id}", charged_yen=250, created_at=accepted_at,
        updated_at=accepted_at, accepted_at=accepted_at, finished_at=None, next_poll_at=None,
        slow_notice_sent=False, file_path=None, upload_limit_bytes=None, interaction_token=None,
        interaction_expires_at=None, reply_message_id=None, delivered_channel_id=None, delivered_message_id=None,
        last_error=None,
    )  # fmt: skip


def simulate(
    schedule: PollSchedule, durations: list[float], *, every: float, start: float = 0.0
) -> tuple[dict[int, list[float]], dict[int, float], float]:
    """Accept a job every `every` s with the given durations and poll as the worker would (no limit).

    Returns each job's poll times, each job's lag (detected - done) and the time it ended.
    """
    polls: dict[int, list[float]] = {}
    lags: dict[int, float] = {}
    done_at: dict[int, float] = {}
    arrivals = [(start + n * every, n, d) for n, d in enumerate(durations)]
    now = start
    while arrivals or len(schedule):
        next_due = schedule.next_due()
        next_arrival = arrivals[0][0] if arrivals else None
        if next_arrival is not None and (next_due is None or next_arrival <= next_due):
            now, n, duration = arrivals.pop(0)
            schedule.add(job(n, now))
            done_at[n] = now + duration
            continue
        assert next_due is not None
        now = next_due
        for _, plan in schedule.pop_due(now):
            schedule.sending(plan, now)
            n = plan.job.id
            polls.setdefault(n, []).append(now)
            if now >= done_at[n]:
                lags[n] = now - done_at[n]
                schedule.finished(plan, now, completed=True)
            else:
                schedule.running(plan, now)
    return polls, lags, now


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))]


def test_a_new_job_is_first_polled_at_the_low_end_of_its_models_durations() -> None:
    durations = DurationModel((60.0, 180.0))
    schedule = PollSchedule(durations, INTERVAL)
    plan = schedule.add(job(1, 1000.0))
    assert plan.due == 1060.0, "before any data: the prior's low end"
    assert schedule.take_changed() == {1: 1060.0}, "the planned time is written down (in a batch)"
    # Not a poll before then.
    assert schedule.pop_due(1059.9) == []
    assert [p.job.id for _, p in schedule.pop_due(1060.0)] == [1]


def test_the_first_poll_follows_what_was_learned_and_polls_stay_an_interval_apart() -> None:
    rng = random.Random(1)
    schedule = PollSchedule(DurationModel((60.0, 180.0)), INTERVAL)
    polls, lags, _ = simulate(schedule, [rng.uniform(90, 150) for _ in range(400)], every=2.0)

    late = [times for n, times in polls.items() if n >= 200]
    first_ages = [times[0] - 2.0 * n for n, times in polls.items() if n >= 200]
    # Durations of 90-150 s: the first poll moves up from the prior's 60 s (slowly: a first poll too early
    # costs a request, one too late costs lag) and never past the shortest duration.
    assert min(first_ages) >= 65 and max(first_ages) <= 90, (min(first_ages), max(first_ages))
    spacing = min(b - a for times in polls.values() for a, b in pairwise(times))
    assert spacing >= INTERVAL
    assert max(lags.values()) <= INTERVAL + 1e-9
    # About one poll per interval of the window after the first, not one per interval of the whole duration.
    assert sum(len(times) for times in late) / len(late) <= 5.0


def test_a_faster_service_is_noticed_within_a_few_dozen_jobs() -> None:
    rng = random.Random(2)
    schedule = PollSchedule(DurationModel((60.0, 180.0)), INTERVAL)
    before = [rng.uniform(60, 180) for _ in range(300)]
    after = [rng.uniform(30, 90) for _ in range(300)]
    _, lags, _ = simulate(schedule, before + after, every=0.5)

    switched = sorted(range(300, 600), key=lambda n: 0.5 * n + after[n - 300])
    recovered = [lags[n] for n in switched[50:]]
    assert p99(recovered) <= 1.03 * INTERVAL, p99(recovered)
    assert schedule.durations.first_poll_after(MODEL) < 40


def test_no_polls_where_no_job_finishes() -> None:
    rng = random.Random(3)
    schedule = PollSchedule(DurationModel((60.0, 180.0)), INTERVAL)
    durations = [rng.uniform(40, 60) if rng.random() < 0.7 else rng.uniform(150, 180) for _ in range(600)]
    polls, lags, _ = simulate(schedule, durations, every=1.0)

    ages = [t - 1.0 * n for n, times in polls.items() if n >= 300 for t in times]
    # The gap is 60-150 s. The recorded durations put the next mode's edge up to an interval early (130 s), and
    # the polls sent past the gap learn how much later it is.
    in_gap = [age for age in ages if 80 < age < 150 - INTERVAL]
    assert len(in_gap) <= 0.01 * len(ages), len(in_gap)
    # 2.97 polls a job when the polls past the gap went where the records put the edge.
    assert len(ages) / 300 <= 2.85, len(ages) / 300
    assert p99([lags[n] for n in range(300, 600)]) <= 1.03 * INTERVAL


@pytest.mark.parametrize("seed", [5, 8, 10])  # draws where, planned polls left where they were, p99 was 25-36 s
def test_polls_past_a_gap_follow_the_next_mode_when_it_moves_earlier(seed: int) -> None:
    rng = random.Random(seed)
    schedule = PollSchedule(DurationModel((60.0, 180.0)), INTERVAL)
    # The slow jobs take 150-180 s, then 110-140 s from the 600th on: where they now end was a gap.
    durations = [
        rng.uniform(40, 60) if rng.random() < 0.7 else rng.uniform(150, 180) if n < 600 else rng.uniform(110, 140)
        for n in range(1000)
    ]
    _, lags, _ = simulate(schedule, durations, every=1.0)

    slow_after = [n for _, n in sorted((n + durations[n], n) for n in range(600, 1000) if durations[n] > 100)]
    assert p99([lags[n] for n in slow_after[20:]]) <= 1.03 * INTERVAL


def test_a_job_seen_running_near_the_learned_end_of_a_mode_is_not_skipped_past_it() -> None:
    durations = DurationModel((60.0, 180.0))
    schedule = PollSchedule(durations, INTERVAL)
    # Quick jobs seen running at 40 s and found done at 60 s are recorded at 50 s (the middle); slow ones at 165 s.
    for duration in [50.0] * 70 + [165.0] * 30:
        durations.record(MODEL, duration)

    def next_poll_age(job_id: int, seen_running_at: float) -> float:
        plan = schedule.add(job(job_id, 1000.0), 1000.0 + seen_running_at)
        assert [p for _, p in schedule.pop_due(1000.0 + seen_running_at)] == [plan]
        schedule.sending(plan, 1000.0 + seen_running_at)
        due = schedule.running(plan, 1000.0 + seen_running_at)
        schedule.drop(job_id)
        return due - 1000.0

    # Polled a little late and still running: a quick job may end any moment up to 60 s.
    assert next_poll_age(1, 57.0) == 57.0 + INTERVAL
    # Past the quick mode: the gap is skipped, to the earliest a slow job recorded at 165 s may have ended.
    assert next_poll_age(2, 60.0) == 165.0 - INTERVAL / 2
    assert next_poll_age(3, 75.0) == 165.0 - INTERVAL / 2
    # Inside the slow mode: an interval, as anywhere jobs end.
    assert next_poll_age(4, 160.0) == 160.0 + INTERVAL


def test_a_poll_past_a_gap_learns_where_the_next_mode_begins_and_never_goes_past_its_record() -> None:
    durations = DurationModel((60.0, 180.0))
    schedule = PollSchedule(durations, INTERVAL)
    for duration in [50.0] * 70 + [165.0] * 30:
        durations.record(MODEL, duration)

    def past_the_gap(job_id: int, *, found_done: bool) -> float:
        """Seen running at 60 s: the poll past the gap, at an age it returns, finds the job done or not."""
        plan = schedule.add(job(job_id, 0.0), 60.0)
        assert [p for _, p in schedule.pop_due(60.0)] == [plan]
        schedule.sending(plan, 60.0)
        due = schedule.running(plan, 60.0)
        assert [p for _, p in schedule.pop_due(due)] == [plan]
        schedule.sending(plan, due)
        if found_done:
            schedule.finished(plan, due, completed=True)
        else:
            schedule.running(plan, due)
            schedule.drop(job_id)
        return due

    # At first as early as the slow record allows (it ended in 155-175 s); each poll there that finds its job
    # still running moves the next a little later, up to where the record ended and no further: a job of that
    # mode waits at most an interval.
    ages = [past_the_gap(n, found_done=False) for n in range(80)]
    assert ages[0] == 165.0 - INTERVAL / 2
    assert all(a < b for a, b in pairwise(ages[:10]))
    assert max(ages) == ages[-1] == 165.0 + INTERVAL / 2
    # Polls there that find their job done move the next earlier, and hits in a row by more each time.
    hits = [past_the_gap(n, found_done=True) for n in range(100, 104)]
    assert hits[0] == ages[-1]
    steps = [a - b for a, b in pairwise(hits)]
    assert steps[0] > 0 and all(b > a for a, b in pairwise(steps)), steps


def test_polls_planned_past_a_gap_come_earlier_once_the_polls_there_find_their_jobs_done() -> None:
    durations = DurationModel((60.0, 180.0))
    schedule = PollSchedule(durations, INTERVAL)
    for duration in [50.0] * 70 + [165.0] * 30:
        durations.record(MODEL, duration)
    waiting = schedule.add(job(1, 0.0), 60.0)
    schedule.pop_due(60.0)
    schedule.sending(waiting, 60.0)
    planned = schedule.running(waiting, 60.0)
    assert planned == 155.0
    # Other jobs, accepted earlier, are found done at their polls past the gap: the next mode moved earlier.
    for n in range(2, 5):
        plan = schedule.add(job(n, -50.0), 10.0)
        schedule.pop_due(10.0)
        schedule.sending(plan, 10.0)
        due = schedule.running(plan, 10.0)
        schedule.pop_due(due)
        schedule.sending(plan, due)
        schedule.finished(plan, due, completed=True)
    assert 124.0 <= waiting.due < planned - 0.05 * planned, waiting.due
    assert schedule.next_due() == waiting.due


def test_a_poll_is_worth_sending_from_its_due_time_or_its_window_opening() -> None:
    durations = DurationModel((60.0, 180.0))
    schedule = PollSchedule(durations, INTERVAL)
    # Before its window (opening at 60 s, one interval early): ranked from the opening, after due ones.
    early = Plan(job(1, 1000.0), 1000.0, 0.0)
    assert schedule.worth_from(early, 1010.0) == 1000.0 + 60.0 - INTERVAL
    inside = Plan(job(2, 900.0), 900.0, 0.0)
    assert schedule.worth_from(inside, 995.0) == 995.0


def test_an_overdue_job_keeps_its_place_however_short_the_learned_window() -> None:
    """Early in a batch only the quickest jobs have finished: a job older than all of them is overdue,
    not to be ranked behind every newer poll (it starved for 200 s under a binding limit)."""
    durations = DurationModel((60.0, 180.0))
    for n in range(13):
        durations.record(MODEL, 55.0 + n * 0.3)  # a 99th percentile of 59 s
    schedule = PollSchedule(durations, INTERVAL)
    overdue = Plan(job(1, 1000.0 - 81), 1000.0 - 81, 0.0)
    inside = Plan(job(2, 1000.0 - 50), 1000.0 - 50, 0.0)
    assert schedule.worth_from(overdue, 998.0) < schedule.worth_from(inside, 999.0)


def test_the_first_poll_offset_is_kept_with_the_durations() -> None:
    learned = DurationModel((60.0, 180.0))
    for _ in range(30):
        learned.first_poll_outcome(MODEL, 60.0, completed=True)
    for n in range(20):
        learned.record(MODEL, 30.0 + n)
    again = DurationModel((60.0, 180.0))
    for key, value in learned.dumps().items():
        again.loads(key.removeprefix("durations:"), value)
    assert again.first_poll_after(MODEL) == learned.first_poll_after(MODEL) < 60.0
    assert again.quantile(MODEL, 0.5) == learned.quantile(MODEL, 0.5) == 39.5
    assert again.expected_ready_at(MODEL, 100.0) == 139.5
    learned.probe_outcome(MODEL, 150.0, 150.0, completed=False)
    again = DurationModel((60.0, 180.0))
    for key, value in learned.dumps().items():
        again.loads(key.removeprefix("durations:"), value)
    assert again.probe_factor(MODEL, at_most=2.0) == learned.probe_factor(MODEL, at_most=2.0) > 1.0
    # A row written before the polls past a gap were tracked.
    again.loads(MODEL, '{"first_offset": 50.0, "recent": [1.0]}')
    assert again.probe_factor(MODEL, at_most=2.0) == 1.0 and again.first_poll_after(MODEL) == 50.0


async def test_the_durations_of_every_model_survive_a_restart_through_the_store(open_store: StoreOpener) -> None:
    # Models come from a catalogue file that may change between runs: whatever was saved is read back.
    store = await open_store()  # each backend
    try:
        learned = DurationModel((60.0, 180.0))
        for n in range(20):
            learned.record(MODEL, 30.0 + n)
            learned.record("other/model", 100.0 + n)
        await learned.save(store)
        await store.set_meta("durations_x", "not one of ours")  # a key that merely shares the letters
        again = DurationModel((60.0, 180.0))
        await again.load(store)
    finally:
        await store.close()
    assert again.quantile(MODEL, 0.5) == 39.5
    assert again.quantile("other/model", 0.5) == 109.5
    assert again.expected_ready_at("other/model", 0.0) == 109.5
