"""The worker's bounds: intervals, concurrency, retry policies and waits (bot/app.py `worker_config` fills them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.core.lifecycle import SLOW_AFTER_SECONDS, STALLED_AFTER_SECONDS
from bot.core.retry import DATABASE_RETRY, DOWNLOAD_RETRY, NOTICE_RETRY, NOTICE_ROUNDS, UPLOAD_RETRY, RetryPolicy
from bot.store.leases import CLAIM_BATCH


@dataclass(frozen=True)
class WorkerConfig:
    storage_dir: Path
    poll_interval: float = 20.0
    max_concurrency: int = 8
    keep_delivered_videos: bool = False
    # Planned poll times reach the database in one batch this often (a restart resumes from them).
    flush_interval: float = 5.0
    slow_after: float = SLOW_AFTER_SECONDS
    give_up_after: float = STALLED_AFTER_SECONDS
    rate_limit_backoff: float = 10.0  # pause when a 429 carries no Retry-After
    max_rate_limit_pause: float = 300.0  # the longest pause a 429's Retry-After may ask of the polls
    database_retry: RetryPolicy = DATABASE_RETRY  # a completed job's step whose record the database failed
    abandoned_download_after: float = 3600.0  # a partial download not written this long was left by a kill
    download_retry: RetryPolicy = DOWNLOAD_RETRY
    upload_retry: RetryPolicy = UPLOAD_RETRY
    notice_retry: RetryPolicy = NOTICE_RETRY
    notice_rounds: int = NOTICE_ROUNDS
    max_download_bytes: int = 100 * 1024 * 1024
    # No disk space for a finished video: keep trying this often, tell the requester once after
    # `storage_notice_after`, and give up (failed, job id for support) after `storage_wait_limit` from
    # completion, before the service's retention would lose the video anyway.
    storage_retry_seconds: float = 30.0
    storage_notice_after: float = 5 * 60
    storage_wait_limit: float = 60 * 60
    # Requests owed a final message are looked for this often; ones changed more recently than
    # `sweep_grace` are left to whoever is telling them right now.
    sweep_interval: float = 60.0
    sweep_grace: float = 120.0
    idle_wake: float = 30.0  # the loop wakes at least this often, so the heartbeat stays fresh
    claim_batch: int = CLAIM_BATCH  # jobs taken over from dead processes per claim, at most
