import logging
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import pytest
from aioresponses import aioresponses
from yarl import URL

from bot.errors import (
    InvalidRequest,
    OutcomeUnknown,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
)
from bot.video_client import RetryPolicy, VideoServiceClient, mask_key, parse_retry_after

BASE = "http://video.test"
KEY = "sk-secret-test-key-0123456789"
CREATE = f"{BASE}/gateway/videos/create"
JOB = f"{BASE}/gateway/videos/jobs/vid_1"
ACCEPTED = {"id": "vid_1", "status": "pending", "poll_path": "/gateway/videos/jobs/vid_1"}


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def client(sleeps: Sleeps):
    async with aiohttp.ClientSession() as session:
        yield VideoServiceClient(
            session, BASE, KEY, timeout_seconds=5,
            create_retry=RetryPolicy(attempts=3, total_seconds=60, base_delay=1),
            read_retry=RetryPolicy(attempts=3, total_seconds=60, base_delay=1),
            sleep=sleeps,
        )


@pytest.fixture
def mocked():
    with aioresponses() as m:
        yield m


def calls(m: aioresponses, method: str, url: str) -> list:
    return m.requests.get((method, URL(url)), [])


def all_urls(m: aioresponses) -> list[str]:
    return [str(url) for (_, url) in m.requests]


def refused() -> aiohttp.ClientConnectorError:
    key = SimpleNamespace(host="video.test", port=80, ssl=False)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "refused"))  # type: ignore[arg-type]


async def test_create_sends_prompt_seed_and_bearer_header(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.post(CREATE, status=202, payload=ACCEPTED)
    job = await client.create("  a red fox  ", seed=42)
    assert (job.id, job.status, job.poll_path) == ("vid_1", "pending", "/gateway/videos/jobs/vid_1")
    (call,) = calls(mocked, "POST", CREATE)
    assert call.kwargs["json"] == {"prompt": "a red fox", "seed": 42}
    assert call.kwargs["headers"]["Authorization"] == f"Bearer {KEY}"
    assert all(KEY not in url for url in all_urls(mocked))


async def test_create_without_seed_omits_it(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.post(CREATE, status=202, payload={**ACCEPTED, "extra": "ignored"})
    await client.create("a fox")
    (call,) = calls(mocked, "POST", CREATE)
    assert call.kwargs["json"] == {"prompt": "a fox"}


@pytest.mark.parametrize(
    ("prompt", "seed", "code"),
    [("", None, "prompt_empty"), ("   ", None, "prompt_empty"), ("x" * 2001, None, "prompt_too_long"),
     ("ok", -1, "seed_range"), ("ok", 2**32, "seed_range"), ("ok", True, "seed_range")],
)
async def test_invalid_input_sends_nothing(
    client: VideoServiceClient, mocked: aioresponses, prompt: str, seed: object, code: str
) -> None:
    with pytest.raises(InvalidRequest) as error:
        await client.create(prompt, seed=seed)  # type: ignore[arg-type]
    assert error.value.code == code
    assert mocked.requests == {}


async def test_prompt_of_exactly_2000_characters_is_sent(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.post(CREATE, status=202, payload=ACCEPTED)
    await client.create("x" * 2000, seed=2**32 - 1)
    assert len(calls(mocked, "POST", CREATE)) == 1


async def test_rejection_is_final_and_carries_the_reason(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.post(CREATE, status=400, payload={"error": {"message": "resolution must be 1280x720"}})
    with pytest.raises(Rejected) as error:
        await client.create("a fox")
    assert error.value.status == 400 and error.value.reason == "resolution must be 1280x720"
    assert len(calls(mocked, "POST", CREATE)) == 1


async def test_rejection_text_never_carries_the_key(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.post(CREATE, status=401, body=f"invalid key {KEY}")
    with pytest.raises(Rejected) as error:
        await client.create("a fox")
    assert KEY not in str(error.value) and KEY not in error.value.reason
    assert mask_key(KEY) in error.value.reason


async def test_429_is_retried_after_retry_after(
    client: VideoServiceClient, mocked: aioresponses, sleeps: Sleeps
) -> None:
    mocked.post(CREATE, status=429, headers={"Retry-After": "7"})
    mocked.post(CREATE, status=202, payload=ACCEPTED)
    job = await client.create("a fox")
    assert job.id == "vid_1"
    assert sleeps.delays == [7.0]
    assert len(calls(mocked, "POST", CREATE)) == 2


async def test_5xx_is_retried_with_bounded_attempts(
    client: VideoServiceClient, mocked: aioresponses, sleeps: Sleeps
) -> None:
    for _ in range(5):
        mocked.post(CREATE, status=503)
    with pytest.raises(ServerError):
        await client.create("a fox")
    assert len(calls(mocked, "POST", CREATE)) == 3
    assert len(sleeps.delays) == 2


async def test_retry_after_beyond_the_time_budget_gives_up_at_once(
    client: VideoServiceClient, mocked: aioresponses, sleeps: Sleeps
) -> None:
    mocked.post(CREATE, status=429, headers={"Retry-After": "3600"})
    with pytest.raises(RateLimited) as error:
        await client.create("a fox")
    assert error.value.retry_after == 3600
    assert sleeps.delays == []
    assert len(calls(mocked, "POST", CREATE)) == 1


@pytest.mark.parametrize(
    "fault", [TimeoutError(), aiohttp.ServerDisconnectedError(), aiohttp.ClientOSError(104, "reset")]
)
async def test_no_second_create_after_a_timeout_or_dropped_connection(
    client: VideoServiceClient, mocked: aioresponses, fault: Exception
) -> None:
    mocked.post(CREATE, exception=fault)
    mocked.post(CREATE, status=202, payload=ACCEPTED)  # would be a second charge if ever sent
    with pytest.raises(OutcomeUnknown):
        await client.create("a fox")
    assert len(calls(mocked, "POST", CREATE)) == 1


async def test_refused_connection_is_retried_because_nothing_was_sent(
    client: VideoServiceClient, mocked: aioresponses
) -> None:
    mocked.post(CREATE, exception=refused())
    mocked.post(CREATE, status=202, payload=ACCEPTED)
    assert (await client.create("a fox")).id == "vid_1"
    assert len(calls(mocked, "POST", CREATE)) == 2


async def test_accepted_but_unreadable_answer_is_outcome_unknown(
    client: VideoServiceClient, mocked: aioresponses
) -> None:
    mocked.post(CREATE, status=202, payload={"status": "pending"})
    with pytest.raises(OutcomeUnknown):
        await client.create("a fox")
    assert len(calls(mocked, "POST", CREATE)) == 1


async def test_status_is_retried_on_5xx_and_timeouts(
    client: VideoServiceClient, mocked: aioresponses
) -> None:
    mocked.get(JOB, status=502)
    mocked.get(JOB, exception=TimeoutError())
    mocked.get(JOB, status=200, payload={**ACCEPTED, "status": "completed",
                                         "content_path": "/gateway/videos/jobs/vid_1/content"})
    job = await client.get_job("vid_1")
    assert job.status == "completed" and job.content_path == "/gateway/videos/jobs/vid_1/content"
    assert len(calls(mocked, "GET", JOB)) == 3


async def test_status_without_retry_surfaces_the_429(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.get(JOB, status=429, headers={"Retry-After": "2"})
    with pytest.raises(RateLimited) as error:
        await client.get_job("vid_1", retry=False)
    assert error.value.retry_after == 2
    assert len(calls(mocked, "GET", JOB)) == 1


async def test_status_timeout_is_not_outcome_unknown(client: VideoServiceClient, mocked: aioresponses) -> None:
    for _ in range(3):
        mocked.get(JOB, exception=TimeoutError())
    with pytest.raises(ServiceUnreachable):
        await client.get_job("vid_1")


@pytest.mark.parametrize(
    "payload", [{"id": "vid_1", "poll_path": "/x"}, {"id": "vid_1", "status": "exploded", "poll_path": "/x"}, []]
)
async def test_status_with_missing_or_bad_fields_is_a_protocol_error(
    client: VideoServiceClient, mocked: aioresponses, payload: object
) -> None:
    mocked.get(JOB, status=200, payload=payload)
    with pytest.raises(ProtocolError):
        await client.get_job("vid_1")


async def test_job_ids_are_quoted_into_the_path(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.get(f"{BASE}/gateway/videos/jobs/a%2Fb", status=200, payload={**ACCEPTED, "id": "a/b"})
    assert (await client.get_job("a/b")).id == "a/b"


async def test_download_streams_to_the_destination(
    client: VideoServiceClient, mocked: aioresponses, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 1000
    mocked.get(f"{JOB}/content?index=0", status=200, body=data)
    destination = tmp_path / "videos" / "1.mp4"
    size = await client.download("vid_1", destination)
    assert size == len(data)
    assert destination.read_bytes() == data
    assert list(destination.parent.iterdir()) == [destination]


async def test_download_failure_leaves_no_partial_file(
    client: VideoServiceClient, mocked: aioresponses, tmp_path: Path
) -> None:
    for _ in range(3):
        mocked.get(f"{JOB}/content?index=0", status=500)
    destination = tmp_path / "1.mp4"
    with pytest.raises(ServerError):
        await client.download("vid_1", destination)
    assert list(tmp_path.iterdir()) == []


async def test_key_info(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.get(f"{BASE}/key/info", status=200, payload={"key": KEY, "info": {"spend": 1250, "max_budget": 10000}})
    info = await client.key_info()
    assert (info.spend, info.max_budget, info.available) == (1250, 10000, 8750)
    (call,) = calls(mocked, "GET", f"{BASE}/key/info")
    assert call.kwargs["headers"]["Authorization"] == f"Bearer {KEY}"


async def test_key_info_null_budget_means_no_limit(client: VideoServiceClient, mocked: aioresponses) -> None:
    mocked.get(f"{BASE}/key/info", status=200, payload={"key": "x", "info": {"spend": 0, "max_budget": None}})
    info = await client.key_info()
    assert info.max_budget is None and info.available is None


@pytest.mark.parametrize("payload", [{}, {"info": {}}, {"info": {"spend": "12"}}, {"info": {"max_budget": 1}}])
async def test_key_info_missing_fields_is_a_clear_error(
    client: VideoServiceClient, mocked: aioresponses, payload: object
) -> None:
    mocked.get(f"{BASE}/key/info", status=200, payload=payload)
    with pytest.raises(ProtocolError):
        await client.key_info()


async def test_the_key_never_reaches_logs_or_repr(
    client: VideoServiceClient, mocked: aioresponses, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    mocked.post(CREATE, status=503)
    mocked.post(CREATE, status=202, payload=ACCEPTED)
    mocked.get(JOB, status=200, payload=ACCEPTED)
    await client.create("a fox")
    await client.get_job("vid_1")
    assert caplog.records, "the client should log its requests"
    assert KEY not in caplog.text
    assert KEY not in repr(client)
    assert mask_key(KEY) in repr(client)


def test_parse_retry_after() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past


def test_mask_key_shows_only_the_last_four() -> None:
    assert mask_key("sk-abcdefghijkl1234") == "…1234"
    assert mask_key("short") == "…"
