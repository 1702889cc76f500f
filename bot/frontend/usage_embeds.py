"""How `/usage` and `/credit` look in Discord: a report embed within Discord's limits, and the credit replies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import discord

from bot.community.usage import MemberUsage, Period, UsageReport
from bot.core.discord_limits import FIELD_VALUE
from bot.frontend.discord_text import code, fit_content, fit_embed, inline_code, plain
from bot.frontend.embeds import relative, state_name
from bot.frontend.i18n import t, yen
from bot.store.jobs import CreditRefusal, Job

#: Room for the per-member lines, so the totals and the failed jobs still fit in the embed's 6,000.
MEMBER_LINES_CHARS: Final = 3000
FAILED_REASON_CHARS: Final = 80
FAILED_JOB_ID_CHARS: Final = 60


def period_key(period: Period) -> str:
    return f"usage.period.{period}"


def credit_refusal_key(code: CreditRefusal) -> str:
    return f"credit.{code}"


def fit_lines(lines: Sequence[str], limit: int, more: Callable[[int], str]) -> str:
    """Whole lines, as many as fit in `limit` characters together with a last line `more(left out)`."""
    if len("\n".join(lines)) <= limit:
        return "\n".join(lines)
    kept: list[str] = []
    for line in lines:
        candidate = [*kept, line, more(len(lines) - len(kept) - 1)]
        if len("\n".join(candidate)) > limit:
            break
        kept.append(line)
    return "\n".join([*kept, more(len(lines) - len(kept))])


def _member_line(member: MemberUsage, locale: str) -> str:
    tally = member.tally
    return t(locale, "usage.member.line", member=f"<@{member.user_id}>", accepted=tally.accepted,
             failed=tally.failed, unknown=tally.unknown, spent=yen(tally.spent_yen, locale))


def _failed_line(job: Job, locale: str, *, whole_server: bool) -> str:
    parts = [code(job.reference), code(job.service_job_id or "—", FAILED_JOB_ID_CHARS)]
    if whole_server:
        parts.append(f"<@{job.user_id}>")
    parts += [yen(job.charged_yen, locale), plain(job.last_error or "—", FAILED_REASON_CHARS)]
    if job.credited_at is not None:
        parts.append(t(locale, "usage.failed.credited", when=relative(job.credited_at)))
    return " · ".join(parts)


def usage_embed(report: UsageReport, locale: str, *, whole_server: bool) -> discord.Embed:
    """The report: the window, totals, per-member lines (whole server only) and the failed jobs.

    What does not fit ends in "and N more", pointing to the CSV, which always holds everything.
    """
    loc = locale
    title_key = "usage.title.server" if whole_server else "usage.title.own"
    embed = discord.Embed(title=t(loc, title_key, period=t(loc, period_key(report.period))))

    def more(count: int) -> str:
        return t(loc, "usage.more", count=count)

    parts = [t(loc, "usage.window", start=f"<t:{int(report.start)}:f>", end=f"<t:{int(report.end)}:f>")]
    if not report.jobs:
        parts.append(t(loc, "usage.none"))
    elif whole_server:
        lines = [_member_line(member, loc) for member in report.members]
        parts += [t(loc, "usage.members"), fit_lines(lines, MEMBER_LINES_CHARS, more)]
    embed.description = "\n".join(parts)

    totals = report.totals
    embed.add_field(name=t(loc, "usage.field.accepted"), value=f"{totals.accepted:,}")
    embed.add_field(name=t(loc, "usage.field.failed"), value=f"{totals.failed:,}")
    embed.add_field(name=t(loc, "usage.field.unknown"), value=f"{totals.unknown:,}")
    embed.add_field(name=t(loc, "usage.field.spent"), value=yen(totals.spent_yen, loc))
    embed.add_field(name=t(loc, "usage.field.credited"), value=yen(totals.credited_yen, loc))
    embed.add_field(name=t(loc, "usage.field.net"), value=yen(totals.net_yen, loc))
    if report.failed:
        lines = [_failed_line(job, loc, whole_server=whole_server) for job in report.failed]
        embed.add_field(name=t(loc, "usage.field.failed_jobs"), value=fit_lines(lines, FIELD_VALUE, more),
                        inline=False)

    footer = [t(loc, "usage.footer.server" if whole_server else "usage.footer.own")]
    if totals.unknown:
        footer.append(t(loc, "usage.footer.unknown", count=totals.unknown))
    embed.set_footer(text=" ".join(footer))
    return fit_embed(embed)


def csv_too_big_text(size: int, limit: int, locale: str) -> str:
    return fit_content(t(locale, "usage.csv.too_big", size=size, limit=limit))


def credited_text(job: Job, locale: str, *, host_caps: bool) -> str:
    """The credit done; `host_caps`: the host caps spending, and those caps still count the charge."""
    text = t(locale, "credit.done", ref=job.reference, job_id=code(job.service_job_id or "—"),
             price=yen(job.charged_yen, locale))
    if host_caps:
        text += " " + t(locale, "credit.done.host")
    return fit_content(text)


def credit_refused_text(code_: CreditRefusal, job: Job | None, reference: str, locale: str) -> str:
    """Why nothing was credited; `job` is the one `reference` named in this server, if any."""
    if job is None:
        return fit_content(t(locale, "credit.not_found", reference=inline_code(reference)))
    return fit_content(t(
        locale, credit_refusal_key(code_), ref=job.reference, reference=inline_code(reference),
        state=state_name(job, locale), when=relative(job.credited_at or 0), member=f"<@{job.credited_by or 0}>",
    ))
