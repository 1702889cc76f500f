"""Sharding across processes: two bots on one Discord with two shards and one PostgreSQL database, each answering
its own servers."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.simulator import VideoServiceSimulator
from tests.conftest import pid_namespace_prefix
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess

SHARDS = 2
SYNCED = "slash commands globally"  # the start-up line of the process that synced them
SKIPPED = "not syncing slash commands: the process running shard 0 does"


@pytest.fixture
async def double() -> AsyncIterator[DiscordDouble]:
    """The e2e fixtures' double, with two shards and a server on each (added before any bot identifies)."""
    d = DiscordDouble(shard_count=SHARDS, bot_public=False)
    for shard in range(SHARDS):
        d.add_guild(shard=shard, channels=1)
    await d.start()
    d.add_member(USER_ID, name="requester")
    yield d
    await d.stop()


def guild_on(double: DiscordDouble, shard: int) -> int:
    return next(g for g in double.guild_ids() if g != double.guild_id and double.shard_of(g) == shard)


def sharded_bot(make_bot: Callable[..., BotProcess], service: VideoServiceSimulator, workdir: Path,
                database_url: str, **settings: str) -> BotProcess:
    """A bot process on the shared PostgreSQL database, with a disk (videos, log) of its own."""
    # Commands are synced globally (no DISCORD_GUILD_ID): every server, on either shard, gets them.
    return make_bot(service, workdir, SHARD_COUNT=str(SHARDS), DISCORD_GUILD_ID="", DATABASE_URL=database_url,
                    **settings)


async def request_video(double: DiscordDouble, guild_id: int, prompt: str, *, posted: Any = ()) -> dict[str, Any]:
    """A /video in the server's channel, acknowledged in time and its video posted there with its cost (a message
    other than the `posted` ones)."""
    channel = double.guild_channel_ids(guild_id)[0]
    interaction = await double.send_slash_command("video", {"prompt": prompt}, guild_id=guild_id, user_id=USER_ID)
    first = await double.wait_for_callback(interaction.id)
    assert first["time"] - interaction.created_at < 3.0
    message = await double.wait_for_message(
        channel, timeout=30, predicate=lambda m: bool(m.get("attachments_data")) and m["id"] not in posted
    )
    assert "¥250" in message["content"]
    return message


def job_of(service: VideoServiceSimulator, prompt: str) -> str:
    (job_id,) = [job.id for job in service.jobs.values() if job.prompt == prompt]
    return job_id


async def answered_by(bots: dict[int, BotProcess], service: VideoServiceSimulator, prompt: str,
                      message: dict[str, Any]) -> list[int]:
    """The shards whose process created the request's one job and posted its video (each logs both)."""
    job_id = job_of(service, prompt)

    def shards() -> list[int]:
        return [shard for shard, bot in bots.items()
                if f"accepted as job {job_id}" in bot.log() and f"as message {message['id']}" in bot.log()]

    async with asyncio.timeout(10):  # the line "delivered" follows the post
        while not shards():
            await asyncio.sleep(0.05)
    return shards()


async def test_two_processes_on_one_database_each_answer_their_own_shards_servers_once(
    make_bot: Callable[..., BotProcess], service: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path,
    postgres_url: str,
) -> None:
    bots = {shard: sharded_bot(make_bot, service, tmp_path / f"shard-{shard}", postgres_url, SHARD_IDS=str(shard))
            for shard in range(SHARDS)}
    await bots[0].start()
    await bots[1].start()
    assert double.connected_shards() == {0, 1}
    assert sorted(p["shard"] for p in double.identify_payloads) == [[0, SHARDS], [1, SHARDS]]

    for shard in range(SHARDS):
        prompt = f"a lighthouse seen from shard {shard}"
        message = await request_video(double, guild_on(double, shard), prompt)
        assert await answered_by(bots, service, prompt, message) == [shard]
    assert service.creates_received == service.creates_accepted == 2
    # Only the process running shard 0 synced, and once: one PUT of the global commands.
    syncs = [r for r in double.requests if r.method == "PUT" and r.path.endswith("/commands")]
    assert len(syncs) == 1 and double.synced_commands.get(None)
    assert SYNCED in bots[0].log() and SKIPPED not in bots[0].log()
    assert SYNCED not in bots[1].log() and SKIPPED in bots[1].log()
    for shard, bot in bots.items():
        assert f"on shard {shard} of {SHARDS}" in bot.log() and (bot.workdir / "heartbeat").exists()
        assert await bot.stop() == 0 and "Traceback" not in bot.log()


async def test_one_process_with_both_shards_answers_every_server(
    make_bot: Callable[..., BotProcess], service: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path,
    postgres_url: str,
) -> None:
    bot = sharded_bot(make_bot, service, tmp_path / "all-shards", postgres_url)
    await bot.start()  # discord.py waits 5 s between its two identifies (Discord's identify rate limit)
    assert double.connected_shards() == {0, 1}
    assert "connected as" in bot.log() and f"all {SHARDS} shards in this process" in bot.log()
    for shard in range(SHARDS):
        prompt = f"a kite flown on shard {shard}"
        message = await request_video(double, guild_on(double, shard), prompt)
        assert await answered_by({shard: bot}, service, prompt, message) == [shard]
    assert service.creates_received == service.creates_accepted == 2
    assert SYNCED in bot.log()
    assert await bot.stop() == 0 and "Traceback" not in bot.log()


async def test_a_process_on_a_shard_a_live_one_runs_is_refused_and_one_after_a_crash_here_starts_at_once(
    make_bot: Callable[..., BotProcess], service: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path,
    postgres_url: str,
) -> None:
    lease = {"LEASE_SECONDS": "3"}  # a live process renews every second
    first = sharded_bot(make_bot, service, tmp_path / "first", postgres_url, SHARD_IDS="0", **lease)
    await first.start()
    # Both shards, one of them the first's: Discord would give shard 0's servers to either.
    second = sharded_bot(make_bot, service, tmp_path / "second", postgres_url, SHARD_IDS="0,1", **lease)
    await second.start("run")
    assert await second.wait_exit(timeout=30) == 2
    assert "another live bot process" in second.log() and "SHARD_IDS" in second.log()
    assert "Traceback" not in second.log()
    assert double.connected_shards() == {0}, "the refused process never connected"
    message = await request_video(double, guild_on(double, 0), "a harbour at dawn")
    assert await answered_by({0: first}, service, "a harbour at dawn", message) == [0]

    # Killed: its heartbeat stays in the database for up to a lease. Restarted at once on this host (as Docker's
    # restart policy does), the next run sees that the process named in the heartbeat no longer runs here, and
    # takes its shard at once instead of waiting the heartbeat out (with the default lease: up to 80 s).
    identified = len(double.identify_payloads)
    killed = time.monotonic()
    assert await first.stop(signal.SIGKILL) != 0
    again = sharded_bot(make_bot, service, tmp_path / "again", postgres_url, SHARD_IDS="0")
    await again.start("run")
    async with asyncio.timeout(15):
        while len(double.identify_payloads) == identified:
            assert again.process is not None and again.process.returncode is None, again.log()
            await asyncio.sleep(0.02)
    back = time.monotonic() - killed
    print(f"from kill -9 to the replacement identifying on shard 0: {back:.2f} s")
    assert double.identify_payloads[-1]["shard"] == [0, SHARDS]
    assert "no longer runs on this host: taking over at once" in again.log() and "waiting up to" not in again.log()
    assert back < 10
    await again.wait_ready()
    message = await request_video(double, guild_on(double, 0), "a harbour at dusk", posted={message["id"]})
    assert await answered_by({0: again}, service, "a harbour at dusk", message) == [0]
    assert await again.stop() == 0 and "Traceback" not in again.log()


async def test_a_container_restarted_in_place_after_a_crash_takes_its_shard_back_at_once(
    make_bot: Callable[..., BotProcess], service: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path,
    postgres_url: str,
) -> None:
    """Docker's restart policy runs the process as PID 1 again in a new PID namespace, on the same data volume: its
    predecessor's pid says nothing there, the owner record in its data folder does."""
    namespace = pid_namespace_prefix()
    if namespace is None:
        pytest.skip("no `unshare --pid` here (util-linux, and root or user namespaces, are needed)")
    bot = sharded_bot(make_bot, service, tmp_path / "volume", postgres_url, SHARD_IDS="0", LEASE_SECONDS="30")
    await bot.start(within=namespace)
    identified = len(double.identify_payloads)
    killed = time.monotonic()
    assert await bot.stop(signal.SIGKILL) != 0  # unshare's child, the bot, is killed with it
    await bot.start("run", within=namespace)
    async with asyncio.timeout(15):
        while len(double.identify_payloads) == identified:
            assert bot.process is not None and bot.process.returncode is None, bot.log()
            await asyncio.sleep(0.02)
    print(f"from kill -9 to the restarted container identifying on shard 0: {time.monotonic() - killed:.2f} s")
    assert "taking over at once" in bot.log_since_start() and "waiting up to" not in bot.log_since_start()
    await bot.wait_ready()
    message = await request_video(double, guild_on(double, 0), "a pier in the rain")
    assert await answered_by({0: bot}, service, "a pier in the rain", message) == [0]
    assert await bot.stop() == 0 and "Traceback" not in bot.log()
