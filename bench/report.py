"""From what the two processes of each run measured to production-equivalent figures, targets and Markdown."""

from __future__ import annotations

import math
import os
import platform
import sqlite3
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from bench.scenarios import HUGE_K, Scenario
from bench.timescale import POLL_INTERVAL_S, UNBOUND_PACER_PER_S, TimeScale, bot_burst

#: The full suite (with the 10,000-job pair) on 2 shared cores; `--quick` stays far below.
MAX_WALL_SECONDS = 1200.0
#: "Back to the old lag within this many completed jobs" after the service got faster.
RECOVERY_JOBS = 50
#: The issue's targets (issue 14), in multiples of the poll interval where they are lags.
CPU_MS_PER_JOB = 3.5
POLLS_OVER_FLOOR = 0.72
BIMODAL_POLLS_OVER_FLOOR = 0.70
LAG_P50_X = 0.52
LAG_P99_X = 1.03
STREAM_LAG_P99_X = 1.5
LIMITED_LAG_P99_S = 55.0
PEAK_RSS_MIB = 150.0
WORST_STALL_MS = 50.0
#: "Flat from 100 to 10,000 jobs": CPU per job at the largest size at most this multiple of the smallest's.
FLAT_CPU_RATIO = 1.25
MIB = 1024 * 1024


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def grid_detect_p50(durations: Sequence[float], shortest: float, interval: float) -> float | None:
    """The median time to detection of polls sent exactly at `shortest`, then every `interval`, for these durations.

    No schedule with polls an interval apart does much better on the same jobs: the lag p50 target (0.52 of an
    interval) is measured on one draw of durations, whose own median under such a grid moves with the draw (about
    0.3 s either way at 100 jobs).
    """
    return percentile(
        [
            shortest - duration if duration <= shortest
            else interval * math.ceil((duration - shortest) / interval) - (duration - shortest)
            for duration in durations
        ],
        0.50,
    )  # fmt: skip


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _burst(scenario: Scenario) -> int | None:
    if scenario.pacer_rate is None:
        return None
    return scenario.pacer_burst if scenario.pacer_burst is not None else bot_burst(scenario.pacer_rate)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def combine(bots: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The measurements of a run's bot processes as one: counts and CPU summed, memory and stalls at their
    worst, a job posted by two processes a duplicate. One process's are returned as they are."""
    if len(bots) == 1:
        (bot,) = bots
        return {**bot, "cpu_s_per_process": [bot["cpu_s"]], "peak_rss_kib_per_process": [bot["peak_rss_kib"]]}
    deliveries: dict[str, float] = {}
    duplicates = sum(bot["duplicates"] for bot in bots)
    for bot in bots:
        for job_id, at in bot["deliveries"].items():
            if job_id in deliveries:
                duplicates += 1
                at = min(at, deliveries[job_id])
            deliveries[job_id] = at

    def summed(key: str) -> dict[str, Any]:
        total: Counter[str] = Counter()
        for bot in bots:
            total.update(bot.get(key, {}))
        return dict(total)

    run_peaks = [bot["run_peak_kib"] for bot in bots]
    return {
        "loop": bots[0]["loop"],
        "jobs": sum(bot["jobs"] for bot in bots),
        "accepted": sum(bot["accepted"] for bot in bots),
        "submit_errors": summed("submit_errors"),
        "deliveries": deliveries,
        "requested": {job_id: at for bot in bots for job_id, at in bot.get("requested", {}).items()},
        "worst_stall_ms": max(bot["worst_stall_ms"] for bot in bots),
        "worst_busy_stall_ms": max(bot["worst_busy_stall_ms"] for bot in bots),
        "worst_in_flight_stall_ms": max(bot.get("worst_in_flight_stall_ms", 0.0) for bot in bots),
        "worst_busy_in_flight_stall_ms": max(bot.get("worst_busy_in_flight_stall_ms", 0.0) for bot in bots),
        "duplicates": duplicates,
        "announcements": summed("announcements"),
        "states": summed("states"),
        "timed_out": any(bot["timed_out"] for bot in bots),
        "started_at": min(bot["started_at"] for bot in bots),
        "finished_at": max(bot["finished_at"] for bot in bots),
        "cpu_s": sum(bot["cpu_s"] for bot in bots),
        "cpu_s_by_thread": {
            kind: sum(bot.get("cpu_s_by_thread", {}).get(kind, 0.0) for bot in bots)
            for kind in {kind for bot in bots for kind in bot.get("cpu_s_by_thread", {})}
        },
        "rss_start_kib": max(bot["rss_start_kib"] for bot in bots),
        "peak_rss_kib": max(bot["peak_rss_kib"] for bot in bots),
        "run_peak_kib": None if None in run_peaks else max(run_peaks),
        "db_bytes": sum(bot["db_bytes"] for bot in bots),
        "cpu_s_per_process": [bot["cpu_s"] for bot in bots],
        "peak_rss_kib_per_process": [bot["peak_rss_kib"] for bot in bots],
    }


def summarise(scenario: Scenario, bot: Mapping[str, Any], sim: Mapping[str, Any], scale: TimeScale) -> dict[str, Any]:
    """One run's figures, durations in production-equivalent seconds."""
    interval = POLL_INTERVAL_S
    jobs = scenario.jobs
    requests: Mapping[str, int] = sim["requests"]
    refused: Mapping[str, int] = sim["responses_429"]
    status_requests = requests.get("status", 0)
    deliveries: Mapping[str, float] = bot["deliveries"]
    sim_jobs: Sequence[Mapping[str, Any]] = sim["jobs"]
    lags = [
        scale.production(deliveries[job["id"]] - job["completed_at"]) for job in sim_jobs if job["id"] in deliveries
    ]
    # The lag in two parts: until a status answer says completed, then until the sink has the video.
    detect = [
        scale.production(job["seen_completed_at"] - job["completed_at"])
        for job in sim_jobs
        if job.get("seen_completed_at") is not None
    ]
    post = [
        scale.production(deliveries[job["id"]] - job["seen_completed_at"])
        for job in sim_jobs
        if job.get("seen_completed_at") is not None and job["id"] in deliveries
    ]
    # A job needs at least one poll per interval it runs; durations are compared in run seconds.
    floors = [math.ceil(job["duration"] / scale.seconds(interval) - 1e-9) for job in sim_jobs]
    wall = bot["finished_at"] - bot["started_at"]
    lag_p50, lag_p95, lag_p99 = (percentile(lags, q) for q in (0.50, 0.95, 0.99))
    requested: Mapping[str, float] = bot.get("requested", {})
    request_to_post = [
        scale.production(deliveries[job_id] - at) for job_id, at in requested.items() if job_id in deliveries
    ]
    # After the service got faster: the jobs created since, in the order they completed, past the first 50.
    recovered = None
    if scenario.profile == "speedup":
        later = sorted(
            (job for job in sim_jobs if job["index"] >= scenario.speedup_after and job["id"] in deliveries),
            key=lambda job: job["completed_at"],
        )[RECOVERY_JOBS:]
        recovered = percentile([scale.production(deliveries[j["id"]] - j["completed_at"]) for j in later], 0.99)
    # Uniform durations only: elsewhere the shortest duration moves (speed-up) or jobs cluster (bimodal).
    grid = None
    if scenario.profile == "uniform":
        shortest = scenario.job_seconds[0]
        grid = grid_detect_p50([scale.production(job["duration"]) for job in sim_jobs], shortest, interval)
    status_per_job = status_requests / jobs
    floor_per_job = _mean(floors)
    # PostgreSQL's server works in processes of its own; SQLite's work is in the bot's CPU already.
    server_cpu_s: float | None = bot.get("db_server_cpu_s")
    with_server_s = bot["cpu_s"] + (server_cpu_s or 0.0)
    return {
        "name": scenario.name,
        "group": scenario.group,
        "loop": scenario.loop,
        "jobs": jobs,
        "k": scale.k,
        "interval_s": interval,
        "job_seconds": list(scenario.job_seconds),
        "platform_limit_per_s": scenario.platform_limit,
        "max_requests_per_second": scenario.pacer_rate,
        "pacer_burst": _burst(scenario),
        "max_concurrency": scenario.max_concurrency if scenario.loop == "ours" else 1,
        "video_bytes": scenario.video_bytes,
        "accepted": bot["accepted"],
        # Requests the bot refused (a create or key-info read that met 429s past its retries): never accepted.
        "refused": bot.get("submit_errors", {}),
        "delivered": len(deliveries),
        "duplicate_deliveries": bot["duplicates"],
        "timed_out": bot["timed_out"],
        "final_states": bot["states"],
        "status_requests": status_requests,
        "status_per_job": _round(status_per_job),
        "floor_per_job": _round(floor_per_job),
        "status_over_floor": _round(status_per_job - floor_per_job if floor_per_job is not None else None),
        "creates_per_job": _round(sim["creates_accepted"] / jobs),
        "create_requests_per_job": _round(requests.get("create", 0) / jobs),
        # The bot checks the key's budget before each create: part of every job's cost.
        "key_info_per_job": _round(requests.get("key_info", 0) / jobs),
        "downloads_per_job": _round(requests.get("download", 0) / jobs),
        "requests_sent": sum(requests.values()),
        "responses_429": sum(refused.values()),
        "responses_429_by_endpoint": dict(refused),
        "lag_p50_s": _round(lag_p50, 2),
        "lag_p95_s": _round(lag_p95, 2),
        "lag_p99_s": _round(lag_p99, 2),
        "lag_max_s": _round(max(lags) if lags else None, 2),
        "detect_p50_s": _round(percentile(detect, 0.50), 2),
        "grid_detect_p50_s": _round(grid, 2),
        "detect_p99_s": _round(percentile(detect, 0.99), 2),
        "post_p50_s": _round(percentile(post, 0.50), 2),
        "post_p99_s": _round(percentile(post, 0.99), 2),
        "lag_p50_x": _round(lag_p50 / interval if lag_p50 is not None else None),
        "lag_p95_x": _round(lag_p95 / interval if lag_p95 is not None else None),
        "lag_p99_x": _round(lag_p99 / interval if lag_p99 is not None else None),
        "peak_rss_mib": _round(bot["peak_rss_kib"] / 1024, 1),
        "start_rss_mib": _round(bot["rss_start_kib"] / 1024, 1),
        "run_peak_rss_mib": _round(bot["run_peak_kib"] / 1024, 1) if bot["run_peak_kib"] is not None else None,
        "cpu_s": _round(bot["cpu_s"]),
        "cpu_ms_per_poll": _round(1000 * bot["cpu_s"] / status_requests if status_requests else None),
        "cpu_ms_per_job": _round(1000 * bot["cpu_s"] / jobs),
        "database": scenario.database,
        "processes": scenario.processes,
        # Summed over the bot's processes; per process below.
        "cpu_s_per_process": [_round(seconds) for seconds in bot.get("cpu_s_per_process", [bot["cpu_s"]])],
        "peak_rss_mib_per_process": [
            _round(kib / 1024, 1) for kib in bot.get("peak_rss_kib_per_process", [bot["peak_rss_kib"]])
        ],
        "db_server_cpu_s": _round(server_cpu_s),
        "db_server_cpu_ms_per_job": _round(1000 * server_cpu_s / jobs if server_cpu_s is not None else None),
        "cpu_ms_per_job_with_db": _round(1000 * with_server_s / jobs),
        # Where it goes: the event loop's thread, aiosqlite's thread (SQL and commits), the executor (files).
        "cpu_ms_per_job_by_thread": {
            kind: _round(1000 * seconds / jobs) for kind, seconds in bot.get("cpu_s_by_thread", {}).items()
        },
        "worst_stall_ms": _round(bot.get("worst_stall_ms"), 1),
        "worst_busy_stall_ms": _round(bot.get("worst_busy_stall_ms"), 1),
        "worst_in_flight_stall_ms": _round(bot.get("worst_in_flight_stall_ms"), 1),
        "worst_busy_in_flight_stall_ms": _round(bot.get("worst_busy_in_flight_stall_ms"), 1),
        "request_to_post_p99_s": _round(percentile(request_to_post, 0.99), 1),
        "recovered_lag_p99_s": _round(recovered, 2),
        "arrival_rate": scenario.arrival_rate,
        "profile": scenario.profile,
        # Share of one core the bot used while running: well below 1 means the loop was not CPU-bound.
        "cpu_busy": _round(bot["cpu_s"] / wall if wall > 0 else None),
        "db_bytes_per_job": round(bot["db_bytes"] / jobs),
        "span_s": _round(scale.production(wall), 1),
        "run_wall_s": _round(wall, 2),
    }


@dataclass(frozen=True)
class Target:
    what: str
    measured: str
    limit: str
    passed: bool

    def as_json(self) -> dict[str, Any]:
        return {"target": self.what, "measured": self.measured, "limit": self.limit, "pass": self.passed}


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or theirs == 0:
        return None
    return round(ours / theirs, 3)


RATIO_METRICS = (
    "status_per_job", "responses_429", "lag_p50_s", "lag_p99_s", "peak_rss_mib", "cpu_ms_per_job", "cpu_ms_per_poll",
    "worst_stall_ms",
)


def add_comparisons(runs: list[dict[str, Any]]) -> None:
    """Ours against the baseline of the same group, as ours / baseline."""
    baselines = {run["group"]: run for run in runs if run["loop"] == "baseline"}
    for run in runs:
        baseline = baselines.get(run["group"])
        if run["loop"] == "ours" and baseline is not None:
            run["vs_baseline"] = {metric: _ratio(run[metric], baseline[metric]) for metric in RATIO_METRICS}


def _le(value: float | None, limit: float) -> bool:
    return value is not None and value <= limit


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _thread_split(run: Mapping[str, Any]) -> str:
    split = run.get("cpu_ms_per_job_by_thread") or {}
    if not split:
        return "-"
    return " / ".join(_fmt(split.get(kind), 2) for kind in ("event loop", "sqlite", "executor"))


def _refused(refused: dict[str, int]) -> str:
    """What kept requests from being accepted, if any: the difference between refused and lost."""
    if not refused:
        return ""
    return " (refused: " + ", ".join(f"{count} {kind}" for kind, count in sorted(refused.items())) + ")"


def add_targets(runs: list[dict[str, Any]], large: int) -> None:
    """The issue's targets, attached to the runs of ours they apply to."""
    downloads = {run["name"]: run for run in runs if run["group"] == "download"}
    unlimited = [run for run in runs if run["loop"] == "ours" and run["group"].isdigit()]
    smallest = min(unlimited, key=lambda run: run["jobs"], default=None)
    for run in runs:
        if run["loop"] == "ours":
            run["targets"] = [target.as_json() for target in _targets(run, large, smallest, downloads)]


def _targets(
    run: dict[str, Any], large: int, smallest: Mapping[str, Any] | None, downloads: Mapping[str, Mapping[str, Any]]
) -> list[Target]:
    interval = POLL_INTERVAL_S
    targets: list[Target] = []
    stream = run.get("arrival_rate") is not None
    limited = run["platform_limit_per_s"] is not None
    floor = run["floor_per_job"] or 0.0

    def cap(what: str, key: str, limit: float, unit: str, digits: int = 2) -> Target:
        measured = f"{_fmt(run[key], digits)}{unit}"
        return Target(what, measured, f"<= {limit:,.{digits}f}{unit}", _le(run[key], limit))

    def polls(share: float) -> Target:
        return Target("status requests per job", _fmt(run["status_per_job"]),
                      f"<= {share:g} x floor = {share * floor:.2f}", _le(run["status_per_job"], share * floor))

    def lag(what: str, key: str, multiple: float, note: str = "") -> Target:
        return Target(what, f"{_fmt(run[key], 1)} s{note}", f"<= {multiple * interval:.1f} s ({multiple:g} x interval)",
                      _le(run[key], multiple * interval))

    if run["group"] != "download":
        targets += [
            Target("one create per job", _fmt(run["creates_per_job"], 3), "= 1", run["creates_per_job"] == 1),
            Target("one download per job", _fmt(run["downloads_per_job"], 3), "= 1", run["downloads_per_job"] == 1),
            Target("every job delivered",
                   f"{run['delivered']} of {run['jobs']}" + _refused(run.get("refused", {})), f"= {run['jobs']}",
                   run["delivered"] == run["jobs"] and run["duplicate_deliveries"] == 0),
        ]
    if run["group"].isdigit():
        targets.append(cap("CPU per job", "cpu_ms_per_job", CPU_MS_PER_JOB, " ms", 3))
        if run["jobs"] >= large:
            targets.append(cap("worst event-loop stall", "worst_stall_ms", WORST_STALL_MS, " ms", 1))
            targets.append(cap("peak RSS", "peak_rss_mib", PEAK_RSS_MIB, " MiB", 1))
        if run["jobs"] <= large:
            grid = run.get("grid_detect_p50_s")
            note = f" (polls exactly an interval apart: {grid:.2f} s to detection)" if grid is not None else ""
            targets += [polls(POLLS_OVER_FLOOR), lag("lag p50", "lag_p50_s", LAG_P50_X, note),
                        lag("lag p99", "lag_p99_s", LAG_P99_X)]
        if smallest is not None and run is not smallest and run["jobs"] > large:
            base = smallest["cpu_ms_per_job"]
            ratio = run["cpu_ms_per_job"] / base if base else None
            targets.append(Target(f"CPU per job flat from {smallest['jobs']:,} jobs", _fmt(ratio) + " x",
                                  f"<= {FLAT_CPU_RATIO:g} x", _le(ratio, FLAT_CPU_RATIO)))
    if limited:
        share = run["responses_429"] / max(1, run["requests_sent"])
        targets.append(
            Target("429 responses", f"{run['responses_429']} ({100 * share:.2f} % of {run['requests_sent']})",
                   "= 0", run["responses_429"] == 0)
        )
    # The PostgreSQL runs have a limit too, one only processes that do not share the key's rate would reach.
    if limited and run["group"].endswith("-limited"):
        targets += [
            cap("lag p99 under the limit", "lag_p99_s", LIMITED_LAG_P99_S, " s", 1),
            Target("request to post p99 (reported: creates are not delayed)",
                   f"{_fmt(run['request_to_post_p99_s'], 1)} s", "-", True),
        ]
    if stream and run["profile"] == "speedup":
        targets += [
            lag("lag p99 over the whole run", "lag_p99_s", STREAM_LAG_P99_X),
            lag(f"lag p99 after the first {RECOVERY_JOBS} jobs at the new speed", "recovered_lag_p99_s", LAG_P99_X),
        ]
    if stream and run["profile"] == "bimodal":
        targets += [polls(BIMODAL_POLLS_OVER_FLOOR), lag("lag p99", "lag_p99_s", LAG_P99_X)]
    if run["name"] == "download-9mib" and "download-100kib" in downloads:
        small = downloads["download-100kib"]
        growth = run["peak_rss_mib"] - small["peak_rss_mib"]
        targets.append(Target("peak RSS, 9 MiB over 100 KiB download", f"{growth:+.1f} MiB", "< 2 MiB",
                              growth < 2.0))
        if run["run_peak_rss_mib"] is not None and small["run_peak_rss_mib"] is not None:
            phase = (run["run_peak_rss_mib"] - run["start_rss_mib"]) - (
                small["run_peak_rss_mib"] - small["start_rss_mib"]
            )
            targets.append(Target("RSS growth while downloading, 9 MiB over 100 KiB", f"{phase:+.1f} MiB",
                                  "< 2 MiB", phase < 2.0))
    return targets


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "os": platform.platform(terse=True),
        "aiohttp": aiohttp.__version__,
        "sqlite": sqlite3.sqlite_version,
    }


def _cell(run: Mapping[str, Any], key: str, digits: int = 2) -> str:
    value = run.get(key)
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _lag(run: Mapping[str, Any], q: str) -> str:
    seconds, multiple = run.get(f"lag_{q}_s"), run.get(f"lag_{q}_x")
    if seconds is None or multiple is None:
        return "-"
    return f"{seconds:.1f} s ({multiple:.2f}x)"


def _limit(run: Mapping[str, Any]) -> tuple[str, str]:
    platform_limit = run["platform_limit_per_s"]
    pacer = run["max_requests_per_second"]
    paced = f"{pacer:g}/s, burst {run['pacer_burst']}" if pacer is not None else "none"
    if run["loop"] == "baseline":
        paced += " (submissions only)"
    return f"{platform_limit:g}/s" if platform_limit is not None else "none", paced


def _method(runs: Sequence[Mapping[str, Any]], k: float) -> list[str]:
    interval = POLL_INTERVAL_S
    latency = max((run.get("service_latency_ms") or 0.0) for run in runs) if runs else 0.0
    network = (
        f"every answer is delayed by {latency:g} ms" if latency else
        f"loopback only (a round trip of about 1 ms of run time counts as about {k:g} ms)"
    )
    return [
        "## Method",
        "",
        f"- Time is compressed by K = {k:g}: job times, the {interval:g} s poll interval, timeouts and back-offs "
        f"are divided by K and rates multiplied by K. Figures are converted back to production seconds.",
        "- Every run is two fresh processes: the service simulator, and the bot's side (the real `JobWorker`, "
        "`JobStore` on a temporary SQLite file, `VideoServiceClient` and `VideoRequests`, built by "
        "`bot.app.open_services`, with a recording sink in place of Discord). CPU and memory are the bot's "
        "process alone; it loads discord.py and every bot module, so its memory starts where the bot's does.",
        "- The PostgreSQL runs: one server for the suite (the tests' harness, `tests/store/postgres_server.py`, with "
        "PostgreSQL's default durability: every commit flushed, as SQLite's `synchronous=FULL`), a fresh database "
        "per run, the same jobs. With two bot processes each submits every other request (at the moment the "
        "one-process run would) and works on the jobs it holds the leases of; both pace at their share of the "
        "key's rate, counted from the heartbeats, under a platform limit of 1.25 times that rate which only "
        "processes not sharing it would reach. The lease (LEASE_SECONDS's default) is compressed like the poll "
        "interval. Their "
        "DB bytes per job: the database's growth over an empty one.",
        "- All jobs are submitted at once through `VideoRequests.submit`, the path of `/video`: the request is "
        "recorded, the key's budget checked (one `/key/info` read shared by the requests that check while it is on "
        "its way: key info/job), the write-ahead "
        "written, the create sent, and the first poll set one interval after acceptance. Durations are uniform "
        f"in 60 to 180 s, the same in every run (seed 0); the service network is {network}.",
        "- The platform limit counts every request over a sliding window of one production second (1/K s of "
        "run time), and answers 429 with `Retry-After` of one production second.",
        "- Ours paces with the bot's `Pacer`, built as the bot builds it (burst shown). Where the platform has "
        f"no limit, the pacer is set to {UNBOUND_PACER_PER_S:g}/s, twice what 1,000 jobs need, so it does not bind.",
        "- The baseline, every tick, polls each active job one after the other and downloads and delivers the "
        "finished ones inline; a 429 just waits for the next tick. It submits through the same request path "
        "and paced client, but its loop polls with an unpaced client.",
        "- Lag: from the moment the service completes a job to the sink receiving the video; `detect` is the "
        "part until a status answer says completed, `post` the rest (download, records, hand-over). Beside the "
        "lag p50 of uniform durations: the median wait until detection if the same jobs were polled exactly at "
        "the shortest duration and then every interval, which moves with the draw of durations (10.31 s for "
        "the 100 jobs of seed 0, 10.10 s for its 1,000).",
        "- CPU per poll: all of the bot's CPU time during the run (key info, creates, polls, downloads, "
        "database) divided by the status requests. CPU busy: the share of one core used, well below 1 when the "
        "loop is not CPU-bound. Floor: `ceil(duration / interval)` status requests per job. DB bytes per job: "
        "the SQLite file after the run.",
        "- Worst stall: the event loop's longest turn, from the selector's answer to its next wait (run ms): "
        "whatever became ready meanwhile waited that long. `of it on the CPU`: the part of that turn the loop's "
        "thread spent running. On a shared machine a descheduled process has long turns too; only the CPU part is "
        "work blocking the loop. `once requests were in`: the same from the moment "
        "every request of the run had its answer (jobs in flight, none arriving), beside the whole run's, which the "
        "target judges.",
        "",
    ]


def _shared_database(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The PostgreSQL runs beside ours on SQLite at the same size; nothing without PostgreSQL runs."""
    postgres = [run for run in runs if run.get("database") == "postgresql"]
    if not postgres:
        return []
    jobs = postgres[0]["jobs"]
    sqlite = [run for run in runs if run["loop"] == "ours" and run["group"] == str(jobs)]
    lines = [
        "",
        "## PostgreSQL and two processes",
        "",
        f"Ours at {jobs:,} jobs on SQLite (in the bot's process) and on PostgreSQL (a server of its own), in one "
        "bot process and in two sharing the jobs and the key's rate. CPU is summed over the bot's processes; "
        "`server` is the PostgreSQL server's own (its backends included), `with server` both. RSS is each bot "
        "process's peak.",
        "",
        "| run | database | bot processes | status/job | lag p50 | lag p99 | 429s | CPU ms/job | server CPU ms/job | "
        "CPU ms/job with server | peak RSS MiB per process | DB bytes/job | delivered | posted twice |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for run in [*sqlite, *postgres]:
        with_server = "cpu_ms_per_job_with_db" if "cpu_ms_per_job_with_db" in run else "cpu_ms_per_job"
        rss = " / ".join(f"{mib:.1f}" for mib in run.get("peak_rss_mib_per_process") or [run["peak_rss_mib"]])
        lines.append(
            f"| {run['name']} | {run.get('database', 'sqlite')} | {run.get('processes', 1)} | "
            f"{_cell(run, 'status_per_job')} | {_lag(run, 'p50')} | {_lag(run, 'p99')} | {run['responses_429']:,} | "
            f"{_cell(run, 'cpu_ms_per_job', 2)} | {_cell(run, 'db_server_cpu_ms_per_job', 2)} | "
            f"{_cell(run, with_server, 2)} | "
            f"{rss} | {_cell(run, 'db_bytes_per_job')} | {run['delivered']:,} | {run['duplicate_deliveries']:,} |"
        )
    return lines


def render_markdown(
    runs: Sequence[Mapping[str, Any]], host: Mapping[str, Any], k: float, wall_s: float,
    command: str = "python -m bench",
) -> str:
    lines = [
        "# Worker scaling benchmark",
        "",
        f"Machine: {host['cpu']}, {host['cores']} cores, Python {host['python']}, {host['os']}, "
        f"aiohttp {host['aiohttp']}, SQLite {host['sqlite']}"
        + (f", {host['postgresql']}" if host.get("postgresql") else "")
        + f". Command: `{command}`, K = {k:g} (the "
        f"{HUGE_K:g} of the 10,000-job runs excepted), "
        f"{wall_s:.0f} s of wall time. All figures are production-equivalent.",
        "",
        "| run | jobs | platform limit | bot pacing | status/job | floor/job | creates/job | key info/job | "
        "downloads/job | 429s | lag p50 | lag p95 | lag p99 | peak RSS MiB | CPU ms/poll | DB bytes/job | delivered |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        platform_limit, paced = _limit(run)
        lines.append(
            f"| {run['name']} | {run['jobs']:,} | {platform_limit} | {paced} | {_cell(run, 'status_per_job')} | "
            f"{_cell(run, 'floor_per_job')} | {_cell(run, 'creates_per_job')} | {_cell(run, 'key_info_per_job')} | "
            f"{_cell(run, 'downloads_per_job')} | "
            f"{run['responses_429']:,} | {_lag(run, 'p50')} | {_lag(run, 'p95')} | {_lag(run, 'p99')} | "
            f"{_cell(run, 'peak_rss_mib', 1)} | {_cell(run, 'cpu_ms_per_poll', 3)} | "
            f"{_cell(run, 'db_bytes_per_job')} | {run['delivered']:,} |"
        )
    lines += [
        "",
        "Lag in seconds and, in brackets, in multiples of the poll interval.",
        "",
        "| run | detect p50 | detect p99 | post p50 | post p99 | request to post p99 | 429s by endpoint | span s | "
        "CPU s | CPU ms/job | CPU ms/job: loop / sqlite / files | CPU busy | worst stall ms | of it on the CPU ms | "
        "worst stall once requests were in, ms (on the CPU) | start RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        refused = ", ".join(f"{name} {count:,}" for name, count in sorted(run["responses_429_by_endpoint"].items()))
        lines.append(
            f"| {run['name']} | {_cell(run, 'detect_p50_s', 1)} | {_cell(run, 'detect_p99_s', 1)} | "
            f"{_cell(run, 'post_p50_s', 2)} | {_cell(run, 'post_p99_s', 2)} | "
            f"{_cell(run, 'request_to_post_p99_s', 1)} | {refused or '-'} | {_cell(run, 'span_s', 0)} | "
            f"{_cell(run, 'cpu_s', 2)} | {_cell(run, 'cpu_ms_per_job', 3)} | {_thread_split(run)} | "
            f"{_cell(run, 'cpu_busy')} | {_cell(run, 'worst_stall_ms', 1)} | {_cell(run, 'worst_busy_stall_ms', 1)} | "
            f"{_cell(run, 'worst_in_flight_stall_ms', 1)} ({_cell(run, 'worst_busy_in_flight_stall_ms', 1)}) | "
            f"{_cell(run, 'start_rss_mib', 1)} |"
        )
    lines += [
        "",
        "## Ours against the baseline (ours / baseline, below 1 is better)",
        "",
        "| group | status/job | 429s | lag p50 | lag p99 | peak RSS | CPU ms/job | CPU ms/poll | worst stall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        ratios = run.get("vs_baseline")
        if not ratios:
            continue
        cells = " | ".join("-" if ratios[m] is None else f"{ratios[m]:.2f}" for m in RATIO_METRICS)
        lines.append(f"| {run['group']} | {cells} |")
    lines += _shared_database(runs)
    lines += ["", "## Targets", "", "| run | target | measured | limit | result |", "|---|---|---|---|---|"]
    for run in runs:
        for target in run.get("targets", []):
            verdict = "PASS" if target["pass"] else "**FAIL**"
            lines.append(
                f"| {run['name']} | {target['target']} | {target['measured']} | {target['limit']} | {verdict} |"
            )
    wall_ok = wall_s < MAX_WALL_SECONDS
    lines.append(
        f"| all | whole benchmark wall time | {wall_s:.0f} s | < {MAX_WALL_SECONDS:.0f} s on {host['cores']} cores | "
        f"{'PASS' if wall_ok else '**FAIL**'} |"
    )
    lines.append("")
    lines += _method(runs, k)
    return "\n".join(lines)
