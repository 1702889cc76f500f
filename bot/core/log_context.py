"""The context of a log line about one request, passed as `extra` (bot/ops/logs.py formats it).

    log.info("video posted", extra=job_fields(job))
"""

from __future__ import annotations

from typing import Protocol

#: The context names `job_fields` fills, in the order the text formatter shows them.
CONTEXT_FIELDS = ("request", "job", "guild", "member")


class JobLike(Protocol):
    """What a log line names of a job (bot.store.jobs.Job has it)."""

    @property
    def reference(self) -> str: ...
    @property
    def service_job_id(self) -> str | None: ...
    @property
    def guild_id(self) -> int | None: ...
    @property
    def user_id(self) -> int: ...


def job_fields(job: JobLike) -> dict[str, object]:
    """The context of a log line about `job`, for `extra=`."""
    return {"request": job.reference, "job": job.service_job_id, "guild": job.guild_id, "member": job.user_id}
