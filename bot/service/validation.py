"""Checks made before any money is spent."""

from __future__ import annotations

import unicodedata

from bot.core.errors import InvalidRequest
from bot.service.catalogue import VideoModel

MAX_PROMPT_CHARS = 2000
# The service shows no seed range; an unsigned 32-bit integer is what video models accept in practice,
# and it fits Discord's integer option range.
MIN_SEED = 0
MAX_SEED = 2**32 - 1


#: Code points Unicode says to ignore when shown (Default_Ignorable_Code_Point) that are not control or format
#: characters: the grapheme joiner, Hangul fillers, Khmer inherent vowels, variation selectors.
_IGNORABLE = frozenset({0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810),
                        *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)})


def invisible(char: str) -> bool:
    """Shows nothing and is not whitespace: a control character (U+0001), a format one (a zero-width space) or
    another that is ignored when shown (U+034F). The prompt check and the blocklist both read it."""
    return unicodedata.category(char) in ("Cc", "Cf") or ord(char) in _IGNORABLE


def clean_prompt(prompt: str) -> str:
    """Strip the prompt and check that it shows something and is not too long; raises InvalidRequest."""
    cleaned = prompt.strip()
    if all(char.isspace() or invisible(char) for char in cleaned):
        raise InvalidRequest("prompt_empty", "the prompt is empty")
    if len(cleaned) > MAX_PROMPT_CHARS:
        raise InvalidRequest(
            "prompt_too_long",
            f"the prompt has {len(cleaned)} characters; the limit is {MAX_PROMPT_CHARS}",
            length=len(cleaned),
            limit=MAX_PROMPT_CHARS,
        )
    return cleaned


def check_seed(seed: object, model: VideoModel) -> int | None:
    """Return the seed if the model takes it and it is in range; raises InvalidRequest."""
    if seed is None:
        return None
    if not model.supports_seed:
        raise InvalidRequest("seed_unsupported", f"the model {model.id} does not take a seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidRequest("seed_range", "the seed must be a whole number", low=MIN_SEED, high=MAX_SEED)
    if not MIN_SEED <= seed <= MAX_SEED:
        raise InvalidRequest(
            "seed_range", f"the seed must be between {MIN_SEED} and {MAX_SEED}", low=MIN_SEED, high=MAX_SEED
        )
    return seed
