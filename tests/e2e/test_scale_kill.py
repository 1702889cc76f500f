"""Two bot processes, one shard each, on one PostgreSQL database: kill -9 one of them, and the other finishes.

For each seed: 12 concurrent `/video` requests, half from a server on each shard, then a SIGKILL of one
process (drawn from the seed) at an instant drawn from the seed over the first 3 s. The dead host's disk
goes with it (its videos folder is removed), and it is never restarted: the survivor must take over its
jobs once their leases expire (LEASE_SECONDS=2), download again what was on the dead disk, and tell
every requester. Then, as in test_kill.py:

* 0 creates sent twice (the simulator records the prompt of every create body it reads);
* 0 accepted videos lost: every job the service accepted was posted once, or its request ended `unknown`;
* every requester told: each row is `delivered` or has `told_at`; an interaction without a row was never
  acknowledged;
* the ledger equals the service's charges: sum(charged_yen) <= spend <= sum(charged_yen) + 250 * unknown.

Two seeds by default; more with e.g. `KILL_SEEDS=20 .venv/bin/python -m pytest tests/e2e/test_scale_kill.py`.
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess
from tests.e2e.test_kill import (
    PRICE_YEN,
    _posted_videos,
    _record_create_prompts,
    _seeds,
    _settled,
)
from tests.e2e.test_shards import SHARDS, double, guild_on, sharded_bot

__all__ = ["double"]  # the two-shard double of test_shards.py, used here as this module's `double` fixture

REQUESTS = 12
KILL_WINDOW_SECONDS = 3.0
LEASE_SECONDS = 2
SETTLE_TIMEOUT_SECONDS = 60.0


async def _rows(url: str) -> list[dict[str, Any]]:
    connection = await asyncpg.connect(url)
    try:
        return [dict(row) for row in await connection.fetch(
            "SELECT id, state, prompt, service_job_id, charged_yen, told_at, interaction_token, lease_owner,"
            " delivered_channel_id, delivered_message_id FROM jobs ORDER BY id"
        )]
    finally:
        await connection.close()


@pytest.mark.parametrize("seed", _seeds(default=2))
async def test_kill_minus_nine_of_one_process_the_other_finishes_its_jobs(
    seed: int,
    make_bot: Callable[..., BotProcess],
    make_service: ServiceFactory,
    double: DiscordDouble,
    tmp_path: Path,
    postgres_url: str,
) -> None:
    rng = random.Random(seed)
    service = await make_service(seed=seed)
    create_prompts = _record_create_prompts(service)
    bots = [sharded_bot(make_bot, service, tmp_path / f"shard-{shard}", postgres_url, SHARD_IDS=str(shard),
                        LEASE_SECONDS=str(LEASE_SECONDS))
            for shard in range(SHARDS)]
    for bot in bots:
        await bot.start()

    victim = rng.randrange(SHARDS)
    kill_at = rng.uniform(0.0, KILL_WINDOW_SECONDS)
    prompts = [f"scale kill seed {seed} request {i}" for i in range(REQUESTS)]
    guilds = [guild_on(double, i % SHARDS) for i in range(REQUESTS)]
    interactions = await asyncio.gather(*(
        double.send_slash_command("video", {"prompt": prompt}, guild_id=guild, user_id=USER_ID)
        for prompt, guild in zip(prompts, guilds, strict=True)
    ))
    await asyncio.sleep(kill_at)
    assert await bots[victim].stop(signal.SIGKILL) == -signal.SIGKILL
    shutil.rmtree(bots[victim].workdir / "videos", ignore_errors=True)  # its disk is gone with it
    survivor = bots[1 - victim]
    context = f"seed {seed}, shard {victim} killed at {kill_at:.2f} s"

    try:
        async with asyncio.timeout(SETTLE_TIMEOUT_SECONDS):
            while not _settled(rows := await _rows(postgres_url)):
                await asyncio.sleep(0.2)
    except TimeoutError:
        brief = [(r["id"], r["state"], r["told_at"] is not None, r["lease_owner"]) for r in await _rows(postgres_url)]
        pytest.fail(f"{context}: not settled within {SETTLE_TIMEOUT_SECONDS} s: {brief}\n{survivor.log()[-4000:]}")
    await asyncio.sleep(0.5)  # time for a duplicate create or post to show up, if there were one
    assert await survivor.stop(signal.SIGTERM) == 0, survivor.log()[-4000:]
    rows = await _rows(postgres_url)
    by_prompt = {row["prompt"]: row for row in rows}
    states = Counter(row["state"] for row in rows)
    charged = sum(row["charged_yen"] for row in rows)
    videos = _posted_videos(double)
    context += f", states {dict(states)}"
    took_over = sum(int(n) for n in re.findall(r"took over (\d+) jobs whose process stopped", survivor.log()))
    again = survivor.log().count("is not on this host's disk; downloading it again")
    print(f"\n{context}: accepted {len(service.accepted_job_ids)}, creates {service.creates_received}, "
          f"videos posted {len(videos)}, spend {service.spend} yen, ledger {charged} yen; the survivor took over "
          f"{took_over} jobs and downloaded {again} again")

    assert set(by_prompt) <= set(prompts) and len(by_prompt) == len(rows), context

    # 0 creates sent twice, and none without a row.
    assert len(create_prompts) == service.creates_received, context
    assert [p for p, n in Counter(create_prompts).items() if n > 1] == [], context
    assert all(prompt in by_prompt for prompt in create_prompts), f"{context}: a create without a row"

    # 0 accepted videos lost, each posted once: every accepted job is delivered (and in the channel) or unknown.
    by_job_id = {row["service_job_id"]: row for row in rows if row["service_job_id"]}
    for job_id in service.accepted_job_ids:
        row = by_job_id.get(job_id) or by_prompt[service.jobs[job_id].prompt]
        if row["state"] == "unknown":
            continue
        assert row["state"] == "delivered", f"{context}: {row}"
        assert str(row["delivered_message_id"]) in videos, f"{context}: {row} not posted"
    assert len(videos) == states["delivered"], f"{context}: {len(videos)} videos posted, one per delivered row"

    # Every requester told; what has no row was never acknowledged.
    assert [row for row in rows if row["state"] != "delivered" and row["told_at"] is None] == [], context
    tokens = {row["interaction_token"] for row in rows}
    for interaction, prompt in zip(interactions, prompts, strict=True):
        if interaction.token not in tokens:
            callbacks = double.interaction_responses.get(interaction.id, [])
            assert not any(c["accepted"] for c in callbacks), f"{context}: {prompt} acknowledged without a row"

    # The ledger equals the service's charges (up to the outcomes nobody can know).
    assert charged <= service.spend <= charged + PRICE_YEN * states["unknown"], context
