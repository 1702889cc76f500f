"""bot/jobs/durations.py: what the recorded durations say about a job's chance to be done."""

from __future__ import annotations

import pytest

from bot.jobs.durations import DurationModel

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


def test_a_stored_state_no_run_wrote_is_refused_and_one_out_of_reason_is_bounded() -> None:
    durations = DurationModel((60.0, 180.0))
    for damaged in (
        '{"first_offset": NaN, "recent": []}',  # every first poll would be planned at NaN
        '{"first_offset": -5, "recent": []}',
        '{"first_offset": 50, "probe_factor": Infinity, "recent": []}',
        '{"first_offset": 50, "probe_factor": 0, "recent": []}',
        '{"first_offset": 50, "recent": [100, Infinity]}',
        '{"first_offset": 50, "recent": [NaN]}',
        '{"first_offset": 50, "recent": [100, "soon"]}',
        '{"first_offset": [50], "recent": []}',
    ):
        with pytest.raises((ValueError, TypeError)):
            durations.loads(MODEL, damaged)
    # Out of reason but usable: the first poll no later than the longest duration known (the prior's 180 s here),
    # the factor within its range, a negative duration dropped.
    durations.loads(MODEL, '{"first_offset": 1e9, "probe_factor": 9.0, "recent": [100.0, -1.0, 150.0]}')
    assert durations.first_poll_after(MODEL) == 180.0
    assert durations.probe_factor(MODEL, at_most=100.0) == 1.25
    assert durations.samples(MODEL) == 2
    durations.loads(MODEL, '{"first_offset": 1e9, "recent": [300.0]}')
    assert durations.first_poll_after(MODEL) == 300.0


async def test_a_damaged_stored_state_leaves_the_prior_standing() -> None:
    class Meta:
        async def get_meta(self, key: str) -> str | None:
            return None

        async def set_meta(self, key: str, value: str) -> None:
            raise AssertionError("nothing is written while loading")

        async def meta_with_prefix(self, prefix: str) -> dict[str, str]:
            return {prefix + MODEL: '{"first_offset": NaN, "recent": [50.0]}', prefix + "other": '{"first_offset": 40'}

    durations = DurationModel((60.0, 180.0))
    await durations.load(Meta())
    assert durations.first_poll_after(MODEL) == 60.0 and durations.samples(MODEL) == 0
    assert durations.first_poll_after("other") == 60.0
