"""Fitting the usage report's lines into Discord's limits."""

from __future__ import annotations

from bot.frontend.usage_embeds import fit_lines


def more(count: int) -> str:
    return f"+{count}"


def test_lines_that_fit_are_all_kept() -> None:
    lines = ["aaaa", "bbbb", "cccc"]
    assert fit_lines(lines, 14, more) == "aaaa\nbbbb\ncccc"  # exactly the limit


def test_whole_lines_then_the_count_of_the_rest() -> None:
    lines = ["aaaa", "bbbb", "cccc", "dddd"]
    assert fit_lines(lines, 13, more) == "aaaa\nbbbb\n+2"
    assert fit_lines(lines, 12, more) == "aaaa\nbbbb\n+2"
    assert fit_lines(lines, 11, more) == "aaaa\n+3"


def test_with_no_room_for_a_line_only_the_count_is_left() -> None:
    assert fit_lines(["a" * 50, "b"], 10, more) == "+2"
    assert fit_lines([], 10, more) == ""
