"""/balance: the shared key's spend, budget and what is left, beside the bot's own ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot.frontend import embeds
from bot.frontend.i18n import described
from bot.frontend.tree import respond

if TYPE_CHECKING:
    from bot.frontend.bot import VideoBot


class BalanceCog(commands.Cog):
    def __init__(self, bot: VideoBot) -> None:
        self.bot = bot

    @app_commands.command(name="balance", description=described("cmd.balance"))
    @app_commands.guild_only()
    async def balance(self, interaction: discord.Interaction[VideoBot]) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        info = await self.bot.requests.key_budget.read()  # shared and kept a few seconds: bot/service/key_budget.py
        everywhere, here = await self.bot.requests.ledgers(interaction.guild_id)
        embed = embeds.balance_embed(
            info,
            masked_key=self.bot.video_client.masked_key,
            # What is left, counted in videos of the default model.
            price_yen=self.bot.catalogue.price_of(self.bot.catalogue.default_id),
            ledger_all=everywhere,
            ledger_guild=here,
            locale=interaction.locale.value,
        )
        await respond(interaction, embed=embed)


async def setup(bot: VideoBot) -> None:
    await bot.add_cog(BalanceCog(bot))
