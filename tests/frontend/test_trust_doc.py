"""docs/trust.md against the code: every command, subcommand, autocomplete, button and chore the bot has is a row of
its table, and each row lists exactly the checks the trust model makes for it (bot/community/trust.py POLICY)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from discord import app_commands

from bot.community import trust
from bot.frontend.bot import VideoBot
from bot.frontend.buttons import DYNAMIC_ITEMS
from bot.jobs.chores import CHORES
from tests.frontend.test_command_schema import build_bot

PAGE = Path(__file__).resolve().parents[2] / "docs" / "trust.md"
HEADER = "| Action | Kind | Checks, in order | Requests shown |"
SHOWN = {"—": trust.Scope.NONE, "own": trust.Scope.OWN, "own; all with Manage Server": trust.Scope.OWN_OR_SERVER}

Row = tuple[trust.Kind, tuple[str, ...], trust.Scope]


def documented(text: str) -> dict[str, Row]:
    """The table's rows: action -> (kind, checks, requests shown)."""
    lines = text.splitlines()
    start = lines.index(HEADER) + 2
    rows: dict[str, Row] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        action, kind, checks, shown = (cell.strip() for cell in line.strip("|").split("|"))
        [name] = re.fullmatch(r"`([^`]+)`", action).groups()  # type: ignore[union-attr]
        assert name not in rows, f"{name} is listed twice"
        rows[name] = (trust.Kind(kind), tuple(re.findall(r"`([a-z_]+)`", checks)), SHOWN[shown])
    return rows


def declared() -> dict[str, Row]:
    return {action: (p.kind, tuple(c.value for c in p.checks), p.scope) for action, p in trust.POLICY.items()}


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[VideoBot]:
    yield await build_bot(tmp_path)


def registered(bot: VideoBot) -> dict[str, trust.Kind]:
    """Every entry point the running bot has: its app commands (as synced), their autocompletes, its buttons and
    its chores."""
    found: dict[str, trust.Kind] = {}
    for top in bot.tree.get_commands():
        commands = top.walk_commands() if isinstance(top, app_commands.Group) else [top]
        for command in commands:
            if not isinstance(command, app_commands.Command):
                continue
            found[trust.command_action(command.qualified_name)] = trust.Kind.COMMAND
            for parameter in command.parameters:
                if parameter.autocomplete:
                    found[trust.command_action(command.qualified_name, parameter.name)] = trust.Kind.AUTOCOMPLETE
    for item in DYNAMIC_ITEMS:
        assert item.ACTIONS, f"{item.__name__} names no action of the trust model"
        found.update(dict.fromkeys(item.ACTIONS, trust.Kind.BUTTON))
    found.update(dict.fromkeys(CHORES, trust.Kind.CHORE))
    return found


async def test_every_entry_point_has_a_policy_and_no_policy_is_left_over(bot: VideoBot) -> None:
    entry_points = registered(bot)
    assert entry_points == {action: policy.kind for action, policy in trust.POLICY.items()}


def test_the_table_lists_every_action_with_exactly_the_checks_the_code_makes() -> None:
    table, code = documented(PAGE.read_text(encoding="utf-8")), declared()
    assert set(table) - set(code) == set(), "rows of actions the bot does not have"
    assert set(code) - set(table) == set(), "actions the table does not list"
    for action in code:
        assert table[action] == code[action], action


def test_the_table_check_fails_on_a_missing_row_or_a_check_the_code_does_not_make() -> None:
    text = PAGE.read_text(encoding="utf-8")
    code = declared()
    without_delete = "\n".join(line for line in text.splitlines() if not line.startswith("| `Delete` |"))
    assert set(code) - set(documented(without_delete)) == {trust.DELETE}
    claiming_more = text.replace("| `/balance` | command | `in_server`, `server_listed` |",
                                 "| `/balance` | command | `in_server`, `server_listed`, `manage_server` |")
    assert documented(claiming_more)[trust.BALANCE] != code[trust.BALANCE]
