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

# -- groups of states: every one the code names is here ------------------------------------------------

#: States the worker polls at the service: accepted, not finished there yet (a receipt shows a ready time).
POLLED_STATES = (S.PENDING, S.IN_PROGRESS)
#: Finished at the service, not posted yet: the worker downloads, then posts them.
FINISHING_STATES = (S.COMPLETED, S.DOWNLOADED)
#: Not finished yet: each holds a slot of the per-user limit, and a process works on it (its lease is claimed
#: when it expires).
IN_FLIGHT_STATES = (S.RECEIVED, S.SUBMITTING, *POLLED_STATES, *FINISHING_STATES)
#: Waiting for its video: not sent yet, on its way, or queued at the service (a place in line, bot/frontend/buttons.py).
WAITING_STATES = (S.RECEIVED, S.SUBMITTING, S.PENDING)
#: Not yet sent to the service: may still be charged at full price any moment.
UNSENT_OR_SENDING = (S.RECEIVED, S.SUBMITTING)
#: May be charged, or may have been, with no charge in the ledger: counted at their price against a cap.
MAYBE_CHARGED_STATES = (*UNSENT_OR_SENDING, S.UNKNOWN)
#: Whether the service accepted (and charged) the request cannot be told from the bot's records: no answer
#: came, or the bot stopped while sending. `submitting` is also a create on its way, or a charge whose
#: recording is being retried; either way its charge is not in the ledger yet.
OUTCOME_UNKNOWN_STATES = (S.SUBMITTING, S.UNKNOWN)
#: Charged, and no video came of it: what support may credit. `stalled` was given up after the bot's
#: longest wait, so its requester got nothing either.
CREDITABLE_STATES = (S.FAILED, S.STALLED)
#: Ended with nothing spent: refused, never sent, or cancelled (a member's cooldown does not count from them).
NOTHING_SPENT_STATES = (S.REJECTED, S.INTERRUPTED, S.CANCELLED)
#: Final states whose requester is owed a message (a delivered video is its own message). `unknown` is final
#: for its requester (told, nothing more is sent for it), though a late 202 may still bring it back.
FINAL_STATES = frozenset(state for state, targets in TRANSITIONS.items() if not targets) | {S.UNKNOWN}
#: Done with: the final states, and `undeliverable` (not final, /status may still hand the file over, but
#: finished with: its prompt may be erased).
DONE_WITH_STATES = (*sorted(FINAL_STATES), S.UNDELIVERABLE)
#: States whose requester is owed one final message (a delivered video is its own): held until told.
OWED_A_MESSAGE_STATES = (*sorted(FINAL_STATES - {S.DELIVERED}), S.UNDELIVERABLE)
#: Moves a power cut may lose without harm, so their commits need not wait for the disk: the worker redoes
#: them (the job is polled again, its video downloaded again, for nothing). Every other write waits: a
#: request acknowledged, a create about to go, a charge, a post, a final message.
REDONE_IF_LOST = frozenset({S.IN_PROGRESS, *FINISHING_STATES})


def sources_of(target: JobState) -> tuple[JobState, ...]:
    """Every state from which `target` may be reached."""
    return tuple(state for state, targets in TRANSITIONS.items() if target in targets)
