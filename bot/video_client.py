"""The one async client of the paid video service.

Money rules (spec §7): a create is retried only when the service said no (429, 5xx) or the
connection failed before anything was sent. A timeout or dropped connection after the request
left means "outcome unknown" and is never resent. Status, download and key info are free.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp

from bot.errors import (
    OutcomeUnknown,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
)
from bot.models import DEFAULT_MODEL, VideoModel
from bot.pacing import Pacer
from bot.validation import check_seed, clean_prompt

log = logging.getLogger(__name__)

_T = TypeVar("_T")

JOB_STATES = frozenset({"pending", "in_progress", "completed", "failed"})
_CHUNK_BYTES = 64 * 1024
_MAX_REASON_CHARS = 300


def mask_key(key: str) -> str:
    """The bot's own masked form of a key: its last four characters only."""
    return f"…{key[-4:]}" if len(key) >= 12 else "…"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds for retrying requests the service refused without charging."""

    attempts: int = 4
    total_seconds: float = 60.0
    base_delay: float = 1.0
    max_delay: float = 20.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        backoff = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return float(backoff * random.uniform(0.8, 1.2))


NO_RETRY = RetryPolicy(attempts=1)


@dataclass(frozen=True)
class RemoteJob:
    id: str
    status: str
    poll_path: str
    content_path: str | None = None


@dataclass(frozen=True)
class KeyInfo:
    spend: int
    max_budget: int | None  # None: the key has no limit

    @property
    def available(self) -> int | None:
        return None if self.max_budget is None else self.max_budget - self.spend


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds, from either delta-seconds or an HTTP date."""
    if not value:
        return None
    if value.strip().replace(".", "", 1).isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _field(data: Mapping[str, Any], name: str, kind: type[_T], where: str) -> _T:
    value = data.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProtocolError(f"the service's {where} response has no valid {name!r}")
    return value


def _yen(data: Mapping[str, Any], name: str, *, nullable: bool) -> int | None:
    value = data.get(name)
    if value is None and nullable and name in data:
        return None
    # Integral floats (1250.0) are accepted; fractional yen are not a thing.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"the service's key info response has no valid {name!r}")
    return value


def _remote_job(data: object, where: str) -> RemoteJob:
    if not isinstance(data, dict):
        raise ProtocolError(f"the service's {where} response is not a JSON object")
    status = _field(data, "status", str, where)
    if status not in JOB_STATES:
        raise ProtocolError(f"the service's {where} response has an unknown status {status[:40]!r}")
    content_path = data.get("content_path")
    return RemoteJob(
        id=_field(data, "id", str, where),
        status=status,
        poll_path=_field(data, "poll_path", str, where),
        content_path=content_path if isinstance(content_path, str) else None,
    )


class VideoServiceClient:
    """Talks to the video service through one shared aiohttp session."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        api_key: str,
        *,
        timeout_seconds: float = 30.0,
        create_retry: RetryPolicy = RetryPolicy(),
        read_retry: RetryPolicy = RetryPolicy(attempts=3, total_seconds=30.0),
        pacer: Pacer | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._session = session
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._create_retry = create_retry
        self._read_retry = read_retry
        self._pacer = pacer
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"<VideoServiceClient base_url={self._base_url!r} key={mask_key(self._api_key)!r}>"

    @property
    def masked_key(self) -> str:
        return mask_key(self._api_key)

    # -- public calls -------------------------------------------------------------------------

    async def create(self, prompt: str, seed: int | None = None, model: VideoModel = DEFAULT_MODEL) -> RemoteJob:
        """Submit one job. Raises InvalidRequest before sending anything when the input cannot succeed."""
        body: dict[str, Any] = {"prompt": clean_prompt(prompt)}
        checked_seed = check_seed(seed, model)
        if checked_seed is not None:
            body["seed"] = checked_seed
        return await self._with_retries(self._create_retry, lambda: self._create_once(model, body), "create")

    async def get_job(self, job_id: str, *, retry: bool = True) -> RemoteJob:
        policy = self._read_retry if retry else NO_RETRY
        return await self._with_retries(policy, lambda: self._get_job_once(job_id), "status")

    async def download(self, job_id: str, destination: Path, *, content_path: str | None = None) -> int:
        """Stream the finished MP4 to `destination` (via a temporary file); returns its size in bytes."""
        path = content_path or f"{self._job_path(job_id)}/content"
        return await self._with_retries(
            self._read_retry, lambda: self._download_once(path, destination), "download"
        )

    async def key_info(self) -> KeyInfo:
        return await self._with_retries(self._read_retry, self._key_info_once, "key info")

    # -- one attempt each ---------------------------------------------------------------------

    async def _create_once(self, model: VideoModel, body: dict[str, Any]) -> RemoteJob:
        try:
            async with self._request("POST", model.create_path, json=body) as response:
                if response.status == 202:
                    try:
                        return _remote_job(await response.json(content_type=None), "create")
                    except (ProtocolError, ValueError) as exc:
                        # Accepted and charged, but we cannot tell which job: never resend.
                        raise OutcomeUnknown(
                            "the service accepted the request but its answer could not be read"
                        ) from exc
                await self._raise_for_status(response)
                raise ProtocolError(f"the service answered a create with HTTP {response.status}")
        except aiohttp.ClientConnectorError as exc:
            # The connection was never made, so the request never left: safe to retry.
            raise ServiceUnreachable("could not connect to the video service") from exc
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise OutcomeUnknown(
                "no answer from the video service after the request was sent; it may have been accepted"
            ) from exc

    async def _get_job_once(self, job_id: str) -> RemoteJob:
        async with _transport_faults("status"):
            async with self._request("GET", self._job_path(job_id)) as response:
                await self._raise_for_status(response)
                try:
                    payload = await response.json(content_type=None)
                except ValueError as exc:
                    raise ProtocolError("the service's status response is not JSON") from exc
                return _remote_job(payload, "status")

    async def _download_once(self, path: str, destination: Path) -> int:
        destination.parent.mkdir(parents=True, exist_ok=True)
        partial = destination.with_name(destination.name + ".part")
        size = 0
        async with _transport_faults("download"):
            async with self._request("GET", path, params={"index": "0"}) as response:
                await self._raise_for_status(response)
                try:
                    with partial.open("wb") as out:
                        async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
                            out.write(chunk)
                            size += len(chunk)
                        out.flush()
                        # Waiting for the disk takes milliseconds per MiB: keep it off the event loop.
                        await asyncio.to_thread(os.fsync, out.fileno())
                    if response.content_length is not None and size != response.content_length:
                        raise ServiceUnreachable("the video download ended early")
                    os.replace(partial, destination)
                finally:
                    partial.unlink(missing_ok=True)
        return size

    async def _key_info_once(self) -> KeyInfo:
        async with _transport_faults("key info"):
            async with self._request("GET", "/key/info") as response:
                await self._raise_for_status(response)
                try:
                    payload = await response.json(content_type=None)
                except ValueError as exc:
                    raise ProtocolError("the service's key info response is not JSON") from exc
                info = payload.get("info") if isinstance(payload, dict) else None
                if not isinstance(info, dict):
                    raise ProtocolError("the service's key info response has no 'info' object")
                spend = _yen(info, "spend", nullable=False)
                assert spend is not None
                return KeyInfo(spend=spend, max_budget=_yen(info, "max_budget", nullable=True))

    # -- plumbing -----------------------------------------------------------------------------

    def _job_path(self, job_id: str) -> str:
        return f"/gateway/videos/jobs/{quote(job_id, safe='')}"

    @contextlib.asynccontextmanager
    async def _request(self, method: str, path: str, **kwargs: Any) -> AsyncIterator[aiohttp.ClientResponse]:
        if self._pacer is not None:
            await self._pacer.wait()
        log.debug("%s %s", method, path)
        async with self._session.request(
            method,
            self._base_url + path,
            headers={"Authorization": f"Bearer {self._api_key}"},
            timeout=self._timeout,
            **kwargs,
        ) as response:
            log.debug("%s %s -> %d", method, path, response.status)
            yield response

    async def _raise_for_status(self, response: aiohttp.ClientResponse) -> None:
        status = response.status
        if status < 400:
            return
        if status == 429:
            raise RateLimited(parse_retry_after(response.headers.get("Retry-After")))
        if status >= 500:
            raise ServerError(status)
        raise Rejected(status, self._redact(await self._reason(response)))

    @staticmethod
    async def _reason(response: aiohttp.ClientResponse) -> str:
        try:
            text = await response.text()
        except (aiohttp.ClientError, UnicodeDecodeError):
            return response.reason or "no reason given"
        try:
            data = json.loads(text)
        except ValueError:
            return text.strip()[:_MAX_REASON_CHARS] or (response.reason or "no reason given")
        # The spec shows no error body shape: take the common ones, else the raw text.
        if isinstance(data, dict):
            error = data.get("error", data)
            if isinstance(error, dict):
                error = error.get("message") or error.get("detail") or error
            if isinstance(error, str):
                return error[:_MAX_REASON_CHARS]
            detail = data.get("detail") or data.get("message")
            if isinstance(detail, str):
                return detail[:_MAX_REASON_CHARS]
        return text.strip()[:_MAX_REASON_CHARS]

    def _redact(self, text: str) -> str:
        # Some gateways echo the key in error texts; it must not travel further.
        return text.replace(self._api_key, mask_key(self._api_key)) if self._api_key else text

    async def _with_retries(self, policy: RetryPolicy, call: Callable[[], Awaitable[_T]], what: str) -> _T:
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return await call()
            except (RateLimited, ServerError, ServiceUnreachable) as exc:
                retry_after = exc.retry_after if isinstance(exc, RateLimited) else None
                delay = policy.delay(attempt, retry_after)
                out_of_time = time.monotonic() - started + delay > policy.total_seconds
                if attempt >= policy.attempts or out_of_time:
                    raise
                log.info("%s: %s; retrying in %.1f s (attempt %d of %d)", what, exc, delay, attempt + 1,
                         policy.attempts)
                await self._sleep(delay)


@contextlib.asynccontextmanager
async def _transport_faults(what: str) -> AsyncIterator[None]:
    """Free requests: a timeout or dropped connection is just a failed attempt, safe to retry."""
    try:
        yield
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise ServiceUnreachable(f"the video service did not answer the {what} request") from exc
