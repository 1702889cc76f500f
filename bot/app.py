"""The composition root: the one place that builds the bot's parts from its settings, and closes them.

settings → model catalogue → HTTP session → service client → job store → worker → request handling → offers →
chores (→ the optional metrics endpoint, fed by the client's observer and a timing wrapper around the deliverer);
then, for a process on Discord, the bot itself (`create_bot`), whose set-up opens those parts with its own lease
and delivery (`open_bot_services`). The entry point, the `check` command, the tests, the benchmark and the demo
all build the parts here; what they swap (clock, retry policies, pacing, the deliverer, a traced session) is a
parameter. `Services.close` is the one shutdown order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import aiohttp

from bot.community import trust
from bot.community.server_rules import ServerRules, defaults_from
from bot.config.settings import Settings
from bot.core.host import SetupError, not_a_database
from bot.frontend.bot import VideoBot
from bot.frontend.delivery import DiscordDelivery
from bot.frontend.settings_embeds import event_line
from bot.jobs.chores import Chores, GuildLocale, Housekeeping
from bot.jobs.durations import DurationModel
from bot.jobs.intake import STOP_GRACE_SECONDS, VideoRequests
from bot.jobs.offers import Offers
from bot.jobs.port import Deliverer, LinePoster
from bot.jobs.progress import ProgressRefresher
from bot.jobs.worker import JobWorker, WorkerConfig
from bot.ops.metrics import Metrics, MetricsEndpoint, TimedDeliverer
from bot.service.catalogue import Catalogue, load_catalogue
from bot.service.client import VideoServiceClient
from bot.service.key_budget import KeyBudget
from bot.service.pacing import Pacer, service_pacer
from bot.service.transport import ClientObserver
from bot.store.jobs import Job, JobStore, NotADatabase
from bot.store.leases import Lease, take_shards
from bot.store.owner_record import OwnerRecord
from bot.store.servers import ServerStore

log = logging.getLogger(__name__)


def catalogue_of(settings: Settings) -> Catalogue:
    """The models and prices of these settings (MODELS_FILE, or the spec's model); raises CatalogueError."""
    return load_catalogue(settings.models_file)


def worker_config(settings: Settings, **overrides: Any) -> WorkerConfig:
    """The worker's bounds as the settings give them; `overrides` are for tests and the benchmark."""
    config = WorkerConfig(
        storage_dir=settings.video_storage_dir,
        poll_interval=settings.poll_interval_seconds,
        max_concurrency=settings.max_concurrent_polls,
        keep_delivered_videos=settings.keep_delivered_videos,
    )
    return replace(config, **overrides)


def build_client(
    settings: Settings,
    session: aiohttp.ClientSession,
    *,
    pacer: Pacer | None = None,
    paced: bool = True,
    observer: ClientObserver | None = None,
    **options: Any,
) -> VideoServiceClient:
    """The service client of these settings; `options` override its timeouts and retry policies."""
    if pacer is None and paced:
        pacer = service_pacer(settings.max_requests_per_second)
    options.setdefault("timeout_seconds", settings.http_timeout_seconds)
    options.setdefault("download_timeout_seconds", settings.download_timeout_seconds)
    return VideoServiceClient(
        session, settings.video_api_base_url, settings.video_api_key, pacer=pacer, observer=observer, **options
    )


async def open_store(settings: Settings, *, clock: Callable[[], float] = time.time) -> JobStore:
    """The job store of these settings, migrated: PostgreSQL at DATABASE_URL, else SQLite at DATABASE_PATH."""
    if settings.database_url is not None:
        return await JobStore.open_url(settings.database_url, clock=clock, follow_database_clock=True)
    try:
        return await JobStore.open(settings.database_path, clock=clock)
    except NotADatabase as exc:  # another file named by mistake, or a damaged one: the host's to fix, in one line
        raise unreadable_database(settings, exc) from None


def unreadable_database(settings: Settings, error: NotADatabase) -> SetupError:
    """The line for a file at the database's path that SQLite cannot read, naming the setting it came from."""
    return not_a_database(settings.database_setting, error.path, damaged=error.damaged, reason=error.reason)


def server_rules(store: JobStore, settings: Settings) -> ServerRules:
    """Per-server settings on the job store's database, with the environment's values as their defaults."""
    return ServerRules(ServerStore(store), defaults_from(settings))


@dataclass
class Services:
    """Everything the commands and the worker share; closed in reverse order of opening."""

    settings: Settings
    session: aiohttp.ClientSession
    store: JobStore
    client: VideoServiceClient
    worker: JobWorker
    requests: VideoRequests
    rules: ServerRules
    catalogue: Catalogue
    housekeeping: Housekeeping
    offers: Offers
    owns_session: bool = True
    metrics: MetricsEndpoint | None = None
    lease: Lease | None = None  # this process's identity among those sharing the database
    owner_record: OwnerRecord | None = None  # held while it runs shards on a shared database

    @property
    def durations(self) -> DurationModel:
        """The learned job durations (estimated ready times read them)."""
        return self.worker.durations

    async def close(self, disconnect: Callable[[], Awaitable[None]] | None = None) -> None:
        """Stop the chores and the worker, then the offers and the requests; `disconnect` (Discord's gateway) goes
        once requests not yet sent were told so and those on their way got their answers; the metrics, the
        leases, the HTTP session and the database last."""
        await self.housekeeping.stop()
        await self.worker.stop()
        await self.offers.close()
        # While Discord is still there: requests not yet sent are told they were not, those on their way
        # get their answers recorded and told.
        await self.requests.stop_sending(STOP_GRACE_SECONDS)
        if disconnect is not None:
            await disconnect()
        if self.metrics is not None:
            await self.metrics.close()
        await self.requests.close()
        # Nothing of this process works on a job any more: a live process takes them at once.
        await self.worker.release_leases()
        if self.owns_session:
            await self.session.close()
        await self.store.close()
        if self.owner_record is not None:
            self.owner_record.close()


async def open_services(
    settings: Settings,
    deliverer: Deliverer,
    *,
    session: aiohttp.ClientSession | None = None,
    clock: Callable[[], float] = time.time,
    client: Callable[[aiohttp.ClientSession], VideoServiceClient] | None = None,
    worker: WorkerConfig | None = None,
    on_accepted: Callable[[Job], None] | None = None,
    metrics: Metrics | None = None,
    pacer: Pacer | None = None,
    catalogue: Catalogue | None = None,
    post_line: LinePoster | None = None,
    guild_locale: GuildLocale = lambda guild_id: None,
    chores: Chores | None = None,
    lease: Lease | None = None,
) -> Services:
    """Open the store, the session and the client, and wire the worker and request handling to them.

    With `settings.metrics_port` set, /metrics is served from `metrics` (a new one unless given; a `client`
    factory wires its own observer to it). `pacer`: the one a `client` factory paces with, so the worker
    hands out polls only when it has a turn (built here from the settings without a factory).
    `catalogue` is the one the caller already read from these settings (read here otherwise).
    `post_line` posts the servers' log lines (none are posted without it).
    `lease`: this process's identity on the database (a new one, of LEASE_SECONDS, unless given).
    """
    if lease is None:
        lease = Lease.for_this_process(settings.lease_seconds)
    if catalogue is None:
        catalogue = catalogue_of(settings)
    if settings.metrics_port is None:
        metrics = None
    elif metrics is None:
        metrics = Metrics()
    store = await open_store(settings, clock=clock)
    owns_session = session is None
    http = session if session is not None else aiohttp.ClientSession()
    endpoint: MetricsEndpoint | None = None
    try:
        if client is not None:
            service = client(http)
        else:
            pacer = service_pacer(settings.max_requests_per_second)
            service = build_client(settings, http, pacer=pacer, observer=metrics)
        if metrics is not None:
            deliverer = TimedDeliverer(deliverer, metrics, clock)
        config = worker or worker_config(settings)
        # One model of job durations: the worker's poll schedule learns it; estimates read it.
        durations = DurationModel.for_interval(config.poll_interval)
        job_worker = JobWorker(
            store, service, deliverer, config, clock=clock, durations=durations, pacer=pacer, lease=lease
        )

        def accepted(job: Job) -> None:
            job_worker.wake(job)
            if on_accepted is not None:
                on_accepted(job)

        rules = server_rules(store, settings)
        # One reader of the key's budget for the process: the check before a create, /balance and the alerts.
        key_budget = KeyBudget(service)
        requests = VideoRequests(
            store, service, settings, rules, catalogue=catalogue, on_accepted=accepted, tell=job_worker.tell,
            clock=clock, estimate_ready=durations.expected_ready_at, lease=lease, key_budget=key_budget,
        )
        chores_runner = Housekeeping(
            store, rules, service, settings, post_line or _no_log_channel, event_text=event_line,
            guild_locale=guild_locale, chores=chores,
            progress=ProgressRefresher(store, deliverer, durations.expected_ready_at, clock=clock, owner=lease.owner),
            clock=clock, leads=partial(store.leads_chores, lease), key_budget=key_budget,
        )
        offers = Offers(store, lifetime=settings.offer_seconds)
        if metrics is not None and settings.metrics_port is not None:
            endpoint = MetricsEndpoint(metrics, store)
            await endpoint.start(settings.metrics_host, settings.metrics_port)
    except BaseException:
        if owns_session:
            await http.close()
        await store.close()
        raise
    return Services(
        settings, http, store, service, job_worker, requests, rules, catalogue, chores_runner, offers, owns_session,
        endpoint, lease,
    )


async def _no_log_channel(channel_id: int, text: str) -> None:
    """Without Discord (the `check` command, the benchmark) there is no channel to post to."""


# -- a process on Discord ---------------------------------------------------------------------------------


def create_bot(settings: Settings, catalogue: Catalogue, *, force_sync: bool = False) -> VideoBot:
    """The bot of these settings: on login, its set-up opens the services (`open_bot_services`)."""
    return VideoBot(settings, catalogue, force_sync=force_sync,
                    open_services=lambda bot: open_bot_services(bot, settings))


def refuse_public_bot(bot: VideoBot, settings: Settings) -> None:
    """Safe by default (bot/community/trust.py `public_bot`), from the application discord.py read at login: a public
    application with no server list raises PublicBotRefused; one the host accepted (ALLOW_PUBLIC_BOT_SPENDING) is
    said in the log at every start."""
    application = bot.application
    verdict = trust.public_bot(
        # Not read (it always is at login): taken as public, the side that refuses.
        bot_public=application.bot_public if application is not None else True,
        allowed_guild_ids=settings.allowed_guild_ids, accepted=settings.allow_public_bot_spending,
    )
    if verdict is trust.PublicBot.REFUSED:
        raise trust.PublicBotRefused()
    if verdict is trust.PublicBot.ACCEPTED:
        log.warning("%s", trust.PUBLIC_BOT_ACCEPTED)


async def open_bot_services(bot: VideoBot, settings: Settings) -> Services:
    """The services of a logged-in bot, ready before any command can run; none for a public application that may
    not serve (`refuse_public_bot`)."""
    refuse_public_bot(bot, settings)
    # A sync only logs in: it runs no shard.
    lease = Lease.for_this_process(settings.lease_seconds, None if bot.force_sync else bot.shard_plan.token)
    services = await open_services(
        settings, DiscordDelivery(bot, bot.catalogue), catalogue=bot.catalogue, post_line=bot.post_line,
        guild_locale=bot.guild_locale, lease=lease,
    )
    try:
        # On a database other processes share, before anything runs: shards a live one runs are refused (a
        # SQLite file serves one process, bot/store/instance_lock.py).
        if services.store.shared and lease.shards is not None:
            # The run before this one on the same data folder, crashed (a container restarted in place), is
            # known for certain even from a new PID namespace: its shards are taken at once.
            services.owner_record = OwnerRecord.take(settings.video_storage_dir, lease.owner)
            await take_shards(services.store, lease, bot.shard_plan, predecessor=services.owner_record.predecessor)
        # Before any command can run, so only rows the last run left half-done are `received` or
        # `submitting` now. Their requesters are told once the worker runs (it sweeps for them).
        # On SQLite (this process alone) every lease at once; on PostgreSQL only free or expired ones.
        for job in await services.store.recover_after_restart(lease):
            log.warning("request %s was cut off by the last stop: %s, not resent", job.reference, job.state)
        services.worker.start_leases()  # commands may run before every shard is ready and the worker starts
    except BaseException:
        await services.close()
        raise
    return services
