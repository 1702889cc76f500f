"""Usage reports: who spent what in a server over a calendar period, from the bot's own ledger.

Pure: jobs in, figures and CSV bytes out. How each job counts (accepted, failed, unknown outcome, or not at
all) is bot/core/spending.py's rule. `spent` is every charge (accepted and failed, credited ones too), so it
equals `JobStore.ledger` for the same rows; `credited` is the part support refunded, shown beside it, never
subtracted from it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from typing import Final, Literal, get_args

from bot.community.windows import day_bounds, month_bounds
from bot.core.spending import Outcome, outcome_of
from bot.store.jobs import Job

Period = Literal["today", "this_month", "last_month"]
PERIODS: Final[tuple[Period, ...]] = get_args(Period)
DEFAULT_PERIOD: Final[Period] = "this_month"

#: A spreadsheet runs a cell starting with one of these as a formula (OWASP, "CSV injection"). The
#: full-width = + - @ (U+FF1D, U+FF0B, U+FF0D, U+FF20) are what Japanese input gives; quoting them costs nothing.
_FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")

CSV_COLUMNS: Final = (
    "reference", "service_job_id", "user_id", "outcome", "state", "model", "time", "charged_yen",
    "credited", "credited_at", "credited_by", "reason",
)


# -- periods -------------------------------------------------------------------------------------------


def parse_period(text: str) -> Period:
    """The period named `text` (a choice's value); ValueError for any other text."""
    for period in PERIODS:
        if period == text:
            return period
    raise ValueError(f"no period {text!r}")


def period_window(period: Period, now: float, zone: tzinfo) -> tuple[float, float]:
    """[start, end) of the calendar day or month `period` names, seen from `now` in `zone`, as unix times."""
    if period == "today":
        return day_bounds(zone, now)
    if period == "this_month":
        return month_bounds(zone, now)
    if period == "last_month":
        return month_bounds(zone, now, months_back=1)
    raise ValueError(f"no period {period!r}")


# -- figures -----------------------------------------------------------------------------------------


def outcome(job: Job) -> Outcome | None:
    """How `job` counts in a report; None for a request that was never charged (rejected, interrupted…)."""
    return outcome_of(job.state, job.charged_yen)


@dataclass(frozen=True)
class Tally:
    accepted: int = 0
    failed: int = 0
    unknown: int = 0
    spent_yen: int = 0  # every charge, failed ones included: the ledger
    credited_yen: int = 0  # the failed charges support refunded

    @property
    def charged(self) -> int:
        """Charged videos: the ledger's count."""
        return self.accepted + self.failed

    @property
    def net_yen(self) -> int:
        return self.spent_yen - self.credited_yen

    def add(self, job: Job) -> Tally:
        kind = outcome(job)
        if kind is None:
            return self
        if kind == "unknown":
            return replace(self, unknown=self.unknown + 1)
        credited = job.charged_yen if job.credited_at is not None else 0
        return replace(
            self,
            accepted=self.accepted + int(kind == "accepted"),
            failed=self.failed + int(kind == "failed"),
            spent_yen=self.spent_yen + job.charged_yen,
            credited_yen=self.credited_yen + credited,
        )


@dataclass(frozen=True, slots=True)
class MemberUsage:
    user_id: int
    tally: Tally


@dataclass(frozen=True)
class UsageReport:
    period: Period
    start: float
    end: float
    zone: tzinfo
    #: Biggest spenders first.
    members: tuple[MemberUsage, ...]
    totals: Tally
    #: The failed jobs, the ones not yet credited first, each group oldest first.
    failed: tuple[Job, ...]
    #: Every job the report counts, oldest first (the CSV's rows).
    jobs: tuple[Job, ...] = field(repr=False)


def build_report(jobs: Iterable[Job], period: Period, start: float, end: float, zone: tzinfo) -> UsageReport:
    """The figures of `jobs` (a server's, or one member's, from `JobStore.usage_jobs`)."""
    counted = tuple(job for job in jobs if outcome(job) is not None)
    per_member: dict[int, Tally] = {}
    totals = Tally()
    for job in counted:
        per_member[job.user_id] = per_member.get(job.user_id, Tally()).add(job)
        totals = totals.add(job)
    members = sorted(
        (MemberUsage(user_id, tally) for user_id, tally in per_member.items()),
        key=lambda m: (-m.tally.spent_yen, -m.tally.unknown, m.user_id),
    )
    failed = sorted(
        (job for job in counted if outcome(job) == "failed"),
        key=lambda job: (job.credited_at is not None, job.accepted_at or job.created_at, job.id),
    )
    return UsageReport(period, start, end, zone, tuple(members), totals, tuple(failed), counted)


# -- CSV ---------------------------------------------------------------------------------------------


def spreadsheet_safe(cell: str) -> str:
    """`cell` with a leading apostrophe when a spreadsheet would otherwise run it as a formula."""
    return f"'{cell}" if cell.startswith(_FORMULA_STARTS) else cell


def _when(unix: float | None, zone: tzinfo) -> str:
    return datetime.fromtimestamp(unix, zone).isoformat(timespec="seconds") if unix is not None else ""


def _csv_row(job: Job, zone: tzinfo) -> list[str]:
    kind = outcome(job) or ""
    return [
        job.reference,
        job.service_job_id or "",
        str(job.user_id),
        kind,
        job.state.value,
        job.model,
        _when(job.accepted_at or job.created_at, zone),
        str(job.charged_yen),
        "yes" if job.credited_at is not None else "no",
        _when(job.credited_at, zone),
        str(job.credited_by) if job.credited_by is not None else "",
        # Why it failed, or why its outcome is unknown; an accepted job's old retry errors are noise.
        (job.last_error or "") if kind in ("failed", "unknown") else "",
    ]


def report_csv(report: UsageReport) -> bytes:
    """The report's jobs, one row each under a header row, as UTF-8 with a BOM (so Excel reads Japanese)."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for job in report.jobs:
        writer.writerow([spreadsheet_safe(cell) for cell in _csv_row(job, report.zone)])
    return out.getvalue().encode("utf-8-sig")


def csv_filename(report: UsageReport) -> str:
    start = datetime.fromtimestamp(report.start, report.zone).date()
    label = start.isoformat() if report.period == "today" else start.strftime("%Y-%m")
    return f"usage-{label}.csv"
