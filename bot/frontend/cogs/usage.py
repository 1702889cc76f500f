"""/usage: a server's spending for a period (one's own without Manage Server); /credit: mark a refunded job.

Who sees what, and who may credit, is the trust model's (bot/community/trust.py; docs/trust.md): the command
tree checks Manage Server for /credit before it runs, whatever the server's command settings say.
"""

from __future__ import annotations

import io
import logging
import time
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot.community import trust, usage
from bot.frontend import gate, usage_embeds
from bot.frontend.i18n import described
from bot.frontend.tree import respond
from bot.store.jobs import CreditRefused

if TYPE_CHECKING:
    from bot.frontend.bot import VideoBot

log = logging.getLogger(__name__)

PERIOD_CHOICES = [
    app_commands.Choice(name=described(usage_embeds.period_key(period)), value=period) for period in usage.PERIODS
]


class UsageCog(commands.Cog):
    def __init__(self, bot: VideoBot) -> None:
        self.bot = bot

    @app_commands.command(name="usage", description=described("cmd.usage"))
    @app_commands.describe(period=described("cmd.usage.period"), csv=described("cmd.usage.csv"))
    @app_commands.choices(period=PERIOD_CHOICES)
    @app_commands.guild_only()
    async def usage(
        self, interaction: discord.Interaction[VideoBot], period: str = usage.DEFAULT_PERIOD, csv: bool = False
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        assert interaction.guild_id is not None  # guild_only
        locale = interaction.locale.value
        chosen = usage.parse_period(period)
        whole_server = trust.sees_server(trust.USAGE, gate.facts_of(interaction))
        zone = (await self.bot.requests.rules.effective(interaction.guild_id)).zone
        start, end = usage.period_window(chosen, time.time(), zone)
        jobs = await self.bot.store.usage_jobs(
            interaction.guild_id, start, end, user_id=None if whole_server else interaction.user.id
        )
        report = usage.build_report(jobs, chosen, start, end, zone)
        embed = usage_embeds.usage_embed(report, locale, whole_server=whole_server)
        if not csv:
            await respond(interaction, embed=embed)
            return
        data = usage.report_csv(report)
        if len(data) > interaction.filesize_limit:
            await respond(interaction, usage_embeds.csv_too_big_text(len(data), interaction.filesize_limit, locale),
                          embed=embed)
            return
        attachment = discord.File(io.BytesIO(data), filename=usage.csv_filename(report))
        await respond(interaction, embed=embed, file=attachment)

    @app_commands.command(name="credit", description=described("cmd.credit"))
    @app_commands.describe(job=described("cmd.credit.job"))
    @app_commands.default_permissions(manage_guild=True)
    @app_commands.guild_only()
    async def credit(self, interaction: discord.Interaction[VideoBot], job: str) -> None:
        locale = interaction.locale.value
        assert interaction.guild_id is not None  # guild_only
        found = await self.bot.store.find(job, guild_id=interaction.guild_id)
        if found is None or not (await gate.decide(interaction, trust.CREDIT, {trust.Stage.TARGET},
                                                   target=trust.Target(found.user_id, found.guild_id))).allowed:
            await respond(interaction, usage_embeds.credit_refused_text("not_found", None, job, locale))
            return
        try:
            credited = await self.bot.store.mark_credited(
                found.id, guild_id=interaction.guild_id, by_user_id=interaction.user.id
            )
        except CreditRefused as refused:
            current = await self.bot.store.get(found.id)
            await respond(interaction, usage_embeds.credit_refused_text(refused.code, current, job, locale))
            return
        log.info("request %s (job %s, %d yen) marked credited by user %s", credited.reference,
                 credited.service_job_id, credited.charged_yen, interaction.user.id)
        await respond(interaction, usage_embeds.credited_text(
            credited, locale, host_caps=self.bot.requests.rules.host_caps_spending))


async def setup(bot: VideoBot) -> None:
    await bot.add_cog(UsageCog(bot))
