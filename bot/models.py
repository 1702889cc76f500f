"""The catalogue of video models: a second model is one more entry, not new code."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VideoModel:
    id: str
    create_path: str
    price_yen: int
    duration_seconds: int
    resolution: str
    has_audio: bool
    supports_seed: bool


FAST_VIDEO = VideoModel(
    id="provider/video-model-2.0-fast",
    create_path="/gateway/videos/create",
    price_yen=250,
    duration_seconds=8,
    resolution="1280x720",
    has_audio=True,
    supports_seed=True,
)

MODELS: dict[str, VideoModel] = {model.id: model for model in (FAST_VIDEO,)}
DEFAULT_MODEL = FAST_VIDEO


def price_of(model_id: str) -> int:
    """The flat price of a video of `model_id`: the one place a price is read from."""
    try:
        return MODELS[model_id].price_yen
    except KeyError:
        raise ValueError(f"no model {model_id!r} in the catalogue") from None

