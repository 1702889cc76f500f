"""More than one model: each at its own create path and flat price, with status and download shared."""

from __future__ import annotations

import aiohttp
import pytest

from bot.simulator import CREATE_PATH, MODEL_ID, SimModel, SimulatorConfig
from bot.simulator.__main__ import build_parser, config_from_args
from tests.conftest import SimulatorFactory as MakeSim
from tests.simulator.conftest import get_json, sleep_until

PRO = SimModel(id="provider/video-model-2.0-pro", create_path="/gateway/videos/create-pro", price_yen=1_200)
STILL = SimModel(id="provider/still-1", create_path="/gateway/stills/create", price_yen=40, supports_seed=False)


async def post(session: aiohttp.ClientSession, url: str, body: object) -> tuple[int, dict[str, object]]:
    async with session.post(url, json=body) as resp:
        return resp.status, await resp.json()


async def test_each_model_is_charged_its_own_price_and_shares_status_and_download(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(job_seconds=0.2, max_budget=None, extra_models=(PRO,))

    fast_status, fast = await post(session, sim.base_url + CREATE_PATH, {"prompt": "a fox"})
    pro_status, pro = await post(session, sim.base_url + PRO.create_path, {"prompt": "a fox", "seed": 3})

    assert (fast_status, pro_status) == (202, 202)
    assert sim.spend == 250 + 1_200
    assert sim.spend_by_model == {MODEL_ID: 250, PRO.id: 1_200}
    assert sim.jobs[str(pro["id"])].model == PRO.id and sim.jobs[str(fast["id"])].model == MODEL_ID
    status, info = await get_json(session, sim.base_url + "/key/info")
    assert status == 200 and info["info"] == {"spend": 1_450, "max_budget": None}
    # One status and one download endpoint for every model.
    await sleep_until(sim.jobs[str(pro["id"])].completed_at)
    status, body = await get_json(session, sim.base_url + str(pro["poll_path"]))
    assert status == 200 and body["status"] == "completed"
    async with session.get(sim.base_url + str(body["content_path"])) as resp:
        assert resp.status == 200 and resp.content_type == "video/mp4"


async def test_a_model_without_seed_support_refuses_a_seed_uncharged(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(extra_models=(STILL,))

    status, body = await post(session, sim.base_url + STILL.create_path, {"prompt": "a fox", "seed": 1})
    assert status == 400 and "does not take a seed" in str(body)
    status, body = await post(session, sim.base_url + STILL.create_path, {"prompt": "a fox", "model": MODEL_ID})
    assert status == 400 and f"only serves model {STILL.id}" in str(body)
    assert sim.spend == 0
    assert (await post(session, sim.base_url + STILL.create_path, {"prompt": "a fox"}))[0] == 202
    assert sim.spend == 40


async def test_the_budget_check_uses_the_models_own_price(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(max_budget=1_000, extra_models=(PRO,))

    status, body = await post(session, sim.base_url + PRO.create_path, {"prompt": "a fox"})
    assert status == 400 and "budget exceeded" in str(body)
    assert (await post(session, sim.base_url + CREATE_PATH, {"prompt": "a fox"}))[0] == 202
    assert sim.spend == 250


@pytest.mark.parametrize(
    "models",
    [
        (SimModel(MODEL_ID, "/other/create", 100),),  # the spec model's id again
        (SimModel("x", CREATE_PATH, 100),),  # the spec model's path again
        (SimModel("x", "/gateway/videos/jobs/create", 100),),  # under the shared status path
        (SimModel("x", "relative/create", 100),),
        (SimModel("x", "/x/create", 0),),
        (PRO, PRO),
    ],
)
def test_bad_models_are_refused_when_configured(models: tuple[SimModel, ...]) -> None:
    with pytest.raises(ValueError):
        SimulatorConfig(extra_models=models)


def test_the_cli_takes_more_models_and_the_spec_models_price() -> None:
    args = build_parser().parse_args([
        "--price", "300", "--model", f"{PRO.id},{PRO.create_path},1200",
        "--model", f"{STILL.id},{STILL.create_path},40,no-seed",
    ])
    config = config_from_args(args)

    assert config.price_yen == 300
    assert config.extra_models == (PRO, STILL)
    assert [m.price_yen for m in config.models] == [300, 1_200, 40]


@pytest.mark.parametrize("value", ["only-an-id", "a,/b,ten", "a,/b,10,seed", "a,/b"])
def test_the_cli_refuses_a_malformed_model(value: str) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--model", value])
