"""What `/video` does between the interaction and the worker: check, record, create once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, cast, get_args

from bot.community import guardrails, trust
from bot.community.server_rules import RequestRules, ServerRules
from bot.config.settings import Settings
from bot.core.errors import (
    AcceptedUnreadable,
    BotError,
    BudgetTooLow,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
    SubmissionFailed,
    UnusableJobId,
    VideoServiceError,
)
from bot.core.lifecycle import POLLED_STATES
from bot.core.log_context import job_fields
from bot.core.notices import Notice, RefusalCode, SubmissionKind
from bot.core.retry import RECORD_RETRY, RetryPolicy, retrying
from bot.core.tasks import LAST_WRITE_SECONDS, BackgroundTasks, finish_despite_cancels
from bot.service.answers import KeyInfo
from bot.service.catalogue import Catalogue, choose_model
from bot.service.client import VideoServiceClient
from bot.service.key_budget import KeyBudget
from bot.service.pacing import Turn
from bot.service.validation import check_seed, clean_prompt
from bot.store.jobs import (
    ACCEPTED_LATE,
    STOPPED_BEFORE_SENDING,
    AdmissionRefused,
    IllegalTransition,
    Job,
    JobState,
    JobStore,
    NewJob,
    StoreUnavailable,
    meta,
)
from bot.store.leases import Lease

log = logging.getLogger(__name__)

#: Discord keeps an interaction token usable for 15 minutes.
INTERACTION_TOKEN_SECONDS = 15 * 60


def interaction_expiry(created_at: float) -> float:
    """When an interaction's token stops working."""
    return created_at + INTERACTION_TOKEN_SECONDS


#: Requests being written down at once, their reads of the rules included; a burst beyond it waits in line.
#: Measured in bench/ at 10,000 at once: unbounded, each queued its reads at the database's thread and held
#: about 27 live objects (every full garbage collection walks them all); waiting in line, about 15, and the
#: peak RSS was 13-18 MiB lower.
RECORDING_AT_ONCE = 200

#: At shutdown, how long creates already on their way get for their answers to be recorded and told (compose.yaml
#: gives the whole stop 30 s; a create is normally answered well within a second).
STOP_GRACE_SECONDS = 15.0

#: A create still waiting for its turn under the pacing after this long is shown to its requester with Cancel.
WAITING_NOTICE_SECONDS = 1.0

#: Refusals a server's log channel hears of (cooldowns and jobs in flight are routine, not abuse).
LOGGED_REFUSALS = frozenset({
    "guild_daily_cap", "guild_monthly_cap", "member_daily_cap", "member_monthly_cap", "host_guild_daily_cap",
    "host_guild_monthly_cap", "host_member_daily_cap", "host_member_monthly_cap", "blocklist", "member_blocked",
})


class RequestCancelled(BotError):
    """Its requester cancelled the request while it waited to be sent: nothing was sent or spent."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"request #{job_id} was cancelled before it was sent")


def _refuse_unless(decision: trust.Decision) -> None:
    """A refusal by the trust model, as the refusal every request answer already words (AdmissionRefused)."""
    if not decision.allowed:
        assert decision.reason in get_args(RefusalCode), decision
        params: dict[str, object] = {"roles": list(decision.roles)} if decision.roles else {}
        raise AdmissionRefused(cast(RefusalCode, decision.reason), None, **params)


def _reason(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, VideoServiceError) else type(exc).__name__


class VideoRequests:
    """Turns a validated request into at most one create call, with the request written down first.

    `record` writes the row (`received`) before the interaction is acknowledged, so every acknowledged
    request exists in the database; `send` checks the budget, moves it to `submitting` (the write-ahead
    of the create) and sends the create once.
    """

    def __init__(
        self,
        store: JobStore,
        client: VideoServiceClient,
        settings: Settings,
        rules: ServerRules,
        *,
        on_accepted: Callable[[Job], None] = lambda job: None,
        catalogue: Catalogue,
        tell: Callable[[Job, Notice], None] = lambda job, notice: None,
        clock: Callable[[], float] = time.time,
        record_retry: RetryPolicy = RECORD_RETRY,
        estimate_ready: Callable[[str, float], float] | None = None,
        lease: Lease | None = None,
        key_budget: KeyBudget | None = None,
    ) -> None:
        """`lease`: this process's, when several share the database: a request is written holding it, and sent
        only while it is still held (another process that took it over recovers it instead). `key_budget`: the
        process's one reader of the key's budget (/balance and the chores share it); one of its own otherwise."""
        self._store = store
        self._lease = lease
        self._client = client
        self._settings = settings
        self.rules = rules
        self._on_accepted = on_accepted
        self._tell = tell
        self.catalogue = catalogue
        self._clock = clock
        self._record_retry = record_retry
        # The learned durations of each model (bot/jobs/durations.py, shared with the poll schedule).
        self._estimate_ready = estimate_ready
        self._background = BackgroundTasks(log)
        # Accepted and charged, their record still being retried (by id): what it is, for the log, and the write
        # that records it. close() tries each once more.
        self._unrecorded: dict[int, tuple[Job, str, Callable[[], Awaitable[Job]]]] = {}
        self.key_budget = key_budget or KeyBudget(client)
        self._recording = asyncio.Semaphore(RECORDING_AT_ONCE)
        # Shutdown (`stop_sending`): the tasks that called `send` (until they end), those of them before their
        # write-ahead, and those the stop cancelled there.
        self._stopping = False
        self._in_send: set[asyncio.Task[Any]] = set()
        self._unsent: set[asyncio.Task[Any]] = set()
        self._stop_cancelled: set[asyncio.Task[Any]] = set()

    def validate(self, prompt: str, seed: int | None, model_id: str) -> tuple[str, int | None]:
        """Raises InvalidRequest (or ModelUnavailable) for input that cannot succeed; cheap enough to run
        before deferring."""
        return clean_prompt(prompt), check_seed(seed, self.catalogue.get(model_id))

    async def submit(self, request: NewJob, role_ids: Collection[int] = ()) -> Job:
        """`record` then `send`, for callers with no interaction to acknowledge in between."""
        return await self.send(await self.record(request, role_ids))

    async def host_rules(self, action: str, stages: Collection[trust.Stage] = trust.EVERY_STAGE) -> trust.Host:
        """The host's rules as deciding `action` at these stages needs them (the pause is read only if checked)."""
        paused = await self.paused() if trust.needs(action, trust.Check.NOT_PAUSED, stages) else None
        return trust.Host(self._settings.allowed_guild_ids, paused)

    async def admit(self, request: NewJob, role_ids: Collection[int] = (), *, action: str = trust.VIDEO
                    ) -> RequestRules:
        """The host's rules and the server's member rules for this request, checked now (AdmissionRefused),
        without recording anything; returns the server's rules as read."""
        facts = trust.Facts(user_id=request.user_id, guild_id=request.guild_id)
        _refuse_unless(trust.decide(action, facts, await self.host_rules(action, {trust.Stage.HOST}),
                                    {trust.Stage.HOST}))
        rules = await self.rules.for_request(request.guild_id, request.user_id)
        member = trust.MemberRules.of(rules.server, rules.member, request.channel_id, role_ids)
        _refuse_unless(trust.decide(action, replace(facts, member=member), trust.Host(), {trust.Stage.REQUEST}))
        return rules

    async def record(self, request: NewJob, role_ids: Collection[int] = (), *, action: str = trust.VIDEO) -> Job:
        """Write the request down (spending limits checked in the same transaction); nothing is sent yet.

        `action`: what asked for it (/video, or a Confirm or Generate click), whose policy is checked
        (bot/community/trust.py). Every rule is read from the database now, so a change an admin made a moment
        ago holds. `request.model` is the model asked for, or "" for the server's default; the server's allowed
        models decide (`bot.service.catalogue.choose_model`), and the chosen model's price is what the limits count.
        """
        async with self._recording:
            return await self._record(request, role_ids, action)

    async def _record(self, request: NewJob, role_ids: Collection[int], action: str) -> Job:
        assert trust.needs(action, trust.Check.SPENDING_LIMITS, {trust.Stage.STORE}), f"{action} does not spend"
        facts = trust.Facts(user_id=request.user_id, guild_id=request.guild_id)
        _refuse_unless(trust.decide(action, facts, await self.host_rules(action, {trust.Stage.HOST}),
                                    {trust.Stage.HOST}))
        rules = await self.rules.for_request(request.guild_id, request.user_id)
        server = rules.server
        model = choose_model(
            self.catalogue, request.model or None, allowed=server.allowed_models, default=server.default_model
        )
        prompt, seed = self.validate(request.prompt, request.seed, model.id)
        price = self.catalogue.price_of(model.id)
        try:
            guardrails.check_prompt(prompt, rules.blocklist)
            member = trust.MemberRules.of(server, rules.member, request.channel_id, role_ids)
            _refuse_unless(trust.decide(action, replace(facts, member=member), trust.Host(), {trust.Stage.REQUEST}))
            return await self._store.add_submission(
                replace(request, model=model.id, prompt=prompt, seed=seed, price_yen=price),
                guardrails.admission(server, self.rules.defaults, rules.member, self._clock(), price),
                lease=self._lease,
            )
        except AdmissionRefused as refusal:
            await self._log_refusal(request, refusal)
            raise

    async def _log_refusal(self, request: NewJob, refusal: AdmissionRefused) -> None:
        """One log line per member, reason and minute: a member who keeps trying cannot flood the channel."""
        if request.guild_id is None or refusal.code not in LOGGED_REFUSALS:
            return
        store = self.rules.store
        if await store.recent_refusal(request.guild_id, request.user_id, refusal.code, self._clock() - 60):
            return
        await store.add_event(request.guild_id, "refused", user_id=request.user_id, details={"code": refusal.code})

    async def paused(self) -> bool:
        return await self._store.get_meta(meta.HOST_PAUSE) is not None

    async def send(self, job: Job, *, on_waiting: Callable[[Job], Awaitable[None]] | None = None) -> Job:
        """Check the budget, then send the create at most once. Raises SubmissionFailed or BudgetTooLow, or
        RequestCancelled when its requester cancelled it while it waited (the table lets a cancelled row go
        nowhere, so the check is the move itself).

        `on_waiting` runs once if the create's turn under the pacing has not come after WAITING_NOTICE_SECONDS
        (the requester is offered Cancel then); a request sent at once costs no extra message.
        """
        task = asyncio.current_task()
        assert task is not None
        if task not in self._in_send:
            # A stop waits for it (`stop_sending`) until it ends, its answer to the requester included.
            self._in_send.add(task)
            task.add_done_callback(self._in_send.discard)
        price = self.catalogue.price_of(job.model)
        # The budget and the create's turn under the service's rate limit come before the write-ahead, so a stop
        # while waiting for them leaves a request that was never sent (interrupted, nothing spent). The waits are
        # awaited here, not through a wrapper: at 10,000 waiting requests each coroutine deeper is 10,000 more
        # objects for every full garbage collection.
        if self._stopping:
            await self._end_stopped(job)
        self._unsent.add(task)
        try:
            try:
                info = await self._key_info()
            except Exception as exc:
                # Nothing was sent: the request ends here, and the requester is told nothing was spent.
                self._unsent.discard(task)
                await self._end_unsent(job, last_error=_reason(exc))
                raise self._failed(job, "busy", _reason(exc)) from exc
            if info.max_budget is not None and info.max_budget - info.spend < price:
                self._unsent.discard(task)
                await self._end_unsent(job, last_error="the budget cannot pay for it")
                raise BudgetTooLow(info.spend, info.max_budget, price, job_id=job.id)
            turn, offer = await self._turn(job, on_waiting)
        except asyncio.CancelledError:
            if not self._stop_caught(task):
                raise
            await self._end_stopped(job)
        finally:
            self._unsent.discard(task)
        try:
            return await self._write_ahead_and_create(job, turn)
        except asyncio.CancelledError:
            if offer is not None:
                offer.cancel()
            raise
        finally:
            # The offer of Cancel goes out before the outcome is shown, never after it (a stale button); it was
            # not awaited while the turn was held, so a slow Discord never holds up the other requests' creates.
            if offer is not None and not offer.done():
                await asyncio.wait([offer])

    async def _write_ahead_and_create(self, job: Job, turn: Turn) -> Job:
        # Conditional on the state and on the lease: a create goes at most once, whoever holds it.
        write_ahead = asyncio.ensure_future(self._store.transition(
            job.id, JobState.SUBMITTING, owner=self._lease.owner if self._lease is not None else None
        ))
        try:
            try:
                job = await self._unless_cancelled(job, asyncio.shield(write_ahead))
            except asyncio.CancelledError:
                await finish_despite_cancels(self._stopped_before_sending(job, write_ahead))
                raise
        except StoreUnavailable as exc:
            # No write-ahead, no create: nothing was sent and nothing spent. The row ends now if the database
            # takes it, or it would count as in flight (a member's slot, the caps) until a restart ends it.
            turn.release()
            try:
                await self._store.transition(job.id, JobState.INTERRUPTED, last_error=f"not recorded: {exc}")
            except (StoreUnavailable, IllegalTransition) as again:
                log.warning("request %s was not sent and could not be ended (%s); start-up ends it", job.reference,
                            again, extra=job_fields(job))
            raise self._failed(job, "not_recorded", str(exc)) from exc
        except BaseException:
            turn.release()
            raise
        return await self._create_once(job, turn)

    def _stop_caught(self, task: asyncio.Task[Any]) -> bool:
        """Whether the cancellation `task` is handling is the stop's own (`stop_sending`); it is taken back then.
        Any other goes on up."""
        if task not in self._stop_cancelled:
            return False
        self._stop_cancelled.discard(task)
        return task.uncancel() == 0

    async def _end_stopped(self, job: Job) -> NoReturn:
        """The bot began to stop before this request's write-ahead: it ends here as interrupted (nothing was sent),
        and its requester is told so now (SubmissionFailed `stopping`), while Discord and the database are still
        there to tell and to record it."""
        try:
            await self._unless_cancelled(job, self._store.transition(
                job.id, JobState.INTERRUPTED, last_error=STOPPED_BEFORE_SENDING
            ))
        except StoreUnavailable:
            # Still `received`: start-up ends it as interrupted, and the requester is told then too.
            log.warning("request %s stopped before it was sent; not recorded so yet", job.reference,
                        extra=job_fields(job))
        raise self._failed(job, "stopping", STOPPED_BEFORE_SENDING)

    async def _stopped_before_sending(self, job: Job, write_ahead: asyncio.Future[Job]) -> None:
        """Stopped (cancelled) while the write-ahead was on its way: it may still be recorded, as its group
        commits whoever waits for it, and the create was never sent. Say so now, or start-up would take the
        `submitting` row for one whose create may have been charged."""
        try:
            await write_ahead
        except Exception as exc:
            # Not recorded: the row is still `received`, which start-up ends as interrupted.
            log.info("request %s stopped before its write-ahead: %s", job.reference, exc, extra=job_fields(job))
            return
        try:
            await self._store.transition(job.id, JobState.INTERRUPTED, last_error=STOPPED_BEFORE_SENDING)
        except Exception:
            log.warning("request %s stopped before it was sent, but could not be recorded so; start-up will take "
                        "it for one that may have been charged", job.reference, exc_info=True, extra=job_fields(job))

    async def stop_sending(self, grace: float) -> None:
        """Shutdown, before Discord and the database close: from now on no create leaves.

        A request still before its write-ahead ends at once as interrupted (nothing spent), and its requester
        is told so; one whose create may be on its way gets up to `grace` seconds for the answer to be recorded
        and told. One still without an answer then is left to start-up, which reports it as possibly charged.
        Only the first call waits: the bot's close calls it before Discord closes, and the services' close again.
        """
        if self._stopping:
            return
        self._stopping = True
        for task in self._unsent:
            self._stop_cancelled.add(task)
            task.cancel()
        waiting = self._in_send - {asyncio.current_task()}
        if not waiting:
            return
        _, late = await asyncio.wait(waiting, timeout=grace)
        if late:
            log.warning("%d requests had no answer from the video service %.0f s after the bot began to stop; "
                        "start-up reports them as possibly charged", len(late), grace)

    async def _key_info(self) -> KeyInfo:
        """The key's budget, read once for every request that checks it while a read is on its way (no older answer).

        A burst of requests costs one read of the rate-limited service instead of one each, leaving the limit to
        creates and polls. The check is a courtesy before spending: the service refuses a create its budget
        cannot pay for (rejected, nothing charged), whatever a read said.
        """
        return await self.key_budget.read(max_age=0)

    async def _turn(self, job: Job, on_waiting: Callable[[Job], Awaitable[None]] | None
                    ) -> tuple[Turn, asyncio.Task[None] | None]:
        """The create's turn, taken in this task (the pacer gives it back when the task ends, so a turn taken in
        a helper task would be free again before its create left and bound nothing), and the offer of Cancel
        if it was shown meanwhile (on its way to Discord: the caller waits for it before showing the outcome)."""
        if on_waiting is None:
            return await self._client.take_turn(), None
        shown = asyncio.Event()
        notice = asyncio.create_task(self._tell_waiting(job, on_waiting, shown))
        try:
            turn = await self._client.take_turn()
        except BaseException:
            notice.cancel()
            raise
        if shown.is_set():
            return turn, notice
        notice.cancel()
        return turn, None

    async def _tell_waiting(self, job: Job, on_waiting: Callable[[Job], Awaitable[None]], shown: asyncio.Event
                            ) -> None:
        await asyncio.sleep(WAITING_NOTICE_SECONDS)
        shown.set()
        try:
            await on_waiting(job)
        except Exception:
            # Only the offer of Cancel is lost; the request goes on.
            log.warning("could not show request %s as waiting", job.reference, exc_info=True, extra=job_fields(job))

    async def _end_unsent(self, job: Job, *, last_error: str) -> None:
        await self._unless_cancelled(job, self._store.transition(job.id, JobState.REJECTED, last_error=last_error))

    async def _unless_cancelled(self, job: Job, move: Awaitable[Job]) -> Job:
        try:
            return await move
        except IllegalTransition as exc:
            if exc.current == JobState.CANCELLED:
                raise RequestCancelled(job.id) from exc
            raise

    async def abandon(self, job: Job, reason: str) -> None:
        """A recorded request that will not be sent after all: rejected, nothing spent, owed a final message."""
        try:
            await self._store.transition(job.id, JobState.REJECTED, last_error=reason)
        except Exception:
            log.exception("request %s could not be ended; a restart ends it as interrupted", job.reference,
                          extra=job_fields(job))

    async def cancel(self, job_id: int) -> Job:
        """Cancel a request not yet sent; raises IllegalTransition once it may be on its way (no cancel then)."""
        return await self._store.cancel_unsent(job_id)

    async def _create_once(self, job: Job, turn: Turn) -> Job:
        price = self.catalogue.price_of(job.model)
        try:
            remote = await self._client.create(job.prompt, job.seed, self.catalogue.get(job.model), turn=turn)
        except Rejected as exc:
            await self._record_outcome(job, self._store.transition(job.id, JobState.REJECTED, last_error=exc.reason))
            raise self._failed(job, "rejected", exc.reason) from exc
        except (RateLimited, ServerError, ServiceUnreachable) as exc:
            await self._record_outcome(job, self._store.transition(job.id, JobState.REJECTED, last_error=str(exc)))
            raise self._failed(job, "busy", str(exc)) from exc
        except UnusableJobId as exc:
            # Accepted and charged, but the id is not safe to use: never polled, the requester gets it for support.
            log.error("request %s accepted with an unusable job id %s (%d yen)", job.reference, exc.shown, price,
                      extra=job_fields(job))
            shown, at = exc.shown, self._clock()
            failed = await self._record_charge(
                job, f"its charge ({price} yen, unusable job id {shown})",
                lambda: self._store.mark_charged_unusable(job.id, price, shown, at=at), price=price, at=at,
            )
            reason = failed.last_error if failed is not None and failed.last_error else shown
            raise self._failed(job, "charged_unusable", reason, service_job_id=shown) from exc
        except AcceptedUnreadable as exc:
            # A 202 is a charge (spec §7): recorded at the price, so the ledger grows as the key's spend does. There
            # is no job id to poll; the requester gets the reference and the time, which support can trace.
            log.error("request %s accepted and charged %d yen, but the answer could not be read: %s", job.reference,
                      price, exc.__cause__ or exc, extra=job_fields(job))
            at = self._clock()  # the time the requester gives support, and the one recorded, however late
            await self._record_charge(
                job, f"its charge ({price} yen, answer unreadable)",
                lambda: self._store.mark_charged_unreadable(job.id, price, at=at), price=price, at=at,
            )
            raise self._failed(job, "charged_unreadable", str(exc), at=at) from exc
        except OutcomeUnknown as exc:
            await self._record_outcome(job, self._store.transition(job.id, JobState.UNKNOWN, last_error=str(exc)))
            raise self._failed(job, "unknown", str(exc)) from exc
        except Exception as exc:
            # Anything else after the row was written (an answer not in the contract, a 200 for a 202): the
            # request may have left and been charged, so it is never resent, and the requester is told so.
            reason = str(exc) if isinstance(exc, VideoServiceError) else type(exc).__name__
            await self._record_outcome(job, self._store.transition(job.id, JobState.UNKNOWN, last_error=reason))
            raise self._failed(job, "unknown", reason) from exc
        finally:
            self.key_budget.spend_moved()  # whatever the answer, /balance reads the key's spend again
        # Logged before the write: if the write fails, the operator can still trace the charge.
        log.info("request %s accepted as job %s (%d yen)", job.reference, remote.id, price, extra=job_fields(job))
        next_poll_at = self._clock() + self._settings.poll_interval_seconds
        try:
            accepted = await self._store.mark_accepted(job.id, remote.id, price, next_poll_at, lease=self._lease)
        except StoreUnavailable as exc:
            log.error("request %s: job %s was accepted and charged %d yen but could not be recorded (%s); "
                      "retrying the write", job.reference, remote.id, price, exc, extra=job_fields(job))
            self._record_later(
                job, f"job {remote.id} ({price} yen)",
                lambda: self._store.mark_accepted(job.id, remote.id, price, next_poll_at, lease=self._lease),
                lambda recorded: self._accepted_recorded(job, remote.id, recorded),
            )
            raise self._failed(job, "charged_unrecorded", remote.id, service_job_id=remote.id) from exc
        if accepted.state == JobState.FAILED:
            log.error("request %s: the service returned job id %s again (%s); charged %d yen, not polled",
                      job.reference, remote.id, accepted.last_error, price, extra=job_fields(job))
            raise self._failed(
                job, "charged_unusable", accepted.last_error or remote.id, service_job_id=remote.id
            )
        self._accepted(accepted)
        return accepted

    def _accepted(self, accepted: Job) -> None:
        """Hand a recorded job to the worker; a late 202 on a request given up as unknown is also told to its
        requester, who was told its outcome could not be known: the video is coming after all."""
        if accepted.last_error == ACCEPTED_LATE:
            log.warning("request %s: its 202 came after it was given up as unknown; charged, and the video comes",
                        accepted.reference, extra=job_fields(accepted))
            self._tell(accepted, "accepted_late")
        self._on_accepted(accepted)

    async def _record_outcome(self, job: Job, write: Awaitable[Job]) -> Job | None:
        """Record what the create's answer was; if the database fails, the requester is still told that answer
        (never the database's "nothing was sent"). The row stays `submitting`: start-up takes it for a request
        that may have been charged, and never resends it."""
        try:
            return await write
        except StoreUnavailable as exc:
            log.error("request %s: its create's outcome could not be recorded (%s); start-up reports it as possibly "
                      "charged", job.reference, exc, extra=job_fields(job))
            return None

    def _failed(self, job: Job, kind: SubmissionKind, reason: str, *, service_job_id: str | None = None,
                at: float | None = None) -> SubmissionFailed:
        return SubmissionFailed(job.id, kind, reason, price_yen=self.catalogue.price_of(job.model),
                                service_job_id=service_job_id, at=at)

    async def _record_charge(self, job: Job, what: str, write: Callable[[], Awaitable[Job]], *, price: int,
                             at: float) -> Job | None:
        """Record a 202 that ended the request at once, charged at `at`; the requester is told that charge whatever
        the database does. If it fails, the write is tried again as an accepted job's is (`_record_later`), so the
        ledger ends as they read it (left `submitting`, a restart would end it `unknown` at ¥0, the member's
        slot held meanwhile)."""
        try:
            return await write()
        except StoreUnavailable as exc:
            log.error("request %s: %s could not be recorded (%s); retrying the write", job.reference, what, exc,
                      extra=job_fields(job))
            charged = replace(job, charged_yen=price, accepted_at=at)
            self._record_later(job, what, write, partial(self._charge_recorded, charged))
            return None

    def _charge_recorded(self, charged: Job, recorded: Job | None) -> None:
        """A charge the requester was told of at once could not be recorded after all: the bot's records (and a
        process that gave the request up as `unknown`, saying so) will not show it, so the requester is told the
        charge once more, with the reference and the time support needs."""
        if recorded is None:
            self._tell(charged, "charge_unrecorded")

    def _record_later(self, job: Job, what: str, write: Callable[[], Awaitable[Job]],
                      then: Callable[[Job | None], None]) -> None:
        """Keep trying to record a charge the requester was already told of, for RECORD_RETRY; `then` gets the
        recorded job (None: it could not be). A stop tries the write once more (`close`)."""
        self._unrecorded[job.id] = (job, what, write)
        self._background.spawn(self._retry_record(job, what, write, then), f"record-{job.id}")

    async def _retry_record(self, job: Job, what: str, write: Callable[[], Awaitable[Job]],
                            then: Callable[[Job | None], None]) -> None:
        try:
            recorded: Job | None = await retrying(
                self._record_retry, write, retry_on=(StoreUnavailable,),
                what=f"recording {what} of request {job.reference}",
            )
        except StoreUnavailable:
            recorded = None
            log.error("request %s: %s could not be recorded within %.0f s", job.reference, what,
                      self._record_retry.deadline, extra=job_fields(job))
        except Exception as exc:  # not a cancel: that one leaves the write to close(), which tries it once more
            # The row moved on meanwhile (another process gave the request up as `unknown`, or holds it): it can
            # no longer be recorded here, and there is nothing left for a stop to try.
            recorded = None
            log.error("request %s: %s can no longer be recorded (%s)", job.reference, what, exc,
                      exc_info=not isinstance(exc, BotError), extra=job_fields(job))
        else:
            log.info("request %s: %s recorded after all", job.reference, what, extra=job_fields(job))
        self._unrecorded.pop(job.id, None)
        then(recorded)

    def _accepted_recorded(self, job: Job, service_job_id: str, accepted: Job | None) -> None:
        """An accepted job's record landed (to the worker), or never did: its requester, told the video was
        coming, is told to give support the job id."""
        if accepted is None:
            self._tell(replace(job, service_job_id=service_job_id), "unrecorded")
        elif accepted.state == JobState.PENDING:
            self._accepted(accepted)

    async def close(self) -> None:
        await self._background.cancel_all()
        # A charge whose record was still being retried: one last try before the database closes, or start-up
        # would find it `submitting` and report it as possibly charged, at ¥0 (a paid video never polled). All
        # of them together within LAST_WRITE_SECONDS: a database that hangs must not hold the stop.
        unrecorded, self._unrecorded = list(self._unrecorded.values()), {}
        writes = {
            asyncio.ensure_future(self._record_at_close(job, what, write)) for job, what, write in unrecorded
        }
        if not writes:
            return
        _, late = await asyncio.wait(writes, timeout=LAST_WRITE_SECONDS)
        for write in late:
            write.cancel()  # let go, not awaited: its end would wait on the database again
        if late:
            log.error("%d charged jobs were still not recorded %.0f s into the stop; start-up reports them as "
                      "possibly charged", len(late), LAST_WRITE_SECONDS)

    async def _record_at_close(self, job: Job, what: str, write: Callable[[], Awaitable[Job]]) -> None:
        try:
            await write()
        except StoreUnavailable as exc:
            log.error("request %s: %s is still not recorded at shutdown (%s)", job.reference, what, exc,
                      extra=job_fields(job))
        except Exception as exc:  # awaited by no one after the stop: said here, or never
            log.error("request %s: %s can no longer be recorded (%s); its requester was told it was charged",
                      job.reference, what, exc, exc_info=not isinstance(exc, BotError), extra=job_fields(job))
        else:
            log.info("request %s: %s recorded at shutdown", job.reference, what, extra=job_fields(job))

    async def told(self, job_id: int) -> None:
        """The requester got this request's final answer through the interaction."""
        await self._store.mark_told(job_id)

    async def handed_over(self, job: Job) -> None:
        """/status gave the requester the file that could not be posted: delivered, and the file removed."""
        await self._store.transition(job.id, JobState.DELIVERED, told_at=self._clock())
        if job.file_path:
            Path(job.file_path).unlink(missing_ok=True)

    async def remember_reply(self, job: Job, message_id: int) -> None:
        """The worker edits this reply as the job moves on, while the interaction token lives."""
        await self._store.update(job.id, reply_message_id=message_id)

    async def queue_position(self, job: Job) -> int | None:
        return await self._store.queue_position(job.id)

    def ready_at(self, job: Job) -> float | None:
        """When a waiting job is most likely ready, from recently completed jobs of its model."""
        if self._estimate_ready is None or job.accepted_at is None:
            return None
        if job.state not in POLLED_STATES:
            return None
        return self._estimate_ready(job.model, job.accepted_at)

    async def get(self, job_id: int) -> Job:
        """A job by the bot's own id (a button's); raises JobNotFound."""
        return await self._store.get(job_id)

    async def find(self, reference: str, guild_id: int | None) -> Job | None:
        return await self._store.find(reference, guild_id=guild_id)

    async def recent(self, user_id: int, guild_id: int | None, limit: int = 10) -> list[Job]:
        return await self._store.recent_jobs(user_id, guild_id, limit)

    async def ledgers(self, guild_id: int | None) -> tuple[tuple[int, int], tuple[int, int]]:
        """(videos, yen) accepted by this bot, all time and in one server."""
        everywhere = await self._store.ledger()
        here = await self._store.ledger(guild_id=guild_id) if guild_id is not None else (0, 0)
        return everywhere, here
