"""The package as `pip install .` builds it (the README's and the Dockerfile's install step), and the lock files."""

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    # Built from a copy: setuptools builds in the source tree's build/, which another test worker may be using.
    source = tmp_path_factory.mktemp("source") / "project"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", "mutants", ".mypy_cache", ".ruff_cache", "demo-output"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(source)],
        check=True, timeout=300,
    )
    return target


def run_installed(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Only the installed copy is importable: cwd is elsewhere and PYTHONPATH names just the target.
    return subprocess.run([sys.executable, *args], cwd=cwd, env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)


def test_the_install_ships_the_code_and_the_sample_video(installed: Path) -> None:
    assert (installed / "bot" / "__main__.py").exists()
    assert (installed / "bot" / "frontend" / "cogs" / "video.py").exists()
    assert not (installed / "cogs").exists(), "no generic top-level `cogs` package to collide with"
    sample = installed / "bot" / "simulator" / "assets" / "sample.mp4"
    assert sample.stat().st_size > 10_000
    assert not (installed / "tests").exists()


def test_the_installed_entry_point_runs(installed: Path, tmp_path: Path) -> None:
    result = run_installed(installed, "-m", "bot", "check", cwd=tmp_path)
    assert result.returncode == 2 and "DISCORD_TOKEN is required" in result.stderr


def test_the_healthcheck_follows_the_heartbeat(installed: Path, tmp_path: Path) -> None:
    beat = tmp_path / "heartbeat"
    assert run_installed(installed, "-m", "bot.ops.health", str(beat), cwd=tmp_path).returncode == 1
    beat.write_text("1\n")
    assert run_installed(installed, "-m", "bot.ops.health", str(beat), "120", cwd=tmp_path).returncode == 0
    stale = time.time() - 600
    os.utime(beat, (stale, stale))
    result = run_installed(installed, "-m", "bot.ops.health", str(beat), "120", cwd=tmp_path)
    assert result.returncode == 1 and "unhealthy" in result.stderr


# --- the lock files ----------------------------------------------------------------------------------------

LOCKS = {"requirements.lock": [], "requirements-dev.lock": ["dev"]}  # lock file -> extras it covers


@dataclass(frozen=True)
class Pin:
    version: Version
    hashes: tuple[str, ...]


def read_lock(name: str) -> dict[str, Pin]:
    """`name==version [; marker]` followed by its `--hash=` lines, as uv and pip-compile write them."""
    pins: dict[str, Pin] = {}
    current: str | None = None
    for line in (REPO_ROOT / name).read_text().splitlines():
        if match := re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line):
            current = canonicalize_name(match.group(1))
            assert current not in pins, f"{name}: {current} pinned twice"
            pins[current] = Pin(Version(match.group(2)), ())
        elif current and (hashed := re.match(r"\s+--hash=(sha256:[0-9a-f]{64})", line)):
            pins[current] = Pin(pins[current].version, (*pins[current].hashes, hashed.group(1)))
        elif line.strip() and not line.lstrip().startswith("#"):
            raise AssertionError(f"{name}: unexpected line {line!r}")
    return pins


@pytest.mark.parametrize("lock", list(LOCKS))
def test_each_lock_pins_every_package_with_hashes_and_says_how_to_regenerate_it(lock: str) -> None:
    header = (REPO_ROOT / lock).read_text().splitlines()[:2]
    assert header[1].strip() == "#    scripts/lock.sh", header
    pins = read_lock(lock)
    assert pins and all(pin.hashes for pin in pins.values()), "pip --require-hashes refuses a pin without a hash"


@pytest.mark.parametrize("lock", list(LOCKS))
def test_each_lock_satisfies_pyproject(lock: str) -> None:
    # A dependency added to or tightened in pyproject.toml without `scripts/lock.sh` fails here.
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(line) for line in project["dependencies"]]
    for extra in LOCKS[lock]:
        wanted += [Requirement(line) for line in project["optional-dependencies"][extra]]
    pins = read_lock(lock)
    for requirement in wanted:
        if requirement.marker and not requirement.marker.evaluate():
            continue
        pin = pins.get(canonicalize_name(requirement.name))
        assert pin, f"{lock} lacks {requirement.name}: run scripts/lock.sh"
        assert requirement.specifier.contains(pin.version, prereleases=True), (
            f"{lock} pins {requirement.name}=={pin.version}, pyproject.toml asks {requirement}: run scripts/lock.sh")


def test_the_locks_agree_on_every_package_they_share() -> None:
    runtime, dev = read_lock("requirements.lock"), read_lock("requirements-dev.lock")
    assert set(runtime) <= set(dev), "the dev lock installs everything the bot runs with"
    assert {name: runtime[name].version for name in runtime} == {name: dev[name].version for name in runtime}


def test_ci_runs_the_readmes_test_command_and_installs_from_the_locks() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv && ")]
    assert len(commands) == 2, commands
    install, test = commands
    assert "--require-hashes -r requirements.lock && .venv/bin/pip install --no-deps . &&" in install
    assert "--require-hashes -r requirements-dev.lock && .venv/bin/pip install --no-deps -e . &&" in test
    assert test in (REPO_ROOT / ".ci" / "run").read_text().splitlines()


def test_the_install_declares_the_licence_and_ships_its_text(installed: Path) -> None:
    (dist_info,) = installed.glob("video_request_bot-*.dist-info")
    metadata = (dist_info / "METADATA").read_text()
    assert "License-Expression: MIT" in metadata.splitlines()
    assert "Copyright (c) 2026 the video-request-bot authors" in (dist_info / "licenses" / "LICENSE").read_text()
