"""The background worker: poll accepted jobs, download finished videos at once, deliver them.

The poll schedule (bot/jobs/schedule.py) is a heap in memory, planned from the learned job durations
(bot/jobs/durations.py): a new job is first polled near the low end of its model's durations, then every
interval. The worker sleeps until the earliest poll (or until a job is accepted) and sends the due
polls with bounded concurrency, only when the pacer has a free turn, in priority order: polls of
jobs in (or past) their likely completion window before the rest, the longest waiting first
(downloads wait in the pacer itself, so they go first). The next poll of a job counts from the last
one's answer, so it never comes closer than the interval. Planned times reach the database in
batches, for a restart. Completed jobs are downloaded and delivered in tasks of their own, so a slow
upload never holds up polling.

Its parts, one concern each, make up `JobWorker` (job_worker.py: its life cycle and the start-up's resume):
leases.py (this process's leases when several share the database), polling.py (the schedule, the slots, the
status polls), finishing.py (a finished job's steps, each within its retry policy), download.py, delivery.py, and
telling.py (the final messages and the receipts). They share base.py's state; config.py holds the bounds.
"""

from bot.jobs.worker.config import WorkerConfig
from bot.jobs.worker.job_worker import JobWorker
from bot.jobs.worker.telling import FINAL_NOTICE

__all__ = ["FINAL_NOTICE", "JobWorker", "WorkerConfig"]
