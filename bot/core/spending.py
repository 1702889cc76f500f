"""What counts as spent: how a job counts in the ledger and the usage reports, written once, as data.

The usage report reads the rules in Python (`outcome_of`, bot/community/usage.py); the store renders the same
rules as SQL to pick a report's rows (bot/store/jobs/ledger.py, `usage_jobs`). tests/store/test_jobs_usage.py runs
both over every state, charged and not, and checks they agree.

- **accepted**: charged, and the video was made or is still being made (pending … delivered, undeliverable);
- **failed**: charged, and no video came of it (`failed`, or `stalled` after the longest wait): what a
  support claim for credit is about;
- **unknown**: not charged in the ledger, in a state where the service may have charged it all the same;
- anything else was never charged and does not count (rejected, interrupted, cancelled, not sent yet).

Spent is every charge (accepted and failed, credited ones too): the ledger. A charged job counts at its
acceptance time; an unknown outcome, which has none, at its request time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.core.lifecycle import CREDITABLE_STATES, OUTCOME_UNKNOWN_STATES, JobState

Outcome = Literal["accepted", "failed", "unknown"]


@dataclass(frozen=True)
class OutcomeRule:
    """A job matching `states` (any state when None) and `charged` (charged_yen > 0 when True, nothing charged
    when False, either when None) counts as `outcome` (not at all when None)."""

    outcome: Outcome | None
    states: tuple[JobState, ...] | None = None
    charged: bool | None = None

    def matches(self, state: JobState, charged_yen: int) -> bool:
        return (self.states is None or state in self.states) and (
            self.charged is None or self.charged == (charged_yen > 0)
        )


#: The first rule a job matches says how it counts.
OUTCOME_RULES: tuple[OutcomeRule, ...] = (
    OutcomeRule("unknown", states=OUTCOME_UNKNOWN_STATES, charged=False),
    OutcomeRule(None, charged=False),
    OutcomeRule("failed", states=CREDITABLE_STATES),
    OutcomeRule("accepted"),
)


#: The time a job counts at, by how it counts (a `Job` attribute, and a column of the jobs table): a charged job
#: at its acceptance; an unknown outcome, which has none, at its request.
COUNTED_AT: dict[Outcome, str] = {"accepted": "accepted_at", "failed": "accepted_at", "unknown": "created_at"}


def outcome_of(state: JobState, charged_yen: int) -> Outcome | None:
    """How a job in `state` with `charged_yen` in the ledger counts; None when it does not."""
    for rule in OUTCOME_RULES:
        if rule.matches(state, charged_yen):
            return rule.outcome
    raise AssertionError("the last rule matches every job")
