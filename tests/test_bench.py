"""The scaling benchmark at a tiny size: it runs end to end and its figures add up."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from bench import limit_model, suite
from bench.report import add_targets, combine, grid_detect_p50, percentile, render_markdown
from bench.run_one import StallMonitor
from bench.sim_server import CompressedPlatform
from bench.timescale import TimeScale
from bot.jobs.worker import WorkerConfig
from bot.ops.heap import CollectionPolicy
from bot.simulator import VideoServiceSimulator

REQUIRED = {
    "name", "jobs", "interval_s", "status_per_job", "floor_per_job", "creates_per_job", "downloads_per_job",
    "responses_429", "lag_p50_s", "lag_p95_s", "lag_p99_s", "peak_rss_mib", "cpu_ms_per_poll", "db_bytes_per_job",
}  # fmt: skip


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 1.0) == 4.0


def test_the_grid_reference_is_the_median_wait_of_polls_exactly_an_interval_apart() -> None:
    # Polls at 60 s, then 80, 100...: jobs of 60, 65, 79.5 and 150 s are found 0, 15, 0.5 and 10 s after they end.
    assert grid_detect_p50([60.0, 65.0, 79.5, 150.0], 60.0, 20.0) == pytest.approx(5.25)
    assert grid_detect_p50([50.0], 60.0, 20.0) == 10.0, "done before the first poll"
    assert grid_detect_p50([], 60.0, 20.0) is None


def test_time_scale_compresses_durations_and_keeps_counts(tmp_path: Path) -> None:
    scale = TimeScale(10)
    config = scale.worker_config(WorkerConfig(storage_dir=tmp_path, poll_interval=20.0, max_concurrency=8))
    assert config.poll_interval == 2.0
    assert config.idle_wake == 3.0
    assert config.download_retry.base_delay == 0.5 and config.download_retry.attempts == 6
    assert (config.max_concurrency, config.flush_interval) == (8, 0.5)
    policy = scale.collection_policy(CollectionPolicy())
    assert (policy.every_seconds, policy.check_seconds, policy.at_most_seconds) == (6.0, 1.0, 60.0)
    assert policy.quiet_below == CollectionPolicy().quiet_below, "a count of tasks is no duration"
    assert scale.rate(25) == 250
    assert scale.production(1.5) == 15


def test_platform_limit_counts_over_one_production_second() -> None:
    platform = CompressedPlatform(VideoServiceSimulator(), k=10, limit_per_second=3)
    assert platform.window == 0.1
    assert [platform.over_limit() for _ in range(4)] == [False, False, False, True]


def test_a_tiny_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    # Two bot processes on one PostgreSQL database (the suite starts the server) share 8 jobs.
    only = "ours-5,baseline-5,ours-8-limited,ours-8-postgresql-2proc,download-100kib,download-9mib"
    argv = ["--k", "200", "--small", "5", "--large", "8", "--stream", "0", "--huge", "0", "--only", only,
            "--results", str(tmp_path)]
    assert suite.main(argv) == 0

    runs = json.loads((tmp_path / "latest.json").read_text())
    assert [run["name"] for run in runs] == only.split(",")
    for run in runs:
        assert run.keys() >= REQUIRED, REQUIRED - run.keys()
        assert run["delivered"] == run["jobs"], run["name"]
        assert run["accepted"] == run["jobs"] and not run["refused"], run["name"]  # each request sent once
        assert (run["creates_per_job"], run["downloads_per_job"]) == (1, 1), run["name"]
        assert run["floor_per_job"] >= 1 and run["status_per_job"] >= 1
        assert run["lag_p50_s"] <= run["lag_p99_s"]
    shared = runs[3]
    assert (shared["database"], shared["processes"], shared["duplicate_deliveries"]) == ("postgresql", 2, 0)
    assert shared["responses_429"] == 0 and shared["platform_limit_per_s"] is not None
    assert len(shared["cpu_s_per_process"]) == 2 and all(seconds > 0 for seconds in shared["cpu_s_per_process"])
    assert shared["db_server_cpu_s"] > 0 and shared["db_bytes_per_job"] > 0
    ours = runs[0]
    assert set(ours["vs_baseline"]) >= {"status_per_job", "lag_p99_s", "cpu_ms_per_poll"}
    # The same durations under an exact grid of polls, beside the lag p50 it explains.
    assert 0 <= ours["grid_detect_p50_s"] <= ours["interval_s"]
    median = next(target for target in ours["targets"] if target["target"] == "lag p50")
    assert f"{ours['grid_detect_p50_s']:.2f} s to detection" in median["measured"]
    assert {target["target"] for target in runs[-1]["targets"]} >= {"peak RSS, 9 MiB over 100 KiB download"}

    markdown = (tmp_path / "latest.md").read_text()
    assert "cores" in markdown and "Python" in markdown
    assert "| ours-5 |" in markdown
    # The figures of a tiny run are not the targets' business, but the Markdown must say what the JSON says,
    # and the targets met by construction above must read PASS.
    verdicts = _verdicts(markdown)
    assert {key: verdict for key, verdict in verdicts.items() if key[0] != "all"} == _json_verdicts(runs)
    for name in ("ours-5", "ours-8-limited", "ours-8-postgresql-2proc"):
        for target in ("one create per job", "one download per job", "every job delivered"):
            assert verdicts[name, target] == "PASS", (name, target)
    assert verdicts.keys() >= {("all", "whole benchmark wall time")}
    assert "## PostgreSQL and two processes" in markdown and "| ours-8-postgresql-2proc | postgresql | 2 |" in markdown


def _measured(deliveries: dict[str, float], cpu_s: float, peak_rss_kib: int) -> dict[str, Any]:
    """What one bot process of a run writes (bench/run_one.py), cut to what combine() reads."""
    return {
        "loop": "ours", "jobs": 2, "accepted": 2, "submit_errors": {}, "deliveries": deliveries, "requested": {},
        "worst_stall_ms": 5.0, "worst_busy_stall_ms": 1.0, "duplicates": 0, "announcements": {},
        "states": {"delivered": 2}, "timed_out": False, "started_at": 10.0, "finished_at": 20.0, "cpu_s": cpu_s,
        "cpu_s_by_thread": {"event loop": cpu_s}, "rss_start_kib": 50_000, "peak_rss_kib": peak_rss_kib,
        "run_peak_kib": peak_rss_kib, "db_bytes": 0,
    }  # fmt: skip


def test_two_processes_are_one_run_and_a_video_both_posted_counts_twice() -> None:
    one = _measured({"a": 11.0, "b": 12.0}, cpu_s=1.5, peak_rss_kib=60_000)
    other = _measured({"c": 13.0, "b": 12.5}, cpu_s=2.0, peak_rss_kib=70_000)
    run = combine([one, other])
    assert run["deliveries"] == {"a": 11.0, "b": 12.0, "c": 13.0}  # the first arrival counts for the lag
    assert run["duplicates"] == 1
    assert (run["jobs"], run["accepted"], run["states"]) == (4, 4, {"delivered": 4})
    assert run["cpu_s"] == 3.5 and run["cpu_s_by_thread"] == {"event loop": 3.5}
    assert (run["peak_rss_kib"], run["peak_rss_kib_per_process"], run["cpu_s_per_process"]) == (
        70_000, [60_000, 70_000], [1.5, 2.0]
    )


def _verdicts(markdown: str) -> dict[tuple[str, str], str]:
    """(run, target) -> PASS or FAIL, read from the Markdown's Targets table."""
    lines = markdown.splitlines()
    start = lines.index("## Targets")
    assert lines[start + 2] == "| run | target | measured | limit | result |"
    verdicts: dict[tuple[str, str], str] = {}
    for line in lines[start + 4:]:
        if not line.startswith("|"):
            break
        run, target, _measured, _limit, result = (cell.strip() for cell in line.strip("|").split("|"))
        assert (run, target) not in verdicts, (run, target)
        verdicts[run, target] = {"PASS": "PASS", "**FAIL**": "FAIL"}[result]
    return verdicts


def _json_verdicts(runs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    return {
        (run["name"], target["target"]): "PASS" if target["pass"] else "FAIL"
        for run in runs for target in run.get("targets", [])
    }


def _run(name: str, group: str, loop: str, jobs: int, **figures: Any) -> dict[str, Any]:
    """A run as summarise() leaves it, every figure meeting its target unless given."""
    return {
        "name": name, "group": group, "loop": loop, "jobs": jobs, "delivered": jobs, "duplicate_deliveries": 0,
        "platform_limit_per_s": None, "max_requests_per_second": 100.0, "pacer_burst": 1,
        "creates_per_job": 1.0, "downloads_per_job": 1.0, "status_per_job": 4.0, "floor_per_job": 6.5,
        "responses_429": 0, "responses_429_by_endpoint": {}, "requests_sent": 10_000,
        "lag_p50_s": 10.0, "lag_p99_s": 20.0, "cpu_ms_per_poll": 1.0, "cpu_ms_per_job": 3.0, "peak_rss_mib": 60.0,
        "start_rss_mib": 50.0, "run_peak_rss_mib": 55.0, "worst_stall_ms": 10.0, "arrival_rate": None,
        "profile": "uniform", "request_to_post_p99_s": 200.0, "recovered_lag_p99_s": None,
        **figures,
    }  # fmt: skip


def test_the_report_gives_each_target_the_verdict_its_figures_earn() -> None:
    # Poll interval 20 s: lag p50 <= 10.4 s, p99 <= 20.6 s; status/job <= 0.72 x floor (0.7 bimodal);
    # CPU <= 3.5 ms/job, flat (<= 1.25 x) from the smallest size; stall <= 50 ms and RSS <= 150 MiB at the
    # large size and above; under the limit: no 429 and lag p99 <= 55 s; the speed-up stream: p99 <= 30 s
    # over the run and <= 20.6 s after 50 jobs at the new speed.
    runs = [
        _run("ours-100", "100", "ours", 100, cpu_ms_per_job=2.0),
        _run("ours-1000", "1000", "ours", 1000, status_per_job=4.69, lag_p50_s=10.41, lag_p99_s=20.6,
             cpu_ms_per_job=3.6, worst_stall_ms=50.0, peak_rss_mib=150.1),
        _run("baseline-1000", "1000", "baseline", 1000, lag_p99_s=90.0, cpu_ms_per_poll=9.0),
        _run("ours-1000-limited", "1000-limited", "ours", 1000, platform_limit_per_s=25.0,
             max_requests_per_second=20.0, duplicate_deliveries=1, responses_429=1, lag_p99_s=55.0),
        _run("ours-stream-speedup", "stream-speedup", "ours", 600, arrival_rate=2.0, profile="speedup",
             lag_p99_s=30.1, recovered_lag_p99_s=20.6),
        _run("ours-stream-bimodal", "stream-bimodal", "ours", 600, arrival_rate=2.0, profile="bimodal",
             status_per_job=4.56, lag_p99_s=20.7),
        _run("ours-10000", "10000", "ours", 10_000, cpu_ms_per_job=2.6),
        _run("ours-1000-postgresql-2proc", "1000-postgresql-2proc", "ours", 1000, platform_limit_per_s=125.0,
             responses_429=1, lag_p99_s=60.0, database="postgresql", processes=2),
        _run("download-100kib", "download", "ours", 1, peak_rss_mib=51.0, run_peak_rss_mib=52.0),
        _run("download-9mib", "download", "ours", 1, peak_rss_mib=52.9, run_peak_rss_mib=60.0),
    ]  # fmt: skip
    add_targets(runs, large=1000)
    host = {"cpu": "test", "cores": 2, "python": "3.11", "os": "Linux", "aiohttp": "3", "sqlite": "3"}
    markdown = render_markdown(runs, host, k=10, wall_s=1200.0)

    basics = ("one create per job", "one download per job", "every job delivered")
    expected = {
        **{("ours-100", target): "PASS" for target in basics},
        ("ours-100", "CPU per job"): "PASS",
        ("ours-100", "status requests per job"): "PASS",
        ("ours-100", "lag p50"): "PASS",
        ("ours-100", "lag p99"): "PASS",
        **{("ours-1000", target): "PASS" for target in basics},
        ("ours-1000", "CPU per job"): "FAIL",
        ("ours-1000", "worst event-loop stall"): "PASS",  # exactly 50 ms
        ("ours-1000", "peak RSS"): "FAIL",
        ("ours-1000", "status requests per job"): "FAIL",  # 4.69 > 0.72 x 6.5 = 4.68
        ("ours-1000", "lag p50"): "FAIL",
        ("ours-1000", "lag p99"): "PASS",  # exactly 1.03 x interval
        ("ours-1000-limited", "one create per job"): "PASS",
        ("ours-1000-limited", "one download per job"): "PASS",
        ("ours-1000-limited", "every job delivered"): "FAIL",  # one video posted twice
        ("ours-1000-limited", "429 responses"): "FAIL",
        ("ours-1000-limited", "lag p99 under the limit"): "PASS",  # exactly 55 s
        ("ours-1000-limited", "request to post p99 (reported: creates are not delayed)"): "PASS",
        **{("ours-stream-speedup", target): "PASS" for target in basics},
        ("ours-stream-speedup", "lag p99 over the whole run"): "FAIL",
        ("ours-stream-speedup", "lag p99 after the first 50 jobs at the new speed"): "PASS",
        **{("ours-stream-bimodal", target): "PASS" for target in basics},
        ("ours-stream-bimodal", "status requests per job"): "FAIL",  # 4.56 > 0.7 x 6.5 = 4.55
        ("ours-stream-bimodal", "lag p99"): "FAIL",
        **{("ours-10000", target): "PASS" for target in basics},
        ("ours-10000", "CPU per job"): "PASS",
        ("ours-10000", "worst event-loop stall"): "PASS",
        ("ours-10000", "peak RSS"): "PASS",
        ("ours-10000", "CPU per job flat from 100 jobs"): "FAIL",  # 1.3 x
        # The speed targets are the SQLite runs'; the PostgreSQL runs' limit is there to count 429s.
        **{("ours-1000-postgresql-2proc", target): "PASS" for target in basics},
        ("ours-1000-postgresql-2proc", "429 responses"): "FAIL",
        ("download-9mib", "peak RSS, 9 MiB over 100 KiB download"): "PASS",  # +1.9 MiB
        ("download-9mib", "RSS growth while downloading, 9 MiB over 100 KiB"): "FAIL",  # +8 MiB
        ("all", "whole benchmark wall time"): "FAIL",  # the limit is strictly under 1,200 s
    }
    assert _verdicts(markdown) == expected


def test_the_limit_model_detects_every_job_and_ranks_the_longest_waiting_poll_best_at_the_tail() -> None:
    due = limit_model.run(limit_model.due_order, seed=1)
    chance = limit_model.run(limit_model.chance_order, seed=1)
    for outcome in (due, chance):
        assert 0.0 <= outcome.lag_p50 <= outcome.lag_p99 <= outcome.lag_max
        assert outcome.polls_per_job >= 1.0  # every job was found done by a poll
    assert chance.lag_p50 < due.lag_p50 and due.lag_p99 < chance.lag_p99


def test_the_fluid_estimate_is_the_interval_while_the_rate_suffices_and_grows_as_the_rate_binds() -> None:
    free = limit_model.fluid_lag_p99(jobs=10)
    # Polls one interval apart: a job's lag is anywhere in it, so the p99 is 99 % of the interval.
    assert free.longest_gap == 20.0 and free.lag_p99 == 19.8
    # The limited run (1,000 jobs, 20 requests a second): about 800 jobs running while 8 a second end, each
    # taking a download; the last figures measured by hand (a model: deterministic).
    limited = limit_model.fluid_lag_p99()
    assert limited.lag_p99 == pytest.approx(59.8, abs=0.5) and limited.longest_gap == pytest.approx(67.8, abs=1)
    assert limit_model.fluid_lag_p99(rate=25.0).lag_p99 < 50.0 < limited.lag_p99
    # Jobs of 10-60 s: the creates take every slot of the first 50 s, and the jobs wait for them.
    quick = limit_model.fluid_lag_p99(shortest=10.0, longest=60.0)
    assert quick.longest_gap == pytest.approx(89.7, abs=1)


async def test_the_stall_monitor_times_the_longest_turn_and_its_part_on_the_cpu() -> None:
    monitor = StallMonitor()
    monitor.start()
    try:
        await asyncio.sleep(0.01)  # a turn or two of nothing
        time.sleep(0.08)  # noqa: ASYNC251 - a turn that blocks the loop, off the CPU: what is measured
        await asyncio.sleep(0)
        spin_until = time.thread_time() + 0.03
        while time.thread_time() < spin_until:  # a turn that works 30 ms on the CPU
            pass
        await asyncio.sleep(0.01)
    finally:
        await monitor.stop()
    assert monitor.worst >= 0.08
    assert 0.03 <= monitor.worst_busy < 0.07, "the blocked turn's wait is not counted as work on the CPU"
