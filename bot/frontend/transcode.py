"""Re-encode a video so it fits an upload limit, with the ffmpeg binary that imageio-ffmpeg ships."""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import imageio_ffmpeg

from bot.core.errors import BotError

log = logging.getLogger(__name__)

AUDIO_KBPS = 96
#: Below this video bitrate 1280x720 turns to mush; 854x480 looks better at the same size.
MIN_720P_VIDEO_KBPS = 700
#: Room for the MP4 container and encoder overshoot.
SIZE_HEADROOM = 0.90
ATTEMPTS = 3

_DURATION = re.compile(r"Duration: (\d+):(\d+):(\d+(?:\.\d+)?)")


class TranscodeError(BotError):
    pass


@dataclass(frozen=True)
class VideoInfo:
    duration_seconds: float


def ffmpeg_path() -> str:
    return str(imageio_ffmpeg.get_ffmpeg_exe())


async def _run(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        ffmpeg_path(), "-hide_banner", "-nostdin", *args,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    return process.returncode or 0, stderr.decode(errors="replace")


async def probe(path: Path) -> VideoInfo:
    """Read the duration from ffmpeg's own description of the file (no ffprobe is shipped)."""
    _, text = await _run("-i", str(path))
    match = _DURATION.search(text)
    if not match:
        raise TranscodeError(f"cannot read the duration of {path.name}")
    hours, minutes, seconds = match.groups()
    return VideoInfo(duration_seconds=int(hours) * 3600 + int(minutes) * 60 + float(seconds))


def video_kbps_for(limit_bytes: int, duration_seconds: float) -> int:
    """The largest video bitrate whose file, with audio, still fits the limit."""
    total_kbps = limit_bytes * 8 * SIZE_HEADROOM / max(duration_seconds, 0.1) / 1000
    return int(total_kbps - AUDIO_KBPS)


async def fit_to_size(source: Path, destination: Path, limit_bytes: int) -> Path:
    """Write a copy of `source` no larger than `limit_bytes`; the original is left untouched."""
    info = await probe(source)
    video_kbps = video_kbps_for(limit_bytes, info.duration_seconds)
    for attempt in range(1, ATTEMPTS + 1):
        if video_kbps < 50:
            break
        scale = [] if video_kbps >= MIN_720P_VIDEO_KBPS else ["-vf", "scale=-2:480"]
        partial = destination.with_name(destination.name + ".part.mp4")
        code, text = await _run(
            "-y", "-i", str(source), *scale,
            "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p",
            "-b:v", f"{video_kbps}k", "-maxrate", f"{video_kbps}k", "-bufsize", f"{video_kbps * 2}k",
            "-c:a", "aac", "-b:a", f"{AUDIO_KBPS}k", "-movflags", "+faststart", str(partial),
        )
        if code != 0:
            partial.unlink(missing_ok=True)
            raise TranscodeError(f"ffmpeg failed with status {code}: {text.strip().splitlines()[-1:]}")
        size = partial.stat().st_size
        if size <= limit_bytes:
            partial.replace(destination)
            log.info("compressed %s to %d bytes (limit %d) at %d kb/s", source.name, size, limit_bytes, video_kbps)
            return destination
        log.info("attempt %d: %d bytes is over the limit of %d; lowering the bitrate", attempt, size, limit_bytes)
        partial.unlink(missing_ok=True)
        video_kbps = int(video_kbps * limit_bytes / size * 0.9)
    raise TranscodeError(f"cannot fit {source.name} into {limit_bytes} bytes")
