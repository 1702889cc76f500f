"""The bot: Discord's side of the process. What it serves with (the store, the client, the worker, the requests)
is built by the composition root (bot/app.py), which also holds the one shutdown order.

It is an AutoShardedBot: one process runs every shard (SHARD_COUNT unset: as many as Discord's
/gateway/bot recommends), or the ones SHARD_IDS names out of SHARD_COUNT. Discord sends each server's
events, interactions included, to one shard only, so a process answers its own shards' servers and
no others without any check of ours; what walks "every server" asks `owns_guild` (bot/config/shards.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, Self

import discord
from discord import app_commands
from discord.ext import commands, tasks

from bot.community import trust
from bot.config.settings import Settings
from bot.config.shards import ShardPlan
from bot.frontend.buttons import DYNAMIC_ITEMS
from bot.frontend.i18n import CatalogueTranslator
from bot.frontend.permissions import SpendingAccess
from bot.frontend.port_errors import discord_unavailable
from bot.frontend.tree import VideoCommandTree
from bot.jobs.chores import Housekeeping
from bot.jobs.intake import VideoRequests
from bot.jobs.offers import Offers
from bot.jobs.worker import JobWorker
from bot.ops.health import write_heartbeat
from bot.ops.heap import FullCollections
from bot.service.catalogue import Catalogue
from bot.service.client import VideoServiceClient
from bot.store.jobs import JobStore, meta
from bot.store.leases import Lease

log = logging.getLogger(__name__)

EXTENSIONS = tuple(f"bot.frontend.cogs.{name}" for name in ("video", "status", "balance", "settings", "usage"))
HEARTBEAT_SECONDS = 30


class BotServices(Protocol):
    """What the bot serves with, as the composition root (bot/app.py `Services`) builds it."""

    store: JobStore
    client: VideoServiceClient
    worker: JobWorker
    requests: VideoRequests
    catalogue: Catalogue
    housekeeping: Housekeeping
    offers: Offers
    lease: Lease | None

    async def close(self, disconnect: Callable[[], Awaitable[None]] | None = None) -> None: ...


#: Builds the bot's services once it has logged in (bot/app.py `open_bot_services`).
ServicesFactory = Callable[["VideoBot"], Awaitable[BotServices]]


def quiet_voice_warnings() -> None:
    """The bot never joins a voice channel: drop discord.py's warnings that PyNaCl and davey are missing.

    discord.py logs each once, when the first client is created, unless these class flags are off.
    """
    discord.VoiceClient.warn_nacl = False
    discord.VoiceClient.warn_dave = False


class VideoBot(commands.AutoShardedBot):
    # Opened in setup_hook, before any command can run.
    services: BotServices
    store: JobStore
    video_client: VideoServiceClient
    worker: JobWorker
    requests: VideoRequests
    offers: Offers

    def __init__(self, settings: Settings, catalogue: Catalogue, *, force_sync: bool = False,
                 open_services: ServicesFactory | None = None) -> None:
        """`open_services`: how setup_hook gets its services (bot/app.py `create_bot` passes it); without it, the
        caller attaches them before set-up (the tests do)."""
        # Slash commands need no privileged intents; `guilds` keeps channels in the cache.
        intents = discord.Intents.none()
        intents.guilds = True
        self.shard_plan = settings.shards
        # discord.py's stubs ask for a list, but None (every shard of the count) is its documented default.
        shard_ids: Any = list(self.shard_plan.ids) if self.shard_plan.ids is not None else None
        quiet_voice_warnings()
        super().__init__(
            shard_count=self.shard_plan.count,
            shard_ids=shard_ids,
            command_prefix=commands.when_mentioned,
            help_command=None,
            intents=intents,
            tree_cls=VideoCommandTree,
            allowed_mentions=discord.AllowedMentions.none(),
            # Every command, now and later, is for servers only: installed to a server (never to a user account,
            # which would carry them outside every server's rules) and used in its channels (never in DMs).
            allowed_installs=app_commands.AppInstallationType(guild=True, user=False),
            allowed_contexts=app_commands.AppCommandContext(guild=True, dm_channel=False, private_channel=False),
        )
        self.settings = settings
        # What a spending button reads from Discord to be held to what /video is held to (membership, command
        # permissions), kept current by the gateway's permission updates.
        self.access = SpendingAccess.of(self, self.tree, command_guild_id=settings.discord_guild_id)
        # Read before the cogs load: /video's shape depends on it.
        self.catalogue = catalogue
        self._open_services = open_services
        self.force_sync = force_sync
        self._shut_down = False
        self.collections = FullCollections()
        # AutoShardedClient.close() fails on a client never set up (entered or logged in): nothing to close then.
        self._set_up = False

    async def __aenter__(self) -> Self:
        entered = await super().__aenter__()
        self._set_up = True
        return entered

    def attach(self, services: BotServices) -> None:
        """Take the parts built by the composition root (tests attach theirs the same way)."""
        self.services = services
        self.store = services.store
        self.video_client = services.client
        self.worker = services.worker
        self.requests = services.requests
        self.catalogue = services.catalogue
        self.offers = services.offers

    async def setup_hook(self) -> None:
        self._set_up = True  # login() set the client up
        if self._open_services is not None:
            self.attach(await self._open_services(self))
        # The buttons of every message ever posted resolve from the database, so they work after a restart.
        self.add_dynamic_items(*DYNAMIC_ITEMS)
        await self.tree.set_translator(CatalogueTranslator())
        for extension in EXTENSIONS:
            await self.load_extension(extension)
        # Commands belong to the application, not to a shard: one process syncs them for all, the one
        # running shard 0 (there is always exactly one). Several would race their overwrites, each with
        # its own digest in its own database, and share the application's daily command-create limit.
        # `python -m bot sync` (force) is the host's explicit order and syncs from any process.
        if self.force_sync or self.shard_plan.syncs_commands:
            await self.sync_commands(force=self.force_sync)
        else:
            log.info("not syncing slash commands: the process running shard 0 does (%s)", self.shard_plan.describe())
        self.collections.start()

    async def on_shard_ready(self, shard_id: int) -> None:
        log.info("shard %d of %s ready", shard_id, self.shard_count)
        # A new gateway session (not a resumed one): command permission updates may have been missed meanwhile.
        self.access.permissions.forget()

    async def on_raw_app_command_permissions_update(self, event: discord.RawAppCommandPermissionsUpdateEvent) -> None:
        self.access.updated(event)

    async def on_ready(self) -> None:
        # An AutoShardedBot's on_ready comes once every shard of this process is ready; it fires again
        # after reconnects: start things once.
        log.info("connected as %s (%s) to %d servers on %s", self.user, self.application_id, len(self.guilds),
                 ShardPlan(self.shard_count, self.shard_plan.ids).describe())
        if not self.worker.running:
            self.worker.start()
        if self.settings.heartbeat_path is not None and not self.heartbeat.is_running():
            self.heartbeat.start()
        self.services.housekeeping.start()
        for guild in self.own_guilds():
            try:
                await self.leave_if_unlisted(guild)
            except discord.HTTPException as exc:
                log.warning("could not leave unlisted server %s: %s", guild.id, exc)
        # Only the servers of this process's shards: housekeeping leaves the other shards' servers alone.
        await self.services.housekeeping.forget_servers_left({guild.id for guild in self.own_guilds()})

    async def close(self) -> None:
        """The one shutdown order (bot/app.py `Services.close`), with Discord's gateway closed in its place."""
        if self._shut_down:
            return
        self._shut_down = True
        if self.heartbeat.is_running():
            self.heartbeat.cancel()
        if hasattr(self, "services"):
            await self.services.close(disconnect=self._disconnect)
        else:
            await self._disconnect()
        await self.collections.stop()
        log.info("closed cleanly")

    async def _disconnect(self) -> None:
        if self._set_up:
            await super().close()

    # -- servers ---------------------------------------------------------------------------------

    def owns_guild(self, guild_id: int) -> bool:
        """Whether the server's events come to this process (its shard is one of ours)."""
        return self.shard_plan.owns_guild(guild_id)

    def own_guilds(self) -> list[discord.Guild]:
        """The servers of this process's shards. The cache holds no others (Discord sends them to their
        own shard); the filter keeps that true if a cached server ever came from elsewhere."""
        return [guild for guild in self.guilds if self.owns_guild(guild.id)]

    async def on_guild_join(self, guild: discord.Guild) -> None:
        await self.leave_if_unlisted(guild)

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        self.access.permissions.forget(guild.id)
        await self.services.housekeeping.forget_server(guild.id)

    async def leave_if_unlisted(self, guild: discord.Guild) -> bool:
        """With a server list and LEAVE_UNLISTED_GUILDS, the bot leaves servers the host has not listed."""
        if trust.Host(self.settings.allowed_guild_ids).lists(guild.id) or not self.settings.leave_unlisted_guilds:
            return False
        log.warning("leaving server %s: it is not in ALLOWED_GUILD_IDS", guild.id)
        await guild.leave()
        return True

    async def post_line(self, channel_id: int, text: str) -> None:
        """One line in a server's log channel, pinging nobody (the text holds mentions only to name people).

        The chores' port (bot/jobs/port.py): a channel gone or closed to the bot raises ChannelRefused, another
        error of Discord's API or of the connection to it DiscordUnavailable.
        """
        with discord_unavailable(channel_refusals=True):
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
        key = meta.command_sync(self.application_id, guild.id if guild else None)
        if not force and await self.store.get_meta(key) == digest:
            log.info("slash commands unchanged since the last sync; not syncing")
            return False
        synced = await self.tree.sync(guild=guild)
        self.access.commands.remember(guild.id if guild is not None else None, synced)
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

    def shards_connected(self) -> bool:
        """Every shard this process runs has its gateway open: one down means its servers go unanswered."""
        expected = self.shard_plan.ids if self.shard_plan.ids is not None else range(self.shard_count or 0)
        shards = self.shards
        return bool(expected) and all(i in shards and not shards[i].is_closed() for i in expected)

    @tasks.loop(seconds=HEARTBEAT_SECONDS)
    async def heartbeat(self) -> None:
        """Touch the heartbeat file while every shard's gateway is up and the worker runs (for HEALTHCHECK)."""
        path = self.settings.heartbeat_path
        if path is None or not self.is_ready() or self.is_closed() or not self.worker.running:
            return
        if not self.shards_connected():
            return
        write_heartbeat(path)
