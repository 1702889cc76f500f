"""Community limits on a shared key: what may be asked, how often, and how much is spent per day and month.

Who may ask, and where, is the trust model's (bot/community/trust.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from bot.community.blocklist import blocked_term
from bot.community.server_rules import ServerSettings
from bot.community.windows import day_bounds, month_bounds
from bot.core.notices import RefusalCode
from bot.store.jobs import Admission, AdmissionRefused, SpendCap
from bot.store.servers import MemberRecord


def check_prompt(prompt: str, terms: Collection[str]) -> None:
    """A prompt on the server's blocklist is refused; the refusal never names the term."""
    if blocked_term(prompt, terms) is not None:
        raise AdmissionRefused("blocklist", None)


@dataclass(frozen=True)
class _Cap:
    key: str  # its setting
    month: bool  # its window: the calendar month, else the day
    member_only: bool  # it counts one member's spending, else the whole server's
    code: RefusalCode  # the refusal of the server's own cap
    host_code: RefusalCode  # the refusal of the host's, which names the host


_CAPS: tuple[_Cap, ...] = (
    _Cap("guild_daily_cap_yen", False, False, "guild_daily_cap", "host_guild_daily_cap"),
    _Cap("guild_monthly_cap_yen", True, False, "guild_monthly_cap", "host_guild_monthly_cap"),
    _Cap("member_daily_cap_yen", False, True, "member_daily_cap", "host_member_daily_cap"),
    _Cap("member_monthly_cap_yen", True, True, "member_monthly_cap", "host_member_monthly_cap"),
)


def _caps(settings: ServerSettings, now: float, *, host: bool, since: float = 0.0) -> list[SpendCap]:
    """The caps of `settings`, in their own days and months; a member's windows start no earlier than `since`.
    A server's: only those its admins set. The host's: they count credited charges too."""
    day = day_bounds(settings.zone, now)
    month = month_bounds(settings.zone, now)
    found: list[SpendCap] = []
    for cap in _CAPS:
        yen = getattr(settings, cap.key)
        if not yen or not (host or cap.key in settings.from_server):
            continue
        start, end = month if cap.month else day
        found.append(SpendCap(
            cap.host_code if host else cap.code, yen, max(start, since) if cap.member_only else start, end,
            member_only=cap.member_only, counts_credited=host,
        ))
    return found


def admission(
    server: ServerSettings, host: ServerSettings, member: MemberRecord, now: float, price_yen: int
) -> Admission:
    """The limits the store checks in the same transaction that records the request.

    Two sets of caps, both of which must hold. The server's own caps (those its admins set: `from_server`)
    count in the server's time zone, from a member's quota reset, and leave out charges marked credited. The
    host's caps (`host`: the environment's) count in the host's time zone and every charge, credited or not,
    and nothing a server does moves them: neither its time zone nor a quota reset nor a /credit.
    """
    caps = [*_caps(server, now, host=False, since=member.quota_reset_at or 0.0), *_caps(host, now, host=True)]
    # A refusal names the first cap spent, in this order, and says when it resets: the member can spend again only
    # once every spent cap has, so the latest end first (the server's first of two that end together).
    caps.sort(key=lambda cap: -cap.end)
    return Admission(
        cooldown_seconds=server.cooldown_seconds,
        max_active_jobs=server.max_active_jobs,
        caps=tuple(caps),
        price_yen=price_yen,
    )
