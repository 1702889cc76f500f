"""`python -m bot demo`: the whole path against local stand-ins, and a normal start that never loads them."""

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import setuptools  # type: ignore[import-untyped]

from bot.demo import launcher
from bot.demo.discord_double import HOOK_DIR, DiscordDouble, RecordedRequest
from bot.simulator import DEFAULT_VIDEO_PATH, VideoServiceSimulator

REPO_ROOT = Path(__file__).resolve().parents[2]


def bot_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DISCORD_DOUBLE_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


def test_the_demo_shows_a_video_request_from_start_to_end(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # A host's own settings, in its environment and in a .env where it runs the demo, must not reach the
    # demo's bot: with them, the key would be refused and the daily budget would refuse the video.
    (tmp_path / ".env").write_text("GUILD_DAILY_BUDGET_YEN=100\nALLOWED_CHANNEL_IDS=1\n")
    env = bot_env(DISCORD_TOKEN="the-host-real-token", VIDEO_API_KEY="sk-the-host-real-key",
                  GUILD_DAILY_BUDGET_YEN="100", REQUIRED_ROLE_ID="5")
    result = subprocess.run([sys.executable, "-m", "bot", "demo", "--out", str(out)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, encoding="utf-8", timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout
    assert "/video: acknowledged at once" in text
    assert "State: generating" in text  # a progress edit of the member's reply
    assert "bot posted in #general" in text and "[attached file video-1.mp4" in text
    assert "Cost: ¥250" in text
    assert "runs /status" in text and "Request #1" in text and "State: delivered" in text
    assert "runs /balance" in text and "Spent: ¥250" in text and "Available: ¥9,750" in text
    assert "bot closed cleanly" in text
    saved = out / "video-1.mp4"
    assert f"saved the posted video to {saved.resolve()}" in text
    assert saved.read_bytes() == DEFAULT_VIDEO_PATH.read_bytes()
    assert "the-host-real" not in text + result.stderr


async def test_a_step_that_fails_ends_the_demo_with_a_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_environment = launcher.bot_environment

    def broken(double: DiscordDouble, simulator: VideoServiceSimulator, workdir: Path) -> dict[str, str]:
        return {**real_environment(double, simulator, workdir), "LOG_LEVEL": "LOUD"}

    monkeypatch.setattr(launcher, "bot_environment", broken)
    lines: list[str] = []
    assert await launcher.run_demo(tmp_path / "out", lines.append) == 1
    err = capsys.readouterr().err
    assert "demo failed: the bot exited (status 2) while waiting for the bot to connect" in err
    assert "LOG_LEVEL" in err  # the bot's own log says why
    assert not (tmp_path / "out").exists()


# What `python -m bot` loaded, run as `-m` does (runpy). Discord's address is moved to a closed loopback
# port so `check` fails fast without the network; nothing else is patched.
_ENTRY_POINT = """
import json, runpy, sys
import discord.http
discord.http.Route.BASE = "http://127.0.0.1:1/api/v10"
sys.argv = ["bot", *sys.argv[1:]]
try:
    runpy.run_module("bot", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as exit:
    code = exit.code
hook = getattr(sys.modules.get("sitecustomize"), "__file__", None)
print(json.dumps({"code": code, "demo": sorted(m for m in sys.modules if m.startswith("bot.demo")), "hook": hook}))
"""


@pytest.mark.parametrize(("args", "code"), [(["--version"], 0), (["check"], 1)])
def test_the_normal_entry_point_never_loads_the_demo_or_the_discord_double(
    tmp_path: Path, args: list[str], code: int
) -> None:
    env = bot_env(DISCORD_TOKEN="x", VIDEO_API_KEY="sk-x", VIDEO_API_BASE_URL="http://127.0.0.1:1",
                  DATABASE_PATH=str(tmp_path / "bot.sqlite3"), VIDEO_STORAGE_DIR=str(tmp_path / "videos"),
                  HTTP_TIMEOUT_SECONDS="2")
    result = subprocess.run([sys.executable, "-c", _ENTRY_POINT, *args], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["code"] == code, result.stdout + result.stderr
    assert report["demo"] == []
    assert "discord_double" not in str(report["hook"])


def test_the_hook_folder_holds_only_sitecustomize() -> None:
    # It goes on the bot's PYTHONPATH: anything else in it would become a top-level module there.
    assert sorted(p.name for p in HOOK_DIR.iterdir() if p.name != "__pycache__") == ["sitecustomize.py"]


def test_every_package_folder_is_installed() -> None:
    find = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    # What setuptools installs from that configuration (namespace folders, such as the hook's, included by default).
    assert find.get("namespaces", True)
    listed = set(setuptools.find_namespace_packages(str(REPO_ROOT), include=find["include"]))
    folders = {
        ".".join(path.parent.relative_to(REPO_ROOT).parts)
        for path in (REPO_ROOT / "bot").rglob("*.py") if "__pycache__" not in path.parts
    }
    assert folders <= listed, f"not installed: {sorted(folders - listed)}"


@pytest.mark.parametrize("how", ["--out", "DEMO_OUTPUT_DIR"])
def test_a_folder_the_demo_cannot_save_in_is_said_at_once_in_one_line(tmp_path: Path, how: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way of the output folder")
    out = blocker / "demo-output"
    args, extra = (["--out", str(out)], {}) if how == "--out" else ([], {"DEMO_OUTPUT_DIR": str(out)})
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "bot", "demo", *args], cwd=tmp_path, env=bot_env(**extra),
                            capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 5, "said before the demo runs, not after a minute of it"
    assert (result.returncode, result.stdout) == (2, "")
    # Named as the host gave it: the option, or the variable.
    assert result.stderr == (f"python -m bot demo: {how}: {blocker} is a file, not a folder; move that file away, "
                             f"or set {how} to another path\n")


def test_a_video_that_cannot_be_saved_ends_the_demo_with_its_reason(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    demo = launcher.Demo(tmp_path, blocker / "out", lambda line: None)
    post = RecordedRequest(method="POST", path="/channels/1/messages", headers={}, json=None,
                           files=[("video-1.mp4", b"mp4")], time=0.0)
    with pytest.raises(launcher.DemoFailed, match=r"cannot save the video to .*video-1\.mp4 .*pass --out"):
        demo.save(post)
