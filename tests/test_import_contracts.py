"""The architecture contracts of pyproject.toml bite: an import the layers forbid fails `lint-imports`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_copy(tmp_path: Path, module: str, added: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on a copy of the package and its contracts, with `added` appended to `module`'s file (a new
    module when there is none)."""
    shutil.copytree(REPO_ROOT / "bot", tmp_path / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    source = tmp_path / (module.replace(".", "/") + ".py")
    source.write_text((source.read_text() if source.exists() else "") + f"\n{added}\n")
    # The copy first on the path: the analysis reads it, not the installed (editable) package.
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("module", ["bot.jobs.chores", "bot.jobs.worker.polling", "bot.jobs.new_module"])
def test_a_discord_import_in_the_job_code_breaks_the_contracts(tmp_path: Path, module: str) -> None:
    result = lint_copy(tmp_path, module, "import discord  # noqa: E402")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{module} -> discord" in result.stdout
    assert "discord only on Discord's side" in result.stdout
    assert re.search(r"Contracts: \d+ kept, 1 broken\.", result.stdout), result.stdout  # that one alone
