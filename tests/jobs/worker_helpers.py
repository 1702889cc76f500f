"""Test doubles around the job worker: a recording Deliverer, a timing video client, job set-up helpers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from bot.core.notices import Notice
from bot.frontend import transcode
from bot.jobs.port import Delivery
from bot.service.answers import RemoteJob
from bot.service.client import VideoServiceClient
from bot.store.jobs import Job, JobState, JobStore, NewJob

PRICE_YEN = 250
REQUESTER_ID = 600_000_000_000_000_001
GUILD_ID = 800_000_000_000_000_001
CHANNEL_ID = 700_000_000_000_000_001
MODEL = "provider/video-model-2.0-fast"


@dataclass(frozen=True)
class DeliveredVideo:
    job_id: int
    state: JobState
    path: Path
    data: bytes
    at: float


@dataclass(frozen=True)
class Announcement:
    job_id: int
    event: str
    state: JobState
    service_job_id: str | None
    at: float
    via_interaction: bool = False


@dataclass(frozen=True)
class ProgressEdit:
    job_id: int
    state: JobState
    at: float
    position: int | None = None
    ready_at: float | None = None


class RecordingDeliverer:
    """A Deliverer that keeps what it is handed, with the time (on `clock`) it was handed it.

    `fail_next(n, error)` makes the next n deliveries raise `error`: an `Undeliverable` for a final
    refusal, anything else for a transient failure the worker should retry.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._failures: deque[BaseException] = deque()
        self._next_message_id = 1
        self.deliveries: list[DeliveredVideo] = []
        self.delivery_attempts: list[tuple[int, float]] = []
        self.announcements: list[Announcement] = []
        self.progress: list[ProgressEdit] = []

    def fail_next(self, times: int, error: BaseException) -> None:
        self._failures.extend([error] * times)

    async def deliver(self, job: Job, video: Path) -> Delivery:
        self.delivery_attempts.append((job.id, self._clock()))
        if self._failures:
            raise self._failures.popleft()
        data = video.read_bytes()
        self.deliveries.append(DeliveredVideo(job.id, job.state, video, data, self._clock()))
        message_id = self._next_message_id
        self._next_message_id += 1
        return Delivery(channel_id=job.channel_id, message_id=message_id)

    async def announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> None:
        self.announcements.append(
            Announcement(job.id, event, job.state, job.service_job_id, self._clock(), via_interaction)
        )

    async def show_progress(
        self, job: Job, *, position: int | None = None, ready_at: float | None = None
    ) -> None:
        self.progress.append(ProgressEdit(job.id, job.state, self._clock(), position, ready_at))

    def events_for(self, job_id: int) -> list[str]:
        return [a.event for a in self.announcements if a.job_id == job_id]

    def progress_states(self, job_id: int) -> list[JobState]:
        return [p.state for p in self.progress if p.job_id == job_id]


@dataclass(frozen=True)
class StatusCall:
    """One status request as the worker made it: when it left and came back, and what came back."""

    service_job_id: str
    started: float
    ended: float
    outcome: str


class TimedClient(VideoServiceClient):
    """The real client, noting on the monotonic clock when each status request leaves and returns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.status_calls: list[StatusCall] = []
        # Extra seconds before each status answer comes back, as over a slow network.
        self.status_latency = 0.0

    async def get_job(self, job_id: str, *, retry: bool = True) -> RemoteJob:
        started = time.monotonic()
        try:
            remote = await super().get_job(job_id, retry=retry)
        except Exception as exc:
            await self._answer_late()
            self.status_calls.append(StatusCall(job_id, started, time.monotonic(), type(exc).__name__))
            raise
        await self._answer_late()
        self.status_calls.append(StatusCall(job_id, started, time.monotonic(), remote.status))
        return remote

    async def _answer_late(self) -> None:
        if self.status_latency:
            await asyncio.sleep(self.status_latency)

    def overlapping_polls(self) -> list[tuple[StatusCall, StatusCall]]:
        """Pairs of status requests for the same job that were out at the same time."""
        by_job: dict[str, list[StatusCall]] = {}
        for call in self.status_calls:
            by_job.setdefault(call.service_job_id, []).append(call)
        pairs: list[tuple[StatusCall, StatusCall]] = []
        for calls in by_job.values():
            calls.sort(key=lambda c: c.started)
            pairs += [(a, b) for a, b in pairwise(calls) if b.started < a.ended]
        return pairs

    def starts_by_job(self) -> dict[str, list[float]]:
        starts: dict[str, list[float]] = {}
        for call in self.status_calls:
            starts.setdefault(call.service_job_id, []).append(call.started)
        return starts


class TimedRequestLog(list[tuple[str, str, dict[str, str]]]):
    """Drop-in for the simulator's `requests_log` that also notes when each request arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, entry: tuple[str, str, dict[str, str]]) -> None:
        self.times.append(time.monotonic())
        super().append(entry)

    def arrivals(self, path_prefix: str) -> list[tuple[float, str]]:
        return [(at, path) for at, (_, path, _) in zip(self.times, self, strict=True) if path.startswith(path_prefix)]


class ShiftedClock:
    """Wall-clock time plus an offset the test can move forward, as if hours went by."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def new_job(
    *,
    prompt: str = "a paper boat on a rainy street",
    seed: int | None = 7,
    user_id: int = REQUESTER_ID,
    channel_id: int = CHANNEL_ID,
    upload_limit_bytes: int | None = None,
    interaction_token: str | None = None,
    interaction_expires_at: float | None = None,
) -> NewJob:
    return NewJob(
        model=MODEL,
        prompt=prompt,
        seed=seed,
        user_id=user_id,
        guild_id=GUILD_ID,
        channel_id=channel_id,
        upload_limit_bytes=upload_limit_bytes,
        interaction_token=interaction_token,
        interaction_expires_at=interaction_expires_at,
    )


async def submit(store: JobStore, client: VideoServiceClient, new: NewJob | None = None) -> Job:
    """What the bot does for one /video: write the row, send the create, record the 202 and its charge.

    The first poll is due at once, so short test jobs do not wait a whole interval for it.
    """
    job = await store.add_submission(new or new_job())
    job = await store.transition(job.id, JobState.SUBMITTING)
    remote = await client.create(job.prompt, job.seed)
    return await store.mark_accepted(job.id, remote.id, PRICE_YEN, next_poll_at=time.time())


async def downloaded_job(store: JobStore, video: Path, new: NewJob | None = None) -> Job:
    """A job as the worker leaves it once the MP4 is on disk, ready to be delivered."""
    job = await store.add_submission(new or new_job())
    now = time.time()
    await store.transition(job.id, JobState.SUBMITTING)
    await store.mark_accepted(job.id, f"vid_{uuid.uuid4().hex}", PRICE_YEN, next_poll_at=now)
    await store.transition(job.id, JobState.COMPLETED, finished_at=now)
    return await store.transition(job.id, JobState.DOWNLOADED, file_path=str(video))


async def wait_until(condition: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        await asyncio.sleep(step)


async def wait_for_states(
    store: JobStore, job_ids: Iterable[int], states: Iterable[JobState], *, timeout: float = 10.0
) -> list[Job]:
    """Wait until every job is in one of `states`; returns the jobs as stored then."""
    wanted = set(states)
    ids = list(job_ids)

    async def reached() -> bool:
        for job_id in ids:
            if (await store.get(job_id)).state not in wanted:
                return False
        return True

    try:
        await wait_until(reached, timeout=timeout)
    except TimeoutError:
        current = {job_id: (await store.get(job_id)).state for job_id in ids}
        raise TimeoutError(f"jobs did not reach {sorted(wanted)} within {timeout} s: {current}") from None
    return [await store.get(job_id) for job_id in ids]


async def decode_errors(path: Path) -> tuple[int, str]:
    """Decode every frame with ffmpeg: (exit status, error output); (0, "") for a playable file."""
    process = await asyncio.create_subprocess_exec(
        transcode.ffmpeg_path(), "-v", "error", "-nostdin", "-i", str(path), "-f", "null", "-",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    return process.returncode if process.returncode is not None else -1, stderr.decode(errors="replace").strip()


async def wait_until_told(store: JobStore, job_id: int, state: JobState, *, timeout: float = 10.0) -> Job:
    """The job once it reached `state` and its requester got the final message."""
    await wait_for_states(store, [job_id], [state], timeout=timeout)

    async def told() -> bool:
        return (await store.get(job_id)).told_at is not None

    await wait_until(told, timeout=timeout)
    return await store.get(job_id)
