"""A local, spend-free stand-in for the text-to-video service.

It is a real aiohttp server that follows the service contract (create / status / download / key info),
so the bot can be exercised end to end in tests and in operator dry runs without paying for videos.

Clock: every job time (``SimJob.created_at``, ``in_progress_at``, ``completed_at``) is on the
``time.monotonic()`` clock. On the default asyncio event loops ``loop.time()`` reads that same clock, so
tests may compare job times with either. Job status is derived from the clock on every read, which means
no background task is needed to advance jobs.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

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

DEFAULT_VIDEO_PATH: Final = Path(__file__).resolve().parent / "assets" / "sample.mp4"

JobStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]
Endpoint: TypeAlias = Literal["create", "status", "download", "key_info"]
_ENDPOINTS: Final[frozenset[str]] = frozenset({"create", "status", "download", "key_info"})

# Marks a response that was never sent because the connection was closed on purpose.
_DROPPED: Final = "simulator_dropped"

# Length may be spelled under several names by clients; all of them must equal the fixed 8 seconds.
_LENGTH_FIELDS: Final = ("length", "duration", "seconds")
_RESOLUTION_FIELDS: Final = ("resolution", "size")


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
    price_yen: int = DEFAULT_PRICE_YEN
    # Seeds random.Random for durations and failures so runs are reproducible.
    seed: int = 0
    # The MP4 served for every completed job; None means the packaged assets/sample.mp4.
    video_path: Path | None = None
    # Platform-wide limit: more than this many requests (any endpoint) within a sliding 1 s window
    # get 429 with `Retry-After: 1`. None disables it.
    rate_limit_per_second: float | None = None
    # LiteLLM-style gateways echo the raw key in /key/info; the contract says it is masked.
    echo_raw_key: bool = False

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


@dataclass
class SimJob:
    """One accepted job. Times are `time.monotonic()` seconds; status is a function of the clock."""

    id: str
    prompt: str
    seed: int | None
    created_at: float
    duration: float
    will_fail: bool

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


def service_masked_key(key: str) -> str:
    """The key as the service's /key/info shows it, like ``sk-...abcd``: never more than a quarter
    (and at most 4 chars) of the key.

    This imitates the service's own masked format. It is not the bot's masking
    (``bot.video_client.mask_key``), which the bot uses for its own logs and messages."""
    visible = min(4, len(key) // 4)
    prefix = "sk-" if key.startswith("sk-") else ""
    return f"{prefix}...{key[-visible:] if visible else ''}"


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


def _fixed_field_error(payload: Mapping[str, Any]) -> str | None:
    """Message for the first field that asks for something other than the model's fixed settings."""
    for name in _LENGTH_FIELDS:
        if name in payload:
            value = payload[name]
            ok = _is_number(value, VIDEO_SECONDS) or (isinstance(value, str) and value.strip().lower() in {"8", "8s"})
            if not ok:
                return f"{name} is fixed at {VIDEO_SECONDS} seconds for {MODEL_ID}"
    for name in _RESOLUTION_FIELDS:
        if name in payload:
            value = payload[name]
            if not (isinstance(value, str) and value.replace(" ", "").lower() == VIDEO_RESOLUTION):
                return f"{name} is fixed at {VIDEO_RESOLUTION} for {MODEL_ID}"
    if "width" in payload and not _is_number(payload["width"], VIDEO_WIDTH):
        return f"width is fixed at {VIDEO_WIDTH} for {MODEL_ID}"
    if "height" in payload and not _is_number(payload["height"], VIDEO_HEIGHT):
        return f"height is fixed at {VIDEO_HEIGHT} for {MODEL_ID}"
    if "audio" in payload and payload["audio"] is not True:
        return f"audio is always included for {MODEL_ID}"
    if "model" in payload and payload["model"] != MODEL_ID:
        return f"this endpoint only serves model {MODEL_ID}"
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
        self.logger.info("%s %s -> %s (%.1f ms)", request.method, path, outcome, time * 1000)


class VideoServiceSimulator:
    """The simulated service. Build it, `await start()`, point a client at `base_url`, `await stop()`."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.config = config or SimulatorConfig()
        self.video_path = self.config.video_path or DEFAULT_VIDEO_PATH
        if not self.video_path.is_file():
            raise FileNotFoundError(f"simulator video not found: {self.video_path}")

        self.spend = 0
        self.creates_received = 0
        self.creates_accepted = 0
        self.status_requests = 0
        self.download_requests = 0
        self.key_info_requests = 0
        self.responses_429 = 0
        self.jobs: dict[str, SimJob] = {}
        # In memory only (never logged): tests use it to check that the key stays out of URLs.
        self.requests_log: list[tuple[str, str, dict[str, str]]] = []

        self._rng = random.Random(self.config.seed)
        self._faults: dict[str, deque[_Fault]] = {name: deque() for name in _ENDPOINTS}
        self._create_disruptions: deque[_CreateDisruption] = deque()
        self._window: deque[float] = deque()
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self._stopping: asyncio.Event | None = None

        self.app = web.Application(middlewares=[self._middleware])
        self.app[_SIMULATOR_KEY] = self
        self.app.router.add_post(CREATE_PATH, self._handle_create)
        self.app.router.add_get(JOBS_PREFIX + "/{job_id}", self._handle_status, allow_head=False)
        self.app.router.add_get(JOBS_PREFIX + "/{job_id}/content", self._handle_download, allow_head=False)
        self.app.router.add_get(KEY_INFO_PATH, self._handle_key_info, allow_head=False)

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

    # ----------------------------------------------------------------- plumbing

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
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
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)
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
        fixed_error = _fixed_field_error(payload)
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
            if not isinstance(raw_seed, int) or isinstance(raw_seed, bool):
                return _error_response(400, "seed must be an integer")
            seed = raw_seed

        # No await between the budget check and the charge, so concurrent creates cannot overspend.
        price = self.config.price_yen
        budget = self.config.max_budget
        if budget is not None and self.spend + price > budget:
            logger.info("create rejected: budget exceeded (spend %d, max %d)", self.spend, budget)
            return _error_response(400, "budget exceeded")

        job = self._new_job(prompt, seed)
        self.jobs[job.id] = job
        self.spend += price
        self.creates_accepted += 1
        logger.info(
            "accepted job %s (%.1f s%s); spend %d/%s yen",
            job.id,
            job.duration,
            ", will fail" if job.will_fail else "",
            self.spend,
            budget if budget is not None else "unlimited",
        )
        return web.json_response({"id": job.id, "status": "pending", "poll_path": job.poll_path}, status=202)

    def _new_job(self, prompt: str, seed: int | None) -> SimJob:
        cfg = self.config
        duration = cfg.job_seconds
        if cfg.job_seconds_max is not None:
            duration = self._rng.uniform(cfg.job_seconds, cfg.job_seconds_max)
        # Always draw, so the failure sequence for a given seed does not depend on fail_rate.
        will_fail = self._rng.random() < cfg.fail_rate
        # Ids come from uuid, not the seeded RNG, so restarts never reuse an id a client has stored.
        return SimJob(
            id="vid_" + uuid.uuid4().hex,
            prompt=prompt,
            seed=seed,
            created_at=time.monotonic(),
            duration=duration,
            will_fail=will_fail,
        )

    async def _handle_status(self, request: web.Request) -> web.Response:
        self.status_requests += 1
        injected = self._take_fault("status")
        if injected is not None:
            return injected
        job = self.jobs.get(request.match_info["job_id"])
        if job is None:
            return _error_response(404, "job not found")
        status = job.status
        body: dict[str, str] = {"id": job.id, "status": status, "poll_path": job.poll_path}
        if status == "completed":
            body["content_path"] = job.content_path
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
        return web.FileResponse(self.video_path, headers={"Content-Type": "video/mp4"})

    async def _handle_key_info(self, request: web.Request) -> web.Response:
        self.key_info_requests += 1
        injected = self._take_fault("key_info")
        if injected is not None:
            return injected
        key = self.config.api_key
        return web.json_response(
            {
                "key": key if self.config.echo_raw_key else service_masked_key(key),
                "info": {"spend": self.spend, "max_budget": self.config.max_budget},
            }
        )


# Defined after the class it names; only read at request time, when the module is fully loaded.
_SIMULATOR_KEY: Final = web.AppKey("video_service_simulator", VideoServiceSimulator)
