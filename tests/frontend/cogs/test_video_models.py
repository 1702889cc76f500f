"""/video with more than one model: each request is charged, shown and counted at its own model's price."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.errors import BudgetTooLow, InvalidRequest, ModelUnavailable
from bot.frontend.cogs.balance import BalanceCog
from bot.frontend.cogs.video import VideoCog
from bot.simulator import MODEL_ID, SimModel
from bot.store.jobs import AdmissionRefused, JobState
from tests.conftest import SIM_KEY
from tests.conftest import SimulatorFactory as MakeSim
from tests.frontend.cogs.helpers import GUILD_ID, Stack, embed_fields, invoke, open_stack
from tests.frontend.test_command_schema import TWO_MODELS

PRO_ID = "provider/video-model-2.0-pro"
PRO = SimModel(id=PRO_ID, create_path="/gateway/videos/create-pro", price_yen=1_200, supports_seed=False)


@contextlib.asynccontextmanager
async def two_models(start_simulator: MakeSim, tmp_path: Path, *, max_budget: int = 10_000, default: str = "",
                     daily_cap: str = "") -> AsyncIterator[Stack]:
    models = tmp_path / "models.toml"
    models.write_text((f'default = "{default}"\n' if default else "") + TWO_MODELS, encoding="utf-8")
    simulator = await start_simulator(job_seconds=0.3, max_budget=max_budget, extra_models=(PRO,))
    async with open_stack(simulator, SIM_KEY, tmp_path, MODELS_FILE=str(models), GUILD_DAILY_BUDGET_YEN=daily_cap,
                          VIDEO_COOLDOWN_SECONDS="0") as stack:
        yield stack


@pytest.fixture
async def stack(start_simulator: MakeSim, tmp_path: Path) -> AsyncIterator[Stack]:
    async with two_models(start_simulator, tmp_path) as stack:
        yield stack


async def video(stack: Stack, **arguments: Any) -> BaseException | None:
    cog = VideoCog(stack.bot)
    return await invoke(stack, cog.video, stack.interaction(cog.video), **arguments)


async def test_the_chosen_model_is_created_at_its_path_charged_and_shown_at_its_price(stack: Stack) -> None:
    assert await video(stack, prompt="a lighthouse", model=PRO_ID) is None

    assert "service POST /gateway/videos/create-pro" in stack.log.names()
    assert stack.simulator.spend_by_model == {PRO_ID: 1_200}
    [job] = await stack.store.jobs_in_states(JobState)
    assert (job.model, job.charged_yen) == (PRO_ID, 1_200)
    assert await stack.store.ledger() == (1, 1_200)
    embed = stack.log.only_reply().embed
    assert embed is not None
    assert embed_fields(embed)["Cost"] == "¥1,200" and embed_fields(embed)["Model"] == "Video 2.0 Pro"


async def test_no_model_given_is_the_default_model_at_its_price(stack: Stack) -> None:
    assert await video(stack, prompt="a lighthouse", seed=4) is None

    [job] = await stack.store.jobs_in_states(JobState)
    assert (job.model, job.charged_yen, job.seed) == (MODEL_ID, 250, 4)
    assert stack.simulator.spend_by_model == {MODEL_ID: 250}


async def test_a_seed_for_a_model_that_takes_none_is_refused_before_anything_is_recorded(stack: Stack) -> None:
    error = await video(stack, prompt="a lighthouse", model=PRO_ID, seed=4)

    assert isinstance(error, InvalidRequest) and error.code == "seed_unsupported"
    assert await stack.store.jobs_in_states(JobState) == [] and stack.simulator.creates_received == 0


async def test_a_model_not_in_the_catalogue_is_refused_privately_with_the_choices(stack: Stack) -> None:
    error = await video(stack, prompt="a lighthouse", model="provider/gone")

    assert isinstance(error, ModelUnavailable)
    reply = stack.log.only_reply()
    assert reply.kwargs["ephemeral"] is True
    assert reply.content == ("There is no model `provider/gone`. Choose one of: Video 2.0 Fast · ¥250, "
                             "Video 2.0 Pro · ¥1,200. Nothing was spent.")
    assert await stack.store.jobs_in_states(JobState) == [] and stack.simulator.creates_received == 0


async def test_the_budget_check_uses_the_chosen_models_price(start_simulator: MakeSim, tmp_path: Path) -> None:
    async with two_models(start_simulator, tmp_path, max_budget=1_000) as stack:
        error = await video(stack, prompt="a lighthouse", model=PRO_ID)

        assert isinstance(error, BudgetTooLow) and error.price_yen == 1_200
        assert "one video costs ¥1,200" in (stack.log.only_reply().content or "")
        assert stack.simulator.creates_received == 0


async def test_the_hosts_daily_cap_counts_the_chosen_models_price(start_simulator: MakeSim, tmp_path: Path) -> None:
    async with two_models(start_simulator, tmp_path, daily_cap="1000") as stack:
        error = await video(stack, prompt="a lighthouse", model=PRO_ID)
        assert isinstance(error, AdmissionRefused) and error.code == "host_guild_daily_cap"
        assert await video(stack, prompt="a lighthouse") is None
        assert stack.simulator.spend == 250


async def test_balance_counts_videos_left_at_the_default_models_price(start_simulator: MakeSim, tmp_path: Path) -> None:
    async with two_models(start_simulator, tmp_path, default=PRO_ID) as stack:
        cog = BalanceCog(stack.bot)
        await invoke(stack, cog.balance, stack.interaction(cog.balance))

        embed = stack.log.only_reply().embed
        assert embed is not None
        assert embed_fields(embed)["Videos left"] == "8 at ¥1,200 each"


async def test_a_servers_default_model_and_allowed_models_decide(stack: Stack) -> None:
    rules = stack.bot.requests.rules
    await rules.change(GUILD_ID, 900, {"default_model": PRO_ID})
    assert await video(stack, prompt="a lighthouse") is None  # no model given: this server's default
    [job] = await stack.store.jobs_in_states(JobState)
    assert (job.model, job.charged_yen) == (PRO_ID, 1_200)

    await rules.change(GUILD_ID, 900, {"allowed_models": [MODEL_ID], "default_model": None})
    error = await video(stack, prompt="a lighthouse", model=PRO_ID)
    assert isinstance(error, ModelUnavailable) and error.problem == "not_allowed"
    assert stack.simulator.creates_received == 1
    assert await video(stack, prompt="a lighthouse") is None
    assert stack.simulator.spend_by_model == {PRO_ID: 1_200, MODEL_ID: 250}
