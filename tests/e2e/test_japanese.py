"""A Japanese-speaking member through /video, /status and /balance, against the real bot process."""

from typing import Any

from bot.simulator import VideoServiceSimulator
from tests.discord_double import DiscordDouble
from tests.e2e.harness import BotProcess
from tests.e2e.test_video_flow import embed_text, original, wait_until


async def test_japanese_member_is_answered_in_japanese(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    commands: list[dict[str, Any]] = double.synced_commands[double.guild_id]
    video = next(c for c in commands if c["name"] == "video")
    assert "250円" in video["description_localizations"]["ja"]
    assert "¥250" in video["description"]
    assert all("ja" in option["description_localizations"] for option in video["options"])

    channel = double.channel_ids[0]
    interaction = await bot.slash("video", {"prompt": "桜の下の猫"}, channel_id=channel, locale="ja")
    await wait_until(lambda: "動画リクエスト #1" in embed_text(original(double, interaction)))
    assert "250円" in embed_text(original(double, interaction))
    posted = await double.wait_for_message(channel, timeout=30, predicate=lambda m: bool(m.get("attachments_data")))
    assert "動画 #1 ができました" in posted["content"] and "250円" in posted["content"]

    status = await bot.slash("status", {"job_id": "#1"}, locale="ja")
    reply = await double.wait_for_callback(status.id)
    assert "リクエスト #1" in embed_text(reply["data"]) and "桜の下の猫" in embed_text(reply["data"])

    balance = await bot.slash("balance", locale="ja")
    await wait_until(lambda: "共有動画予算" in embed_text(original(double, balance)))
    text = embed_text(original(double, balance))
    assert "使用済み: 250円" in text and "残り: 9,750円" in text

    english = await bot.slash("balance", locale="en-US")
    await wait_until(lambda: "Shared video budget" in embed_text(original(double, english)))
    assert "Available: ¥9,750" in embed_text(original(double, english))
