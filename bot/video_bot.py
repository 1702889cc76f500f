"""The bot: owns the HTTP session, the job store and the worker, and closes them in reverse order."""

from __future__ import annotations

import hashlib
import json
import logging

import discord
from discord.ext import commands, tasks

from bot.app import Services, catalogue_of, open_services
from bot.buttons import DYNAMIC_ITEMS
from bot.delivery import DiscordDelivery
from bot.health import write_heartbeat
from bot.i18n import CatalogueTranslator
from bot.models import Catalogue
from bot.offers import Offers
from bot.settings import Settings
from bot.store import JobStore
from bot.tree import VideoCommandTree
from bot.video_client import VideoServiceClient
from bot.video_requests import VideoRequests
from bot.worker import JobWorker

log = logging.getLogger(__name__)

EXTENSIONS = (
    "bot.cogs.video", "bot.cogs.status", "bot.cogs.balance", "bot.cogs.settings", "bot.cogs.usage",
)
HEARTBEAT_SECONDS = 30


class VideoBot(commands.Bot):
    # Opened in setup_hook, before any command can run.
    services: Services
    store: JobStore
    video_client: VideoServiceClient
    worker: JobWorker
    requests: VideoRequests
    offers: Offers

    def __init__(self, settings: Settings, *, force_sync: bool = False, catalogue: Catalogue | None = None) -> None:
        # Slash commands need no privileged intents; `guilds` keeps channels in the cache.
        intents = discord.Intents.none()
        intents.guilds = True
        super().__init__(
            command_prefix=commands.when_mentioned,
            help_command=None,
            intents=intents,
            tree_cls=VideoCommandTree,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self.settings = settings
        # Read before the cogs load: /video's shape depends on it. Raises CatalogueError for a bad file.
        self.catalogue = catalogue if catalogue is not None else catalogue_of(settings)
        self.force_sync = force_sync
        self._shut_down = False

    def attach(self, services: Services) -> None:
        """Take the parts built by the composition root (tests attach theirs the same way)."""
        self.services = services
        self.store = services.store
        self.video_client = services.client
        self.worker = services.worker
        self.requests = services.requests
        self.catalogue = services.catalogue

    async def setup_hook(self) -> None:
        self.attach(await open_services(
            self.settings, DiscordDelivery(self, self.catalogue), catalogue=self.catalogue,
            post_line=self.post_line, guild_locale=self.guild_locale,
        ))
        # Before any command can run, so only rows the last run left half-done are `received` or
        # `submitting` now. Their requesters are told once the worker runs (it sweeps for them).
        # On SQLite (this process alone) every lease at once; on PostgreSQL only free or expired ones.
        for job in await self.store.recover_after_restart(self.services.lease):
            log.warning("request %s was cut off by the last stop: %s, not resent", job.reference, job.state)
        # The buttons of every message ever posted resolve from the database, so they work after a restart.
        self.offers = Offers(self.store, lifetime=self.settings.offer_seconds)
        self.add_dynamic_items(*DYNAMIC_ITEMS)
        await self.tree.set_translator(CatalogueTranslator())
        for extension in EXTENSIONS:
            await self.load_extension(extension)
        await self.sync_commands(force=self.force_sync)

    async def on_ready(self) -> None:
        # on_ready fires again after reconnects: start things once.
        log.info("connected as %s (%s) to %d servers", self.user, self.application_id, len(self.guilds))
        if not self.worker.running:
            self.worker.start()
        if self.settings.heartbeat_path is not None and not self.heartbeat.is_running():
            self.heartbeat.start()
        self.services.housekeeping.start()
        for guild in list(self.guilds):
            try:
                await self.leave_if_unlisted(guild)
            except discord.HTTPException as exc:
                log.warning("could not leave unlisted server %s: %s", guild.id, exc)
        await self.services.housekeeping.forget_servers_left({guild.id for guild in self.guilds})

    async def close(self) -> None:
        """Stop the worker, then the cogs and the gateway, then the HTTP session and the database."""
        if self._shut_down:
            return
        self._shut_down = True
        if self.heartbeat.is_running():
            self.heartbeat.cancel()
        if hasattr(self, "services"):
            await self.services.housekeeping.stop()
            await self.worker.stop()
        if hasattr(self, "offers"):
            await self.offers.close()
        await super().close()
        if hasattr(self, "services"):
            await self.services.close()
        log.info("closed cleanly")

    # -- servers ---------------------------------------------------------------------------------

    async def on_guild_join(self, guild: discord.Guild) -> None:
        await self.leave_if_unlisted(guild)

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        await self.services.housekeeping.forget_server(guild.id)

    async def leave_if_unlisted(self, guild: discord.Guild) -> bool:
        """With a server list and LEAVE_UNLISTED_GUILDS, the bot leaves servers the host has not listed."""
        allowed = self.settings.allowed_guild_ids
        if not allowed or guild.id in allowed or not self.settings.leave_unlisted_guilds:
            return False
        log.warning("leaving server %s: it is not in ALLOWED_GUILD_IDS", guild.id)
        await guild.leave()
        return True

    async def post_line(self, channel_id: int, text: str) -> None:
        """One line in a server's log channel, pinging nobody (the text holds mentions only to name people)."""
        await self.get_partial_messageable(channel_id).send(text, allowed_mentions=discord.AllowedMentions.none())

    def guild_locale(self, guild_id: int) -> str | None:
        guild = self.get_guild(guild_id)
        return guild.preferred_locale.value if guild is not None else None

    # -- command sync ----------------------------------------------------------------------------

    async def sync_commands(self, *, force: bool = False) -> bool:
        """Sync the tree only when its payload changed since the last sync (or when forced)."""
        guild = discord.Object(id=self.settings.discord_guild_id) if self.settings.discord_guild_id else None
        if guild is not None:
            self.tree.copy_global_to(guild=guild)
        digest = await self.command_digest(guild)
        key = f"command_sync:{self.application_id}:{guild.id if guild else 'global'}"
        if not force and await self.store.get_meta(key) == digest:
            log.info("slash commands unchanged since the last sync; not syncing")
            return False
        synced = await self.tree.sync(guild=guild)
        await self.store.set_meta(key, digest)
        log.info("synced %d slash commands %s", len(synced), f"to server {guild.id}" if guild else "globally")
        return True

    async def command_digest(self, guild: discord.Object | None) -> str:
        translator = self.tree.translator
        payload = []
        for command in self.tree.get_commands(guild=guild):
            if translator is not None:
                payload.append(await command.get_translated_payload(self.tree, translator))
            else:
                payload.append(command.to_dict(self.tree))
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    # -- health ----------------------------------------------------------------------------------

    @tasks.loop(seconds=HEARTBEAT_SECONDS)
    async def heartbeat(self) -> None:
        """Touch the heartbeat file while the gateway is up and the worker runs (for HEALTHCHECK)."""
        path = self.settings.heartbeat_path
        if path is None or not self.is_ready() or self.is_closed() or not self.worker.running:
            return
        write_heartbeat(path)
