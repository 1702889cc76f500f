"""The bot trusts nothing the service says: each misbehaviour of the simulator, through the real bot process.

Every test drives `python -m bot` against the Discord double and a misbehaving simulator, then checks
what reached Discord, what the service was asked, and what the bot wrote down (read-only from its database).
"""

import asyncio
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.frontend.i18n import t
from bot.service.key_budget import KEY_INFO_FRESH_SECONDS
from bot.simulator import DEFAULT_VIDEO_PATH, VideoServiceSimulator
from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess
from tests.e2e.test_video_flow import embed_text, original, video_posts, wait_until

JOBS = "/gateway/videos/jobs"
MIB = 1024 * 1024
MAX_DOWNLOAD = 100 * MIB  # WorkerConfig.max_download_bytes
POLL = 0.3  # the harness's POLL_INTERVAL_SECONDS
SAMPLE = DEFAULT_VIDEO_PATH.read_bytes()


# -- reading what happened ------------------------------------------------------------------------------


def rows(bot: BotProcess) -> list[dict[str, Any]]:
    """Every job row, oldest first, read without ever writing to the bot's database."""
    path = bot.workdir / "bot.sqlite3"
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM jobs ORDER BY id")]
    finally:
        db.close()


def row(bot: BotProcess, number: int = 1) -> dict[str, Any]:
    found = [r for r in rows(bot) if r["id"] == number]
    return found[0] if found else {}


def ledger(bot: BotProcess) -> int:
    return sum(r["charged_yen"] or 0 for r in rows(bot))


def paths(sim: VideoServiceSimulator) -> list[str]:
    return [path for _method, path, _headers in sim.requests_log]


def all_channel_messages(double: DiscordDouble) -> list[dict[str, Any]]:
    return [m for messages in double.messages.values() for m in messages]


def all_sent_messages(double: DiscordDouble) -> list[dict[str, Any]]:
    webhook = [m for by_id in double.webhook_messages.values() for key, m in by_id.items() if key != "@original"]
    return all_channel_messages(double) + webhook


def files_of(bot: BotProcess, number: int) -> list[Path]:
    """The job's video or partial download in the video folder (`{id}.mp4`, `.{id}.mp4.*.part`)."""
    folder = bot.workdir / "videos"
    if not folder.exists():
        return []
    return [p for p in folder.iterdir() if p.name == f"{number}.mp4" or p.name.startswith(f".{number}.mp4.")]


def assert_discord_limits(double: DiscordDouble) -> None:
    """Everything the double stored fits Discord's limits, and the double refused nothing as too long."""
    for message in all_sent_messages(double):
        assert len(message.get("content") or "") <= 2000
    assert not [r for r in double.requests if r.status == 400], "Discord refused a message"


async def video(bot: BotProcess, double: DiscordDouble, prompt: str, channel: int) -> Any:
    interaction = await bot.slash("video", {"prompt": prompt}, channel_id=channel)
    first = await double.wait_for_callback(interaction.id)
    assert first["time"] - interaction.created_at < 3.0
    return interaction


BEFORE_DOWNLOAD = (None, "received", "submitting", "pending", "in_progress", "completed")


async def first_download_failed(bot: BotProcess, *, timeout: float) -> None:
    """Until job #1 counted a failed download, or moved past `completed` (downloaded, delivered...)."""

    def settled() -> bool:
        job = row(bot)
        return (job.get("step_attempts") or 0) >= 1 or job.get("state") not in BEFORE_DOWNLOAD

    await wait_until(settled, timeout=timeout)


def reply_text(double: DiscordDouble, interaction: Any) -> str:
    return embed_text(original(double, interaction))


# -- 1. job ids -----------------------------------------------------------------------------------------


async def test_a_job_id_that_is_not_a_safe_path_segment_is_charged_failed_and_never_polled(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    long_id = "<@123>" + "a" * 4994
    service.force_next_job_ids("..", long_id)
    await bot.start()
    channel = double.channel_ids[0]
    dotdot = await video(bot, double, "a dotted id", channel)
    await wait_until(lambda: bool(reply_text(double, dotdot).strip()))
    long = await video(bot, double, "a very long id", channel)
    await wait_until(lambda: bool(reply_text(double, long).strip()))
    assert service.accepted_job_ids == ["..", long_id]

    # The requester hears it was charged, with the id escaped and shortened, through the interaction.
    first, second = reply_text(double, dotdot), reply_text(double, long)
    assert "#1" in first and "¥250" in first and "`'..'`" in first
    assert "#2" in second and "¥250" in second
    assert "a" * 100 not in second and "<@123>" not in second
    assert r"`'\x3c\x40123\x3eaaa" in second  # the id as support needs it: escaped, cut to 40 characters
    assert original(double, long)["mentions"] == [] and not original(double, long)["mention_everyone"]
    assert all(original(double, i)["flags"] & 64 for i in (dotdot, long))

    # Failed and charged in the bot's ledger, which matches the service's spend.
    await asyncio.sleep(5 * POLL)  # a few poll intervals, in which a poll of either id would show up
    assert [(r["state"], r["charged_yen"]) for r in rows(bot)] == [("failed", 250), ("failed", 250)]
    assert all(r["service_job_id"] is None for r in rows(bot))
    assert service.spend == 500 == ledger(bot)
    # Never polled, nor downloaded: no status request at all, none with an empty id.
    assert [p for p in paths(service) if p.startswith(JOBS)] == []
    assert service.status_requests == 0 and service.download_requests == 0
    assert video_posts(double, channel) == []
    assert_discord_limits(double)


# -- 2. foreign paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["other_job", "other_endpoint", "dotdot", "absolute"])
async def test_the_paths_the_service_sends_are_never_followed(
    mode: str, make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    elsewhere = await make_service()  # the "other host" of absolute paths, to see whether anything reaches it
    service = await make_service(foreign_base_url=elsewhere.base_url)
    bot = make_bot(service)
    await bot.start()
    channel = double.channel_ids[0]
    # A first, well-behaved job, so that "other_job" paths name a job that really exists.
    await video(bot, double, "an honest job", channel)
    await double.wait_for_message(channel, predicate=lambda m: bool(m.get("attachments_data")))
    before = len(service.requests_log)

    service.reconfigure(foreign_paths=mode)
    await video(bot, double, "a job with foreign paths", channel)
    await wait_until(lambda: len(video_posts(double, channel)) == 2, timeout=30)
    await asyncio.sleep(3 * POLL)

    own = service.accepted_job_ids[1]
    posted = video_posts(double, channel)[1]
    assert posted["attachments_data"][0][1] == SAMPLE
    assert own in posted["content"] and "#2" in posted["content"]
    # After its create, the service was asked only about this job, at the bot's own paths.
    after = paths(service)[before:]
    assert after[:2] == ["/key/info", "/gateway/videos/create"]
    asked = set(after[2:])
    assert asked <= {f"{JOBS}/{own}", f"{JOBS}/{own}/content?index=0"}
    assert f"{JOBS}/{own}/content?index=0" in asked
    assert elsewhere.requests_log == [] and elsewhere.storage_requests_log == []
    lines = [line for line in bot.log().splitlines() if "not following the paths" in line]
    assert len(lines) == 1 and "#2" in lines[0] and own in lines[0]


# -- 3. download bodies that are not the video ----------------------------------------------------------


CAUSES: dict[str, str | None] = {
    "html": "does not start with an 'ftyp' box",
    "json_error": "does not start with an 'ftyp' box",
    "not_mp4_bytes": "does not start with an 'ftyp' box",
    "empty": "the file is empty",
    "truncated": None,  # see test_a_truncated_download_names_the_short_body
}


@pytest.mark.parametrize("body", list(CAUSES))
async def test_a_download_that_is_not_an_mp4_is_never_posted_or_kept(
    body: str, make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    service = await make_service(download_body=body)
    bot = make_bot(service)
    await bot.start()
    channel = double.channel_ids[0]
    await video(bot, double, "a video that never arrives whole", channel)
    await first_download_failed(bot, timeout=30)
    await asyncio.sleep(3 * POLL)  # a few poll intervals, in which a wrong post would show up

    job = row(bot)
    assert job["state"] == "completed" and job["step_attempts"] >= 1
    assert job["last_error"].startswith("download failed:"), job["last_error"]
    cause = CAUSES[body]
    assert cause is None or cause in job["last_error"], job["last_error"]
    assert service.download_requests >= 1
    assert files_of(bot, 1) == []
    assert all_channel_messages(double) == []
    assert "download of #1 failed (attempt 1 of 6)" in bot.log()


async def test_a_truncated_download_names_the_short_body(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    """Half the file, then the connection closes: the reason says the body ended early, not "no answer"."""
    service = await make_service(download_body="truncated")
    bot = make_bot(service)
    await bot.start()
    await video(bot, double, "cut in half", double.channel_ids[0])
    await first_download_failed(bot, timeout=30)
    assert "early" in row(bot)["last_error"], row(bot)["last_error"]


# -- 4. oversized bodies --------------------------------------------------------------------------------


@pytest.mark.parametrize("send_length", [False, True], ids=["chunked", "content_length"])
async def test_an_oversized_download_is_stopped_at_the_cap(
    send_length: bool, make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    service = await make_service(download_oversize_bytes=300 * MIB, download_send_length=send_length)
    bot = make_bot(service)
    await bot.start()
    channel = double.channel_ids[0]
    await video(bot, double, "an endless video", channel)
    await first_download_failed(bot, timeout=60)
    await asyncio.sleep(3 * POLL)

    job = row(bot)
    assert job["state"] == "completed"
    assert len(service.bytes_served) >= 1
    served = service.bytes_served[0]
    # `bytes_served` counts what the simulator handed to its socket: what the bot read, plus at most what
    # the kernel's buffers held when the bot hung up (tcp_wmem + tcp_rmem, up to about 36 MiB here).
    if send_length:
        # Refused from the Content-Length, before reading the body.
        assert f"announces {300 * MIB} bytes" in job["last_error"], job["last_error"]
        assert served < 50 * MIB, served
    else:
        # Read up to the cap, then the connection was dropped: one chunk past it, by the bot's own count.
        match = re.search(rf"passed {MAX_DOWNLOAD} bytes \(the limit\) after (\d+) bytes", job["last_error"])
        assert match is not None, job["last_error"]
        assert MAX_DOWNLOAD < int(match[1]) <= MAX_DOWNLOAD + 64 * 1024
        assert MAX_DOWNLOAD < served < MAX_DOWNLOAD + 40 * MIB < 300 * MIB, served
    assert files_of(bot, 1) == []
    assert all_channel_messages(double) == []


# -- 5. duplicate job ids -------------------------------------------------------------------------------


async def test_a_job_id_given_twice_posts_one_video_and_tells_the_second_requester(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    channel = double.channel_ids[0]
    await video(bot, double, "the first request", channel)
    await wait_until(lambda: service.creates_accepted == 1)
    service.duplicate_next_job_id()
    second = await video(bot, double, "the second request", channel)
    await wait_until(lambda: bool(reply_text(double, second).strip()))
    assert service.accepted_job_ids[0] == service.accepted_job_ids[1]
    job_id = service.accepted_job_ids[0]

    text = reply_text(double, second)
    assert "charged" in text and "#2" in text and "#1" in text and job_id in text and "¥250" in text
    assert original(double, second)["flags"] & 64

    await double.wait_for_message(channel, predicate=lambda m: bool(m.get("attachments_data")))
    await asyncio.sleep(5 * POLL)  # time for a second post of the same file, if there were one
    posts = [m for m in all_channel_messages(double) if m.get("attachments_data")]
    assert len(posts) == 1 and "#1" in posts[0]["content"] and posts[0]["mentions"] == [USER_ID]
    first, dup = rows(bot)
    assert (first["state"], first["service_job_id"], first["charged_yen"]) == ("delivered", job_id, 250)
    assert (dup["state"], dup["service_job_id"], dup["charged_yen"]) == ("failed", None, 250)
    assert service.spend == 500 == ledger(bot)


# -- 6. key info ----------------------------------------------------------------------------------------


async def balance_reply(bot: BotProcess, double: DiscordDouble) -> dict[str, Any]:
    """The answer to one /balance, once it replaced the "thinking…" placeholder."""
    interaction = await bot.slash("balance")
    await wait_until(lambda: bool(reply_text(double, interaction).strip()))
    return original(double, interaction)


UNREADABLE_KEY_INFO: dict[str, dict[str, Any]] = {
    "negative spend": {"key_info_payload": {"info": {"spend": -5, "max_budget": 10_000}}},
    "spend as a string": {"key_info_payload": {"info": {"spend": "250", "max_budget": 10_000}}},
    "no info": {"key_info_payload": {"key": "sk-...abcd"}},
    "absurd spend": {"key_info_payload": {"info": {"spend": 1e30, "max_budget": 10_000}}},
    "null body": {"key_info_raw_body": "null"},
    "broken json": {"key_info_raw_body": "{broken"},
}


async def test_balance_shows_no_figures_from_unreadable_key_info_and_video_spends_nothing(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    unreadable = t("en-US", "error.key_info_unreadable")
    await bot.start()
    for name, config in UNREADABLE_KEY_INFO.items():
        service.reconfigure(key_info_payload=None, key_info_raw_body=None)
        service.reconfigure(**config)
        reply = await balance_reply(bot, double)
        assert reply["content"] == unreadable, name
        assert reply["embeds"] == [] and "¥" not in embed_text(reply), name
        assert reply["flags"] & 64

    # A /video while key info is unreadable: nothing is sent, nothing spent, the requester is told so.
    interaction = await video(bot, double, "no budget figures", double.channel_ids[0])
    await wait_until(lambda: "Nothing was charged" in reply_text(double, interaction))
    assert service.creates_received == 0 and service.spend == 0
    assert "/gateway/videos/create" not in paths(service)
    assert row(bot)["state"] == "rejected" and row(bot)["charged_yen"] == 0
    assert_discord_limits(double)


async def test_balance_rounds_a_fractional_spend_up_and_shows_a_null_budget_as_no_budget_set(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    service.reconfigure(key_info_payload={"info": {"spend": 1250.4, "max_budget": 10_000}})
    text = embed_text(await balance_reply(bot, double))
    assert "Spent: ¥1,251" in text and "Budget: ¥10,000" in text and "Available: ¥8,749" in text

    service.reconfigure(key_info_payload={"info": {"spend": 250, "max_budget": None}})
    await asyncio.sleep(KEY_INFO_FRESH_SECONDS)  # the first answer serves /balance that long
    text = embed_text(await balance_reply(bot, double))
    assert "Spent: ¥250" in text and "Budget: no budget set" in text and "Available: no budget set" in text
    assert "Videos left: no budget set" in text


# -- 7. redirects ---------------------------------------------------------------------------------------


async def test_a_download_redirected_to_another_host_is_followed_without_the_key(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    storage = await make_service()
    service = await make_service(download_redirect=storage.base_url)
    bot = make_bot(service)
    await bot.start()
    channel = double.channel_ids[0]
    await video(bot, double, "a video kept elsewhere", channel)
    posted = await double.wait_for_message(channel, predicate=lambda m: bool(m.get("attachments_data")))
    assert posted["attachments_data"][0][1] == SAMPLE

    job_id = service.accepted_job_ids[0]
    assert [path for _m, path, _h in storage.storage_requests_log] == [f"/storage/{job_id}"]
    for _method, _path, headers in storage.storage_requests_log:
        assert "authorization" not in {name.lower() for name in headers}
    assert storage.requests_log == []  # nothing reached the other host's service endpoints
    assert service.storage_requests_log == []


async def test_a_redirected_status_is_not_followed_and_nothing_is_posted_meanwhile(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    other = await make_service()
    service = await make_service(download_redirect=other.base_url, status_redirect=True)
    bot = make_bot(service)
    await bot.start()
    channel = double.channel_ids[0]
    await video(bot, double, "a job whose status moved", channel)
    await wait_until(lambda: service.status_requests >= 3, timeout=30)
    await wait_until(lambda: next(iter(service.jobs.values())).status == "completed")
    await asyncio.sleep(3 * POLL)  # polls after the job completed: still redirected, still not followed

    assert other.requests_log == [] and other.storage_requests_log == []
    assert all_channel_messages(double) == []
    job = row(bot)
    assert job["state"] == "pending" and "redirect" in (job["last_error"] or ""), job

    # Once the service answers plainly again, the video arrives.
    service.reconfigure(status_redirect=False, download_redirect=None)
    posted = await double.wait_for_message(channel, predicate=lambda m: bool(m.get("attachments_data")))
    assert posted["attachments_data"][0][1] == SAMPLE


# -- 8. slow bodies -------------------------------------------------------------------------------------


async def test_a_trickling_download_does_not_hold_up_other_jobs(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    """The client's download timeout is 600 s in total, with 2 s (HTTP_TIMEOUT_SECONDS) between bytes:
    `bot/app.py` passes no setting for the total, so a body that trickles steadily is not given up on
    within a test. What the test can show is that the worker keeps going meanwhile."""
    await bot.start()
    channel = double.channel_ids[0]
    service.reconfigure(download_bytes_per_second=2_000.0)  # the sample would take about two minutes
    await video(bot, double, "a trickle", channel)
    await wait_until(lambda: len(service.bytes_served) == 1 and service.bytes_served[0] > 0, timeout=30)

    service.reconfigure(download_bytes_per_second=None)  # read per download: the first one keeps trickling
    await video(bot, double, "at full speed", channel)
    posted = await double.wait_for_message(channel, predicate=lambda m: bool(m.get("attachments_data")))
    assert "#2" in posted["content"] and posted["attachments_data"][0][1] == SAMPLE

    assert service.bytes_served[0] < len(SAMPLE)  # the first is still under way
    first = row(bot, 1)
    assert first["state"] == "completed" and first["step_attempts"] == 0
    assert len(video_posts(double, channel)) == 1
    assert [p for p in files_of(bot, 1) if p.name.endswith(".mp4")] == []


# -- 9. service text shown in Discord -------------------------------------------------------------------


LOUD = "@everyone <@123> <@&456> **bold** `code` @here "


async def rejected_reply(bot: BotProcess, double: DiscordDouble, reason: str) -> dict[str, Any]:
    bot.simulator.inject("create", 400, body={"error": {"message": reason}})
    interaction = await video(bot, double, "refused with a loud reason", double.channel_ids[0])
    await wait_until(lambda: "did not accept" in (original(double, interaction).get("content") or ""))
    return original(double, interaction)


def assert_pings_nobody(reply: dict[str, Any]) -> None:
    content = reply["content"]
    assert reply["flags"] & 64
    assert len(content) <= 2000 and "x" * 400 not in content
    for loud in ("@everyone", "@here", "<@123>", "<@&456>", "**bold**", "`code`"):
        assert loud not in content, loud
    assert reply["mentions"] == [] and reply["mention_roles"] == [] and not reply["mention_everyone"]
    assert "Nothing was charged" in content


async def test_a_rejection_reason_from_the_service_is_shortened_and_pings_nobody(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    # 5,000 characters: more than the client reads of an error body (4 KiB); its first part shows, cut short.
    huge = await rejected_reply(bot, double, LOUD + "x" * 5000)
    assert_pings_nobody(huge)
    assert "everyone" in huge["content"] and "x" * 100 in huge["content"]
    # 3,000 characters: read, cut to 300 characters, and shown as plain words.
    long = await rejected_reply(bot, double, LOUD + "x" * 3000)
    assert_pings_nobody(long)
    assert "everyone" in long["content"] and "123" in long["content"] and "x" * 200 in long["content"]

    assert service.spend == 0 and service.creates_accepted == 0
    assert [r["state"] for r in rows(bot)] == ["rejected", "rejected"]
    assert all_channel_messages(double) == []
    assert_discord_limits(double)
