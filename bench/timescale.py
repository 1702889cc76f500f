"""Production figures of the benchmark and their time-compressed form.

Every duration of the simulated world (job times, the poll interval, timeouts, back-offs) is divided
by K and every rate is multiplied by K, so a run lasts 1/K of its production length. Results are
converted back: a real second measured in a run is K production seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from bot.config.settings import Settings
from bot.core.retry import RetryPolicy
from bot.jobs.worker import WorkerConfig
from bot.ops.heap import CollectionPolicy
from bot.service.pacing import SERVICE_BURST

#: Production-equivalent constants of the scenarios.
POLL_INTERVAL_S = 20.0
JOB_SECONDS_MIN = 60.0
JOB_SECONDS_MAX = 180.0
#: The platform limit of the binding scenario: half of what 1,000 jobs polled every 20 s need.
PLATFORM_LIMIT_PER_S = 25.0
#: Pacer rate when the platform sets no limit: twice what 1,000 jobs at 20 s need, so it never binds.
UNBOUND_PACER_PER_S = 100.0
HTTP_TIMEOUT_S = 30.0


def setting_default(name: str) -> object:
    """The shipped default of a bot setting, so the benchmark follows it when it changes."""
    for field in fields(Settings):
        if field.name == name:
            return field.default
    raise KeyError(name)


def default_max_requests_per_second() -> float:
    value = setting_default("max_requests_per_second")
    assert isinstance(value, float)
    return value


def default_max_concurrent_polls() -> int:
    value = setting_default("max_concurrent_polls")
    assert isinstance(value, int)
    return value


def bot_burst(rate: float) -> int:
    """The burst the bot gives its pacer (the same at any rate)."""
    return SERVICE_BURST


@dataclass(frozen=True)
class TimeScale:
    k: float

    def __post_init__(self) -> None:
        if self.k <= 0:
            raise ValueError("K must be above 0")

    def seconds(self, production_seconds: float) -> float:
        """A production duration as run time."""
        return production_seconds / self.k

    def rate(self, production_per_second: float) -> float:
        """A production rate as run rate."""
        return production_per_second * self.k

    def production(self, run_seconds: float) -> float:
        """A measured run duration in production-equivalent seconds."""
        return run_seconds * self.k

    def retry_policy(self, policy: RetryPolicy) -> RetryPolicy:
        return RetryPolicy(
            attempts=policy.attempts,
            deadline=self.seconds(policy.deadline),
            base_delay=self.seconds(policy.base_delay),
            max_delay=self.seconds(policy.max_delay),
        )

    def collection_policy(self, base: CollectionPolicy) -> CollectionPolicy:
        """When full garbage collections run, in run time (the count of tasks stays)."""
        return replace(
            base,
            every_seconds=self.seconds(base.every_seconds),
            check_seconds=self.seconds(base.check_seconds),
            at_most_seconds=self.seconds(base.at_most_seconds),
        )

    def worker_config(self, base: WorkerConfig) -> WorkerConfig:
        """The worker's production config with every duration compressed (counts and ratios stay)."""
        return replace(
            base,
            poll_interval=self.seconds(base.poll_interval),
            slow_after=self.seconds(base.slow_after),
            give_up_after=self.seconds(base.give_up_after),
            rate_limit_backoff=self.seconds(base.rate_limit_backoff),
            max_rate_limit_pause=self.seconds(base.max_rate_limit_pause),
            database_retry=self.retry_policy(base.database_retry),
            abandoned_download_after=self.seconds(base.abandoned_download_after),
            download_retry=self.retry_policy(base.download_retry),
            upload_retry=self.retry_policy(base.upload_retry),
            notice_retry=self.retry_policy(base.notice_retry),
            storage_retry_seconds=self.seconds(base.storage_retry_seconds),
            storage_notice_after=self.seconds(base.storage_notice_after),
            storage_wait_limit=self.seconds(base.storage_wait_limit),
            sweep_interval=self.seconds(base.sweep_interval),
            sweep_grace=self.seconds(base.sweep_grace),
            idle_wake=self.seconds(base.idle_wake),
            flush_interval=self.seconds(base.flush_interval),
        )
