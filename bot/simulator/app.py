"""A local, spend-free stand-in for the text-to-video service: ``VideoServiceSimulator``.

It is a real aiohttp server that follows the service contract (create / status / download / key info),
so the bot can be exercised end to end in tests and in operator dry runs without paying for videos. This
module builds the server and its routes, starts and stops it, and holds the methods a test drives it with
(injected faults, queued one-shot misbehaviours, ``reconfigure``).

The rest of the simulator lives beside it: ``contract`` (what the spec fixes), ``config`` (the settings,
and every misbehaviour documented), ``jobs`` (a job and its clock), ``state`` (jobs, spend, counters),
``handlers`` (the HTTP handlers), ``downloads`` (the download bodies), ``responses`` and ``logs``.
The names this module always offered are still importable from it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Final

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Handler
from aiohttp.web_request import BaseRequest

from bot.simulator.config import DEFAULT_FOREIGN_BASE_URL as DEFAULT_FOREIGN_BASE_URL
from bot.simulator.config import DEFAULT_VIDEO_PATH as DEFAULT_VIDEO_PATH
from bot.simulator.config import DOWNLOAD_BODIES as DOWNLOAD_BODIES
from bot.simulator.config import FOREIGN_PATHS as FOREIGN_PATHS
from bot.simulator.config import DownloadBody as DownloadBody
from bot.simulator.config import ForeignPaths as ForeignPaths
from bot.simulator.config import SimModel as SimModel
from bot.simulator.config import SimulatorConfig as SimulatorConfig
from bot.simulator.contract import CREATE_PATH as CREATE_PATH
from bot.simulator.contract import DEFAULT_PRICE_YEN as DEFAULT_PRICE_YEN
from bot.simulator.contract import ENDPOINTS
from bot.simulator.contract import JOBS_PREFIX as JOBS_PREFIX
from bot.simulator.contract import KEY_INFO_PATH as KEY_INFO_PATH
from bot.simulator.contract import MAX_PROMPT_CHARS as MAX_PROMPT_CHARS
from bot.simulator.contract import MODEL_ID as MODEL_ID
from bot.simulator.contract import STORAGE_PREFIX as STORAGE_PREFIX
from bot.simulator.contract import VIDEO_HEIGHT as VIDEO_HEIGHT
from bot.simulator.contract import VIDEO_RESOLUTION as VIDEO_RESOLUTION
from bot.simulator.contract import VIDEO_SECONDS as VIDEO_SECONDS
from bot.simulator.contract import VIDEO_WIDTH as VIDEO_WIDTH
from bot.simulator.contract import Endpoint as Endpoint
from bot.simulator.contract import service_masked_key as service_masked_key
from bot.simulator.handlers import ServiceHandlers
from bot.simulator.jobs import JobStatus as JobStatus
from bot.simulator.jobs import SimJob as SimJob
from bot.simulator.logs import access_logger as access_logger
from bot.simulator.logs import logger as logger
from bot.simulator.responses import CUT, DROPPED, error_response
from bot.simulator.state import DUPLICATE, CreateDisruption, Fault


def _format_retry_after(seconds: float) -> str:
    # Whole seconds are the common form; fractional values are kept for fast tests.
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


class _RedactingAccessLogger(AbstractAccessLogger):
    """Logs method, path and status only: the query string is dropped and the key is redacted,
    so a client that wrongly puts the key in a URL does not leak it into logs."""

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        path = request.path
        if isinstance(request, web.Request):
            sim = request.app.get(_SIMULATOR_KEY)
            if sim is not None:
                path = path.replace(sim.config.api_key, "<redacted>")
        outcome = "dropped, no response" if response.get(DROPPED) else str(response.status)
        if response.get(CUT):
            outcome += ", body cut short"
        self.logger.info("%s %s -> %s (%.1f ms)", request.method, path, outcome, time * 1000)


class VideoServiceSimulator(ServiceHandlers):
    """The simulated service. Build it, `await start()`, point a client at `base_url`, `await stop()`."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        super().__init__(config)
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None

        self.app = web.Application(middlewares=[self._middleware])
        self.app[_SIMULATOR_KEY] = self
        for model in self.config.models:
            self.app.router.add_post(model.create_path, self._endpoint("create", self._handle_create))
        self.app.router.add_get(
            JOBS_PREFIX + "/{job_id}", self._endpoint("status", self._handle_status), allow_head=False
        )
        self.app.router.add_get(
            JOBS_PREFIX + "/{job_id}/content", self._endpoint("download", self._handle_download), allow_head=False
        )
        self.app.router.add_get(KEY_INFO_PATH, self._endpoint("key_info", self._handle_key_info), allow_head=False)
        # Another "host": no counter, no injected faults.
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
        if endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {endpoint!r}")
        if not 200 <= status <= 599 or status in (204, 205, 304):
            raise ValueError(f"cannot inject HTTP {status} with a JSON body")
        if times < 1:
            raise ValueError("times must be >= 1")
        fault = Fault(status=status, retry_after=retry_after, body=body)
        self._faults[endpoint].extend([fault] * times)

    def hang_next_create(self, seconds: float = 3600, *, accept: bool = True) -> None:
        """Delay the response of the next create by `seconds` so the client times out.

        With `accept` the request is processed as usual first (a valid one is charged and gets a job),
        which is the "outcome unknown" case. Without it nothing is charged and, after the delay, the
        reply is a 503."""
        self._create_disruptions.append(CreateDisruption(kind="hang", accept=accept, seconds=seconds))

    def drop_next_create(self, *, accept: bool = True) -> None:
        """Close the connection of the next create without any response (client: ServerDisconnected).

        With `accept` the request is processed (and a valid one charged) before the drop."""
        self._create_disruptions.append(CreateDisruption(kind="drop", accept=accept))

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
        self._next_ids.extend([DUPLICATE] * times)

    def reconfigure(self, **changes: Any) -> None:
        """Change `SimulatorConfig` fields on a running simulator, validated like a new config.

        Every field is read at request time except `seed`, `video_path` and `forced_job_ids`, which
        only take effect when the simulator is built (use `force_next_job_ids` instead)."""
        fixed = sorted({"seed", "video_path", "forced_job_ids", "extra_models"} & changes.keys())
        if fixed:
            raise ValueError(f"cannot change {', '.join(fixed)} on a built simulator")
        self.config = dataclasses.replace(self.config, **changes)

    def _endpoint(self, endpoint: Endpoint, handler: Handler) -> Handler:
        """`handler` behind what every service endpoint does first: count the request, then answer
        it with the next injected fault for `endpoint` if one is queued."""

        async def handle(request: web.Request) -> web.StreamResponse:
            self._count(endpoint)
            injected = self._take_fault(endpoint)
            if injected is not None:
                return injected
            return await handler(request)

        return handle

    def _count(self, endpoint: Endpoint) -> None:
        if endpoint == "create":
            self.creates_received += 1
        elif endpoint == "status":
            self.status_requests += 1
        elif endpoint == "download":
            self.download_requests += 1
        else:
            self.key_info_requests += 1

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
        return error_response(fault.status, f"injected HTTP {fault.status}", headers=headers)


# Defined after the class it names; only read at request time, when the module is fully loaded.
_SIMULATOR_KEY: Final = web.AppKey("video_service_simulator", VideoServiceSimulator)
