"""The one transition table: equal to the drawing in docs/lifecycle.md and to an independent list."""

from __future__ import annotations

import re
from pathlib import Path

from bot.core import lifecycle
from bot.core.lifecycle import FINAL_STATES, TRANSITIONS, JobState, sources_of

S = JobState
DOC = Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md"

#: Written out by hand, apart from the code: a move added to TRANSITIONS alone fails the comparison.
LEGAL_MOVES = {
    (S.RECEIVED, S.SUBMITTING), (S.RECEIVED, S.REJECTED), (S.RECEIVED, S.INTERRUPTED), (S.RECEIVED, S.CANCELLED),
    (S.SUBMITTING, S.PENDING), (S.SUBMITTING, S.REJECTED), (S.SUBMITTING, S.UNKNOWN), (S.SUBMITTING, S.FAILED),
    (S.SUBMITTING, S.INTERRUPTED),
    (S.PENDING, S.IN_PROGRESS), (S.PENDING, S.COMPLETED), (S.PENDING, S.FAILED), (S.PENDING, S.STALLED),
    (S.IN_PROGRESS, S.COMPLETED), (S.IN_PROGRESS, S.FAILED), (S.IN_PROGRESS, S.STALLED),
    (S.COMPLETED, S.DOWNLOADED), (S.COMPLETED, S.FAILED),
    (S.DOWNLOADED, S.DELIVERED), (S.DOWNLOADED, S.UNDELIVERABLE),
    (S.UNDELIVERABLE, S.DELIVERED),
    (S.UNKNOWN, S.PENDING),
}


def table_moves() -> set[tuple[JobState, JobState]]:
    return {(source, target) for source, targets in TRANSITIONS.items() for target in targets}


def drawn_moves() -> set[tuple[JobState, JobState]]:
    moves = set()
    for source, target in re.findall(r"^\s*(\w+) --> (\w+)", DOC.read_text(), flags=re.M):
        moves.add((JobState(source), JobState(target)))
    return moves


def test_the_table_holds_exactly_the_legal_moves() -> None:
    assert table_moves() - LEGAL_MOVES == set(), "moves in the code that are not legal"
    assert LEGAL_MOVES - table_moves() == set(), "legal moves missing from the code"


def test_the_drawing_equals_the_table() -> None:
    assert drawn_moves() - table_moves() == set(), "moves drawn in docs/lifecycle.md but not in the code"
    assert table_moves() - drawn_moves() == set(), "moves in the code missing from docs/lifecycle.md"


def test_every_state_is_in_the_table_and_reachable() -> None:
    assert set(TRANSITIONS) == set(JobState)
    for state in JobState:
        assert state == S.RECEIVED or sources_of(state), f"{state} cannot be reached"


def test_final_states_are_the_ones_without_a_way_out() -> None:
    assert {S.DELIVERED, S.FAILED, S.STALLED, S.REJECTED, S.UNKNOWN, S.INTERRUPTED, S.CANCELLED} == FINAL_STATES


def test_the_groups_of_states_fit_the_table() -> None:
    """Each state is in flight, final, or undeliverable (finished with, not final), and the groups say so."""
    everything = set(S)
    assert set(lifecycle.IN_FLIGHT_STATES) | FINAL_STATES | {S.UNDELIVERABLE} == everything
    assert not set(lifecycle.IN_FLIGHT_STATES) & (FINAL_STATES | {S.UNDELIVERABLE})
    assert set(lifecycle.POLLED_STATES) | set(lifecycle.FINISHING_STATES) | set(lifecycle.UNSENT_OR_SENDING) \
        == set(lifecycle.IN_FLIGHT_STATES)
    assert set(lifecycle.OWED_A_MESSAGE_STATES) == (FINAL_STATES - {S.DELIVERED}) | {S.UNDELIVERABLE}
    assert set(lifecycle.DONE_WITH_STATES) == FINAL_STATES | {S.UNDELIVERABLE}
    # Nothing spent, or charged with no video: final either way.
    assert set(lifecycle.NOTHING_SPENT_STATES) <= FINAL_STATES and set(lifecycle.CREDITABLE_STATES) <= FINAL_STATES
    assert set(lifecycle.REDONE_IF_LOST) <= set(lifecycle.IN_FLIGHT_STATES)
