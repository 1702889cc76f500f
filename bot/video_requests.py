"""What `/video` does between the interaction and the worker: check, record, create once."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from bot import guardrails
from bot.errors import (
    BudgetTooLow,
    OutcomeUnknown,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
    SubmissionFailed,
)
from bot.models import DEFAULT_MODEL, VideoModel
from bot.settings import Settings
from bot.store import Job, JobState, JobStore, NewJob
from bot.validation import check_seed, clean_prompt
from bot.video_client import VideoServiceClient

log = logging.getLogger(__name__)

#: Discord keeps an interaction token usable for 15 minutes.
INTERACTION_TOKEN_SECONDS = 15 * 60


@dataclass(frozen=True)
class VideoRequest:
    prompt: str
    seed: int | None
    user_id: int
    guild_id: int | None
    channel_id: int
    locale: str
    role_ids: Collection[int] = ()
    upload_limit_bytes: int | None = None
    interaction_token: str | None = None
    interaction_created_at: float | None = None


class VideoRequests:
    """Turns a validated request into at most one create call, with the row written first."""

    def __init__(
        self,
        store: JobStore,
        client: VideoServiceClient,
        settings: Settings,
        *,
        on_accepted: Callable[[Job], None] = lambda job: None,
        model: VideoModel = DEFAULT_MODEL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._client = client
        self._settings = settings
        self._on_accepted = on_accepted
        self.model = model
        self._clock = clock

    def validate(self, prompt: str, seed: int | None) -> tuple[str, int | None]:
        """Raises InvalidRequest for input that cannot succeed; cheap enough to run before deferring."""
        return clean_prompt(prompt), check_seed(seed, self.model)

    async def submit(self, request: VideoRequest) -> Job:
        prompt, seed = self.validate(request.prompt, request.seed)
        guardrails.check_place(self._settings, request.channel_id, request.role_ids)
        price = self.model.price_yen

        info = await self._client.key_info()
        if info.max_budget is not None and info.max_budget - info.spend < price:
            raise BudgetTooLow(info.spend, info.max_budget, price)

        now = self._clock()
        created = request.interaction_created_at
        job = await self._store.add_submission(
            NewJob(
                model=self.model.id,
                prompt=prompt,
                seed=seed,
                user_id=request.user_id,
                guild_id=request.guild_id,
                channel_id=request.channel_id,
                locale=request.locale,
                upload_limit_bytes=request.upload_limit_bytes,
                interaction_token=request.interaction_token,
                interaction_expires_at=(created + INTERACTION_TOKEN_SECONDS) if created is not None else None,
            ),
            guardrails.admission(self._settings, now, price),
        )
        return await self._create_once(job, prompt, seed)

    async def _create_once(self, job: Job, prompt: str, seed: int | None) -> Job:
        try:
            remote = await self._client.create(prompt, seed, self.model)
        except Rejected as exc:
            await self._store.transition(job.id, JobState.REJECTED, last_error=exc.reason)
            raise SubmissionFailed(job.id, "rejected", exc.reason) from exc
        except (RateLimited, ServerError, ServiceUnreachable) as exc:
            await self._store.transition(job.id, JobState.REJECTED, last_error=str(exc))
            raise SubmissionFailed(job.id, "busy", str(exc)) from exc
        except OutcomeUnknown as exc:
            await self._store.transition(job.id, JobState.UNKNOWN, last_error=str(exc))
            raise SubmissionFailed(job.id, "unknown", str(exc)) from exc
        except Exception as exc:
            # Anything else after the row was written: the request may have left, so never resend.
            await self._store.transition(job.id, JobState.UNKNOWN, last_error=type(exc).__name__)
            raise
        # Logged before the write: if the write fails, the operator can still trace the charge.
        log.info("request %s accepted as job %s (%d yen)", job.reference, remote.id, self.model.price_yen)
        accepted = await self._store.mark_accepted(
            job.id, remote.id, self.model.price_yen, next_poll_at=self._clock() + self._settings.poll_interval_seconds
        )
        self._on_accepted(accepted)
        return accepted

    async def remember_reply(self, job: Job, message_id: int) -> None:
        """The worker edits this reply as the job moves on, while the interaction token lives."""
        await self._store.update(job.id, reply_message_id=message_id)

    async def find(self, reference: str, guild_id: int | None) -> Job | None:
        return await self._store.find(reference, guild_id=guild_id)

    async def recent(self, user_id: int, guild_id: int | None, limit: int = 10) -> list[Job]:
        return await self._store.recent_jobs(user_id, guild_id, limit)

    async def ledgers(self, guild_id: int | None) -> tuple[tuple[int, int], tuple[int, int]]:
        """(videos, yen) accepted by this bot, all time and in one server."""
        everywhere = await self._store.ledger()
        here = await self._store.ledger(guild_id=guild_id) if guild_id is not None else (0, 0)
        return everywhere, here
