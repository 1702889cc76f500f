"""How jobs, balances and failures look in Discord: embeds and message texts, in the requester's language."""

from __future__ import annotations

import discord

from bot.errors import BudgetTooLow, InvalidRequest, SubmissionFailed
from bot.i18n import t, yen
from bot.store import AdmissionRefused, Job, JobState
from bot.video_client import KeyInfo

S = JobState

PROMPT_EXCERPT_CHARS = 300
SLOW_AFTER_MINUTES = 30
STALLED_AFTER_HOURS = 6

_COLOURS = {
    S.DELIVERED: discord.Colour.green(),
    S.FAILED: discord.Colour.red(),
    S.STALLED: discord.Colour.red(),
    S.REJECTED: discord.Colour.orange(),
    S.UNKNOWN: discord.Colour.orange(),
    S.UNDELIVERABLE: discord.Colour.orange(),
}


def excerpt(text: str, limit: int = PROMPT_EXCERPT_CHARS) -> str:
    """Shortened for display, with user mentions defused so a prompt can never ping anyone."""
    safe = discord.utils.escape_markdown(discord.utils.escape_mentions(text))
    # Shortened after escaping, so the result never exceeds `limit` (embed fields stop at 1,024).
    return safe if len(safe) <= limit else safe[: limit - 1].rstrip() + "…"


def inline_code(text: str, limit: int = 100) -> str:
    """User text shown inside backticks: markdown does not apply there, only a backtick could break out."""
    return text[:limit].replace("`", "'")


def relative(unix: float) -> str:
    """A Discord timestamp that every client keeps counting (`3 minutes ago`)."""
    return f"<t:{int(unix)}:R>"


def state_name(job: Job, locale: str | None = None) -> str:
    """The job's state in `locale` (the reader's), or in the requester's language."""
    return t(locale or job.locale, f"state.{job.state.value}")


def job_id_text(job: Job) -> str:
    return f"`{job.service_job_id}`" if job.service_job_id else "—"


def receipt_embed(job: Job, *, price_yen: int) -> discord.Embed:
    """The `/video` answer, edited as the job moves on while the interaction token lives."""
    loc = job.locale
    embed = discord.Embed(title=t(loc, "video.title", ref=job.reference), colour=_COLOURS.get(job.state))
    embed.add_field(name=t(loc, "video.field.job"), value=job_id_text(job))
    embed.add_field(name=t(loc, "video.field.state"), value=state_name(job))
    embed.add_field(name=t(loc, "video.field.cost"), value=yen(job.charged_yen or price_yen, loc))
    embed.add_field(name=t(loc, "video.field.started"), value=relative(job.accepted_at or job.created_at))
    if job.state in (S.PENDING, S.IN_PROGRESS):
        embed.add_field(name=t(loc, "video.field.wait"), value=t(loc, "video.wait"))
    if job.state == S.DELIVERED and job.delivered_message_id and job.delivered_channel_id:
        link = f"https://discord.com/channels/{job.guild_id or '@me'}/{job.delivered_channel_id}/" \
            f"{job.delivered_message_id}"
        embed.description = t(loc, "video.next.done", link=link)
    elif job.state == S.FAILED:
        embed.description = t(loc, "video.next.failed", job_id=job.service_job_id)
    elif job.state == S.UNDELIVERABLE:
        embed.description = t(loc, "video.next.undeliverable", ref=job.reference)
    else:
        embed.description = t(loc, "video.next", ref=job.reference)
    return embed


def status_embed(job: Job, *, price_yen: int, locale: str | None = None) -> discord.Embed:
    """One request in detail, in the reader's language (the requester's when not given)."""
    loc = locale or job.locale
    embed = discord.Embed(title=t(loc, "status.title", ref=job.reference), colour=_COLOURS.get(job.state))
    embed.add_field(name=t(loc, "video.field.state"), value=state_name(job, loc))
    embed.add_field(name=t(loc, "video.field.job"), value=job_id_text(job))
    embed.add_field(name=t(loc, "video.field.cost"), value=yen(job.charged_yen, loc))
    embed.add_field(name=t(loc, "status.field.elapsed"), value=relative(job.created_at))
    seed = str(job.seed) if job.seed is not None else t(loc, "status.field.seed.none")
    embed.add_field(name=t(loc, "status.field.seed"), value=seed)
    embed.add_field(name=t(loc, "status.field.prompt"), value=excerpt(job.prompt, 1000), inline=False)
    embed.description = t(
        loc,
        f"status.next.{job.state.value}",
        channel=job.delivered_channel_id or job.channel_id,
        job_id=job.service_job_id,
        price=yen(price_yen, loc),
        hours=STALLED_AFTER_HOURS,
        reason=excerpt(job.last_error or "—", 300),
    )
    return embed


def status_list_embed(jobs: list[Job], locale: str) -> discord.Embed:
    lines = [
        t(locale, "status.list.line", ref=job.reference, state=state_name(job, locale),
          cost=yen(job.charged_yen, locale), age=relative(job.created_at))
        for job in jobs
    ]
    return discord.Embed(title=t(locale, "status.list.title"), description="\n".join(lines))


def balance_embed(
    info: KeyInfo,
    *,
    masked_key: str,
    price_yen: int,
    ledger_all: tuple[int, int],
    ledger_guild: tuple[int, int],
    locale: str,
) -> discord.Embed:
    loc = locale
    embed = discord.Embed(title=t(loc, "balance.title"))
    embed.add_field(name=t(loc, "balance.key"), value=f"`{masked_key}`", inline=False)
    embed.add_field(name=t(loc, "balance.spend"), value=yen(info.spend, loc))
    if info.max_budget is None or info.available is None:
        no_limit = t(loc, "balance.no_limit")
        embed.add_field(name=t(loc, "balance.max"), value=no_limit)
        embed.add_field(name=t(loc, "balance.available"), value=no_limit)
        embed.add_field(name=t(loc, "balance.videos_left"), value=no_limit)
    else:
        embed.add_field(name=t(loc, "balance.max"), value=yen(info.max_budget, loc))
        embed.add_field(name=t(loc, "balance.available"), value=yen(info.available, loc))
        count = max(0, info.available) // price_yen
        embed.add_field(
            name=t(loc, "balance.videos_left"),
            value=t(loc, "balance.videos_left.value", count=count, price=yen(price_yen, loc)),
        )
    embed.add_field(
        name=t(loc, "balance.ledger"),
        value=t(loc, "balance.ledger.value", all_count=ledger_all[0], all_yen=yen(ledger_all[1], loc),
                guild_count=ledger_guild[0], guild_yen=yen(ledger_guild[1], loc)),
        inline=False,
    )
    return embed


# -- failures and refusals -----------------------------------------------------------------------


def invalid_request_text(error: InvalidRequest, locale: str) -> str:
    return t(locale, f"error.{error.code}", **error.params)


def submission_failed_text(error: SubmissionFailed, locale: str, *, price_yen: int) -> str:
    ref = f"#{error.job_id}"
    if error.kind == "rejected":
        return t(locale, "error.rejected", ref=ref, reason=excerpt(error.reason), zero=yen(0, locale))
    if error.kind == "busy":
        return t(locale, "error.busy", ref=ref, zero=yen(0, locale))
    if error.kind == "not_recorded":
        return t(locale, "error.not_recorded", ref=ref, zero=yen(0, locale))
    if error.kind in ("charged_unusable", "charged_unrecorded"):
        job_id = f"`{inline_code(error.service_job_id or '—', 40)}`"
        return t(locale, f"error.{error.kind}", ref=ref, price=yen(price_yen, locale), reason=excerpt(error.reason),
                 job_id=job_id)
    return t(locale, "error.unknown_outcome", ref=ref, price=yen(price_yen, locale))


def budget_text(error: BudgetTooLow, locale: str) -> str:
    return t(locale, "error.budget", available=yen(error.available, locale), max_budget=yen(error.max_budget, locale),
             spend=yen(error.spend, locale), price=yen(error.price_yen, locale))


def refusal_text(error: AdmissionRefused, locale: str, *, price_yen: int) -> str:
    params = dict(error.params)
    if error.retry_at is not None:
        params["when"] = relative(error.retry_at)
    if error.code == "guild_daily_cap":
        params["spent"] = yen(int(str(params["spent"])), locale)
        params["cap"] = yen(int(str(params["cap"])), locale)
    if error.code == "role":
        params["role"] = f"<@&{params['role']}>"
    return t(locale, f"refuse.{error.code}", **params)


# -- messages in the channel ----------------------------------------------------------------------


def mention(job: Job) -> str:
    return f"<@{job.user_id}>"


def delivered_text(job: Job, *, price_yen: int, compressed: bool, via_dm: bool) -> str:
    loc = job.locale
    seed = str(job.seed) if job.seed is not None else t(loc, "status.field.seed.none")
    # One line, so the whole prompt stays inside the quote block.
    prompt = " ".join(excerpt(job.prompt).split())
    parts = [t(loc, "deliver.done", mention=mention(job), ref=job.reference, prompt=prompt,
               seed=seed, job_id=job.service_job_id, price=yen(price_yen, loc))]
    if via_dm:
        parts.append(t(loc, "deliver.dm_note", channel=job.channel_id))
    if compressed:
        parts.append(t(loc, "deliver.compressed"))
    return "\n".join(parts)


def announcement_text(job: Job, event: str, *, price_yen: int) -> str:
    """`failed`, `slow`, `stalled`, `undeliverable` or `unknown`: told to the requester in the channel."""
    return t(job.locale, f"deliver.{event}", mention=mention(job), ref=job.reference, job_id=job_id_text(job),
             price=yen(price_yen, job.locale), minutes=SLOW_AFTER_MINUTES, hours=STALLED_AFTER_HOURS,
             reason=excerpt(job.last_error or "—", 300))


def requester_only(job: Job) -> discord.AllowedMentions:
    """Whatever the prompt says, a message pings its requester and nobody else."""
    return discord.AllowedMentions(everyone=False, roles=False, users=[discord.Object(id=job.user_id)],
                                   replied_user=False)
