"""The simulator's loggers, and how a job id is shown in a log line.

Every simulator module logs under ``bot.simulator.app``, the name its records have always carried (log
filters and bench/sim_server.py, which quiets it, rely on that name)."""

from __future__ import annotations

import logging
from typing import Final

logger: Final = logging.getLogger("bot.simulator.app")
access_logger: Final = logging.getLogger("bot.simulator.app.access")


def log_id(job_id: str) -> str:
    """`job_id` for a log line: forced ids can be 5,000 characters of anything, so keep it short and printable."""
    shown = job_id if len(job_id) <= 64 else job_id[:64] + f"...({len(job_id)} chars)"
    return repr(shown)
