"""Posting finished videos and job news into Discord: the channel first, then the requester's DMs."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import discord
from discord.abc import Messageable
from discord.http import handle_message_parameters
from discord.webhook.async_ import async_context

from bot.core.log_context import job_fields
from bot.core.notices import Notice
from bot.frontend import embeds, transcode
from bot.frontend.buttons import video_buttons
from bot.frontend.port_errors import REFUSED, discord_unavailable
from bot.jobs.port import Delivery, Undeliverable
from bot.service.catalogue import Catalogue
from bot.store.jobs import Job

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: What Discord allows on most servers when an interaction did not tell us better.
DEFAULT_UPLOAD_LIMIT = discord.utils.DEFAULT_FILE_SIZE_LIMIT_BYTES


def nonce_for(job: Job) -> str:
    """Stable per job: Discord returns the existing message for a repeated nonce instead of a duplicate."""
    return f"video-job-{job.id}"


def _final_refusal(exc: discord.HTTPException) -> bool:
    """A 4xx that retrying will not change (no access, unknown user, DMs closed, AutoMod's block); a file too
    large is handled apart (a smaller copy may pass)."""
    if _too_large(exc):
        return False
    return isinstance(exc, REFUSED) or (400 <= exc.status < 500 and exc.status != 429)


def _refused_for_good(exc: Exception) -> bool:
    """The channel will not take it, whatever a retry does: the DMs are next."""
    return isinstance(exc, Undeliverable) or (isinstance(exc, discord.HTTPException) and _final_refusal(exc))


def _too_large(exc: discord.HTTPException) -> bool:
    return exc.status == 413 or exc.code == 40005


class _BothRefused(Exception):
    """The channel refused for good, and then the requester's DMs (`dm`, their refusal)."""

    def __init__(self, dm: discord.HTTPException) -> None:
        super().__init__(dm.text)
        self.dm = dm


class DiscordDelivery:
    def __init__(self, client: discord.Client, catalogue: Catalogue) -> None:
        self._client = client
        # Each job's price, for the texts: the model it was asked with.
        self._catalogue = catalogue

    async def deliver(self, job: Job, video: Path) -> Delivery:
        with discord_unavailable():
            return await self._deliver(job, video)

    async def _deliver(self, job: Job, video: Path) -> Delivery:
        limit = job.upload_limit_bytes or DEFAULT_UPLOAD_LIMIT
        for _ in range(2):
            upload, compressed = await self._fitting(job, video, limit)
            try:
                return await self._post(job, upload, compressed)
            except discord.HTTPException as exc:
                if not _too_large(exc):
                    raise
                # The server's real limit is lower than the one recorded: shrink further and try once more.
                log.warning("upload of %s refused as too large at %d bytes", job.reference, upload.stat().st_size,
                            extra=job_fields(job))
                limit = int(min(limit, upload.stat().st_size) * 0.8)
            finally:
                if upload != video:
                    upload.unlink(missing_ok=True)
        raise Undeliverable("the file stays above the upload limit even compressed")

    async def _fitting(self, job: Job, video: Path, limit: int) -> tuple[Path, bool]:
        size = video.stat().st_size
        if size <= limit:
            return video, False
        copy = video.with_name(f"{video.stem}.fit.mp4")
        try:
            await transcode.fit_to_size(video, copy, limit)
        except transcode.TranscodeError as exc:
            raise Undeliverable(f"the video is {size} bytes, above the {limit}-byte limit: {exc}") from exc
        return copy, True

    async def _post(self, job: Job, upload: Path, compressed: bool) -> Delivery:
        async def send(place: Messageable, via_dm: bool) -> Delivery:
            message = await place.send(**self._video_message(job, upload, compressed, via_dm=via_dm))
            return Delivery(channel_id=message.channel.id, message_id=message.id, compressed=compressed, via_dm=via_dm)

        try:
            return await self._channel_then_dm(job, job.reference, send)
        except _BothRefused as both:
            raise Undeliverable(f"the channel and the requester's DMs both refused ({both.dm.text})") from both.dm

    async def _channel_then_dm(self, job: Job, what: str, send: Callable[[Messageable, bool], Awaitable[_T]]) -> _T:
        """`send(place, via_dm)` to the job's channel; when the channel refuses for good, to the requester's DMs.
        DMs refused for good too raise _BothRefused."""
        try:
            return await send(await self._channel(job.channel_id), False)
        except (discord.HTTPException, Undeliverable) as exc:
            if not _refused_for_good(exc):
                raise
            log.warning("channel %d refused %s (%s); trying a DM", job.channel_id, what, exc, extra=job_fields(job))
        try:
            return await send(await self._client.create_dm(discord.Object(id=job.user_id)), True)
        except discord.HTTPException as exc:
            if not _final_refusal(exc):
                raise
            raise _BothRefused(exc) from exc

    def _video_message(self, job: Job, upload: Path, compressed: bool, *, via_dm: bool) -> dict[str, Any]:
        return {
            "content": embeds.delivered_text(job, catalogue=self._catalogue, compressed=compressed, via_dm=via_dm),
            "file": discord.File(upload, filename=f"video-{job.id}.mp4"),
            "allowed_mentions": embeds.requester_only(job),
            "nonce": nonce_for(job),
            # Re-roll and Delete: persistent, they carry this job's id and resolve from the database.
            "view": video_buttons(job),
        }

    async def announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> None:
        """Tell the requester: in the channel, else by DM, and through the interaction while its token lives.

        `via_interaction` puts the interaction first (a request cut off by a restart: its "thinking…" is
        still showing); otherwise it is the last resort, when the channel and the DMs both refuse.
        """
        with discord_unavailable():
            await self._announce(job, event, via_interaction=via_interaction)

    async def _announce(self, job: Job, event: Notice, *, via_interaction: bool) -> None:
        text = embeds.announcement_text(job, event, catalogue=self._catalogue)
        mentions = embeds.requester_only(job)
        if via_interaction and await self._tell_in_interaction(job, text, mentions):
            return
        # Even for `undeliverable`: a channel that refused the file (too large, no attach permission)
        # may still take text, and the message says "could not be posted here".
        async def send(place: Messageable, via_dm: bool) -> None:
            await place.send(text, allowed_mentions=mentions)

        try:
            await self._channel_then_dm(job, f"news about {job.reference}", send)
            return
        except _BothRefused as both:
            refused = both.dm
        if not via_interaction and await self._tell_in_interaction(job, text, mentions):
            return
        # 50007: the requester does not take DMs from the bot. Expected; the caller logs one line.
        raise Undeliverable(f"the channel and the requester's DMs both refused (code {refused.code})") from refused

    async def _tell_in_interaction(self, job: Job, text: str, mentions: discord.AllowedMentions) -> bool:
        """Replace the interaction's first reply with `text`, privately; False if the token no longer works."""
        if not job.token_alive(time.time()) or self._client.application_id is None:
            return False
        try:
            await self._edit_original(self._client.application_id, job.interaction_token or "", text, mentions)
        except discord.HTTPException as exc:
            if not _final_refusal(exc):
                raise
            log.info("the interaction of %s is gone (%s)", job.reference, exc.status, extra=job_fields(job))
            return False
        return True

    async def _edit_original(self, application_id: int, token: str, text: str,
                             mentions: discord.AllowedMentions) -> None:
        """PATCH /webhooks/{application}/{token}/messages/@original: the path Discord documents, sent the way
        discord.py's `Interaction.edit_original_response` sends it. (`Webhook.edit_message("@original")` would
        percent-quote it as `%40original`.)"""
        webhook = discord.Webhook.partial(application_id, token, client=self._client)
        http = self._client.http
        with handle_message_parameters(content=text, allowed_mentions=mentions,
                                       previous_allowed_mentions=self._client.allowed_mentions) as params:
            await async_context.get().edit_original_interaction_response(
                application_id, token, session=webhook.session, proxy=http.proxy, proxy_auth=http.proxy_auth,
                payload=params.payload, multipart=params.multipart, files=params.files,
            )

    async def show_progress(
        self, job: Job, *, position: int | None = None, ready_at: float | None = None
    ) -> None:
        if job.reply_message_id is None or job.interaction_token is None or self._client.application_id is None:
            return
        webhook = discord.Webhook.partial(self._client.application_id, job.interaction_token, client=self._client)
        embed = embeds.receipt_embed(job, catalogue=self._catalogue, position=position, ready_at=ready_at)
        with discord_unavailable():
            await webhook.edit_message(job.reply_message_id, embed=embed)

    async def _channel(self, channel_id: int) -> Messageable:
        channel = self._client.get_channel(channel_id)
        if channel is None:
            channel = await self._client.fetch_channel(channel_id)
        if not isinstance(channel, Messageable):
            raise Undeliverable(f"channel {channel_id} cannot take messages")
        return channel
