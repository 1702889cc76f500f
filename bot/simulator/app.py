"""A local, spend-free stand-in for the text-to-video service.

It is a real aiohttp server that follows the service contract (create / status / download / key info),
so the bot can be exercised end to end in tests and in operator dry runs without paying for videos.

Clock: every job time (``SimJob.created_at``, ``in_progress_at``, ``completed_at``) is on the
``time.monotonic()`` clock. On the default asyncio event loops ``loop.time()`` reads that same clock, so
tests may compare job times with either. Job status is derived from the clock on every read, which means
no background task is needed to advance jobs.

Misbehaviours
-------------
The bot must trust nothing the service says, so the simulator can misbehave on demand. Each
misbehaviour is off by default (defaults are the contract's correct behaviour) and is a
``SimulatorConfig`` field, so a test or ``python -m bot.simulator`` can start a misbehaving server.
Every field is read at request time: ``VideoServiceSimulator.reconfigure(**changes)`` switches them on
a running simulator (validated like a new config). Queued one-shot misbehaviours are methods.

Job ids (create):
  ``forced_job_ids`` / ``force_next_job_ids(*ids)``: the next accepted creates get exactly these ids
  (``..``, ``a/b``, empty, 5,000 characters, unicode ...). ``duplicate_job_ids`` /
  ``duplicate_next_job_id()``: an accepted create returns the id of the most recent existing job; it
  is charged again, and the existing job stays as it was. Routing: ids travel percent-encoded in the
  path (``a%2Fb``); ids that a URL cannot carry (``.``, ``..``, empty) are simply not routable.
Paths (create and status responses):
  ``foreign_paths``: ``"other_job"`` (another job's paths), ``"other_endpoint"`` (``/key/info``),
  ``"dotdot"`` (the job's path followed by ``..`` segments that resolve to ``/key/info``),
  ``"absolute"`` (the job's paths on ``foreign_base_url``, another host).
Download body (instead of the MP4, still HTTP 200; only where the MP4 would be served):
  ``download_body``: ``"html"`` (an error page, text/html), ``"json_error"`` (``{"error": ...}``),
  ``"empty"``, ``"truncated"`` (first half, Content-Length of the whole file, then the connection
  closes), ``"not_mp4_bytes"`` (as many random bytes as the MP4, labelled video/mp4).
  ``download_oversize_bytes``: the MP4's real ``ftyp`` box, an ``mdat`` header, then zero filler up to
  that many bytes, streamed in chunks and never held in memory. ``download_send_length`` chooses
  between a Content-Length header and chunked encoding (every body except ``truncated``).
  ``download_bytes_per_second``: trickles any download body at that rate.
Key info:
  ``key_info_payload``: any JSON value served verbatim instead of the real record;
  ``key_info_raw_body``: raw text served as application/json (for ``null`` or broken JSON).
Redirects:
  ``download_redirect`` (a base URL): a download answers 302 to ``<base>/storage/<job id>``.
  ``status_redirect``: a status answers 302 to the same path on that base. Every simulator serves
  ``/storage/{job_id}`` without authentication (for any id, with the download body settings above),
  as a storage host would; those requests go to ``storage_requests_log``, not ``requests_log``.

Models
------
The spec's model is served at ``CREATE_PATH`` for ``price_yen``. ``extra_models`` (``SimModel``) add
more, each with its own create path and flat price; status and download are shared by all models, as
in the spec. Each accepted create is charged its model's price (``spend``, per model in
``spend_by_model``).

Counters stay true under every misbehaviour: ``spend``, ``creates_accepted`` and ``accepted_job_ids``
count what was charged; ``bytes_served`` holds, per download body (``/storage`` included), the bytes
handed to the socket, an upper bound on what the client received (so a test can prove a client
stopped early).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, get_args
from urllib.parse import quote

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Handler
from aiohttp.web_request import BaseRequest

logger = logging.getLogger(__name__)
access_logger = logging.getLogger(__name__ + ".access")

MODEL_ID: Final = "provider/video-model-2.0-fast"
VIDEO_SECONDS: Final = 8
VIDEO_RESOLUTION: Final = "1280x720"
VIDEO_WIDTH: Final = 1280
VIDEO_HEIGHT: Final = 720
MAX_PROMPT_CHARS: Final = 2000
DEFAULT_PRICE_YEN: Final = 250

CREATE_PATH: Final = "/gateway/videos/create"
JOBS_PREFIX: Final = "/gateway/videos/jobs"
KEY_INFO_PATH: Final = "/key/info"
# Unauthenticated, like a storage host that a download may be redirected to.
STORAGE_PREFIX: Final = "/storage"
# An address nothing listens on (port 9, discard), for paths that point to another host.
DEFAULT_FOREIGN_BASE_URL: Final = "http://127.0.0.2:9"

DEFAULT_VIDEO_PATH: Final = Path(__file__).resolve().parent / "assets" / "sample.mp4"

JobStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]
Endpoint: TypeAlias = Literal["create", "status", "download", "key_info"]
_ENDPOINTS: Final[frozenset[str]] = frozenset({"create", "status", "download", "key_info"})
ForeignPaths: TypeAlias = Literal["other_job", "other_endpoint", "dotdot", "absolute"]
DownloadBody: TypeAlias = Literal["html", "json_error", "empty", "truncated", "not_mp4_bytes"]
FOREIGN_PATHS: Final[tuple[str, ...]] = get_args(ForeignPaths)
DOWNLOAD_BODIES: Final[tuple[str, ...]] = get_args(DownloadBody)

# Marks a response that was never sent because the connection was closed on purpose.
_DROPPED: Final = web.ResponseKey("simulator_dropped", bool)
# Marks a response whose body was cut short (on purpose, or because the client went away).
_CUT: Final = web.ResponseKey("simulator_cut", bool)

_CHUNK_BYTES: Final = 64 * 1024
# Shared zero filler for oversized bodies, so no body is ever built in memory.
_FILLER: Final = bytes(_CHUNK_BYTES)
# Box size 0 means "extends to the end of the file": the filler then looks like media data.
_MDAT_TO_EOF: Final = b"\x00\x00\x00\x00mdat"
# Ids that `other_job` paths use while there is no other job: never issued by the simulator.
_NO_OTHER_JOB_ID: Final = "vid_" + "0" * 32
_HTML_ERROR_PAGE: Final = (
    b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>502 Bad Gateway</h1><p>The storage backend did not answer.</p></body></html>"
)

# Length may be spelled under several names by clients; all of them must equal the fixed 8 seconds.
_LENGTH_FIELDS: Final = ("length", "duration", "seconds")
_RESOLUTION_FIELDS: Final = ("resolution", "size")


@dataclass(frozen=True)
class SimModel:
    """One model the simulated service serves: its own create endpoint and flat price."""

    id: str
    create_path: str
    price_yen: int
    supports_seed: bool = True


#: Paths a model's create endpoint must not take: the shared endpoints.
_SHARED_PREFIXES: Final = (JOBS_PREFIX, KEY_INFO_PATH, STORAGE_PREFIX)


@dataclass
class SimulatorConfig:
    """Behaviour knobs of the simulator. Defaults mirror the real model's fixed settings and price."""

    api_key: str = "sim-key"
    # pending -> in_progress at 1/3 of the duration, completed (or failed) at the end.
    job_seconds: float = 5.0
    # If set, each job's duration is uniform in [job_seconds, job_seconds_max], drawn from `seed`.
    job_seconds_max: float | None = None
    # Probability that a job ends `failed` instead of `completed`.
    fail_rate: float = 0.0
    # Yen; None means no limit and key info reports a null budget.
    max_budget: int | None = 10_000
    # The flat price of the spec's model (MODEL_ID at CREATE_PATH).
    price_yen: int = DEFAULT_PRICE_YEN
    # More models, each at its own create path and price (the routes are fixed when the simulator is built).
    extra_models: tuple[SimModel, ...] = ()
    # Seeds random.Random for durations and failures so runs are reproducible.
    seed: int = 0
    # The MP4 served for every completed job; None means the packaged assets/sample.mp4.
    video_path: Path | None = None
    # Platform-wide limit: more than this many requests (any endpoint) within a sliding 1 s window
    # get 429 with `Retry-After: 1`. None disables it.
    rate_limit_per_second: float | None = None
    # LiteLLM-style gateways echo the raw key in /key/info; the contract says it is masked.
    echo_raw_key: bool = False

    # ---- Misbehaviours, all off by default (see the module docstring).
    # The first accepted creates get exactly these ids (read once, when the simulator is built).
    forced_job_ids: tuple[str, ...] = ()
    # Every accepted create, once a job exists, returns the most recent job's id (charged again).
    duplicate_job_ids: bool = False
    # Create and status responses carry poll_path/content_path that point elsewhere.
    foreign_paths: ForeignPaths | None = None
    # The other host used by foreign_paths="absolute".
    foreign_base_url: str = DEFAULT_FOREIGN_BASE_URL
    # A completed job's download answers 200 with this instead of the MP4.
    download_body: DownloadBody | None = None
    # A completed job's download is a valid-looking MP4 start padded to this many bytes.
    download_oversize_bytes: int | None = None
    # False: download bodies go out chunked, with no Content-Length (not for "truncated").
    download_send_length: bool = True
    # Trickle every download body at this rate.
    download_bytes_per_second: float | None = None
    # Served verbatim as JSON by /key/info instead of the real record (None: the real record).
    key_info_payload: Any = None
    # Raw text served by /key/info as application/json, e.g. "null" or "{broken".
    key_info_raw_body: str | None = None
    # Base URL of another host: downloads answer 302 to <base>/storage/<job id>.
    download_redirect: str | None = None
    # Status answers 302 to the same path on download_redirect's base.
    status_redirect: bool = False

    def __post_init__(self) -> None:
        if not self.api_key:
            raise ValueError("api_key must not be empty")
        if self.job_seconds < 0:
            raise ValueError("job_seconds must be >= 0")
        if self.job_seconds_max is not None and self.job_seconds_max < self.job_seconds:
            raise ValueError("job_seconds_max must be >= job_seconds")
        if not 0.0 <= self.fail_rate <= 1.0:
            raise ValueError("fail_rate must be within [0, 1]")
        if self.max_budget is not None and self.max_budget < 0:
            raise ValueError("max_budget must be >= 0 or None")
        if self.price_yen <= 0:
            raise ValueError("price_yen must be > 0")
        if self.rate_limit_per_second is not None and self.rate_limit_per_second <= 0:
            raise ValueError("rate_limit_per_second must be > 0 or None")
        self._validate_models()
        self._validate_misbehaviours()

    @property
    def models(self) -> tuple[SimModel, ...]:
        """Every model served: the spec's, then the extra ones."""
        return (SimModel(MODEL_ID, CREATE_PATH, self.price_yen, True), *self.extra_models)

    def _validate_models(self) -> None:
        ids = [model.id for model in self.models]
        paths = [model.create_path for model in self.models]
        if len(set(ids)) != len(ids):
            raise ValueError("model ids must be unique")
        if len(set(paths)) != len(paths):
            raise ValueError("model create paths must be unique")
        for model in self.extra_models:
            if not model.id:
                raise ValueError("a model id must not be empty")
            if not model.create_path.startswith("/") or "?" in model.create_path or \
                    model.create_path.startswith(_SHARED_PREFIXES):
                raise ValueError(f"create path {model.create_path!r} must be an absolute path of its own")
            if isinstance(model.price_yen, bool) or not isinstance(model.price_yen, int) or model.price_yen <= 0:
                raise ValueError(f"the price of {model.id} must be a whole number of yen > 0")

    def _validate_misbehaviours(self) -> None:
        if not all(isinstance(job_id, str) for job_id in self.forced_job_ids):
            raise ValueError("forced_job_ids must be strings")
        if self.foreign_paths is not None and self.foreign_paths not in FOREIGN_PATHS:
            raise ValueError(f"foreign_paths must be one of {FOREIGN_PATHS} or None")
        if not self.foreign_base_url.startswith(("http://", "https://")):
            raise ValueError("foreign_base_url must be an absolute http(s) URL")
        if self.download_body is not None and self.download_body not in DOWNLOAD_BODIES:
            raise ValueError(f"download_body must be one of {DOWNLOAD_BODIES} or None")
        if self.download_oversize_bytes is not None:
            if self.download_oversize_bytes < 1:
                raise ValueError("download_oversize_bytes must be >= 1 or None")
            if self.download_body is not None:
                raise ValueError("download_oversize_bytes and download_body are exclusive")
        if self.download_bytes_per_second is not None and self.download_bytes_per_second <= 0:
            raise ValueError("download_bytes_per_second must be > 0 or None")
        if self.key_info_payload is not None and self.key_info_raw_body is not None:
            raise ValueError("key_info_payload and key_info_raw_body are exclusive")
        try:
            json.dumps(self.key_info_payload)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"key_info_payload is not JSON-serialisable: {exc}") from None
        if self.download_redirect is not None and not self.download_redirect.startswith(("http://", "https://")):
            raise ValueError("download_redirect must be an absolute http(s) URL")
        if self.status_redirect and self.download_redirect is None:
            raise ValueError("status_redirect needs download_redirect (the base it redirects to)")


@dataclass
class SimJob:
    """One accepted job. Times are `time.monotonic()` seconds; status is a function of the clock."""

    id: str
    prompt: str
    seed: int | None
    created_at: float
    duration: float
    will_fail: bool
    model: str = MODEL_ID

    @property
    def in_progress_at(self) -> float:
        return self.created_at + self.duration / 3

    @property
    def completed_at(self) -> float:
        """The moment the job reaches its terminal state (`completed`, or `failed` if `will_fail`)."""
        return self.created_at + self.duration

    @property
    def poll_path(self) -> str:
        return f"{JOBS_PREFIX}/{self.id}"

    @property
    def content_path(self) -> str:
        return f"{JOBS_PREFIX}/{self.id}/content"

    def status_at(self, now: float) -> JobStatus:
        if now >= self.completed_at:
            return "failed" if self.will_fail else "completed"
        if now >= self.in_progress_at:
            return "in_progress"
        return "pending"

    @property
    def status(self) -> JobStatus:
        return self.status_at(time.monotonic())


@dataclass(frozen=True)
class _Fault:
    status: int
    retry_after: float | None
    body: dict[str, Any] | None


@dataclass(frozen=True)
class _CreateDisruption:
    kind: Literal["hang", "drop"]
    accept: bool
    seconds: float = 0.0


@dataclass(frozen=True)
class _DuplicateId:
    """Queued in place of a forced id: reuse the most recent job's id."""


_DUPLICATE: Final = _DuplicateId()


def service_masked_key(key: str) -> str:
    """The key as the service's /key/info shows it, like ``sk-...abcd``: never more than a quarter
    (and at most 4 chars) of the key.

    This imitates the service's own masked format. It is not the bot's masking
    (``bot.service.client.mask_key``), which the bot uses for its own logs and messages."""
    visible = min(4, len(key) // 4)
    prefix = "sk-" if key.startswith("sk-") else ""
    return f"{prefix}...{key[-visible:] if visible else ''}"


def _ftyp_box(video: bytes) -> bytes:
    """The file's leading ``ftyp`` box, or b"" if it does not start with one."""
    size = int.from_bytes(video[:4], "big")
    if video[4:8] == b"ftyp" and 8 <= size <= len(video):
        return video[:size]
    return b""


def _oversize_blocks(ftyp: bytes, total: int) -> Iterator[bytes]:
    """`total` bytes that start like an MP4: the real ftyp box, an mdat header, then zeros."""
    head = (ftyp + _MDAT_TO_EOF)[:total]
    yield head
    remaining = total - len(head)
    while remaining > 0:
        piece = _FILLER if remaining >= len(_FILLER) else _FILLER[:remaining]
        yield piece
        remaining -= len(piece)


def _chunks(blocks: Iterable[bytes], size: int) -> Iterator[memoryview]:
    for block in blocks:
        view = memoryview(block)
        for start in range(0, len(view), size):
            yield view[start : start + size]


def _redirect(location: str) -> web.Response:
    return web.Response(status=302, headers={"Location": location})


def _log_id(job_id: str) -> str:
    # Forced ids can be 5,000 characters of anything: keep log lines short and printable.
    shown = job_id if len(job_id) <= 64 else job_id[:64] + f"...({len(job_id)} chars)"
    return repr(shown)


def _format_retry_after(seconds: float) -> str:
    # Whole seconds are the common form; fractional values are kept for fast tests.
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def _error_response(status: int, message: str, *, headers: Mapping[str, str] | None = None) -> web.Response:
    body = {"error": {"message": message, "type": _error_type(status), "code": str(status)}}
    return web.json_response(body, status=status, headers=headers)


def _error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        409: "conflict_error",
        429: "rate_limit_error",
    }.get(status, "api_error" if status >= 500 else "request_error")


def _is_number(value: object, target: int) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == target


def _fixed_field_error(payload: Mapping[str, Any], model_id: str = MODEL_ID) -> str | None:
    """Message for the first field that asks for something other than the model's fixed settings."""
    for name in _LENGTH_FIELDS:
        if name in payload:
            value = payload[name]
            ok = _is_number(value, VIDEO_SECONDS) or (isinstance(value, str) and value.strip().lower() in {"8", "8s"})
            if not ok:
                return f"{name} is fixed at {VIDEO_SECONDS} seconds for {model_id}"
    for name in _RESOLUTION_FIELDS:
        if name in payload:
            value = payload[name]
            if not (isinstance(value, str) and value.replace(" ", "").lower() == VIDEO_RESOLUTION):
                return f"{name} is fixed at {VIDEO_RESOLUTION} for {model_id}"
    if "width" in payload and not _is_number(payload["width"], VIDEO_WIDTH):
        return f"width is fixed at {VIDEO_WIDTH} for {model_id}"
    if "height" in payload and not _is_number(payload["height"], VIDEO_HEIGHT):
        return f"height is fixed at {VIDEO_HEIGHT} for {model_id}"
    if "audio" in payload and payload["audio"] is not True:
        return f"audio is always included for {model_id}"
    if "model" in payload and payload["model"] != model_id:
        return f"this endpoint only serves model {model_id}"
    return None


class _RedactingAccessLogger(AbstractAccessLogger):
    """Logs method, path and status only: the query string is dropped and the key is redacted,
    so a client that wrongly puts the key in a URL does not leak it into logs."""

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        path = request.path
        if isinstance(request, web.Request):
            sim = request.app.get(_SIMULATOR_KEY)
            if sim is not None:
                path = path.replace(sim.config.api_key, "<redacted>")
        outcome = "dropped, no response" if response.get(_DROPPED) else str(response.status)
        if response.get(_CUT):
            outcome += ", body cut short"
        self.logger.info("%s %s -> %s (%.1f ms)", request.method, path, outcome, time * 1000)


class VideoServiceSimulator:
    """The simulated service. Build it, `await start()`, point a client at `base_url`, `await stop()`."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.config = config or SimulatorConfig()
        self.video_path = self.config.video_path or DEFAULT_VIDEO_PATH
        if not self.video_path.is_file():
            raise FileNotFoundError(f"simulator video not found: {self.video_path}")
        # Read once: downloads are streamed from memory so every byte written can be counted.
        self._video = self.video_path.read_bytes()
        self._ftyp = _ftyp_box(self._video)
        # Same length as the MP4, seeded so runs repeat; starts like no MP4 does.
        self._not_mp4 = b"NOT-MP4!" + random.Random(len(self._video)).randbytes(max(0, len(self._video) - 8))

        self.spend = 0
        # Charged yen per model id, for tests that check each model's own price.
        self.spend_by_model: dict[str, int] = {}
        self.creates_received = 0
        self.creates_accepted = 0
        self.status_requests = 0
        self.download_requests = 0
        self.key_info_requests = 0
        self.responses_429 = 0
        self.jobs: dict[str, SimJob] = {}
        # In memory only (never logged): tests use it to check that the key stays out of URLs.
        # Storage requests are not service requests: they go to storage_requests_log instead.
        self.requests_log: list[tuple[str, str, dict[str, str]]] = []
        self.storage_requests_log: list[tuple[str, str, dict[str, str]]] = []
        # The id returned by each accepted (charged) create, duplicates included, in order.
        self.accepted_job_ids: list[str] = []
        # Bytes handed to the socket per download body, in order of the requests.
        self.bytes_served: list[int] = []

        self._rng = random.Random(self.config.seed)
        self._faults: dict[str, deque[_Fault]] = {name: deque() for name in _ENDPOINTS}
        self._create_disruptions: deque[_CreateDisruption] = deque()
        self._next_ids: deque[str | _DuplicateId] = deque(self.config.forced_job_ids)
        self._window: deque[float] = deque()
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self._stopping: asyncio.Event | None = None

        self.app = web.Application(middlewares=[self._middleware])
        self.app[_SIMULATOR_KEY] = self
        for model in self.config.models:
            self.app.router.add_post(model.create_path, self._handle_create)
        self.app.router.add_get(JOBS_PREFIX + "/{job_id}", self._handle_status, allow_head=False)
        self.app.router.add_get(JOBS_PREFIX + "/{job_id}/content", self._handle_download, allow_head=False)
        self.app.router.add_get(KEY_INFO_PATH, self._handle_key_info, allow_head=False)
        self.app.router.add_get(STORAGE_PREFIX + "/{job_id}", self._handle_storage, allow_head=False)

    # ----------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("simulator is not running; call start() first")
        return self._base_url

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on host:port (0 picks a free port) and return the base URL."""
        if self._runner is not None:
            raise RuntimeError("simulator already started")
        self._stopping = asyncio.Event()
        # handler_cancellation: a client that gives up on a hung create frees its handler at once.
        # A short shutdown_timeout keeps stop() quick even if a client keeps a request open.
        runner = web.AppRunner(
            self.app,
            access_log_class=_RedactingAccessLogger,
            access_log=access_logger,
            handler_cancellation=True,
            shutdown_timeout=2.0,
        )
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound_host, bound_port = runner.addresses[0][:2]
        url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
        self._base_url = f"http://{url_host}:{bound_port}"
        logger.info("video-service simulator listening on %s", self._base_url)
        return self._base_url

    async def stop(self) -> None:
        """Stop listening; hung creates are released as dropped connections. Safe to call twice."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        if self._stopping is not None:
            self._stopping.set()
        await runner.cleanup()
        logger.info("video-service simulator stopped (spend %d yen, %d jobs)", self.spend, len(self.jobs))
        self._base_url = None

    async def __aenter__(self) -> VideoServiceSimulator:
        if self._runner is None:
            await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ----------------------------------------------------------- fault injection

    def inject(
        self,
        endpoint: Endpoint,
        status: int,
        *,
        times: int = 1,
        retry_after: float | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        """The next `times` requests to `endpoint` get HTTP `status` with `body` (or a JSON error body),
        plus `Retry-After` when given. Faults queue in order. Injected create errors are not charged."""
        if endpoint not in _ENDPOINTS:
            raise ValueError(f"unknown endpoint {endpoint!r}")
        if not 200 <= status <= 599 or status in (204, 205, 304):
            raise ValueError(f"cannot inject HTTP {status} with a JSON body")
        if times < 1:
            raise ValueError("times must be >= 1")
        fault = _Fault(status=status, retry_after=retry_after, body=body)
        self._faults[endpoint].extend([fault] * times)

    def hang_next_create(self, seconds: float = 3600, *, accept: bool = True) -> None:
        """Delay the response of the next create by `seconds` so the client times out.

        With `accept` the request is processed as usual first (a valid one is charged and gets a job),
        which is the "outcome unknown" case. Without it nothing is charged and, after the delay, the
        reply is a 503."""
        self._create_disruptions.append(_CreateDisruption(kind="hang", accept=accept, seconds=seconds))

    def drop_next_create(self, *, accept: bool = True) -> None:
        """Close the connection of the next create without any response (client: ServerDisconnected).

        With `accept` the request is processed (and a valid one charged) before the drop."""
        self._create_disruptions.append(_CreateDisruption(kind="drop", accept=accept))

    def force_next_job_ids(self, *ids: str) -> None:
        """The next accepted creates get exactly these ids, in order, whatever they are (``..``,
        ``a/b``, empty, very long, unicode). They are charged like any accepted create; an id that
        names an existing job behaves like `duplicate_next_job_id`. Rejected creates use none."""
        if not ids:
            raise ValueError("give at least one id")
        if not all(isinstance(job_id, str) for job_id in ids):
            raise TypeError("job ids must be strings")
        self._next_ids.extend(ids)

    def duplicate_next_job_id(self, *, times: int = 1) -> None:
        """The next `times` accepted creates return the id of the most recent existing job. Each is
        charged again (spend grows by the price); the existing job stays as it was. With no job yet,
        a fresh id is issued instead."""
        if times < 1:
            raise ValueError("times must be >= 1")
        self._next_ids.extend([_DUPLICATE] * times)

    def reconfigure(self, **changes: Any) -> None:
        """Change `SimulatorConfig` fields on a running simulator, validated like a new config.

        Every field is read at request time except `seed`, `video_path` and `forced_job_ids`, which
        only take effect when the simulator is built (use `force_next_job_ids` instead)."""
        fixed = sorted({"seed", "video_path", "forced_job_ids", "extra_models"} & changes.keys())
        if fixed:
            raise ValueError(f"cannot change {', '.join(fixed)} on a built simulator")
        self.config = dataclasses.replace(self.config, **changes)

    # ----------------------------------------------------------------- plumbing

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(STORAGE_PREFIX + "/"):
            # Another "host": no key, no platform rate limit, its own log.
            self.storage_requests_log.append(
                (request.method, request.path_qs, {str(k): v for k, v in request.headers.items()})
            )
            return await handler(request)
        self.requests_log.append((request.method, request.path_qs, {str(k): v for k, v in request.headers.items()}))
        if self._rate_limited():
            self.responses_429 += 1
            logger.info("rate limit: %s %s -> 429", request.method, request.path)
            return _error_response(429, "rate limit exceeded, retry later", headers={"Retry-After": "1"})
        if not self._authorized(request):
            logger.warning("rejected %s %s: missing or invalid API key", request.method, request.path)
            return _error_response(401, "missing or invalid API key")
        try:
            return await handler(request)
        except web.HTTPException as exc:
            # Router 404/405 and similar become JSON like every other response.
            headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
            return _error_response(exc.status, exc.reason, headers=headers)

    def _rate_limited(self) -> bool:
        limit = self.config.rate_limit_per_second
        if limit is None:
            return False
        now = time.monotonic()
        while self._window and self._window[0] <= now - 1.0:
            self._window.popleft()
        # Only admitted requests fill the window, so a client that backs off recovers within 1 s.
        if len(self._window) + 1 > limit:
            return True
        self._window.append(now)
        return False

    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(token.strip().encode(), self.config.api_key.encode())

    def _take_fault(self, endpoint: Endpoint) -> web.Response | None:
        queue = self._faults[endpoint]
        if not queue:
            return None
        fault = queue.popleft()
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = _format_retry_after(fault.retry_after)
        logger.info("injected HTTP %d on %s", fault.status, endpoint)
        if fault.body is not None:
            return web.json_response(fault.body, status=fault.status, headers=headers)
        return _error_response(fault.status, f"injected HTTP {fault.status}", headers=headers)

    async def _hold(self, seconds: float) -> bool:
        """Sleep up to `seconds`; return True if the simulator started stopping meanwhile."""
        assert self._stopping is not None
        try:
            async with asyncio.timeout(seconds):  # not wait_for: Python 3.11's can swallow a cancellation
                await self._stopping.wait()
        except TimeoutError:
            return False
        return True

    @staticmethod
    def _drop(request: web.Request) -> web.Response:
        transport = request.transport
        if transport is not None:
            transport.close()
        # aiohttp cannot write this to the closed transport and treats it as a client disconnect,
        # so the client sees the connection end with no response at all.
        response = web.Response(status=500, text="connection dropped")
        response[_DROPPED] = True
        return response

    # ----------------------------------------------------------------- handlers

    async def _handle_create(self, request: web.Request) -> web.Response:
        self.creates_received += 1
        injected = self._take_fault("create")
        if injected is not None:
            return injected
        disruption = self._create_disruptions.popleft() if self._create_disruptions else None
        if disruption is not None and not disruption.accept:
            # Lost before the service saw it: nothing is charged.
            if disruption.kind == "drop":
                return self._drop(request)
            if await self._hold(disruption.seconds):
                return self._drop(request)
            return _error_response(503, "upstream timed out")

        response = await self._process_create(request)
        if disruption is None:
            return response
        if disruption.kind == "drop":
            logger.info("dropping create connection after HTTP %d", response.status)
            return self._drop(request)
        logger.info("holding create response (HTTP %d) for %.1f s", response.status, disruption.seconds)
        if await self._hold(disruption.seconds):
            return self._drop(request)
        return response

    async def _process_create(self, request: web.Request) -> web.Response:
        try:
            payload = json.loads(await request.text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error_response(400, "request body is not valid JSON")
        if not isinstance(payload, dict):
            return _error_response(400, "request body must be a JSON object")
        model = self._model_at(request.path)
        fixed_error = _fixed_field_error(payload, model.id)
        if fixed_error is not None:
            return _error_response(400, fixed_error)

        prompt = payload.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return _error_response(400, "prompt is required and must be a non-empty string")
        if len(prompt) > MAX_PROMPT_CHARS:
            return _error_response(400, f"prompt is longer than {MAX_PROMPT_CHARS} characters")
        seed: int | None = None
        if "seed" in payload:
            raw_seed = payload["seed"]
            if not model.supports_seed:
                return _error_response(400, f"{model.id} does not take a seed")
            if not isinstance(raw_seed, int) or isinstance(raw_seed, bool):
                return _error_response(400, "seed must be an integer")
            seed = raw_seed

        # No await between the budget check and the charge, so concurrent creates cannot overspend.
        price = model.price_yen
        budget = self.config.max_budget
        if budget is not None and self.spend + price > budget:
            logger.info("create rejected: budget exceeded (spend %d, max %d)", self.spend, budget)
            return _error_response(400, "budget exceeded")

        job = self._new_job(self._next_job_id(), prompt, seed, model.id)
        existing = self.jobs.get(job.id)
        if existing is None:
            self.jobs[job.id] = job
        else:
            # A duplicate id: charged again, but the job it names stays as it was.
            job = existing
        self.spend += price
        self.spend_by_model[model.id] = self.spend_by_model.get(model.id, 0) + price
        self.creates_accepted += 1
        self.accepted_job_ids.append(job.id)
        logger.info(
            "accepted job %s of %s (%.1f s%s%s); spend %d/%s yen",
            _log_id(job.id),
            model.id,
            job.duration,
            ", will fail" if job.will_fail else "",
            ", duplicate id" if existing is not None else "",
            self.spend,
            budget if budget is not None else "unlimited",
        )
        poll_path, _ = self._paths_for(job)
        return web.json_response({"id": job.id, "status": "pending", "poll_path": poll_path}, status=202)

    def _next_job_id(self) -> str:
        """A fresh id, unless a forced or duplicate id is due. Called only for accepted creates."""
        queued = self._next_ids.popleft() if self._next_ids else None
        if isinstance(queued, str):
            return queued
        if queued is _DUPLICATE or (self.config.duplicate_job_ids and self.jobs):
            if self.jobs:
                return next(reversed(self.jobs))
            logger.warning("duplicate id asked for, but there is no job yet: issuing a fresh id")
        # Ids come from uuid, not the seeded RNG, so restarts never reuse an id a client has stored.
        return "vid_" + uuid.uuid4().hex

    def _paths_for(self, job: SimJob) -> tuple[str, str]:
        """(poll_path, content_path) as the responses show them, foreign if so configured."""
        mode = self.config.foreign_paths
        if mode == "other_job":
            other = next((job_id for job_id in reversed(self.jobs) if job_id != job.id), _NO_OTHER_JOB_ID)
            return f"{JOBS_PREFIX}/{other}", f"{JOBS_PREFIX}/{other}/content"
        if mode == "other_endpoint":
            return KEY_INFO_PATH, KEY_INFO_PATH
        if mode == "dotdot":
            # Both resolve to /key/info once the dot segments are applied.
            return f"{job.poll_path}/../../../..{KEY_INFO_PATH}", f"{job.content_path}/../../../../..{KEY_INFO_PATH}"
        if mode == "absolute":
            base = self.config.foreign_base_url.rstrip("/")
            return base + job.poll_path, base + job.content_path
        return job.poll_path, job.content_path

    def _model_at(self, path: str) -> SimModel:
        """The model whose create endpoint `path` is (only those paths are routed here)."""
        return next(model for model in self.config.models if model.create_path == path)

    def _new_job(self, job_id: str, prompt: str, seed: int | None, model_id: str = MODEL_ID) -> SimJob:
        cfg = self.config
        duration = cfg.job_seconds
        if cfg.job_seconds_max is not None:
            duration = self._rng.uniform(cfg.job_seconds, cfg.job_seconds_max)
        # Always draw (duplicates too), so the failure sequence for a given seed does not depend on
        # fail_rate or on duplicate ids.
        will_fail = self._rng.random() < cfg.fail_rate
        return SimJob(
            id=job_id,
            prompt=prompt,
            seed=seed,
            created_at=time.monotonic(),
            duration=duration,
            will_fail=will_fail,
            model=model_id,
        )

    async def _handle_status(self, request: web.Request) -> web.Response:
        self.status_requests += 1
        injected = self._take_fault("status")
        if injected is not None:
            return injected
        if self.config.status_redirect and self.config.download_redirect is not None:
            return _redirect(self.config.download_redirect.rstrip("/") + request.raw_path)
        job = self.jobs.get(request.match_info["job_id"])
        if job is None:
            return _error_response(404, "job not found")
        status = job.status
        poll_path, content_path = self._paths_for(job)
        body: dict[str, str] = {"id": job.id, "status": status, "poll_path": poll_path}
        if status == "completed":
            body["content_path"] = content_path
        return web.json_response(body)

    async def _handle_download(self, request: web.Request) -> web.StreamResponse:
        self.download_requests += 1
        injected = self._take_fault("download")
        if injected is not None:
            return injected
        job = self.jobs.get(request.match_info["job_id"])
        if job is None:
            return _error_response(404, "job not found")
        index = request.query.get("index", "0")
        if index.strip() != "0":
            return _error_response(400, "index must be 0 for this model")
        status = job.status
        if status != "completed":
            return _error_response(409, f"job is {status}, not completed")
        if self.config.download_redirect is not None:
            return _redirect(f"{self.config.download_redirect.rstrip('/')}{STORAGE_PREFIX}/{quote(job.id, safe='')}")
        return await self._serve_video(request)

    async def _handle_storage(self, request: web.Request) -> web.StreamResponse:
        # A storage host knows nothing of jobs: any id gets the video.
        return await self._serve_video(request)

    async def _serve_video(self, request: web.Request) -> web.StreamResponse:
        """The MP4, or whatever `download_body` / `download_oversize_bytes` put in its place."""
        cfg = self.config
        mode = cfg.download_body
        content_type = "video/mp4"
        blocks: Iterable[bytes] = (self._video,)
        size = len(self._video)
        if mode == "html":
            content_type, blocks, size = "text/html; charset=utf-8", (_HTML_ERROR_PAGE,), len(_HTML_ERROR_PAGE)
        elif mode == "json_error":
            error = json.dumps({"error": {"message": "video temporarily unavailable", "type": "api_error"}}).encode()
            content_type, blocks, size = "application/json; charset=utf-8", (error,), len(error)
        elif mode == "empty":
            blocks, size = (), 0
        elif mode == "truncated":
            half = self._video[: len(self._video) // 2]
            return await self._stream(request, content_type, (half,), content_length=len(self._video), cut=True)
        elif mode == "not_mp4_bytes":
            blocks, size = (self._not_mp4,), len(self._not_mp4)
        elif cfg.download_oversize_bytes is not None:
            size = cfg.download_oversize_bytes
            blocks = _oversize_blocks(self._ftyp, size)
        length = size if cfg.download_send_length else None
        return await self._stream(request, content_type, blocks, content_length=length)

    async def _stream(
        self,
        request: web.Request,
        content_type: str,
        blocks: Iterable[bytes],
        *,
        content_length: int | None,
        cut: bool = False,
    ) -> web.StreamResponse:
        """Write `blocks` in chunks (trickled if so configured), counting the bytes into a new
        `bytes_served` entry; with `cut`, close the connection instead of ending the body."""
        response = web.StreamResponse(headers={"Content-Type": content_type})
        if content_length is None:
            response.enable_chunked_encoding()
        else:
            response.content_length = content_length
        slot = len(self.bytes_served)
        self.bytes_served.append(0)
        rate = self.config.download_bytes_per_second
        # About ten writes a second when trickling.
        chunk_size = _CHUNK_BYTES if rate is None else max(1, min(_CHUNK_BYTES, int(rate / 10)))
        await response.prepare(request)
        for chunk in _chunks(blocks, chunk_size):
            if rate is not None and await self._hold(len(chunk) / rate):
                cut = True
                break
            try:
                await response.write(chunk)
            except ConnectionError:
                # Raised before anything reached the transport: the client is gone.
                logger.info("client left the download after %d bytes", self.bytes_served[slot])
                response[_CUT] = True
                return response
            except asyncio.CancelledError:
                # Cancelled while draining: the chunk was already handed to the transport.
                self.bytes_served[slot] += len(chunk)
                raise
            self.bytes_served[slot] += len(chunk)
        if cut:
            logger.info("cutting the download after %d bytes", self.bytes_served[slot])
            response[_CUT] = True
            if request.transport is not None:
                # Buffered bytes are still flushed, then the client sees the connection end early.
                request.transport.close()
        return response

    async def _handle_key_info(self, request: web.Request) -> web.Response:
        self.key_info_requests += 1
        injected = self._take_fault("key_info")
        if injected is not None:
            return injected
        if self.config.key_info_raw_body is not None:
            return web.Response(text=self.config.key_info_raw_body, content_type="application/json")
        if self.config.key_info_payload is not None:
            return web.json_response(self.config.key_info_payload)
        key = self.config.api_key
        return web.json_response(
            {
                "key": key if self.config.echo_raw_key else service_masked_key(key),
                "info": {"spend": self.spend, "max_budget": self.config.max_budget},
            }
        )


# Defined after the class it names; only read at request time, when the module is fully loaded.
_SIMULATOR_KEY: Final = web.AppKey("video_service_simulator", VideoServiceSimulator)
