"""/status: the caller's recent requests, or one request in detail (and the file if it could not be posted).

A member sees their own requests; one with Manage Server sees any of the server's (docs/trust.md). Someone
else's reference is answered exactly as one that does not exist: the same text, after the same one lookup.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot.community import trust
from bot.core.discord_limits import CHOICE_NAME, CHOICES
from bot.frontend import embeds, gate
from bot.frontend.discord_text import inline_code
from bot.frontend.i18n import described, t
from bot.frontend.tree import respond
from bot.store.jobs import JobState

if TYPE_CHECKING:
    from bot.frontend.bot import VideoBot



class StatusCog(commands.Cog):
    def __init__(self, bot: VideoBot) -> None:
        self.bot = bot

    @app_commands.command(name="status", description=described("cmd.status"))
    @app_commands.describe(job_id=described("cmd.status.job_id"))
    @app_commands.guild_only()
    async def status(self, interaction: discord.Interaction[VideoBot], job_id: str | None = None) -> None:
        locale = interaction.locale.value
        requests = self.bot.requests
        if job_id is None:
            jobs = await requests.recent(interaction.user.id, interaction.guild_id)
            if not jobs:
                await respond(interaction, t(locale, "status.none"))
            else:
                await respond(interaction, embed=embeds.status_list_embed(jobs, locale))
            return
        job = await requests.find(job_id, interaction.guild_id)
        target = trust.Target(job.user_id, job.guild_id) if job is not None else None
        if job is None or not (await gate.decide(interaction, trust.STATUS, {trust.Stage.TARGET},
                                                 target=target)).allowed:
            await respond(interaction, t(locale, "status.not_found", reference=inline_code(job_id)))
            return
        embed = embeds.status_embed(job, catalogue=self.bot.catalogue, locale=locale)
        if job.state != JobState.UNDELIVERABLE or job.user_id != interaction.user.id:
            await respond(interaction, embed=embed)
            return
        # The requester gets the video that could not be posted, privately.
        video = Path(job.file_path) if job.file_path else None
        if video is None or not video.exists():
            await respond(interaction, t(locale, "status.handover.missing"), embed=embed)
        elif video.stat().st_size > interaction.filesize_limit:
            await respond(interaction, t(locale, "status.handover.too_big",
                                       job_id=embeds.job_id_param(job)), embed=embed)
        else:
            await interaction.response.defer(ephemeral=True, thinking=True)
            await respond(interaction, embed=embed, file=discord.File(video, filename=f"video-{job.id}.mp4"))
            # In the requester's hands now: the job is delivered and the bot's copy goes.
            await requests.handed_over(job)

    @status.autocomplete("job_id")
    async def job_id_autocomplete(
        self, interaction: discord.Interaction[VideoBot], current: str
    ) -> list[app_commands.Choice[str]]:
        # The caller's own requests only, whoever asks (trust: Scope.OWN).
        jobs = await self.bot.requests.recent(interaction.user.id, interaction.guild_id, limit=CHOICES)
        choices = []
        for job in jobs:
            label = f"{job.reference} · {embeds.state_name(job, interaction.locale.value)} · {job.prompt}"
            if current.lower() in label.lower() or current in (job.service_job_id or ""):
                choices.append(app_commands.Choice(name=label[:CHOICE_NAME], value=job.reference))
        return choices[:CHOICES]


async def setup(bot: VideoBot) -> None:
    await bot.add_cog(StatusCog(bot))
