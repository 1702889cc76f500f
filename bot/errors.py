"""The bot's own errors. Their text is safe to log: it never holds the API key."""

from __future__ import annotations

from bot.notices import InvalidCode, SubmissionKind


class BotError(Exception):
    """Base of every error the bot raises on purpose."""


class InvalidRequest(BotError):
    """Input that cannot succeed; raised before anything is sent or spent.

    `code` names the problem for the message catalogue; `params` fill its text.
    """

    def __init__(self, code: InvalidCode, message: str, **params: object) -> None:
        self.code = code
        self.params = params
        super().__init__(message)


class VideoServiceError(BotError):
    """The video service could not do what was asked."""


class Rejected(VideoServiceError):
    """A final 4xx (not 429): the service refused the request and charged nothing."""

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"rejected by the video service (HTTP {status}): {reason}")


class RateLimited(VideoServiceError):
    """HTTP 429: the platform-wide limit was reached; nothing was charged."""

    def __init__(self, retry_after: float | None) -> None:
        self.retry_after = retry_after
        hint = f"; retry after {retry_after:g} s" if retry_after is not None else ""
        super().__init__(f"rate limited by the video service{hint}")


class ServerError(VideoServiceError):
    """HTTP 5xx: the service failed; nothing was charged."""

    def __init__(self, status: int) -> None:
        self.status = status
        super().__init__(f"the video service failed (HTTP {status})")


class ServiceUnreachable(VideoServiceError):
    """The connection failed before the request was sent, or a free request timed out."""


class OutcomeUnknown(VideoServiceError):
    """A create request left the bot and no answer came back: it may have been accepted and charged.

    Never resend it automatically.
    """


class ProtocolError(VideoServiceError):
    """The service answered with something that does not follow its contract."""


class BudgetTooLow(BotError):
    """The key cannot pay for one more video; nothing was sent."""

    def __init__(self, spend: int, max_budget: int, price_yen: int, *, job_id: int | None = None) -> None:
        self.job_id = job_id
        self.spend = spend
        self.max_budget = max_budget
        self.available = max_budget - spend
        self.price_yen = price_yen
        super().__init__(f"budget too low: {self.available} yen available, {price_yen} needed")


class SubmissionFailed(BotError):
    """A recorded request that did not become an accepted job.

    `kind` is `rejected` (the service said no, 0 yen), `busy` (rate limited or down after the retries,
    0 yen), `unknown` (the request left and no answer came back: it may have been charged),
    `not_recorded` (the database failed before the create: nothing sent, 0 yen), `charged_unusable`
    (accepted and charged, but the service's job id cannot be used: failed, for support) or
    `charged_unrecorded` (accepted and charged, the database failed; the bot keeps trying to record it).
    """

    def __init__(self, job_id: int, kind: SubmissionKind, reason: str, *, service_job_id: str | None = None) -> None:
        self.job_id = job_id
        self.kind = kind
        self.reason = reason
        self.service_job_id = service_job_id
        super().__init__(f"request #{job_id} {kind}: {reason}")

    @property
    def final(self) -> bool:
        """Is this the request's last word? A charged but unrecorded job goes on once it is recorded."""
        return self.kind != "charged_unrecorded"


class UnusableJobId(VideoServiceError):
    """A 202 whose job id is not safe to use: the request was accepted and charged, but is never polled.

    `shown` is the id escaped and shortened, for support.
    """

    def __init__(self, shown: str) -> None:
        self.shown = shown
        super().__init__(f"the service accepted the request with an unusable job id {shown}")


class InsufficientStorage(BotError):
    """No disk space to keep a finished video; the video is safe at the service for a while."""
