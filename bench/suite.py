"""`python -m bench`: every scenario in fresh processes, then bench/results/latest.json and latest.md.

Each run starts two processes: the simulator (bench.sim_server) and the bot's side (bench.run_one),
so peak memory and CPU time are per run and the bot's alone. The PostgreSQL runs share one server,
started here with the tests' harness (tests/store/postgres_server.py), with a fresh database per run; a run
of two processes starts two bots on it, and their figures are combined (bench.report.combine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg

from bench import memory
from bench.report import add_comparisons, add_targets, combine, machine, render_markdown, summarise
from bench.scenarios import Scenario, standard
from bench.timescale import TimeScale
from tests.store.postgres_server import PostgresServer, start_server

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
#: Production minutes become seconds/10: the suite fits in 5 minutes on 2 cores, and the bot's loop
#: stays far from CPU-bound (see "CPU busy" in the results).
DEFAULT_K = 10.0


def profiled(command: list[str], profile_dir: Path, name: str) -> list[str]:
    """`command` under py-spy, sampling every thread, writing collapsed stacks to profile_dir/name.txt.

    py-spy is a tool of the developer's (`pip install py-spy`), not a dependency of the project.
    """
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    profile_dir.mkdir(parents=True, exist_ok=True)
    output = profile_dir / f"{name}.txt"
    return [spy, "record", "--rate", "200", "--threads", "--format", "raw", "--output", str(output), "--", *command]


async def _new_database(server: PostgresServer, name: str) -> int:
    """Create the run's database; returns its size empty (PostgreSQL's template catalogue, several MB)."""
    admin = await asyncpg.connect(server.url())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await admin.execute(f'CREATE DATABASE "{name}"')
        return int(await admin.fetchval("SELECT pg_database_size($1)", name))
    finally:
        await admin.close()


async def _database_bytes(server: PostgresServer, name: str) -> int:
    admin = await asyncpg.connect(server.url())
    try:
        return int(await admin.fetchval("SELECT pg_database_size($1)", name))
    finally:
        await admin.close()


def _start_bots(commands: list[list[str]]) -> list[subprocess.Popen[str]]:
    """Start the run's bot processes and wait until each has its parts open (its `ready` line)."""
    bots: list[subprocess.Popen[str]] = []
    for command in commands:
        bots.append(subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for bot in bots:
        assert bot.stdout is not None
        while (line := bot.stdout.readline()) and line.strip() != "ready":
            pass  # a profiler may print first
        if not line:
            raise RuntimeError(f"a bot process ended before it was ready: {' '.join(bot.args)}")  # type: ignore[arg-type]
    return bots


def simulator_command(
    scenario: Scenario, scale: TimeScale, dump: Path, seed: int, latency_ms: float = 0.0
) -> list[str]:
    """The simulator's process for `scenario`: its job durations, platform limit and answer delay."""
    command = [
        sys.executable, "-m", "bench.sim_server",
        "--k", str(scale.k),
        "--job-seconds", str(scenario.job_seconds[0]),
        "--job-seconds-max", str(scenario.job_seconds[1]),
        "--profile", scenario.profile,
        "--speedup-after", str(scenario.speedup_after),
        "--seed", str(seed),
        "--dump", str(dump),
        "--latency-ms", str(latency_ms),
    ]  # fmt: skip
    if scenario.platform_limit is not None:
        command += ["--rate-limit", str(scenario.platform_limit)]
    return command


@contextlib.contextmanager
def running_simulator(command: list[str], name: str) -> Iterator[str]:
    """The simulator's process, started from `command`: its base URL. Stopped on the way out (SIGTERM: it
    writes its dump)."""
    simulator = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert simulator.stdout is not None
        base_url = simulator.stdout.readline().strip()
        if not base_url.startswith("http"):
            raise RuntimeError(f"the simulator of {name} did not start")
        yield base_url
    finally:
        simulator.send_signal(signal.SIGTERM)
        simulator.wait(timeout=30)


def run_scenario(
    scenario: Scenario,
    scale: TimeScale,
    workdir: Path,
    seed: int,
    latency_ms: float = 0.0,
    profile_dir: Path | None = None,
    postgres: PostgresServer | None = None,
) -> dict[str, Any]:
    workdir.mkdir(parents=True)
    dump = workdir / "simulator.json"
    sim_cmd = simulator_command(scenario, scale, dump, seed, latency_ms)
    if scenario.video_bytes is not None:
        # Random bytes in an ftyp + mdat frame: the client checks the box headers, never the media.
        video = workdir / "video.mp4"
        ftyp = struct.pack(">I4s", 16, b"ftyp") + b"isom\x00\x00\x02\x00"
        media = max(0, scenario.video_bytes - len(ftyp) - 8)
        video.write_bytes(ftyp + struct.pack(">I4s", media + 8, b"mdat") + os.urandom(media))
        sim_cmd += ["--video", str(video)]
    timeout = scale.seconds(scenario.timeout_seconds())
    bot_cmd = [
        sys.executable, "-m", "bench.run_one",
        "--loop", scenario.loop,
        "--jobs", str(scenario.jobs),
        "--k", str(scale.k),
        "--max-concurrency", str(scenario.max_concurrency),
        "--timeout", str(timeout),
        "--processes", str(scenario.processes),
        "--rendezvous", str(workdir),
    ]  # fmt: skip
    if scenario.pacer_rate is not None:
        bot_cmd += ["--pacer-rate", str(scenario.pacer_rate)]
    if scenario.pacer_burst is not None:
        bot_cmd += ["--pacer-burst", str(scenario.pacer_burst)]
    if scenario.arrival_rate is not None:
        bot_cmd += ["--arrival-rate", str(scenario.arrival_rate)]
    database = f"bench_{scenario.name.replace('-', '_')}"
    empty_bytes = 0
    if scenario.database == "postgresql":
        if postgres is None:
            raise ValueError(f"{scenario.name} needs a PostgreSQL server")
        empty_bytes = asyncio.run(_new_database(postgres, database))
        bot_cmd += ["--database-url", postgres.url(database)]
    single = scenario.processes == 1
    outs = [workdir / ("bot.json" if single else f"bot{index}.json") for index in range(scenario.processes)]

    bots: list[subprocess.Popen[str]] = []
    server_cpu: float | None = None
    with running_simulator(sim_cmd, scenario.name) as base_url:
        try:
            commands = []
            for index, out in enumerate(outs):
                command = [*bot_cmd, "--base-url", base_url, "--process-index", str(index), "--out", str(out),
                           "--workdir", str(workdir / ("bot" if single else f"bot{index}"))]  # fmt: skip
                if profile_dir is not None:
                    command = profiled(command, profile_dir, scenario.name if single else f"{scenario.name}-{index}")
                commands.append(command)
            bots = _start_bots(commands)
            # The server's CPU from the moment the bots start their clocks until they have ended (their sessions
            # too: an ended backend's time is in the server's count of its reaped children).
            on_server = postgres if scenario.database == "postgresql" else None
            server_start = memory.process_tree_cpu(on_server.process.pid) if on_server is not None else None
            for bot in bots:
                assert bot.stdin is not None
                bot.stdin.write("go\n")
                bot.stdin.flush()
            deadline = time.monotonic() + timeout + 60
            for bot in bots:
                code = bot.wait(timeout=max(1.0, deadline - time.monotonic()))
                if code != 0:
                    raise subprocess.CalledProcessError(code, bot.args)
            if on_server is not None and server_start is not None:
                time.sleep(0.2)  # the server reaps the ended sessions
                server_cpu = memory.process_tree_cpu(on_server.process.pid) - server_start
        finally:
            for bot in bots:
                if bot.poll() is None:
                    bot.kill()
                    bot.wait()
    measured = combine([json.loads(out.read_text()) for out in outs])
    if scenario.database == "postgresql" and postgres is not None:
        measured["db_bytes"] = asyncio.run(_database_bytes(postgres, database)) - empty_bytes
        measured["db_server_cpu_s"] = server_cpu
    run = summarise(scenario, measured, json.loads(dump.read_text()), scale)
    run["service_latency_ms"] = latency_ms
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Worker scaling benchmark.")
    parser.add_argument("--k", type=float, default=DEFAULT_K, help="time compression factor (default %(default)s)")
    parser.add_argument("--small", type=int, default=100, help="jobs in the small runs (default %(default)s)")
    parser.add_argument("--large", type=int, default=1000, help="jobs in the large runs (default %(default)s)")
    parser.add_argument("--max-requests-per-second", type=float, default=None,
                        help="the bot's pacing under the platform limit (default: the bot's setting default)")
    parser.add_argument("--max-concurrency", type=int, default=None,
                        help="MAX_CONCURRENT_POLLS (default: the bot's setting default)")
    parser.add_argument("--pacer-burst", type=int, default=None,
                        help="the pacer's burst (default: what the bot gives it: 1, one request at a time)")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="delay of every answer, production ms (default: loopback only)")
    parser.add_argument("--only", default=None, help="comma-separated run names, e.g. ours-100,baseline-100")
    parser.add_argument("--seed", type=int, default=0, help="seed of the job durations (default %(default)s)")
    parser.add_argument("--stream", type=int, default=600, help="jobs in the steady-stream runs (0: none)")
    parser.add_argument("--huge", type=int, default=10_000, help="jobs in the largest run (0: none)")
    parser.add_argument("--quick", action="store_true",
                        help="a short run for CI: K 20, 20 and 100 jobs, no streams, no 10,000-job run")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="sample the bot's process with py-spy (installed separately) into DIR/<run>.txt, "
                        "collapsed stacks per thread; its overhead inflates the CPU figures")
    parser.add_argument("--results", type=Path, default=RESULTS, help="output folder (default bench/results)")
    args = parser.parse_args(argv)
    if args.profile is not None and args.results == RESULTS:
        args.results = args.profile  # a profiled run's figures are inflated: keep them out of latest.*
    if args.quick:
        args.k, args.small, args.large, args.stream, args.huge = 20.0, 20, 100, 0, 0

    scale = TimeScale(args.k)
    scenarios = standard(
        args.small, args.large, max_requests_per_second=args.max_requests_per_second,
        max_concurrency=args.max_concurrency, pacer_burst=args.pacer_burst, stream=args.stream, huge=args.huge,
    )
    if args.only:
        wanted = {name.strip() for name in args.only.split(",")}
        scenarios = [scenario for scenario in scenarios if scenario.name in wanted]
    print(f"K = {scale.k:g}: production seconds run {scale.k:g} times faster; figures are production-equivalent",
          flush=True)
    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    host = machine()
    postgres: PostgresServer | None = None
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, contextlib.ExitStack() as cleanup:
        if any(scenario.database == "postgresql" for scenario in scenarios):
            # One server for every run that needs one, durable as SQLite is at synchronous=FULL.
            postgres = start_server(durable=True)
            cleanup.callback(postgres.stop)
            host["postgresql"] = postgres.version
        for scenario in scenarios:
            own = TimeScale(scenario.k) if scenario.k is not None else scale
            run = run_scenario(
                scenario, own, Path(tmp) / scenario.name, args.seed, args.latency_ms, args.profile, postgres
            )
            runs.append(run)
            print(
                f"{run['name']:>22}: {run['delivered']}/{run['jobs']} delivered, status/job {run['status_per_job']} "
                f"(floor {run['floor_per_job']}), 429s {run['responses_429']}, lag p50/p99 {run['lag_p50_s']}/"
                f"{run['lag_p99_s']} s, peak RSS {run['peak_rss_mib']} MiB, CPU {run['cpu_ms_per_job']} ms/job "
                f"{run['cpu_ms_per_poll']} ms/poll, stall {run['worst_stall_ms']} ms "
                f"[{run['run_wall_s']:.1f} s]",
                flush=True,
            )
    add_comparisons(runs)
    add_targets(runs, large=args.large)
    wall = time.monotonic() - started
    command = " ".join(["python -m bench", *(sys.argv[1:] if argv is None else argv)])
    markdown = render_markdown(runs, host, scale.k, wall, command=command)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "latest.json").write_text(json.dumps(runs, indent=2) + "\n")
    (args.results / "latest.md").write_text(markdown)
    print()
    print(markdown)
    print(f"total wall time {wall:.0f} s; wrote {args.results / 'latest.json'} and {args.results / 'latest.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
