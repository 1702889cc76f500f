"""The simulator over real loopback HTTP, driven by a real aiohttp client."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.simulator import DEFAULT_VIDEO_PATH, MODEL_ID, SimulatorConfig, VideoServiceSimulator
from tests.conftest import SimulatorFactory as MakeSim
from tests.simulator.conftest import AUTH, CREATE, KEY, create, get_json, sleep_until

PROJECT_ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------- auth


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-key"}, {"Authorization": f"Basic {KEY}"}, {"Authorization": KEY}],
    ids=["missing", "wrong-key", "wrong-scheme", "no-scheme"],
)
async def test_bad_or_missing_key_is_401_on_every_endpoint(make_sim: MakeSim, headers: dict[str, str]) -> None:
    sim = await make_sim()
    async with aiohttp.ClientSession(headers=headers) as client:
        for method, path in [
            ("POST", CREATE),
            ("GET", "/gateway/videos/jobs/vid_x"),
            ("GET", "/gateway/videos/jobs/vid_x/content?index=0"),
            ("GET", "/key/info"),
        ]:
            async with client.request(method, sim.base_url + path, json={"prompt": "x"}) as resp:
                assert resp.status == 401, path
                assert resp.content_type == "application/json"
                assert "message" in (await resp.json())["error"]
    assert sim.spend == 0
    # Rejected before reaching any handler.
    assert sim.creates_received == 0
    assert sim.key_info_requests == 0


# -------------------------------------------------------------------------- create


async def test_accepted_create_is_202_and_charges_250(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    status, body = await create(session, sim, {"prompt": "a lighthouse at dusk", "seed": 42})

    assert status == 202
    assert set(body) == {"id", "status", "poll_path"}
    assert body["status"] == "pending"
    assert body["id"].startswith("vid_")
    assert body["poll_path"] == f"/gateway/videos/jobs/{body['id']}"
    assert sim.spend == 250
    assert (sim.creates_received, sim.creates_accepted) == (1, 1)
    job = sim.jobs[body["id"]]
    assert (job.prompt, job.seed) == ("a lighthouse at dusk", 42)

    _, info = await get_json(session, sim.base_url + "/key/info")
    assert info["info"]["spend"] == 250


async def test_fixed_settings_equal_to_the_model_are_accepted(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(max_budget=None)
    body = {
        "prompt": "p" * 2000,
        "length": 8,
        "resolution": "1280x720",
        "width": 1280,
        "height": 720,
        "audio": True,
        "model": MODEL_ID,
    }
    status, _ = await create(session, sim, body)
    assert status == 202
    assert sim.spend == 250


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": "p" * 2001},
        {"prompt": "x", "resolution": "1920x1080"},
        {"prompt": "x", "size": "720x1280"},
        {"prompt": "x", "width": 1920},
        {"prompt": "x", "model": "provider/video-model-2.0"},
        {"prompt": "x", "length": 10},
        {"prompt": "x", "duration": "4s"},
        {"prompt": "x", "audio": False},
        {"prompt": "x", "seed": "7"},
        {"prompt": "x", "seed": True},
        {"prompt": "x", "seed": 1.5},
        {"prompt": ""},
        {"prompt": "   "},
        {"prompt": 5},
        {"seed": 1},
        ["not", "an", "object"],
    ],
    ids=lambda body: str(body)[:40],
)
async def test_rejected_create_is_400_and_not_charged(
    make_sim: MakeSim, session: aiohttp.ClientSession, body: Any
) -> None:
    sim = await make_sim()
    status, err = await create(session, sim, body)
    assert status == 400
    assert err["error"]["message"]
    assert sim.spend == 0
    assert (sim.creates_received, sim.creates_accepted) == (1, 0)
    assert sim.jobs == {}


async def test_invalid_json_is_400(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    async with session.post(
        sim.base_url + CREATE, data=b"{not json", headers={"Content-Type": "application/json"}
    ) as resp:
        assert resp.status == 400
        assert resp.content_type == "application/json"
    assert sim.spend == 0


async def test_budget_exhausted_rejects_without_charging(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(max_budget=600)
    assert (await create(session, sim))[0] == 202
    assert (await create(session, sim))[0] == 202
    status, err = await create(session, sim)
    assert status == 400
    assert "budget" in err["error"]["message"]
    assert sim.spend == 500
    assert (sim.creates_received, sim.creates_accepted) == (3, 2)


# ----------------------------------------------------------------- status/download


async def test_status_goes_pending_in_progress_completed(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=0.6)
    _, created = await create(session, sim)
    job = sim.jobs[created["id"]]
    url = sim.base_url + created["poll_path"]

    _, body = await get_json(session, url)
    assert body["status"] == "pending"
    assert "content_path" not in body

    await sleep_until(job.in_progress_at)
    _, body = await get_json(session, url)
    assert body["status"] == "in_progress"
    assert "content_path" not in body

    await sleep_until(job.completed_at)
    status, body = await get_json(session, url)
    assert status == 200
    assert body == {
        "id": job.id,
        "status": "completed",
        "poll_path": f"/gateway/videos/jobs/{job.id}",
        "content_path": f"/gateway/videos/jobs/{job.id}/content",
    }
    assert job.status == "completed"
    assert sim.status_requests == 3


async def test_download_is_409_until_completed_then_exact_asset_bytes(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(job_seconds=0.2)
    _, created = await create(session, sim)
    content_url = f"{sim.base_url}/gateway/videos/jobs/{created['id']}/content?index=0"

    async with session.get(content_url) as resp:
        assert resp.status == 409
        assert resp.content_type == "application/json"

    await sleep_until(sim.jobs[created["id"]].completed_at)
    async with session.get(content_url) as resp:
        assert resp.status == 200
        assert resp.content_type == "video/mp4"
        data = await resp.read()
    assert data == DEFAULT_VIDEO_PATH.read_bytes()
    assert data[4:8] == b"ftyp"
    assert sim.download_requests == 2

    async with session.get(content_url.replace("index=0", "index=1")) as resp:
        assert resp.status == 400


async def test_unknown_job_is_404(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    status, err = await get_json(session, sim.base_url + "/gateway/videos/jobs/vid_missing")
    assert status == 404
    assert err["error"]["message"]
    status, _ = await get_json(session, sim.base_url + "/gateway/videos/jobs/vid_missing/content?index=0")
    assert status == 404
    status, _ = await get_json(session, sim.base_url + "/no/such/route")
    assert status == 404


async def test_fail_rate_one_ends_failed_without_content(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=0.1, fail_rate=1.0)
    _, created = await create(session, sim)
    await sleep_until(sim.jobs[created["id"]].completed_at)

    _, body = await get_json(session, sim.base_url + created["poll_path"])
    assert body["status"] == "failed"
    assert "content_path" not in body
    status, _ = await get_json(session, sim.base_url + created["poll_path"] + "/content?index=0")
    assert status == 409
    # Failure happens after acceptance, so the job was still charged.
    assert sim.spend == 250


async def test_durations_and_failures_are_seeded_and_within_range(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    runs = []
    for _ in range(2):
        sim = await make_sim(job_seconds=1.0, job_seconds_max=3.0, fail_rate=0.5, seed=7, max_budget=None)
        for _ in range(20):
            assert (await create(session, sim))[0] == 202
        runs.append([(job.duration, job.will_fail) for job in sim.jobs.values()])
    assert runs[0] == runs[1]
    assert all(1.0 <= duration <= 3.0 for duration, _ in runs[0])
    assert len({duration for duration, _ in runs[0]}) > 1
    assert {fail for _, fail in runs[0]} == {True, False}


# ------------------------------------------------------------------------ key info


async def test_key_info_reports_masked_key_spend_and_budget(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(max_budget=10_000)
    await create(session, sim)
    status, body = await get_json(session, sim.base_url + "/key/info")
    assert status == 200
    assert body["info"] == {"spend": 250, "max_budget": 10_000}
    assert isinstance(body["key"], str)
    assert KEY not in body["key"]
    assert body["key"].endswith(KEY[-4:])
    assert sim.key_info_requests == 1


async def test_key_info_mask_keeps_sk_prefix(make_sim: MakeSim) -> None:
    sim = await make_sim(api_key="sk-live-0123456789abcd")
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer sk-live-0123456789abcd"}) as client:
        _, body = await get_json(client, sim.base_url + "/key/info")
    assert body["key"] == "sk-...abcd"


async def test_key_info_null_budget(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(max_budget=None, price_yen=5_000)
    for _ in range(3):
        assert (await create(session, sim))[0] == 202
    _, body = await get_json(session, sim.base_url + "/key/info")
    assert body["info"] == {"spend": 15_000, "max_budget": None}


async def test_echo_raw_key(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(echo_raw_key=True)
    _, body = await get_json(session, sim.base_url + "/key/info")
    assert body["key"] == KEY


async def test_key_never_in_url_but_sent_in_header(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=0)
    _, created = await create(session, sim)
    await get_json(session, sim.base_url + created["poll_path"])
    await get_json(session, sim.base_url + "/key/info")
    assert [(method, path.split("?")[0]) for method, path, _ in sim.requests_log] == [
        ("POST", CREATE),
        ("GET", created["poll_path"]),
        ("GET", "/key/info"),
    ]
    for _, path_qs, headers in sim.requests_log:
        assert KEY not in path_qs
        assert headers["Authorization"] == f"Bearer {KEY}"


# ----------------------------------------------------------------- fault injection


async def test_injected_429_with_retry_after_is_not_charged(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.inject("create", 429, times=2, retry_after=1)
    for _ in range(2):
        async with session.post(sim.base_url + CREATE, json={"prompt": "x"}) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "1"
            assert resp.content_type == "application/json"
    assert sim.spend == 0
    assert (await create(session, sim))[0] == 202
    assert sim.spend == 250
    assert (sim.creates_received, sim.creates_accepted) == (3, 1)


async def test_injected_faults_on_other_endpoints_use_given_body(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim()
    sim.inject("key_info", 503, body={"detail": "maintenance"})
    sim.inject("status", 500)
    assert await get_json(session, sim.base_url + "/key/info") == (503, {"detail": "maintenance"})
    assert (await get_json(session, sim.base_url + "/key/info"))[0] == 200
    status, body = await get_json(session, sim.base_url + "/gateway/videos/jobs/vid_x")
    assert status == 500
    assert "Retry-After" not in body


async def test_hang_next_create_times_out_client_but_charges(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.hang_next_create()
    with pytest.raises(TimeoutError):
        await create(session, sim, timeout=aiohttp.ClientTimeout(total=0.3))
    # Outcome unknown to the client, but the service accepted and charged it.
    assert sim.spend == 250
    assert sim.creates_accepted == 1
    assert len(sim.jobs) == 1
    # The hang is consumed; the next create answers normally.
    assert (await create(session, sim))[0] == 202


async def test_hang_without_accept_is_not_charged(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.hang_next_create(0.2, accept=False)
    status, _ = await create(session, sim)
    assert status == 503
    assert sim.spend == 0
    assert sim.jobs == {}


async def test_stop_releases_a_hung_create_quickly(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.hang_next_create(3600)
    pending = asyncio.create_task(create(session, sim))
    for _ in range(200):  # bounded wait for the request to reach the handler
        if sim.creates_received:
            break
        await asyncio.sleep(0.01)
    assert sim.creates_accepted == 1
    started = time.monotonic()
    await sim.stop()
    assert time.monotonic() - started < 1.5
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await pending


async def test_drop_next_create_disconnects_after_charging(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.drop_next_create()
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await create(session, sim)
    assert sim.spend == 250
    assert len(sim.jobs) == 1
    assert (await create(session, sim))[0] == 202
    assert sim.spend == 500


async def test_drop_without_accept_is_not_charged(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.drop_next_create(accept=False)
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await create(session, sim)
    assert sim.spend == 0
    assert sim.creates_received == 1


async def test_rate_limit_gives_429_over_the_window(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(rate_limit_per_second=3, max_budget=None)

    async def post() -> tuple[int, str | None]:
        async with session.post(sim.base_url + CREATE, json={"prompt": "x"}) as resp:
            assert resp.content_type == "application/json"
            return resp.status, resp.headers.get("Retry-After")

    results = await asyncio.gather(*(post() for _ in range(6)))
    assert sorted(results, key=lambda r: r[0]) == [(202, None)] * 3 + [(429, "1")] * 3
    assert sim.responses_429 == 3
    assert sim.spend == 750
    # Throttled requests never reach the handler.
    assert sim.creates_received == 3

    await asyncio.sleep(1.05)
    status, _ = await get_json(session, sim.base_url + "/key/info")
    assert status == 200


# ------------------------------------------------------------------------ lifecycle


async def test_start_returns_base_url_and_stop_is_idempotent() -> None:
    sim = VideoServiceSimulator(SimulatorConfig(api_key=KEY))
    with pytest.raises(RuntimeError):
        _ = sim.base_url
    url = await sim.start()
    assert url == sim.base_url
    assert url.startswith("http://127.0.0.1:")
    await sim.stop()
    await sim.stop()
    async with aiohttp.ClientSession(headers=AUTH) as client:
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.get(url + "/key/info")


async def test_cli_prints_url_serves_and_stops_on_sigint() -> None:
    secret = "cli-secret-key-9876"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.simulator",
        "--port",
        "0",
        "--api-key",
        secret,
        "--max-budget",
        "none",
        cwd=PROJECT_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=10)).decode().strip()
        assert line.startswith("http://127.0.0.1:")
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {secret}"}) as client:
            _, body = await get_json(client, line + "/key/info")
        assert body["info"] == {"spend": 0, "max_budget": None}
        proc.send_signal(signal.SIGINT)
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    assert b"GET /key/info -> 200" in stderr
    assert secret.encode() not in stderr
