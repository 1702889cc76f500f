"""The machine's floor (bench/floor.py) at a tiny size: every mode does a job's whole work, and the records stick."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.floor import GRID_AND_RECORDS, MODES, Floor, on_grid, render, run_floor
from bench.sim_server import API_KEY, BUDGET_YEN
from bench.timescale import JOB_SECONDS_MAX, JOB_SECONDS_MIN, POLL_INTERVAL_S, TimeScale
from tests.conftest import SimulatorFactory

#: Production minutes in a fraction of a second: a job of 60-180 s takes 0.2-0.6 s.
SCALE = TimeScale(300.0)
JOBS = 6


def test_a_moment_waits_for_the_next_line_of_the_grid() -> None:
    assert on_grid(10.0, 0.5) == 10.0
    assert on_grid(10.01, 0.5) == 10.5
    assert on_grid(10.49, 0.5) == 10.5
    assert on_grid(10.01, 0.0) == 10.01  # no grid: its own moment


@pytest.mark.parametrize("mode", MODES)
async def test_each_mode_creates_polls_until_done_and_downloads_every_job(
    mode: str, start_simulator: SimulatorFactory, tmp_path: Path
) -> None:
    simulator = await start_simulator(
        api_key=API_KEY,
        job_seconds=SCALE.seconds(JOB_SECONDS_MIN),
        job_seconds_max=SCALE.seconds(JOB_SECONDS_MAX),
        max_budget=BUDGET_YEN,
    )
    floor = await run_floor(simulator.base_url, JOBS, SCALE, tmp_path, mode=mode)
    assert (floor.mode, floor.jobs, floor.creates, floor.downloads) == (mode, JOBS, JOBS, JOBS)
    assert simulator.creates_accepted == JOBS
    # The first poll comes at the shortest duration, when no job is done yet: each job is polled at least twice.
    assert floor.status >= 2 * JOBS
    # ...and then once an interval until it is: a few polls a job, never a busy loop.
    assert floor.status <= JOBS * (2 + (JOB_SECONDS_MAX - JOB_SECONDS_MIN) / POLL_INTERVAL_S)
    assert floor.requests == floor.creates + floor.status + floor.downloads
    assert floor.cpu_s > 0 and floor.cpu_ms_per_request == pytest.approx(1000 * floor.cpu_s / floor.requests)
    assert not list(tmp_path.glob("*.mp4"))  # every download's file was removed
    database = tmp_path / "floor.sqlite3"
    if mode == GRID_AND_RECORDS:
        with sqlite3.connect(database) as db:
            rows = db.execute("SELECT state, service_id IS NOT NULL FROM job").fetchall()
        assert rows == [("delivered", 1)] * JOBS
    else:
        assert not database.exists()


def test_figures_per_job_and_per_request() -> None:
    floor = Floor("grid", jobs=10, creates=10, status=45, downloads=10, cpu_s=0.026, wall_s=1.0)
    assert floor.requests == 65
    assert floor.cpu_ms_per_job == pytest.approx(2.6)
    assert floor.cpu_ms_per_request == pytest.approx(0.4)
    assert floor.as_dict()["cpu_ms_per_job"] == 2.6


def test_the_report_gives_each_mode_its_median_and_range() -> None:
    runs = [
        Floor("own moments", jobs=10, creates=10, status=45, downloads=10, cpu_s=cpu, wall_s=1.0)
        for cpu in (0.030, 0.026, 0.040)  # median 3.0 ms a job, mean 3.2
    ] + [Floor("grid", jobs=10, creates=10, status=44, downloads=10, cpu_s=0.020, wall_s=1.0)]
    markdown = render(runs, 10.0, "python -m bench.floor")
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in markdown.splitlines()
            if line.startswith("| own") or line.startswith("| grid")}  # fmt: skip
    assert rows["own moments"][1:6] == ["3", "10", "6.50", "3.00", "2.60-4.00"]
    assert rows["own moments"][6].rstrip(" |") == "0.462"  # the median of 0.400, 0.462 and 0.615 ms a request
    assert rows["grid"][1:6] == ["1", "10", "6.40", "2.00", "2.00-2.00"]
    assert GRID_AND_RECORDS not in rows  # a mode not run is left out
