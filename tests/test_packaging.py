"""The package as `pip install .` builds it (the README's and the Dockerfile's install step)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(REPO_ROOT)],
        check=True, timeout=300,
    )
    return target


def run_installed(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Only the installed copy is importable: cwd is elsewhere and PYTHONPATH names just the target.
    return subprocess.run([sys.executable, *args], cwd=cwd, env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)


def test_the_install_ships_the_code_and_the_sample_video(installed: Path) -> None:
    assert (installed / "bot" / "__main__.py").exists()
    assert (installed / "bot" / "cogs" / "video.py").exists()
    assert not (installed / "cogs").exists(), "no generic top-level `cogs` package"
    sample = installed / "bot" / "simulator" / "assets" / "sample.mp4"
    assert sample.stat().st_size > 10_000
    assert not (installed / "tests").exists()


def test_the_installed_entry_point_runs(installed: Path, tmp_path: Path) -> None:
    result = run_installed(installed, "-m", "bot", "check", cwd=tmp_path)
    assert result.returncode == 2 and "DISCORD_TOKEN is required" in result.stderr


def test_the_healthcheck_follows_the_heartbeat(installed: Path, tmp_path: Path) -> None:
    beat = tmp_path / "heartbeat"
    assert run_installed(installed, "-m", "bot.health", str(beat), cwd=tmp_path).returncode == 1
    beat.write_text("1\n")
    assert run_installed(installed, "-m", "bot.health", str(beat), "120", cwd=tmp_path).returncode == 0
    stale = time.time() - 600
    os.utime(beat, (stale, stale))
    result = run_installed(installed, "-m", "bot.health", str(beat), "120", cwd=tmp_path)
    assert result.returncode == 1 and "unhealthy" in result.stderr
