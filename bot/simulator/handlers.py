"""The simulated service over HTTP: the middleware (platform rate limit, API key, JSON errors) and the
handlers of create, status, download, storage and key info, which stream download bodies and honour the
configured and queued misbehaviours.

Injected faults and the per-endpoint request counters are applied around these handlers where the routes
are added (``VideoServiceSimulator``)."""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections import deque
from urllib.parse import quote

from aiohttp import web
from aiohttp.typedefs import Handler

from bot.simulator.config import SimulatorConfig
from bot.simulator.contract import MAX_PROMPT_CHARS, STORAGE_PREFIX, fixed_field_error, service_masked_key
from bot.simulator.downloads import CHUNK_BYTES, DownloadPlan, chunks
from bot.simulator.logs import log_id, logger
from bot.simulator.responses import CUT, DROPPED, error_response, redirect
from bot.simulator.state import SimulatorState


def _request_record(request: web.Request) -> tuple[str, str, dict[str, str]]:
    """A request as `requests_log` and `storage_requests_log` keep it: method, path and query, headers."""
    return request.method, request.path_qs, {str(k): v for k, v in request.headers.items()}


class ServiceHandlers(SimulatorState):
    """The request handling of the simulated service, on its state."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        super().__init__(config)
        # Times of the requests admitted within the last second (the platform rate limit).
        self._window: deque[float] = deque()
        # Set once the simulator stops: held requests wait on it. start() creates it.
        self._stopping: asyncio.Event | None = None

    # ----------------------------------------------------------------- plumbing

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(STORAGE_PREFIX + "/"):
            # Another "host": no key, no platform rate limit, its own log.
            self.storage_requests_log.append(_request_record(request))
            return await handler(request)
        self.requests_log.append(_request_record(request))
        if self._rate_limited():
            self.responses_429 += 1
            logger.info("rate limit: %s %s -> 429", request.method, request.path)
            return error_response(429, "rate limit exceeded, retry later", headers={"Retry-After": "1"})
        if not self._authorized(request):
            logger.warning("rejected %s %s: missing or invalid API key", request.method, request.path)
            return error_response(401, "missing or invalid API key")
        try:
            return await handler(request)
        except web.HTTPException as exc:
            # Router 404/405 and similar become JSON like every other response.
            headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
            return error_response(exc.status, exc.reason, headers=headers)

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
        response[DROPPED] = True
        return response

    # ----------------------------------------------------------------- handlers

    async def _handle_create(self, request: web.Request) -> web.Response:
        disruption = self._create_disruptions.popleft() if self._create_disruptions else None
        if disruption is not None and not disruption.accept:
            # Lost before the service saw it: nothing is charged.
            if disruption.kind == "drop":
                return self._drop(request)
            if await self._hold(disruption.seconds):
                return self._drop(request)
            return error_response(503, "upstream timed out")

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
            return error_response(400, "request body is not valid JSON")
        if not isinstance(payload, dict):
            return error_response(400, "request body must be a JSON object")
        model = self._model_at(request.path)
        fixed_error = fixed_field_error(payload, model.id)
        if fixed_error is not None:
            return error_response(400, fixed_error)

        prompt = payload.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return error_response(400, "prompt is required and must be a non-empty string")
        if len(prompt) > MAX_PROMPT_CHARS:
            return error_response(400, f"prompt is longer than {MAX_PROMPT_CHARS} characters")
        seed: int | None = None
        if "seed" in payload:
            raw_seed = payload["seed"]
            if not model.supports_seed:
                return error_response(400, f"{model.id} does not take a seed")
            if not isinstance(raw_seed, int) or isinstance(raw_seed, bool):
                return error_response(400, "seed must be an integer")
            seed = raw_seed

        # No await between the budget check and the charge, so concurrent creates cannot overspend.
        price = model.price_yen
        budget = self.config.max_budget
        if budget is not None and self.spend + price > budget:
            logger.info("create rejected: budget exceeded (spend %d, max %d)", self.spend, budget)
            return error_response(400, "budget exceeded")

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
            log_id(job.id),
            model.id,
            job.duration,
            ", will fail" if job.will_fail else "",
            ", duplicate id" if existing is not None else "",
            self.spend,
            budget if budget is not None else "unlimited",
        )
        if self.config.create_raw_body is not None:
            return web.Response(text=self.config.create_raw_body, content_type="application/json", status=202)
        poll_path, _ = self._paths_for(job)
        return web.json_response({"id": job.id, "status": "pending", "poll_path": poll_path}, status=202)

    async def _handle_status(self, request: web.Request) -> web.Response:
        if self.config.status_redirect and self.config.download_redirect is not None:
            return redirect(self.config.download_redirect.rstrip("/") + request.raw_path)
        job = self.jobs.get(request.match_info["job_id"])
        if job is None:
            return error_response(404, "job not found")
        status = job.status
        poll_path, content_path = self._paths_for(job)
        body: dict[str, str] = {"id": job.id, "status": status, "poll_path": poll_path}
        if status == "completed":
            body["content_path"] = content_path
        return web.json_response(body)

    async def _handle_download(self, request: web.Request) -> web.StreamResponse:
        job = self.jobs.get(request.match_info["job_id"])
        if job is None:
            return error_response(404, "job not found")
        index = request.query.get("index", "0")
        if index.strip() != "0":
            return error_response(400, "index must be 0 for this model")
        status = job.status
        if status != "completed":
            return error_response(409, f"job is {status}, not completed")
        if self.config.download_redirect is not None:
            return redirect(f"{self.config.download_redirect.rstrip('/')}{STORAGE_PREFIX}/{quote(job.id, safe='')}")
        return await self._serve_video(request)

    async def _handle_storage(self, request: web.Request) -> web.StreamResponse:
        # A storage host knows nothing of jobs: any id gets the video.
        return await self._serve_video(request)

    async def _serve_video(self, request: web.Request) -> web.StreamResponse:
        """The MP4, or whatever `download_body` / `download_oversize_bytes` put in its place."""
        return await self._stream(request, self._bodies.plan(self.config))

    async def _stream(self, request: web.Request, plan: DownloadPlan) -> web.StreamResponse:
        """Write the plan's blocks in chunks (trickled if so configured), counting the bytes into a new
        `bytes_served` entry; with `plan.cut`, close the connection instead of ending the body."""
        response = web.StreamResponse(headers={"Content-Type": plan.content_type})
        if plan.content_length is None:
            response.enable_chunked_encoding()
        else:
            response.content_length = plan.content_length
        slot = len(self.bytes_served)
        self.bytes_served.append(0)
        rate = self.config.download_bytes_per_second
        # About ten writes a second when trickling.
        chunk_size = CHUNK_BYTES if rate is None else max(1, min(CHUNK_BYTES, int(rate / 10)))
        cut = plan.cut
        await response.prepare(request)
        for chunk in chunks(plan.blocks, chunk_size):
            if rate is not None and await self._hold(len(chunk) / rate):
                cut = True
                break
            try:
                await response.write(chunk)
            except ConnectionError:
                # Raised before anything reached the transport: the client is gone.
                logger.info("client left the download after %d bytes", self.bytes_served[slot])
                response[CUT] = True
                return response
            except asyncio.CancelledError:
                # Cancelled while draining: the chunk was already handed to the transport.
                self.bytes_served[slot] += len(chunk)
                raise
            self.bytes_served[slot] += len(chunk)
        if cut:
            logger.info("cutting the download after %d bytes", self.bytes_served[slot])
            response[CUT] = True
            if request.transport is not None:
                # Buffered bytes are still flushed, then the client sees the connection end early.
                request.transport.close()
        return response

    async def _handle_key_info(self, request: web.Request) -> web.Response:
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
