"""The job worker against the service simulator over loopback, with a recording Deliverer."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from itertools import pairwise
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import aiohttp
import pytest

from bot.core.errors import InsufficientStorage
from bot.core.retry import RetryPolicy
from bot.jobs.port import Deliverer, Undeliverable
from bot.jobs.worker import JobWorker, WorkerConfig
from bot.simulator import VideoServiceSimulator
from bot.simulator.app import DEFAULT_VIDEO_PATH, JOBS_PREFIX
from bot.store.jobs import Job, JobState, JobStore, StoreUnavailable
from tests.conftest import SIM_KEY, SimulatorFactory, fail_once
from tests.jobs.worker_helpers import (
    MODEL,
    PRICE_YEN,
    RecordingDeliverer,
    ShiftedClock,
    TimedClient,
    TimedRequestLog,
    new_job,
    submit,
    wait_for_states,
    wait_until,
    wait_until_told,
)

S = JobState
INTERVAL = 0.1
# Float rounding between the wall clock that schedules polls and the monotonic clock that times them.
TOLERANCE = 0.002
SAMPLE = DEFAULT_VIDEO_PATH.read_bytes()
FAST = RetryPolicy(attempts=3, deadline=5, base_delay=0.02, max_delay=0.05)



@pytest.fixture
def make_simulator(start_simulator: SimulatorFactory) -> SimulatorFactory:
    async def make(**config: Any) -> VideoServiceSimulator:
        sim = await start_simulator(**{"job_seconds": 0.4, "max_budget": None, **config})
        sim.requests_log = TimedRequestLog()  # before any request: it records when each one arrives
        return sim

    return make


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.sqlite3"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[JobStore]:
    store = await JobStore.open(db_path)
    yield store
    await store.close()


@pytest.fixture
def storage_dir(tmp_path: Path) -> Path:
    return tmp_path / "videos"


def client_for(sim: VideoServiceSimulator, http: aiohttp.ClientSession) -> TimedClient:
    return TimedClient(http, sim.base_url, SIM_KEY, timeout_seconds=2, create_retry=FAST, read_retry=FAST)


WorkerFactory = Callable[..., JobWorker]


@pytest.fixture
async def make_worker(storage_dir: Path) -> AsyncIterator[WorkerFactory]:
    workers: list[JobWorker] = []

    def make(
        store: JobStore,
        client: TimedClient,
        deliverer: Deliverer,
        *,
        clock: Callable[[], float] = time.time,
        **config: Any,
    ) -> JobWorker:
        options: dict[str, Any] = {
            "storage_dir": storage_dir,
            "poll_interval": INTERVAL,
            "download_retry": FAST_STEPS,
            "upload_retry": FAST_STEPS,
            "notice_retry": FAST_STEPS,
            "idle_wake": 0.5,
            "database_retry": FAST_STEPS,
            **config,
        }
        worker = JobWorker(store, client, deliverer, WorkerConfig(**options), clock=clock)
        workers.append(worker)
        return worker

    yield make
    for worker in workers:
        await worker.stop()


#: Step retries compressed for tests: the counts stay those of a policy, the waits are short.
FAST_STEPS = RetryPolicy(attempts=5, deadline=5.0, base_delay=0.05, max_delay=0.05, jitter=0.0)


def spacings(starts: list[float]) -> list[float]:
    return [later - earlier for earlier, later in pairwise(starts)]


def max_in_flight(client: TimedClient) -> int:
    edges = sorted([(c.started, 1) for c in client.status_calls] + [(c.ended, -1) for c in client.status_calls])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


# -- the happy path ---------------------------------------------------------------------------------


async def test_one_job_end_to_end(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.45)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    job = await submit(store, client)
    worker = make_worker(store, client, deliverer)
    worker.start()

    [done] = await wait_for_states(store, [job.id], [S.DELIVERED])

    assert [d.data for d in deliverer.deliveries] == [SAMPLE]
    assert deliverer.deliveries[0].state == S.DOWNLOADED
    assert done.delivered_message_id == 1 and done.delivered_channel_id == job.channel_id
    assert done.charged_yen == PRICE_YEN and sim.spend == PRICE_YEN
    assert (sim.creates_received, sim.download_requests) == (1, 1)
    assert [c.outcome for c in client.status_calls][-1] == "completed"
    assert {"pending", "in_progress"} <= {c.outcome for c in client.status_calls}
    assert deliverer.announcements == []
    # Delivered, so the local copy is gone (keep_delivered_videos is off by default).
    assert done.file_path is not None and not Path(done.file_path).exists()


async def test_fifty_concurrent_jobs(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.3, job_seconds_max=0.6)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    jobs = [await submit(store, client, new_job(prompt=f"scene {n}")) for n in range(50)]
    started = time.monotonic()
    worker = make_worker(store, client, deliverer, max_concurrency=8)
    worker.start()

    done = await wait_for_states(store, [j.id for j in jobs], [S.DELIVERED], timeout=20)
    elapsed = time.monotonic() - started

    assert elapsed < 8, f"50 short jobs took {elapsed:.1f} s"
    assert (sim.creates_received, sim.creates_accepted, sim.download_requests) == (50, 50, 50)
    assert sorted(d.job_id for d in deliverer.deliveries) == sorted(j.id for j in jobs)
    assert all(d.data == SAMPLE for d in deliverer.deliveries)
    assert sum(j.charged_yen for j in done) == sim.spend == 50 * PRICE_YEN
    assert max_in_flight(client) <= 8
    assert client.overlapping_polls() == []
    starts = client.starts_by_job()
    assert set(starts) == {j.service_job_id for j in jobs}
    for service_id, times in starts.items():
        assert min(spacings(times), default=INTERVAL) >= INTERVAL - TOLERANCE, service_id


async def test_poll_spacing_never_below_interval_when_polls_queue(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    """Few slots and many jobs: a poll that waited for a slot must not bring the next one closer."""
    sim = await make_simulator(job_seconds=1.0)
    client = client_for(sim, http)
    jobs = [await submit(store, client, new_job(prompt=f"scene {n}")) for n in range(12)]
    worker = make_worker(store, client, RecordingDeliverer(), max_concurrency=2)
    worker.start()

    async def pester() -> None:
        # New jobs being recorded wake the worker at any moment; that must not add polls.
        while True:
            worker.wake()
            await asyncio.sleep(0.005)

    pesterer = asyncio.create_task(pester())
    try:
        await wait_for_states(store, [j.id for j in jobs], [S.DELIVERED], timeout=15)
    finally:
        pesterer.cancel()

    starts = client.starts_by_job()
    assert all(len(times) >= 4 for times in starts.values()), {k: len(v) for k, v in starts.items()}
    closest = min(min(spacings(times)) for times in starts.values())
    assert closest >= INTERVAL - TOLERANCE, f"two polls of one job {closest * 1000:.1f} ms apart"


async def test_an_overdue_job_is_not_polled_after_newer_ones(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    """One slot, every poll due at once: the job past its model's learned window (overdue, so likely done)
    goes by its due time like the others, not behind every job still inside the window."""
    sim = await make_simulator(job_seconds=30.0)
    client = client_for(sim, http)
    jobs = [await submit(store, client, new_job(prompt=f"scene {n}")) for n in range(4)]
    now = time.time()
    overdue, *inside = jobs
    await store.update(overdue.id, accepted_at=now - 60.0, next_poll_at=now - 2.0)
    for job in inside:
        await store.update(job.id, accepted_at=now - 1.0, next_poll_at=now - 1.0)
    worker = make_worker(store, client, RecordingDeliverer(), max_concurrency=1)
    for n in range(20):
        worker.durations.record(MODEL, 0.2 + n * 0.25)  # all done within 5 s

    worker.start()

    async def all_polled() -> bool:
        return len(client.starts_by_job()) == len(jobs)

    await wait_until(all_polled)
    first = [call.service_job_id for call in client.status_calls]
    assert first[0] == overdue.service_job_id, first


async def test_a_slow_answer_is_never_overtaken_by_a_second_poll(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    store: JobStore,
    make_worker: WorkerFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Status answers slower than the interval: one request per job at a time, and no bogus transitions."""
    sim = await make_simulator(job_seconds=0.5)
    client = client_for(sim, http)
    client.status_latency = INTERVAL * 2.5
    deliverer = RecordingDeliverer()
    jobs = [await submit(store, client, new_job(prompt=f"scene {n}")) for n in range(3)]
    worker = make_worker(store, client, deliverer)
    worker.start()

    await wait_for_states(store, [j.id for j in jobs], [S.DELIVERED])
    assert client.overlapping_polls() == []
    assert sorted(d.job_id for d in deliverer.deliveries) == sorted(j.id for j in jobs)
    assert [r for r in caplog.records if r.levelname == "ERROR"] == []
    starts = client.starts_by_job()
    assert min(min(spacings(times)) for times in starts.values()) >= INTERVAL - TOLERANCE


async def test_429_with_retry_after_pauses_all_polling(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=1.6)
    log = sim.requests_log
    assert isinstance(log, TimedRequestLog)
    client = client_for(sim, http)
    jobs = [await submit(store, client, new_job(prompt=f"scene {n}")) for n in range(5)]
    worker = make_worker(store, client, RecordingDeliverer())
    worker.start()

    async def polled_twice() -> bool:
        return len(client.status_calls) >= 10

    await wait_until(polled_twice)
    sim.inject("status", 429, retry_after=0.5)

    async def limited() -> bool:
        return any(c.outcome == "RateLimited" for c in client.status_calls)

    await wait_until(limited)
    told = next(c for c in client.status_calls if c.outcome == "RateLimited")
    await asyncio.sleep(0.7)

    # Nothing left the bot during the pause…
    resumed = [c.started for c in client.status_calls if c.started >= told.ended]
    assert resumed, "polling never resumed"
    assert min(resumed) - told.ended >= 0.5 - TOLERANCE
    assert min(resumed) - told.ended < 0.5 + INTERVAL + 0.1, "polling resumed much later than Retry-After"
    # …and nothing reached the service, apart from requests already on the wire when the 429 came back.
    window = [at for at, _ in log.arrivals(JOBS_PREFIX) if told.ended + 0.05 <= at < told.ended + 0.5 - TOLERANCE]
    assert window == []

    await wait_for_states(store, [j.id for j in jobs], [S.DELIVERED], timeout=10)


async def test_429_without_retry_after_uses_the_configured_backoff(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.8)
    client = client_for(sim, http)
    job = await submit(store, client)
    sim.inject("status", 429)
    worker = make_worker(store, client, RecordingDeliverer(), rate_limit_backoff=0.4)
    worker.start()

    await wait_for_states(store, [job.id], [S.DELIVERED])
    first, second = client.status_calls[:2]
    assert first.outcome == "RateLimited"
    assert second.started - first.ended >= 0.4 - TOLERANCE


# -- failures ---------------------------------------------------------------------------------------


async def test_failed_job_is_announced_once_with_its_id_and_not_resubmitted(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.3, fail_rate=1.0)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    job = await submit(store, client)
    worker = make_worker(store, client, deliverer)
    worker.start()

    [failed] = await wait_for_states(store, [job.id], [S.FAILED])
    polls = len(client.status_calls)
    await asyncio.sleep(INTERVAL * 4)

    assert [(a.event, a.service_job_id) for a in deliverer.announcements] == [("failed", job.service_job_id)]
    assert len(client.status_calls) == polls, "a failed job is not polled any more"
    assert (sim.creates_received, sim.download_requests) == (1, 0)
    assert deliverer.delivery_attempts == []
    assert failed.charged_yen == PRICE_YEN and failed.finished_at is not None


async def test_download_retried_after_server_errors(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    store: JobStore,
    make_worker: WorkerFactory,
    storage_dir: Path,
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    job = await submit(store, client)
    # Three 5xx answers exhaust the client's own retries; the worker then tries the download again.
    sim.inject("download", 503, times=4)
    # The upload then gets all its own attempts: the download's failure is not counted against it.
    deliverer.fail_next(FAST_STEPS.attempts - 1, ConnectionResetError("Discord went away"))
    worker = make_worker(store, client, deliverer)
    worker.start()

    await wait_for_states(store, [job.id], [S.DELIVERED])
    assert sim.download_requests == 5
    assert [d.data for d in deliverer.deliveries] == [SAMPLE]
    assert list(storage_dir.glob("*.part")) == []
    assert sim.creates_received == 1


async def test_a_video_the_service_no_longer_gives_ends_failed_with_its_id(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    store: JobStore,
    make_worker: WorkerFactory,
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    job = await submit(store, client)
    sim.inject("download", 404, times=10)
    three = RetryPolicy(attempts=3, deadline=5.0, base_delay=0.01, max_delay=0.01)
    worker = make_worker(store, client, deliverer, download_retry=three)
    worker.start()

    failed = await wait_until_told(store, job.id, S.FAILED)
    assert sim.download_requests == 3  # one request per attempt, and no more than the policy's attempts
    assert failed.step_attempts == 3
    assert "could not be downloaded" in (failed.last_error or "") and "404" in (failed.last_error or "")
    assert [a.event for a in deliverer.announcements] == ["failed"]
    assert failed.told_at is not None
    assert deliverer.deliveries == [] and sim.creates_received == 1


async def test_transient_delivery_errors_are_retried(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    deliverer.fail_next(2, ConnectionResetError("Discord went away"))
    job = await submit(store, client)
    worker = make_worker(store, client, deliverer)
    worker.start()

    [done] = await wait_for_states(store, [job.id], [S.DELIVERED])
    assert len(deliverer.delivery_attempts) == 3
    assert len(deliverer.deliveries) == 1
    assert deliverer.announcements == []
    assert sim.download_requests == 1, "a failed upload does not download again"
    assert done.file_path is not None and not Path(done.file_path).exists()


async def test_undeliverable_job_keeps_its_file_and_tells_the_requester(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    deliverer.fail_next(1, Undeliverable("the channel and the DMs are closed"))
    job = await submit(store, client)
    worker = make_worker(store, client, deliverer)
    worker.start()

    [stuck] = await wait_for_states(store, [job.id], [S.UNDELIVERABLE])
    await asyncio.sleep(0.2)
    assert len(deliverer.delivery_attempts) == 1, "a final refusal is not retried"
    assert deliverer.events_for(job.id) == ["undeliverable"]
    assert stuck.last_error == "the channel and the DMs are closed"
    assert stuck.file_path is not None and Path(stuck.file_path).read_bytes() == SAMPLE


@pytest.mark.parametrize("keep", [False, True])
async def test_local_file_after_delivery(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    store: JobStore,
    make_worker: WorkerFactory,
    keep: bool,
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    job = await submit(store, client)
    worker = make_worker(store, client, RecordingDeliverer(), keep_delivered_videos=keep)
    worker.start()

    [done] = await wait_for_states(store, [job.id], [S.DELIVERED])
    assert done.file_path is not None
    video = Path(done.file_path)

    async def removed() -> bool:  # right after the record
        return not video.exists()

    if keep:
        await asyncio.sleep(0.3)
        assert video.exists()
    else:
        await wait_until(removed)


# -- slow and stalled jobs --------------------------------------------------------------------------


async def test_slow_notice_once_then_stalled_after_six_hours(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    """The real thresholds (30 min, 6 h) on a clock the test moves forward."""
    sim = await make_simulator(job_seconds=600)
    client = client_for(sim, http)
    clock = ShiftedClock()
    deliverer = RecordingDeliverer(clock=clock)
    job = await submit(store, client)
    worker = make_worker(store, client, deliverer, clock=clock)

    async def polls_after(count: int, extra: int) -> None:
        async def enough() -> bool:
            return len(client.status_calls) >= count + extra

        await wait_until(enough)

    clock.offset = 29 * 60
    worker.start()
    await polls_after(0, 3)
    assert deliverer.announcements == []

    clock.offset = 31 * 60
    await polls_after(len(client.status_calls), 4)
    assert deliverer.events_for(job.id) == ["slow"], "told once, however many polls follow"
    assert (await store.get(job.id)).slow_notice_sent
    assert (await store.get(job.id)).state in (S.PENDING, S.IN_PROGRESS)

    clock.offset = 6 * 3600 + 1
    [stalled] = await wait_for_states(store, [job.id], [S.STALLED])
    polls = len(client.status_calls)
    await asyncio.sleep(INTERVAL * 4)
    assert deliverer.events_for(job.id) == ["slow", "stalled"]
    assert len(client.status_calls) == polls, "a stalled job is not polled any more"
    assert stalled.last_error and sim.creates_received == 1


# -- progress edits of the /video reply ---------------------------------------------------------------


async def test_progress_edits_on_state_changes_while_the_token_lives(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.6)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    job = await submit(
        store, client, new_job(interaction_token="token", interaction_expires_at=time.time() + 15 * 60)
    )
    worker = make_worker(store, client, deliverer)
    worker.start()

    await wait_for_states(store, [job.id], [S.DELIVERED])

    async def shown() -> bool:  # the edit follows the record
        return S.DELIVERED in deliverer.progress_states(job.id)

    await wait_until(shown)
    assert len(client.status_calls) >= 5, "several polls saw no change"
    assert deliverer.progress_states(job.id) == [S.IN_PROGRESS, S.COMPLETED, S.DOWNLOADED, S.DELIVERED]


async def test_a_stall_inside_the_token_lifetime_is_shown(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=600)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    job = await submit(
        store, client, new_job(interaction_token="token", interaction_expires_at=time.time() + 15 * 60)
    )
    worker = make_worker(store, client, deliverer, slow_after=0.2, give_up_after=0.4)
    worker.start()

    await wait_for_states(store, [job.id], [S.STALLED])

    async def shown() -> bool:
        return S.STALLED in deliverer.progress_states(job.id)

    await wait_until(shown)
    assert deliverer.events_for(job.id) == ["slow", "stalled"]
    assert deliverer.progress_states(job.id)[-1] == S.STALLED


async def test_no_progress_edits_once_the_token_expired(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=1.2)
    client = client_for(sim, http)
    clock = ShiftedClock()
    deliverer = RecordingDeliverer(clock=clock)
    expires_at = time.time() + 15 * 60
    job = await submit(store, client, new_job(interaction_token="token", interaction_expires_at=expires_at))
    tokenless = await submit(store, client, new_job(prompt="no interaction"))
    worker = make_worker(store, client, deliverer, clock=clock)
    worker.start()

    async def in_progress_shown() -> bool:
        return S.IN_PROGRESS in deliverer.progress_states(job.id)

    await wait_until(in_progress_shown)
    clock.offset = 15 * 60 + 1  # the interaction token is now dead
    await wait_for_states(store, [job.id, tokenless.id], [S.DELIVERED])

    assert deliverer.progress_states(job.id) == [S.IN_PROGRESS]
    assert all(edit.at < expires_at for edit in deliverer.progress)
    assert deliverer.progress_states(tokenless.id) == []
    assert len(deliverer.deliveries) == 2


# -- restarts -----------------------------------------------------------------------------------------


async def _completed_at_service(sim: VideoServiceSimulator, job: Job) -> None:
    assert job.service_job_id is not None
    remote = sim.jobs[job.service_job_id]
    await asyncio.sleep(max(0.0, remote.completed_at - time.monotonic()) + 0.01)


@pytest.mark.parametrize("state", ["submitting", "pending", "completed", "downloaded"])
async def test_restart_resumes_without_a_second_create(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    db_path: Path,
    storage_dir: Path,
    make_worker: WorkerFactory,
    state: str,
) -> None:
    sim = await make_simulator(job_seconds=0.3)
    client = client_for(sim, http)

    # Before the restart: the state as the bot left it on disk.
    before = await JobStore.open(db_path)
    job = await before.add_submission(new_job())
    remote = await client.create(job.prompt, job.seed)
    job = await before.transition(job.id, JobState.SUBMITTING)
    if state != "submitting":
        job = await before.mark_accepted(job.id, remote.id, PRICE_YEN, next_poll_at=time.time())
    if state in ("completed", "downloaded"):
        await _completed_at_service(sim, job)
        job = await before.transition(job.id, S.COMPLETED, finished_at=time.time())
    if state == "downloaded":
        destination = storage_dir / f"{job.id}.mp4"
        await client.download(remote.id, destination, max_bytes=100 * 1024 * 1024)
        job = await before.transition(job.id, S.DOWNLOADED, file_path=str(destination))
    await before.close()
    creates, downloads = sim.creates_received, sim.download_requests
    assert creates == 1

    # After: a fresh store on the same file, the start-up recovery, a fresh worker.
    after = await JobStore.open(db_path)
    deliverer = RecordingDeliverer()
    worker = make_worker(after, client, deliverer)
    try:
        recovered = await after.recover_after_restart()
        worker.start()
        if state == "submitting":
            assert [j.id for j in recovered] == [job.id]
            await asyncio.sleep(INTERVAL * 5)
            unknown = await after.get(job.id)
            assert unknown.state == S.UNKNOWN
            assert deliverer.delivery_attempts == [] and client.status_calls == []
            # Its requester is told, through the interaction while it lives, once.
            assert [(a.event, a.via_interaction) for a in deliverer.announcements] == [("unknown", True)]
            assert unknown.told_at is not None
        else:
            assert recovered == []
            [done] = await wait_for_states(after, [job.id], [S.DELIVERED])
            assert [d.data for d in deliverer.deliveries] == [SAMPLE]
            assert done.service_job_id == remote.id and done.charged_yen == PRICE_YEN
            if state == "pending":
                assert sim.download_requests == downloads + 1
            if state == "completed":
                assert client.status_calls == [], "a completed job is downloaded without asking again"
                assert sim.download_requests == downloads + 1
            if state == "downloaded":
                assert client.status_calls == [] and sim.download_requests == downloads
        assert sim.creates_received == creates
    finally:
        await worker.stop()
        await after.close()


async def test_restart_mid_polling_picks_up_where_it_stopped(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    db_path: Path,
    make_worker: WorkerFactory,
) -> None:
    sim = await make_simulator(job_seconds=0.9)
    client = client_for(sim, http)
    first_store = await JobStore.open(db_path)
    job = await submit(first_store, client)
    first = make_worker(first_store, client, RecordingDeliverer())
    first.start()
    await wait_for_states(first_store, [job.id], [S.IN_PROGRESS])
    await first.stop()
    await first_store.close()

    second_store = await JobStore.open(db_path)
    deliverer = RecordingDeliverer()
    second = make_worker(second_store, client, deliverer)
    try:
        second.start()
        await wait_for_states(second_store, [job.id], [S.DELIVERED])
        assert [d.job_id for d in deliverer.deliveries] == [job.id]
        assert (sim.creates_received, sim.download_requests) == (1, 1)
    finally:
        await second.stop()
        await second_store.close()


async def test_uploads_that_keep_failing_end_undeliverable_within_the_policy(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    deliverer.fail_next(100, ConnectionResetError("Discord went away"))
    job = await submit(store, client)
    worker = make_worker(store, client, deliverer)  # FAST_STEPS: 5 attempts
    worker.start()

    ended = await wait_until_told(store, job.id, S.UNDELIVERABLE)
    assert len(deliverer.delivery_attempts) == FAST_STEPS.attempts == ended.step_attempts
    assert deliverer.events_for(job.id) == ["undeliverable"]
    assert ended.file_path is not None and Path(ended.file_path).exists(), "the file stays for /status"


async def test_no_disk_space_waits_tells_once_and_gives_up_in_time(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    store: JobStore,
    make_worker: WorkerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    job = await submit(store, client)
    tries: list[float] = []

    async def full(*args: Any, **kwargs: Any) -> int:
        tries.append(time.time())
        raise InsufficientStorage("no space left on device")

    monkeypatch.setattr(client, "download", full)
    worker = make_worker(store, client, deliverer, storage_retry_seconds=0.05, storage_notice_after=0.2,
                         storage_wait_limit=0.6)
    worker.start()

    failed = await wait_until_told(store, job.id, S.FAILED)
    assert deliverer.events_for(job.id) == ["storage_wait", "failed"], "told once while waiting, then the end"
    assert "disk space" in (failed.last_error or "")
    assert len(tries) >= 3, "it kept trying while it waited"
    assert failed.step_attempts == 0, "waiting for disk space spends none of the download's attempts"


async def test_log_lines_about_a_job_name_its_request_job_server_and_member(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    store: JobStore,
    make_worker: WorkerFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    job = await submit(store, client)
    worker = make_worker(store, client, RecordingDeliverer())
    with caplog.at_level(logging.INFO, logger="bot.jobs.worker"):
        worker.start()
        await wait_for_states(store, [job.id], [S.DELIVERED])
    about_the_job = [r for r in caplog.records if r.name == "bot.jobs.worker" and job.reference in r.getMessage()]
    assert about_the_job, "the worker logged nothing about the job"
    for record in about_the_job:
        assert (record.request, record.job, record.guild, record.member) == (  # type: ignore[attr-defined]
            job.reference, job.service_job_id, job.guild_id, job.user_id)
        assert job.prompt not in record.getMessage()


async def test_polls_while_the_service_cannot_be_reached_say_how_to_find_out_why(
    make_simulator: SimulatorFactory,
    http: aiohttp.ClientSession,
    store: JobStore,
    make_worker: WorkerFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = await make_simulator(job_seconds=30)
    client = client_for(sim, http)
    job = await submit(store, client)
    await sim.stop()  # the service goes away: every poll is refused a connection
    worker = make_worker(store, client, RecordingDeliverer())
    with caplog.at_level(logging.WARNING, logger="bot.jobs.worker"):
        worker.start()

        async def failed_poll() -> bool:
            return any("polling" in message for message in caplog.messages)

        await wait_until(failed_poll)
    [line, *_] = [message for message in caplog.messages if "polling" in message]
    assert line.startswith(f"polling {job.reference} ({job.service_job_id}) failed: ")
    assert line.endswith("; `python -m bot check` tells what is wrong")


async def test_the_sweep_leaves_requests_being_told_right_now_and_tells_the_rest_once(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator()
    deliverer = RecordingDeliverer()
    worker = make_worker(store, client_for(sim, http), deliverer)
    rejected = await store.transition((await store.add_submission(new_job())).id, S.REJECTED, last_error="no")
    interrupted = await store.transition((await store.add_submission(new_job())).id, S.INTERRUPTED)

    # Both changed a moment ago: within the grace, whoever moved them may be telling them right now.
    assert await worker.tell_untold(grace=60.0) == 0
    assert deliverer.announcements == []
    # Past the grace (as at start-up): each is told once, through the interaction first, and recorded.
    assert await worker.tell_untold(grace=0.0) == 2
    assert [(a.job_id, a.event, a.via_interaction) for a in deliverer.announcements] == [
        (rejected.id, "rejected", True), (interrupted.id, "interrupted", True)]
    assert await worker.tell_untold(grace=0.0) == 0, "told once"
    for job in (rejected, interrupted):
        assert (await store.get(job.id)).told_at is not None


async def test_stopping_a_worker_woken_at_the_same_moment_still_stops_it(
    store: JobStore, make_worker: WorkerFactory
) -> None:
    """A wake-up and the cancellation of stop() in the same turn of the loop: the cancellation must win (Python
    3.11's wait_for let the wake-up swallow it, and the worker ran on while stop() waited forever)."""
    for _ in range(3):
        worker = make_worker(store, MagicMock(spec=TimedClient), RecordingDeliverer(), idle_wake=30.0)
        worker.start()
        await asyncio.sleep(0.3)  # long enough to be in its idle sleep (nothing to do: no jobs)
        worker.wake()
        async with asyncio.timeout(5):
            await worker.stop()
        assert not worker.running


# -- the database failing mid-way: every request still ends, once, and nothing is posted twice ----------------

ENDED = [S.STALLED, S.FAILED, S.DELIVERED, S.UNDELIVERABLE]
#: Past the worker's give-up age (STALLED_AFTER_SECONDS, 6 h).
PAST_GIVE_UP = 6 * 3600 + 1


def failing_once(store: JobStore, target: JobState) -> list[StoreUnavailable]:
    """The store's next move to `target` fails (database full); the list empties once it has."""
    real = store.transition
    failures = [StoreUnavailable("the database could not be written: database or disk is full")]

    async def transition(job_id: int, to: JobState, **changes: Any) -> Job:
        if to == target and failures:
            raise failures.pop()
        return await real(job_id, to, **changes)

    store.transition = transition  # type: ignore[method-assign, assignment]
    return failures


@pytest.mark.parametrize("failing", [S.DOWNLOADED, S.DELIVERED], ids=["download", "post"])
async def test_a_failed_record_is_written_again_without_a_restart_and_the_video_is_posted_once(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory,
    failing: JobState,
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    failures = failing_once(store, failing)
    job = await submit(store, client)
    make_worker(store, client, deliverer).start()

    await wait_for_states(store, [job.id], [S.DELIVERED], timeout=5)
    assert not failures, "the record failed once"
    assert [d.job_id for d in deliverer.deliveries] == [job.id]
    assert (await store.get(job.id)).delivered_message_id is not None


async def test_a_stop_while_a_post_is_being_recorded_lets_the_record_finish(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    """docker stop right after a post: the write that records it is not cut off, or the next start would post
    the video again."""
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    real = store.transition
    recording = asyncio.Event()

    async def slow_delivered(job_id: int, to: JobState, **changes: Any) -> Job:
        if to == S.DELIVERED:
            recording.set()
            await asyncio.sleep(0.3)  # a slow disk
        return await real(job_id, to, **changes)

    store.transition = slow_delivered  # type: ignore[method-assign, assignment]
    job = await submit(store, client)
    worker = make_worker(store, client, deliverer)
    worker.start()
    await asyncio.wait_for(recording.wait(), 5)

    await worker.stop()

    assert (await store.get(job.id)).state == S.DELIVERED
    assert [d.job_id for d in deliverer.deliveries] == [job.id]


async def test_a_post_whose_record_committed_but_lost_its_answer_is_recorded_once(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    """The database took the write and its answer was lost (a COMMIT whose reply never came): the retry finds it
    recorded, and the job is not counted as a failed upload."""
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    real = store.transition
    lost = [StoreUnavailable("the connection closed after the COMMIT")]

    async def answer_lost(job_id: int, to: JobState, **changes: Any) -> Job:
        done = await real(job_id, to, **changes)
        if to == S.DELIVERED and lost:
            raise lost.pop()
        return done

    store.transition = answer_lost  # type: ignore[method-assign, assignment]
    job = await submit(store, client)
    make_worker(store, client, deliverer).start()

    [done] = await wait_for_states(store, [job.id], [S.DELIVERED], timeout=5)
    assert done.file_path is not None
    video = Path(done.file_path)

    async def removed() -> bool:  # after the record, found on the retry
        return not video.exists()

    await wait_until(removed)
    done = await store.get(job.id)
    assert not lost and (done.step_attempts, done.last_error) == (0, None)
    assert [d.job_id for d in deliverer.deliveries] == [job.id]


async def test_a_stop_waits_a_bounded_time_for_a_record_that_hangs(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr("bot.jobs.worker.delivery.LAST_WRITE_SECONDS", 0.3)
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    real = store.transition
    recording = asyncio.Event()
    rolled_back = asyncio.Event()

    async def hangs(job_id: int, to: JobState, **changes: Any) -> Job:
        if to == S.DELIVERED:
            recording.set()
            try:
                await asyncio.Event().wait()  # a database that never answers,
            except asyncio.CancelledError:
                await rolled_back.wait()  # and takes its time to give up (a ROLLBACK that waits too)
                raise
        return await real(job_id, to, **changes)

    store.transition = hangs  # type: ignore[method-assign, assignment]
    job = await submit(store, client)
    worker = make_worker(store, client, RecordingDeliverer())
    worker.start()
    await asyncio.wait_for(recording.wait(), 5)

    started = time.monotonic()
    await worker.stop()

    assert time.monotonic() - started < 2.0
    assert (await store.get(job.id)).state == S.DOWNLOADED
    assert "the bot stopped before it was recorded" in caplog.text
    rolled_back.set()  # the write let go ends now
    await asyncio.sleep(0.05)


async def test_a_post_the_database_never_records_is_left_for_the_next_start_and_not_posted_again(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    real = store.transition

    async def never_delivered(job_id: int, to: JobState, **changes: Any) -> Job:
        if to == S.DELIVERED:
            raise StoreUnavailable("the database could not be written: database or disk is full")
        return await real(job_id, to, **changes)

    store.transition = never_delivered  # type: ignore[method-assign, assignment]
    job = await submit(store, client)
    make_worker(store, client, deliverer).start()

    async def given_up() -> bool:
        return "it waits for the next start, which posts it again" in caplog.text

    await wait_until(given_up)
    await asyncio.sleep(0.3)
    assert [d.job_id for d in deliverer.deliveries] == [job.id]
    assert (await store.get(job.id)).state == S.DOWNLOADED
    assert f"task finish-{job.id} failed" not in caplog.text, "handled, not a task that failed"


async def test_the_database_policy_counts_one_outage_not_every_blip_in_a_jobs_life(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    """One failure allowed per outage: the download's record fails once, then an upload's count fails once; the
    second is a new outage, so the job goes on instead of waiting for the next start."""
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    deliverer = RecordingDeliverer()
    deliverer.fail_next(1, OSError("the connection to Discord was reset"))
    failing_once(store, S.DOWNLOADED)
    real_update = store.update
    update_failures = [StoreUnavailable("the database could not be written: database is locked")]

    async def update(job_id: int, **changes: Any) -> Job:
        if "step_attempts" in changes and update_failures:
            raise update_failures.pop()
        return await real_update(job_id, **changes)

    store.update = update  # type: ignore[method-assign]
    job = await submit(store, client)
    one_retry = RetryPolicy(attempts=2, deadline=5.0, base_delay=0.05, max_delay=0.05, jitter=0.0)
    make_worker(store, client, deliverer, database_retry=one_retry).start()

    await wait_for_states(store, [job.id], [S.DELIVERED], timeout=5)
    assert not update_failures


async def test_a_database_hiccup_while_the_worker_resumes_does_not_stop_it(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=0.2)
    client = client_for(sim, http)
    job = await submit(store, client)
    failures = fail_once(store, "jobs_in_states", StoreUnavailable("the database could not be read: it is locked"))
    worker = make_worker(store, client, RecordingDeliverer())
    worker.start()

    await wait_for_states(store, [job.id], [S.DELIVERED], timeout=5)
    assert not failures and worker.running


async def test_a_read_only_database_tells_each_requester_once_and_reaches_them_all(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator()
    deliverer = RecordingDeliverer()
    worker = make_worker(store, client_for(sim, http), deliverer)
    first = await store.transition((await store.add_submission(new_job())).id, S.REJECTED, last_error="no")
    second = await store.transition((await store.add_submission(new_job())).id, S.INTERRUPTED)
    write_steps = store.database.write_steps

    async def read_only(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the database could not be written: attempt to write a readonly database")

    store.database.write_steps = read_only  # type: ignore[method-assign]
    for _ in range(3):
        assert await worker.tell_untold(grace=0.0) == 0  # none recorded
    assert sorted(a.job_id for a in deliverer.announcements) == [first.id, second.id]

    store.database.write_steps = write_steps  # type: ignore[method-assign]
    assert await worker.tell_untold(grace=0.0) == 2  # recorded now, without telling them again
    assert sorted(a.job_id for a in deliverer.announcements) == [first.id, second.id]
    assert await store.untold(older_than=float("inf"), max_notice_attempts=5) == []


# -- 429s on polling (the service misbehaving) -------------------------------------------------------------------------


async def test_a_service_that_answers_every_poll_429_still_ends_the_request(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory
) -> None:
    sim = await make_simulator(job_seconds=600)
    client = client_for(sim, http)
    clock = ShiftedClock()
    job = await submit(store, client)
    sim.inject("status", 429, times=100_000, retry_after=0.05)
    clock.offset = PAST_GIVE_UP  # a job answered 503 or garbage this long would be given up
    make_worker(store, client, RecordingDeliverer(clock=clock), clock=clock).start()

    await wait_for_states(store, [job.id], [S.STALLED], timeout=5)
    assert {call.outcome for call in client.status_calls} == {"RateLimited"}


@pytest.mark.parametrize("retry_after", ["1000000000", "9" * 400], ids=["a-billion-seconds", "infinite"])
async def test_one_429_with_an_outlandish_retry_after_pauses_the_polls_a_bounded_time(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory,
    monkeypatch: pytest.MonkeyPatch, retry_after: str,
) -> None:
    sim = await make_simulator(job_seconds=0.3)
    monkeypatch.setattr("bot.simulator.app._format_retry_after", lambda seconds: retry_after)
    client = client_for(sim, http)
    job = await submit(store, client)
    sim.inject("status", 429, retry_after=1)  # once
    make_worker(store, client, RecordingDeliverer(), max_rate_limit_pause=0.5).start()

    async def limited() -> bool:
        return any(call.outcome == "RateLimited" for call in client.status_calls)

    await wait_until(limited)
    polls = len(client.status_calls)
    await asyncio.sleep(0.3)
    assert len(client.status_calls) == polls, "paused, as the service asked"
    await wait_for_states(store, [job.id], [S.DELIVERED], timeout=5)


async def test_the_sweep_removes_a_partial_download_a_killed_run_left(
    make_simulator: SimulatorFactory, http: aiohttp.ClientSession, store: JobStore, make_worker: WorkerFactory,
    storage_dir: Path,
) -> None:
    sim = await make_simulator()
    storage_dir.mkdir(parents=True, exist_ok=True)
    left = storage_dir / ".3.mp4.q1w2.part"
    left.write_bytes(b"\0" * 1024)
    old = time.time() - 120
    os.utime(left, (old, old))
    make_worker(store, client_for(sim, http), RecordingDeliverer(), abandoned_download_after=60.0).start()

    async def removed() -> bool:
        return not left.exists()

    await wait_until(removed)
