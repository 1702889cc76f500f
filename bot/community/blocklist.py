"""Prompt blocklists: substrings with an optional `*` wildcard, matched after Unicode normalization.

NFKC folds full-width and half-width forms (U+FF21 and A) into one spelling, and case folding makes
the match case-blind, so a term cannot be dodged by typing it in another width or case. Terms are
never regular expressions: an admin's typo must not become a pattern that hangs the bot.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from bot.core.errors import InvalidRequest
from bot.service.validation import invisible

MAX_TERM_CHARS = 100
MAX_TERMS = 500


def normalize(text: str) -> str:
    """NFKC, case-folded, without the characters that show nothing (`validation.invisible`: zero-width spaces,
    U+0001, U+034F), whitespace runs as one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    visible = "".join(char for char in folded if char.isspace() or not invisible(char))
    return " ".join(visible.split())


def clean_term(term: str) -> str:
    """The term as stored: normalized, runs of `*` collapsed; refuses empty or wildcard-only terms."""
    normalized = normalize(term).strip()
    while "**" in normalized:
        normalized = normalized.replace("**", "*")
    if not normalized.strip("*").strip():
        raise InvalidRequest("term_empty", "a blocklist term needs some text besides `*`")
    if len(normalized) > MAX_TERM_CHARS:
        raise InvalidRequest("term_too_long", "blocklist term too long", limit=MAX_TERM_CHARS)
    return normalized


def _matches(text: str, term: str) -> bool:
    """Whether the pieces between the `*`s appear in `text` in order (a plain substring without `*`)."""
    position = 0
    for piece in term.split("*"):
        if not piece:
            continue
        found = text.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def blocked_term(prompt: str, terms: Iterable[str]) -> str | None:
    """The first stored term the prompt matches, or None. Callers never show it in a channel."""
    text = normalize(prompt)
    for term in terms:
        if _matches(text, term):
            return term
    return None
