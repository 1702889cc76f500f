"""What the simulated service knows: its jobs, what it charged, its counters, the one-shot misbehaviours
queued for the next requests, and how an accepted create gets its id, job and paths.

Counters stay true under every misbehaviour: ``spend``, ``creates_accepted`` and ``accepted_job_ids``
count what was charged; ``bytes_served`` holds, per download body (``/storage`` included), the bytes
handed to the socket, an upper bound on what the client received (so a test can prove a client
stopped early).
"""

from __future__ import annotations

import random
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Final, Literal

from bot.simulator.config import DEFAULT_VIDEO_PATH, SimModel, SimulatorConfig
from bot.simulator.contract import ENDPOINTS, JOBS_PREFIX, KEY_INFO_PATH, MODEL_ID
from bot.simulator.downloads import VideoBodies
from bot.simulator.jobs import SimJob
from bot.simulator.logs import logger

# Ids that `other_job` paths use while there is no other job: never issued by the simulator.
_NO_OTHER_JOB_ID: Final = "vid_" + "0" * 32


@dataclass(frozen=True)
class Fault:
    """An injected HTTP error, queued for the next request to one endpoint."""

    status: int
    retry_after: float | None
    body: dict[str, Any] | None


@dataclass(frozen=True)
class CreateDisruption:
    """A create whose response is held back (`hang`) or whose connection is closed (`drop`)."""

    kind: Literal["hang", "drop"]
    accept: bool
    seconds: float = 0.0


@dataclass(frozen=True)
class DuplicateId:
    """Queued in place of a forced id: reuse the most recent job's id."""


DUPLICATE: Final = DuplicateId()


class SimulatorState:
    """The service's state and its job bookkeeping; `VideoServiceSimulator` serves it over HTTP."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.config = config or SimulatorConfig()
        self.video_path = self.config.video_path or DEFAULT_VIDEO_PATH
        if not self.video_path.is_file():
            raise FileNotFoundError(f"simulator video not found: {self.video_path}")
        # Read once: downloads are streamed from memory so every byte written can be counted.
        self._bodies = VideoBodies(self.video_path.read_bytes())

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
        self._faults: dict[str, deque[Fault]] = {name: deque() for name in ENDPOINTS}
        self._create_disruptions: deque[CreateDisruption] = deque()
        self._next_ids: deque[str | DuplicateId] = deque(self.config.forced_job_ids)

    def _next_job_id(self) -> str:
        """A fresh id, unless a forced or duplicate id is due. Called only for accepted creates."""
        queued = self._next_ids.popleft() if self._next_ids else None
        if isinstance(queued, str):
            return queued
        if queued is DUPLICATE or (self.config.duplicate_job_ids and self.jobs):
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
