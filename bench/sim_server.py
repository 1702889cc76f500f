"""The video-service simulator in a process of its own, time-compressed: `python -m bench.sim_server`.

Running apart from the bot keeps the simulator's CPU and memory out of the bot's figures. In front
of the simulator it adds, as aiohttp middleware:

- the platform limit with a window of 1/K s, so "25 requests per second" means 25 requests in any
  production second at every K. (The simulator's own limit counts over a fixed 1 s window, which at
  K = 10 would let ten production seconds' worth of requests arrive at once.) Its Retry-After is
  1/K s, the production "1";
- request counts per endpoint, 429s included, and when each job was first reported completed and
  first downloaded;
- optionally a fixed delay on every answer (--latency-ms), for a service farther away than loopback.

It prints its base URL once listening. On SIGTERM it writes its counters and each job's completion
time to the --dump file. Times are `time.monotonic()`: one system-wide clock on Linux, so the bot's
process can compare its delivery times with them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from bot.service.catalogue import BUILT_IN
from bot.simulator.app import (
    CREATE_PATH,
    JOBS_PREFIX,
    KEY_INFO_PATH,
    MODEL_ID,
    SimJob,
    SimulatorConfig,
    VideoServiceSimulator,
)
from bot.simulator.app import logger as simulator_logger

API_KEY = "sk-bench-simulator-key-0001"
#: The key's budget: a finite one, as a real key has, so the bot's check before each create compares
#: against a number; a million videos, far more than any run spends.
BUDGET_YEN = BUILT_IN.price_of(BUILT_IN.default_id) * 1_000_000


def endpoint_of(request: web.BaseRequest) -> str:
    path = request.path
    if request.method == "POST" and path == CREATE_PATH:
        return "create"
    if path.startswith(JOBS_PREFIX + "/"):
        return "download" if path.endswith("/content") else "status"
    if path == KEY_INFO_PATH:
        return "key_info"
    return "other"


class CompressedPlatform:
    """Counts every request, enforces the platform limit over a 1/K s sliding window, and notes
    when each job was first reported completed and first downloaded (to split the delivery lag)."""

    def __init__(
        self, simulator: VideoServiceSimulator, k: float, limit_per_second: float | None, latency: float = 0.0
    ) -> None:
        self.simulator = simulator
        self.latency = latency  # run seconds added to every answer, as a distant service would
        self.window = 1.0 / k
        self.limit = limit_per_second  # requests per production second = per run window
        self.requests: Counter[str] = Counter()
        self.responses_429: Counter[str] = Counter()
        self.seen_completed: dict[str, float] = {}
        self.downloaded: dict[str, float] = {}
        self._admitted: deque[float] = deque()

    def over_limit(self) -> bool:
        if self.limit is None:
            return False
        now = time.monotonic()
        while self._admitted and self._admitted[0] <= now - self.window:
            self._admitted.popleft()
        # Like the simulator: only admitted requests fill the window.
        if len(self._admitted) + 1 > self.limit:
            return True
        self._admitted.append(now)
        return False

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        endpoint = endpoint_of(request)
        self.requests[endpoint] += 1
        refused = self.over_limit()
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if refused:
            self.responses_429[endpoint] += 1
            body = {"error": {"message": "rate limit exceeded, retry later", "type": "rate_limit_error"}}
            return web.json_response(body, status=429, headers={"Retry-After": f"{self.window:g}"})
        response = await handler(request)
        if endpoint in ("status", "download") and response.status == 200:
            self._note(endpoint, request.match_info.get("job_id", ""))
        return response

    def _note(self, endpoint: str, job_id: str) -> None:
        now = time.monotonic()
        job = self.simulator.jobs.get(job_id)
        if job is None:
            return
        if endpoint == "download":
            self.downloaded.setdefault(job_id, now)
        elif job.completed_at <= now:
            self.seen_completed.setdefault(job_id, now)


class ProfiledSimulator(VideoServiceSimulator):
    """The simulator with the duration profiles of the scenarios.

    `bimodal`: 70 % of jobs in [low, low + (high - low) / 6], 30 % in [high - (high - low) / 4, high]
    (40-60 s and 150-180 s for 40-180 s). `speedup`: uniform in [low, high], then twice as fast from
    the `speedup_after`-th create on.
    """

    def __init__(self, config: SimulatorConfig, profile: str, speedup_after: int) -> None:
        super().__init__(config)
        self.profile = profile
        self.speedup_after = speedup_after
        self._profile_rng = random.Random(config.seed + 1)
        self.created = 0

    def _new_job(self, job_id: str, prompt: str, seed: int | None, model_id: str = MODEL_ID) -> SimJob:
        job = super()._new_job(job_id, prompt, seed, model_id)
        self.created += 1
        low, high = self.config.job_seconds, self.config.job_seconds_max or self.config.job_seconds
        if self.profile == "bimodal":
            if self._profile_rng.random() < 0.7:
                job.duration = self._profile_rng.uniform(low, low + (high - low) / 7)
            else:
                job.duration = self._profile_rng.uniform(high - (high - low) * 30 / 140, high)
        elif self.profile == "speedup" and self.created > self.speedup_after:
            job.duration /= 2
        return job


def dump(simulator: VideoServiceSimulator, platform: CompressedPlatform, k: float) -> dict[str, Any]:
    return {
        "k": k,
        "requests": dict(platform.requests),
        "responses_429": dict(platform.responses_429),
        "creates_accepted": simulator.creates_accepted,
        "spend_yen": simulator.spend,
        "jobs": [
            {
                "id": job.id,
                "created_at": job.created_at,
                "completed_at": job.completed_at,
                "duration": job.duration,
                "index": index,
                "failed": job.will_fail,
                "seen_completed_at": platform.seen_completed.get(job.id),
                "downloaded_at": platform.downloaded.get(job.id),
            }
            for index, job in enumerate(simulator.jobs.values())
        ],
    }


async def serve(args: argparse.Namespace) -> None:
    k: float = args.k
    config = SimulatorConfig(
        api_key=API_KEY,
        job_seconds=args.job_seconds / k,
        job_seconds_max=args.job_seconds_max / k,
        max_budget=BUDGET_YEN,
        seed=args.seed,
        video_path=args.video,
    )
    simulator = ProfiledSimulator(config, args.profile, args.speedup_after)
    platform = CompressedPlatform(simulator, k, args.rate_limit, args.latency_ms / 1000 / k)
    # Outermost, so requests refused by the platform never reach the simulator's handlers.
    simulator.app.middlewares.insert(0, platform.middleware)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await simulator.start("127.0.0.1", 0)
    print(simulator.base_url, flush=True)
    try:
        await stop.wait()
    finally:
        await simulator.stop()
        args.dump.write_text(json.dumps(dump(simulator, platform, k)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sim_server", description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=float, required=True, help="time compression factor")
    parser.add_argument("--job-seconds", type=float, required=True, help="shortest job, production seconds")
    parser.add_argument("--job-seconds-max", type=float, required=True, help="longest job, production seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate-limit", type=float, default=None, help="platform limit, production requests/s")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="answer delay, production milliseconds")
    parser.add_argument("--profile", choices=("uniform", "bimodal", "speedup"), default="uniform")
    parser.add_argument("--speedup-after", type=int, default=0, help="creates before the service gets 2x faster")
    parser.add_argument("--video", type=Path, default=None, help="file served for every download")
    parser.add_argument("--dump", type=Path, required=True, help="JSON file written on SIGTERM")
    args = parser.parse_args(argv)
    # Per-request logging would cost the simulator more than serving the request.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    simulator_logger.setLevel(logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
