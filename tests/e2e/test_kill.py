"""Kill -9 the real bot at a random instant during a burst of /video requests, restart it, check the money.

For each seed: 12 concurrent `/video` requests with unique prompts, a SIGKILL at an instant drawn from the
seed (uniform over the first 3 s, the window in which the burst is created, polled, downloaded and
posted), sometimes a second SIGKILL after the restart, then a last restart and a bounded wait until every
request is settled. Then:

* no create sent twice: per prompt, the service parsed at most one create (the simulator's
  `_process_create` is wrapped to record the prompt of every create body it reads, accepted or not);
* no video lost whose 202 the bot received: every job the service accepted was posted (an MP4 in the
  channel or a DM) or its request ended `unknown`;
* no requester without a final message: every row is `delivered` or has `told_at`; every /video
  interaction without a row was never acknowledged (killed before it was written down);
* the ledger reconciles: sum(charged_yen) <= service spend <= sum(charged_yen) + 250 * unknown rows.

Three seeds by default (1, 2, 3). For more, e.g. 20 seeds (1..20) from the repository root:

    KILL_SEEDS=20 .venv/bin/python -m pytest tests/e2e/test_kill.py

`KILL_SEEDS` is either a count N (seeds 1..N) or a comma-separated list of seeds ("7,11").
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from bot.simulator import VideoServiceSimulator
from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess, job_rows

REQUESTS = 12
PRICE_YEN = 250
KILL_WINDOW_SECONDS = 3.0
SETTLE_TIMEOUT_SECONDS = 60.0
# A request the bot has finished with: nothing more will be sent or charged for it.
FINAL_STATES = frozenset({"delivered", "failed", "stalled", "rejected", "unknown", "interrupted", "undeliverable"})


def _seeds(default: int = 3) -> list[int]:
    raw = os.environ.get("KILL_SEEDS", str(default)).strip()
    if "," in raw:
        return [int(part) for part in raw.split(",") if part.strip()]
    return list(range(1, int(raw) + 1))


def _prompt(seed: int, index: int) -> str:
    return f"kill-test seed {seed} request {index}"


def _record_create_prompts(service: VideoServiceSimulator) -> list[str | None]:
    """Every create body the service reads, by prompt (None: the body never arrived whole or had none).

    `_handle_create` looks `_process_create` up on the instance at call time, so wrapping it here sees
    each create that reaches the service's parser, whether it is then accepted or refused.
    """
    prompts: list[str | None] = []
    process: Callable[[web.Request], Awaitable[web.Response]] = service._process_create

    async def recording(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.text())  # aiohttp caches the body for the real handler
        except Exception:  # a client killed mid-body: recorded as unreadable, then handled as usual
            body = None
        prompt = body.get("prompt") if isinstance(body, dict) else None
        prompts.append(prompt if isinstance(prompt, str) else None)
        return await process(request)

    service._process_create = recording  # type: ignore[method-assign]
    return prompts


def _settled(rows: list[dict[str, Any]]) -> bool:
    """Every request is final and told. No row is left `submitting`, so no 202 is still being recorded."""
    return all(row["state"] in FINAL_STATES and (row["state"] == "delivered" or row["told_at"] is not None)
               for row in rows)


def _brief(rows: list[dict[str, Any]]) -> list[tuple[int, str, str | None, bool]]:
    return [(row["id"], row["state"], row["service_job_id"], row["told_at"] is not None) for row in rows]


def _posted_videos(double: DiscordDouble) -> dict[str, dict[str, Any]]:
    """Every message with an MP4 attachment, in a channel or a DM, by message id."""
    return {
        str(message["id"]): message
        for messages in double.messages.values()
        for message in messages
        if any(name.endswith(".mp4") for name, _data in message.get("attachments_data") or [])
    }


def _log_tail(bot: BotProcess, lines: int = 60) -> str:
    """The bot's last log lines without the database driver's chatter."""
    return "\n".join([line for line in bot.log().splitlines() if "aiosqlite" not in line][-lines:])


@pytest.mark.parametrize("seed", _seeds())
async def test_kill_minus_nine_loses_no_money_no_video_and_no_requester(
    seed: int,
    make_bot: Callable[..., BotProcess],
    make_service: ServiceFactory,
    double: DiscordDouble,
) -> None:
    rng = random.Random(seed)
    service = await make_service(seed=seed)
    create_prompts = _record_create_prompts(service)
    bot = make_bot(service)
    database = bot.workdir / "bot.sqlite3"
    channel = double.channel_ids[0]
    await bot.start()

    kills = [rng.uniform(0.0, KILL_WINDOW_SECONDS)]
    if rng.random() < 0.5:
        kills.append(rng.uniform(0.0, KILL_WINDOW_SECONDS))
    prompts = [_prompt(seed, i) for i in range(REQUESTS)]
    interactions = await asyncio.gather(*(
        bot.slash("video", {"prompt": prompt}, channel_id=channel) for prompt in prompts
    ))
    await asyncio.sleep(kills[0])
    assert await bot.stop(signal.SIGKILL) == -signal.SIGKILL
    accepted_before_kill, posted_before_kill = len(service.accepted_job_ids), len(_posted_videos(double))
    for delay in kills[1:]:
        await bot.start()
        await asyncio.sleep(delay)
        assert await bot.stop(signal.SIGKILL) == -signal.SIGKILL
    await bot.start()

    try:
        async with asyncio.timeout(SETTLE_TIMEOUT_SECONDS):
            while not _settled(job_rows(database)):
                await asyncio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"seed {seed}: not settled within {SETTLE_TIMEOUT_SECONDS} s; rows {_brief(job_rows(database))}\n"
                    f"{_log_tail(bot)}")
    await asyncio.sleep(0.5)  # time for a duplicate create or post to show up, if there were one
    assert await bot.stop(signal.SIGTERM) == 0, _log_tail(bot)
    rows = job_rows(database)
    by_prompt = {row["prompt"]: row for row in rows}
    states = Counter(row["state"] for row in rows)
    charged = sum(row["charged_yen"] for row in rows)
    videos = _posted_videos(double)
    context = f"seed {seed}, kills at {[round(k, 2) for k in kills]} s, states {dict(states)}"
    print(f"\n{context}: accepted {len(service.accepted_job_ids)}, creates {service.creates_received}, "
          f"videos posted {len(videos)} ({posted_before_kill} before the first kill, "
          f"{accepted_before_kill} accepted by then), spend {service.spend} yen, ledger {charged} yen")

    # Nothing but the burst reached the bot, and each prompt was written down at most once.
    assert set(by_prompt) <= set(prompts) and len(by_prompt) == len(rows), context

    # 0 creates sent twice. Every create the service got was read whole (none cut off by the kill).
    assert len(create_prompts) == service.creates_received, context
    sent_twice = [p for p, n in Counter(create_prompts).items() if n > 1]
    assert sent_twice == [], f"{context}: creates sent twice {sent_twice}\n{_log_tail(bot)}"
    assert all(prompt in by_prompt for prompt in create_prompts), f"{context}: a create without a row"
    assert len(service.accepted_job_ids) == len(set(service.accepted_job_ids)), context

    # 0 videos lost whose 202 the bot received: posted (the row says where, the double has it) or unknown.
    by_job_id = {row["service_job_id"]: row for row in rows if row["service_job_id"]}
    for job_id in service.accepted_job_ids:
        prompt = service.jobs[job_id].prompt
        row = by_job_id.get(job_id) or by_prompt[prompt]
        if row["state"] == "unknown":
            continue
        assert row["service_job_id"] == job_id and row["state"] == "delivered", f"{context}: {row}"
        assert str(row["delivered_message_id"]) in videos, f"{context}: {row} not posted"
        assert videos[str(row["delivered_message_id"])]["mentions"] == [USER_ID], context
    assert len(videos) == states["delivered"], f"{context}: {len(videos)} videos posted"

    # 0 requesters without a final message.
    untold = [row for row in rows if row["state"] != "delivered" and row["told_at"] is None]
    assert untold == [], f"{context}: never told {untold}\n{_log_tail(bot)}"
    assert all(row["state"] in FINAL_STATES for row in rows), context
    tokens = {row["interaction_token"] for row in rows}
    for interaction, prompt in zip(interactions, prompts, strict=True):
        if interaction.token in tokens:
            continue
        # Killed before it was written down: it must never have been acknowledged either.
        callbacks = double.interaction_responses.get(interaction.id, [])
        assert not any(c["accepted"] for c in callbacks), f"{context}: {prompt} acknowledged without a row"
        assert prompt not in create_prompts, f"{context}: {prompt} sent without a row"

    # The ledger reconciles with the service's spend.
    assert charged <= service.spend <= charged + PRICE_YEN * states["unknown"], (
        f"{context}: spend {service.spend} yen, ledger {charged} yen"
    )
