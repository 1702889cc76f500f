"""The one retry policy: bounded in attempts and time, jittered, honouring Retry-After within the deadline."""

import math

import pytest

from bot.core.retry import CREATE_RETRY, READ_RETRY, RetryPolicy, retrying


class Flaky(Exception):
    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__("flaky")
        self.retry_after = retry_after


class FakeTime:
    """A clock that moves only when slept on (or when a call says it took time)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(time: FakeTime, *, takes: float = 0.0, retry_after: float | None = None):  # type: ignore[no-untyped-def]
    starts: list[float] = []

    async def call() -> None:
        starts.append(time.now)
        time.now += takes
        raise Flaky(retry_after)

    return call, starts


async def run(policy: RetryPolicy, call, time: FakeTime) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Flaky):
        await retrying(
            policy, call, retry_on=(Flaky,), what="test",
            retry_after=lambda exc: exc.retry_after if isinstance(exc, Flaky) else None,
            sleep=time.sleep, clock=time.clock,
        )


@pytest.mark.parametrize(
    "bounds",
    [
        {"attempts": 0, "deadline": 10}, {"attempts": 3, "deadline": 0}, {"attempts": 3, "deadline": -1},
        {"attempts": 3, "deadline": math.inf}, {"attempts": 3, "deadline": math.nan},
        {"attempts": math.inf, "deadline": 10}, {"attempts": 3.5, "deadline": 10},
        {"attempts": 3, "deadline": 10, "base_delay": 2, "max_delay": 1},
        {"attempts": 3, "deadline": 10, "jitter": 1.0},
    ],
)
def test_a_policy_that_never_gives_up_or_never_tries_is_refused(bounds: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**bounds)  # type: ignore[arg-type]


@pytest.mark.parametrize("attempts", [1, 2, 5])
async def test_retrying_gives_up_after_exactly_the_attempts(attempts: int) -> None:
    time = FakeTime()
    call, starts = failing(time)
    await run(RetryPolicy(attempts=attempts, deadline=1000, base_delay=1, max_delay=4), call, time)
    assert len(starts) == attempts
    assert len(time.sleeps) == attempts - 1


async def test_retrying_never_starts_an_attempt_past_the_deadline() -> None:
    time = FakeTime()
    call, starts = failing(time, takes=0.7)
    policy = RetryPolicy(attempts=1000, deadline=10, base_delay=1, max_delay=3)
    await run(policy, call, time)
    assert 1 < len(starts) < 1000
    assert max(starts) <= policy.deadline


async def test_retrying_stops_at_the_first_success() -> None:
    time = FakeTime()
    answers: list[Flaky | str] = [Flaky(), Flaky(), "done"]

    async def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Flaky):
            raise answer
        return answer

    result = await retrying(RetryPolicy(attempts=5, deadline=100), call, retry_on=(Flaky,), what="test",
                            sleep=time.sleep, clock=time.clock)
    assert result == "done" and len(time.sleeps) == 2


async def test_other_errors_are_not_retried() -> None:
    time = FakeTime()
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        raise KeyError("not retryable")

    with pytest.raises(KeyError):
        await retrying(RetryPolicy(attempts=5, deadline=100), call, retry_on=(Flaky,), what="test",
                       sleep=time.sleep, clock=time.clock)
    assert calls == 1 and time.sleeps == []


async def test_retry_after_is_honoured() -> None:
    time = FakeTime()
    call, _starts = failing(time, retry_after=7)
    await run(RetryPolicy(attempts=2, deadline=60, base_delay=1, max_delay=2), call, time)
    assert time.sleeps == [7.0]


async def test_retry_after_is_capped_by_the_deadline() -> None:
    time = FakeTime()
    call, starts = failing(time, retry_after=3600)
    policy = RetryPolicy(attempts=5, deadline=60, base_delay=1, max_delay=2)
    await run(policy, call, time)
    assert time.sleeps and max(time.sleeps) <= policy.deadline
    assert max(starts) <= policy.deadline


def test_backoff_grows_is_capped_and_jittered_within_bounds() -> None:
    policy = RetryPolicy(attempts=10, deadline=1000, base_delay=1, max_delay=8, jitter=0.25)
    for attempt, nominal in [(1, 1), (2, 2), (3, 4), (4, 8), (9, 8)]:
        for _ in range(50):
            assert nominal * 0.75 <= policy.delay(attempt) <= nominal * 1.25


def test_the_bots_policies_are_bounded() -> None:
    assert (CREATE_RETRY.attempts, CREATE_RETRY.deadline) == (4, 60)
    assert (READ_RETRY.attempts, READ_RETRY.deadline) == (3, 30)


def test_every_loop_that_retries_has_a_stated_limit() -> None:
    """Raising any of these to something unbounded must fail here, on purpose."""
    from bot.core.retry import DATABASE_RETRY, DOWNLOAD_RETRY, NOTICE_RETRY, NOTICE_ROUNDS, RECORD_RETRY, UPLOAD_RETRY

    # A download that fails every time ends the job `failed` after at most 6 attempts and 30 minutes.
    assert (DOWNLOAD_RETRY.attempts, DOWNLOAD_RETRY.deadline) == (6, 30 * 60)
    # An upload Discord keeps refusing ends `undeliverable` after at most 5 attempts and 30 minutes.
    assert (UPLOAD_RETRY.attempts, UPLOAD_RETRY.deadline) == (5, 30 * 60)
    # A final message: 3 tries within a minute per round, 5 rounds, then given up with an error.
    assert (NOTICE_RETRY.attempts, NOTICE_RETRY.deadline, NOTICE_ROUNDS) == (3, 60, 5)
    # Recording a charged job while the database fails: 10 minutes, then the requester gets the job id.
    assert (RECORD_RETRY.attempts, RECORD_RETRY.deadline) == (12, 10 * 60)
    # A completed job's download or post not recorded while the database fails: an hour, then the next start.
    assert (DATABASE_RETRY.attempts, DATABASE_RETRY.deadline, DATABASE_RETRY.max_delay) == (48, 60 * 60, 80)
    for policy in (DOWNLOAD_RETRY, UPLOAD_RETRY, NOTICE_RETRY, RECORD_RETRY, DATABASE_RETRY):
        # The waits the policy allows fit its deadline: the last attempt really happens within it.
        assert sum(min(policy.max_delay, policy.base_delay * 2**n) for n in range(policy.attempts - 1)) \
            <= policy.deadline * 1.5


def test_the_worker_takes_its_bounds_from_the_policies() -> None:
    from pathlib import Path

    from bot.core.retry import DATABASE_RETRY, DOWNLOAD_RETRY, NOTICE_RETRY, NOTICE_ROUNDS, UPLOAD_RETRY
    from bot.jobs.worker import WorkerConfig

    config = WorkerConfig(storage_dir=Path("videos"))
    assert (config.download_retry, config.upload_retry, config.notice_retry, config.database_retry) == (
        DOWNLOAD_RETRY, UPLOAD_RETRY, NOTICE_RETRY, DATABASE_RETRY)
    assert config.notice_rounds == NOTICE_ROUNDS
    assert config.storage_wait_limit <= 60 * 60 and config.max_download_bytes == 100 * 1024 * 1024


# -- the mutants that survived the first mutation run, each now caught ----------------------------------


async def test_the_deadline_counts_from_the_first_attempt_on_any_clock() -> None:
    time = FakeTime()
    time.now = 1_000_000.0  # a clock that does not start at zero (time.monotonic never does)
    call, starts = failing(time, takes=4.0)
    await run(RetryPolicy(attempts=10, deadline=10.0, base_delay=1.0, max_delay=1.0, jitter=0.0), call, time)
    assert starts[-1] - starts[0] <= 10.0
    assert len(starts) == 3  # 0, 5, 10 s: a fourth would start past the deadline


def test_a_retry_after_under_a_second_is_honoured_and_a_negative_one_is_now() -> None:
    policy = RetryPolicy(attempts=3, deadline=30.0)
    assert policy.delay(1, retry_after=0.3) == 0.3
    assert policy.delay(1, retry_after=-5.0) == 0.0


def test_jitter_spreads_delays_on_both_sides_of_the_backoff() -> None:
    policy = RetryPolicy(attempts=3, deadline=30.0, base_delay=10.0, max_delay=10.0, jitter=0.2)
    delays = [policy.delay(1) for _ in range(200)]
    assert all(8.0 <= delay <= 12.0 for delay in delays)
    assert any(delay < 10.0 for delay in delays) and any(delay > 10.0 for delay in delays)


def test_a_short_deadline_and_no_jitter_are_valid_bounds() -> None:
    assert RetryPolicy(attempts=2, deadline=0.5, base_delay=0.0, max_delay=0.0, jitter=0.0).allows(1, 0.0)


async def test_each_retry_is_logged_with_what_and_why(caplog: pytest.LogCaptureFixture) -> None:
    time = FakeTime()
    call, _starts = failing(time)
    with caplog.at_level("INFO", logger="bot.core.retry"):
        await run(RetryPolicy(attempts=2, deadline=10.0, base_delay=1.0, max_delay=1.0, jitter=0.0), call, time)
    [line] = [r.getMessage() for r in caplog.records if r.name == "bot.core.retry"]
    assert line == "test: flaky; retrying in 1.0 s (attempt 2 of 2)"
