"""`python -m bot demo`: the bot against local stand-ins for Discord and the video service."""

from __future__ import annotations

from pathlib import Path


def demo(out_dir: Path) -> int:
    # Imported here only: the normal start-up never loads the demo or its Discord stand-in.
    from bot.demo.launcher import main as demo_main

    return demo_main(out_dir)
