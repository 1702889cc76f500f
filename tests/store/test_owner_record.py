"""The run before this one on the same data folder: known for certain once its lock is free, unknown otherwise."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import pytest

from bot.store.leases import new_owner
from bot.store.owner_record import RECORD_NAME, OwnerRecord


def test_each_start_learns_the_run_before_it_on_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "videos"  # not made yet: the first start makes it
    first_owner, second_owner = new_owner(), new_owner()
    first = OwnerRecord.take(folder, first_owner)
    assert first.predecessor is None, "nothing ran here before"
    assert (folder / RECORD_NAME).read_text() == first_owner
    first.close()
    second = OwnerRecord.take(folder, second_owner)
    assert second.predecessor == first_owner
    assert (folder / RECORD_NAME).read_text() == second_owner
    second.close()


async def test_a_killed_run_is_the_next_ones_predecessor_and_a_live_one_never_is(tmp_path: Path) -> None:
    owner = new_owner()
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import time; from pathlib import Path; from bot.store.owner_record import OwnerRecord\n"
        f"record = OwnerRecord.take(Path({str(tmp_path)!r}), {owner!r}); print('held', flush=True); time.sleep(60)",
        stdout=asyncio.subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert (await holder.stdout.readline()).strip() == b"held"
    # Alive (a second process sharing this folder): not a predecessor, and its record is left as it is.
    beside = OwnerRecord.take(tmp_path, new_owner())
    assert beside.predecessor is None
    assert (tmp_path / RECORD_NAME).read_text() == owner
    beside.close()
    holder.kill()  # kill -9: the kernel frees its lock
    await holder.wait()
    after = OwnerRecord.take(tmp_path, new_owner())
    assert after.predecessor == owner
    after.close()


def test_a_record_of_another_boot_or_of_an_unknown_one_names_no_predecessor(tmp_path: Path) -> None:
    """A folder on a network disk whose locks do not reach other machines: a run of another machine is no proof."""
    host, pid, random, space = new_owner().split(":")
    boot, namespace = space.split(".")
    for recorded in (f"{host}:{pid}:{random}:{'0' * len(boot)}.{namespace}", f"{host}:{pid}:{random}",
                     f"{host}:{pid}:{random}:?"):
        (tmp_path / RECORD_NAME).write_text(recorded)
        record = OwnerRecord.take(tmp_path, new_owner())
        assert record.predecessor is None, recorded
        record.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_folder_the_bot_cannot_write_names_no_predecessor_and_starts_all_the_same(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path.chmod(0o500)
    try:
        record = OwnerRecord.take(tmp_path / "videos", new_owner())
    finally:
        tmp_path.chmod(0o700)
    assert record.predecessor is None
    record.close()
    assert str(tmp_path / "videos") in caplog.text


def test_a_record_in_the_way_of_a_folder_names_no_predecessor_and_starts_all_the_same(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / RECORD_NAME).mkdir()
    with caplog.at_level(logging.WARNING):
        record = OwnerRecord.take(tmp_path, new_owner())
    assert record.predecessor is None
    record.close()
    assert str(tmp_path / RECORD_NAME) in caplog.text and "waits" in caplog.text
