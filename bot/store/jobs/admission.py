"""The guardrails of a request, as the SQL conditions of the INSERT that writes it: a member's cooldown and jobs in
flight, and every spending cap (what counts against a cap: charges, credited ones only for the caps that count
them, and what may yet be charged)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.core.lifecycle import IN_FLIGHT_STATES, MAYBE_CHARGED_STATES, NOTHING_SPENT_STATES, UNSENT_OR_SENDING, JobState
from bot.store.jobs.base import _marks
from bot.store.jobs.records import Admission, AdmissionRefused, NewJob, SpendCap

S = JobState

#: Writes of a request whose refusal could not be read back as it was (another request changed the count).
ADMISSION_TRIES = 3


@dataclass(frozen=True)
class _Guardrail:
    """One guardrail of the admission: `allows`, a SQL condition (its parameters `allows_params`), holds when
    it lets the request in; `figure` (a SQL value) is what it looked at, for `refusal` to tell the member."""

    allows: str
    allows_params: tuple[Any, ...]
    figure: str
    figure_params: tuple[Any, ...]
    refusal: Callable[[Any], AdmissionRefused]


def _guardrails(new: NewJob, admission: Admission, now: float) -> list[_Guardrail]:
    """The admission's rules for `new`, in the order a refusal names them. Per server: a member's cooldown
    and jobs in flight in one server do not hold them back in another."""
    guardrails: list[_Guardrail] = []
    member = (new.user_id, new.guild_id)
    if admission.cooldown_seconds > 0:
        cooldown = admission.cooldown_seconds
        last = ("(SELECT MAX(created_at) FROM jobs WHERE user_id = ? AND guild_id IS ? "
                f"AND state NOT IN ({_marks(NOTHING_SPENT_STATES)}))")
        last_params = (*member, *NOTHING_SPENT_STATES)
        guardrails.append(_Guardrail(
            f"COALESCE({last} <= ?, 1 = 1)", (*last_params, now - cooldown), last, last_params,
            lambda at: AdmissionRefused("cooldown", float(at) + cooldown),
        ))
    if admission.max_active_jobs is not None:
        limit = admission.max_active_jobs
        in_flight = _marks(IN_FLIGHT_STATES)
        active = f"(SELECT COUNT(*) FROM jobs WHERE user_id = ? AND guild_id IS ? AND state IN ({in_flight}))"
        active_params = (*member, *IN_FLIGHT_STATES)
        guardrails.append(_Guardrail(
            f"{active} < ?", (*active_params, limit), active, active_params,
            lambda count: AdmissionRefused("too_many_active", None, active=int(count), limit=limit),
        ))
    for cap in admission.caps:
        spent, spent_params = _spent(new, cap, admission.price_yen)
        guardrails.append(_Guardrail(
            f"{spent} + ? <= ?", (*spent_params, admission.price_yen, cap.cap_yen), spent, spent_params,
            _cap_reached(cap),
        ))
    return guardrails


def _cap_reached(cap: SpendCap) -> Callable[[Any], AdmissionRefused]:
    def refusal(yen: Any) -> AdmissionRefused:
        spent = int(yen)
        return AdmissionRefused(cap.code, cap.end, spent=spent, cap=cap.cap_yen, left=max(cap.cap_yen - spent, 0))

    return refusal


def _spent(new: NewJob, cap: SpendCap, price_yen: int) -> tuple[str, tuple[Any, ...]]:
    """What counts against `cap` (a SQL value, and its parameters): charges in its window, and what may yet be
    charged.

    Requests not yet answered, and outcomes unknown, count at their price: they may be charged (or may have
    been). Failed jobs count: they were charged, unless support credited them (for a cap that counts credits
    too, even then).
    """
    maybe = _marks(MAYBE_CHARGED_STATES)
    unsent = _marks(UNSENT_OR_SENDING)
    member = "AND user_id = ?" if cap.member_only else ""
    not_credited = "" if cap.counts_credited else "AND credited_at IS NULL"
    return (
        f"""(SELECT COALESCE(SUM(CASE WHEN state IN ({maybe})
                                      THEN (CASE WHEN price_yen > 0 THEN price_yen ELSE ? END)
                                      ELSE charged_yen END), 0)
             FROM jobs
             WHERE guild_id IS ? {member} AND (
                 state IN ({unsent})
                 OR (state = ? AND created_at >= ? AND created_at < ?)
                 OR (charged_yen > 0 {not_credited} AND accepted_at >= ? AND accepted_at < ?)))""",
        (
            *MAYBE_CHARGED_STATES, price_yen, new.guild_id,
            *((new.user_id,) if cap.member_only else ()),
            *UNSENT_OR_SENDING, S.UNKNOWN, cap.start, cap.end, cap.start, cap.end,
        ),
    )
