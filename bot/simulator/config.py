"""The simulator's settings: ``SimulatorConfig`` (behaviour and misbehaviour knobs, validated) and
``SimModel`` (the models it serves).

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
Create answer:
  ``create_raw_body``: an accepted create (charged, its job made as usual) answers 202 with this raw text,
  labelled application/json, instead of its JSON record (``{broken``, ``null``, ``""``): a 202 whose body the
  client cannot read.
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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, get_args

from bot.simulator.contract import (
    CREATE_PATH,
    DEFAULT_PRICE_YEN,
    JOBS_PREFIX,
    KEY_INFO_PATH,
    MODEL_ID,
    STORAGE_PREFIX,
)

# An address nothing listens on (port 9, discard), for paths that point to another host.
DEFAULT_FOREIGN_BASE_URL: Final = "http://127.0.0.2:9"

DEFAULT_VIDEO_PATH: Final = Path(__file__).resolve().parent / "assets" / "sample.mp4"

ForeignPaths: TypeAlias = Literal["other_job", "other_endpoint", "dotdot", "absolute"]
DownloadBody: TypeAlias = Literal["html", "json_error", "empty", "truncated", "not_mp4_bytes"]
FOREIGN_PATHS: Final[tuple[str, ...]] = get_args(ForeignPaths)
DOWNLOAD_BODIES: Final[tuple[str, ...]] = get_args(DownloadBody)


@dataclass(frozen=True)
class SimModel:
    """One model the simulated service serves: its own create endpoint and flat price."""

    id: str
    create_path: str
    price_yen: int
    supports_seed: bool = True


#: Paths a model's create endpoint must not take: the shared endpoints.
_SHARED_PREFIXES: Final = (JOBS_PREFIX, KEY_INFO_PATH, STORAGE_PREFIX)


def _is_http_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))


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
    # Raw text an accepted create answers (HTTP 202, application/json) instead of its record; still charged.
    create_raw_body: str | None = None
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
        if not _is_http_url(self.foreign_base_url):
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
        if self.download_redirect is not None and not _is_http_url(self.download_redirect):
            raise ValueError("download_redirect must be an absolute http(s) URL")
        if self.status_redirect and self.download_redirect is None:
            raise ValueError("status_redirect needs download_redirect (the base it redirects to)")

