"""The key's budget read once for every caller at a time, and kept a few seconds for /balance and the alerts."""

from __future__ import annotations

import asyncio

import pytest

from bot.core.errors import ServerError
from bot.service.client import VideoServiceClient
from bot.service.key_budget import KEY_INFO_FRESH_SECONDS, KeyBudget
from bot.simulator import VideoServiceSimulator
from tests.conftest import Clock


async def test_concurrent_readers_share_one_read_and_later_ones_its_answer_while_fresh(
    simulator: VideoServiceSimulator, sim_client: VideoServiceClient
) -> None:
    clock = Clock()
    budget = KeyBudget(sim_client, clock=clock)
    infos = await asyncio.gather(*(budget.read() for _ in range(20)))
    assert simulator.key_info_requests == 1 and {info.spend for info in infos} == {0}

    simulator.spend = 500
    clock.now += KEY_INFO_FRESH_SECONDS - 0.1
    assert (await budget.read()).spend == 0  # still fresh: no read
    assert simulator.key_info_requests == 1
    clock.now += 0.1
    assert (await budget.read()).spend == 500
    assert simulator.key_info_requests == 2


async def test_a_fresh_read_joins_one_on_its_way_but_never_takes_an_older_answer(
    simulator: VideoServiceSimulator, sim_client: VideoServiceClient
) -> None:
    budget = KeyBudget(sim_client, clock=Clock())
    await budget.read()
    simulator.spend = 250
    assert (await budget.read(max_age=0)).spend == 250  # the check before a create: a read of its own
    both = await asyncio.gather(budget.read(max_age=0), budget.read())
    assert [info.spend for info in both] == [250, 250] and simulator.key_info_requests == 3


async def test_a_failed_read_is_kept_as_long_so_an_outage_is_not_read_again_for_each_balance(
    simulator: VideoServiceSimulator, sim_client: VideoServiceClient
) -> None:
    clock = Clock()
    budget = KeyBudget(sim_client, clock=clock)
    simulator.inject("key_info", 503, times=3)  # every attempt of the client's retry policy
    for _ in range(5):
        with pytest.raises(ServerError):
            await budget.read()
    assert simulator.key_info_requests == 3
    assert (await budget.read(max_age=0)).spend == 0  # a create's check reads again
    clock.now += KEY_INFO_FRESH_SECONDS
    assert (await budget.read()).spend == 0


async def test_a_reader_that_gives_up_does_not_cancel_the_read_the_others_wait_for(
    simulator: VideoServiceSimulator, sim_client: VideoServiceClient
) -> None:
    budget = KeyBudget(sim_client, clock=Clock())
    impatient = asyncio.create_task(budget.read())
    patient = asyncio.create_task(budget.read())
    await asyncio.sleep(0)
    impatient.cancel()
    assert (await patient).spend == 0
    assert simulator.key_info_requests == 1


async def test_a_create_of_this_process_drops_the_answer_kept_and_the_read_on_its_way(
    simulator: VideoServiceSimulator, sim_client: VideoServiceClient
) -> None:
    budget = KeyBudget(sim_client, clock=Clock())
    await budget.read()
    simulator.spend = 250  # a create accepted
    budget.spend_moved()
    assert (await budget.read()).spend == 250  # fresh, though the kept answer was not old

    before_the_charge = asyncio.create_task(budget.read(max_age=0))  # on its way when the next charge happens
    await asyncio.sleep(0)
    budget.spend_moved()
    simulator.spend = 500
    await before_the_charge
    assert (await budget.read()).spend == 500
    assert simulator.key_info_requests == 4
