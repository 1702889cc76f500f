"""/video: validate, acknowledge at once, and hand the request to the bot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import views
from bot.i18n import described
from bot.models import DEFAULT_MODEL
from bot.store import NewJob
from bot.tree import respond
from bot.validation import MAX_PROMPT_CHARS, MAX_SEED, MIN_SEED
from bot.video_requests import interaction_expiry

if TYPE_CHECKING:
    from bot.video_bot import VideoBot

PRICE = DEFAULT_MODEL.price_yen


class VideoCog(commands.Cog):
    def __init__(self, bot: VideoBot) -> None:
        self.bot = bot

    @app_commands.command(name="video", description=described("cmd.video", price_yen=PRICE))
    @app_commands.describe(
        prompt=described("cmd.video.prompt", price_yen=PRICE),
        seed=described("cmd.video.seed"),
    )
    @app_commands.guild_only()
    async def video(
        self,
        interaction: discord.Interaction[VideoBot],
        prompt: app_commands.Range[str, 1, MAX_PROMPT_CHARS],
        seed: app_commands.Range[int, MIN_SEED, MAX_SEED] | None = None,
    ) -> None:
        # Input that cannot succeed is refused by `record` before anything else: no row, no request, no cost.
        member = interaction.user
        roles = [role.id for role in member.roles] if isinstance(member, discord.Member) else []
        # Written down before the acknowledgement: every request the member saw acknowledged exists,
        # so a crash at any later instant still ends with a final message for it.
        requests = self.bot.requests
        job = await requests.record(
            NewJob(
                model=requests.model.id,
                prompt=prompt,
                seed=seed,
                user_id=member.id,
                guild_id=interaction.guild_id,
                channel_id=interaction.channel_id or 0,
                locale=interaction.locale.value,
                upload_limit_bytes=interaction.filesize_limit,
                interaction_token=interaction.token,
                interaction_expires_at=interaction_expiry(interaction.created_at.timestamp()),
            ),
            role_ids=roles,
        )
        await interaction.response.defer(ephemeral=True, thinking=True)
        job = await requests.send(job)
        message = await respond(interaction, embed=views.receipt_embed(job))
        if message is not None:
            await self.bot.requests.remember_reply(job, message.id)


async def setup(bot: VideoBot) -> None:
    await bot.add_cog(VideoCog(bot))
