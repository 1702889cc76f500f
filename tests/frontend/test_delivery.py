"""DiscordDelivery with the real discord.py client logged into the local Discord double."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands
from discord.ext import commands

from bot.frontend import embeds, transcode
from bot.frontend.delivery import DiscordDelivery, nonce_for
from bot.frontend.i18n import t
from bot.jobs.port import DiscordUnavailable, Undeliverable
from bot.jobs.worker import JobWorker, WorkerConfig
from bot.service.catalogue import BUILT_IN
from bot.service.client import VideoServiceClient
from bot.simulator import VideoServiceSimulator
from bot.simulator.app import DEFAULT_VIDEO_PATH
from bot.store.jobs import JobState, JobStore
from tests.discord_double import DiscordDouble
from tests.jobs.worker_helpers import (
    CHANNEL_ID,
    PRICE_YEN,
    REQUESTER_ID,
    decode_errors,
    downloaded_job,
    new_job,
    submit,
    wait_for_states,
)

S = JobState
BYSTANDER_ID = 600_000_000_000_000_002
SAMPLE = DEFAULT_VIDEO_PATH.read_bytes()
# Below the sample's ~218 KB, and still enough for an 8 s clip at 480p.
SMALL_LIMIT = 200_000
NOISY_PROMPT = f"@everyone look <@{BYSTANDER_ID}> a lighthouse at dusk"


@pytest.fixture
async def double() -> AsyncIterator[DiscordDouble]:
    fake = DiscordDouble()
    fake.add_member(REQUESTER_ID, name="requester")
    fake.add_member(BYSTANDER_ID, name="bystander")
    await fake.start()
    assert fake.channel_ids[0] == CHANNEL_ID
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def receipts() -> asyncio.Queue[discord.Interaction]:
    return asyncio.Queue()


@pytest.fixture
async def discord_bot(
    double: DiscordDouble, monkeypatch: pytest.MonkeyPatch, receipts: asyncio.Queue[discord.Interaction]
) -> AsyncIterator[commands.Bot]:
    """A logged-in, connected bot with the production bot's intents and mention defaults."""
    monkeypatch.setattr(discord.http.Route, "BASE", double.api_base)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(double.gateway_url))
    intents = discord.Intents.none()
    intents.guilds = True
    bot = commands.Bot(
        command_prefix="!",
        intents=intents,
        allowed_mentions=discord.AllowedMentions.none(),
        guild_ready_timeout=0.2,
    )

    @app_commands.command(name="video", description="Turn a prompt into a short video")
    async def video(interaction: discord.Interaction, prompt: str) -> None:
        await interaction.response.send_message(f"Request received: {prompt}")
        await receipts.put(interaction)

    bot.tree.add_command(video, guild=discord.Object(double.guild_id))
    runner: asyncio.Task[None] | None = None
    try:
        await bot.login("double-token")
        await bot.tree.sync(guild=discord.Object(double.guild_id))
        runner = asyncio.create_task(bot.connect(reconnect=False))
        await double.wait_ready()
        await asyncio.wait_for(bot.wait_until_ready(), 10)
        yield bot
    finally:
        await bot.close()
        if runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner, 5)


@pytest.fixture
def delivery(discord_bot: commands.Bot) -> DiscordDelivery:
    return DiscordDelivery(discord_bot, BUILT_IN)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[JobStore]:
    store = await JobStore.open(tmp_path / "jobs.sqlite3")
    yield store
    await store.close()


@pytest.fixture
def video(tmp_path: Path) -> Path:
    """A downloaded video in the bot's storage folder."""
    folder = tmp_path / "videos"
    folder.mkdir()
    return Path(shutil.copyfile(DEFAULT_VIDEO_PATH, folder / "1.mp4"))


def channel_posts(double: DiscordDouble, channel_id: int = CHANNEL_ID) -> list[dict[str, Any]]:
    return list(double.messages.get(channel_id, []))


def refused_posts(double: DiscordDouble, status: int) -> list[str]:
    return [r.path for r in double.requests if r.method == "POST" and r.status == status]


async def assert_playable_copy(data: bytes, folder: Path, *, duration: float) -> None:
    copy = folder / "posted.mp4"
    copy.write_bytes(data)
    assert await decode_errors(copy) == (0, "")
    info = await transcode.probe(copy)
    assert abs(info.duration_seconds - duration) <= 0.2


# -- the channel, then the DMs ------------------------------------------------------------------------


async def test_video_posted_in_the_channel_pinging_only_the_requester(
    double: DiscordDouble, delivery: DiscordDelivery, store: JobStore, video: Path
) -> None:
    job = await downloaded_job(store, video, new_job(prompt=NOISY_PROMPT))

    delivered = await delivery.deliver(job, video)

    [posted] = channel_posts(double)
    assert delivered.channel_id == CHANNEL_ID and delivered.message_id == int(str(posted["id"]))
    assert not delivered.compressed and not delivered.via_dm
    assert posted["attachments_data"] == [(f"video-{job.id}.mp4", SAMPLE)]
    assert posted["mentions"] == [REQUESTER_ID] and posted["mention_everyone"] is False
    assert posted["mention_roles"] == []
    content = str(posted["content"])
    assert content.startswith(f"<@{REQUESTER_ID}>")
    assert job.reference in content and str(job.service_job_id) in content
    assert posted["nonce"] == nonce_for(job)
    [sent] = [r for r in double.requests if r.path == f"/channels/{CHANNEL_ID}/messages"]
    assert sent.json["enforce_nonce"] is True
    assert video.read_bytes() == SAMPLE, "the worker, not the delivery, decides about the local file"

    # A retry after a crash between the post and the database write: Discord returns the same message.
    again = await delivery.deliver(job, video)
    assert again.message_id == delivered.message_id
    assert len(channel_posts(double)) == 1


#: How a channel refuses for good, and the status Discord answers: no access, or AutoMod's block (400, code 200000:
#: the prompt in the text holds a blocked word), which is as final.
CHANNEL_REFUSALS = pytest.mark.parametrize(
    ("refuse", "status"), [(DiscordDouble.forbid_channel, 403), (DiscordDouble.block_by_automod, 400)],
    ids=["forbidden", "automod"],
)


@CHANNEL_REFUSALS
async def test_a_channel_that_refuses_falls_back_to_the_requesters_dm(
    double: DiscordDouble, delivery: DiscordDelivery, store: JobStore, video: Path,
    refuse: Callable[[DiscordDouble, int], None], status: int,
) -> None:
    refuse(double, CHANNEL_ID)
    job = await downloaded_job(store, video)

    delivered = await delivery.deliver(job, video)

    dm = await double.wait_for_dm(REQUESTER_ID, timeout=5)
    assert delivered.via_dm and delivered.channel_id == double.dm_channel_id(REQUESTER_ID)
    assert delivered.message_id == int(dm["id"])
    assert dm["attachments_data"] == [(f"video-{job.id}.mp4", SAMPLE)]
    assert f"<#{CHANNEL_ID}>" in dm["content"]  # says why it came by DM
    assert channel_posts(double) == []
    assert refused_posts(double, status) == [f"/channels/{CHANNEL_ID}/messages"]


async def test_channel_and_dm_both_forbidden_is_undeliverable(
    double: DiscordDouble, delivery: DiscordDelivery, store: JobStore, video: Path
) -> None:
    double.forbid_channel(CHANNEL_ID)
    double.forbid_dm(REQUESTER_ID)
    job = await downloaded_job(store, video)

    with pytest.raises(Undeliverable):
        await delivery.deliver(job, video)

    assert len(refused_posts(double, 403)) == 2
    assert channel_posts(double) == []
    assert video.read_bytes() == SAMPLE


async def test_worker_keeps_the_file_of_an_undeliverable_video(
    double: DiscordDouble,
    delivery: DiscordDelivery,
    store: JobStore,
    simulator: VideoServiceSimulator,
    sim_client: VideoServiceClient,
    tmp_path: Path,
) -> None:
    double.forbid_channel(CHANNEL_ID)
    double.forbid_dm(REQUESTER_ID)
    job = await submit(store, sim_client)
    worker = JobWorker(store, sim_client, delivery, WorkerConfig(storage_dir=tmp_path / "videos", poll_interval=0.1))
    worker.start()
    try:
        [stuck] = await wait_for_states(store, [job.id], [S.UNDELIVERABLE])
    finally:
        await worker.stop()

    assert stuck.file_path is not None and Path(stuck.file_path).read_bytes() == SAMPLE
    assert stuck.last_error and "refused" in stuck.last_error
    assert all(not messages for messages in double.messages.values())
    assert simulator.creates_received == 1


# -- files above the upload limit ---------------------------------------------------------------------


async def test_oversized_video_is_posted_compressed_and_the_original_kept(
    double: DiscordDouble,
    delivery: DiscordDelivery,
    store: JobStore,
    simulator: VideoServiceSimulator,
    sim_client: VideoServiceClient,
    tmp_path: Path,
) -> None:
    double.default_upload_limit = SMALL_LIMIT
    assert len(SAMPLE) > SMALL_LIMIT
    original = await transcode.probe(DEFAULT_VIDEO_PATH)
    job = await submit(store, sim_client, new_job(upload_limit_bytes=SMALL_LIMIT))
    storage = tmp_path / "videos"
    worker = JobWorker(store, sim_client, delivery, WorkerConfig(storage_dir=storage, poll_interval=0.1))
    worker.start()
    try:
        [done] = await wait_for_states(store, [job.id], [S.DELIVERED], timeout=20)
    finally:
        await worker.stop()

    [posted] = channel_posts(double)
    [(name, data)] = posted["attachments_data"]
    assert name == f"video-{job.id}.mp4"
    assert len(data) <= SMALL_LIMIT
    await assert_playable_copy(data, tmp_path, duration=original.duration_seconds)
    assert t(job.locale, "deliver.compressed") in str(posted["content"])
    assert refused_posts(double, 413) == []
    # The original stays for the operator; the compressed copy is not left behind.
    assert done.file_path is not None and Path(done.file_path).read_bytes() == SAMPLE
    assert sorted(p.name for p in storage.iterdir()) == [f"{job.id}.mp4"]


async def test_a_lower_limit_than_recorded_is_met_on_the_second_try(
    double: DiscordDouble, delivery: DiscordDelivery, store: JobStore, video: Path, tmp_path: Path
) -> None:
    """The job says 10 MiB (no interaction limit recorded); the server really takes less."""
    double.default_upload_limit = SMALL_LIMIT
    job = await downloaded_job(store, video)
    assert job.upload_limit_bytes is None

    delivered = await delivery.deliver(job, video)

    assert delivered.compressed
    assert refused_posts(double, 413) == [f"/channels/{CHANNEL_ID}/messages"]
    [posted] = channel_posts(double)
    [(_, data)] = posted["attachments_data"]
    assert len(data) <= SMALL_LIMIT
    await assert_playable_copy(data, tmp_path, duration=8.0)
    assert video.read_bytes() == SAMPLE
    assert sorted(p.name for p in video.parent.iterdir()) == [video.name]


async def test_a_video_that_cannot_fit_is_undeliverable_and_the_channel_is_told(
    double: DiscordDouble, delivery: DiscordDelivery, store: JobStore, video: Path
) -> None:
    tiny = 40_000
    job = await downloaded_job(store, video, new_job(upload_limit_bytes=tiny))

    with pytest.raises(Undeliverable, match="limit"):
        await delivery.deliver(job, video)
    assert channel_posts(double) == []
    assert video.read_bytes() == SAMPLE
    assert sorted(p.name for p in video.parent.iterdir()) == [video.name]

    # The channel refused nothing but the file: it is where the requester hears about it.
    stuck = await store.transition(job.id, S.UNDELIVERABLE, last_error="too large")
    await delivery.announce(stuck, "undeliverable")
    [told] = channel_posts(double)
    assert told["content"] == embeds.announcement_text(stuck, "undeliverable", catalogue=BUILT_IN)
    assert told["mentions"] == [REQUESTER_ID]
    assert double.dm_channel_id(REQUESTER_ID) is None


# -- news about jobs ----------------------------------------------------------------------------------


async def test_failed_job_announcement_carries_the_job_id(
    double: DiscordDouble, delivery: DiscordDelivery, store: JobStore, video: Path
) -> None:
    job = await store.add_submission(new_job(prompt=NOISY_PROMPT))
    await store.transition(job.id, JobState.SUBMITTING)
    job = await store.mark_accepted(job.id, "vid_failed_0001", PRICE_YEN, next_poll_at=time.time())
    failed = await store.transition(job.id, S.FAILED, finished_at=time.time())

    await delivery.announce(failed, "failed")

    [told] = channel_posts(double)
    assert "`vid_failed_0001`" in str(told["content"])
    assert told["mentions"] == [REQUESTER_ID] and told["mention_everyone"] is False


@CHANNEL_REFUSALS
async def test_announcement_falls_back_to_dm_when_the_channel_refuses(
    double: DiscordDouble, delivery: DiscordDelivery, store: JobStore, video: Path,
    refuse: Callable[[DiscordDouble, int], None], status: int,
) -> None:
    refuse(double, CHANNEL_ID)
    job = await downloaded_job(store, video)

    await delivery.announce(job, "slow")

    dm = await double.wait_for_dm(REQUESTER_ID, timeout=5)
    assert dm["content"] == embeds.announcement_text(job, "slow", catalogue=BUILT_IN)
    assert channel_posts(double) == []
    assert refused_posts(double, status) == [f"/channels/{CHANNEL_ID}/messages"]


async def test_show_progress_edits_the_original_reply(
    double: DiscordDouble,
    delivery: DiscordDelivery,
    store: JobStore,
    receipts: asyncio.Queue[discord.Interaction],
) -> None:
    record = await double.send_slash_command("video", {"prompt": "a lighthouse"}, user_id=REQUESTER_ID)
    interaction = await asyncio.wait_for(receipts.get(), 10)
    reply = await interaction.original_response()
    job = await store.add_submission(
        new_job(interaction_token=interaction.token, interaction_expires_at=time.time() + 15 * 60)
    )
    await store.transition(job.id, JobState.SUBMITTING)
    job = await store.mark_accepted(job.id, "vid_progress_01", PRICE_YEN, next_poll_at=time.time())
    job = await store.update(job.id, reply_message_id=reply.id)
    job = await store.transition(job.id, S.IN_PROGRESS)

    await delivery.show_progress(job)

    original = double.webhook_messages[record.token]["@original"]
    assert original["id"] == str(reply.id)
    [embed] = original["embeds"]
    expected = embeds.receipt_embed(job, catalogue=BUILT_IN)
    assert embed["title"] == expected.title
    assert {f["name"]: f["value"] for f in embed["fields"]} == {f.name: f.value for f in expected.fields}
    assert embeds.state_name(job) in [f["value"] for f in embed["fields"]]

    # Without a reply to edit there is nothing to do, and nothing is sent.
    requests_before = len(double.requests)
    await delivery.show_progress(replace(job, reply_message_id=None))
    assert len(double.requests) == requests_before


async def test_news_through_the_interaction_edit_the_original_reply_at_the_path_discord_documents(
    double: DiscordDouble,
    delivery: DiscordDelivery,
    store: JobStore,
    receipts: asyncio.Queue[discord.Interaction],
    caplog: pytest.LogCaptureFixture,
) -> None:
    record = await double.send_slash_command("video", {"prompt": "a lighthouse"}, user_id=REQUESTER_ID)
    interaction = await asyncio.wait_for(receipts.get(), 10)
    await interaction.original_response()
    job = await store.add_submission(
        new_job(interaction_token=interaction.token, interaction_expires_at=time.time() + 15 * 60)
    )
    await store.transition(job.id, JobState.SUBMITTING)
    job = await store.mark_accepted(job.id, "vid_news_01", PRICE_YEN, next_poll_at=time.time())
    job = await store.transition(job.id, S.IN_PROGRESS)
    job = await store.transition(job.id, S.FAILED, last_error="failed at the service")

    with caplog.at_level(logging.DEBUG, logger="discord.webhook.async_"):
        await delivery.announce(job, "failed", via_interaction=True)

    path = f"/webhooks/{double.application_id}/{record.token}/messages/@original"
    [edit] = [r for r in double.requests if r.method == "PATCH" and record.token in r.path]
    assert edit.path.split("?")[0] == path
    # The URL as discord.py builds it (its debug log shows it) is the one its edit_original_response builds, not
    # percent-quoted as `/messages/%40original` (only aiohttp's re-quoting turned that back into `@`).
    [sent] = [r.getMessage() for r in caplog.records if "PATCH" in r.getMessage()]
    assert path in sent and "%40" not in sent
    assert double.webhook_messages[record.token]["@original"]["content"] == embeds.announcement_text(
        job, "failed", catalogue=BUILT_IN)
    assert channel_posts(double) == []


async def test_closed_dms_are_an_expected_refusal_logged_in_one_line(
    double: DiscordDouble,
    delivery: DiscordDelivery,
    store: JobStore,
    video: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    double.forbid_channel(CHANNEL_ID)
    double.forbid_dm(REQUESTER_ID)
    job = await downloaded_job(store, video)

    with pytest.raises(Undeliverable) as refused:
        await delivery.announce(job, "failed")
    assert "50007" in str(refused.value)

    # The worker's side: one warning, no traceback, and the job counts one more failed round.
    worker = JobWorker(store, MagicMock(spec=VideoServiceClient), delivery, WorkerConfig(storage_dir=video.parent))
    with caplog.at_level(logging.WARNING):
        assert await worker._finalize(job, "failed") == 0
    [line] = [r for r in caplog.records if "could not tell the requester" in r.getMessage()]
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert (await store.get(job.id)).notice_attempts == 1



# -- the port: what the job code sees of Discord's failures ---------------------------------------------


def _http_error(status: int) -> discord.HTTPException:
    response = MagicMock(status=status, reason="unavailable")
    return discord.HTTPException(response, "unavailable")


def _failing_client(error: BaseException) -> MagicMock:
    """A logged-in client whose channel send fails with `error`, and whose DMs refuse nothing else."""
    client = MagicMock(spec=discord.Client)
    channel = MagicMock(spec=discord.TextChannel)
    channel.send.side_effect = error
    client.get_channel.return_value = channel
    client.application_id = None  # no interaction to fall back on
    return client


@pytest.mark.parametrize("error", [_http_error(503), aiohttp.ClientConnectionError("connection reset")])
async def test_discords_failures_reach_the_job_code_as_the_ports_discord_unavailable(
    store: JobStore, video: Path, error: BaseException
) -> None:
    job = await downloaded_job(store, video)
    delivery = DiscordDelivery(_failing_client(error), BUILT_IN)

    with pytest.raises(DiscordUnavailable) as posting:
        await delivery.deliver(job, video)
    with pytest.raises(DiscordUnavailable) as telling:
        await delivery.announce(job, "failed")
    for raised in (posting.value, telling.value):
        assert raised.__cause__ is error and str(raised) == str(error)
