"""Prometheus metrics: the metric objects in a registry of their own, and the optional /metrics endpoint.

The rest of the bot calls the small methods of `Metrics` (the client through its `observer`, the
worker's deliveries through `TimedDeliverer`); nothing else imports prometheus_client. What the
database already knows (jobs by state, yen charged) is read once per scrape, never per request.
Labels are fixed words (endpoint names, HTTP statuses, job states): no path, id or key reaches them.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from bot.core.host import cannot_listen
from bot.core.lifecycle import JobState
from bot.core.notices import Notice
from bot.core.tasks import cancel_and_wait
from bot.jobs.port import Deliverer, Delivery
from bot.service.answers import KeyInfo
from bot.store.jobs import Job, JobStore

log = logging.getLogger(__name__)

#: What the client reports as `endpoint` (see `bot.service.transport.ClientObserver`).
ENDPOINTS = ("create", "status", "download", "key_info")
#: The stall gauge shows the worst wake-up lag of this many seconds.
STALL_WINDOW_SECONDS = 60.0
#: How often the loop monitor wakes: a stall shorter than this may go unseen, which is fine.
STALL_PROBE_SECONDS = 0.5
_STALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# The service keeps a video for a limited time; minutes to an hour is the range that matters.
_POSTED_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class _StoreFigures(Collector):
    """Jobs by state and yen charged, as the store gave them for the scrape in progress."""

    def __init__(self) -> None:
        self.counts: Mapping[JobState, int] | None = None
        self.charged_yen: int | None = None

    def collect(self) -> Iterator[Metric]:
        # None: the store could not be read for this scrape; the figures are left out, not shown stale.
        if self.counts is not None:
            jobs = GaugeMetricFamily("videobot_jobs", "Jobs in the database by state.", labels=["state"])
            for state in JobState:
                jobs.add_metric([state.value], self.counts.get(state, 0))
            yield jobs
        if self.charged_yen is not None:
            yield CounterMetricFamily(
                "videobot_charged_yen", "Yen charged for accepted jobs, from the bot's records.", value=self.charged_yen
            )


class Metrics:
    """The bot's metrics. Each instance has its own registry, so tests can build several."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.registry = CollectorRegistry()
        r = self.registry
        self._requests = Counter(
            "videobot_service_requests", "Requests sent to the video service by endpoint (creates sent, status polls).",
            ["endpoint"], registry=r,
        )
        self._responses = Counter(
            "videobot_service_responses", "Answers of the video service by endpoint and HTTP status.",
            ["endpoint", "status"], registry=r,
        )
        self._rate_limited = Counter(
            "videobot_service_rate_limited", "HTTP 429 answers of the video service by endpoint.", ["endpoint"],
            registry=r,
        )
        for endpoint in ENDPOINTS:  # present at 0 from the start, so rate() works from the first scrape
            self._requests.labels(endpoint)
            self._rate_limited.labels(endpoint)
        self._downloads = Counter("videobot_downloads", "Finished videos downloaded.", registry=r)
        self._downloaded_bytes = Counter("videobot_downloaded_bytes", "Bytes of finished videos downloaded.",
                                         registry=r)
        self._posted_after = Histogram(
            "videobot_completed_to_posted_seconds", "Time from the service finishing a video to its post in Discord.",
            buckets=_POSTED_BUCKETS, registry=r,
        )
        self._budget = Gauge(
            "videobot_key_budget_remaining_yen",
            "The key's remaining budget at the last /key/info read (NaN: not read yet, or the key has no limit).",
            registry=r,
        )
        self._budget.set(math.nan)  # 0 would read as "no money left"
        self._stall = Histogram(
            "videobot_event_loop_stall_seconds", "How late the event loop woke a sleeping task.",
            buckets=_STALL_BUCKETS, registry=r,
        )
        self._worst_stall = Gauge(
            "videobot_event_loop_stall_max_seconds", "The worst event-loop stall in the last minute.", registry=r
        )
        self._recent_stalls: collections.deque[tuple[float, float]] = collections.deque()
        self._store = _StoreFigures()
        r.register(self._store)

    # -- the client (bot.service.transport.ClientObserver) ---------------------------------------------

    def request_sent(self, endpoint: str) -> None:
        self._requests.labels(endpoint).inc()

    def response(self, endpoint: str, status: int) -> None:
        self._responses.labels(endpoint, str(status)).inc()
        if status == 429:
            self._rate_limited.labels(endpoint).inc()

    def downloaded(self, size: int) -> None:
        self._downloads.inc()
        self._downloaded_bytes.inc(size)

    def key_info_read(self, info: KeyInfo) -> None:
        available = info.available
        self._budget.set(math.nan if available is None else available)

    # -- deliveries, the store, the event loop ----------------------------------------------------

    def posted(self, seconds_since_completed: float) -> None:
        self._posted_after.observe(max(0.0, seconds_since_completed))

    def job_state_counts(self, counts: Mapping[JobState, int] | None) -> None:
        self._store.counts = counts

    def charged_total(self, yen: int | None) -> None:
        self._store.charged_yen = yen

    async def read_store(self, store: JobStore) -> None:
        """Take this scrape's figures from the store: two small reads, once per scrape."""
        try:
            counts = await store.state_counts()
            _, yen = await store.ledger()
        except Exception:
            log.warning("metrics: the job store could not be read; jobs by state and yen left out", exc_info=True)
            counts, yen = None, None
        self.job_state_counts(counts)
        self.charged_total(yen)

    def loop_stall(self, seconds: float) -> None:
        now = self._clock()
        self._stall.observe(seconds)
        recent = self._recent_stalls
        recent.append((now, seconds))
        while recent and recent[0][0] <= now - STALL_WINDOW_SECONDS:
            recent.popleft()
        self._worst_stall.set(max(stall for _, stall in recent))

    async def watch_event_loop(self, interval: float = STALL_PROBE_SECONDS) -> None:
        """Sleep `interval` over and over; whatever the wake-up comes late by is a stall of the loop."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(interval)
            self.loop_stall(max(0.0, loop.time() - started - interval))


class TimedDeliverer:
    """A deliverer that times each posted video from its completion (`finished_at`); otherwise the one it wraps."""

    def __init__(self, inner: Deliverer, metrics: Metrics, clock: Callable[[], float]) -> None:
        self._inner = inner
        self._metrics = metrics
        self._clock = clock  # the clock `finished_at` was written with

    async def deliver(self, job: Job, video: Path) -> Delivery:
        delivery = await self._inner.deliver(job, video)
        if job.finished_at is not None:
            self._metrics.posted(self._clock() - job.finished_at)
        return delivery

    async def announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> None:
        await self._inner.announce(job, event, via_interaction=via_interaction)

    async def show_progress(
        self, job: Job, *, position: int | None = None, ready_at: float | None = None
    ) -> None:
        await self._inner.show_progress(job, position=position, ready_at=ready_at)


class MetricsEndpoint:
    """Serves GET /metrics and runs the event-loop monitor while it is open."""

    def __init__(self, metrics: Metrics, store: JobStore, *, probe_interval: float = STALL_PROBE_SECONDS) -> None:
        self.metrics = metrics
        self._store = store
        self._probe_interval = probe_interval
        self._runner: web.AppRunner | None = None
        self._monitor: asyncio.Task[None] | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._scrape)
        # No access log: a scrape every few seconds would drown the bot's own lines.
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            # The host's port or address, not the bot's fault: one line naming the setting (exit status 2).
            raise cannot_listen("METRICS_PORT", "METRICS_HOST", host, port, exc) from None
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])  # the bound port, when 0 asked for any free one
        self._monitor = asyncio.create_task(self.metrics.watch_event_loop(self._probe_interval), name="loop-monitor")
        log.info("metrics served at http://%s:%d/metrics", host, self.port)

    async def close(self) -> None:
        if self._monitor is not None:
            await cancel_and_wait(self._monitor)
            self._monitor = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _scrape(self, request: web.Request) -> web.Response:
        await self.metrics.read_store(self._store)
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})
