"""Community limits on a shared key: who may ask, where, how often, and how much is spent per day and month."""

from __future__ import annotations

from collections.abc import Collection

from bot.community.blocklist import blocked_term
from bot.community.server_rules import ServerSettings
from bot.community.windows import day_bounds, month_bounds
from bot.config.settings import Settings
from bot.store.jobs import Admission, AdmissionRefused, SpendCap
from bot.store.servers import MemberRecord


def check_host(settings: Settings, guild_id: int | None, *, paused: bool) -> None:
    """The host's rules, above every server's: a pause of /video, and which servers may use the bot."""
    if paused:
        raise AdmissionRefused("paused", None)
    if settings.allowed_guild_ids and guild_id not in settings.allowed_guild_ids:
        raise AdmissionRefused("server_not_allowed", None)


def check_member(
    server: ServerSettings, member: MemberRecord, channel_id: int, role_ids: Collection[int]
) -> None:
    """Refuse requests from channels, roles or members the server's admins have not allowed."""
    if member.blocked:
        raise AdmissionRefused("member_blocked", None)
    if server.allowed_channel_ids and channel_id not in server.allowed_channel_ids:
        raise AdmissionRefused("channel", None)
    if server.allowed_role_ids and not server.allowed_role_ids & set(role_ids):
        raise AdmissionRefused("role", None, roles=sorted(server.allowed_role_ids))


def check_prompt(prompt: str, terms: Collection[str]) -> None:
    """A prompt on the server's blocklist is refused; the refusal never names the term."""
    if blocked_term(prompt, terms) is not None:
        raise AdmissionRefused("blocklist", None)


def admission(server: ServerSettings, member: MemberRecord, now: float, price_yen: int) -> Admission:
    """The limits the store checks in the same transaction that records the request."""
    day = day_bounds(server.zone, now)
    month = month_bounds(server.zone, now)
    # An admin's quota reset starts the member's windows afresh from that instant.
    since = member.quota_reset_at or 0.0
    caps = [
        SpendCap("guild_daily_cap", cap, day[0], day[1]) if (cap := server.guild_daily_cap_yen) else None,
        SpendCap("guild_monthly_cap", cap, month[0], month[1]) if (cap := server.guild_monthly_cap_yen) else None,
        SpendCap("member_daily_cap", cap, max(day[0], since), day[1], member_only=True)
        if (cap := server.member_daily_cap_yen) else None,
        SpendCap("member_monthly_cap", cap, max(month[0], since), month[1], member_only=True)
        if (cap := server.member_monthly_cap_yen) else None,
    ]
    return Admission(
        cooldown_seconds=server.cooldown_seconds,
        max_active_jobs=server.max_active_jobs,
        caps=tuple(cap for cap in caps if cap is not None),
        price_yen=price_yen,
    )
