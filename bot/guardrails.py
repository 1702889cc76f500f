"""Community limits on a shared key: who may ask, where, how often, and how much a server spends a day."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from bot.settings import Settings
from bot.store import Admission, AdmissionRefused


def check_place(settings: Settings, channel_id: int, role_ids: Collection[int]) -> None:
    """Refuse requests from channels or members that the operator has not allowed."""
    if settings.allowed_channel_ids and channel_id not in settings.allowed_channel_ids:
        raise AdmissionRefused("channel", None)
    if settings.required_role_id is not None and settings.required_role_id not in role_ids:
        raise AdmissionRefused("role", None, role=settings.required_role_id)


def day_bounds(settings: Settings, now: float) -> tuple[float, float]:
    """Start and end of the budget day containing `now`, as unix times, in the configured time zone."""
    local = datetime.fromtimestamp(now, settings.zone)
    start = local.replace(hour=0, minute=0, second=0, microsecond=0)
    # Add a calendar day and normalize, so days of 23 or 25 hours (DST) still end at midnight.
    end = (start + timedelta(days=1)).replace(tzinfo=None).replace(tzinfo=settings.zone)
    return start.timestamp(), end.timestamp()


def admission(settings: Settings, now: float, price_yen: int) -> Admission:
    """The limits the store checks in the same transaction that records the request."""
    day_start, day_end = day_bounds(settings, now)
    return Admission(
        cooldown_seconds=settings.video_cooldown_seconds,
        max_active_jobs=settings.max_active_jobs_per_user,
        guild_daily_cap_yen=settings.guild_daily_budget_yen,
        day_start=day_start,
        day_end=day_end,
        price_yen=price_yen,
    )
