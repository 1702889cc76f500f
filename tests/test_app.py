"""bot/app.py's process-wide step: start-up's objects frozen out of the collector's scans."""

import gc
import weakref
from collections.abc import Iterator

import pytest

from bot.app import freeze_start_up


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process goes on collecting what later tests make


def test_start_up_objects_leave_the_collectors_scans_and_its_garbage_goes_first(unfrozen: None) -> None:
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    garbage = Cycle()
    kept = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    freeze_start_up()
    frozen = gc.get_freeze_count()
    assert frozen > 1000, "the modules, classes and functions start-up made"
    gc.collect()
    assert gc.get_freeze_count() == frozen, "a full collection no longer walks them"
    assert gone() is None, "start-up's garbage was collected, not frozen"
    assert kept.me is kept
