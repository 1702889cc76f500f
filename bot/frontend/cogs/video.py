"""/video: validate, acknowledge at once, and hand the request to the bot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot.frontend.buttons import offer_confirmation, start_request
from bot.frontend.i18n import described
from bot.jobs.intake import interaction_expiry
from bot.service.catalogue import Catalogue
from bot.service.validation import MAX_PROMPT_CHARS, MAX_SEED, MIN_SEED
from bot.store.jobs import NewJob

if TYPE_CHECKING:
    from bot.frontend.bot import VideoBot

Prompt = app_commands.Range[str, 1, MAX_PROMPT_CHARS]
Seed = app_commands.Range[int, MIN_SEED, MAX_SEED]


class VideoCog(commands.Cog):
    """Its one command takes its shape from the catalogue when the cog is built: Discord needs it fixed then."""

    def __init__(self, bot: VideoBot) -> None:
        self.bot = bot
        self.video: app_commands.Command[VideoCog, ..., None] = video_command(self, bot.catalogue)

    async def cog_load(self) -> None:
        self.bot.tree.add_command(self.video)

    async def cog_unload(self) -> None:
        self.bot.tree.remove_command(self.video.name)

    async def one_model(self, interaction: discord.Interaction[VideoBot], prompt: Prompt, seed: Seed | None = None
                        ) -> None:
        await self.request(interaction, prompt, seed, None)

    async def several_models(
        self,
        interaction: discord.Interaction[VideoBot],
        prompt: Prompt,
        model: str | None = None,
        seed: Seed | None = None,
    ) -> None:
        await self.request(interaction, prompt, seed, model)

    async def request(
        self, interaction: discord.Interaction[VideoBot], prompt: str, seed: int | None, model: str | None
    ) -> None:
        # Input that cannot succeed is refused by `record` before anything else: no row, no request, no cost.
        member = interaction.user
        roles = [role.id for role in member.roles] if isinstance(member, discord.Member) else []
        request = NewJob(
            model=model or "",  # "" for the server's default; `record` applies the server's model rules
            prompt=prompt,
            seed=seed,
            user_id=member.id,
            guild_id=interaction.guild_id,
            channel_id=interaction.channel_id or 0,
            locale=interaction.locale.value,
            upload_limit_bytes=interaction.filesize_limit,
            interaction_token=interaction.token,
            interaction_expires_at=interaction_expiry(interaction.created_at.timestamp()),
        )
        server = await self.bot.requests.rules.effective(interaction.guild_id)
        if server.confirm_before_spending:
            # Nothing is written as a job or sent until the requester clicks Generate in time.
            await offer_confirmation(interaction, request, roles)
            return
        # Written down before the acknowledgement: every request the member saw acknowledged exists,
        # so a crash at any later instant still ends with a final message for it.
        await start_request(interaction, request, roles)


def video_command(cog: VideoCog, catalogue: Catalogue) -> app_commands.Command[VideoCog, ..., None]:
    """/video as this catalogue needs it: one model names its price; several add a `model` choice instead."""
    if not catalogue.several:
        price = catalogue.price_of(catalogue.default_id)
        command: app_commands.Command[VideoCog, ..., None] = app_commands.Command(
            name="video", description=described("cmd.video", price_yen=price),
            callback=cog.one_model)
        app_commands.describe(prompt=described("cmd.video.prompt", price_yen=price),
                              seed=described("cmd.video.seed"))(command)
    else:
        command = app_commands.Command(name="video", description=described("cmd.video.several"),
                                       callback=cog.several_models)
        app_commands.describe(prompt=described("cmd.video.prompt.several"), model=described("cmd.video.model"),
                              seed=described("cmd.video.seed"))(command)
        app_commands.choices(model=[
            app_commands.Choice(name=described("model.label", name=m.name, price_yen=catalogue.price_of(m.id)),
                                value=m.id)
            for m in catalogue
        ])(command)
    return app_commands.guild_only()(command)


async def setup(bot: VideoBot) -> None:
    await bot.add_cog(VideoCog(bot))
