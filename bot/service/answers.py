"""Checks on what the video service answers: its values are input, never orders.

Pure functions, no I/O. A job id goes into a URL path only after `safe_job_id`; any value from the
service goes into a log line or a message only through `shown_id`. A create's, a status poll's and the key
info's answers are decoded here (`accepted_job`, `polled_job`, `read_key_info`) from the JSON the client read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bot.core.errors import AcceptedUnreadable, ProtocolError, UnreadableKeyInfo, UnusableJobId

MAX_JOB_ID_CHARS = 128
#: The statuses the video service gives a job (its contract), not the bot's own states (bot/core/lifecycle.py).
SERVICE_STATUSES = frozenset({"pending", "in_progress", "completed", "failed"})
JOBS_PATH = "/gateway/videos/jobs"
KEY_INFO_PATH = "/key/info"
MAX_YEN = 10**12  # more than any real spend or budget: a larger number is garbage
SHOWN_CHARS = 40

# RFC 3986 unreserved characters: one path segment that needs no encoding and means nothing special.
_SAFE_JOB_ID = re.compile(r"[A-Za-z0-9._~-]+")
# Characters that would format, ping or break a Discord message or a log line if shown as they are.
_DEFANGED = str.maketrans({"`": r"\x60", "@": r"\x40", "<": r"\x3c", ">": r"\x3e", "|": r"\x7c"})


def shown_id(raw: object) -> str:
    """`raw` (an id, a path, any JSON value from the service) escaped and shortened for logs and support.

    ASCII only: no newline, backtick, mention or markup survives; at most SHOWN_CHARS characters.
    """
    text = ascii(raw).translate(_DEFANGED)
    if len(text) > SHOWN_CHARS:
        text = text[: SHOWN_CHARS - 1] + "…"
    return text


def safe_job_id(raw: object) -> str:
    """`raw` if it is a job id the bot may put in a URL path: 1..128 unreserved characters, not `.` or `..`.

    Raises UnusableJobId (carrying the shown form) otherwise.
    """
    if (
        not isinstance(raw, str)
        or not 1 <= len(raw) <= MAX_JOB_ID_CHARS
        or not _SAFE_JOB_ID.fullmatch(raw)
        or raw in {".", ".."}
    ):
        raise UnusableJobId(shown_id(raw))
    return raw


@dataclass(frozen=True)
class RemoteJob:
    id: str
    status: str
    # poll_path/content_path values the service sent that differ from the expected ones (shown form);
    # never followed, listed so the worker can log them once per job.
    ignored_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeyInfo:
    spend: int
    max_budget: int | None  # None: the key has no limit

    @property
    def available(self) -> int | None:
        return None if self.max_budget is None else self.max_budget - self.spend


def job_path(job_id: str) -> str:
    """The status path of a job, from the checked id (percent-encoded anyway)."""
    return f"{JOBS_PATH}/{quote(safe_job_id(job_id), safe='')}"


def _ignored_paths(data: Mapping[str, Any], job_id: str) -> tuple[str, ...]:
    expected = {"poll_path": job_path(job_id), "content_path": f"{job_path(job_id)}/content"}
    return tuple(
        f"{name}={shown_id(data[name])}" for name in ("poll_path", "content_path")
        if name in data and data[name] != expected[name]
    )


def accepted_job(data: object) -> RemoteJob:
    """The job of a 202. It is charged whatever the body says: an unusable id raises UnusableJobId, an answer
    with no job at all AcceptedUnreadable."""
    if not isinstance(data, dict):
        raise AcceptedUnreadable("the service accepted (HTTP 202) and charged the request, but its answer is not "
                                 "a JSON object")
    job_id = safe_job_id(data.get("id"))
    status = data.get("status")
    # Accepted means pending (spec §3); a missing or odd status is the poller's to find out.
    return RemoteJob(
        id=job_id,
        status=status if isinstance(status, str) and status in SERVICE_STATUSES else "pending",
        ignored_paths=_ignored_paths(data, job_id),
    )


def polled_job(data: object, job_id: str) -> RemoteJob:
    if not isinstance(data, dict):
        raise ProtocolError("the service's status response is not a JSON object")
    if data.get("id") != job_id:
        raise ProtocolError(f"the service answered about job {shown_id(data.get('id'))} when asked about {job_id}")
    status = data.get("status")
    if not isinstance(status, str) or status not in SERVICE_STATUSES:
        raise ProtocolError(f"the service's status response has an unknown status {shown_id(status)}")
    return RemoteJob(id=job_id, status=status, ignored_paths=_ignored_paths(data, job_id))


def _yen(info: Mapping[str, Any], name: str, *, nullable: bool, round_up: bool) -> int | None:
    """A money field of key info in whole yen; the error names the field, never its value."""
    if name not in info:
        raise UnreadableKeyInfo(f"the service's key info has no {name!r}")
    value = info[name]
    if value is None and nullable:
        return None
    # bool is an int to Python; "12" is not a number (a service that sends strings is not trusted to mean yen).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnreadableKeyInfo(f"the service's key info {name!r} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise UnreadableKeyInfo(f"the service's key info {name!r} is not a finite number")
    if value < 0 or value > MAX_YEN:
        raise UnreadableKeyInfo(f"the service's key info {name!r} is out of range")
    # Fractional yen (LiteLLM reports floats): spend up, budget down, so `available` is never overstated.
    return math.ceil(value) if round_up else math.floor(value)


def read_key_info(data: object) -> KeyInfo:
    info = data.get("info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        raise UnreadableKeyInfo("the service's key info response has no 'info' object")
    spend = _yen(info, "spend", nullable=False, round_up=True)
    assert spend is not None
    return KeyInfo(spend=spend, max_budget=_yen(info, "max_budget", nullable=True, round_up=False))
