"""The scaling benchmark at a tiny size: it runs end to end and its figures add up."""

from __future__ import annotations

import json
from pathlib import Path

from bench import suite
from bench.report import percentile
from bench.sim_server import CompressedPlatform
from bench.timescale import TimeScale
from bot.simulator import VideoServiceSimulator
from bot.worker import WorkerConfig

REQUIRED = {
    "name", "jobs", "interval_s", "status_per_job", "floor_per_job", "creates_per_job", "downloads_per_job",
    "responses_429", "lag_p50_s", "lag_p95_s", "lag_p99_s", "peak_rss_mib", "cpu_ms_per_poll", "db_bytes_per_job",
}  # fmt: skip


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 1.0) == 4.0


def test_time_scale_compresses_durations_and_keeps_counts(tmp_path: Path) -> None:
    scale = TimeScale(10)
    config = scale.worker_config(WorkerConfig(storage_dir=tmp_path, poll_interval=20.0, max_concurrency=8))
    assert config.poll_interval == 2.0
    assert config.idle_wake == 3.0
    assert config.download_retry.base_delay == 0.5 and config.download_retry.attempts == 6
    assert (config.max_concurrency, config.jitter) == (8, 0.05)
    assert scale.rate(25) == 250
    assert scale.production(1.5) == 15


def test_platform_limit_counts_over_one_production_second() -> None:
    platform = CompressedPlatform(VideoServiceSimulator(), k=10, limit_per_second=3)
    assert platform.window == 0.1
    assert [platform.over_limit() for _ in range(4)] == [False, False, False, True]


def test_a_tiny_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    only = "ours-5,baseline-5,ours-8-limited,download-100kib,download-9mib"
    argv = ["--k", "200", "--small", "5", "--large", "8", "--only", only, "--results", str(tmp_path)]
    assert suite.main(argv) == 0

    runs = json.loads((tmp_path / "latest.json").read_text())
    assert [run["name"] for run in runs] == only.split(",")
    for run in runs:
        assert run.keys() >= REQUIRED, REQUIRED - run.keys()
        assert run["delivered"] == run["jobs"], run["name"]
        assert (run["creates_per_job"], run["downloads_per_job"]) == (1, 1), run["name"]
        assert run["floor_per_job"] >= 1 and run["status_per_job"] >= 1
        assert run["lag_p50_s"] <= run["lag_p99_s"]
    ours = runs[0]
    assert set(ours["vs_baseline"]) >= {"status_per_job", "lag_p99_s", "cpu_ms_per_poll"}
    assert {target["target"] for target in runs[-1]["targets"]} >= {"peak RSS, 9 MiB over 100 KiB download"}

    markdown = (tmp_path / "latest.md").read_text()
    assert "cores" in markdown and "Python" in markdown
    assert "| ours-5 |" in markdown and ("PASS" in markdown or "FAIL" in markdown)
