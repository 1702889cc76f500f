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
import contextlib
import email.utils
import errno
import json
import logging
import math
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn, Protocol, TypeVar
from urllib.parse import quote

import aiohttp
from yarl import URL

from bot.core.addresses import IPAddress, ip_of, is_internal
from bot.core.errors import (
    AcceptedUnreadable,
    DownloadTooLarge,
    InsufficientStorage,
    OutcomeUnknown,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
    UnreadableKeyInfo,
)
from bot.core.retry import CREATE_RETRY, NO_RETRY, READ_RETRY, RetryPolicy, retrying
from bot.service.answers import safe_job_id, shown_id
from bot.service.catalogue import DEFAULT_MODEL, VideoModel
from bot.service.mp4 import check_mp4
from bot.service.pacing import Pacer, Turn

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: The statuses the video service gives a job (its contract), not the bot's own states (bot/core/lifecycle.py).
SERVICE_STATUSES = frozenset({"pending", "in_progress", "completed", "failed"})
JOBS_PATH = "/gateway/videos/jobs"
KEY_INFO_PATH = "/key/info"
MAX_REDIRECTS = 3
MAX_JSON_BYTES = 64 * 1024  # a job or key info answer is a few hundred bytes
MAX_YEN = 10**12  # more than any real spend or budget: a larger number is garbage
DISK_MARGIN_BYTES = 16 * 1024 * 1024  # room left for the database and logs after a download
_CHUNK_BYTES = 64 * 1024
_MAX_REASON_BYTES = 4096
_MAX_REASON_CHARS = 300
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Why a download's redirect was not followed; the target is named in the log only (the operator's), never here.
REDIRECT_REFUSED = ("the download was redirected to a host the bot does not follow (only the service's own host, or "
                    "a public https host: no loopback, private or link-local address)")
#: A download refused with an HTTP error: its body may come from any host and is not quoted.
DOWNLOAD_REFUSED = "the download was refused"
_RETRYABLE = (RateLimited, ServerError, ServiceUnreachable)
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def mask_key(key: str) -> str:
    """The bot's own masked form of a key: its last four characters only."""
    return f"…{key[-4:]}" if len(key) >= 12 else "…"


@dataclass(frozen=True)
class RemoteJob:
    id: str
    status: str
    # poll_path/content_path values the service sent that differ from the expected ones (shown form);
    # never followed, listed so the worker can log them once per job.
    ignored_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeyInfo:
    spend: int
    max_budget: int | None  # None: the key has no limit

    @property
    def available(self) -> int | None:
        return None if self.max_budget is None else self.max_budget - self.spend


class ClientObserver(Protocol):
    """Told what the client does (the metrics). `endpoint` is create, status, download or key_info, never a path."""

    def request_sent(self, endpoint: str) -> None: ...

    def response(self, endpoint: str, status: int) -> None: ...

    def downloaded(self, size: int) -> None: ...

    def key_info_read(self, info: KeyInfo) -> None: ...


def _endpoint(method: str, path: str, ours: bool) -> str:
    if method == "POST":
        return "create"
    if path == KEY_INFO_PATH:
        return "key_info"
    # Only downloads follow redirects to other hosts.
    return "download" if not ours or path.endswith("/content") else "status"


#: ASCII digits only: str.isdigit() also takes "²", which float() refuses.
_DELTA_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds, from either delta-seconds or an HTTP date."""
    if not value:
        return None
    if _DELTA_SECONDS.fullmatch(value.strip()):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def job_path(job_id: str) -> str:
    """The status path of a job, from the checked id (percent-encoded anyway)."""
    return f"{JOBS_PATH}/{quote(safe_job_id(job_id), safe='')}"


def _ignored_paths(data: Mapping[str, Any], job_id: str) -> tuple[str, ...]:
    expected = {"poll_path": job_path(job_id), "content_path": f"{job_path(job_id)}/content"}
    return tuple(
        f"{name}={shown_id(data[name])}" for name in ("poll_path", "content_path")
        if name in data and data[name] != expected[name]
    )


def _accepted_job(data: object) -> RemoteJob:
    """The job of a 202. It is charged whatever the body says: an unusable id raises UnusableJobId, an answer
    with no job at all AcceptedUnreadable."""
    if not isinstance(data, dict):
        raise AcceptedUnreadable("the service accepted (HTTP 202) and charged the request, but its answer is not "
                                 "a JSON object")
    job_id = safe_job_id(data.get("id"))
    status = data.get("status")
    # Accepted means pending (spec §3); a missing or odd status is the poller's to find out.
    return RemoteJob(
        id=job_id,
        status=status if isinstance(status, str) and status in SERVICE_STATUSES else "pending",
        ignored_paths=_ignored_paths(data, job_id),
    )


def _polled_job(data: object, job_id: str) -> RemoteJob:
    if not isinstance(data, dict):
        raise ProtocolError("the service's status response is not a JSON object")
    if data.get("id") != job_id:
        raise ProtocolError(f"the service answered about job {shown_id(data.get('id'))} when asked about {job_id}")
    status = data.get("status")
    if not isinstance(status, str) or status not in SERVICE_STATUSES:
        raise ProtocolError(f"the service's status response has an unknown status {shown_id(status)}")
    return RemoteJob(id=job_id, status=status, ignored_paths=_ignored_paths(data, job_id))


def _yen(info: Mapping[str, Any], name: str, *, nullable: bool, round_up: bool) -> int | None:
    """A money field of key info in whole yen; the error names the field, never its value."""
    if name not in info:
        raise UnreadableKeyInfo(f"the service's key info has no {name!r}")
    value = info[name]
    if value is None and nullable:
        return None
    # bool is an int to Python; "12" is not a number (a service that sends strings is not trusted to mean yen).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnreadableKeyInfo(f"the service's key info {name!r} is not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise UnreadableKeyInfo(f"the service's key info {name!r} is not a finite number")
    if value < 0 or value > MAX_YEN:
        raise UnreadableKeyInfo(f"the service's key info {name!r} is out of range")
    # Fractional yen (LiteLLM reports floats): spend up, budget down, so `available` is never overstated.
    return math.ceil(value) if round_up else math.floor(value)


def _key_info(data: object) -> KeyInfo:
    info = data.get("info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        raise UnreadableKeyInfo("the service's key info response has no 'info' object")
    spend = _yen(info, "spend", nullable=False, round_up=True)
    assert spend is not None
    return KeyInfo(spend=spend, max_budget=_yen(info, "max_budget", nullable=True, round_up=False))


def _origin(url: URL) -> tuple[str, str, int | None]:
    return (url.scheme.lower(), (url.host or "").lower(), url.port)


def _retry_after(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, RateLimited) else None


def _write(out: IO[bytes], data: bytes) -> None:
    # One seam for the tests: a full disk is hard to arrange for real.
    out.write(data)


async def _read_prefix(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the body, and whether that was all of it. Never reads much past `limit`."""
    body = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), False
    return bytes(body), True


async def _read_json(response: aiohttp.ClientResponse, where: str) -> object:
    body, complete = await _read_prefix(response, MAX_JSON_BYTES)
    if not complete:
        raise ProtocolError(f"the service's {where} response is larger than {MAX_JSON_BYTES} bytes")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"the service's {where} response is not JSON") from exc


#: A JSON escape left in raw text (a body cut short, or one with no message field): `\u0073`, `\/`.
_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|/)")


def _unescaped(text: str) -> str:
    """`text` with JSON's escapes of single characters undone, so an escaped key is found by the redaction."""
    return _JSON_ESCAPE.sub(lambda match: chr(int(match[1], 16)) if match[1] else "/", text)


def _error_text(text: str, complete: bool) -> str:
    """The message of an error body; the spec shows no shape, so the common ones, else the raw text."""
    try:
        data = json.loads(text) if complete else None
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            error = error.get("message") or error.get("detail") or error
        if isinstance(error, str):
            return error
        detail = data.get("detail") or data.get("message")
        if isinstance(detail, str):
            return detail
    return text.strip()


class VideoServiceClient:
    """Talks to the video service through one shared aiohttp session."""

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
        self._session = session
        self._base_url = base_url.rstrip("/")
        self._origin = _origin(URL(self._base_url))
        self._api_key = api_key
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        # A video may take minutes to arrive on a slow link, but never stalls for long.
        self._download_timeout = aiohttp.ClientTimeout(
            total=download_timeout_seconds, connect=timeout_seconds, sock_read=timeout_seconds
        )
        self._create_retry = create_retry
        self._read_retry = read_retry
        self._pacer = pacer
        self._sleep = sleep
        self._observer = observer

    def __repr__(self) -> str:
        return f"<VideoServiceClient base_url={self._base_url!r} key={mask_key(self._api_key)!r}>"

    @property
    def masked_key(self) -> str:
        return mask_key(self._api_key)

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
        url = self._url(f"{job_path(job_id)}/content").update_query(index="0")
        destination.parent.mkdir(parents=True, exist_ok=True)
        async with _transport_faults("download"), self._follow(url) as response:
            await self._raise_for_status(response, quote=False)
            if response.status != 200:
                raise ProtocolError(f"the service answered a download with HTTP {response.status}")
            announced = response.content_length
            if announced is not None and announced > max_bytes:
                raise DownloadTooLarge(announced, max_bytes, announced=True)
            # A compressed body (sent though we asked for none) is longer than its Content-Length once inflated.
            if response.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
                announced = None
            _check_free_space(destination.parent, max_bytes if announced is None else announced)
            size = await _save(response, destination, announced, max_bytes)
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
        try:
            async with self._request("POST", self._url(model.create_path), paced=paced, json=body) as response:
                if response.status == 202:
                    try:
                        payload = await _read_json(response, "create")
                    except (ProtocolError, TimeoutError, aiohttp.ClientError) as exc:
                        # Accepted and charged (the status says so), but we cannot tell which job: never resend.
                        raise AcceptedUnreadable(
                            "the service accepted (HTTP 202) and charged the request, but its answer could not be "
                            "read"
                        ) from exc
                    return _accepted_job(payload)
                if 300 <= response.status < 400:
                    # Only a 202 is charged (spec §4.1); a redirect is not followed, so nothing was bought.
                    raise Rejected(response.status, "the service redirected the request; the bot does not follow")
                await self._raise_for_status(response)
                raise ProtocolError(f"the service answered a create with HTTP {response.status}")
        except aiohttp.ClientConnectorError as exc:
            # The connection was never made, so the request never left: safe to retry.
            raise ServiceUnreachable("could not connect to the video service") from exc
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise OutcomeUnknown(
                "no answer from the video service after the request was sent; it may have been accepted"
            ) from exc

    async def _get_job_once(self, path: str, job_id: str) -> RemoteJob:
        async with _transport_faults("status"), self._request("GET", self._url(path)) as response:
            self._refuse_redirect(response, "status")
            await self._raise_for_status(response)
            return _polled_job(await _read_json(response, "status"), job_id)

    async def _key_info_once(self) -> KeyInfo:
        async with _transport_faults("key info"), self._request("GET", self._url(KEY_INFO_PATH)) as response:
            self._refuse_redirect(response, "key info")
            await self._raise_for_status(response)
            try:
                payload = await _read_json(response, "key info")
            except ProtocolError as exc:
                raise UnreadableKeyInfo(str(exc)) from exc
            return _key_info(payload)

    # -- plumbing -----------------------------------------------------------------------------

    def _url(self, path: str) -> URL:
        return URL(self._base_url + path)

    async def _retrying(self, policy: RetryPolicy, call: Callable[[], Awaitable[_T]], what: str) -> _T:
        return await retrying(
            policy, call, retry_on=_RETRYABLE, what=what, retry_after=_retry_after, sleep=self._sleep
        )

    @contextlib.asynccontextmanager
    async def _request(
        self, method: str, url: URL, *, paced: bool = True, **kwargs: Any
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """One request, redirects not followed; the key goes only to the service's own origin."""
        ours = _origin(url) == self._origin
        if ours and paced and self._pacer is not None:
            await self._pacer.wait()
        # Another host's URL may hold signed tokens in its path or query: log only its host.
        shown = url.path if ours else f"{url.scheme}://{url.host} (redirected)"
        log.debug("%s %s", method, shown)
        kwargs.setdefault("timeout", self._timeout)
        headers = dict(kwargs.pop("headers", {}))
        if ours:
            headers["Authorization"] = f"Bearer {self._api_key}"
        endpoint = _endpoint(method, url.path, ours)
        if self._observer is not None:
            self._observer.request_sent(endpoint)
        async with self._session.request(
            method,
            url,
            headers=headers,
            allow_redirects=False,
            **kwargs,
        ) as response:
            log.debug("%s %s -> %d", method, shown, response.status)
            if self._observer is not None:
                self._observer.response(endpoint, response.status)
            yield response

    @contextlib.asynccontextmanager
    async def _follow(self, url: URL) -> AsyncIterator[aiohttp.ClientResponse]:
        """GET `url`, following up to MAX_REDIRECTS redirects ourselves so the key never leaves our origin, and
        only to hosts `_check_redirect` allows."""
        for hop in range(MAX_REDIRECTS + 1):
            if hop:
                await self._check_redirect(url)
            # An MP4 does not compress; asking for it plain keeps Content-Length the file's size.
            async with self._request(
                "GET", url, timeout=self._download_timeout, headers={"Accept-Encoding": "identity"}
            ) as response:
                if hop:
                    self._check_peer(response, url)  # before a byte of its body is read
                if response.status not in _REDIRECT_STATUSES:
                    yield response
                    return
                url = _redirect_target(response)
        raise ProtocolError(f"the download was redirected more than {MAX_REDIRECTS} times")

    def _own_host(self, url: URL) -> bool:
        """The service's own host (any port): followed whatever its address, so a service on loopback or a private
        network (the tests, a local gateway) may send its downloads to its own storage there."""
        return (url.host or "").lower() == self._origin[1]

    async def _check_redirect(self, url: URL) -> None:
        """Refuse a redirect target other than the service's own host unless it is https and every address its
        name has is public. Raises ProtocolError (REDIRECT_REFUSED) before any request leaves for it."""
        if self._own_host(url):
            return
        host = url.host or ""
        if url.scheme != "https":
            self._refuse_redirect_to(url, "not https")
        address = ip_of(host)
        if address is not None:
            addresses: list[IPAddress | None] = [address]
        else:
            try:
                found = await asyncio.get_running_loop().getaddrinfo(host, url.port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise ServiceUnreachable("the host a download was redirected to could not be resolved") from exc
            addresses = [ip_of(str(info[4][0])) for info in found]
        if not addresses or any(address is None or is_internal(address) for address in addresses):
            self._refuse_redirect_to(url, "an internal address")

    def _check_peer(self, response: aiohttp.ClientResponse, url: URL) -> None:
        """The address the redirect's connection reached is public too (a name may resolve again, differently,
        when the connection is made)."""
        if self._own_host(url) or response.connection is None or response.connection.transport is None:
            return
        peer = response.connection.transport.get_extra_info("peername")
        address = ip_of(str(peer[0])) if peer else None
        if address is not None and is_internal(address):
            self._refuse_redirect_to(url, f"connected to an internal address {address}")

    @staticmethod
    def _refuse_redirect_to(url: URL, why: str) -> NoReturn:
        # The operator's log names the host (escaped): a redirect to the host's own network is worth a look.
        log.warning("a download was redirected to %s (%s); not followed", shown_id(f"{url.scheme}://{url.host}"), why)
        raise ProtocolError(REDIRECT_REFUSED)

    @staticmethod
    def _refuse_redirect(response: aiohttp.ClientResponse, what: str) -> None:
        if 300 <= response.status < 400:
            raise ProtocolError(f"the service redirected the {what} request (HTTP {response.status}); not followed")

    async def _raise_for_status(self, response: aiohttp.ClientResponse, *, quote: bool = True) -> None:
        """Raise for an HTTP error. `quote=False` (downloads, whose answer may come from another host): the reason
        quotes nothing of the body."""
        status = response.status
        if status < 400:
            return
        if status == 429:
            raise RateLimited(parse_retry_after(response.headers.get("Retry-After")))
        if status >= 500:
            raise ServerError(status)
        raise Rejected(status, await self._reason(response) if quote else DOWNLOAD_REFUSED)

    async def _reason(self, response: aiohttp.ClientResponse) -> str:
        """The error text of a refusal, short, and without the key: redacted once JSON unescaped it (`\\/`), and
        before it is cut to length, or a key across the cut would leave its start."""
        fallback = response.reason or "no reason given"
        try:
            body, complete = await _read_prefix(response, _MAX_REASON_BYTES)
        except (TimeoutError, aiohttp.ClientError):
            return fallback
        message = _error_text(body.decode("utf-8", errors="replace"), complete) or fallback
        return self._redact(_unescaped(message))[:_MAX_REASON_CHARS]

    def _redact(self, text: str) -> str:
        # Some gateways echo the key in error texts; it must not travel further.
        return text.replace(self._api_key, mask_key(self._api_key)) if self._api_key else text


def _redirect_target(response: aiohttp.ClientResponse) -> URL:
    location = response.headers.get("Location")
    if not location:
        raise ProtocolError(f"the download was redirected (HTTP {response.status}) without a Location")
    try:
        target = response.url.join(URL(location))
    except ValueError as exc:
        raise ProtocolError("the download was redirected to an unreadable Location") from exc
    if target.scheme not in ("http", "https") or not target.host:
        raise ProtocolError("the download was redirected to a URL that is not http(s); not followed")
    return target


def _check_free_space(directory: Path, expected: int) -> None:
    free = shutil.disk_usage(directory).free
    needed = expected + DISK_MARGIN_BYTES
    if free < needed:
        raise InsufficientStorage(
            f"{free} bytes free in the video folder; a video of up to {expected} bytes needs {needed}",
            needed=needed, free=free,
        )


#: A download on its way to its name; one a kill -9 left behind is removed by `remove_abandoned_downloads`.
PARTIAL_SUFFIX = ".part"


def remove_abandoned_downloads(directory: Path, *, unwritten_for: float, now: float) -> int:
    """Delete the partial downloads in `directory` not written for `unwritten_for` seconds (a process killed
    mid-download leaves one; a download under way writes every few milliseconds). Returns how many."""
    removed = 0
    for partial in directory.glob(f".*{PARTIAL_SUFFIX}"):
        try:
            if now - partial.stat().st_mtime >= unwritten_for:
                partial.unlink()
                removed += 1
        except FileNotFoundError:
            continue  # finished (renamed) or removed by another process meanwhile
    return removed


async def _save(response: aiohttp.ClientResponse, destination: Path, announced: int | None, max_bytes: int) -> int:
    """Stream the body to a temporary file beside `destination`, check it, then give it its name."""
    fd, name = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=PARTIAL_SUFFIX)
    partial = Path(name)
    size = 0
    saved = False
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
                    size += len(chunk)
                    if size > max_bytes:
                        response.close()  # drop the connection: the rest is never read
                        raise DownloadTooLarge(size, max_bytes, announced=False)
                    _write(out, chunk)
            except aiohttp.ClientPayloadError as exc:
                # aiohttp's own word for a body cut short: name it, with what arrived.
                shown = f"{size} of {announced}" if announced is not None else f"{size}"
                raise ServiceUnreachable(f"the video download ended early ({shown} bytes)") from exc
            if announced is not None and size != announced:
                raise ServiceUnreachable(f"the video download ended early ({size} of {announced} bytes)")
            out.flush()
            # Waiting for the disk takes milliseconds per MiB: off the event loop, with the check and the
            # rename in the same trip to a thread (each trip wakes the loop once more).
            await asyncio.to_thread(_keep, out.fileno(), partial, destination)
            saved = True
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise InsufficientStorage(f"the disk filled up while saving the video ({size} bytes written)") from exc
        raise
    finally:
        if not saved:
            partial.unlink(missing_ok=True)
    return size


def _keep(fd: int, partial: Path, destination: Path) -> None:
    """On the disk for good, an MP4, then under its name (blocking: run in a thread)."""
    os.fsync(fd)
    check_mp4(partial)
    os.replace(partial, destination)


@contextlib.asynccontextmanager
async def _transport_faults(what: str) -> AsyncIterator[None]:
    """Free requests: a timeout or dropped connection is just a failed attempt, safe to retry."""
    try:
        yield
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise ServiceUnreachable(f"the video service did not answer the {what} request") from exc
