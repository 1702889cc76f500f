"""The bot's side of one benchmark run: `python -m bench.run_one --base-url URL --loop ours ...`.

Submits every job at once the way the bot does (a `submitting` row, the create request, then the
accepted row with its first poll one interval later), runs the worker (or the naive loop) until every
job is delivered to a recording sink, and writes what this process measured to --out as JSON: when
each video arrived, CPU time, memory and database size. The simulator runs in another process, so
all of it is the bot's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp

from bench import memory
from bench.baseline import NaiveLoop
from bench.sim_server import API_KEY
from bench.sink import RecordingSink
from bench.timescale import HTTP_TIMEOUT_S, POLL_INTERVAL_S, TimeScale, bot_burst
from bot.errors import OutcomeUnknown, VideoServiceError
from bot.models import DEFAULT_MODEL
from bot.pacing import Pacer
from bot.retry import RetryPolicy
from bot.store import IN_FLIGHT_STATES, Job, JobState, JobStore, NewJob
from bot.video_client import VideoServiceClient
from bot.worker import JobWorker, WorkerConfig

# The bot's process holds discord.py and every bot module; load them so memory starts where the bot's does.
importlib.import_module("bot.video_bot")


def _client_default(name: str) -> RetryPolicy:
    default = inspect.signature(VideoServiceClient.__init__).parameters[name].default
    assert isinstance(default, RetryPolicy)
    return default


def make_client(
    session: aiohttp.ClientSession, base_url: str, scale: TimeScale, pacer_rate: float | None, burst: int | None
) -> VideoServiceClient:
    """The bot's client with its production timeouts and retries compressed; paced like the bot does it."""
    pacer = None
    if pacer_rate is not None:
        # A burst is a count of requests: compressing time leaves it as it is.
        pacer = Pacer(scale.rate(pacer_rate), burst=burst if burst is not None else bot_burst(pacer_rate))
    return VideoServiceClient(
        session,
        base_url,
        API_KEY,
        timeout_seconds=scale.seconds(HTTP_TIMEOUT_S),
        create_retry=scale.retry_policy(_client_default("create_retry")),
        read_retry=scale.retry_policy(_client_default("read_retry")),
        pacer=pacer,
    )


async def submit(
    store: JobStore, client: VideoServiceClient, index: int, interval: float, on_accepted: Callable[[Job], None]
) -> str | None:
    """One /video, as VideoRequests does it; returns the error, or None once accepted."""
    job = await store.add_submission(
        NewJob(
            model=DEFAULT_MODEL.id,
            prompt=f"benchmark video {index}: a lighthouse at dawn, waves, gulls",
            seed=index,
            user_id=index + 1,
            guild_id=1,
            channel_id=1,
        )
    )
    job = await store.transition(job.id, JobState.SUBMITTING)
    try:
        remote = await client.create(job.prompt, job.seed, DEFAULT_MODEL)
    except VideoServiceError as exc:
        state = JobState.UNKNOWN if isinstance(exc, OutcomeUnknown) else JobState.REJECTED
        await store.transition(job.id, state, last_error=str(exc))
        return type(exc).__name__
    accepted = await store.mark_accepted(
        job.id, remote.id, DEFAULT_MODEL.price_yen, next_poll_at=time.time() + interval
    )
    on_accepted(accepted)
    return None


def _nothing(job: Job) -> None:
    return None


async def _settle(store: JobStore, seconds: float) -> None:
    """The sink has the last video: let the loop record the delivery before it stops."""
    deadline = time.monotonic() + seconds
    while await store.jobs_in_states(IN_FLIGHT_STATES):
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(0.01)


def _db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


async def run(args: argparse.Namespace) -> dict[str, Any]:
    scale = TimeScale(args.k)
    interval = scale.seconds(POLL_INTERVAL_S)
    workdir: Path = args.workdir
    storage = workdir / "videos"
    db_path = workdir / "bot.sqlite3"
    store = await JobStore.open(db_path)
    sink = RecordingSink()
    session = aiohttp.ClientSession()
    client = make_client(session, args.base_url, scale, args.pacer_rate, args.pacer_burst)

    loop_task: asyncio.Task[None] | None = None
    worker: JobWorker | None = None
    wake: Callable[[Job], None] = _nothing
    if args.loop == "ours":
        config = WorkerConfig(storage_dir=storage, poll_interval=POLL_INTERVAL_S, max_concurrency=args.max_concurrency)
        tuning = {name: getattr(args, name) for name in ("jitter", "claim_window") if getattr(args, name) is not None}
        config = replace(config, **tuning)
        worker = JobWorker(store, client, sink, scale.worker_config(config))
        wake = worker.wake
    else:
        naive = NaiveLoop(
            store, make_client(session, args.base_url, scale, None, None), sink, storage_dir=storage, interval=interval
        )

    rss_start = memory.rss_kib()
    startup_peak = memory.peak_rss_kib()
    peak_reset = memory.reset_peak()
    cpu_start = time.process_time()
    started = time.monotonic()
    if worker is not None:
        worker.start()
    else:
        loop_task = asyncio.create_task(naive.run(), name="naive-loop")

    errors = await asyncio.gather(*(submit(store, client, i, interval, wake) for i in range(args.jobs)))
    accepted = sum(error is None for error in errors)
    sink.expect(accepted)
    timed_out = False
    try:
        await asyncio.wait_for(sink.finished.wait(), timeout=args.timeout)
    except TimeoutError:
        timed_out = True
    finished = time.monotonic()
    cpu_s = time.process_time() - cpu_start
    if not timed_out:
        await _settle(store, scale.seconds(POLL_INTERVAL_S))

    if worker is not None:
        await worker.stop()
    if loop_task is not None:
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
    states = Counter(job.state.value for job in await store.jobs_in_states(tuple(JobState)))
    await session.close()
    await store.close()
    run_peak = memory.peak_rss_kib()
    return {
        "loop": args.loop,
        "jobs": args.jobs,
        "accepted": accepted,
        "submit_errors": dict(Counter(error for error in errors if error is not None)),
        "deliveries": sink.received,
        "duplicates": sink.duplicates,
        "announcements": dict(sink.announcements),
        "states": dict(states),
        "timed_out": timed_out,
        "started_at": started,
        "finished_at": finished,
        "cpu_s": cpu_s,
        "rss_start_kib": rss_start,
        "peak_rss_kib": max(startup_peak, run_peak) if peak_reset else run_peak,
        "run_peak_kib": run_peak if peak_reset else None,
        "db_bytes": _db_bytes(db_path),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_one", description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--loop", choices=("ours", "baseline"), required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--k", type=float, required=True, help="time compression factor")
    parser.add_argument("--pacer-rate", type=float, default=None, help="MAX_REQUESTS_PER_SECOND (production)")
    parser.add_argument("--pacer-burst", type=int, default=None, help="pacer burst (default: as the bot sets it)")
    parser.add_argument("--max-concurrency", type=int, default=8, help="MAX_CONCURRENT_POLLS")
    parser.add_argument("--jitter", type=float, default=None, help="WorkerConfig.jitter (default: the worker's)")
    parser.add_argument("--claim-window", type=float, default=None, help="WorkerConfig.claim_window")
    parser.add_argument("--timeout", type=float, required=True, help="give up after this many run seconds")
    parser.add_argument("--workdir", type=Path, required=True, help="database, videos and log")
    parser.add_argument("--out", type=Path, required=True, help="JSON result")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    # The bot logs at INFO by default; a file keeps that cost in the figures without flooding the terminal.
    logging.basicConfig(
        level=logging.INFO,
        filename=args.workdir / "bot.log",
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    result = asyncio.run(run(args))
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
