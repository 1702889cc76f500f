"""VideoRequests: what a /video does between the interaction and the worker."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import build_client, server_rules
from bot.core.errors import SubmissionFailed
from bot.core.notices import Notice
from bot.core.retry import CREATE_RETRY, READ_RETRY, RECORD_RETRY, RetryPolicy
from bot.core.tasks import finish_despite_cancels
from bot.jobs.intake import RECORDING_AT_ONCE, RequestCancelled, VideoRequests
from bot.service.catalogue import BUILT_IN, DEFAULT_MODEL
from bot.service.pacing import Pacer
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import IllegalTransition, Job, JobState, JobStore, LeaseLost, NewJob, StoreUnavailable
from tests.conftest import SIM_KEY, fail_once
from tests.frontend.cogs.helpers import bot_settings


def request(prompt: str) -> NewJob:
    return NewJob(model=DEFAULT_MODEL.id, prompt=prompt, seed=None, user_id=1, guild_id=10, channel_id=100)


RequestsOpener = Callable[..., Awaitable[tuple[JobStore, VideoRequests]]]


@dataclass
class HeldAnswer:
    """`committed`: the write-ahead (the move to `submitting`) is in the database; its answer is held until
    `release` is set, as if still on its way back from the database's thread."""

    committed: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


def hold_write_ahead_answer(store: JobStore) -> HeldAnswer:
    held = HeldAnswer()
    transition = store.transition

    async def answered_late(job_id: int, target: JobState, **changes: Any) -> Job:
        moved = await transition(job_id, target, **changes)
        if target == JobState.SUBMITTING:
            held.committed.set()
            await held.release.wait()
        return moved

    store.transition = answered_late  # type: ignore[method-assign]
    return held


async def send_until_write_ahead(
    store: JobStore, requests: VideoRequests, prompt: str
) -> tuple[Job, asyncio.Task[Job], HeldAnswer]:
    """Record a request and start sending it; returns once its write-ahead is committed, its answer held."""
    held = hold_write_ahead_answer(store)
    job = await requests.record(request(prompt))
    sending = asyncio.create_task(requests.send(job))
    async with asyncio.timeout(5.0):
        await held.committed.wait()
    return job, sending, held


@pytest.fixture
async def open_requests(
    simulator: VideoServiceSimulator, http_session: aiohttp.ClientSession, tmp_path: Path
) -> AsyncIterator[RequestsOpener]:
    """A store and the request path on it, against the simulator, with no cooldown; `env` adds settings."""
    stores: list[JobStore] = []

    async def open_one(*, pacer: Pacer | None = None, tell: Callable[[Job, Notice], None] | None = None,
                       record_retry: RetryPolicy = RECORD_RETRY, **env: str) -> tuple[JobStore, VideoRequests]:
        settings = bot_settings(simulator.base_url, SIM_KEY, tmp_path / "bot.sqlite3", VIDEO_COOLDOWN_SECONDS="0",
                                **env)
        store = await JobStore.open(settings.database_path)
        stores.append(store)
        client = build_client(settings, http_session, pacer=pacer, create_retry=CREATE_RETRY, read_retry=READ_RETRY)
        return store, VideoRequests(store, client, settings, server_rules(store, settings), catalogue=BUILT_IN,
                                    tell=tell or (lambda job, notice: None), record_retry=record_retry)

    yield open_one
    for store in stores:
        await store.close()


async def test_a_request_waiting_for_its_turn_is_not_yet_sending(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """A stop while a create waits for the rate limiter must leave `received` (interrupted, 0 yen), not `unknown`."""
    slow = Pacer(1.0)  # one request a second: each create waits for its turn
    store, requests = await open_requests(pacer=slow, MAX_ACTIVE_JOBS_PER_USER="10")
    first = await requests.record(request("first"))
    second = await requests.record(request("second"))
    sending = [asyncio.create_task(requests.send(job)) for job in (first, second)]
    # Turns, 1 s apart: key info (0 s, one read for both), create 1 (1 s), create 2 (2 s). At 0.5 s the
    # budget was read and both creates are waiting for their turn.
    await asyncio.sleep(0.5)
    states = {job.id: (await store.get(job.id)).state for job in (first, second)}
    assert states == {first.id: JobState.RECEIVED, second.id: JobState.RECEIVED}, "sending before its turn came"
    assert simulator.creates_received == 0
    await asyncio.gather(*sending)
    assert {(await store.get(job.id)).state for job in (first, second)} == {JobState.PENDING}
    assert simulator.creates_received == 2


async def test_a_request_cancelled_while_it_waits_for_its_turn_is_never_sent(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """Cancel is offered while the create waits for the pacing; `send` sees the cancel after its turn."""
    slow = Pacer(0.4)  # key info now, the create's turn 2.5 s later: past WAITING_NOTICE_SECONDS
    store, requests = await open_requests(pacer=slow)
    shown: list[int] = []

    async def waiting(job: Job) -> None:
        shown.append(job.id)
        cancelled = await requests.cancel(job.id)
        assert cancelled.state == JobState.CANCELLED and cancelled.told_at is not None

    job = await requests.record(request("cancel me"))
    with pytest.raises(RequestCancelled):
        await requests.send(job, on_waiting=waiting)
    assert shown == [job.id]
    assert (await store.get(job.id)).state == JobState.CANCELLED
    assert simulator.creates_received == 0
    # Nothing to tell it later: the click answered.
    assert await store.untold(older_than=float("inf"), max_notice_attempts=5) == []
    # Once it is on its way there is no cancel.
    sent = await requests.submit(request("too late"))
    with pytest.raises(IllegalTransition):
        await requests.cancel(sent.id)
    assert simulator.creates_received == 1


async def test_a_request_abandoned_before_it_was_sent_ends_rejected_and_is_owed_a_final_message(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """A request written down whose acknowledgement failed: it leaves the jobs in flight, nothing spent."""
    store, requests = await open_requests(MAX_ACTIVE_JOBS_PER_USER="1")
    job = await requests.record(request("never acknowledged"))
    await requests.abandon(job, "the request could not be acknowledged")
    ended = await store.get(job.id)
    assert ended.state == JobState.REJECTED and ended.told_at is None  # the sweep tells the requester
    await requests.record(request("the next one"))  # it no longer counts as in flight
    assert simulator.creates_received == 0


async def test_a_burst_of_requests_reads_the_budget_once(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """Requests that check the budget while a read is on its way share it: the rate-limited service gets one
    /key/info for the burst, not one per request, and every request is still checked and sent once."""
    store, requests = await open_requests(pacer=Pacer(1000.0), MAX_ACTIVE_JOBS_PER_USER="20")
    jobs = [await requests.record(request(f"burst {i}")) for i in range(10)]
    await asyncio.gather(*(requests.send(job) for job in jobs))
    assert simulator.key_info_requests == 1
    assert simulator.creates_received == 10
    assert {(await store.get(job.id)).state for job in jobs} == {JobState.PENDING}
    await requests.send(await requests.record(request("later")))  # a request after the burst reads again
    assert simulator.key_info_requests == 2


async def test_on_the_video_path_a_create_holds_its_turn_until_it_is_sent(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """With a Cancel offer (`on_waiting`) the turn is still the request's own: while one write-ahead stalls, a
    pacer of one turn lets no second create through, so stalled writes never release a clump of creates."""
    store, requests = await open_requests(pacer=Pacer(1000.0, turns=1), MAX_ACTIVE_JOBS_PER_USER="10")
    stalled = asyncio.Event()
    writing: list[int] = []
    transition = store.transition

    async def stalling_transition(job_id: int, target: JobState, **changes: Any) -> Job:
        if target == JobState.SUBMITTING:
            writing.append(job_id)
            await stalled.wait()
        return await transition(job_id, target, **changes)

    async def waiting(job: Job) -> None:
        pass

    store.transition = stalling_transition  # type: ignore[method-assign]
    jobs = [await requests.record(request(f"stalled {i}")) for i in range(2)]
    sending = [asyncio.create_task(requests.send(job, on_waiting=waiting)) for job in jobs]
    async with asyncio.timeout(5.0):
        while not writing:
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    assert len(writing) == 1, "a second request took a turn while the first one's create had not left"
    stalled.set()
    async with asyncio.timeout(5.0):
        await asyncio.gather(*sending)
    assert simulator.creates_received == 2
    assert {(await store.get(job.id)).state for job in jobs} == {JobState.PENDING}


@pytest.mark.parametrize("cancels", [1, 2])
async def test_a_request_stopped_during_its_write_ahead_ends_interrupted_not_maybe_charged(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener, cancels: int
) -> None:
    """A stop that cancels `send` after the write-ahead was committed but before its answer came back (a group
    commit writes it whoever still waits): nothing was sent, so the request ends interrupted and owed its final
    message, not left `submitting` for start-up to call "may have been charged". A second cancel while that
    interrupted write is on its way must not cut it off."""
    store, requests = await open_requests(pacer=Pacer(1000.0))
    job, sending, held = await send_until_write_ahead(store, requests, "stopped mid-write")
    for _ in range(cancels):
        sending.cancel()
        await asyncio.sleep(0.05)
    held.release.set()
    with pytest.raises(asyncio.CancelledError):
        await sending
    ended = await store.get(job.id)
    assert (ended.state, ended.charged_yen, ended.told_at) == (JobState.INTERRUPTED, 0, None)
    assert simulator.creates_received == 0


async def test_a_burst_of_requests_is_written_down_a_bounded_number_at_a_time(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """Reads of the rules and the admission write together: the rest of a burst waits in line, not on the
    database's queue."""
    _, requests = await open_requests()
    inside, most = 0, 0
    record = requests._record

    async def counted(new: NewJob, role_ids: Collection[int], action: str) -> Job:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        try:
            await asyncio.sleep(0.001)  # every request of the burst arrives while the first are being written
            return await record(new, role_ids, action)
        finally:
            inside -= 1

    requests._record = counted  # type: ignore[method-assign, assignment]
    burst = RECORDING_AT_ONCE * 2
    jobs = await asyncio.gather(*(requests.record(replace(request(f"burst {n}"), user_id=n)) for n in range(burst)))
    assert len({job.id for job in jobs}) == burst
    assert most == RECORDING_AT_ONCE


async def test_a_stop_ends_requests_waiting_for_their_turn_as_not_sent_and_tells_them_so(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """At shutdown a request still waiting for its create's turn ends now, interrupted with nothing spent, and its
    requester gets that answer while Discord is still there (not a restart later); one sent after the stop began
    never reaches the service."""
    store, requests = await open_requests(pacer=Pacer(1.0), MAX_ACTIVE_JOBS_PER_USER="10")
    jobs = [await requests.record(request(f"waiting {i}")) for i in range(2)]
    sending = [asyncio.create_task(requests.send(job)) for job in jobs]
    await asyncio.sleep(0.5)  # the budget read; both creates wait for their turns (1 s and 2 s)
    async with asyncio.timeout(0.5):  # not the grace: nothing was on its way
        await requests.stop_sending(grace=10.0)
    for task in sending:
        with pytest.raises(SubmissionFailed) as failed:
            await task
        assert (failed.value.kind, failed.value.final) == ("stopping", True)
    late = await requests.record(request("after the stop"))
    with pytest.raises(SubmissionFailed, match="stopping"):
        await requests.send(late)
    for job in (*jobs, late):
        ended = await store.get(job.id)
        assert (ended.state, ended.charged_yen) == (JobState.INTERRUPTED, 0)
    assert simulator.creates_received == 0
    assert simulator.key_info_requests == 1
    await asyncio.sleep(2.0)  # their turns pass: nothing leaves late
    assert simulator.creates_received == 0


async def test_a_stop_waits_for_a_create_on_its_way_and_records_its_answer(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """A request past its write-ahead may be charged: the stop waits (up to its grace) for its answer to be recorded,
    so the job is polled after the restart instead of being reported as possibly charged."""
    store, requests = await open_requests(pacer=Pacer(1000.0))
    job, sending, held = await send_until_write_ahead(store, requests, "on its way")
    stopping = asyncio.create_task(requests.stop_sending(grace=10.0))
    await asyncio.sleep(0.2)
    assert not stopping.done() and not sending.done(), "the stop did not wait for the request on its way"
    held.release.set()
    async with asyncio.timeout(5.0):
        await stopping
    assert sending.done() and (await sending).state == JobState.PENDING
    assert (await store.get(job.id)).service_job_id is not None
    assert simulator.creates_received == 1


async def test_a_stop_waits_no_longer_than_its_grace(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener, caplog: pytest.LogCaptureFixture
) -> None:
    """A create that does not answer in time is left to start-up (asyncio.run cancels it at the end)."""
    store, requests = await open_requests(pacer=Pacer(1000.0))
    job, sending, held = await send_until_write_ahead(store, requests, "stuck")
    async with asyncio.timeout(2.0):
        await requests.stop_sending(grace=0.3)
    assert not sending.done()
    assert "1 requests had no answer" in caplog.text
    sending.cancel()
    held.release.set()
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert (await store.get(job.id)).state == JobState.INTERRUPTED
    assert simulator.creates_received == 0


async def test_the_offer_of_cancel_on_its_way_to_discord_does_not_hold_the_create(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """A slow Discord delays the offer of Cancel, not the create's turn (which every other create waits behind):
    the create leaves at its turn, and `send` returns only once the offer is out (never a stale button after the
    outcome)."""
    _, requests = await open_requests(pacer=Pacer(0.5, turns=1))  # the create's turn 2 s after the budget read
    discord_answers = asyncio.Event()

    async def slow_offer(job: Job) -> None:
        await discord_answers.wait()

    sending = asyncio.create_task(requests.send(await requests.record(request("offered")), on_waiting=slow_offer))
    async with asyncio.timeout(5.0):
        while simulator.creates_received == 0:
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    assert not sending.done(), "the outcome came before the offer of Cancel was out"
    discord_answers.set()
    async with asyncio.timeout(2.0):
        assert (await sending).state == JobState.PENDING


async def test_a_stop_does_not_swallow_a_cancellation_of_its_own_by_someone_else(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """A request cancelled by its owner as the stop begins stays cancelled: only the stop's own cancellation is
    turned into an answer."""
    store, requests = await open_requests(pacer=Pacer(1.0))
    job = await requests.record(request("cancelled twice"))
    sending = asyncio.create_task(requests.send(job))
    await asyncio.sleep(0.5)  # waiting for its create's turn
    sending.cancel()
    await requests.stop_sending(grace=1.0)
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert (await store.get(job.id)).state == JobState.RECEIVED  # start-up ends it as interrupted
    assert simulator.creates_received == 0


async def test_a_second_stop_does_not_wait_a_second_grace(
    simulator: VideoServiceSimulator, open_requests: RequestsOpener
) -> None:
    """The bot's close stops the requests before Discord closes and the services' close stops them again: a create
    still without an answer is waited for once, so the whole stop stays within docker's grace period."""
    store, requests = await open_requests(pacer=Pacer(1000.0))
    _, sending, held = await send_until_write_ahead(store, requests, "stuck")
    await requests.stop_sending(grace=0.2)
    async with asyncio.timeout(0.1):
        await requests.stop_sending(grace=5.0)
    held.release.set()
    await sending


async def test_the_last_write_of_a_stopped_request_holds_off_cancellations_for_a_bounded_time() -> None:
    """Cancelled again while it writes, a stopped request finishes the write; a write that hangs does not hold the
    process's shutdown past `within`."""
    finished = asyncio.Event()

    async def write(seconds: float) -> None:
        await asyncio.sleep(seconds)
        finished.set()

    ending = asyncio.create_task(finish_despite_cancels(write(0.3), within=5.0))
    for _ in range(3):
        await asyncio.sleep(0.05)
        ending.cancel()
    await ending
    assert finished.is_set()

    hung = asyncio.create_task(finish_despite_cancels(asyncio.Event().wait(), within=0.2))
    await asyncio.sleep(0.05)
    hung.cancel()  # within the bound: held off
    await asyncio.sleep(0.3)
    assert not hung.done()
    hung.cancel()  # past it: let through
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(1.0):
            await hung


async def test_a_202_whose_answer_cannot_be_read_is_charged_at_the_price_failed_and_never_resent(
    open_requests: RequestsOpener, simulator: VideoServiceSimulator
) -> None:
    store, requests = await open_requests()
    simulator.reconfigure(create_raw_body="{broken")
    with pytest.raises(SubmissionFailed) as failed:
        await requests.submit(request("a lighthouse"))
    assert failed.value.kind == "charged_unreadable" and failed.value.price_yen == 250
    [job] = await store.jobs_in_states(JobState)
    assert (job.state, job.charged_yen, job.service_job_id) == (JobState.FAILED, 250, None)
    assert failed.value.at == job.accepted_at and job.last_error is not None and "UTC" in job.last_error
    # The ledger grew exactly as the key's spend did; the create went once.
    assert await store.ledger() == (1, 250) and simulator.spend == 250 and simulator.creates_received == 1


async def test_a_late_202_on_a_request_given_up_as_unknown_tells_its_requester_the_video_comes(
    open_requests: RequestsOpener, simulator: VideoServiceSimulator
) -> None:
    told: list[tuple[int, Notice]] = []
    store, requests = await open_requests(tell=lambda job, notice: told.append((job.id, notice)))
    assert (await requests.submit(request("on time"))).state == JobState.PENDING
    assert told == []  # an ordinary 202 needs no word: the receipt says it

    simulator.hang_next_create(0.5)  # accepted at once, answered half a second later
    job = await requests.record(request("late"))
    sending = asyncio.create_task(requests.send(job))
    async with asyncio.timeout(5.0):
        while simulator.creates_received < 2:
            await asyncio.sleep(0.01)
    # Meanwhile another process, finding this one's lease expired, gave the request up as unknown and said so.
    await store.transition(job.id, JobState.UNKNOWN, last_error="the bot stopped while the request was being sent",
                           told_at=store.now())
    late = await sending
    assert (late.state, late.charged_yen) == (JobState.PENDING, 250)
    assert told == [(job.id, "accepted_late")]
    assert await store.ledger() == (2, 500) == (2, simulator.spend)


#: The two 202s that end the request at once, charged: the simulator's fault, and the store's write that records it.
CHARGED_FAILURES: dict[str, tuple[Callable[[VideoServiceSimulator], None], str]] = {
    "charged_unusable": (lambda simulator: simulator.force_next_job_ids(".."), "mark_charged_unusable"),
    "charged_unreadable": (lambda simulator: simulator.reconfigure(create_raw_body="{broken"),
                           "mark_charged_unreadable"),
}
QUICK_RECORD_RETRY = RetryPolicy(attempts=5, deadline=5.0, base_delay=0.01, max_delay=0.05, jitter=0.0)


async def wait_for_state(store: JobStore, job_id: int, state: JobState) -> Job:
    async with asyncio.timeout(5.0):
        while (job := await store.get(job_id)).state != state:
            await asyncio.sleep(0.01)
    return job


@pytest.mark.parametrize("kind", CHARGED_FAILURES)
async def test_a_charged_202_whose_record_fails_is_recorded_later_as_the_requester_was_told(
    open_requests: RequestsOpener, simulator: VideoServiceSimulator, kind: str
) -> None:
    store, requests = await open_requests(record_retry=QUICK_RECORD_RETRY)
    fault, write = CHARGED_FAILURES[kind]
    fault(simulator)
    fail_once(store, write, StoreUnavailable("database is locked"))
    with pytest.raises(SubmissionFailed) as failed:
        await requests.submit(request("a lighthouse"))
    assert failed.value.kind == kind and failed.value.price_yen == 250  # told: charged ¥250

    [waiting] = await store.jobs_in_states(JobState)
    job = await wait_for_state(store, waiting.id, JobState.FAILED)
    assert job.charged_yen == 250 and await store.ledger() == (1, 250) == (1, simulator.spend)
    if kind == "charged_unreadable":
        assert job.accepted_at == failed.value.at, "the time the requester gave support is the one recorded"
    await requests.close()


@pytest.mark.parametrize("kind", CHARGED_FAILURES)
async def test_a_stop_records_a_charged_202_whose_record_was_still_being_retried(
    open_requests: RequestsOpener, simulator: VideoServiceSimulator, kind: str
) -> None:
    store, requests = await open_requests()  # the bot's own retry: its next try is a second away
    fault, write = CHARGED_FAILURES[kind]
    fault(simulator)
    fail_once(store, write, StoreUnavailable("database is locked"))
    with pytest.raises(SubmissionFailed) as failed:
        await requests.submit(request("a lighthouse"))
    [job] = await store.jobs_in_states(JobState)
    assert job.state == JobState.SUBMITTING

    await requests.close()  # a stop before the retry's next try: one last write
    job = await store.get(job.id)
    assert (job.state, job.charged_yen) == (JobState.FAILED, 250), "a restart would make it unknown at ¥0"
    assert await store.ledger() == (1, 250) == (1, simulator.spend)
    if kind == "charged_unreadable":
        assert job.accepted_at == failed.value.at


def taken_over_meanwhile(store: JobStore, write: str) -> list[int]:
    """The first call of `store.write` fails (a database hiccup), and meanwhile another process, finding this one's
    lease expired (PostgreSQL), gives the request up as `unknown` and tells its requester so; later calls go through.
    Returns the job ids it was called with."""
    real = getattr(store, write)
    calls: list[int] = []

    async def flaky(job_id: int, *args: Any, **kwargs: Any) -> Any:
        calls.append(job_id)
        if len(calls) == 1:
            await store.transition(job_id, JobState.UNKNOWN, last_error="the bot stopped while the request was "
                                   "being sent", told_at=store.now())
            raise StoreUnavailable("database is locked")
        return await real(job_id, *args, **kwargs)

    setattr(store, write, flaky)
    return calls


@pytest.mark.parametrize("kind", CHARGED_FAILURES)
async def test_a_charge_another_process_gave_up_as_unknown_meanwhile_is_told_once_more_as_a_charge(
    open_requests: RequestsOpener, simulator: VideoServiceSimulator, kind: str
) -> None:
    """The record can no longer be written (unknown → failed is no move): its requester, told "outcome unknown" by the
    other process, is told the truth again, charged, with the reference and the time; a stop does not try again."""
    told: list[tuple[Job, Notice]] = []
    store, requests = await open_requests(record_retry=QUICK_RECORD_RETRY,
                                          tell=lambda job, notice: told.append((job, notice)))
    fault, write = CHARGED_FAILURES[kind]
    fault(simulator)
    calls = taken_over_meanwhile(store, write)
    with pytest.raises(SubmissionFailed) as failed:
        await requests.submit(request("a lighthouse"))
    async with asyncio.timeout(5.0):
        while not told:
            await asyncio.sleep(0.01)
    [(job, notice)] = told
    assert notice == "charge_unrecorded"
    assert (job.id, job.charged_yen) == (failed.value.job_id, 250) and job.accepted_at is not None
    if kind == "charged_unreadable":
        assert job.accepted_at == failed.value.at, "the time they were first told"
    tries = len(calls)
    await requests.close()
    assert len(calls) == tries, "nothing left for the stop to try"


async def test_an_accepted_job_whose_record_is_refused_for_good_tells_its_requester_and_leaves_nothing_for_the_stop(
    open_requests: RequestsOpener, simulator: VideoServiceSimulator
) -> None:
    told: list[tuple[Job, Notice]] = []
    store, requests = await open_requests(record_retry=QUICK_RECORD_RETRY,
                                          tell=lambda job, notice: told.append((job, notice)))
    calls = fail_twice(store, "mark_accepted", StoreUnavailable("database is locked"), LeaseLost(1, "another"))
    with pytest.raises(SubmissionFailed) as failed:
        await requests.submit(request("a lighthouse"))
    assert failed.value.kind == "charged_unrecorded"
    async with asyncio.timeout(5.0):
        while not told:
            await asyncio.sleep(0.01)
    [(job, notice)] = told
    assert (notice, job.service_job_id) == ("unrecorded", failed.value.service_job_id)  # charged: the job id
    tries = len(calls)
    await requests.close()
    assert len(calls) == tries


def fail_twice(store: JobStore, write: str, first: BaseException, second: BaseException) -> list[int]:
    real = getattr(store, write)
    errors, calls = [second, first], []

    async def flaky(job_id: int, *args: Any, **kwargs: Any) -> Any:
        calls.append(job_id)
        if errors:
            raise errors.pop()
        return await real(job_id, *args, **kwargs)

    setattr(store, write, flaky)
    return calls


@pytest.mark.parametrize("kind", CHARGED_FAILURES)
async def test_a_stops_last_write_refused_for_good_is_logged_and_raises_nothing(
    open_requests: RequestsOpener, simulator: VideoServiceSimulator, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    unretrieved: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: unretrieved.append(context))
    store, requests = await open_requests()  # the bot's own retry: its next try is a second away
    fault, write = CHARGED_FAILURES[kind]
    fault(simulator)
    taken_over_meanwhile(store, write)
    with pytest.raises(SubmissionFailed) as failed:
        await requests.submit(request("a lighthouse"))

    await requests.close()  # the last write: unknown → failed is no move
    gc.collect()
    assert unretrieved == []
    assert f"request #{failed.value.job_id}" in caplog.text and "can no longer be recorded" in caplog.text
