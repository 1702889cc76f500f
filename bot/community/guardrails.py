"""Community limits on a shared key: what may be asked, how often, and how much is spent per day and month.

Who may ask, and where, is the trust model's (bot/community/trust.py).
"""

from __future__ import annotations

from collections.abc import Collection

from bot.community.blocklist import blocked_term
from bot.community.server_rules import ServerSettings
from bot.community.windows import day_bounds, month_bounds
from bot.store.jobs import Admission, AdmissionRefused, SpendCap
from bot.store.servers import MemberRecord


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
