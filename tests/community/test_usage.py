"""Usage reports: calendar windows in a time zone, the figures, and a CSV a spreadsheet cannot be tricked by."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.community.usage import (
    CSV_COLUMNS,
    PERIODS,
    Period,
    Tally,
    build_report,
    csv_filename,
    outcome,
    parse_period,
    period_window,
    report_csv,
    spreadsheet_safe,
)
from bot.store.jobs import Job, JobState

S = JobState
TOKYO = ZoneInfo("Asia/Tokyo")
NEW_YORK = ZoneInfo("America/New_York")
LONDON = ZoneInfo("Europe/London")
HOUR = 3600


def at(zone: ZoneInfo, year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=zone).timestamp()


def make_job(job_id: int = 1, state: JobState = S.DELIVERED, **changes: Any) -> Job:
    values: dict[str, Any] = dict(
        id=job_id, state=state, model="provider/video-model-2.0-fast", prompt="a secret prompt", seed=None,
        user_id=1, guild_id=10, channel_id=100, locale="en-US", service_job_id=f"vid_{job_id}",
        charged_yen=250, created_at=1000.0 + job_id, updated_at=1000.0 + job_id, accepted_at=1001.0 + job_id,
        finished_at=None, next_poll_at=None, slow_notice_sent=False, file_path=None, upload_limit_bytes=None,
        interaction_token="token", interaction_expires_at=None, reply_message_id=None, delivered_channel_id=None,
        delivered_message_id=None, last_error=None,
    )
    if state in (S.UNKNOWN, S.SUBMITTING, S.REJECTED, S.INTERRUPTED, S.RECEIVED):
        values.update(charged_yen=0, accepted_at=None, service_job_id=None)
    values.update(changes)
    return Job(**values)


# -- windows ---------------------------------------------------------------------------------------


def test_today_is_the_calendar_day_in_the_zone() -> None:
    # 23:30 on 31 January in Tokyo is still 31 January there (14:30 UTC).
    now = at(TOKYO, 2025, 1, 31, 23, 30)
    assert period_window("today", now, TOKYO) == (at(TOKYO, 2025, 1, 31), at(TOKYO, 2025, 2, 1))


def test_months_across_a_month_and_a_year_boundary() -> None:
    end_of_january = at(TOKYO, 2025, 1, 31, 23, 59, 59)
    assert period_window("this_month", end_of_january, TOKYO) == (at(TOKYO, 2025, 1, 1), at(TOKYO, 2025, 2, 1))
    assert period_window("last_month", end_of_january, TOKYO) == (at(TOKYO, 2024, 12, 1), at(TOKYO, 2025, 1, 1))
    first_of_march = at(TOKYO, 2024, 3, 1)  # the first instant of March belongs to March
    assert period_window("this_month", first_of_march, TOKYO) == (at(TOKYO, 2024, 3, 1), at(TOKYO, 2024, 4, 1))
    assert period_window("last_month", first_of_march, TOKYO) == (at(TOKYO, 2024, 2, 1), at(TOKYO, 2024, 3, 1))
    december = at(TOKYO, 2024, 12, 15)
    assert period_window("this_month", december, TOKYO) == (at(TOKYO, 2024, 12, 1), at(TOKYO, 2025, 1, 1))


def test_the_same_instant_is_another_day_in_another_zone() -> None:
    now = datetime(2025, 1, 31, 20, 0, tzinfo=ZoneInfo("UTC")).timestamp()  # 1 February 05:00 in Tokyo
    assert period_window("this_month", now, TOKYO)[0] == at(TOKYO, 2025, 2, 1)
    assert period_window("this_month", now, NEW_YORK)[0] == at(NEW_YORK, 2025, 1, 1)


def test_days_and_months_that_change_the_clock_run_midnight_to_midnight() -> None:
    # New York springs forward on 9 March 2025 (a 23-hour day) and falls back on 2 November (25 hours).
    start, end = period_window("today", at(NEW_YORK, 2025, 3, 9, 12), NEW_YORK)
    assert (start, end) == (at(NEW_YORK, 2025, 3, 9), at(NEW_YORK, 2025, 3, 10))
    assert end - start == 23 * HOUR
    start, end = period_window("today", at(NEW_YORK, 2025, 11, 2, 12), NEW_YORK)
    assert end - start == 25 * HOUR
    # March in London: from midnight GMT to midnight BST, an hour short of 31 days.
    start, end = period_window("last_month", at(LONDON, 2025, 4, 15), LONDON)
    assert datetime.fromtimestamp(start, LONDON).isoformat() == "2025-03-01T00:00:00+00:00"
    assert datetime.fromtimestamp(end, LONDON).isoformat() == "2025-04-01T00:00:00+01:00"
    assert end - start == 31 * 24 * HOUR - HOUR


def test_periods_are_named_by_their_choice_values() -> None:
    assert PERIODS == ("today", "this_month", "last_month")
    assert [parse_period(name) for name in PERIODS] == list(PERIODS)
    with pytest.raises(ValueError):
        parse_period("next_month")


# -- figures ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("state", "expected"), [
    (S.PENDING, "accepted"), (S.IN_PROGRESS, "accepted"), (S.COMPLETED, "accepted"), (S.DOWNLOADED, "accepted"),
    (S.DELIVERED, "accepted"), (S.UNDELIVERABLE, "accepted"), (S.FAILED, "failed"), (S.STALLED, "failed"),
    (S.UNKNOWN, "unknown"), (S.SUBMITTING, "unknown"), (S.REJECTED, None), (S.INTERRUPTED, None),
    (S.RECEIVED, None),
])
def test_how_each_state_counts(state: JobState, expected: str | None) -> None:
    assert outcome(make_job(state=state)) == expected


def test_a_failed_job_that_cost_nothing_is_not_counted() -> None:
    assert outcome(make_job(state=S.FAILED, charged_yen=0)) is None


def test_per_member_and_total_figures() -> None:
    jobs = [
        make_job(1, S.DELIVERED, user_id=1),
        make_job(2, S.FAILED, user_id=1, last_error="the job failed"),
        make_job(3, S.FAILED, user_id=1, credited_at=5000.0, credited_by=9),
        make_job(4, S.UNKNOWN, user_id=1),
        make_job(5, S.PENDING, user_id=2, charged_yen=400),
        make_job(6, S.SUBMITTING, user_id=2),
        make_job(7, S.STALLED, user_id=3),
        make_job(8, S.REJECTED, user_id=3),
        make_job(9, S.INTERRUPTED, user_id=4),
    ]

    report = build_report(jobs, "this_month", 0.0, 1e10, TOKYO)

    by_member = {member.user_id: member.tally for member in report.members}
    assert by_member == {
        1: Tally(accepted=1, failed=2, unknown=1, spent_yen=750, credited_yen=250),
        2: Tally(accepted=1, failed=0, unknown=1, spent_yen=400, credited_yen=0),
        3: Tally(accepted=0, failed=1, unknown=0, spent_yen=250, credited_yen=0),
    }
    assert [member.user_id for member in report.members] == [1, 2, 3]  # biggest spender first
    assert report.totals == Tally(accepted=2, failed=3, unknown=2, spent_yen=1400, credited_yen=250)
    assert report.totals.net_yen == 1150 and report.totals.charged == 5
    # Spent is every charge, credited ones too: what the ledger holds.
    assert report.totals.spent_yen == sum(job.charged_yen for job in jobs)
    # The failed ones, those still to claim first; the never-charged are not in the report at all.
    assert [job.id for job in report.failed] == [2, 7, 3]
    assert [job.id for job in report.jobs] == [1, 2, 3, 4, 5, 6, 7]


def test_members_with_equal_spend_are_ordered_by_unknowns_then_id() -> None:
    jobs = [make_job(1, user_id=5), make_job(2, user_id=4), make_job(3, S.UNKNOWN, user_id=6),
            make_job(4, user_id=6)]
    report = build_report(jobs, "today", 0.0, 1e10, TOKYO)
    assert [member.user_id for member in report.members] == [6, 4, 5]


def test_an_empty_report() -> None:
    report = build_report([], "last_month", 0.0, 1.0, TOKYO)
    assert (report.members, report.failed, report.jobs, report.totals) == ((), (), (), Tally())


# -- CSV -------------------------------------------------------------------------------------------


def parsed(data: bytes) -> list[dict[str, str]]:
    assert data.startswith(b"\xef\xbb\xbf")  # the BOM Excel needs to read UTF-8
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert tuple(rows[0]) == CSV_COLUMNS
    return [dict(zip(CSV_COLUMNS, row, strict=True)) for row in rows[1:]]


@pytest.mark.parametrize("cell", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "＝1+1", "＋1", "－1", "＠x",
                                  "=HYPERLINK(\"http://x\",\"y\")"])
def test_a_cell_a_spreadsheet_would_run_gets_a_leading_apostrophe(cell: str) -> None:
    assert spreadsheet_safe(cell) == "'" + cell


@pytest.mark.parametrize("cell", ["", "250", "#12", "vid_1", "a = b", "x-1", "failed: 500", "'quoted", "失敗"])
def test_other_cells_are_left_alone(cell: str) -> None:
    assert spreadsheet_safe(cell) == cell


def test_the_csv_has_a_header_and_a_row_per_job_and_parses_back() -> None:
    jobs = [
        make_job(1, S.DELIVERED, user_id=11, last_error="an old retry error", accepted_at=at(TOKYO, 2025, 3, 1, 9)),
        make_job(2, S.FAILED, user_id=12, last_error='the job failed: "bad", twice,\nthen 失敗',
                 service_job_id="=cmd|' /C calc'!A0", accepted_at=at(TOKYO, 2025, 3, 2, 10),
                 credited_at=at(TOKYO, 2025, 3, 5, 12), credited_by=99),
        make_job(3, S.UNKNOWN, user_id=13, last_error="-no answer", created_at=at(TOKYO, 2025, 3, 3, 11)),
        make_job(4, S.REJECTED, user_id=14),
    ]

    rows = parsed(report_csv(build_report(jobs, "this_month", 0.0, 1e10, TOKYO)))

    assert rows == [
        {"reference": "#1", "service_job_id": "vid_1", "user_id": "11", "outcome": "accepted", "state": "delivered",
         "model": "provider/video-model-2.0-fast", "time": "2025-03-01T09:00:00+09:00", "charged_yen": "250",
         "credited": "no", "credited_at": "", "credited_by": "", "reason": ""},
        {"reference": "#2", "service_job_id": "'=cmd|' /C calc'!A0", "user_id": "12", "outcome": "failed",
         "state": "failed", "model": "provider/video-model-2.0-fast", "time": "2025-03-02T10:00:00+09:00",
         "charged_yen": "250", "credited": "yes", "credited_at": "2025-03-05T12:00:00+09:00", "credited_by": "99",
         "reason": 'the job failed: "bad", twice,\nthen 失敗'},
        {"reference": "#3", "service_job_id": "", "user_id": "13", "outcome": "unknown", "state": "unknown",
         "model": "provider/video-model-2.0-fast", "time": "2025-03-03T11:00:00+09:00", "charged_yen": "0",
         "credited": "no", "credited_at": "", "credited_by": "", "reason": "'-no answer"},
    ]
    # No prompt ever leaves in the file.
    assert b"secret prompt" not in report_csv(build_report(jobs, "this_month", 0.0, 1e10, TOKYO))


def test_the_csv_sums_to_the_reports_totals() -> None:
    jobs = [make_job(i, state, charged_yen=charge) for i, (state, charge) in enumerate(
        [(S.DELIVERED, 250), (S.FAILED, 250), (S.PENDING, 400), (S.UNKNOWN, 0), (S.STALLED, 250)], start=1)]
    report = build_report(jobs, "today", 0.0, 1e10, TOKYO)

    rows = parsed(report_csv(report))

    assert sum(int(row["charged_yen"]) for row in rows) == report.totals.spent_yen == 1150


@pytest.mark.parametrize(("period", "now", "name"), [
    ("today", (2025, 3, 9, 23), "usage-2025-03-09.csv"),
    ("this_month", (2025, 3, 9, 23), "usage-2025-03.csv"),
    ("last_month", (2025, 1, 9, 23), "usage-2024-12.csv"),
])
def test_the_file_is_named_after_the_period(period: Period, now: tuple[int, ...], name: str) -> None:
    start, end = period_window(period, at(TOKYO, *now), TOKYO)
    assert csv_filename(build_report([], period, start, end, TOKYO)) == name
