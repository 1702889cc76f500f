"""Switchable misbehaviours of the simulator, over real loopback HTTP with a real aiohttp client."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from yarl import URL

from bot.simulator import (
    DEFAULT_FOREIGN_BASE_URL,
    DEFAULT_VIDEO_PATH,
    SimulatorConfig,
    VideoServiceSimulator,
    service_masked_key,
)
from bot.simulator.__main__ import build_parser, config_from_args
from tests.conftest import SimulatorFactory as MakeSim
from tests.simulator.conftest import AUTH, CREATE, KEY, create, get_json, sleep_until

VIDEO = DEFAULT_VIDEO_PATH.read_bytes()
FTYP = VIDEO[: int.from_bytes(VIDEO[:4], "big")]
JOBS = "/gateway/videos/jobs"


def job_url(sim: VideoServiceSimulator, job_id: str, suffix: str = "") -> URL:
    """The URL a careful client builds: the id percent-encoded as one path segment."""
    return URL(f"{sim.base_url}{JOBS}/{quote(job_id, safe='')}{suffix}", encoded=True)


def download_url(sim: VideoServiceSimulator, job_id: str) -> URL:
    return job_url(sim, job_id, "/content?index=0")


async def completed_job(session: aiohttp.ClientSession, sim: VideoServiceSimulator) -> str:
    status, created = await create(session, sim)
    assert status == 202
    await sleep_until(sim.jobs[created["id"]].completed_at)
    return str(created["id"])


def assert_ledger_matches(sim: VideoServiceSimulator) -> None:
    assert sim.spend == sim.config.price_yen * sim.creates_accepted == 250 * len(sim.accepted_job_ids)


# ------------------------------------------------------------------------- job ids


@pytest.mark.parametrize(
    "job_id",
    ["a/b", "x" * 5000, "%2e%2e", "ビデオ ü?#&", "content"],
    ids=["slash", "5000-chars", "encoded-dots", "unicode", "content"],
)
async def test_forced_id_is_returned_charged_and_routable(
    make_sim: MakeSim, session: aiohttp.ClientSession, job_id: str
) -> None:
    sim = await make_sim(job_seconds=0)
    sim.force_next_job_ids(job_id)

    status, created = await create(session, sim)
    assert status == 202
    assert created["id"] == job_id
    assert created["poll_path"] == f"{JOBS}/{job_id}"
    assert list(sim.jobs) == [job_id]
    assert sim.accepted_job_ids == [job_id]
    assert sim.spend == 250

    async with session.get(job_url(sim, job_id)) as resp:
        assert resp.status == 200
        assert (await resp.json())["id"] == job_id
    async with session.get(download_url(sim, job_id)) as resp:
        assert resp.status == 200
        assert await resp.read() == VIDEO
    # The next create is back to normal ids.
    status, created = await create(session, sim)
    assert created["id"].startswith("vid_")
    assert_ledger_matches(sim)


async def test_unroutable_forced_ids_are_still_charged(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.force_next_job_ids("..", ".", "")
    ids = [(await create(session, sim))[1]["id"] for _ in range(3)]
    assert ids == ["..", ".", ""]
    assert sim.accepted_job_ids == ids
    assert set(sim.jobs) == {"..", ".", ""}
    assert sim.spend == 750
    assert_ledger_matches(sim)


async def test_rejected_creates_do_not_use_up_forced_ids(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.force_next_job_ids("first", "second")
    sim.inject("create", 429)
    assert (await create(session, sim))[0] == 429
    assert (await create(session, sim, {"prompt": ""}))[0] == 400
    assert [(await create(session, sim))[1]["id"] for _ in range(3)][:2] == ["first", "second"]
    assert sim.creates_received == 5
    assert sim.creates_accepted == 3
    assert_ledger_matches(sim)


async def test_forced_ids_from_config_and_cli(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    args = build_parser().parse_args(["--job-id", "..", "--job-id", "a/b"])
    config = config_from_args(args)
    assert config.forced_job_ids == ("..", "a/b")
    sim = await make_sim(forced_job_ids=config.forced_job_ids)
    ids = [(await create(session, sim))[1]["id"] for _ in range(3)]
    assert ids[:2] == ["..", "a/b"]
    assert ids[2].startswith("vid_")


async def test_duplicate_id_is_charged_again_and_leaves_the_job_alone(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(job_seconds=60)
    _, first = await create(session, sim, {"prompt": "first prompt", "seed": 1})
    original = sim.jobs[first["id"]]
    snapshot = (original.prompt, original.seed, original.created_at, original.duration, original.will_fail)

    sim.duplicate_next_job_id()
    status, dup = await create(session, sim, {"prompt": "second prompt", "seed": 2})

    assert status == 202
    assert dup["id"] == first["id"]
    assert dup["poll_path"] == first["poll_path"]
    assert sim.spend == 500
    assert sim.creates_accepted == 2
    assert sim.accepted_job_ids == [first["id"], first["id"]]
    assert list(sim.jobs) == [first["id"]]
    job = sim.jobs[first["id"]]
    assert job is original
    assert (job.prompt, job.seed, job.created_at, job.duration, job.will_fail) == snapshot
    # One-shot: the next create gets a new job.
    _, third = await create(session, sim)
    assert third["id"] not in (first["id"],)
    assert len(sim.jobs) == 2
    assert_ledger_matches(sim)


async def test_duplicate_of_the_most_recent_job(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    await create(session, sim)
    _, latest = await create(session, sim)
    sim.duplicate_next_job_id(times=2)
    ids = [(await create(session, sim))[1]["id"] for _ in range(2)]
    assert ids == [latest["id"], latest["id"]]
    assert sim.spend == 1000


async def test_duplicate_with_no_job_yet_issues_a_fresh_id(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.duplicate_next_job_id()
    status, created = await create(session, sim)
    assert status == 202
    assert list(sim.jobs) == [created["id"]]


async def test_forcing_an_existing_id_is_a_duplicate(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    _, first = await create(session, sim)
    await create(session, sim)
    sim.force_next_job_ids(first["id"])
    _, again = await create(session, sim)
    assert again["id"] == first["id"]
    assert len(sim.jobs) == 2
    assert sim.spend == 750


async def test_duplicate_job_ids_mode_reuses_one_id(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(duplicate_job_ids=True)
    ids = [(await create(session, sim))[1]["id"] for _ in range(4)]
    assert len(set(ids)) == 1
    assert len(sim.jobs) == 1
    assert sim.spend == 1000
    assert_ledger_matches(sim)


# ---------------------------------------------------------------------- foreign paths


async def test_foreign_paths_other_job(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=0, foreign_paths="other_job")
    _, only = await create(session, sim)
    # With no other job yet, the paths name a job the simulator never issued.
    assert only["poll_path"] != f"{JOBS}/{only['id']}"
    assert only["poll_path"].removeprefix(JOBS + "/") not in sim.jobs

    _, second = await create(session, sim)
    assert second["poll_path"] == f"{JOBS}/{only['id']}"
    _, body = await get_json(session, sim.base_url + f"{JOBS}/{second['id']}")
    assert body["id"] == second["id"]
    assert body["status"] == "completed"
    assert body["poll_path"] == f"{JOBS}/{only['id']}"
    assert body["content_path"] == f"{JOBS}/{only['id']}/content"
    _, body = await get_json(session, sim.base_url + f"{JOBS}/{only['id']}")
    assert body["content_path"] == f"{JOBS}/{second['id']}/content"


@pytest.mark.parametrize(
    ("mode", "expected_poll", "expected_content"),
    [
        ("other_endpoint", "/key/info", "/key/info"),
        ("absolute", DEFAULT_FOREIGN_BASE_URL + JOBS + "/{id}", DEFAULT_FOREIGN_BASE_URL + JOBS + "/{id}/content"),
    ],
)
async def test_foreign_paths_fixed_targets(
    make_sim: MakeSim, session: aiohttp.ClientSession, mode: str, expected_poll: str, expected_content: str
) -> None:
    sim = await make_sim(job_seconds=0, foreign_paths=mode)
    _, created = await create(session, sim)
    job_id = created["id"]
    assert created["poll_path"] == expected_poll.format(id=job_id)
    _, body = await get_json(session, sim.base_url + f"{JOBS}/{job_id}")
    assert (body["id"], body["status"]) == (job_id, "completed")
    assert body["poll_path"] == expected_poll.format(id=job_id)
    assert body["content_path"] == expected_content.format(id=job_id)


async def test_foreign_paths_absolute_uses_the_configured_host(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(foreign_paths="absolute", foreign_base_url="http://evil.example:8443/")
    _, created = await create(session, sim)
    assert created["poll_path"] == f"http://evil.example:8443{JOBS}/{created['id']}"


async def test_foreign_paths_dotdot_resolve_to_key_info(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=0, foreign_paths="dotdot")
    _, created = await create(session, sim)
    _, body = await get_json(session, sim.base_url + f"{JOBS}/{created['id']}")
    base = URL(sim.base_url)
    for path, own in [
        (created["poll_path"], f"{JOBS}/{created['id']}"),
        (body["poll_path"], f"{JOBS}/{created['id']}"),
        (body["content_path"], f"{JOBS}/{created['id']}/content"),
    ]:
        assert path.startswith(own + "/..")
        # A client that joins the path naively ends up on another endpoint.
        assert base.join(URL(path)).path == "/key/info"


async def test_foreign_paths_switch_on_and_off_while_running(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    _, created = await create(session, sim)
    url = sim.base_url + created["poll_path"]
    sim.reconfigure(foreign_paths="other_endpoint")
    assert (await get_json(session, url))[1]["poll_path"] == "/key/info"
    sim.reconfigure(foreign_paths=None)
    assert (await get_json(session, url))[1]["poll_path"] == created["poll_path"]


# --------------------------------------------------------------------- download bodies


@pytest.mark.parametrize(
    ("mode", "content_type"),
    [("html", "text/html"), ("json_error", "application/json"), ("empty", "video/mp4"), ("not_mp4_bytes", "video/mp4")],
)
async def test_download_body_replaces_the_mp4_with_http_200(
    make_sim: MakeSim, session: aiohttp.ClientSession, mode: str, content_type: str
) -> None:
    sim = await make_sim(job_seconds=0, download_body=mode)
    job_id = await completed_job(session, sim)
    async with session.get(download_url(sim, job_id)) as resp:
        assert resp.status == 200
        assert resp.content_type == content_type
        data = await resp.read()
        assert resp.content_length == len(data)
    assert data != VIDEO
    assert data[4:8] != b"ftyp"
    if mode == "html":
        assert data.lstrip().lower().startswith(b"<!doctype html")
    elif mode == "json_error":
        assert "error" in json.loads(data)
    elif mode == "empty":
        assert data == b""
    else:
        assert len(data) == len(VIDEO)
    assert sim.bytes_served == [len(data)]
    assert sim.download_requests == 1


async def test_download_body_only_where_the_mp4_would_be(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=60, download_body="html")
    _, created = await create(session, sim)
    async with session.get(download_url(sim, created["id"])) as resp:
        assert resp.status == 409
    async with session.get(download_url(sim, "vid_missing")) as resp:
        assert resp.status == 404
    assert sim.bytes_served == []


async def test_truncated_body_promises_the_full_length_then_closes(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(job_seconds=0, download_body="truncated")
    job_id = await completed_job(session, sim)
    received = bytearray()
    # The timeout only turns a server that never closes into a failure instead of a hang.
    async with session.get(download_url(sim, job_id), timeout=aiohttp.ClientTimeout(total=10)) as resp:
        assert resp.status == 200
        assert resp.content_type == "video/mp4"
        assert resp.content_length == len(VIDEO)
        with pytest.raises(aiohttp.ClientPayloadError):
            async for chunk in resp.content.iter_any():
                received += chunk
    assert bytes(received) == VIDEO[: len(VIDEO) // 2]
    assert sim.bytes_served == [len(VIDEO) // 2]


async def test_download_without_content_length_is_chunked(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=0, download_send_length=False)
    job_id = await completed_job(session, sim)
    async with session.get(download_url(sim, job_id)) as resp:
        assert resp.status == 200
        assert "Content-Length" not in resp.headers
        assert resp.headers["Transfer-Encoding"] == "chunked"
        assert await resp.read() == VIDEO
    assert sim.bytes_served == [len(VIDEO)]


@pytest.mark.parametrize("send_length", [True, False], ids=["content-length", "chunked"])
async def test_oversize_body_is_an_mp4_start_padded_to_the_size(
    make_sim: MakeSim, session: aiohttp.ClientSession, send_length: bool
) -> None:
    size = 300_000
    sim = await make_sim(job_seconds=0, download_oversize_bytes=size, download_send_length=send_length)
    job_id = await completed_job(session, sim)
    async with session.get(download_url(sim, job_id)) as resp:
        assert resp.status == 200
        assert resp.content_type == "video/mp4"
        assert resp.content_length == (size if send_length else None)
        data = await resp.read()
    assert len(data) == size
    assert data.startswith(FTYP + b"\x00\x00\x00\x00mdat")
    assert data[len(FTYP) + 8 :] == bytes(size - len(FTYP) - 8)
    assert sim.bytes_served == [size]


async def test_oversize_body_counts_what_was_sent_to_a_client_that_stops(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    size = 1 << 30  # 1 GiB: far more than loopback socket buffers can hold
    read_limit = 1 << 20
    sim = await make_sim(job_seconds=0, download_oversize_bytes=size)
    job_id = await completed_job(session, sim)
    received = 0
    async with session.get(download_url(sim, job_id)) as resp:
        assert resp.content_length == size
        async for chunk in resp.content.iter_chunked(64 * 1024):
            received += len(chunk)
            if received >= read_limit:
                break
        resp.close()
    # stop() waits for the download handler to finish, so the count is final.
    await sim.stop()
    assert len(sim.bytes_served) == 1
    assert read_limit <= received <= sim.bytes_served[0] < size // 4


async def test_slow_body_does_not_finish_before_the_client_gives_up(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(job_seconds=0, download_bytes_per_second=200)
    job_id = await completed_job(session, sim)
    # At 200 bytes/s the MP4 would take about 20 minutes.
    with pytest.raises(TimeoutError):
        async with session.get(download_url(sim, job_id), timeout=aiohttp.ClientTimeout(total=0.5)) as resp:
            assert resp.content_length == len(VIDEO)
            await resp.read()
    await sim.stop()
    assert 0 < sim.bytes_served[0] < len(VIDEO) // 10


async def test_trickled_body_arrives_whole(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=0, download_bytes_per_second=20_000_000)
    job_id = await completed_job(session, sim)
    async with session.get(download_url(sim, job_id)) as resp:
        assert await resp.read() == VIDEO
    assert sim.bytes_served == [len(VIDEO)]


# ---------------------------------------------------------------------------- key info


@pytest.mark.parametrize(
    "payload",
    [
        {"key": "sk-...abcd", "info": {"spend": -250, "max_budget": 10_000}},
        {"key": "sk-...abcd", "info": {"spend": 1250.4, "max_budget": 10_000}},
        {"key": "sk-...abcd", "info": {"spend": "250", "max_budget": "10000"}},
        {"key": "sk-...abcd", "info": {"spend": 10**30, "max_budget": None}},
        {"key": "sk-...abcd", "info": {}},
        {"key": "sk-...abcd"},
        ["not", "an", "object"],
        "just a string",
        42,
        False,
    ],
    ids=lambda payload: json.dumps(payload)[:40],
)
async def test_key_info_payload_is_served_verbatim(
    make_sim: MakeSim, session: aiohttp.ClientSession, payload: Any
) -> None:
    sim = await make_sim(key_info_payload=payload)
    async with session.get(sim.base_url + "/key/info") as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        assert json.loads(await resp.text()) == payload
    assert sim.key_info_requests == 1


@pytest.mark.parametrize("raw", ["null", "{broken", ""])
async def test_an_accepted_create_answers_its_raw_body_and_is_charged(
    make_sim: MakeSim, session: aiohttp.ClientSession, raw: str
) -> None:
    sim = await make_sim(create_raw_body=raw)
    async with session.post(sim.base_url + CREATE, json={"prompt": "a fox"}, headers=AUTH) as resp:
        assert resp.status == 202
        assert resp.content_type == "application/json"
        assert await resp.text() == raw
    assert sim.spend == sim.config.price_yen and len(sim.accepted_job_ids) == 1 == len(sim.jobs)
    async with session.post(sim.base_url + CREATE, json={"prompt": ""}, headers=AUTH) as resp:
        assert resp.status == 400  # a rejected create is answered as ever, and not charged
    assert sim.spend == sim.config.price_yen


@pytest.mark.parametrize("raw", ["null", "{broken", "", '{"info": {"spend": 1e999}}'])
async def test_key_info_raw_body_is_served_verbatim(
    make_sim: MakeSim, session: aiohttp.ClientSession, raw: str
) -> None:
    sim = await make_sim(key_info_raw_body=raw)
    async with session.get(sim.base_url + "/key/info") as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        assert await resp.text() == raw


async def test_key_info_garbage_switches_off_again(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim()
    sim.reconfigure(key_info_payload={"info": None})
    assert (await get_json(session, sim.base_url + "/key/info"))[1] == {"info": None}
    sim.reconfigure(key_info_payload=None)
    _, body = await get_json(session, sim.base_url + "/key/info")
    assert body["info"] == {"spend": 0, "max_budget": 10_000}


# ---------------------------------------------------------------------------- redirects


async def test_download_redirect_goes_to_storage_without_the_key(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    storage = await make_sim()
    sim = await make_sim(job_seconds=0)
    # Another host, as aiohttp sees it: same machine, different origin.
    other_base = storage.base_url.replace("127.0.0.1", "localhost")
    sim.reconfigure(download_redirect=other_base)
    job_id = await completed_job(session, sim)

    async with session.get(download_url(sim, job_id), allow_redirects=False) as resp:
        assert resp.status == 302
        assert resp.headers["Location"] == f"{other_base}/storage/{job_id}"
    assert sim.bytes_served == []

    # A client that follows redirects: aiohttp drops Authorization for another origin.
    async with session.get(download_url(sim, job_id)) as resp:
        assert resp.status == 200
        assert [r.status for r in resp.history] == [302]
        assert await resp.read() == VIDEO
    assert sim.download_requests == 2
    assert len(storage.storage_requests_log) == 1
    method, path, headers = storage.storage_requests_log[0]
    assert (method, path) == ("GET", f"/storage/{job_id}")
    assert "Authorization" not in headers
    assert storage.bytes_served == [len(VIDEO)]
    # Storage is not the service: its requests stay out of requests_log.
    assert storage.requests_log == []


async def test_storage_records_the_headers_it_received(make_sim: MakeSim) -> None:
    sim = await make_sim()
    async with aiohttp.ClientSession(headers={**AUTH, "X-Probe": "1"}) as client:
        async with client.get(sim.base_url + "/storage/anything") as resp:
            assert resp.status == 200
            assert await resp.read() == VIDEO
    assert sim.storage_requests_log == [("GET", "/storage/anything", sim.storage_requests_log[0][2])]
    headers = sim.storage_requests_log[0][2]
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["X-Probe"] == "1"
    assert sim.requests_log == []


async def test_storage_needs_no_key_and_uses_the_download_body(make_sim: MakeSim) -> None:
    sim = await make_sim(download_body="html")
    async with aiohttp.ClientSession() as client:
        async with client.get(sim.base_url + "/storage/vid_x") as resp:
            assert resp.status == 200
            assert resp.content_type == "text/html"


async def test_download_redirect_quotes_the_id_and_waits_for_completion(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    sim = await make_sim(job_seconds=60, download_redirect="http://127.0.0.2:9")
    sim.force_next_job_ids("a/b")
    await create(session, sim)
    async with session.get(download_url(sim, "a/b"), allow_redirects=False) as resp:
        assert resp.status == 409
    sim.reconfigure(job_seconds=0)
    sim.force_next_job_ids("c/d")
    await create(session, sim)
    async with session.get(download_url(sim, "c/d"), allow_redirects=False) as resp:
        assert resp.status == 302
        assert resp.headers["Location"] == "http://127.0.0.2:9/storage/c%2Fd"


async def test_status_redirect_points_at_the_same_path_elsewhere(
    make_sim: MakeSim, session: aiohttp.ClientSession
) -> None:
    other = await make_sim()
    sim = await make_sim(download_redirect=other.base_url, status_redirect=True)
    _, created = await create(session, sim)
    async with session.get(sim.base_url + created["poll_path"], allow_redirects=False) as resp:
        assert resp.status == 302
        assert resp.headers["Location"] == other.base_url + created["poll_path"]
    assert sim.status_requests == 1
    assert other.requests_log == []


# ------------------------------------------------------------------- counters and config


async def test_ledger_stays_true_across_misbehaviours(make_sim: MakeSim, session: aiohttp.ClientSession) -> None:
    sim = await make_sim(job_seconds=0, foreign_paths="absolute", download_body="truncated")
    sim.force_next_job_ids("..", "a/b")
    sim.inject("create", 503)
    sim.drop_next_create()
    assert (await create(session, sim))[0] == 503  # not charged, keeps the forced ids
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await create(session, sim)  # charged as ".."
    assert (await create(session, sim))[1]["id"] == "a/b"
    sim.duplicate_next_job_id()
    assert (await create(session, sim))[1]["id"] == "a/b"
    assert (await create(session, sim, {"prompt": "x", "length": 4}))[0] == 400

    assert sim.accepted_job_ids == ["..", "a/b", "a/b"]
    assert sim.creates_received == 5
    assert sim.creates_accepted == 3
    assert sim.spend == 750
    assert set(sim.jobs) == {"..", "a/b"}
    assert [path for _, path, _ in sim.requests_log] == [CREATE] * 5
    assert_ledger_matches(sim)


@pytest.mark.parametrize(
    "overrides",
    [
        {"foreign_paths": "sideways"},
        {"foreign_base_url": "127.0.0.2:9"},
        {"download_body": "xml"},
        {"download_oversize_bytes": 0},
        {"download_oversize_bytes": 10, "download_body": "html"},
        {"download_bytes_per_second": 0},
        {"key_info_payload": {"x": object()}},
        {"key_info_payload": {}, "key_info_raw_body": "{}"},
        {"download_redirect": "/storage"},
        {"status_redirect": True},
        {"forced_job_ids": (1,)},
    ],
    ids=lambda overrides: ",".join(overrides),
)
def test_invalid_misbehaviour_config_is_rejected(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SimulatorConfig(**overrides)


async def test_reconfigure_validates_and_refuses_build_time_fields(make_sim: MakeSim) -> None:
    sim = await make_sim()
    with pytest.raises(ValueError):
        sim.reconfigure(download_body="xml")
    assert sim.config.download_body is None
    with pytest.raises(ValueError):
        sim.reconfigure(seed=3)
    with pytest.raises(ValueError):
        sim.force_next_job_ids()
    with pytest.raises(TypeError):
        sim.force_next_job_ids(5)  # type: ignore[arg-type]


def test_cli_flags_map_to_config_fields() -> None:
    args = build_parser().parse_args(
        [
            "--duplicate-job-ids",
            "--foreign-paths",
            "absolute",
            "--foreign-base-url",
            "http://127.0.0.3:1",
            "--oversize-bytes",
            "5000000",
            "--no-content-length",
            "--download-rate",
            "1000",
            "--create-body",
            "{broken",
            "--key-info-body",
            "null",
            "--download-redirect",
            "http://127.0.0.2:9",
            "--status-redirect",
        ]
    )
    config = config_from_args(args)
    assert config.duplicate_job_ids is True
    assert config.foreign_paths == "absolute"
    assert config.foreign_base_url == "http://127.0.0.3:1"
    assert config.download_oversize_bytes == 5_000_000
    assert config.download_send_length is False
    assert config.download_bytes_per_second == 1000
    assert config.key_info_raw_body == "null"
    assert config.create_raw_body == "{broken"
    assert config.download_redirect == "http://127.0.0.2:9"
    assert config.status_redirect is True

    config = config_from_args(build_parser().parse_args(["--download-body", "truncated"]))
    assert config.download_body == "truncated"
    # Defaults stay the correct behaviour.
    default = config_from_args(build_parser().parse_args([]))
    assert default == SimulatorConfig()


@pytest.mark.parametrize(
    "argv", [["--download-body", "xml"], ["--foreign-paths", "up"], ["--oversize-bytes", "0"]], ids=str
)
def test_cli_rejects_unknown_misbehaviours(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2


def test_service_masked_key_imitates_the_service_format() -> None:
    assert service_masked_key("sk-live-0123456789abcd") == "sk-...abcd"
    assert service_masked_key("plain-key-0123456789") == "...6789"
    assert service_masked_key("abc") == "..."
