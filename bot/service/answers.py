"""Checks on what the video service answers: its values are input, never orders.

Pure functions, no I/O. A job id goes into a URL path only after `safe_job_id`; any value from the
service goes into a log line or a message only through `shown_id`.
"""

from __future__ import annotations

import re

from bot.core.errors import UnusableJobId

MAX_JOB_ID_CHARS = 128
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
