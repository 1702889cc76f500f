"""The buttons: Re-roll and Delete on a posted video, Confirm/Generate and Cancel on an offer, Cancel on a
request waiting to be sent.

Each is a `DynamicItem` whose custom id carries the bot's own row id (a job's or an offer's, never the
service's id), registered at start-up (`VideoBot.setup_hook`), so a button keeps working after a restart.
A click reads everything from the database; a click on a row the bot no longer has gets a private answer.
Whatever spends money goes through `VideoRequests.record` and `send`, exactly as `/video` does.

Dynamic items do not pass the command tree's `interaction_check`: each click asks the trust model itself
(bot/community/trust.py, its actions in `ACTIONS`), first with what the interaction alone tells (the host's
rules), then with the row it is about (whose it is, the message the bot wrote for it, the server's rules).
A click that spends (Re-roll, Confirm, Generate) is also held to what Discord holds /video to, read from Discord
for the row's server (bot/frontend/permissions.py): the clicker is still a member there, and the server's command
permissions let them use /video in the request's channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from typing import Any, ClassVar, Protocol, Self, TypeVar, cast

import discord

from bot.community import trust
from bot.core.lifecycle import NOTHING_SPENT_STATES
from bot.core.log_context import job_fields
from bot.frontend import embeds, gate
from bot.frontend.discord_text import fit_content, plain
from bot.frontend.i18n import t, yen
from bot.frontend.permissions import SpendingAccess
from bot.frontend.tree import answer_error, respond
from bot.jobs.intake import RequestCancelled, VideoRequests, interaction_expiry
from bot.jobs.offers import Offers, new_seed, request_of
from bot.service.catalogue import MAX_SHOWN_NAME_CHARS, Catalogue, choose_model
from bot.store.jobs import IllegalTransition, Job, JobNotFound, NewJob, Offer, OfferOutcome, StoreUnavailable

#: A click can come a moment after its message was shown but before the message's id is recorded (a video's
#: delivery, an offer, a request's "waiting" notice): it waits this long for the record, then is refused.
RECORD_GRACE_SECONDS = 1.5

log = logging.getLogger(__name__)

Interaction = discord.Interaction[Any]
R = TypeVar("R")
Button = discord.ui.Button[discord.ui.View]


class ButtonHost(Protocol):
    """What a click needs from the bot (VideoBot); the bot imports this module, never the reverse."""

    requests: VideoRequests
    catalogue: Catalogue
    offers: Offers
    access: SpendingAccess


def _host(interaction: Interaction) -> ButtonHost:
    return cast(ButtonHost, interaction.client)


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
    #: The trust model's actions a click on this button is (docs/trust.md lists them).
    ACTIONS: ClassVar[tuple[str, ...]] = ()

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
        await _guarded(interaction, self._gated)

    async def _gated(self, interaction: Interaction) -> None:
        # The host's rules from the interaction alone, before any row is read: an unlisted server hears one short
        # refusal. A click in a DM has no server of its own: its row's is checked once the row is read.
        if interaction.guild_id is not None:
            # One check per distinct gate (Confirm and Generate share theirs).
            gates = {trust.checks(action, trust.GATE): action for action in self.ACTIONS}
            for action in gates.values():
                if not await _allowed(interaction, action, trust.GATE):
                    return
        await self.clicked(interaction)

    async def clicked(self, interaction: Interaction) -> None:
        raise NotImplementedError


async def _allowed(interaction: Interaction, action: str, stages: Collection[trust.Stage], *,
                   target: trust.Target | None = None, reroll: trust.Reroll | None = None,
                   member: trust.MemberRules | None = None, standing: trust.Standing | None = None) -> bool:
    """The trust model's answer for this click; a refusal is answered here, privately."""
    decision = await gate.decide(interaction, action, stages, target=target, reroll=reroll, member=member,
                                 standing=standing)
    if decision.allowed:
        return True
    log.info("%s refused for user %s in server %s: %s", action, interaction.user.id, interaction.guild_id,
             decision.check)
    await respond(interaction, fit_content(gate.refusal_text(decision, interaction.locale.value)), ephemeral=True)
    return False


#: What a click is checked at once its row is read.
_ON_ITS_ROW = frozenset({trust.Stage.HOST, trust.Stage.CALLER, trust.Stage.TARGET})
#: Then, for a click that spends, what Discord says of the clicker in the row's server (and for Re-roll the member
#: rules with the roles Discord gave: Confirm and Generate have them checked when the request is recorded).
_AS_VIDEO = frozenset({trust.Stage.DISCORD})
_AS_VIDEO_AND_MEMBER_RULES = frozenset({trust.Stage.DISCORD, trust.Stage.REQUEST})


async def _standing(interaction: Interaction, guild_id: int | None, channel_id: int) -> trust.Standing:
    """The clicker in the request's server and channel now, as Discord says (read only once the row is known)."""
    return await _host(interaction).access.standing(interaction, guild_id, channel_id)


def _role_ids(standing: trust.Standing) -> frozenset[int]:
    """The roles Discord gave for the clicker (none for one who is not a member: refused before they count)."""
    return standing.member.role_ids if standing.member is not None else frozenset()


async def _recorded(read: Callable[[], Awaitable[R | None]], message_of: Callable[[R], int | None]) -> R | None:
    """The row, once the message the bot wrote for it is recorded (or RECORD_GRACE_SECONDS have passed)."""
    row = await read()
    deadline = time.monotonic() + RECORD_GRACE_SECONDS
    while row is not None and message_of(row) is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        row = await read()
    return row


# -- the request flow shared by /video and the buttons that spend -------------------------------------


async def start_request(interaction: Interaction, request: NewJob, role_ids: Collection[int], *,
                        action: str = trust.VIDEO, offer_id: int | None = None,
                        acknowledge: Callable[[], Awaitable[object]] | None = None) -> None:
    """Record (every rule of `action`), acknowledge, send, show the receipt; Cancel is offered while it waits for
    its turn.

    Recorded before acknowledged: a process killed in between leaves a request that start-up ends and tells. A
    slash command's first answer is a deferral; a button's is `acknowledge` (its message updated), so its answers
    are follow-ups. Refusals raise before anything is written or spent.
    """
    host = _host(interaction)
    requests = host.requests
    try:
        job = await requests.record(request, role_ids, action=action)
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
        # Cancel counts only from this message (its receipt later, the same message).
        await requests.remember_reply(job, reply.id)

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
    sent = await interaction.response.send_message(fit_content(text), view=offer_view(offer, locale),
                                                   ephemeral=True, allowed_mentions=discord.AllowedMentions.none())
    message_id = sent.message_id if sent is not None else None
    if message_id is None:
        message_id = (await interaction.original_response()).id
    try:
        # Its buttons count only from this message; unrecorded, every click on them is refused.
        await _host(interaction).offers.shown(offer.id, message_id)
    except StoreUnavailable as exc:
        log.warning("offer %d: its message could not be recorded (%s); its buttons will be refused", offer.id, exc)

    async def expired() -> None:
        with contextlib.suppress(discord.HTTPException):
            await interaction.edit_original_response(content=t(locale, "offer.expired"), view=None)

    _host(interaction).offers.expire_later(offer, expired)


async def offer_confirmation(interaction: Interaction, request: NewJob, role_ids: Collection[int]) -> None:
    """Confirm before spending: /video answers with the price, model and prompt, and Generate and Cancel."""
    host = _host(interaction)
    # /video's own rules now (no Generate for a member who may not ask here); Generate checks them again.
    server = (await host.requests.admit(request, role_ids, action=trust.VIDEO)).server
    # The same choice `record` makes, to name the price; `record` makes it again (and checks it) on Generate.
    model = choose_model(host.catalogue, request.model or None, allowed=server.allowed_models,
                         default=server.default_model)
    host.requests.validate(request.prompt, request.seed, model.id)
    # The offer holds the model it names, so Generate charges the price shown even if the default changes.
    offer = await host.offers.confirm(replace(request, model=model.id))
    locale = interaction.locale.value
    await show_offer(interaction, offer, t(
        locale, "confirm.offer", model=plain(model.name, MAX_SHOWN_NAME_CHARS),
        price=yen(host.catalogue.price_of(model.id), locale),
        prompt=plain(request.prompt, embeds.PROMPT_EXCERPT_CHARS), when=embeds.relative(offer.expires_at)))


# -- on a posted video ---------------------------------------------------------------------------------


async def _job(interaction: Interaction, job_id: int, message_of: Callable[[Job], int | None]) -> Job | None:
    """The job a click is about (once the message it names is recorded); a job the bot no longer has is answered."""
    requests = _host(interaction).requests

    async def read() -> Job | None:
        try:
            return await requests.get(job_id)
        except JobNotFound:
            return None

    job = await _recorded(read, message_of)
    if job is None:
        await _private(interaction, "button.unknown")
    return job


def _posted(job: Job) -> int | None:
    return job.delivered_message_id


def _job_target(job: Job, message_id: int | None) -> trust.Target:
    return trust.Target(job.user_id, job.guild_id, message_id)


class RerollButton(_RowButton, id_format="video:reroll:{id}"):
    STYLE = discord.ButtonStyle.primary
    ACTIONS = (trust.REROLL,)

    async def clicked(self, interaction: Interaction) -> None:
        job = await _job(interaction, self.row_id, _posted)
        if job is None:
            return
        host = _host(interaction)
        # For the server the video belongs to (a click on its DM copy too), read now.
        rules = await host.requests.rules.for_request(job.guild_id, interaction.user.id)
        target = _job_target(job, _posted(job))
        reroll = trust.Reroll(job.user_id, rules.server.reroll_by)
        if not await _allowed(interaction, trust.REROLL, _ON_ITS_ROW, target=target, reroll=reroll):
            return
        # Where the re-roll would be posted: the video's own channel, whichever channel (or DM) it was clicked in.
        standing = await _standing(interaction, job.guild_id, job.channel_id)
        member = trust.MemberRules.of(rules.server, rules.member, job.channel_id, _role_ids(standing))
        if not await _allowed(interaction, trust.REROLL, _AS_VIDEO_AND_MEMBER_RULES, target=target, reroll=reroll,
                              member=member, standing=standing):
            return
        if not job.prompt:
            await _private(interaction, "reroll.prompt_erased", ref=job.reference)
            return
        locale = interaction.locale.value
        price = host.catalogue.price_of(job.model)  # raises ModelUnavailable for a model gone since
        offer = await host.offers.reroll(job.id, user_id=interaction.user.id, guild_id=job.guild_id,
                                         channel_id=job.channel_id, locale=locale, model=job.model)
        await show_offer(interaction, offer, t(
            locale, "reroll.offer", ref=job.reference,
            model=plain(host.catalogue.get(job.model).name, MAX_SHOWN_NAME_CHARS),
            price=yen(price, locale), when=embeds.relative(offer.expires_at)))


class DeleteButton(_RowButton, id_format="video:delete:{id}"):
    ACTIONS = (trust.DELETE,)

    async def clicked(self, interaction: Interaction) -> None:
        job = await _job(interaction, self.row_id, _posted)
        if job is None or not await _allowed(interaction, trust.DELETE, _ON_ITS_ROW,
                                             target=_job_target(job, _posted(job))):
            return
        # The post goes; the job stays in the ledger.
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


def _offer_action(offer: Offer) -> str:
    return trust.CONFIRM if offer.kind == "reroll" else trust.GENERATE


async def _offer(interaction: Interaction, offer_id: int) -> Offer | None:
    """The offer a click is about (once its message is recorded); one the bot no longer has is answered."""
    offers = _host(interaction).offers
    offer = await _recorded(lambda: offers.get(offer_id), lambda offer: offer.message_id)
    if offer is None:
        await _private(interaction, "button.unknown")
    return offer


def _offer_target(offer: Offer) -> trust.Target:
    return trust.Target(offer.user_id, offer.guild_id, offer.message_id)


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
    #: A re-roll's Confirm, or a /video's Generate: one button, two actions.
    ACTIONS = (trust.CONFIRM, trust.GENERATE)

    async def clicked(self, interaction: Interaction) -> None:
        offer = await _offer(interaction, self.row_id)
        if offer is None:
            return
        host = _host(interaction)
        action = _offer_action(offer)
        prompt: str | None = None
        seed: int | None = None
        reroll: trust.Reroll | None = None
        source: Job | None = None
        if offer.kind == "reroll":
            assert offer.source_job_id is not None
            try:
                source = await host.requests.get(offer.source_job_id)
            except JobNotFound:
                await _private(interaction, "button.unknown")
                return
            # Who may re-roll is read again now: an admin may have changed it since the offer.
            reroll = trust.Reroll(source.user_id, (await host.requests.rules.effective(source.guild_id)).reroll_by)
        # The member rules and the spending limits are checked when the request is recorded, below.
        if not await _allowed(interaction, action, _ON_ITS_ROW, target=_offer_target(offer), reroll=reroll):
            return
        # Checked before the offer is used: refused now, it can still be used once the clicker may.
        standing = await _standing(interaction, offer.guild_id, offer.channel_id)
        if not await _allowed(interaction, action, _AS_VIDEO, target=_offer_target(offer), standing=standing):
            return
        if source is not None:
            if not source.prompt:
                await _private(interaction, "reroll.prompt_erased", ref=source.reference)
                return
            prompt = source.prompt
            seed = new_seed(host.catalogue.get(source.model))
        if not await _use(interaction, offer, "used"):
            return
        request = request_of(
            offer, user_id=interaction.user.id, prompt=prompt, seed=seed, interaction_token=interaction.token,
            interaction_expires_at=interaction_expiry(interaction.created_at.timestamp()),
            upload_limit_bytes=interaction.filesize_limit,
        )
        # Once recorded, the offer's message keeps its text and loses its buttons; the request's answers follow.
        # The member rules see the roles Discord gave now (a click in a DM carries none).
        await start_request(interaction, request, _role_ids(standing), action=action, offer_id=offer.id,
                            acknowledge=lambda: interaction.response.edit_message(view=None))


class OfferCancelButton(_RowButton, id_format="video:offer:{id}:cancel"):
    ACTIONS = (trust.CANCEL_OFFER,)

    async def clicked(self, interaction: Interaction) -> None:
        offer = await _offer(interaction, self.row_id)
        if offer is None or not await _allowed(interaction, trust.CANCEL_OFFER, _ON_ITS_ROW,
                                               target=_offer_target(offer)):
            return
        if not await _use(interaction, offer, "cancelled"):
            return
        await interaction.response.edit_message(content=t(interaction.locale.value, "offer.cancelled"), view=None)


# -- on a request waiting for the bot's turn ------------------------------------------------------------------


def _waiting_notice(job: Job) -> int | None:
    return job.reply_message_id


class CancelJobButton(_RowButton, id_format="video:job:{id}:cancel"):
    ACTIONS = (trust.CANCEL_REQUEST,)

    async def clicked(self, interaction: Interaction) -> None:
        job = await _job(interaction, self.row_id, _waiting_notice)
        if job is None or not await _allowed(interaction, trust.CANCEL_REQUEST, _ON_ITS_ROW,
                                             target=_job_target(job, _waiting_notice(job))):
            return
        locale = interaction.locale.value
        try:
            job = await _host(interaction).requests.cancel(job.id)
        except IllegalTransition:
            job = await _host(interaction).requests.get(job.id)
            if job.state in NOTHING_SPENT_STATES:
                await _private(interaction, "cancel.ended", ref=job.reference, state=embeds.state_name(job, locale))
            else:
                # On its way or accepted: the service has no cancel.
                await _private(interaction, "cancel.too_late", ref=job.reference)
            return
        log.info("request %s was cancelled by its requester before it was sent", job.reference)
        await interaction.response.edit_message(content=t(locale, "cancel.done", ref=job.reference), view=None)


#: Registered with `bot.add_dynamic_items` at start-up, so every button ever posted resolves after a restart.
DYNAMIC_ITEMS = (RerollButton, DeleteButton, OfferGoButton, OfferCancelButton, CancelJobButton)
