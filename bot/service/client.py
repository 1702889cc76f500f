"""The one async client of the paid video service. Nothing the service says is trusted.

Money rules (spec §7): a create is retried only when the service said no (429, 5xx) or the
connection failed before anything was sent. A timeout or dropped connection after the request
left means "outcome unknown" and is never resent. Status, download and key info are free.

Input rules (design promise 8): every URL is the configured base URL, a fixed template and a
checked job id; the paths the service sends are never followed. Only downloads follow redirects
(a few, and the key goes only to the service's own origin), and only to the service's own host or to a
public https host: never to a loopback, private or link-local address, checked before the request and
again on the connection made. Bodies are read up to a bound, numbers are checked, and a download must be
an MP4 of a bounded size before it takes its final name. No byte of a refused download (its error body,
its redirect's Location, its first bytes) is quoted in a reason: /status shows those to members.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from bot.core.errors import (
    AcceptedUnreadable,
    DownloadTooLarge,
    OutcomeUnknown,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
    UnreadableKeyInfo,
)
from bot.core.retry import CREATE_RETRY, NO_RETRY, READ_RETRY, RetryPolicy, retrying
from bot.service.answers import KEY_INFO_PATH, KeyInfo, RemoteJob, accepted_job, job_path, polled_job, read_key_info
from bot.service.catalogue import DEFAULT_MODEL, VideoModel
from bot.service.download import check_free_space, save
from bot.service.pacing import Pacer, Turn
from bot.service.transport import ClientObserver, ServiceTransport, read_json, transport_faults

_T = TypeVar("_T")

_RETRYABLE = (RateLimited, ServerError, ServiceUnreachable)


def _retry_after(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, RateLimited) else None


class VideoServiceClient:
    """Talks to the video service through one shared aiohttp session (bot/service/transport.py)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        api_key: str,
        *,
        timeout_seconds: float = 30.0,
        download_timeout_seconds: float = 600.0,
        create_retry: RetryPolicy = CREATE_RETRY,
        read_retry: RetryPolicy = READ_RETRY,
        pacer: Pacer | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        observer: ClientObserver | None = None,
    ) -> None:
        self._transport = ServiceTransport(
            session, base_url, api_key, timeout_seconds=timeout_seconds,
            download_timeout_seconds=download_timeout_seconds, pacer=pacer, observer=observer,
        )
        self._create_retry = create_retry
        self._read_retry = read_retry
        self._pacer = pacer
        self._sleep = sleep
        self._observer = observer

    def __repr__(self) -> str:
        return f"<VideoServiceClient base_url={self._transport.base_url!r} key={self.masked_key!r}>"

    @property
    def masked_key(self) -> str:
        return self._transport.masked_key

    # -- public calls -------------------------------------------------------------------------

    async def take_turn(self) -> Turn:
        """Wait for the pacer now, so that a create sent next with `turn=` this turn leaves at once.

        The caller records "sending" only after this wait: a stop while waiting then leaves a request
        that was never sent, not one whose outcome is unknown.
        """
        return await self._pacer.take_turn() if self._pacer is not None else Turn(None)

    async def create(
        self, prompt: str, seed: int | None = None, model: VideoModel = DEFAULT_MODEL, *, turn: Turn | None = None
    ) -> RemoteJob:
        """Submit one job, as given: the input was checked once, by `VideoRequests` (bot/service/validation.py's rules).

        `turn`, from `take_turn`: the first attempt leaves at once and gives it back as it goes.

        After a 202 (accepted and charged: never resent): UnusableJobId when the id cannot be used (never poll
        it), AcceptedUnreadable when the answer cannot be read at all (its body cut off, not JSON, too large).
        """
        body: dict[str, Any] = {"prompt": prompt}
        if seed is not None:
            body["seed"] = seed
        attempts = 0

        async def attempt() -> RemoteJob:
            nonlocal attempts
            attempts += 1
            # The first attempt's turn may have been taken already; a retry waits for a new one.
            paced = not (turn is not None and attempts == 1)
            if turn is not None:
                turn.release()  # sent now (or not at all): the next create may take its turn
            return await self._create_once(model, body, paced=paced)

        return await self._retrying(self._create_retry, attempt, "create")

    async def get_job(self, job_id: str, *, retry: bool = True) -> RemoteJob:
        path = job_path(job_id)
        policy = self._read_retry if retry else NO_RETRY
        return await self._retrying(policy, lambda: self._get_job_once(path, job_id), "status")

    async def download(self, job_id: str, destination: Path, *, max_bytes: int) -> int:
        """One attempt (the caller owns retries) to fetch the finished MP4 into `destination`; returns its size.

        Raises ServiceUnreachable (timeout, dropped connection, short body: worth another attempt),
        RateLimited, ServerError, Rejected (404/410: maybe gone), DownloadTooLarge, NotAnMp4,
        ProtocolError (bad redirect), InsufficientStorage. Nothing is left behind on failure.
        """
        url = self._transport.url(f"{job_path(job_id)}/content").update_query(index="0")
        destination.parent.mkdir(parents=True, exist_ok=True)
        async with transport_faults("download"), self._transport.follow(url) as response:
            await self._transport.raise_for_status(response, quote=False)
            if response.status != 200:
                raise ProtocolError(f"the service answered a download with HTTP {response.status}")
            announced = response.content_length
            if announced is not None and announced > max_bytes:
                raise DownloadTooLarge(announced, max_bytes, announced=True)
            # A compressed body (sent though we asked for none) is longer than its Content-Length once inflated.
            if response.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
                announced = None
            check_free_space(destination.parent, max_bytes if announced is None else announced)
            size = await save(response, destination, announced, max_bytes)
        if self._observer is not None:
            self._observer.downloaded(size)
        return size

    async def key_info(self) -> KeyInfo:
        info = await self._retrying(self._read_retry, self._key_info_once, "key info")
        if self._observer is not None:
            self._observer.key_info_read(info)
        return info

    # -- one attempt each ---------------------------------------------------------------------

    async def _create_once(self, model: VideoModel, body: dict[str, Any], *, paced: bool = True) -> RemoteJob:
        url = self._transport.url(model.create_path)
        try:
            async with self._transport.request("POST", url, paced=paced, json=body) as response:
                if response.status == 202:
                    try:
                        payload = await read_json(response, "create")
                    except (ProtocolError, TimeoutError, aiohttp.ClientError) as exc:
                        # Accepted and charged (the status says so), but we cannot tell which job: never resend.
                        raise AcceptedUnreadable(
                            "the service accepted (HTTP 202) and charged the request, but its answer could not be "
                            "read"
                        ) from exc
                    return accepted_job(payload)
                if 300 <= response.status < 400:
                    # Only a 202 is charged (spec §4.1); a redirect is not followed, so nothing was bought.
                    raise Rejected(response.status, "the service redirected the request; the bot does not follow")
                await self._transport.raise_for_status(response)
                raise ProtocolError(f"the service answered a create with HTTP {response.status}")
        except aiohttp.ClientConnectorError as exc:
            # The connection was never made, so the request never left: safe to retry.
            raise ServiceUnreachable("could not connect to the video service") from exc
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise OutcomeUnknown(
                "no answer from the video service after the request was sent; it may have been accepted"
            ) from exc

    async def _get_job_once(self, path: str, job_id: str) -> RemoteJob:
        async with transport_faults("status"), self._transport.request("GET", self._transport.url(path)) as response:
            self._transport.refuse_redirect(response, "status")
            await self._transport.raise_for_status(response)
            return polled_job(await read_json(response, "status"), job_id)

    async def _key_info_once(self) -> KeyInfo:
        url = self._transport.url(KEY_INFO_PATH)
        async with transport_faults("key info"), self._transport.request("GET", url) as response:
            self._transport.refuse_redirect(response, "key info")
            await self._transport.raise_for_status(response)
            try:
                payload = await read_json(response, "key info")
            except ProtocolError as exc:
                raise UnreadableKeyInfo(str(exc)) from exc
            return read_key_info(payload)

    async def _retrying(self, policy: RetryPolicy, call: Callable[[], Awaitable[_T]], what: str) -> _T:
        return await retrying(
            policy, call, retry_on=_RETRYABLE, what=what, retry_after=_retry_after, sleep=self._sleep
        )
