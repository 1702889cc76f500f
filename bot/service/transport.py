"""Requests to the video service over one shared aiohttp session: the key only in the `Authorization` header and
only to the service's own origin; redirects followed only where asked (downloads), never with the key, and only to
the service's own host or a public https host (checked before the request and again on the connection made);
bodies read up to a bound; a refusal's text redacted of the key, and nothing quoted of a refused download. What
the answers mean is bot/service/answers.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import re
import socket
import time
from collections.abc import AsyncIterator
from typing import Any, NoReturn, Protocol

import aiohttp
from yarl import URL

from bot.core.addresses import IPAddress, ip_of, is_internal
from bot.core.errors import ProtocolError, RateLimited, Rejected, ServerError, ServiceUnreachable
from bot.service.answers import KEY_INFO_PATH, KeyInfo, shown_id
from bot.service.pacing import Pacer

#: The client's logger, whichever of its modules writes the line.
log = logging.getLogger("bot.service.client")

MAX_REDIRECTS = 3
MAX_JSON_BYTES = 64 * 1024  # a job or key info answer is a few hundred bytes
CHUNK_BYTES = 64 * 1024
_MAX_REASON_BYTES = 4096
_MAX_REASON_CHARS = 300
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Why a download's redirect was not followed; the target is named in the log only (the operator's), never here.
REDIRECT_REFUSED = ("the download was redirected to a host the bot does not follow (only the service's own host, or "
                    "a public https host: no loopback, private or link-local address)")
#: A download refused with an HTTP error: its body may come from any host and is not quoted.
DOWNLOAD_REFUSED = "the download was refused"


def mask_key(key: str) -> str:
    """The bot's own masked form of a key: its last four characters only."""
    return f"…{key[-4:]}" if len(key) >= 12 else "…"


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


def _origin(url: URL) -> tuple[str, str, int | None]:
    return (url.scheme.lower(), (url.host or "").lower(), url.port)


async def read_prefix(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the body, and whether that was all of it. Never reads much past `limit`."""
    body = bytearray()
    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), False
    return bytes(body), True


async def read_json(response: aiohttp.ClientResponse, where: str) -> object:
    body, complete = await read_prefix(response, MAX_JSON_BYTES)
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


def redirect_target(response: aiohttp.ClientResponse) -> URL:
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


@contextlib.asynccontextmanager
async def transport_faults(what: str) -> AsyncIterator[None]:
    """Free requests: a timeout or dropped connection is just a failed attempt, safe to retry."""
    try:
        yield
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise ServiceUnreachable(f"the video service did not answer the {what} request") from exc


class ServiceTransport:
    """One request at a time to the service's base address (or, for a download, where it redirects)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        api_key: str,
        *,
        timeout_seconds: float,
        download_timeout_seconds: float,
        pacer: Pacer | None = None,
        observer: ClientObserver | None = None,
    ) -> None:
        self._session = session
        self.base_url = base_url.rstrip("/")
        self._origin = _origin(URL(self.base_url))
        self._api_key = api_key
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        # A video may take minutes to arrive on a slow link, but never stalls for long.
        self.download_timeout = aiohttp.ClientTimeout(
            total=download_timeout_seconds, connect=timeout_seconds, sock_read=timeout_seconds
        )
        self._pacer = pacer
        self._observer = observer

    @property
    def masked_key(self) -> str:
        return mask_key(self._api_key)

    def url(self, path: str) -> URL:
        return URL(self.base_url + path)

    @contextlib.asynccontextmanager
    async def request(
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
    async def follow(self, url: URL) -> AsyncIterator[aiohttp.ClientResponse]:
        """GET `url`, following up to MAX_REDIRECTS redirects ourselves so the key never leaves our origin, and
        only to hosts `_check_redirect` allows."""
        for hop in range(MAX_REDIRECTS + 1):
            if hop:
                await self._check_redirect(url)
            # An MP4 does not compress; asking for it plain keeps Content-Length the file's size.
            async with self.request(
                "GET", url, timeout=self.download_timeout, headers={"Accept-Encoding": "identity"}
            ) as response:
                if hop:
                    self._check_peer(response, url)  # before a byte of its body is read
                if response.status not in _REDIRECT_STATUSES:
                    yield response
                    return
                url = redirect_target(response)
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
    def refuse_redirect(response: aiohttp.ClientResponse, what: str) -> None:
        if 300 <= response.status < 400:
            raise ProtocolError(f"the service redirected the {what} request (HTTP {response.status}); not followed")

    async def raise_for_status(self, response: aiohttp.ClientResponse, *, quote: bool = True) -> None:
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
            body, complete = await read_prefix(response, _MAX_REASON_BYTES)
        except (TimeoutError, aiohttp.ClientError):
            return fallback
        message = _error_text(body.decode("utf-8", errors="replace"), complete) or fallback
        return self._redact(_unescaped(message))[:_MAX_REASON_CHARS]

    def _redact(self, text: str) -> str:
        # Some gateways echo the key in error texts; it must not travel further.
        return text.replace(self._api_key, mask_key(self._api_key)) if self._api_key else text
