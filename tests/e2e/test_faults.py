"""Faults on the bot's own side, through the real bot process: a database that cannot be written, and
a video no place would take (handed over by /status). The double, the simulator and the bot are real."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from bot.simulator import DEFAULT_VIDEO_PATH, VideoServiceSimulator
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess
from tests.e2e.test_untrusted_service import ledger, row, rows, video
from tests.e2e.test_video_flow import embed_text, original, video_posts, wait_until


@contextmanager
def database_locked(bot: BotProcess) -> Iterator[None]:
    """Another process holds the write lock: every write of the bot fails as "database is locked"."""
    db = sqlite3.connect(bot.workdir / "bot.sqlite3", timeout=10, isolation_level=None)
    try:
        db.execute("BEGIN EXCLUSIVE")
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()


async def test_a_database_that_cannot_record_refuses_before_sending_anything(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    with database_locked(bot):
        interaction = await video(bot, double, "a lighthouse", double.channel_ids[0])  # answered within 3 s
        await wait_until(lambda: "cannot record" in (original(double, interaction).get("content") or "")
                         or "cannot record" in str(double.interaction_responses.get(interaction.id)))
    assert "Nothing was sent or spent" in str(double.interaction_responses[interaction.id])
    assert service.creates_received == 0 and service.spend == 0
    assert rows(bot) == []


async def test_a_database_failing_after_the_202_tells_the_charge_and_still_delivers(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    channel = double.channel_ids[0]
    service.hang_next_create(seconds=1.0)  # accepted, answered a second later (inside the 2 s timeout)
    interaction = await video(bot, double, "a lighthouse in a storm", channel)
    await wait_until(lambda: service.creates_accepted == 1)
    with database_locked(bot):
        # The 202 arrives while the lock is held: the requester is told the job id and the charge.
        await wait_until(lambda: "could not record it yet" in (original(double, interaction).get("content") or ""),
                         timeout=15)
        [job_id] = service.accepted_job_ids
        assert f"accepted as job `{job_id}` and charged ¥250" in original(double, interaction)["content"]
        await asyncio.sleep(1.0)
    # The lock is gone: the write is retried, the job recorded, the video posted once.
    await wait_until(lambda: len(video_posts(double, channel)) == 1, timeout=40)
    assert "could not be recorded" in bot.log()
    # The post comes first, then its record: wait for the record.
    await wait_until(lambda: row(bot)["state"] == "delivered", timeout=10)
    assert row(bot)["service_job_id"] == job_id
    assert ledger(bot) == service.spend == 250
    assert service.creates_received == 1


async def test_status_hands_over_a_video_no_place_took_and_closed_dms_cost_one_log_line(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    channel = double.channel_ids[0]
    double.forbid_channel(channel)
    double.forbid_dm(USER_ID)  # 403 / 50007
    await bot.start()
    interaction = await video(bot, double, "a harbour nobody sees", channel)
    await wait_until(lambda: row(bot).get("state") == "undeliverable" and row(bot).get("told_at") is not None,
                     timeout=40)
    # The channel and the DMs refused: the requester was told through the interaction, which still lives.
    assert "/status #1" in (original(double, interaction).get("content") or "")
    kept = bot.workdir / "videos" / "1.mp4"
    assert kept.read_bytes() == DEFAULT_VIDEO_PATH.read_bytes()
    log = bot.log()
    assert "could not be delivered" in log and "Traceback" not in log, "closed DMs are an expected refusal: one line"

    status = await bot.slash("status", {"job_id": "#1"})
    await wait_until(lambda: row(bot).get("state") == "delivered", timeout=15)
    reply = original(double, status)
    assert "Here is the file" in embed_text(reply)
    assert reply["attachments_data"][0][1] == DEFAULT_VIDEO_PATH.read_bytes()
    assert not kept.exists(), "handed over: the bot's copy is removed"
    assert service.creates_received == 1 and ledger(bot) == 250
