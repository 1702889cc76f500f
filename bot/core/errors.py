"""The bot's own errors. Their text is safe to log: it never holds the API key."""

from __future__ import annotations

from typing import Literal

from bot.core.notices import InvalidCode, SubmissionKind

#: Why a model cannot be used: not in the catalogue, not allowed by the server, or none allowed at all.
ModelProblem = Literal["unknown", "not_allowed", "none_allowed"]


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


class ModelUnavailable(BotError):
    """The model asked for cannot be used here; raised before anything is recorded or spent.

    `offered` lists what may be used instead, as (name, price in yen), for the reply.
    """

    def __init__(self, problem: ModelProblem, model_id: str, *, offered: tuple[tuple[str, int], ...] = ()) -> None:
        self.problem = problem
        self.model_id = model_id
        self.offered = offered
        super().__init__(f"model {model_id!r} {problem.replace('_', ' ')}")


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
    `not_recorded` (the database failed before the create: nothing sent, 0 yen), `stopping` (the bot began
    to stop before the create: nothing sent, 0 yen), `charged_unusable`
    (accepted and charged, but the service's job id cannot be used: failed, for support),
    `charged_unreadable` (accepted and charged, but the answer could not be read: failed, for support, with
    `at`) or `charged_unrecorded` (accepted and charged, the database failed; the bot keeps trying to record it).
    """

    def __init__(
        self, job_id: int, kind: SubmissionKind, reason: str, *, price_yen: int, service_job_id: str | None = None,
        at: float | None = None,
    ) -> None:
        self.job_id = job_id
        self.price_yen = price_yen  # of the model asked for: what a charge would have been
        self.kind = kind
        self.reason = reason
        self.service_job_id = service_job_id
        self.at = at  # unix time of the service's answer, where support needs it to find a charge with no job id
        super().__init__(f"request #{job_id} {kind}: {reason}")

    @property
    def final(self) -> bool:
        """Is this the request's last word? A charged but unrecorded job goes on once it is recorded."""
        return self.kind != "charged_unrecorded"


class UnusableJobId(VideoServiceError):
    """The service accepted a job (HTTP 202, so it is charged) but gave an id the bot will not put in a URL.

    The caller records the charge, fails the job and tells the requester, with `shown` for support; it never
    polls. `shown` is the raw id escaped and shortened, safe to log and to show.
    """

    def __init__(self, shown: str) -> None:
        self.shown = shown
        super().__init__(f"the service gave a job id the bot cannot use: {shown}")


class AcceptedUnreadable(VideoServiceError):
    """The service accepted a create (HTTP 202, so it is charged) but its answer could not be read: no job id.

    The caller records the charge (the ledger must follow the key's spend), fails the request (there is nothing
    to poll), never resends it, and tells the requester its reference and the time, for support.
    """


class UnreadableKeyInfo(ProtocolError):
    """The key info answer has no usable spend or budget. The message names the field, never its value."""


class DownloadTooLarge(ProtocolError):
    """The video is (or announced itself as) larger than the bot accepts; reading stopped there."""

    def __init__(self, size: int, max_bytes: int, *, announced: bool) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.announced = announced
        if announced:
            text = f"the video announces {size} bytes, more than the {max_bytes} allowed"
        else:
            text = f"the video passed {max_bytes} bytes (the limit) after {size} bytes; download stopped"
        super().__init__(text)


class NotAnMp4(ProtocolError):
    """The downloaded file is not a well-formed MP4 (ISO base media) file."""


class InsufficientStorage(BotError):
    """The disk cannot hold the video: too little free space before the download, or ENOSPC/EDQUOT while writing."""

    def __init__(self, message: str, *, needed: int | None = None, free: int | None = None) -> None:
        self.needed = needed
        self.free = free
        super().__init__(message)
