"""Fitting a video under an upload limit with the bundled ffmpeg."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
from pathlib import Path

import pytest

from bot.frontend import transcode
from bot.simulator.app import DEFAULT_VIDEO_PATH
from tests.jobs.worker_helpers import decode_errors


@pytest.fixture(scope="module")
def big_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 s of 1280x720 with audio at a high bitrate (about 3 MB), like a real generated video."""
    path = tmp_path_factory.mktemp("clips") / "big.mp4"
    subprocess.run(
        [
            transcode.ffmpeg_path(), "-v", "error", "-nostdin", "-y",
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=24:duration=8",
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8",
            "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M",
            "-c:a", "aac", "-b:a", "128k", "-t", "8", str(path),
        ],
        check=True,
        timeout=60,
    )
    return path


async def stream_info(path: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        transcode.ffmpeg_path(), "-hide_banner", "-nostdin", "-i", str(path),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    return stderr.decode(errors="replace")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_probe_reads_the_duration(big_clip: Path) -> None:
    assert (await transcode.probe(DEFAULT_VIDEO_PATH)).duration_seconds == pytest.approx(8.0, abs=0.05)
    assert (await transcode.probe(big_clip)).duration_seconds == pytest.approx(8.0, abs=0.05)


async def test_probe_refuses_what_is_not_a_video(tmp_path: Path) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("not a video")
    with pytest.raises(transcode.TranscodeError):
        await transcode.probe(text)


@pytest.mark.parametrize("limit", [10 * 1024 * 1024, 8 * 1024 * 1024, 1_000_000, 200_000])
def test_bitrate_leaves_room_for_audio_and_the_container(limit: int) -> None:
    kbps = transcode.video_kbps_for(limit, 8.0)
    expected_bytes = (kbps + transcode.AUDIO_KBPS) * 1000 / 8 * 8.0
    assert 0 < expected_bytes <= limit * transcode.SIZE_HEADROOM
    assert transcode.video_kbps_for(limit, 16.0) < kbps


async def test_fit_keeps_720p_when_the_bitrate_allows(big_clip: Path, tmp_path: Path) -> None:
    limit = 1_500_000
    before = digest(big_clip)
    assert big_clip.stat().st_size > limit
    destination = tmp_path / "fit.mp4"

    result = await transcode.fit_to_size(big_clip, destination, limit)

    assert result == destination
    assert destination.stat().st_size <= limit
    assert await decode_errors(destination) == (0, "")
    assert (await transcode.probe(destination)).duration_seconds == pytest.approx(8.0, abs=0.2)
    info = await stream_info(destination)
    assert "1280x720" in info and "Audio: aac" in info
    assert digest(big_clip) == before, "the original is left untouched"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.mp4"]


async def test_fit_drops_to_480p_when_the_bitrate_is_low(big_clip: Path, tmp_path: Path) -> None:
    limit = 400_000
    destination = tmp_path / "small.mp4"

    await transcode.fit_to_size(big_clip, destination, limit)

    assert destination.stat().st_size <= limit
    assert await decode_errors(destination) == (0, "")
    assert (await transcode.probe(destination)).duration_seconds == pytest.approx(8.0, abs=0.2)
    assert "854x480" in await stream_info(destination)


async def test_impossible_limit_raises_and_leaves_nothing(tmp_path: Path) -> None:
    destination = tmp_path / "never.mp4"
    with pytest.raises(transcode.TranscodeError, match="40000 bytes"):
        await transcode.fit_to_size(DEFAULT_VIDEO_PATH, destination, 40_000)
    assert list(tmp_path.iterdir()) == []
