"""What the service contract fixes: the model's settings and price, the endpoint paths, the rules a create
request's fixed fields must meet, and the key as /key/info shows it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias, get_args

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
# Unauthenticated, like a storage host that a download may be redirected to.
STORAGE_PREFIX: Final = "/storage"

Endpoint: TypeAlias = Literal["create", "status", "download", "key_info"]
ENDPOINTS: Final[frozenset[str]] = frozenset(get_args(Endpoint))

# Length may be spelled under several names by clients; all of them must equal the fixed 8 seconds.
_LENGTH_FIELDS: Final = ("length", "duration", "seconds")
_RESOLUTION_FIELDS: Final = ("resolution", "size")


def _is_number(value: object, target: int) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == target


def fixed_field_error(payload: Mapping[str, Any], model_id: str = MODEL_ID) -> str | None:
    """Message for the first field that asks for something other than the model's fixed settings."""
    for name in _LENGTH_FIELDS:
        if name in payload:
            value = payload[name]
            ok = _is_number(value, VIDEO_SECONDS) or (isinstance(value, str) and value.strip().lower() in {"8", "8s"})
            if not ok:
                return f"{name} is fixed at {VIDEO_SECONDS} seconds for {model_id}"
    for name in _RESOLUTION_FIELDS:
        if name in payload:
            value = payload[name]
            if not (isinstance(value, str) and value.replace(" ", "").lower() == VIDEO_RESOLUTION):
                return f"{name} is fixed at {VIDEO_RESOLUTION} for {model_id}"
    if "width" in payload and not _is_number(payload["width"], VIDEO_WIDTH):
        return f"width is fixed at {VIDEO_WIDTH} for {model_id}"
    if "height" in payload and not _is_number(payload["height"], VIDEO_HEIGHT):
        return f"height is fixed at {VIDEO_HEIGHT} for {model_id}"
    if "audio" in payload and payload["audio"] is not True:
        return f"audio is always included for {model_id}"
    if "model" in payload and payload["model"] != model_id:
        return f"this endpoint only serves model {model_id}"
    return None


def service_masked_key(key: str) -> str:
    """The key as the service's /key/info shows it, like ``sk-...abcd``: never more than a quarter
    (and at most 4 chars) of the key.

    This imitates the service's own masked format. It is not the bot's masking
    (``bot.service.transport.mask_key``), which the bot uses for its own logs and messages."""
    visible = min(4, len(key) // 4)
    prefix = "sk-" if key.startswith("sk-") else ""
    return f"{prefix}...{key[-visible:] if visible else ''}"
