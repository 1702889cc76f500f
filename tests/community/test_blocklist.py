"""Blocklist terms: substrings and `*`, case- and width-blind, never regular expressions."""

import pytest

from bot.community.blocklist import MAX_TERM_CHARS, blocked_term, clean_term
from bot.core.errors import InvalidRequest


@pytest.mark.parametrize(("prompt", "term", "hit"), [
    ("a red fox", "fox", True),
    ("a red FOX", "fox", True),
    ("a red ＦＯＸ", "fox", True),  # full-width letters
    ("ｶﾞﾝﾀﾞﾑ the robot", "ガンダム", True),  # half-width katakana
    ("dragon breathing fire", "dragon*fire", True),
    ("fire then dragon", "dragon*fire", False),  # the pieces in order
    ("a fax", "f*x", True),
    ("a box", "f*x", False),
    ("(a+b)", "(a+b)", True),  # regex characters are plain text
    ("aaaa", "a.*", False),
])
def test_matching(prompt: str, term: str, hit: bool) -> None:
    assert (blocked_term(prompt, [clean_term(term)]) is not None) is hit


def test_terms_are_stored_normalized_and_empty_ones_refused() -> None:
    assert clean_term("  ＦＯＸ**Ｔａｉｌ ") == "fox*tail"
    for bad in ("*", " ** ", ""):
        with pytest.raises(InvalidRequest):
            clean_term(bad)
    with pytest.raises(InvalidRequest):
        clean_term("x" * (MAX_TERM_CHARS + 1))


def test_invisible_characters_and_extra_spaces_do_not_dodge_a_term() -> None:
    term = clean_term("dragon fire")
    assert blocked_term("a dra\u200bgon   fire", [term]) is not None
    assert blocked_term("a dragon\u2060 fire", [term]) is not None
