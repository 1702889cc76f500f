"""`python -m bot demo`: the bot against local stand-ins for Discord and the video service."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bot.cli.preflight import folder_problem

#: The demo's video goes here unless --out says otherwise; the Docker image points it into its data volume.
DEFAULT_OUT_ENV = "DEMO_OUTPUT_DIR"
DEFAULT_OUT_DIR = Path("demo-output")


def default_out_dir() -> Path:
    value = os.environ.get(DEFAULT_OUT_ENV, "").strip()
    return Path(value) if value else DEFAULT_OUT_DIR


def demo(out: Path | None) -> int:
    """The demo, saving its video in `out` (--out), else where DEMO_OUTPUT_DIR says, else ./demo-output."""
    out_dir = out or default_out_dir()
    # Named as the host gave it: the option, or the variable (the image sets it).
    setting = DEFAULT_OUT_ENV if out is None and os.environ.get(DEFAULT_OUT_ENV, "").strip() else "--out"
    # Before a minute of demo: a folder the video cannot be saved in is said at once, in one line.
    problem = folder_problem(setting, out_dir)
    if problem is not None:
        print(f"python -m bot demo: {problem}", file=sys.stderr)
        return 2
    # Imported here only: the normal start-up never loads the demo or its Discord stand-in.
    from bot.demo.launcher import main as demo_main

    return demo_main(out_dir)
