"""A request's lifecycle: its states and the one table of legal moves between them.

`docs/lifecycle.md` draws this table; `tests/core/test_lifecycle.py` keeps the two equal and lists the
legal moves a second time, independently, so a move added here by mistake fails a test.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    RECEIVED = "received"  # written down and acknowledged; nothing sent yet
    SUBMITTING = "submitting"  # the create request may be on its way: never resent
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    DOWNLOADED = "downloaded"
    DELIVERED = "delivered"
    FAILED = "failed"
    STALLED = "stalled"
    REJECTED = "rejected"
    UNKNOWN = "unknown"
    INTERRUPTED = "interrupted"  # the bot stopped before sending: nothing spent
    UNDELIVERABLE = "undeliverable"
    CANCELLED = "cancelled"  # its requester cancelled it before it was sent: nothing spent


S = JobState

#: A job still waiting after this gets one "taking long" note; after STALLED_AFTER it is given up (stalled).
SLOW_AFTER_SECONDS = 30 * 60
STALLED_AFTER_SECONDS = 6 * 3600

#: Every legal move, in one place. Anything else raises IllegalTransition.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # rejected: the budget cannot pay for it; interrupted: found here after a restart, or its write-ahead failed
    # (never sent); cancelled: by its requester while it waited for the bot's pacing turn (once `submitting`, it
    # may be on its way: no cancel).
    S.RECEIVED: frozenset({S.SUBMITTING, S.REJECTED, S.INTERRUPTED, S.CANCELLED}),
    # failed: accepted and charged, but the service's job id is unusable or already held by another request, or
    # its answer could not be read (a 202 is a charge all the same);
    # interrupted: the bot stopped while writing it down, before the create left (the sending task knows).
    S.SUBMITTING: frozenset({S.PENDING, S.REJECTED, S.UNKNOWN, S.FAILED, S.INTERRUPTED}),
    S.PENDING: frozenset({S.IN_PROGRESS, S.COMPLETED, S.FAILED, S.STALLED}),
    S.IN_PROGRESS: frozenset({S.COMPLETED, S.FAILED, S.STALLED}),
    # failed: the service no longer gives the video, or no download succeeded within the retry policy.
    S.COMPLETED: frozenset({S.DOWNLOADED, S.FAILED}),
    S.DOWNLOADED: frozenset({S.DELIVERED, S.UNDELIVERABLE}),
    # delivered: /status handed the file over to its requester.
    S.UNDELIVERABLE: frozenset({S.DELIVERED}),
    S.DELIVERED: frozenset(),
    S.FAILED: frozenset(),
    S.STALLED: frozenset(),
    S.REJECTED: frozenset(),
    # pending: the 202 came after all, late, after the request was given up as unknown (its process stalled
    # past its lease and another took the request over): the charge is recorded, the video still comes, and its
    # requester is told so.
    S.UNKNOWN: frozenset({S.PENDING}),
    S.INTERRUPTED: frozenset(),
    S.CANCELLED: frozenset(),
}

#: States the worker polls at the service.
POLLED_STATES = (S.PENDING, S.IN_PROGRESS)
#: States that hold a slot of the per-user limit: the request is not finished yet.
IN_FLIGHT_STATES = (S.RECEIVED, S.SUBMITTING, S.PENDING, S.IN_PROGRESS, S.COMPLETED, S.DOWNLOADED)
#: Waiting for its video: not sent yet, on its way, or queued at the service (a place in line, bot/frontend/buttons.py).
WAITING_STATES = (S.RECEIVED, S.SUBMITTING, S.PENDING)
#: Not yet sent to the service: may still be charged at full price any moment.
UNSENT_OR_SENDING = (S.RECEIVED, S.SUBMITTING)
#: Final states whose requester is owed a message (a delivered video is its own message). `unknown` is final
#: for its requester (told, nothing more is sent for it), though a late 202 may still bring it back.
FINAL_STATES = frozenset(state for state, targets in TRANSITIONS.items() if not targets) | {S.UNKNOWN}


def sources_of(target: JobState) -> tuple[JobState, ...]:
    """Every state from which `target` may be reached."""
    return tuple(state for state, targets in TRANSITIONS.items() if target in targets)
