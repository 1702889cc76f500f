"""The runs of the benchmark, in production-equivalent terms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bench.timescale import (
    JOB_SECONDS_MAX,
    JOB_SECONDS_MIN,
    PLATFORM_LIMIT_PER_S,
    POLL_INTERVAL_S,
    UNBOUND_PACER_PER_S,
    default_max_concurrent_polls,
    default_max_requests_per_second,
)

Loop = Literal["ours", "baseline"]
Profile = Literal["uniform", "bimodal", "speedup"]
Database = Literal["sqlite", "postgresql"]

#: The steady streams: this many requests per production second (about 240 in flight at 60-180 s).
STREAM_PER_S = 2.0
#: The bimodal profile's range: 70 % of jobs take 40-60 s, 30 % 150-180 s.
BIMODAL_SECONDS = (40.0, 180.0)
#: Pacing of the 10,000-job run: twice what 10,000 jobs polled every 20 s need, so it never binds.
HUGE_PACER_PER_S = 1000.0
#: The 10,000-job run is compressed less: at K = 10 its CPU alone would fill a core.
HUGE_K = 2.0
#: The key's limit in the PostgreSQL runs: their pacing (UNBOUND_PACER_PER_S) with the margin of the limited
#: run (25/s over 20/s). It never binds while the processes share the rate; two processes each pacing at the
#: full rate would pass it while the 1,000 submissions (2,000 requests) go out.
SHARED_KEY_LIMIT_PER_S = 1.25 * UNBOUND_PACER_PER_S

SMALL_VIDEO_BYTES = 100 * 1024
LARGE_VIDEO_BYTES = 9 * 1024 * 1024


@dataclass(frozen=True)
class Scenario:
    name: str
    group: str  # runs of one group are compared with each other
    loop: Loop
    jobs: int
    platform_limit: float | None = None  # requests per second; None: the platform sets none
    pacer_rate: float | None = None  # MAX_REQUESTS_PER_SECOND of the bot
    pacer_burst: int | None = None  # None: the burst the bot gives its pacer
    max_concurrency: int = 8
    job_seconds: tuple[float, float] = (JOB_SECONDS_MIN, JOB_SECONDS_MAX)
    video_bytes: int | None = None  # None: the simulator's sample MP4
    arrival_rate: float | None = None  # requests per production second; None: all at once
    profile: Profile = "uniform"
    speedup_after: int = 0  # with profile "speedup": creates before the service gets twice as fast
    k: float | None = None  # its own time compression (None: the suite's)
    database: Database = "sqlite"  # postgresql: a fresh database on the suite's PostgreSQL server
    processes: int = 1  # bot processes on the one database, sharing the jobs and the key's rate

    def timeout_seconds(self) -> float:
        """Production seconds after which the run gives up: generous, it only guards against a hang."""
        rates = [rate for rate in (self.platform_limit, self.pacer_rate) if rate is not None]
        service_time = 4 * self.jobs / min(rates) if rates else 0.0
        arriving = self.jobs / self.arrival_rate if self.arrival_rate else 0.0
        return self.job_seconds[1] + service_time + arriving + 10 * POLL_INTERVAL_S


def standard(
    small: int = 100,
    large: int = 1000,
    *,
    max_requests_per_second: float | None = None,
    max_concurrency: int | None = None,
    pacer_burst: int | None = None,
    stream: int = 600,
    huge: int = 10_000,
    postgresql: bool = True,
) -> list[Scenario]:
    """Ours and the baseline at `small` and `large` jobs, `large` under the binding limit, `stream` jobs
    arriving steadily (the service twice as fast after half of them; bimodal durations), `huge` jobs at
    once (0: left out), and the download pair. With `postgresql`, ours at `large` jobs on PostgreSQL too, in
    one process and in two sharing the jobs."""
    limited_rate = max_requests_per_second or default_max_requests_per_second()
    concurrency = max_concurrency or default_max_concurrent_polls()
    runs: list[Scenario] = []
    groups: list[tuple[str, int, float | None, float, dict[str, object]]] = [
        (str(small), small, None, UNBOUND_PACER_PER_S, {}),
        (str(large), large, None, UNBOUND_PACER_PER_S, {}),
        (f"{large}-limited", large, PLATFORM_LIMIT_PER_S, limited_rate, {}),
    ]
    if stream:
        groups += [
            (f"stream-{stream}-speedup", stream, None, UNBOUND_PACER_PER_S,
             {"arrival_rate": STREAM_PER_S, "profile": "speedup", "speedup_after": stream // 2}),
            (f"stream-{stream}-bimodal", stream, None, UNBOUND_PACER_PER_S,
             {"arrival_rate": STREAM_PER_S, "profile": "bimodal", "job_seconds": BIMODAL_SECONDS}),
        ]  # fmt: skip
    if huge:
        groups.append((str(huge), huge, None, HUGE_PACER_PER_S, {"k": HUGE_K}))
    for group, jobs, limit, pacer, extra in groups:
        for loop in ("ours", "baseline"):
            runs.append(
                Scenario(
                    name=f"{loop}-{group}",
                    group=group,
                    loop=loop,
                    jobs=jobs,
                    platform_limit=limit,
                    pacer_rate=pacer,
                    pacer_burst=pacer_burst,
                    max_concurrency=concurrency,
                    **extra,  # type: ignore[arg-type]
                )
            )
    if postgresql:
        for label, processes in (("postgresql", 1), ("postgresql-2proc", 2)):
            runs.append(
                Scenario(
                    name=f"ours-{large}-{label}",
                    group=f"{large}-{label}",
                    loop="ours",
                    jobs=large,
                    platform_limit=SHARED_KEY_LIMIT_PER_S,
                    pacer_rate=UNBOUND_PACER_PER_S,
                    pacer_burst=pacer_burst,
                    max_concurrency=concurrency,
                    database="postgresql",
                    processes=processes,
                )
            )
    # Short jobs: only the download matters here.
    quick = (POLL_INTERVAL_S, POLL_INTERVAL_S)
    for label, size in (("100kib", SMALL_VIDEO_BYTES), ("9mib", LARGE_VIDEO_BYTES)):
        runs.append(
            Scenario(
                name=f"download-{label}",
                group="download",
                loop="ours",
                jobs=1,
                pacer_rate=default_max_requests_per_second(),
                pacer_burst=pacer_burst,
                max_concurrency=concurrency,
                job_seconds=quick,
                video_bytes=size,
            )
        )
    return runs
