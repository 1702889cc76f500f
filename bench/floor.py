"""What a job's requests cost this machine's CPU at the least: `python -m bench.floor`.

A loop that does for each job only what every bot must do on the wire and on disk, and none of what
makes a bot safe: its create, a first status request at the shortest duration and then one every interval
until the job is done (about 4.5 a job, the count `ours-1000` sends), its download streamed to a file, and
the file's removal. No database, no log, no retry, no check of an answer, no pacer: the creates leave at the
pacing of `ours-1000`, each at its moment. It runs against the benchmark's simulator (its own process),
time-compressed as the suite is, and reports its own process's CPU per job and per request, twice:

- `own moments`: every request at its own moment, as a per-job schedule sends them;
- `grid`: every status request waits for the next line of a grid (GRID_S production seconds apart), so
  requests due together leave in one turn of the loop and their answers come back together;
- `grid + records`: the same, and the four records a bot must keep so that a fault loses nothing (the
  request before its create, the service's id, completed, delivered), each one SQLite statement committed
  to the disk (WAL, synchronous=FULL) through aiosqlite, as the bot keeps them.

The difference between the first two is what the machine charges for waking the loop once per request; the
third is the least a bot that keeps design.md's promises costs here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import aiosqlite

from bench.report import machine
from bench.scenarios import Scenario
from bench.sim_server import API_KEY
from bench.suite import DEFAULT_K, RESULTS, running_simulator, simulator_command
from bench.timescale import JOB_SECONDS_MAX, JOB_SECONDS_MIN, POLL_INTERVAL_S, UNBOUND_PACER_PER_S, TimeScale
from bot.simulator.app import CREATE_PATH, JOBS_PREFIX, MODEL_ID

#: Production seconds between two lines of the grid: at most this much added to a job's lag.
GRID_S = 0.5
#: Bytes read from a download at a time.
CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class Floor:
    mode: str
    jobs: int
    creates: int
    status: int
    downloads: int
    cpu_s: float
    wall_s: float

    @property
    def requests(self) -> int:
        return self.creates + self.status + self.downloads

    @property
    def cpu_ms_per_job(self) -> float:
        return 1000 * self.cpu_s / self.jobs

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.cpu_s / max(1, self.requests)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "requests": self.requests, "cpu_ms_per_job": round(self.cpu_ms_per_job, 3),
                "cpu_ms_per_request": round(self.cpu_ms_per_request, 3)}  # fmt: skip


def on_grid(moment: float, grid: float) -> float:
    """The first line of the grid at or after `moment` (time.monotonic()'s); `moment` itself without a grid."""
    return math.ceil(moment / grid) * grid if grid > 0 else moment


OWN_MOMENTS, GRID, GRID_AND_RECORDS = MODES = ("own moments", "grid", "grid + records")


class _Records:
    """A job's records, each statement its own transaction on the disk; nothing at all without a database."""

    def __init__(self, db: aiosqlite.Connection | None) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path | None) -> _Records:
        if path is None:
            return cls(None)
        db = await aiosqlite.connect(path, isolation_level=None)
        for statement in (
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=FULL",
            "CREATE TABLE job (id INTEGER PRIMARY KEY, prompt TEXT NOT NULL, service_id TEXT, state TEXT NOT NULL)",
        ):
            await db.execute(statement)
        return cls(db)

    async def requested(self, index: int, prompt: str) -> None:
        await self._write("INSERT INTO job (id, prompt, state) VALUES (?, ?, 'requested')", index, prompt)

    async def accepted(self, index: int, service_id: str) -> None:
        await self._write("UPDATE job SET service_id = ?, state = 'pending' WHERE id = ?", service_id, index)

    async def ended(self, index: int, state: str) -> None:
        await self._write("UPDATE job SET state = ? WHERE id = ?", state, index)

    async def _write(self, sql: str, *params: object) -> None:
        if self._db is not None:
            await self._db.execute(sql, params)

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()


async def run_floor(base_url: str, jobs: int, scale: TimeScale, workdir: Path, *, mode: str = OWN_MOMENTS) -> Floor:
    """`jobs` jobs through the least a bot must do, in one of MODES."""
    grid = scale.seconds(GRID_S) if mode != OWN_MOMENTS else 0.0
    spacing = 1.0 / scale.rate(UNBOUND_PACER_PER_S)
    first_poll = scale.seconds(JOB_SECONDS_MIN)
    interval = scale.seconds(POLL_INTERVAL_S)
    sent: Counter[str] = Counter()
    workdir.mkdir(parents=True, exist_ok=True)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    records = await _Records.open(workdir / "floor.sqlite3" if mode == GRID_AND_RECORDS else None)
    try:
        async with aiohttp.ClientSession(base_url, headers=headers) as http:

            async def one(index: int, at: float) -> None:
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                prompt = f"floor video {index}"
                await records.requested(index, prompt)
                body = {"model": MODEL_ID, "prompt": prompt, "seed": index}
                async with http.post(CREATE_PATH, json=body) as response:
                    job_id = (await response.json())["id"]
                sent["create"] += 1
                await records.accepted(index, job_id)
                due = time.monotonic() + first_poll
                while True:
                    await asyncio.sleep(max(0.0, on_grid(due, grid) - time.monotonic()))
                    async with http.get(f"{JOBS_PREFIX}/{job_id}") as response:
                        status = (await response.json())["status"]
                    sent["status"] += 1
                    if status in ("completed", "failed"):
                        break
                    due = time.monotonic() + interval
                await records.ended(index, status)
                if status == "failed":
                    return
                video = workdir / f"{job_id}.mp4"
                async with http.get(f"{JOBS_PREFIX}/{job_id}/content") as response:
                    with video.open("wb") as file:
                        async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                            file.write(chunk)
                sent["download"] += 1
                video.unlink()
                await records.ended(index, "delivered")

            started = time.monotonic()
            cpu_started = time.process_time()
            await asyncio.gather(*(one(index, started + index * spacing) for index in range(jobs)))
            cpu = time.process_time() - cpu_started
            wall = time.monotonic() - started
    finally:
        await records.close()
    return Floor(mode, jobs, sent["create"], sent["status"], sent["download"], cpu, wall)


def measure(jobs: int, scale: TimeScale, repeats: int, seed: int = 0) -> list[Floor]:
    """Every mode `repeats` times, each run against a simulator of its own with the durations of `ours-1000`.

    The modes take turns, so a machine that drifts over the minutes drifts under all of them alike.
    """
    scenario = Scenario(name="floor", group="floor", loop="ours", jobs=jobs,
                        job_seconds=(JOB_SECONDS_MIN, JOB_SECONDS_MAX))  # fmt: skip
    floors = []
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        for repeat in range(repeats):
            for number, mode in enumerate(MODES):
                workdir = Path(tmp) / f"run-{repeat}-{number}"
                workdir.mkdir()
                command = simulator_command(scenario, scale, workdir / "simulator.json", seed)
                with running_simulator(command, f"the floor's {mode} run") as base_url:
                    floors.append(asyncio.run(run_floor(base_url, jobs, scale, workdir, mode=mode)))
    return floors


def render(floors: Sequence[Floor], k: float, command: str) -> str:
    """One line per mode: the median of its runs, and their range."""
    host = machine()
    lines = [
        "# The machine's floor: CPU for a job's requests and nothing else",
        "",
        f"Command: `{command}`, K = {k:g}. Machine: {host['cpu']}, {host['cores']} cores, Python {host['python']}, "
        f"aiohttp {host['aiohttp']}, SQLite {host['sqlite']}.",
        "",
        "| mode | runs | jobs per run | requests/job | CPU ms/job, median | lowest-highest | CPU ms/request, median |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for mode in MODES:
        runs = [floor for floor in floors if floor.mode == mode]
        if not runs:
            continue
        per_job = sorted(floor.cpu_ms_per_job for floor in runs)
        requests = sum(floor.requests for floor in runs) / sum(floor.jobs for floor in runs)
        lines.append(
            f"| {mode} | {len(runs)} | {runs[0].jobs:,} | {requests:.2f} | {statistics.median(per_job):.2f} | "
            f"{per_job[0]:.2f}-{per_job[-1]:.2f} | {statistics.median(f.cpu_ms_per_request for f in runs):.3f} |"
        )
    lines += ["", (__doc__ or "").split("\n\n", 1)[1].strip(), ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs per mode (default %(default)s)")
    parser.add_argument("--k", type=float, default=DEFAULT_K, help="time compression factor (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each mode (default %(default)s)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="output folder (default bench/results)")
    args = parser.parse_args(argv)
    scale = TimeScale(args.k)
    floors = measure(args.jobs, scale, args.repeats)
    command = " ".join(["python -m bench.floor", *(sys.argv[1:] if argv is None else argv)])
    markdown = render(floors, scale.k, command)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "floor.json").write_text(json.dumps([floor.as_dict() for floor in floors], indent=2) + "\n")
    (args.results / "floor.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
