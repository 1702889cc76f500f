"""The client against small scripted aiohttp servers on 127.0.0.1: it trusts nothing they say."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gzip
import json
import logging
import os
import shutil
import struct
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from unittest.mock import MagicMock

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer, unused_port
from yarl import URL

from bot.core.errors import (
    AcceptedUnreadable,
    DownloadTooLarge,
    InsufficientStorage,
    NotAnMp4,
    OutcomeUnknown,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
    UnreadableKeyInfo,
    UnusableJobId,
)
from bot.core.retry import CREATE_RETRY, READ_RETRY, RetryPolicy
from bot.service import download as video_download
from bot.service.client import VideoServiceClient
from bot.service.download import remove_abandoned_downloads
from bot.service.transport import REDIRECT_REFUSED, ServiceTransport, mask_key, parse_retry_after
from bot.simulator import DEFAULT_VIDEO_PATH

KEY = "sk-secret-test-key-0123456789"
CREATE = "/gateway/videos/create"
JOB = "/gateway/videos/jobs/vid_1"
CONTENT = f"{JOB}/content"
KEY_INFO = "/key/info"
ACCEPTED = {"id": "vid_1", "status": "pending", "poll_path": JOB}
COMPLETED = {"id": "vid_1", "status": "completed", "poll_path": JOB, "content_path": CONTENT}
SAMPLE = DEFAULT_VIDEO_PATH.read_bytes()
MAX_BYTES = 10 * 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Seen(NamedTuple):
    method: str
    path: str
    raw_path: str
    headers: dict[str, str]
    body: bytes


class FakeService:
    """A local HTTP server answering each (method, path) from a queue of scripted handlers, in order.

    An unscripted request gets HTTP 418, which no test expects.
    """

    def __init__(self, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.script: dict[tuple[str, str], deque[Handler]] = defaultdict(deque)
        self.seen: list[Seen] = []
        self.release = asyncio.Event()  # lets hanging handlers end at teardown
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.server = TestServer(app, host=host, port=port)

    async def start(self) -> FakeService:
        await self.server.start_server()
        return self

    async def stop(self) -> None:
        self.release.set()
        await self.server.close()

    @property
    def url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    def on(self, method: str, path: str, *handlers: Handler) -> None:
        self.script[(method, path)].extend(handlers)

    def calls(self, method: str, path: str) -> list[Seen]:
        return [seen for seen in self.seen if (seen.method, seen.path) == (method, path)]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(Seen(request.method, request.path, request.raw_path, dict(request.headers),
                              await request.read()))
        queue = self.script.get((request.method, request.path))
        if not queue:
            return web.Response(status=418, text="unscripted request")
        return await queue.popleft()(request)

    # -- scripted answers ---------------------------------------------------------------------

    @staticmethod
    def reply(status: int = 200, *, payload: object = None, body: bytes | str | None = None,
              headers: dict[str, str] | None = None) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            if payload is not None:
                return web.json_response(payload, status=status, headers=headers)
            data = body.encode() if isinstance(body, str) else body
            return web.Response(status=status, body=data, headers=headers)

        return handler

    def hang(self) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            await self.release.wait()
            return web.Response()

        return handler

    @staticmethod
    def drop() -> Handler:
        """Close the connection without an answer."""

        async def handler(request: web.Request) -> web.StreamResponse:
            assert request.transport is not None
            request.transport.close()
            await asyncio.sleep(0)
            return web.Response()

        return handler

    @staticmethod
    def chunked(data: bytes) -> Handler:
        """`data` in chunked encoding: no Content-Length."""

        async def handler(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            for start in range(0, len(data), 10_000):
                await response.write(data[start : start + 10_000])
            await response.write_eof()
            return response

        return handler

    @staticmethod
    def short(data: bytes, announced: int, *, status: int = 200) -> Handler:
        """Announce `announced` bytes, send `data`, then hang up."""

        async def handler(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(status=status, headers={"Content-Length": str(announced)})
            await response.prepare(request)
            await response.write(data)
            assert request.transport is not None
            request.transport.close()
            return response

        return handler


@dataclass
class Offer:
    """A chunked body of `total` bytes without Content-Length, counting what the server managed to send."""

    total: int
    status: int = 200
    written: int = 0

    def __post_init__(self) -> None:
        self.done = asyncio.Event()

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=self.status)
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunk = SAMPLE[:32] + bytes(64 * 1024 - 32)
        try:
            with contextlib.suppress(ConnectionError):  # the client hung up: what we want
                while self.written < self.total:
                    await response.write(chunk)
                    self.written += len(chunk)
        finally:
            self.done.set()
        return response


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


POLICY = RetryPolicy(attempts=3, deadline=60, base_delay=1)


@pytest.fixture
async def start_service() -> AsyncIterator[Callable[..., Awaitable[FakeService]]]:
    started: list[FakeService] = []

    async def start(port: int | None = None, host: str = "127.0.0.1") -> FakeService:
        service = FakeService(port, host)
        started.append(service)
        return await service.start()

    yield start
    for service in started:
        await service.stop()


@pytest.fixture
async def service(start_service: Callable[..., Awaitable[FakeService]]) -> FakeService:
    return await start_service()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def make_client(session: aiohttp.ClientSession, base_url: str, sleeps: Sleeps | None = None,
                **kwargs: Any) -> VideoServiceClient:
    kwargs.setdefault("timeout_seconds", 5)
    return VideoServiceClient(session, base_url, KEY, create_retry=POLICY, read_retry=POLICY,
                              sleep=sleeps or Sleeps(), **kwargs)


@pytest.fixture
def client(session: aiohttp.ClientSession, service: FakeService, sleeps: Sleeps) -> VideoServiceClient:
    return make_client(session, service.url, sleeps)


def mp4_reply(data: bytes = SAMPLE, **headers: str) -> Handler:
    return FakeService.reply(200, body=data, headers={"Content-Type": "video/mp4", **headers})


# -- retry policy wiring ----------------------------------------------------------------------


def test_the_default_policies_are_the_bots() -> None:
    import inspect

    parameters = inspect.signature(VideoServiceClient.__init__).parameters
    assert parameters["create_retry"].default is CREATE_RETRY
    assert parameters["read_retry"].default is READ_RETRY


# -- create -----------------------------------------------------------------------------------


async def test_create_sends_prompt_seed_and_bearer_header(client: VideoServiceClient, service: FakeService) -> None:
    service.on("POST", CREATE, service.reply(202, payload=ACCEPTED))
    job = await client.create("a red fox", seed=42)
    assert (job.id, job.status, job.ignored_paths) == ("vid_1", "pending", ())
    (call,) = service.calls("POST", CREATE)
    assert json.loads(call.body) == {"prompt": "a red fox", "seed": 42}
    assert call.headers["Authorization"] == f"Bearer {KEY}"
    assert all(KEY not in seen.raw_path for seen in service.seen)


async def test_create_without_seed_omits_it(client: VideoServiceClient, service: FakeService) -> None:
    service.on("POST", CREATE, service.reply(202, payload={**ACCEPTED, "extra": "ignored"}))
    await client.create("a fox")
    (call,) = service.calls("POST", CREATE)
    assert json.loads(call.body) == {"prompt": "a fox"}


async def test_prompt_of_exactly_2000_characters_is_sent(client: VideoServiceClient, service: FakeService) -> None:
    service.on("POST", CREATE, service.reply(202, payload=ACCEPTED))
    await client.create("x" * 2000, seed=2**32 - 1)
    assert len(service.calls("POST", CREATE)) == 1


async def test_rejection_is_final_and_carries_the_reason(client: VideoServiceClient, service: FakeService) -> None:
    service.on("POST", CREATE, service.reply(400, payload={"error": {"message": "resolution must be 1280x720"}}),
               service.reply(202, payload=ACCEPTED))
    with pytest.raises(Rejected) as error:
        await client.create("a fox")
    assert error.value.status == 400 and error.value.reason == "resolution must be 1280x720"
    assert len(service.calls("POST", CREATE)) == 1


async def test_rejection_text_never_carries_the_key(client: VideoServiceClient, service: FakeService) -> None:
    service.on("POST", CREATE, service.reply(401, body=f"invalid key {KEY}"))
    with pytest.raises(Rejected) as error:
        await client.create("a fox")
    assert KEY not in str(error.value) and KEY not in error.value.reason
    assert mask_key(KEY) in error.value.reason


def shown_key_prefix(text: str) -> str:
    """The longest start of the key (8 characters or more) that `text` shows."""
    return next((KEY[:n] for n in range(len(KEY), 7, -1) if KEY[:n] in text), "")


@pytest.mark.parametrize("escaped", [False, True], ids=["as-is", "json-escaped"])
@pytest.mark.parametrize("at", [270, 290, 296], ids=["inside", "across-the-cut", "mostly-cut"])
async def test_a_key_echoed_across_the_reasons_cut_leaves_no_part_of_it(
    client: VideoServiceClient, service: FakeService, at: int, escaped: bool
) -> None:
    """Cut to 300 characters after redaction, not before: a key across the cut left its start (and a key the
    JSON escaped, "\\u0073k-…", is found once unescaped)."""
    key = "\\u0073" + KEY[1:] if escaped else KEY
    body = '{"error": {"message": "' + "x" * at + key + '"}}'
    service.on("POST", CREATE, service.reply(400, body=body))
    with pytest.raises(Rejected) as error:
        await client.create("a fox")
    assert len(error.value.reason) <= 300
    assert shown_key_prefix(error.value.reason) == ""


@pytest.mark.parametrize("body", [
    '{"errors": ["bad key %s"]}',  # no message field: the raw text is the reason
    '["bad key %s"]',
    '{"error": {"code": 7, "key": "%s"}}',
    '{"message": "bad key %s", "padding": "' + "x" * 5000 + '"}',  # cut short: not parsed
], ids=["no-message-field", "a-list", "no-text", "cut-short"])
@pytest.mark.parametrize("key", ["\\u0073" + KEY[1:], KEY[:2] + "\\u002d" + KEY[3:]], ids=["s", "dash"])
async def test_a_json_escaped_key_in_raw_error_text_is_redacted(
    client: VideoServiceClient, service: FakeService, body: str, key: str
) -> None:
    service.on("POST", CREATE, service.reply(400, body=body % key))
    with pytest.raises(Rejected) as error:
        await client.create("a fox")
    fragments = [KEY[i:i + 12] for i in range(len(KEY) - 11)]  # any 12 characters of it, escaped or not
    assert not [fragment for fragment in fragments if fragment in error.value.reason]


async def test_a_huge_rejection_body_gives_a_short_reason(client: VideoServiceClient, service: FakeService) -> None:
    service.on("POST", CREATE, service.reply(400, body="no " * 1_000_000))
    with pytest.raises(Rejected) as error:
        await client.create("a fox")
    assert 0 < len(error.value.reason) <= 300


async def test_an_endless_rejection_body_is_not_read_whole(client: VideoServiceClient, service: FakeService) -> None:
    offer = Offer(total=128 * 1024 * 1024, status=400)
    service.on("POST", CREATE, offer)
    with pytest.raises(Rejected):
        await client.create("a fox")
    await asyncio.wait_for(offer.done.wait(), 30)  # a guard against a hang, not a timing assertion
    assert offer.written < 32 * 1024 * 1024


async def test_429_is_retried_after_retry_after(
    client: VideoServiceClient, service: FakeService, sleeps: Sleeps
) -> None:
    service.on("POST", CREATE, service.reply(429, headers={"Retry-After": "7"}), service.reply(202, payload=ACCEPTED))
    job = await client.create("a fox")
    assert job.id == "vid_1"
    assert sleeps.delays == [7.0]
    assert len(service.calls("POST", CREATE)) == 2


async def test_5xx_is_retried_with_bounded_attempts(
    client: VideoServiceClient, service: FakeService, sleeps: Sleeps
) -> None:
    service.on("POST", CREATE, *[service.reply(503) for _ in range(5)])
    with pytest.raises(ServerError):
        await client.create("a fox")
    assert len(service.calls("POST", CREATE)) == 3
    assert len(sleeps.delays) == 2


async def test_retry_after_beyond_the_time_budget_gives_up_at_once(
    client: VideoServiceClient, service: FakeService, sleeps: Sleeps
) -> None:
    service.on("POST", CREATE, service.reply(429, headers={"Retry-After": "3600"}))
    with pytest.raises(RateLimited) as error:
        await client.create("a fox")
    assert error.value.retry_after == 3600
    assert sleeps.delays == []
    assert len(service.calls("POST", CREATE)) == 1


async def test_no_second_create_after_a_dropped_connection(client: VideoServiceClient, service: FakeService) -> None:
    service.on("POST", CREATE, service.drop(), service.reply(202, payload=ACCEPTED))  # a second charge if sent
    with pytest.raises(OutcomeUnknown):
        await client.create("a fox")
    assert len(service.calls("POST", CREATE)) == 1


async def test_no_second_create_after_a_timeout(session: aiohttp.ClientSession, service: FakeService) -> None:
    client = make_client(session, service.url, timeout_seconds=0.2)
    service.on("POST", CREATE, service.hang(), service.reply(202, payload=ACCEPTED))
    with pytest.raises(OutcomeUnknown):
        await client.create("a fox")
    assert len(service.calls("POST", CREATE)) == 1


async def test_refused_connection_is_retried_because_nothing_was_sent(
    session: aiohttp.ClientSession, start_service: Callable[..., Awaitable[FakeService]]
) -> None:
    port = unused_port()
    later: list[FakeService] = []

    async def start_the_service_while_waiting(delay: float) -> None:
        service = await start_service(port)
        service.on("POST", CREATE, service.reply(202, payload=ACCEPTED))
        later.append(service)

    client = VideoServiceClient(session, f"http://127.0.0.1:{port}", KEY, create_retry=POLICY,
                                sleep=start_the_service_while_waiting)
    assert (await client.create("a fox")).id == "vid_1"
    assert len(later) == 1 and len(later[0].calls("POST", CREATE)) == 1


@pytest.mark.parametrize(
    "body", [b"not json", b"[1, 2]", b'"vid_1"', b"\xff\xfe garbage", b"[" * 100_000, b"{" + b" " * 100_000 + b"}",
             b"", b"null"]
)
async def test_accepted_but_unreadable_answer_is_a_charge_with_no_job(
    client: VideoServiceClient, service: FakeService, body: bytes
) -> None:
    service.on("POST", CREATE, service.reply(202, body=body), service.reply(202, payload=ACCEPTED))
    with pytest.raises(AcceptedUnreadable):
        await client.create("a fox")
    assert len(service.calls("POST", CREATE)) == 1


async def test_a_202_whose_body_is_cut_off_is_a_charge_with_no_job_and_never_resent(
    client: VideoServiceClient, service: FakeService
) -> None:
    """The status line said 202 (accepted, charged); the connection then dropped within the body."""
    service.on("POST", CREATE, service.short(b'{"id": "vid_', 200, status=202), service.reply(202, payload=ACCEPTED))
    with pytest.raises(AcceptedUnreadable):
        await client.create("a fox")
    assert len(service.calls("POST", CREATE)) == 1


@pytest.mark.parametrize(
    "job_id", [None, 42, "", ".", "..", "../admin", "a/b", "a?b", "vid 1", "vid_1\n", "x" * 129, "<@123>", ["vid_1"]]
)
async def test_accepted_with_an_unusable_id_is_charged_and_never_polled(
    client: VideoServiceClient, service: FakeService, job_id: object
) -> None:
    payload = {"status": "pending", "poll_path": "/x"} | ({} if job_id is None else {"id": job_id})
    service.on("POST", CREATE, service.reply(202, payload=payload), service.reply(202, payload=ACCEPTED))
    with pytest.raises(UnusableJobId) as error:
        await client.create("a fox")
    assert len(service.calls("POST", CREATE)) == 1
    assert len(error.value.shown) <= 40 and "\n" not in error.value.shown and "@" not in error.value.shown
    assert [seen.method for seen in service.seen] == ["POST"]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirected_create_is_a_final_rejection_and_not_followed(
    client: VideoServiceClient, service: FakeService, status: int
) -> None:
    service.on("POST", CREATE, service.reply(status, headers={"Location": "/elsewhere"}))
    service.on("POST", "/elsewhere", service.reply(202, payload=ACCEPTED))
    with pytest.raises(Rejected) as error:
        await client.create("a fox")
    assert error.value.status == status
    assert [seen.path for seen in service.seen] == [CREATE]


# -- status -----------------------------------------------------------------------------------


async def test_status_is_retried_on_5xx_and_timeouts(session: aiohttp.ClientSession, service: FakeService) -> None:
    client = make_client(session, service.url, timeout_seconds=0.2)
    service.on("GET", JOB, service.reply(502), service.hang(), service.reply(payload=COMPLETED))
    job = await client.get_job("vid_1")
    assert (job.id, job.status, job.ignored_paths) == ("vid_1", "completed", ())
    assert len(service.calls("GET", JOB)) == 3


async def test_status_without_retry_surfaces_the_429(client: VideoServiceClient, service: FakeService) -> None:
    service.on("GET", JOB, service.reply(429, headers={"Retry-After": "2"}), service.reply(payload=ACCEPTED))
    with pytest.raises(RateLimited) as error:
        await client.get_job("vid_1", retry=False)
    assert error.value.retry_after == 2
    assert len(service.calls("GET", JOB)) == 1


async def test_status_dropped_connection_is_not_outcome_unknown(
    client: VideoServiceClient, service: FakeService
) -> None:
    # aiohttp itself resends an idempotent GET once after a disconnect: up to two requests per attempt.
    service.on("GET", JOB, *[service.drop() for _ in range(6)])
    with pytest.raises(ServiceUnreachable):
        await client.get_job("vid_1")
    assert 3 <= len(service.calls("GET", JOB)) <= 6


@pytest.mark.parametrize(
    "payload",
    [{"id": "vid_1", "poll_path": JOB}, {"id": "vid_1", "status": "exploded", "poll_path": JOB},
     {"id": "vid_1", "status": 1}, [], "completed"],
)
async def test_status_with_missing_or_bad_fields_is_a_protocol_error(
    client: VideoServiceClient, service: FakeService, payload: object
) -> None:
    service.on("GET", JOB, service.reply(payload=payload))
    with pytest.raises(ProtocolError):
        await client.get_job("vid_1")


@pytest.mark.parametrize("other", ["vid_2", "VID_1", None, "../vid_1"])
async def test_a_status_about_another_job_is_a_protocol_error(
    client: VideoServiceClient, service: FakeService, other: object
) -> None:
    service.on("GET", JOB, service.reply(payload={**COMPLETED, "id": other}))
    with pytest.raises(ProtocolError, match="asked about vid_1"):
        await client.get_job("vid_1")


async def test_a_huge_status_answer_is_not_read_whole(client: VideoServiceClient, service: FakeService) -> None:
    service.on("GET", JOB, service.reply(payload={**COMPLETED, "padding": "x" * 1_000_000}))
    with pytest.raises(ProtocolError, match="larger than"):
        await client.get_job("vid_1")


async def test_paths_from_the_service_are_never_followed_but_noted(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    odd = {**COMPLETED, "poll_path": "https://evil.example/steal", "content_path": "/gateway/videos/jobs/vid_2/x" * 9}
    service.on("GET", JOB, service.reply(payload=odd))
    service.on("GET", CONTENT, mp4_reply())
    job = await client.get_job("vid_1")
    assert job.status == "completed"
    assert len(job.ignored_paths) == 2
    assert job.ignored_paths[0].startswith("poll_path=") and "evil.example" in job.ignored_paths[0]
    assert all(len(shown) <= 60 for shown in job.ignored_paths)
    await client.download(job.id, tmp_path / "v.mp4", max_bytes=MAX_BYTES)
    assert [seen.path for seen in service.seen] == [JOB, CONTENT]


async def test_the_expected_paths_are_not_noted(client: VideoServiceClient, service: FakeService) -> None:
    service.on("POST", CREATE, service.reply(202, payload={**ACCEPTED, "poll_path": "/gateway/videos/jobs/vid_2"}))
    assert (await client.create("a fox")).ignored_paths == ("poll_path='/gateway/videos/jobs/vid_2'",)
    service.on("GET", JOB, service.reply(payload=COMPLETED))
    assert (await client.get_job("vid_1")).ignored_paths == ()


@pytest.mark.parametrize("bad", ["a/b", "..", "", "vid 1"])
async def test_an_unusable_id_is_never_put_in_a_url(
    client: VideoServiceClient, service: FakeService, tmp_path: Path, bad: str
) -> None:
    with pytest.raises(UnusableJobId):
        await client.get_job(bad)
    with pytest.raises(UnusableJobId):
        await client.download(bad, tmp_path / "v.mp4", max_bytes=MAX_BYTES)
    assert service.seen == []


@pytest.mark.parametrize("status", [301, 302, 307])
async def test_status_and_key_info_never_follow_redirects(
    client: VideoServiceClient, service: FakeService, status: int
) -> None:
    service.on("GET", JOB, service.reply(status, headers={"Location": "/moved"}))
    service.on("GET", KEY_INFO, service.reply(status, headers={"Location": "/moved"}))
    with pytest.raises(ProtocolError, match="redirected"):
        await client.get_job("vid_1")
    with pytest.raises(ProtocolError, match="redirected"):
        await client.key_info()
    assert [seen.path for seen in service.seen] == [JOB, KEY_INFO]


# -- download ---------------------------------------------------------------------------------


async def test_download_streams_the_mp4_to_the_destination(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    service.on("GET", CONTENT, mp4_reply())
    destination = tmp_path / "videos" / "1.mp4"
    size = await client.download("vid_1", destination, max_bytes=MAX_BYTES)
    assert size == len(SAMPLE)
    assert destination.read_bytes() == SAMPLE
    assert list(destination.parent.iterdir()) == [destination]
    (call,) = service.calls("GET", CONTENT)
    assert call.raw_path == f"{CONTENT}?index=0"
    assert call.headers["Authorization"] == f"Bearer {KEY}"


async def test_download_without_content_length_is_read_to_the_end(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    service.on("GET", CONTENT, service.chunked(SAMPLE))
    destination = tmp_path / "1.mp4"
    assert await client.download("vid_1", destination, max_bytes=MAX_BYTES) == len(SAMPLE)
    assert destination.read_bytes() == SAMPLE


async def test_a_compressed_download_is_inflated_and_not_taken_for_a_short_one(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    packed = gzip.compress(SAMPLE)
    service.on("GET", CONTENT, mp4_reply(packed, **{"Content-Encoding": "gzip"}))
    destination = tmp_path / "1.mp4"
    assert await client.download("vid_1", destination, max_bytes=MAX_BYTES) == len(SAMPLE)
    assert destination.read_bytes() == SAMPLE
    (call,) = service.calls("GET", CONTENT)
    assert call.headers["Accept-Encoding"] == "identity"


async def test_a_compression_bomb_is_cut_at_the_limit(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    bomb = gzip.compress(SAMPLE + bytes(20 * 1024 * 1024))  # about 20 KiB on the wire
    service.on("GET", CONTENT, mp4_reply(bomb, **{"Content-Encoding": "gzip"}))
    with pytest.raises(DownloadTooLarge):
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert list(tmp_path.iterdir()) == []


async def test_download_is_one_attempt(client: VideoServiceClient, service: FakeService, tmp_path: Path) -> None:
    service.on("GET", CONTENT, service.reply(500), mp4_reply())
    with pytest.raises(ServerError):
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert len(service.calls("GET", CONTENT)) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("status", [404, 410])
async def test_a_gone_video_is_rejected(
    client: VideoServiceClient, service: FakeService, tmp_path: Path, status: int
) -> None:
    service.on("GET", CONTENT, service.reply(status, payload={"detail": "expired"}))
    with pytest.raises(Rejected) as error:
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert error.value.status == status
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "body",
    [
        b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>",
        json.dumps({"error": {"message": "video not ready"}}).encode(),
        SAMPLE[: len(SAMPLE) // 2],  # truncated, with a truthful Content-Length
        SAMPLE[:32] + struct.pack(">I", 6887 + 1) + SAMPLE[36:],  # moov claims one byte more than it has
        b"",
    ],
    ids=["html", "json-error", "truncated", "box-size-lie", "empty"],
)
async def test_a_download_that_is_not_an_mp4_is_refused_and_removed(
    client: VideoServiceClient, service: FakeService, tmp_path: Path, body: bytes
) -> None:
    service.on("GET", CONTENT, mp4_reply(body))
    with pytest.raises(NotAnMp4):
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert list(tmp_path.iterdir()) == []


async def test_a_short_body_is_retryable_and_leaves_nothing(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    service.on("GET", CONTENT, service.short(SAMPLE[:50_000], announced=len(SAMPLE)))
    with pytest.raises(ServiceUnreachable):
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert list(tmp_path.iterdir()) == []


async def test_a_stalled_download_times_out_as_retryable(
    session: aiohttp.ClientSession, service: FakeService, tmp_path: Path
) -> None:
    client = make_client(session, service.url, timeout_seconds=0.2)
    service.on("GET", CONTENT, service.hang())
    with pytest.raises(ServiceUnreachable):
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert list(tmp_path.iterdir()) == []


async def test_an_announced_size_over_the_limit_is_refused_before_reading(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    service.on("GET", CONTENT, mp4_reply())
    with pytest.raises(DownloadTooLarge) as error:
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=len(SAMPLE) - 1)
    assert (error.value.size, error.value.max_bytes, error.value.announced) == (len(SAMPLE), len(SAMPLE) - 1, True)
    assert isinstance(error.value, ProtocolError)
    assert list(tmp_path.iterdir()) == []


async def test_an_endless_stream_is_cut_at_the_limit(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    offer = Offer(total=256 * 1024 * 1024)
    service.on("GET", CONTENT, offer)
    with pytest.raises(DownloadTooLarge) as error:
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=1024 * 1024)
    assert error.value.announced is False and error.value.size > 1024 * 1024
    await asyncio.wait_for(offer.done.wait(), 30)  # a guard against a hang, not a timing assertion
    # Socket buffers hold a few MiB at most: the server could not push much past the limit.
    assert offer.written < 32 * 1024 * 1024
    assert list(tmp_path.iterdir()) == []


async def test_too_little_free_space_refuses_before_writing(
    client: VideoServiceClient, service: FakeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Usage(NamedTuple):
        total: int
        used: int
        free: int

    asked: list[Path] = []

    def disk_usage(path: Path) -> Usage:
        asked.append(Path(path))
        return Usage(10**9, 10**9 - len(SAMPLE), len(SAMPLE))  # the video fits, the margin does not

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)  # the one bot.service.download calls
    service.on("GET", CONTENT, mp4_reply())
    destination = tmp_path / "videos" / "1.mp4"
    with pytest.raises(InsufficientStorage) as error:
        await client.download("vid_1", destination, max_bytes=MAX_BYTES)
    assert asked == [destination.parent]
    assert error.value.needed == len(SAMPLE) + video_download.DISK_MARGIN_BYTES
    assert list(destination.parent.iterdir()) == []


async def test_unknown_length_needs_room_for_max_bytes(
    client: VideoServiceClient, service: FakeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Usage(NamedTuple):
        total: int
        used: int
        free: int

    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**12, 0, MAX_BYTES))
    service.on("GET", CONTENT, Offer(total=64 * 1024))
    with pytest.raises(InsufficientStorage) as error:
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert error.value.needed == MAX_BYTES + video_download.DISK_MARGIN_BYTES


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
async def test_a_full_disk_while_writing_is_insufficient_storage(
    client: VideoServiceClient, service: FakeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    def full(out: object, data: bytes) -> None:
        raise OSError(code, "No space left on device")

    monkeypatch.setattr(video_download, "_write", full)
    service.on("GET", CONTENT, mp4_reply())
    with pytest.raises(InsufficientStorage):
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert list(tmp_path.iterdir()) == []


async def test_other_write_errors_stay_what_they_are(
    client: VideoServiceClient, service: FakeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(out: object, data: bytes) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(video_download, "_write", broken)
    service.on("GET", CONTENT, mp4_reply())
    with pytest.raises(OSError) as error:
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert not isinstance(error.value, InsufficientStorage) and error.value.errno == errno.EIO
    assert list(tmp_path.iterdir()) == []


# -- download redirects -----------------------------------------------------------------------


async def test_a_redirect_to_another_origin_never_carries_the_key(
    client: VideoServiceClient, service: FakeService, start_service: Callable[..., Awaitable[FakeService]],
    tmp_path: Path,
) -> None:
    cdn = await start_service()
    service.on("GET", CONTENT, service.reply(302, headers={"Location": f"{cdn.url}/cdn/v.mp4?sig=abc"}))
    cdn.on("GET", "/cdn/v.mp4", mp4_reply())
    destination = tmp_path / "1.mp4"
    assert await client.download("vid_1", destination, max_bytes=MAX_BYTES) == len(SAMPLE)
    assert destination.read_bytes() == SAMPLE
    (ours,) = service.seen
    (theirs,) = cdn.seen
    assert ours.headers["Authorization"] == f"Bearer {KEY}"
    assert theirs.raw_path == "/cdn/v.mp4?sig=abc"
    assert "Authorization" not in theirs.headers
    assert all(KEY not in value for value in theirs.headers.values())


async def test_a_redirect_back_to_our_origin_keeps_the_key_and_resolves_relative_locations(
    client: VideoServiceClient, service: FakeService, start_service: Callable[..., Awaitable[FakeService]],
    tmp_path: Path,
) -> None:
    cdn = await start_service()
    service.on("GET", CONTENT, service.reply(307, headers={"Location": f"{cdn.url}/a/b"}))
    cdn.on("GET", "/a/b", service.reply(302, headers={"Location": "c?x=1"}))  # relative to /a/b
    cdn.on("GET", "/a/c", service.reply(301, headers={"Location": f"{service.url}/final.mp4"}))
    service.on("GET", "/final.mp4", mp4_reply())
    await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert [seen.raw_path for seen in cdn.seen] == ["/a/b", "/a/c?x=1"]
    assert all("Authorization" not in seen.headers for seen in cdn.seen)
    assert all(seen.headers["Authorization"] == f"Bearer {KEY}" for seen in service.seen)


async def test_more_than_three_redirects_are_refused(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    service.on("GET", CONTENT, service.reply(302, headers={"Location": "/r1"}))
    for hop in (1, 2, 3):
        service.on("GET", f"/r{hop}", service.reply(302, headers={"Location": f"/r{hop + 1}"}))
    service.on("GET", "/r4", mp4_reply())
    with pytest.raises(ProtocolError, match="redirected more than 3"):
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert [seen.path for seen in service.seen] == [CONTENT, "/r1", "/r2", "/r3"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1/v.mp4", None])
async def test_a_redirect_to_no_http_url_is_refused(
    client: VideoServiceClient, service: FakeService, tmp_path: Path, location: str | None
) -> None:
    service.on("GET", CONTENT, service.reply(302, headers={"Location": location} if location else {}))
    with pytest.raises(ProtocolError):
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert len(service.seen) == 1


@pytest.mark.parametrize("location", [
    "{other}/admin", "{other_https}/admin", "https://10.0.0.1/v.mp4", "https://169.254.169.254/latest/meta-data/",
    "https://[::1]/v.mp4", "https://[::ffff:127.0.0.1]/v.mp4", "https://100.64.0.1/v.mp4", "https://localhost/v.mp4",
    "http://93.184.216.34/v.mp4",
])
async def test_a_redirect_to_another_internal_host_or_to_plain_http_is_refused_before_any_request(
    client: VideoServiceClient, service: FakeService, start_service: Callable[..., Awaitable[FakeService]],
    tmp_path: Path, location: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """The service is on 127.0.0.1 (its own host is followed, as in every test); 127.0.0.2 is another host."""
    other = await start_service(host="127.0.0.2")
    other.on("GET", "/admin", FakeService.reply(200, body=b"<!DOCTYPE html>SECRET admin page"))
    target = location.format(other=other.url, other_https=other.url.replace("http://", "https://"))
    service.on("GET", CONTENT, service.reply(302, headers={"Location": target}))
    with pytest.raises(ProtocolError) as refused:
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert str(refused.value) == REDIRECT_REFUSED  # nothing of the answer: not its Location, not its host
    assert other.seen == [] and len(service.seen) == 1
    assert list(tmp_path.iterdir()) == []
    assert "not followed" in caplog.text  # the operator's log names the host


async def test_a_redirect_whose_connection_reaches_an_internal_address_is_refused_before_its_body() -> None:
    """A name may resolve to a public address when checked and to an internal one when connected: the address
    the connection reached is checked too, before a byte of the body is read."""
    transport = ServiceTransport(MagicMock(spec=aiohttp.ClientSession), "https://api.example.com", KEY,
                                 timeout_seconds=30, download_timeout_seconds=600)
    response = MagicMock(spec=aiohttp.ClientResponse)
    for peer, refused in ((("127.0.0.2", 443), True), (("10.1.2.3", 443, 0, 0), True), (("93.184.216.34", 443), False)):
        response.connection.transport.get_extra_info.return_value = peer
        if refused:
            with pytest.raises(ProtocolError, match="does not follow"):
                transport._check_peer(response, URL("https://cdn.example.net/v.mp4"))
        else:
            transport._check_peer(response, URL("https://cdn.example.net/v.mp4"))
    # The service's own host is followed wherever it is.
    response.connection.transport.get_extra_info.return_value = ("10.1.2.3", 443)
    transport._check_peer(response, URL("https://api.example.com:8443/storage/v.mp4"))


async def test_a_refused_download_quotes_nothing_of_its_body(
    client: VideoServiceClient, service: FakeService, tmp_path: Path
) -> None:
    service.on("GET", CONTENT, service.reply(403, body="SECRET internal text", headers={"Content-Type": "text/plain"}))
    with pytest.raises(Rejected) as refused:
        await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert refused.value.status == 403 and "SECRET" not in str(refused.value)


# -- key info ---------------------------------------------------------------------------------


async def test_key_info(client: VideoServiceClient, service: FakeService) -> None:
    info_body = {"key": "sk-...6789", "info": {"spend": 1250, "max_budget": 10000}}
    service.on("GET", KEY_INFO, service.reply(payload=info_body))
    info = await client.key_info()
    assert (info.spend, info.max_budget, info.available) == (1250, 10000, 8750)
    (call,) = service.calls("GET", KEY_INFO)
    assert call.headers["Authorization"] == f"Bearer {KEY}"


async def test_key_info_null_budget_means_no_limit(client: VideoServiceClient, service: FakeService) -> None:
    service.on("GET", KEY_INFO, service.reply(payload={"key": "x", "info": {"spend": 0, "max_budget": None}}))
    info = await client.key_info()
    assert info.max_budget is None and info.available is None


@pytest.mark.parametrize(
    ("spend", "max_budget", "expected"),
    [(1250.4, 10000.9, (1251, 10000, 8749)), (1250.0, 10000.0, (1250, 10000, 8750)), (0.01, None, (1, None, None))],
)
async def test_fractional_yen_never_overstate_the_balance(
    client: VideoServiceClient, service: FakeService, spend: float, max_budget: float | None,
    expected: tuple[int, int | None, int | None],
) -> None:
    service.on("GET", KEY_INFO, service.reply(payload={"info": {"spend": spend, "max_budget": max_budget}}))
    info = await client.key_info()
    assert (info.spend, info.max_budget, info.available) == expected
    assert isinstance(info.spend, int) and (info.max_budget is None or isinstance(info.max_budget, int))


@pytest.mark.parametrize(
    "body",
    [
        "{}", '{"info": {}}', '{"info": null}', '{"info": []}', "[]", "nope",
        '{"info": {"max_budget": 1}}',
        '{"info": {"spend": null, "max_budget": 1}}',
        '{"info": {"spend": "1250", "max_budget": 10000}}',
        '{"info": {"spend": 1250, "max_budget": "10000"}}',
        '{"info": {"spend": true, "max_budget": 10000}}',
        '{"info": {"spend": -1, "max_budget": 10000}}',
        '{"info": {"spend": 1250, "max_budget": -5}}',
        '{"info": {"spend": 1250}}',
        '{"info": {"spend": NaN, "max_budget": 10000}}',
        '{"info": {"spend": 1250, "max_budget": Infinity}}',
        '{"info": {"spend": 1250, "max_budget": -Infinity}}',
        '{"info": {"spend": 987654321987654, "max_budget": 10000}}',
        '{"info": {"spend": 1250, "max_budget": 1e300}}',
        '{"info": {"spend": [1250], "max_budget": 10000}}',
    ],
)
async def test_unreadable_key_info_is_a_clear_error_without_the_value(
    client: VideoServiceClient, service: FakeService, body: str
) -> None:
    service.on("GET", KEY_INFO, service.reply(body=body, headers={"Content-Type": "application/json"}))
    with pytest.raises(UnreadableKeyInfo) as error:
        await client.key_info()
    assert isinstance(error.value, ProtocolError)
    for value in ("1250", "10000", "987654", "1e300", "NaN", "Infinity"):
        assert value not in str(error.value)


# -- secrets and small helpers ----------------------------------------------------------------


async def test_the_key_never_reaches_logs_urls_or_repr(
    client: VideoServiceClient, service: FakeService, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    service.on("POST", CREATE, service.reply(503), service.reply(202, payload=ACCEPTED))
    service.on("GET", JOB, service.reply(payload=COMPLETED))
    service.on("GET", CONTENT, mp4_reply())
    await client.create("a fox")
    await client.get_job("vid_1")
    await client.download("vid_1", tmp_path / "1.mp4", max_bytes=MAX_BYTES)
    assert caplog.records, "the client should log its requests"
    assert KEY not in caplog.text
    assert all(KEY not in seen.raw_path for seen in service.seen)
    assert KEY not in repr(client)
    assert mask_key(KEY) in repr(client)


def test_parse_retry_after() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    # Only ASCII digits count ("²" is a digit to str.isdigit(), and float() refuses it): no delay, no crash.
    assert parse_retry_after("\u00b2") is None
    assert parse_retry_after("1\u00b9") is None
    assert parse_retry_after("\u0663") is None  # an Arabic-Indic three


def test_mask_key_shows_only_the_last_four() -> None:
    assert mask_key("sk-abcdefghijkl1234") == "…1234"
    assert mask_key("short") == "…"


def test_only_partial_downloads_left_unwritten_are_removed(tmp_path: Path) -> None:
    now = time.time()
    abandoned = tmp_path / ".7.mp4.k2j3.part"
    under_way = tmp_path / ".8.mp4.x9y8.part"
    video = tmp_path / "9.mp4"
    for path in (abandoned, under_way, video):
        path.write_bytes(b"\0" * 16)
    old = now - 3601
    os.utime(abandoned, (old, old))
    os.utime(video, (old, old))

    assert remove_abandoned_downloads(tmp_path, unwritten_for=3600, now=now) == 1

    assert not abandoned.exists()
    assert under_way.exists() and video.exists()  # one being written, and a finished video waiting to be posted
