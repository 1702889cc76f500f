"""What the worker's parts share: its state, the writes it makes as the holder of a job, and what each part needs
of the others (abstract here, defined in the part's own module; `JobWorker` has them all)."""

from __future__ import annotations

import abc
import asyncio
import logging
import math
import time
from collections.abc import Callable

from bot.core.errors import InsufficientStorage
from bot.core.lifecycle import JobState
from bot.core.notices import Notice
from bot.core.tasks import BackgroundTasks
from bot.jobs.durations import DurationModel
from bot.jobs.port import Deliverer
from bot.jobs.schedule import Plan, PollSchedule
from bot.jobs.worker.config import WorkerConfig
from bot.service.client import VideoServiceClient
from bot.service.pacing import Pacer
from bot.store.jobs import Job, JobStore
from bot.store.leases import Lease

#: One logger for every part: the worker's lines keep the name hosts filter them by.
log = logging.getLogger("bot.jobs.worker")


class WorkerBase(abc.ABC):
    def __init__(
        self,
        store: JobStore,
        client: VideoServiceClient,
        deliverer: Deliverer,
        config: WorkerConfig,
        *,
        clock: Callable[[], float] = time.time,
        on_cycle: Callable[[], None] = lambda: None,
        durations: DurationModel | None = None,
        pacer: Pacer | None = None,
        lease: Lease | None = None,
    ) -> None:
        """`durations`: the shared model of job durations; `pacer`: the client's, so polls wait their turn here.

        `lease`: this process's identity when several may share the database: the worker then touches only
        jobs whose lease it holds, renews them, claims those of dead processes, and paces at its share of
        the key's rate. Without one it is the database's only worker (and touches every job).
        """
        self._store = store
        self._client = client
        self._deliverer = deliverer
        self._config = config
        self._wakeup = asyncio.Event()  # set by a job accepted, a poll answered, a slot freed: the loop looks again
        self._clock = clock
        self._on_cycle = on_cycle
        self.durations = durations if durations is not None else DurationModel.for_interval(config.poll_interval)
        self._schedule = PollSchedule(self.durations, config.poll_interval)
        self._pacer = pacer
        self._ready: list[tuple[float, int, Plan]] = []  # due polls waiting for a slot or the pacer
        self._in_flight = 0
        self._rescan = True
        self._flushed_at = -math.inf
        self._paused_until = 0.0
        self._main: asyncio.Task[None] | None = None
        self._background = BackgroundTasks(log)
        self._leases_running = False
        self._finishing: set[int] = set()
        self._polling: set[int] = set()
        self._told_paths: set[int] = set()  # jobs whose ignored service paths were logged already
        self._telling: set[int] = set()  # final messages being sent right now (the sweep and a claim meet here)
        self._told_unrecorded: set[int] = set()  # final messages sent whose record the database failed
        self._lease = lease
        self._owner = lease.owner if lease is not None else None
        self._held: set[int] = set()  # the jobs whose lease this process holds, as of the last renewal
        self._held_until = -math.inf  # the last renewal vouches for them until then
        self._renewing = asyncio.Lock()

    def _mark_held(self, job: Job) -> None:
        """A job read as this process's (by owner): held, as of that read."""
        if self._lease is not None and job.lease_owner == self._owner:
            self._held.add(job.id)

    async def _transition(self, job_id: int, target: JobState, **changes: object) -> Job:
        """A state change of a job this worker works on: refused (LeaseLost) once another process holds it."""
        return await self._store.transition(job_id, target, owner=self._owner, **changes)

    async def _update(self, job_id: int, **changes: object) -> Job:
        return await self._store.update(job_id, owner=self._owner, **changes)

    # -- what the parts need of each other ------------------------------------------------------

    @abc.abstractmethod
    async def _announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> bool:
        """Tell the requester about `event` within the notice policy; False if it could not be done (telling.py)."""

    @abc.abstractmethod
    async def _deliver(self, job: Job) -> Job:
        """Post a downloaded job's video and record the post (delivery.py)."""

    @abc.abstractmethod
    async def _download(self, job: Job) -> Job:
        """Download a completed job's video (download.py)."""

    @abc.abstractmethod
    async def _download_failed(self, job: Job, **changes: object) -> Job:
        """End a job whose video could not be downloaded within the policy (download.py)."""

    @abc.abstractmethod
    async def _finalize(self, job: Job, event: Notice, *, via_interaction: bool = False) -> int:
        """Send a request's final message and record it; 1 if sent, else 0 (telling.py)."""

    @abc.abstractmethod
    async def _holds(self, job_id: int) -> bool:
        """Whether this process may touch the job now (leases.py)."""

    @abc.abstractmethod
    async def _show_progress(self, job: Job) -> None:
        """Refresh the job's receipt while its interaction lives (telling.py)."""

    @abc.abstractmethod
    def _spawn_finish(self, job: Job) -> None:
        """Download and post a finished job in a task of its own (finishing.py)."""

    @abc.abstractmethod
    async def _tell_owed(self, jobs: list[Job]) -> int:
        """Send the final messages `jobs` are owed; how many were sent (telling.py)."""

    @abc.abstractmethod
    async def _wait_for_storage(self, job: Job, exc: InsufficientStorage) -> Job:
        """Wait for disk space for a finished video, within its limits (download.py)."""
