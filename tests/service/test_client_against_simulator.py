"""The real client against the real simulator over loopback."""

import asyncio
from pathlib import Path

import pytest

from bot.core.errors import OutcomeUnknown, Rejected
from bot.service.client import VideoServiceClient
from bot.simulator import DEFAULT_VIDEO_PATH, VideoServiceSimulator
from tests.conftest import SIM_KEY


async def test_create_poll_download_gives_the_served_bytes(
    sim_client: VideoServiceClient, simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    job = await sim_client.create("a lighthouse in a storm", seed=3)
    assert job.status == "pending"
    for _ in range(50):
        remote = await sim_client.get_job(job.id)
        if remote.status == "completed":
            break
        await asyncio.sleep(0.05)
    assert remote.status == "completed" and remote.ignored_paths == ()
    destination = tmp_path / "out.mp4"
    size = await sim_client.download(job.id, destination, max_bytes=10 * 1024 * 1024)
    assert destination.read_bytes() == DEFAULT_VIDEO_PATH.read_bytes()
    assert size == DEFAULT_VIDEO_PATH.stat().st_size


async def test_spend_grows_by_250_per_accepted_create_and_0_per_rejected(
    sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    before = await sim_client.key_info()
    await sim_client.create("one")
    await sim_client.create("two", seed=0)
    assert (await sim_client.key_info()).spend == before.spend + 500
    simulator.inject("create", 400, body={"error": {"message": "resolution must be 1280x720"}})
    with pytest.raises(Rejected) as rejected:
        await sim_client.create("three")
    assert "1280x720" in rejected.value.reason
    after = await sim_client.key_info()
    assert after.spend == before.spend + 500
    assert after.available == after.max_budget - after.spend  # type: ignore[operator]


async def test_a_create_that_times_out_is_never_resent(
    sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    simulator.hang_next_create(seconds=10)
    with pytest.raises(OutcomeUnknown):
        await sim_client.create("slow one")
    assert simulator.creates_received == 1
    assert simulator.spend == 250  # the service did accept it: that is why it must not be resent


async def test_5xx_and_429_on_create_are_retried_without_charge(
    sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    simulator.inject("create", 503)
    simulator.inject("create", 429, retry_after=0.1)
    job = await sim_client.create("retry me")
    assert job.status == "pending"
    assert simulator.creates_received == 3 and simulator.creates_accepted == 1
    assert simulator.spend == 250


async def test_the_key_travels_only_in_the_authorization_header(
    sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    job = await sim_client.create("check headers")
    await sim_client.get_job(job.id)
    await sim_client.key_info()
    assert simulator.requests_log
    for _method, path_qs, headers in simulator.requests_log:
        assert SIM_KEY not in path_qs
        assert headers.get("Authorization") == f"Bearer {SIM_KEY}"
