"""`docker stop` (SIGTERM) with /video requests in flight: each ends with its true answer before the bot goes."""

import signal
from collections.abc import Callable

from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import BotProcess, job_rows
from tests.e2e.test_video_flow import embed_text, original, wait_until


async def test_a_stop_while_a_create_is_on_its_way_records_the_job_and_tells_its_requester(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    """The create was accepted (charged) and its answer is still coming: the bot waits for it, so the job is
    recorded for polling after the restart, not reported as possibly charged."""
    service = await make_service()
    bot = make_bot(service)
    await bot.start()
    service.hang_next_create(1.0)  # accepted and charged now, answered a second later
    interaction = await bot.slash("video", {"prompt": "a kite over the dunes"})
    await wait_until(lambda: service.creates_accepted == 1)
    assert await bot.stop(signal.SIGTERM) == 0
    assert "closed cleanly" in bot.log() and "Traceback" not in bot.log()
    assert "full garbage collections on the bot's schedule" in bot.log(), "set-up handed them to FullCollections"
    (job_id,) = service.accepted_job_ids
    (row,) = job_rows(bot.workdir / "bot.sqlite3")
    assert (row["state"], row["service_job_id"], row["charged_yen"]) == ("pending", job_id, 250)
    receipt = embed_text(original(double, interaction))
    assert "#1" in receipt and "¥250" in receipt and job_id in receipt
    # After the restart it is polled and posted like any other.
    await bot.start()
    await double.wait_for_message(double.channel_ids[0], timeout=30,
                                  predicate=lambda m: bool(m.get("attachments_data")))
    assert service.creates_received == 1


async def test_a_stop_while_a_request_waits_for_its_turn_tells_its_requester_it_was_not_sent(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> None:
    service = await make_service()
    # One request every 5 s: the budget read goes now, the create's turn would come 5 s later.
    bot = make_bot(service, MAX_REQUESTS_PER_SECOND="0.2")
    await bot.start()
    interaction = await bot.slash("video", {"prompt": "a lighthouse in fog"})
    await wait_until(lambda: service.key_info_requests == 1)
    assert await bot.stop(signal.SIGTERM) == 0
    assert "closed cleanly" in bot.log() and "Traceback" not in bot.log()
    assert service.creates_received == 0
    (row,) = job_rows(bot.workdir / "bot.sqlite3")
    assert (row["state"], row["charged_yen"]) == ("interrupted", 0)
    assert row["told_at"] is not None  # told now, through the interaction: nothing left for a restart to say
    text = embed_text(original(double, interaction)) + "".join(
        m.get("content") or "" for m in double.webhook_messages.get(interaction.token, {}).values())
    assert "restarting" in text and "#1" in text and "¥0" in text
