"""The buttons: Re-roll and Delete on a posted video, Confirm/Generate and Cancel on an offer, Cancel on a
request waiting to be sent.

Each is a `DynamicItem` whose custom id carries the bot's own row id (a job's or an offer's, never the
service's id), registered at start-up (`VideoBot.setup_hook`), so a button keeps working after a restart.
A click reads everything from the database; a click on a row the bot no longer has gets a private answer.
Whatever spends money goes through `VideoRequests.record` and `send`, exactly as `/video` does.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from typing import Any, ClassVar, Protocol, Self, cast

import discord

from bot.core.lifecycle import JobState
from bot.core.log_context import job_fields
from bot.frontend import embeds
from bot.frontend.discord_text import fit_content, plain
from bot.frontend.i18n import t, yen
from bot.frontend.tree import answer_error, respond
from bot.jobs.intake import RequestCancelled, VideoRequests, interaction_expiry
from bot.jobs.offers import Offers, new_seed, request_of
from bot.service.catalogue import Catalogue, choose_model
from bot.store.jobs import IllegalTransition, Job, JobNotFound, NewJob, Offer, OfferOutcome, StoreUnavailable

log = logging.getLogger(__name__)

Interaction = discord.Interaction[Any]
Button = discord.ui.Button[discord.ui.View]


class ButtonHost(Protocol):
    """What a click needs from the bot (VideoBot); the bot imports this module, never the reverse."""

    requests: VideoRequests
    catalogue: Catalogue
    offers: Offers


def _host(interaction: Interaction) -> ButtonHost:
    return cast(ButtonHost, interaction.client)


def _roles(interaction: Interaction) -> list[int]:
    member = interaction.user
    return [role.id for role in member.roles] if isinstance(member, discord.Member) else []


async def _private(interaction: Interaction, key: str, **params: object) -> None:
    await respond(interaction, fit_content(t(interaction.locale.value, key, **params)), ephemeral=True)


async def _guarded(interaction: Interaction, handler: Callable[[Interaction], Awaitable[None]]) -> None:
    """A click's errors reach the clicker like a command's (discord.py only logs a button's exceptions)."""
    try:
        await handler(interaction)
    except Exception as exc:
        await answer_error(interaction, exc)


class _RowButton(discord.ui.DynamicItem[Button], template=r"(?!)"):  # matches nothing: only subclasses are registered
    """A button whose custom id carries one of the bot's row ids: `id_format` with `{id}` (a subclass names it, and
    its template, which matches the custom id back, is made from it), so it is rebuilt from its custom id after a
    restart. A click's errors reach the clicker like a command's; `clicked` is the button's own work."""

    ID_FORMAT: ClassVar[str]
    STYLE: ClassVar[discord.ButtonStyle] = discord.ButtonStyle.secondary

    def __init_subclass__(cls, *, id_format: str) -> None:
        cls.ID_FORMAT = id_format
        super().__init_subclass__(template=re.escape(id_format).replace(re.escape("{id}"), r"(?P<id>[0-9]+)"))

    def __init__(self, row_id: int, label: str) -> None:
        self.row_id = row_id
        super().__init__(discord.ui.Button(label=label, style=self.STYLE, custom_id=self.ID_FORMAT.format(id=row_id)))

    @classmethod
    async def from_custom_id(cls, interaction: Interaction, item: discord.ui.Item[Any], match: Any, /) -> Self:
        return cls(int(match["id"]), getattr(item, "label", None) or "")

    async def callback(self, interaction: Interaction) -> None:
        await _guarded(interaction, self.clicked)

    async def clicked(self, interaction: Interaction) -> None:
        raise NotImplementedError


# -- the request flow shared by /video and the buttons that spend -------------------------------------


async def start_request(interaction: Interaction, request: NewJob, role_ids: Collection[int], *,
                        offer_id: int | None = None,
                        acknowledge: Callable[[], Awaitable[object]] | None = None) -> None:
    """Record (every rule), acknowledge, send, show the receipt; Cancel is offered while it waits for its turn.

    Recorded before acknowledged: a process killed in between leaves a request that start-up ends and tells. A
    slash command's first answer is a deferral; a button's is `acknowledge` (its message updated), so its answers
    are follow-ups. Refusals raise before anything is written or spent.
    """
    host = _host(interaction)
    requests = host.requests
    try:
        job = await requests.record(request, role_ids)
    except Exception:
        if acknowledge is not None:
            # Refused (or not recorded): the used offer's buttons go all the same; the refusal follows.
            with contextlib.suppress(discord.HTTPException):
                await acknowledge()
        raise
    slash = acknowledge is None
    try:
        if acknowledge is not None:
            await acknowledge()
        else:
            await interaction.response.defer(ephemeral=True, thinking=True)
    except Exception:
        # Nothing was sent: end the request now (the sweep tells the requester) rather than leave it in flight.
        await requests.abandon(job, "the request could not be acknowledged")
        raise
    if offer_id is not None:
        try:  # bookkeeping only (the click was used once already): it never ends the request
            await host.offers.started(offer_id, job.id)
        except StoreUnavailable as exc:
            log.warning("%s: its offer %d could not be marked started (%s)", job.reference, offer_id, exc,
                        extra=job_fields(job))
    reply: discord.Message | None = None

    async def waiting(job: Job) -> None:
        nonlocal reply
        view = discord.ui.View(timeout=None).add_item(CancelJobButton(job.id, t(job.locale, "button.cancel")))
        text = t(job.locale, "cancel.waiting", ref=job.reference)
        if slash:
            interaction.extras["answered"] = True
            reply = await interaction.edit_original_response(content=text, view=view)
        else:
            reply = await interaction.followup.send(text, view=view, ephemeral=True, wait=True)

    try:
        job = await requests.send(job, on_waiting=waiting)
    except RequestCancelled:
        return  # the click that cancelled it has answered
    except Exception as exc:
        if reply is None:
            raise
        await answer_error(interaction, exc, reply=reply)
        return
    # Accepted and charged from here: a database hiccup costs the receipt its place in line or its later edits,
    # never its answer (the error's "nothing was spent" would be false).
    try:
        position = await requests.queue_position(job)
    except StoreUnavailable as exc:
        log.warning("%s: its place in line could not be read (%s)", job.reference, exc, extra=job_fields(job))
        position = None
    receipt = embeds.receipt_embed(job, catalogue=host.catalogue, position=position, ready_at=requests.ready_at(job))
    message = await respond(interaction, embed=receipt) if reply is None else \
        await reply.edit(content=None, embed=receipt, view=None)
    if message is not None:
        try:
            await requests.remember_reply(job, message.id)
        except StoreUnavailable as exc:
            log.warning("%s: its receipt's message id could not be recorded (%s); the receipt is not updated",
                        job.reference, exc, extra=job_fields(job))


def offer_view(offer: Offer, locale: str) -> discord.ui.View:
    go = "button.confirm" if offer.kind == "reroll" else "button.generate"
    return (discord.ui.View(timeout=None)
            .add_item(OfferGoButton(offer.id, t(locale, go)))
            .add_item(OfferCancelButton(offer.id, t(locale, "button.cancel"))))


async def show_offer(interaction: Interaction, offer: Offer, text: str) -> None:
    """The offer, privately, with its buttons; at its expiry, unless used, it says so and loses them."""
    locale = interaction.locale.value
    await interaction.response.send_message(fit_content(text), view=offer_view(offer, locale), ephemeral=True,
                                            allowed_mentions=discord.AllowedMentions.none())

    async def expired() -> None:
        with contextlib.suppress(discord.HTTPException):
            await interaction.edit_original_response(content=t(locale, "offer.expired"), view=None)

    _host(interaction).offers.expire_later(offer, expired)


async def offer_confirmation(interaction: Interaction, request: NewJob) -> None:
    """Confirm before spending: /video answers with the price, model and prompt, and Generate and Cancel."""
    host = _host(interaction)
    # The same choice `record` makes, to name the price; `record` makes it again (and checks it) on Generate.
    server = await host.requests.rules.effective(request.guild_id)
    model = choose_model(host.catalogue, request.model or None, allowed=server.allowed_models,
                         default=server.default_model)
    host.requests.validate(request.prompt, request.seed, model.id)
    # The offer holds the model it names, so Generate charges the price shown even if the default changes.
    offer = await host.offers.confirm(replace(request, model=model.id))
    locale = interaction.locale.value
    await show_offer(interaction, offer, t(
        locale, "confirm.offer", model=plain(model.name, 100), price=yen(host.catalogue.price_of(model.id), locale),
        prompt=plain(request.prompt, embeds.PROMPT_EXCERPT_CHARS), when=embeds.relative(offer.expires_at)))


# -- on a posted video ---------------------------------------------------------------------------------


async def _known_job(interaction: Interaction, job_id: int) -> Job | None:
    try:
        job = await _host(interaction).requests.get(job_id)
    except JobNotFound:
        job = None
    if job is None or (interaction.guild_id is not None and job.guild_id != interaction.guild_id):
        await _private(interaction, "button.unknown")
        return None
    return job


async def _may_reroll(interaction: Interaction, job: Job) -> bool:
    if job.guild_id is not None and interaction.user.id != job.user_id:
        server = await _host(interaction).requests.rules.effective(job.guild_id)
        if server.reroll_by == "requester":
            await _private(interaction, "reroll.not_allowed")
            return False
    if not job.prompt:
        await _private(interaction, "reroll.prompt_erased", ref=job.reference)
        return False
    return True


class RerollButton(_RowButton, id_format="video:reroll:{id}"):
    STYLE = discord.ButtonStyle.primary

    async def clicked(self, interaction: Interaction) -> None:
        job = await _known_job(interaction, self.row_id)
        if job is None or not await _may_reroll(interaction, job):
            return
        host = _host(interaction)
        locale = interaction.locale.value
        price = host.catalogue.price_of(job.model)  # raises ModelUnavailable for a model gone since
        offer = await host.offers.reroll(job.id, user_id=interaction.user.id, guild_id=job.guild_id,
                                         channel_id=job.channel_id, locale=locale, model=job.model)
        await show_offer(interaction, offer, t(
            locale, "reroll.offer", ref=job.reference, model=plain(host.catalogue.get(job.model).name, 100),
            price=yen(price, locale), when=embeds.relative(offer.expires_at)))


class DeleteButton(_RowButton, id_format="video:delete:{id}"):

    async def clicked(self, interaction: Interaction) -> None:
        job = await _known_job(interaction, self.row_id)
        if job is None:
            return
        # The post goes; the job stays in the ledger.
        if interaction.user.id != job.user_id and not interaction.permissions.manage_messages:
            await _private(interaction, "delete.refused")
            return
        await _private(interaction, "delete.done")
        if interaction.message is not None:
            await interaction.message.delete()
        log.info("the post of request %s was deleted by user %s", job.reference, interaction.user.id)


def video_buttons(job: Job) -> discord.ui.View:
    """The buttons under a posted video, labelled in its requester's language."""
    return (discord.ui.View(timeout=None)
            .add_item(RerollButton(job.id, t(job.locale, "button.reroll")))
            .add_item(DeleteButton(job.id, t(job.locale, "button.delete"))))


# -- on an offer -----------------------------------------------------------------------------------------


async def _own_offer(interaction: Interaction, offer_id: int) -> Offer | None:
    offer = await _host(interaction).offers.get(offer_id)
    if offer is None:
        await _private(interaction, "button.unknown")
        return None
    if offer.user_id != interaction.user.id:
        await _private(interaction, "button.not_yours")
        return None
    return offer


async def _use(interaction: Interaction, offer: Offer, outcome: OfferOutcome) -> bool:
    """Use the offer once: True for the one click whose UPDATE passed; every other click is told why not."""
    offers = _host(interaction).offers
    if await offers.use(offer.id, outcome):
        return True
    current = await offers.get(offer.id)
    # Unused yet refused: its time has passed (its timer may not have closed it yet).
    expired = current is not None and (current.outcome == "expired" or current.used_at is None)
    await _private(interaction, "offer.expired" if expired else "offer.already")
    return False


class OfferGoButton(_RowButton, id_format="video:offer:{id}:go"):
    STYLE = discord.ButtonStyle.success

    async def clicked(self, interaction: Interaction) -> None:
        offer = await _own_offer(interaction, self.row_id)
        if offer is None:
            return
        prompt: str | None = None
        seed: int | None = None
        if offer.kind == "reroll":
            assert offer.source_job_id is not None
            source = await _known_job(interaction, offer.source_job_id)
            if source is None or not await _may_reroll(interaction, source):
                return
            prompt = source.prompt
            seed = new_seed(_host(interaction).catalogue.get(source.model))
        if not await _use(interaction, offer, "used"):
            return
        request = request_of(
            offer, user_id=interaction.user.id, prompt=prompt, seed=seed, interaction_token=interaction.token,
            interaction_expires_at=interaction_expiry(interaction.created_at.timestamp()),
            upload_limit_bytes=interaction.filesize_limit,
        )
        # Once recorded, the offer's message keeps its text and loses its buttons; the request's answers follow.
        await start_request(interaction, request, _roles(interaction), offer_id=offer.id,
                            acknowledge=lambda: interaction.response.edit_message(view=None))


class OfferCancelButton(_RowButton, id_format="video:offer:{id}:cancel"):

    async def clicked(self, interaction: Interaction) -> None:
        offer = await _own_offer(interaction, self.row_id)
        if offer is None or not await _use(interaction, offer, "cancelled"):
            return
        await interaction.response.edit_message(content=t(interaction.locale.value, "offer.cancelled"), view=None)


# -- on a request waiting for the bot's turn ------------------------------------------------------------------


class CancelJobButton(_RowButton, id_format="video:job:{id}:cancel"):

    async def clicked(self, interaction: Interaction) -> None:
        job = await _known_job(interaction, self.row_id)
        if job is None:
            return
        if job.user_id != interaction.user.id:
            await _private(interaction, "button.not_yours")
            return
        locale = interaction.locale.value
        try:
            job = await _host(interaction).requests.cancel(job.id)
        except IllegalTransition:
            job = await _host(interaction).requests.get(job.id)
            if job.state == JobState.CANCELLED or job.state in (JobState.REJECTED, JobState.INTERRUPTED):
                await _private(interaction, "cancel.ended", ref=job.reference, state=embeds.state_name(job, locale))
            else:
                # On its way or accepted: the service has no cancel.
                await _private(interaction, "cancel.too_late", ref=job.reference)
            return
        log.info("request %s was cancelled by its requester before it was sent", job.reference)
        await interaction.response.edit_message(content=t(locale, "cancel.done", ref=job.reference), view=None)


#: Registered with `bot.add_dynamic_items` at start-up, so every button ever posted resolves after a restart.
DYNAMIC_ITEMS = (RerollButton, DeleteButton, OfferGoButton, OfferCancelButton, CancelJobButton)
