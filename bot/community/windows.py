"""Calendar windows in a server's time zone: the days and months that quotas and usage reports count in.

Calendar arithmetic on dates, then wall-clock midnight in the zone, so a day of 23 or 25 hours (DST)
still runs from midnight to midnight.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, tzinfo


def _midnight(day: date, zone: tzinfo) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()


def day_bounds(zone: tzinfo, now: float) -> tuple[float, float]:
    """Start and end of the calendar day containing `now` in `zone`, as unix times."""
    today = datetime.fromtimestamp(now, zone).date()
    return _midnight(today, zone), _midnight(today + timedelta(days=1), zone)


def month_bounds(zone: tzinfo, now: float, *, months_back: int = 0) -> tuple[float, float]:
    """Start and end of the calendar month containing `now` in `zone` (or `months_back` before it)."""
    local = datetime.fromtimestamp(now, zone)
    index = local.year * 12 + local.month - 1 - months_back
    start = date(index // 12, index % 12 + 1, 1)
    end = date((index + 1) // 12, (index + 1) % 12 + 1, 1)
    return _midnight(start, zone), _midnight(end, zone)
