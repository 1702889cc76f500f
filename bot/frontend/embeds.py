"""How jobs, balances and failures look in Discord: embeds and message texts, in the requester's language."""

from __future__ import annotations

import time

import discord

from bot.core.discord_limits import EMBED_DESCRIPTION, FIELD_VALUE
from bot.core.errors import BudgetTooLow, InvalidRequest, ModelProblem, ModelUnavailable, SubmissionFailed
from bot.core.lifecycle import POLLED_STATES, SLOW_AFTER_SECONDS, STALLED_AFTER_SECONDS
from bot.core.notices import InvalidCode, Notice, RefusalCode, SubmissionKind
from bot.frontend.discord_text import CODE_CHARS, EXCERPT_CHARS, code, fit_content, fit_embed, inline_code, plain
from bot.frontend.i18n import t, videos, yen
from bot.service.answers import KeyInfo
from bot.service.catalogue import Catalogue
from bot.store.jobs import AdmissionRefused, Job, JobState

S = JobState

PROMPT_EXCERPT_CHARS = EXCERPT_CHARS
#: The prompt in full detail (/status): a field value, with room to spare.
PROMPT_FIELD_CHARS = 1000
REASON_CHARS = 300
# The worker's limits, as people read them: one home for each (bot/core/lifecycle.py).
SLOW_AFTER_MINUTES = SLOW_AFTER_SECONDS // 60
STALLED_AFTER_HOURS = STALLED_AFTER_SECONDS // 3600

_COLOURS = {
    S.DELIVERED: discord.Colour.green(),
    S.FAILED: discord.Colour.red(),
    S.STALLED: discord.Colour.red(),
    S.REJECTED: discord.Colour.orange(),
    S.UNKNOWN: discord.Colour.orange(),
    S.UNDELIVERABLE: discord.Colour.orange(),
}


# -- catalogue keys: built only from the closed sets in bot.core.notices, so mypy catches a typo ------------


def state_key(state: JobState) -> str:
    return f"state.{state.value}"


def status_next_key(state: JobState) -> str:
    return f"status.next.{state.value}"


def _status_next_key(job: Job) -> str:
    """A charged 202 the bot could not follow (no usable job id) has no job id to give support: the reference and
    the time of the charge instead."""
    if job.state == JobState.FAILED and not job.service_job_id:
        return "status.next.failed_unfollowed"
    return status_next_key(job.state)


def notice_key(notice: Notice) -> str:
    return f"deliver.{notice}"


def refusal_key(code: RefusalCode) -> str:
    return f"refuse.{code}"


def invalid_key(code: InvalidCode) -> str:
    return f"error.{code}"


_SUBMISSION_KEYS: dict[SubmissionKind, str] = {
    "rejected": "error.rejected",
    "busy": "error.busy",
    "unknown": "error.unknown_outcome",
    "not_recorded": "error.not_recorded",
    "stopping": "error.stopping",
    "charged_unusable": "error.charged_unusable",
    "charged_unreadable": "error.charged_unreadable",
    "charged_unrecorded": "error.charged_unrecorded",
}


def submission_key(kind: SubmissionKind) -> str:
    return _SUBMISSION_KEYS[kind]


_MODEL_KEYS: dict[ModelProblem, str] = {
    "unknown": "error.model_unknown",
    "not_allowed": "error.model_not_allowed",
    "none_allowed": "error.model_none_allowed",
}


def model_key(problem: ModelProblem) -> str:
    return _MODEL_KEYS[problem]


# -- pieces ----------------------------------------------------------------------------------------


def relative(unix: float) -> str:
    """A Discord timestamp that every client keeps counting (`3 minutes ago`)."""
    return f"<t:{int(unix)}:R>"


def state_name(job: Job, locale: str | None = None) -> str:
    """The job's state in `locale` (the reader's), or in the requester's language."""
    return t(locale or job.locale, state_key(job.state))


def job_id_text(job: Job) -> str:
    """The service's job id as inline code, for a field of its own."""
    return code(job.service_job_id, CODE_CHARS + 2) if job.service_job_id else "—"


def job_id_param(job: Job) -> str:
    """The service's job id for between the backticks of a catalogue text."""
    return inline_code(job.service_job_id or "—", CODE_CHARS)


def _job_price(job: Job, catalogue: Catalogue, locale: str) -> str:
    """What the job cost, or will cost once accepted: its charge, else its model's price.

    "—" for an uncharged job whose model has left the catalogue since (a restart with another file).
    """
    if job.charged_yen:
        return yen(job.charged_yen, locale)
    try:
        return yen(catalogue.price_of(job.model), locale)
    except ModelUnavailable:
        return "—"


def model_label(name: str, price_yen: int, locale: str | None) -> str:
    """A model as a choice or an offer shows it: its name and its price."""
    return t(locale, "model.label", name=name, price=yen(price_yen, locale))


def _model_name(job: Job, catalogue: Catalogue) -> str:
    try:
        return catalogue.get(job.model).name
    except ModelUnavailable:
        return job.model


def receipt_embed(
    job: Job, *, catalogue: Catalogue, position: int | None = None, ready_at: float | None = None
) -> discord.Embed:
    """The `/video` answer, edited as the job moves on while the interaction token lives.

    `position`: its place among this bot's waiting jobs, while it waits; `ready_at`: when it is most likely
    ready, from the durations of recently completed jobs of its model.
    """
    loc = job.locale
    embed = discord.Embed(title=t(loc, "video.title", ref=job.reference), colour=_COLOURS.get(job.state))
    embed.add_field(name=t(loc, "video.field.job"), value=job_id_text(job))
    embed.add_field(name=t(loc, "video.field.state"), value=state_name(job))
    if catalogue.several:
        embed.add_field(name=t(loc, "video.field.model"), value=plain(_model_name(job, catalogue), FIELD_VALUE))
    embed.add_field(name=t(loc, "video.field.cost"), value=_job_price(job, catalogue, loc))
    embed.add_field(name=t(loc, "video.field.started"), value=relative(job.accepted_at or job.created_at))
    # One estimate: when the recent jobs tell when this one is likely ready, that; the general range otherwise.
    if ready_at is None and job.state in POLLED_STATES:
        embed.add_field(name=t(loc, "video.field.wait"), value=t(loc, "video.wait"))
    if position is not None and job.state == S.PENDING:
        embed.add_field(name=t(loc, "video.field.queue"), value=t(loc, "video.queue", position=position))
    if ready_at is not None and job.state in POLLED_STATES:
        embed.add_field(name=t(loc, "video.field.eta"), value=relative(ready_at))
    if job.state == S.DELIVERED and job.delivered_message_id and job.delivered_channel_id:
        link = f"https://discord.com/channels/{job.guild_id or '@me'}/{job.delivered_channel_id}/" \
            f"{job.delivered_message_id}"
        embed.description = t(loc, "video.next.done", link=link)
    elif job.state == S.FAILED:
        embed.description = t(loc, "video.next.failed", job_id=job_id_param(job))
    elif job.state == S.UNDELIVERABLE:
        embed.description = t(loc, "video.next.undeliverable", ref=job.reference)
    else:
        embed.description = t(loc, "video.next", ref=job.reference)
        if job.interaction_expires_at is not None and job.state in POLLED_STATES:
            # Edits go through the interaction, whose token lives 15 minutes: then /status.
            embed.description += "\n" + t(loc, "video.updates", when=relative(job.interaction_expires_at),
                                           ref=job.reference)
    return fit_embed(embed)


def status_embed(job: Job, *, catalogue: Catalogue, locale: str | None = None) -> discord.Embed:
    """One request in detail, in the reader's language (the requester's when not given)."""
    loc = locale or job.locale
    embed = discord.Embed(title=t(loc, "status.title", ref=job.reference), colour=_COLOURS.get(job.state))
    embed.add_field(name=t(loc, "video.field.state"), value=state_name(job, loc))
    embed.add_field(name=t(loc, "video.field.job"), value=job_id_text(job))
    embed.add_field(name=t(loc, "video.field.cost"), value=yen(job.charged_yen, loc))
    embed.add_field(name=t(loc, "status.field.elapsed"), value=relative(job.created_at))
    seed = str(job.seed) if job.seed is not None else t(loc, "status.field.seed.none")
    embed.add_field(name=t(loc, "status.field.seed"), value=seed)
    embed.add_field(name=t(loc, "status.field.prompt"), value=plain(job.prompt, PROMPT_FIELD_CHARS),
                    inline=False)
    embed.description = t(
        loc,
        _status_next_key(job),
        channel=job.delivered_channel_id or job.channel_id,
        job_id=job_id_param(job),
        price=_job_price(job, catalogue, loc),
        hours=STALLED_AFTER_HOURS,
        reason=plain(job.last_error or "—", REASON_CHARS),
        ref=job.reference,
        at=_support_time(job.accepted_at),
    )
    return fit_embed(embed)


def status_list_embed(jobs: list[Job], locale: str) -> discord.Embed:
    """The caller's recent requests, one line each; whole lines only, as many as the description holds."""
    lines: list[str] = []
    used = 0
    for job in jobs:
        line = t(locale, "status.list.line", ref=job.reference, state=state_name(job, locale),
                 cost=yen(job.charged_yen, locale), age=relative(job.created_at))
        used += len(line) + (1 if lines else 0)
        if used > EMBED_DESCRIPTION:
            break
        lines.append(line)
    return fit_embed(discord.Embed(title=t(locale, "status.list.title"), description="\n".join(lines)))


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
    embed.add_field(name=t(loc, "balance.key"), value=code(masked_key, FIELD_VALUE), inline=False)
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
        value=t(loc, "balance.ledger.value", all_videos=videos(ledger_all[0], loc), all_yen=yen(ledger_all[1], loc),
                guild_videos=videos(ledger_guild[0], loc), guild_yen=yen(ledger_guild[1], loc)),
        inline=False,
    )
    return fit_embed(embed)


# -- failures and refusals -----------------------------------------------------------------------


def _shown(params: dict[str, object]) -> dict[str, object]:
    """Parameters with any text among them made plain; numbers keep their type for `{:,}`."""
    return {name: plain(value, REASON_CHARS) if isinstance(value, str) else value for name, value in params.items()}


def invalid_request_text(error: InvalidRequest, locale: str) -> str:
    return fit_content(t(locale, invalid_key(error.code), **_shown(error.params)))


def submission_failed_text(error: SubmissionFailed, locale: str) -> str:
    # Every kind gets every parameter; each text uses the ones it needs.
    return fit_content(t(locale, submission_key(error.kind), ref=f"#{error.job_id}",
                         reason=plain(error.reason, REASON_CHARS), zero=yen(0, locale),
                         price=yen(error.price_yen, locale), job_id=code(error.service_job_id or "—"),
                         at=_support_time(error.at)))


def _support_time(unix: float | None) -> str:
    """A moment as support reads it (UTC, to the second), beside the reader's own clock (a Discord timestamp)."""
    if unix is None:
        return "—"
    return f"`{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(unix))}` (<t:{int(unix)}:f>)"


def budget_text(error: BudgetTooLow, locale: str) -> str:
    return fit_content(t(locale, "error.budget", available=yen(error.available, locale),
                         max_budget=yen(error.max_budget, locale), spend=yen(error.spend, locale),
                         price=yen(error.price_yen, locale)))


def model_text(error: ModelUnavailable, locale: str) -> str:
    separator = t(locale, "model.separator")
    offered = separator.join(model_label(name, price, locale) for name, price in error.offered)
    return fit_content(t(locale, model_key(error.problem), model=inline_code(error.model_id, CODE_CHARS),
                         offered=plain(offered, REASON_CHARS)))


def refusal_text(error: AdmissionRefused, locale: str) -> str:
    params = _shown(error.params)
    if error.retry_at is not None:
        params["when"] = relative(error.retry_at)
    for amount in ("spent", "cap", "left"):
        if amount in params:
            params[amount] = yen(int(str(params[amount])), locale)
    if error.code == "role":
        # The server's configured roles, shown by name; int() so nothing else can become a mention.
        # The reply itself allows no mentions, so it pings nobody.
        roles = error.params.get("roles")
        listed = roles if isinstance(roles, list | tuple) else []
        params["roles"] = ", ".join(f"<@&{int(str(role))}>" for role in listed)
    return fit_content(t(locale, refusal_key(error.code), **params))


# -- messages in the channel ----------------------------------------------------------------------


def mention(job: Job) -> str:
    return f"<@{job.user_id}>"


def delivered_text(job: Job, *, catalogue: Catalogue, compressed: bool, via_dm: bool) -> str:
    loc = job.locale
    seed = str(job.seed) if job.seed is not None else t(loc, "status.field.seed.none")
    # One line (plain collapses newlines), so the whole prompt stays inside the quote block.
    prompt = plain(job.prompt, PROMPT_EXCERPT_CHARS)
    parts = [t(loc, "deliver.done", mention=mention(job), ref=job.reference, prompt=prompt, seed=seed,
               model=plain(_model_name(job, catalogue), FIELD_VALUE), job_id=job_id_param(job),
               price=_job_price(job, catalogue, loc))]
    if via_dm:
        parts.append(t(loc, "deliver.dm_note", channel=job.channel_id))
    if compressed:
        parts.append(t(loc, "deliver.compressed"))
    return fit_content("\n".join(parts))


def announcement_text(job: Job, event: Notice, *, catalogue: Catalogue) -> str:
    """News told to the requester in the channel (or the interaction, or a DM): every `Notice`."""
    return fit_content(t(job.locale, notice_key(event), mention=mention(job), ref=job.reference,
                         job_id=job_id_text(job), price=_job_price(job, catalogue, job.locale),
                         minutes=SLOW_AFTER_MINUTES, hours=STALLED_AFTER_HOURS, at=_support_time(job.accepted_at),
                         reason=plain(job.last_error or "—", REASON_CHARS)))


def requester_only(job: Job) -> discord.AllowedMentions:
    """Whatever the prompt says, a message pings its requester and nobody else."""
    return discord.AllowedMentions(everyone=False, roles=False, users=[discord.Object(id=job.user_id)],
                                   replied_user=False)
