"""Every 202 is a charge, and a download goes to no host of the host's own network: the real bot process, the
Discord double and the simulator, one bot for both checks.

1. The service accepts (and charges) a create but its answer cannot be read: the requester is told it was charged,
   with the reference and the time for support, and /usage and the ledger show the charge the service made.
2. A download is redirected to another loopback address (127.0.0.2; the service is on 127.0.0.1, its own host is
   followed): nothing is asked of it, and no byte of its answer reaches a member or the job's failure reason.
"""

from __future__ import annotations

import time

from bot.service.transport import REDIRECT_REFUSED
from bot.simulator import SimulatorConfig, VideoServiceSimulator
from tests.conftest import SIM_KEY
from tests.discord_double import DiscordDouble
from tests.e2e.harness import BotProcess
from tests.e2e.test_untrusted_service import all_sent_messages, row, video
from tests.e2e.test_usage import fields, reply_to
from tests.e2e.test_video_flow import embed_text, original, wait_until

SECRET_PAGE = "<!DOCTYPE html>"  # what the simulator's storage serves for download_body="html"


async def test_an_unreadable_202_is_charged_and_told_and_an_internal_redirect_is_refused_unquoted(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    channel = double.channel_ids[0]

    # -- 1. a 202 whose body cannot be read
    service.reconfigure(create_raw_body="{broken")
    charged = await video(bot, double, "a lighthouse in fog", channel)
    await wait_until(lambda: "charged" in embed_text(original(double, charged)))
    service.reconfigure(create_raw_body=None)
    first = row(bot, 1)
    assert (first["state"], first["charged_yen"], first["service_job_id"]) == ("failed", 250, None)
    at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(first["accepted_at"]))
    text = embed_text(original(double, charged))
    assert f"Request #1 was accepted and charged ¥250 at `{at}`" in text and "will not be resent" in text
    assert original(double, charged)["flags"] & 64  # privately
    assert service.creates_received == 1 and service.spend == 250

    # -- 2. a download redirected to another address of the host's own network
    storage = VideoServiceSimulator(SimulatorConfig(api_key=SIM_KEY, download_body="html"))
    await storage.start(host="127.0.0.2")
    try:
        service.reconfigure(download_redirect=storage.base_url)
        await video(bot, double, "a harbour at dusk", channel)
        await wait_until(lambda: (row(bot, 2).get("step_attempts") or 0) >= 1, timeout=30)
    finally:
        await storage.stop()
    second = row(bot, 2)
    assert second["last_error"] == f"download failed: {REDIRECT_REFUSED}"
    assert storage.storage_requests_log == [] and storage.requests_log == []  # never asked
    assert "not followed" in bot.log()  # the operator's log names the host

    # -- /usage: the ledger holds both charges, as the service made them
    usage = await reply_to(double, bot, "usage", {"period": "today"})
    shown = fields(usage)
    assert shown["Spent (ledger)"] == "¥500" == f"¥{service.spend:,}"
    assert shown["Failed"] == "1"
    assert "#1" in embed_text(usage)
    for message in [*all_sent_messages(double), usage]:
        assert SECRET_PAGE not in str(message) and "DOCTYPE" not in str(message)
