"""The bot's side of one benchmark run: `python -m bench.run_one --base-url URL --loop ours ...`.

Builds the bot's parts with `bot.app.open_services` from settings of its own (a temporary database
and video folder, the time-compressed durations passed as parameters), submits every job at once
through `VideoRequests.submit` as `/video` does (the recorded request, the budget check with
`/key/info`, the write-ahead, the create), runs the worker (or the naive loop) until every job is
delivered to a recording sink, and writes what this process measured to --out as JSON: when each
video arrived, CPU time, memory and database size. The simulator runs in another process, so all of
it is the bot's own cost.

Once its parts are open it prints `ready` and waits for a line on stdin before it starts the clock:
the suite starts several of these processes on one PostgreSQL database (--database-url, --processes,
--process-index) and lets them go together. Each then submits its share of the jobs, interleaved (job
i belongs to process i mod P, at the moment it has in the one-process run), and works on the jobs it
holds the leases of.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from bench import memory
from bench.baseline import NaiveLoop
from bench.sim_server import API_KEY
from bench.sink import RecordingSink
from bench.timescale import HTTP_TIMEOUT_S, POLL_INTERVAL_S, TimeScale, bot_burst, setting_default
from bot.app import build_client, open_services, worker_config
from bot.config.settings import Settings, read_settings
from bot.core.errors import BotError, SubmissionFailed
from bot.core.lifecycle import IN_FLIGHT_STATES
from bot.core.retry import CREATE_RETRY, READ_RETRY
from bot.jobs.intake import VideoRequests
from bot.jobs.worker import WorkerConfig
from bot.ops.heap import CollectionPolicy, FullCollections, freeze_start_up
from bot.service.catalogue import DEFAULT_MODEL
from bot.service.client import VideoServiceClient
from bot.service.pacing import Pacer, service_pacer
from bot.store.jobs import JobState, JobStore, NewJob
from bot.store.sqlite import StoreUnavailable

# The bot's process holds discord.py and every bot module; load them so memory starts where the bot's does.
importlib.import_module("bot.frontend.bot")


#: Run seconds between two submissions of a run whose requests all arrive at once.
ALL_AT_ONCE_SPACING = 0.0001
#: Submissions started in one turn of the loop at most, when they are behind their moments.
SUBMITS_PER_TURN = 20
#: Run seconds between two checks of the database for the last jobs of a run of several processes.
SHARED_CHECK_S = 0.02
#: Tries of the first heartbeat of a process beside others (10 ms apart).
HEARTBEAT_ATTEMPTS = 500


def bench_settings(
    base_url: str,
    workdir: Path,
    scale: TimeScale,
    *,
    max_concurrency: int,
    max_requests_per_second: float | None,
    database_url: str | None = None,
) -> Settings:
    """The bot's settings for one run, read as the bot reads its environment.

    Production figures, except the poll interval and the lease: `VideoRequests` schedules each job's
    first poll one settings interval after acceptance, and the worker renews its leases (and counts the
    live processes it shares the key's rate with) every third of the settings' lease, so those two are in
    run time. The rest is compressed where it is used (see `make_client` and `make_worker`).
    `database_url`: PostgreSQL's (DATABASE_URL), else a SQLite file in `workdir`.
    """
    lease_seconds = setting_default("lease_seconds")
    assert isinstance(lease_seconds, float)
    env = {
        "DISCORD_TOKEN": "bench-has-no-discord",  # required by the settings; the sink stands in for Discord
        "VIDEO_API_BASE_URL": base_url,
        "VIDEO_API_KEY": API_KEY,
        "DATABASE_PATH": str(workdir / "bot.sqlite3"),
        "VIDEO_STORAGE_DIR": str(workdir / "videos"),
        "POLL_INTERVAL_SECONDS": repr(scale.seconds(POLL_INTERVAL_S)),
        "HTTP_TIMEOUT_SECONDS": repr(HTTP_TIMEOUT_S),
        "MAX_CONCURRENT_POLLS": str(max_concurrency),
        "LEASE_SECONDS": repr(scale.seconds(lease_seconds)),
    }
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    if max_requests_per_second is not None:
        env["MAX_REQUESTS_PER_SECOND"] = repr(max_requests_per_second)
    return read_settings(env)


def make_pacer(settings: Settings, scale: TimeScale, burst: int | None = None) -> Pacer:
    """The bot's pacer at the compressed rate (a burst and the turns are counts of requests: compressing time
    leaves them)."""
    rate = settings.max_requests_per_second
    return service_pacer(rate, run_rate=scale.rate(rate), burst=burst if burst is not None else bot_burst(rate))


def make_client(
    settings: Settings, http: aiohttp.ClientSession, scale: TimeScale, *, pacer: Pacer | None
) -> VideoServiceClient:
    """The bot's client with its production timeouts and retries compressed; paced like the bot does it."""
    paced = pacer is not None
    return build_client(
        settings,
        http,
        pacer=pacer,
        paced=paced,
        timeout_seconds=scale.seconds(settings.http_timeout_seconds),
        create_retry=scale.retry_policy(CREATE_RETRY),
        read_retry=scale.retry_policy(READ_RETRY),
    )


def make_worker(settings: Settings, scale: TimeScale) -> WorkerConfig:
    """The worker's config from the settings, every duration compressed."""
    # The settings' interval is already run time; the worker's production config is compressed as a whole.
    config = scale.worker_config(worker_config(settings, poll_interval=POLL_INTERVAL_S))
    assert config.poll_interval == settings.poll_interval_seconds
    return config


async def submit(requests: VideoRequests, index: int, at: float, accepted: dict[str, float]) -> str | None:
    """One /video through the bot's request path at `at` (monotonic); returns the error, or None once accepted.

    `accepted` gets the service's job id -> the moment the request was made, for request-to-post.
    """
    await asyncio.sleep(max(0.0, at - time.monotonic()))
    requested = time.monotonic()
    try:
        job = await requests.submit(
            NewJob(
                model=DEFAULT_MODEL.id,
                prompt=f"benchmark video {index}: a lighthouse at dawn, waves, gulls",
                seed=index,
                user_id=index + 1,  # one request per member: the per-member guardrails never bind
                guild_id=1,
                channel_id=1,
            )
        )
    except SubmissionFailed as exc:
        return f"{type(exc).__name__}({exc.kind})"
    except BotError as exc:
        return type(exc).__name__
    if job.service_job_id is not None:
        accepted[job.service_job_id] = requested
    return None


class StallMonitor:
    """The event loop's worst stall: its longest turn, from the selector's answer to the next wait for one (run
    milliseconds). Whatever became ready meanwhile, a timer or an answer, waited that long.

    It wraps the loop's selector rather than wake the loop itself: a short sleep to time (the first version)
    cost this machine about 0.25 ms of CPU per wake-up, 5 % of a core at a 5 ms tick, all counted as the bot's.
    `worst_busy` counts only the part of a turn the loop's thread spent on the CPU: on a shared machine a
    process that is merely descheduled has long turns too, and that is no work of the bot's to move off the loop.
    """

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_busy = 0.0
        # The same from `requests_done()` on: jobs in flight, no /video request being recorded or sent.
        self.worst_in_flight = 0.0
        self.worst_busy_in_flight = 0.0
        self._in_flight = False
        self._selector: Any = None
        self._turn: tuple[float, float] | None = None  # when the running turn began: monotonic, thread CPU

    def requests_done(self) -> None:
        self._in_flight = True

    def start(self) -> None:
        # asyncio keeps its selector private; a benchmark may look (selector event loops only, Linux's default).
        self._selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
        waits = self._selector.select

        def select(timeout: float | None = None) -> Any:
            # One read of the thread's CPU per turn, not two: it is a system call (no fast path, unlike the
            # monotonic clock), and two per turn were 7 % of the loop's samples in a profile. The next turn's
            # CPU starts where this one's ended: waiting in the selector takes next to none.
            cpu = time.thread_time()
            self._turn_ended(cpu)
            events = waits(timeout)
            self._turn = (time.monotonic(), cpu)
            return events

        self._selector.select = select

    def _turn_ended(self, cpu: float) -> None:
        if self._turn is None:
            return
        began, cpu_began = self._turn
        late = time.monotonic() - began
        busy = min(late, cpu - cpu_began)
        self.worst = max(self.worst, late)
        self.worst_busy = max(self.worst_busy, busy)
        if self._in_flight:
            self.worst_in_flight = max(self.worst_in_flight, late)
            self.worst_busy_in_flight = max(self.worst_busy_in_flight, busy)

    async def stop(self) -> None:
        if self._selector is not None:
            del self._selector.select  # the class's own again
            self._selector = None


async def _settle(store: JobStore, seconds: float) -> None:
    """The sink has the last video: let the loop record the delivery before it stops."""
    deadline = time.monotonic() + seconds
    while await store.jobs_in_states(IN_FLIGHT_STATES):
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(0.01)


def _submitted_mark(rendezvous: Path, index: int) -> Path:
    return rendezvous / f"submitted-{index}"


async def _shared_done(
    sink: RecordingSink, store: JobStore, rendezvous: Path, processes: int, interval: float, deadline: float
) -> bool:
    """Wait until every process has submitted its share and no job in the database is in flight, whichever
    process posted it (one may take over another's job when its lease expires); True if it timed out.

    A process keeps working until then, so a job released or lost by one is finished by another. Checked
    once an interval until this process's sink has all it expects, then every SHARED_CHECK_S.
    `deadline`: time.monotonic()'s, to give up at.
    """
    while time.monotonic() < deadline:
        if sink.finished.is_set():
            await asyncio.sleep(SHARED_CHECK_S)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sink.finished.wait(), timeout=interval)
        submitted = all(_submitted_mark(rendezvous, index).exists() for index in range(processes))
        if submitted and not await store.jobs_in_states(IN_FLIGHT_STATES):
            return False
    return True


def _db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


async def run(args: argparse.Namespace) -> dict[str, Any]:
    scale = TimeScale(args.k)
    workdir: Path = args.workdir
    settings = bench_settings(
        args.base_url, workdir, scale, max_concurrency=args.max_concurrency, max_requests_per_second=args.pacer_rate,
        database_url=args.database_url,
    )
    pacer = make_pacer(settings, scale, args.pacer_burst) if args.pacer_rate is not None else None
    sink = RecordingSink()
    services = await open_services(
        settings,
        sink,
        client=lambda http: make_client(settings, http, scale, pacer=pacer),
        worker=make_worker(settings, scale),
        pacer=pacer,
    )

    loop_task: asyncio.Task[None] | None = None
    naive: NaiveLoop | None = None
    if args.loop == "baseline":
        # Submissions go through the bot's paced client; the naive loop polls with an unpaced one.
        naive = NaiveLoop(
            services.store,
            make_client(settings, services.session, scale, pacer=None),
            sink,
            storage_dir=settings.video_storage_dir,
            interval=settings.poll_interval_seconds,
        )

    # As the bot does once its set-up is done; the naive baseline keeps CPython's own full collections.
    collections = FullCollections(scale.collection_policy(CollectionPolicy())) if naive is None else None
    if collections is None:
        freeze_start_up()
    else:
        collections.start()
    shared = args.processes > 1
    if shared:
        # The heartbeat first: each process then counts the others from its first turn, and paces at its share
        # of the key's rate from the first submission. The renewal does not wait for the other process's write:
        # it is tried again, as the worker's next round would.
        for attempt in range(HEARTBEAT_ATTEMPTS):
            try:
                await services.worker.keep_leases()
                break
            except StoreUnavailable:
                if attempt == HEARTBEAT_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.01)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # the suite's go, once every process of the run is ready

    rss_start = memory.rss_kib()
    startup_peak = memory.peak_rss_kib()
    peak_reset = memory.reset_peak()
    cpu_start = time.process_time()
    threads_start = memory.cpu_by_thread()
    started = time.monotonic()
    stalls = StallMonitor()
    stalls.start()
    if naive is None:
        services.worker.start()
    else:
        loop_task = asyncio.create_task(naive.run(), name="naive-loop")

    # All at once, or a steady stream of `arrival_rate` production requests per second. "All at once" is
    # a burst a tenth of a run millisecond apart, each request started at its moment: starting 1,000 (or
    # 10,000) in one turn of the loop stalled it for 60 (400) ms before any bot work began, a load no
    # Discord gateway delivers (its events arrive one message at a time).
    spacing = 1.0 / scale.rate(args.arrival_rate) if args.arrival_rate else ALL_AT_ONCE_SPACING
    requested: dict[str, float] = {}
    submissions: list[asyncio.Task[str | None]] = []
    for turn, index in enumerate(range(args.process_index, args.jobs, args.processes)):
        late = time.monotonic() - (started + index * spacing)
        if late < 0 or turn % SUBMITS_PER_TURN == 0:
            await asyncio.sleep(max(0.0, -late))
        submissions.append(
            asyncio.create_task(submit(services.requests, index, time.monotonic(), requested))
        )
    errors = await asyncio.gather(*submissions)
    # Discord's finished interactions are gone once answered; ten thousand finished tasks (their coroutines and
    # contexts, 30,000 objects) kept here would be walked by every full garbage collection of the run.
    del submissions
    stalls.requests_done()
    if shared:
        _submitted_mark(args.rendezvous, args.process_index).touch()
    accepted = sum(error is None for error in errors)
    sink.expect(accepted)
    timed_out = False
    if shared:
        deadline = time.monotonic() + args.timeout
        timed_out = await _shared_done(
            sink, services.store, args.rendezvous, args.processes, settings.poll_interval_seconds, deadline
        )
    else:
        try:
            await asyncio.wait_for(sink.finished.wait(), timeout=args.timeout)
        except TimeoutError:
            timed_out = True
    finished = time.monotonic()
    cpu_s = time.process_time() - cpu_start
    threads_cpu = {kind: seconds - threads_start.get(kind, 0.0) for kind, seconds in memory.cpu_by_thread().items()}
    await stalls.stop()
    if not timed_out and not shared:
        await _settle(services.store, settings.poll_interval_seconds)

    await services.worker.stop()
    if loop_task is not None:
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
    # Every job's, once per run: the first process reports them.
    states = Counter(
        job.state.value for job in await services.store.jobs_in_states(tuple(JobState)) if args.process_index == 0
    )
    await services.close()
    if collections is not None:
        await collections.stop()
    run_peak = memory.peak_rss_kib()
    return {
        "loop": args.loop,
        "jobs": len(errors),
        "accepted": accepted,
        "submit_errors": dict(Counter(error for error in errors if error is not None)),
        "deliveries": sink.received,
        "requested": requested,
        "worst_stall_ms": 1000 * stalls.worst,
        "worst_busy_stall_ms": 1000 * stalls.worst_busy,
        "worst_in_flight_stall_ms": 1000 * stalls.worst_in_flight,
        "worst_busy_in_flight_stall_ms": 1000 * stalls.worst_busy_in_flight,
        "duplicates": sink.duplicates,
        "announcements": dict(sink.announcements),
        "states": dict(states),
        "timed_out": timed_out,
        "started_at": started,
        "finished_at": finished,
        "cpu_s": cpu_s,
        "cpu_s_by_thread": threads_cpu,
        "rss_start_kib": rss_start,
        "peak_rss_kib": max(startup_peak, run_peak) if peak_reset else run_peak,
        "run_peak_kib": run_peak if peak_reset else None,
        # PostgreSQL's database is measured by the suite, on the server.
        "db_bytes": _db_bytes(settings.database_path) if settings.database_url is None else 0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_one", description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--loop", choices=("ours", "baseline"), required=True)
    parser.add_argument("--jobs", type=int, required=True, help="jobs of the run, across its processes")
    parser.add_argument("--processes", type=int, default=1, help="bot processes sharing the run's jobs")
    parser.add_argument("--process-index", type=int, default=0, help="this one's place among them, from 0")
    parser.add_argument("--rendezvous", type=Path, default=None,
                        help="several processes: a folder they share, to tell each other their submissions are done")
    parser.add_argument("--database-url", default=None, help="DATABASE_URL (default: a SQLite file in --workdir)")
    parser.add_argument("--k", type=float, required=True, help="time compression factor")
    parser.add_argument("--pacer-rate", type=float, default=None, help="MAX_REQUESTS_PER_SECOND (production)")
    parser.add_argument("--pacer-burst", type=int, default=None, help="pacer burst (default: as the bot sets it)")
    parser.add_argument("--max-concurrency", type=int, default=8, help="MAX_CONCURRENT_POLLS")
    parser.add_argument("--arrival-rate", type=float, default=None,
                        help="requests per production second (default: all at once)")
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
