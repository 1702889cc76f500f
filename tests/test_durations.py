"""bot/durations.py: what the recorded durations say about a job's chance to be done."""

from __future__ import annotations

import pytest

from bot.durations import DurationModel

MODEL = "provider/video-model-2.0-fast"


def test_a_recorded_duration_known_to_within_a_spread_counts_in_proportion() -> None:
    durations = DurationModel((60.0, 180.0))
    assert durations.share_done_by(MODEL, 100.0) is None, "no data yet"
    for duration in [50.0] * 10 + [150.0] * 10:
        durations.record(MODEL, duration)
    assert durations.share_done_by(MODEL, 50.0) == 0.5, "exact: everything recorded at or before 50 s"
    # Recorded at 50 s, each ended somewhere in 40-60 s.
    assert [durations.share_done_by(MODEL, age, spread=10.0) for age in (40.0, 45.0, 50.0, 57.0, 60.0, 139.0)] \
        == pytest.approx([0.0, 0.125, 0.25, 0.425, 0.5, 0.5])
    assert durations.share_done_by(MODEL, 155.0, spread=10.0) == pytest.approx(0.875)
