"""The product as a user meets it: the real bot process, a local Discord, the service simulator."""

import asyncio
import signal
from collections.abc import Callable
from typing import Any

from bot.service.transport import mask_key
from bot.simulator import DEFAULT_VIDEO_PATH, VideoServiceSimulator
from tests.conftest import SIM_KEY
from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess


def original(double: DiscordDouble, interaction: Any) -> dict[str, Any]:
    return double.webhook_messages.get(interaction.token, {}).get("@original", {})


def embed_text(message: dict[str, Any]) -> str:
    parts = [message.get("content") or ""]
    for embed in message.get("embeds") or []:
        parts += [embed.get("title") or "", embed.get("description") or ""]
        parts += [f"{field['name']}: {field['value']}" for field in embed.get("fields", [])]
    return "\n".join(parts)


def video_posts(double: DiscordDouble, channel: int) -> list[dict[str, Any]]:
    return [m for m in double.messages.get(channel, []) if m.get("attachments_data")]


async def wait_until(condition: Callable[[], bool], timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)


async def test_video_is_acknowledged_created_once_and_posted_in_the_channel(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    channel = double.channel_ids[1]
    interaction = await bot.slash("video", {"prompt": "@everyone a paper boat on a lake", "seed": 5},
                                  channel_id=channel)
    first = await double.wait_for_callback(interaction.id)
    assert first["time"] - interaction.created_at < 3.0
    message = await double.wait_for_message(channel, timeout=30, predicate=lambda m: bool(m.get("attachments_data")))
    assert service.creates_accepted == 1 and service.creates_received == 1
    ((_name, data),) = message["attachments_data"]
    assert data == DEFAULT_VIDEO_PATH.read_bytes()
    assert "¥250" in message["content"]
    assert message["mentions"] == [USER_ID]
    assert not message["mention_everyone"]
    assert video_posts(double, double.channel_ids[0]) == []
    # The private receipt names the job and its cost, and is edited on to "delivered".
    await wait_until(lambda: "delivered" in embed_text(original(double, interaction)))
    receipt = embed_text(original(double, interaction))
    assert "#1" in receipt and "¥250" in receipt and next(iter(service.jobs)) in receipt
    assert double.unknown_routes == []
    # Healthy while running; SIGTERM (docker stop) closes everything cleanly.
    assert (bot.workdir / "heartbeat").exists()
    assert await bot.stop(signal.SIGTERM) == 0
    assert "closed cleanly" in bot.log() and "Traceback" not in bot.log()


async def test_balance_shows_the_figures_and_a_masked_key(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    service = await make_service(max_budget=10_000, echo_raw_key=True)
    bot = make_bot(service)
    await bot.start()
    video = await bot.slash("video", {"prompt": "a windmill"})
    await double.wait_for_callback(video.id)
    await wait_until(lambda: service.spend == 250)
    interaction = await bot.slash("balance")
    await wait_until(lambda: "Available" in embed_text(original(double, interaction)))
    text = embed_text(original(double, interaction))
    assert "Spent: ¥250" in text and "Budget: ¥10,000" in text and "Available: ¥9,750" in text
    assert "39 at ¥250" in text
    assert f"…{SIM_KEY[-4:]}" in text and SIM_KEY not in text
    assert original(double, interaction)["flags"] & 64  # ephemeral


async def test_status_for_a_known_and_an_unknown_id(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    video = await bot.slash("video", {"prompt": "a lantern festival"})
    await double.wait_for_callback(video.id)
    await wait_until(lambda: service.creates_accepted == 1)
    job_id = next(iter(service.jobs))
    known = await bot.slash("status", {"job_id": job_id})
    reply = await double.wait_for_callback(known.id)
    text = embed_text(reply["data"])
    assert "Request #1" in text and job_id in text and "a lantern festival" in text
    assert reply["data"]["flags"] & 64
    suggest = await double.send_autocomplete("status", "job_id", "lantern")
    choices = (await double.wait_for_callback(suggest.id))["data"]["choices"]
    assert [c["value"] for c in choices] == ["#1"] and "a lantern festival" in choices[0]["name"]
    unknown = await bot.slash("status", {"job_id": "#999"})
    reply = await double.wait_for_callback(unknown.id)
    assert "No request `#999`" in reply["data"]["content"] and reply["data"]["flags"] & 64


async def test_killed_while_pending_then_restarted_posts_exactly_once(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    service = await make_service(job_seconds=3.0)
    bot = make_bot(service)
    await bot.start()
    channel = double.channel_ids[0]
    interaction = await bot.slash("video", {"prompt": "a comet over mountains"}, channel_id=channel)
    await double.wait_for_callback(interaction.id)
    await wait_until(lambda: service.creates_accepted == 1)
    assert await bot.stop(signal.SIGKILL) == -signal.SIGKILL
    assert video_posts(double, channel) == []
    await bot.start()
    await double.wait_for_message(channel, timeout=30, predicate=lambda m: bool(m.get("attachments_data")))
    await asyncio.sleep(1.0)  # time for a duplicate to show up, if there were one
    assert len(video_posts(double, channel)) == 1
    assert service.creates_received == 1 and service.spend == 250


async def test_a_create_that_times_out_is_never_resent(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    service.hang_next_create(seconds=30)
    await bot.start()
    interaction = await bot.slash("video", {"prompt": "a slow answer"})
    await wait_until(lambda: "not be resent" in embed_text(original(double, interaction)))
    await asyncio.sleep(1.5)
    assert service.creates_received == 1
    status = await bot.slash("status", {"job_id": "#1"})
    reply = await double.wait_for_callback(status.id)
    assert "outcome unknown" in embed_text(reply["data"])


async def test_a_forbidden_channel_falls_back_to_a_dm(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    channel = double.channel_ids[0]
    double.forbid_channel(channel)
    await bot.start()
    await bot.slash("video", {"prompt": "a quiet harbour"}, channel_id=channel)
    dm = await double.wait_for_dm(USER_ID, timeout=30, predicate=lambda m: bool(m.get("attachments_data")))
    assert dm["attachments_data"][0][1] == DEFAULT_VIDEO_PATH.read_bytes()
    assert f"<#{channel}>" in dm["content"]
    assert video_posts(double, channel) == []


async def test_a_failed_job_is_reported_with_its_id(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    service = await make_service(fail_rate=1.0, job_seconds=0.5)
    bot = make_bot(service)
    await bot.start()
    channel = double.channel_ids[0]
    await bot.slash("video", {"prompt": "a doomed render"}, channel_id=channel)
    message = await double.wait_for_message(channel, timeout=30, predicate=lambda m: "failed" in m["content"])
    job_id = next(iter(service.jobs))
    assert job_id in message["content"] and "service credit" in message["content"]
    assert message["mentions"] == [USER_ID]
    await asyncio.sleep(1.0)
    assert service.creates_received == 1


async def test_the_api_key_appears_nowhere(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    service = await make_service(echo_raw_key=True)
    bot = make_bot(service)
    await bot.start()
    channel = double.channel_ids[0]
    await bot.slash("video", {"prompt": "a lighthouse"}, channel_id=channel)
    await bot.slash("balance")
    await double.wait_for_message(channel, timeout=30, predicate=lambda m: bool(m.get("attachments_data")))
    service.inject("create", 401, body={"error": {"message": f"bad key {SIM_KEY}"}})
    rejected = await bot.slash("video", {"prompt": "refused"})
    await double.wait_for_callback(rejected.id)
    await wait_until(lambda: bool(original(double, rejected).get("content")))
    await bot.stop()
    sent = [repr(r.json) + repr(r.headers) + r.path for r in double.requests]
    sent += [repr(m) for messages in double.messages.values() for m in messages]
    sent += [repr(m) for messages in double.webhook_messages.values() for m in messages.values()]
    assert sent and all(SIM_KEY not in text for text in sent)
    # A final 4xx's reason is shown to the requester (design: told why): here with the key masked, which
    # proves the key was redacted on its way, not merely absent.
    assert f"bad key {mask_key(SIM_KEY)}" in original(double, rejected)["content"]
    assert SIM_KEY not in bot.log()


async def test_commands_sync_only_when_changed_and_sync_forces_it(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    def puts() -> int:
        return sum(1 for r in double.requests if r.method == "PUT" and "/commands" in r.path)

    await bot.start()
    assert puts() == 1
    assert await bot.stop() == 0
    await bot.start()
    assert puts() == 1 and "slash commands unchanged" in bot.log()
    assert await bot.stop() == 0
    await bot.start("sync")
    assert await bot.wait_exit() == 0
    assert puts() == 2
    synced = {c["name"] for c in double.synced_commands[double.guild_id]}
    assert synced == {"video", "status", "balance", "usage", "credit", "settings"}


async def test_killed_while_sending_the_create_is_told_and_never_resent(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    service.hang_next_create(seconds=30)
    await bot.start()
    channel = double.channel_ids[0]
    interaction = await bot.slash("video", {"prompt": "cut off mid-flight"}, channel_id=channel)
    await wait_until(lambda: service.creates_received == 1)
    assert await bot.stop(signal.SIGKILL) == -signal.SIGKILL
    await bot.start()
    # Its interaction still lives: the requester is told there, in place of "thinking…".
    await wait_until(lambda: "being sent when the bot stopped" in (original(double, interaction).get("content") or ""))
    notice = original(double, interaction)
    assert "#1" in notice["content"] and "will not be resent" in notice["content"]
    status = await bot.slash("status", {"job_id": "#1"})
    assert "outcome unknown" in embed_text((await double.wait_for_callback(status.id))["data"])
    await asyncio.sleep(1.0)
    assert service.creates_received == 1
