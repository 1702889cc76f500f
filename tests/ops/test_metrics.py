"""The /metrics endpoint: the services of the composition root run a job through the simulator, then it is scraped."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.app import Services, open_services, worker_config
from bot.config.settings import Settings, read_settings
from bot.core.host import SetupError
from bot.jobs.port import Delivery
from bot.ops.metrics import STALL_WINDOW_SECONDS, Metrics, MetricsEndpoint
from bot.service.catalogue import DEFAULT_MODEL
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import Job, JobState, JobStore, NewJob
from tests.conftest import SIM_KEY
from tests.jobs.worker_helpers import (
    CHANNEL_ID,
    GUILD_ID,
    REQUESTER_ID,
    RecordingDeliverer,
    ShiftedClock,
    wait_for_states,
)

#: The deliverer moves the clock this far before posting: the completed-to-posted time is at least this.
POSTING_TAKES = 42.0

Opened = tuple[Services, RecordingDeliverer]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class SlowPostingDeliverer(RecordingDeliverer):
    def __init__(self, clock: ShiftedClock) -> None:
        super().__init__(clock=clock)
        self.shifted = clock

    async def deliver(self, job: Job, video: Path) -> Delivery:
        self.shifted.offset += POSTING_TAKES
        return await super().deliver(job, video)


def settings_for(sim: VideoServiceSimulator, tmp_path: Path, **env: str) -> Settings:
    return read_settings({
        "DISCORD_TOKEN": "discord-token-for-tests",
        "VIDEO_API_BASE_URL": sim.base_url,
        "VIDEO_API_KEY": SIM_KEY,
        "DATABASE_PATH": str(tmp_path / "bot.sqlite3"),
        "VIDEO_STORAGE_DIR": str(tmp_path / "videos"),
        **env,
    })


@pytest.fixture
async def services(simulator: VideoServiceSimulator, tmp_path: Path) -> AsyncIterator[Opened]:
    # Port 0 (any free port) is not a valid METRICS_PORT for an operator, but the settings object takes it.
    settings = dataclasses.replace(settings_for(simulator, tmp_path, POLL_INTERVAL_SECONDS="0.05"), metrics_port=0)
    clock = ShiftedClock()
    deliverer = SlowPostingDeliverer(clock)
    opened = await open_services(
        settings, deliverer, clock=clock,
        worker=worker_config(settings, rate_limit_backoff=0.05),
    )
    try:
        yield opened, deliverer
    finally:
        await opened.close()


async def scrape(services: Services) -> tuple[str, Samples]:
    assert services.metrics is not None and services.metrics.port is not None
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{services.metrics.port}/metrics") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain")
            text = await response.text()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def request(prompt: str = "a paper boat on a rainy street") -> NewJob:
    return NewJob(model=DEFAULT_MODEL.id, prompt=prompt, seed=7, user_id=REQUESTER_ID, guild_id=GUILD_ID,
                  channel_id=CHANNEL_ID, locale="en-US")


async def run_one_job(services: Services, sim: VideoServiceSimulator) -> Job:
    sim.inject("status", 429, retry_after=0.05)  # the first status poll is refused
    services.worker.start()
    job = await services.requests.submit(request())
    [done] = await wait_for_states(services.store, [job.id], {JobState.DELIVERED})
    return done


async def test_a_job_run_through_shows_in_the_scrape(
    services: Opened, simulator: VideoServiceSimulator
) -> None:
    opened, deliverer = services
    await run_one_job(opened, simulator)
    _, samples = await scrape(opened)

    # What the client sent and heard.
    assert value(samples, "videobot_service_requests_total", endpoint="create") == 1
    assert value(samples, "videobot_service_requests_total", endpoint="key_info") == 1
    assert value(samples, "videobot_service_requests_total", endpoint="download") == 1
    assert value(samples, "videobot_service_rate_limited_total", endpoint="status") == 1
    assert value(samples, "videobot_service_rate_limited_total", endpoint="create") == 0
    assert value(samples, "videobot_service_responses_total", endpoint="status", status="429") == 1
    assert value(samples, "videobot_service_responses_total", endpoint="create", status="202") == 1
    # Every status poll got an answer: the one 429, the rest 200.
    polls = value(samples, "videobot_service_requests_total", endpoint="status")
    assert polls == value(samples, "videobot_service_responses_total", endpoint="status", status="200") + 1

    # The video.
    [delivered] = deliverer.deliveries
    assert value(samples, "videobot_downloads_total") == 1
    assert value(samples, "videobot_downloaded_bytes_total") == len(delivered.data)
    assert value(samples, "videobot_completed_to_posted_seconds_count") == 1
    assert value(samples, "videobot_completed_to_posted_seconds_bucket", le="30.0") == 0
    assert value(samples, "videobot_completed_to_posted_seconds_bucket", le="60.0") == 1
    assert value(samples, "videobot_completed_to_posted_seconds_sum") >= POSTING_TAKES

    # Money: the charge the bot recorded, and the budget /key/info gave before the create.
    assert value(samples, "videobot_charged_yen_total") == 250
    assert value(samples, "videobot_key_budget_remaining_yen") == 10_000

    # Jobs by state, every state present.
    assert value(samples, "videobot_jobs", state="delivered") == 1
    assert sum(v for (name, _), v in samples.items() if name == "videobot_jobs") == 1
    assert len([name for name, _ in samples if name == "videobot_jobs"]) == len(JobState)


async def test_the_budget_gauge_follows_every_key_info_read(
    services: Opened, simulator: VideoServiceSimulator
) -> None:
    opened, _ = services
    _, before = await scrape(opened)
    assert math.isnan(value(before, "videobot_key_budget_remaining_yen"))  # not read yet: not "0 left"
    await run_one_job(opened, simulator)
    info = await opened.client.key_info()  # as /balance reads it
    assert info.available == 10_000 - 250 == 10_000 - simulator.spend
    _, after = await scrape(opened)
    assert value(after, "videobot_key_budget_remaining_yen") == info.available


async def test_no_label_or_value_holds_the_api_key(
    services: Opened, simulator: VideoServiceSimulator
) -> None:
    opened, _ = services
    simulator.inject("key_info", 401)  # an error answer, too, is counted without its text
    with pytest.raises(Exception):  # noqa: B017 - only the counting matters here
        await opened.client.key_info()
    await run_one_job(opened, simulator)
    text, samples = await scrape(opened)
    assert SIM_KEY not in text
    assert SIM_KEY[-8:] not in text
    for (_, labels), _value in samples.items():
        for _label, label_value in labels:
            assert SIM_KEY[-8:] not in label_value
    assert value(samples, "videobot_service_responses_total", endpoint="key_info", status="401") == 1


async def test_jobs_by_state_are_read_at_each_scrape(
    services: Opened, simulator: VideoServiceSimulator
) -> None:
    opened, _ = services
    _, empty = await scrape(opened)
    assert value(empty, "videobot_jobs", state="received") == 0
    job = await opened.requests.record(request())  # written down, not sent
    _, samples = await scrape(opened)
    assert value(samples, "videobot_jobs", state="received") == 1
    await opened.store.transition(job.id, JobState.REJECTED, last_error="test")
    _, samples = await scrape(opened)
    assert value(samples, "videobot_jobs", state="received") == 0
    assert value(samples, "videobot_jobs", state="rejected") == 1
    assert value(samples, "videobot_charged_yen_total") == 0


async def test_an_unreadable_store_leaves_its_figures_out(
    services: Opened, caplog: pytest.LogCaptureFixture
) -> None:
    opened, _ = services
    _, before = await scrape(opened)
    assert value(before, "videobot_charged_yen_total") == 0
    await opened.store.close()  # the next scrape's read fails
    text, samples = await scrape(opened)
    assert "videobot_jobs" not in text and "videobot_charged_yen" not in text
    assert value(samples, "videobot_service_requests_total", endpoint="create") == 0
    assert "the job store could not be read" in caplog.text


async def test_the_endpoint_is_off_without_a_port(simulator: VideoServiceSimulator, tmp_path: Path) -> None:
    opened = await open_services(settings_for(simulator, tmp_path), RecordingDeliverer())
    try:
        assert opened.metrics is None
        assert opened.client._observer is None
    finally:
        await opened.close()


async def test_the_endpoint_stops_with_the_services(simulator: VideoServiceSimulator, tmp_path: Path) -> None:
    settings = dataclasses.replace(settings_for(simulator, tmp_path), metrics_port=0)
    opened = await open_services(settings, RecordingDeliverer())
    assert opened.metrics is not None
    port = opened.metrics.port
    await scrape(opened)
    await opened.close()
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            await http.get(f"http://127.0.0.1:{port}/metrics")


def test_the_stall_gauge_shows_the_worst_of_the_last_minute() -> None:
    now = [1000.0]
    metrics = Metrics(clock=lambda: now[0])

    def sample(name: str) -> float:
        got = metrics.registry.get_sample_value(name)
        assert got is not None
        return got

    metrics.loop_stall(0.3)
    now[0] += 10
    metrics.loop_stall(0.01)
    assert sample("videobot_event_loop_stall_max_seconds") == 0.3
    now[0] += STALL_WINDOW_SECONDS - 5  # the 0.3 s stall is now more than a minute old
    metrics.loop_stall(0.02)
    assert sample("videobot_event_loop_stall_max_seconds") == 0.02
    assert sample("videobot_event_loop_stall_seconds_count") == 3
    assert metrics.registry.get_sample_value("videobot_event_loop_stall_seconds_bucket", {"le": "0.25"}) == 2


async def test_the_loop_monitor_sees_a_blocked_loop() -> None:
    metrics = Metrics()
    monitor = asyncio.create_task(metrics.watch_event_loop(0.05))
    try:
        await asyncio.sleep(0)  # the monitor is asleep now
        blocked = 0.3
        time.sleep(blocked)  # noqa: ASYNC251 - blocking the loop, as a stray synchronous call would, is the point
        while not metrics.registry.get_sample_value("videobot_event_loop_stall_seconds_count"):
            await asyncio.sleep(0.01)
        # It woke at least `blocked` after it went to sleep, which it meant to do after 0.05 s.
        worst = metrics.registry.get_sample_value("videobot_event_loop_stall_max_seconds")
        assert worst is not None and worst >= blocked - 0.05
    finally:
        monitor.cancel()


async def test_a_port_in_use_is_the_hosts_mistake_in_one_line(tmp_path: Path) -> None:
    store = await JobStore.open(tmp_path / "bot.sqlite3")
    try:
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            with pytest.raises(SetupError) as refused:
                await MetricsEndpoint(Metrics(), store).start("127.0.0.1", port)
    finally:
        await store.close()
    assert str(refused.value) == f"METRICS_PORT: port {port} on 127.0.0.1 is already in use; stop the program that " \
                                 "uses it, or set METRICS_PORT to a free port"
