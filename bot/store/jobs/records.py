"""The job store's records: a job's row, a request about to be written, an offer, what admission checks, and the
store's errors."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from bot.core.errors import BotError
from bot.core.lifecycle import JobState
from bot.core.notices import RefusalCode
from bot.store.sqlite import Row


class IllegalTransition(BotError):
    def __init__(self, job_id: int, current: str | None, target: JobState) -> None:
        self.job_id = job_id
        self.current = current
        self.target = target
        super().__init__(f"job #{job_id}: cannot move from {current or 'nowhere'} to {target}")


class JobNotFound(BotError):
    pass


class LeaseLost(BotError):
    """A write for a job whose lease another process holds now (this one stalled past its expiry): refused."""

    def __init__(self, job_id: int, holder: str | None) -> None:
        self.job_id = job_id
        self.holder = holder
        super().__init__(f"job #{job_id}: this process no longer holds its lease (held by {holder or 'nobody'})")


@dataclass(frozen=True)
class Renewal:
    """What one renewal found: the jobs this process still holds, and how many processes are alive."""

    held: frozenset[int]
    live_processes: int


class AdmissionRefused(BotError):
    """A guardrail said no before anything was spent. `retry_at` is a unix time, or None."""

    def __init__(self, code: RefusalCode, retry_at: float | None, **params: object) -> None:
        self.code = code
        self.retry_at = retry_at
        self.params = params
        super().__init__(f"refused: {code}")


CreditRefusal = Literal["not_found", "not_failed", "already_credited"]


class CreditRefused(BotError):
    """`mark_credited` changed nothing: no such job in that server, not a failed charged job, or credited already."""

    def __init__(self, job_id: int, code: CreditRefusal) -> None:
        self.job_id = job_id
        self.code = code
        super().__init__(f"job #{job_id} cannot be marked credited: {code}")


# Slots: a job in flight is two objects for the garbage collector to walk, not three (its `__dict__` gone). At
# 10,000 in flight in bench/, a full collection took 42-47 ms instead of 54-66, and the peak RSS fell by 13 MiB.
@dataclass(frozen=True, slots=True)
class Job:
    id: int
    state: JobState
    model: str
    prompt: str
    seed: int | None
    user_id: int
    guild_id: int | None
    channel_id: int
    locale: str
    service_job_id: str | None
    charged_yen: int
    created_at: float
    updated_at: float
    accepted_at: float | None
    finished_at: float | None
    next_poll_at: float | None
    slow_notice_sent: bool
    file_path: str | None
    upload_limit_bytes: int | None
    interaction_token: str | None
    interaction_expires_at: float | None
    reply_message_id: int | None
    delivered_channel_id: int | None
    delivered_message_id: int | None
    last_error: str | None
    told_at: float | None = None  # when the requester got the final message
    step_attempts: int = 0  # failed attempts of the current download or upload
    step_failing_since: float | None = None
    notice_attempts: int = 0  # failed rounds of sending the final message
    waiting_notice_sent: bool = False
    price_yen: int = 0  # the catalogue price when it was asked for: what an unanswered request may cost
    credited_at: float | None = None  # support refunded this failed job's charge (marked by a server admin)
    credited_by: int | None = None  # the Discord user who marked it
    progress_at: float | None = None  # when its receipt last showed its place in line and ready time
    lease_owner: str | None = None  # the process working on it (bot/store/leases.py); None: free to claim
    lease_expires_at: float | None = None

    def __repr__(self) -> str:
        # The interaction token is a credential for 15 minutes: keep it out of logs.
        return f"<Job #{self.id} {self.state} service_id={self.service_job_id!r}>"

    @property
    def reference(self) -> str:
        return f"#{self.id}"

    def token_alive(self, now: float) -> bool:
        return bool(self.interaction_token) and (self.interaction_expires_at or 0) > now


_JOB_COLUMNS = tuple(f.name for f in fields(Job))


#: Columns with a handful of values among all jobs: each row read makes new strings of them, one each per job in
#: flight that a full garbage collection visits; interned, all jobs share one.
_REPEATED_TEXT = ("model", "locale", "lease_owner")


def _job(row: Row) -> Job:
    values = dict(zip(row.keys(), tuple(row), strict=True))
    for name in _REPEATED_TEXT:
        if (text := values[name]) is not None:
            values[name] = sys.intern(text)
    values["state"] = JobState(values["state"])
    values["slow_notice_sent"] = bool(values["slow_notice_sent"])
    values["waiting_notice_sent"] = bool(values["waiting_notice_sent"])
    return Job(**values)


@dataclass(frozen=True, slots=True)
class NewJob:
    """A request about to be written down: who asks, where, and for what (`VideoRequests.record` sets the model
    and checks the input). Built by keyword."""

    user_id: int
    guild_id: int | None
    channel_id: int
    model: str
    prompt: str
    seed: int | None
    locale: str = "en-US"
    upload_limit_bytes: int | None = None
    interaction_token: str | None = None
    interaction_expires_at: float | None = None
    price_yen: int = 0


@dataclass(frozen=True)
class SpendCap:
    """At most `cap_yen` spent by a server (or one member of it) in the window `[start, end)`."""

    code: RefusalCode  # the refusal when the cap is reached
    cap_yen: int
    start: float  # unix time; a member's quota reset moves a server's own cap's start later
    end: float  # when the window resets
    member_only: bool = False
    #: Whether charges marked credited still count. A server admin marks them (/credit); only the host knows
    #: whether support refunded them, so the host's caps count every charge.
    counts_credited: bool = False


@dataclass(frozen=True)
class Admission:
    """Guardrails checked in the same transaction that writes the row, so two requests cannot both pass."""

    cooldown_seconds: float = 0.0
    max_active_jobs: int | None = None
    caps: tuple[SpendCap, ...] = ()
    price_yen: int = 0


OfferKind = Literal["reroll", "confirm"]


OfferOutcome = Literal["used", "cancelled", "expired"]


@dataclass(frozen=True)
class NewOffer:
    """A button that spends money, waiting for its click: a re-roll of `source_job_id`, or a pending /video."""

    kind: OfferKind
    user_id: int
    guild_id: int | None
    channel_id: int
    locale: str
    expires_at: float
    model: str = ""
    prompt: str = ""
    seed: int | None = None
    source_job_id: int | None = None
    upload_limit_bytes: int | None = None


@dataclass(frozen=True)
class Offer(NewOffer):
    id: int = 0
    created_at: float = 0.0
    used_at: float | None = None
    outcome: OfferOutcome | None = None
    job_id: int | None = None
    message_id: int | None = None  # the message its buttons were shown on (None: not recorded yet)


_OFFER_COLUMNS = tuple(f.name for f in fields(Offer))


def _check_columns(assignments: Mapping[str, Any]) -> None:
    unknown = set(assignments) - set(_JOB_COLUMNS)
    if unknown or "id" in assignments:
        raise ValueError(f"not updatable job columns: {sorted(unknown | ({'id'} & set(assignments)))}")
