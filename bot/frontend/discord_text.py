"""Text within Discord's limits (bot/core/discord_limits.py), and text from users or the video service made safe.

Everything here is pure: strings and embeds in, strings and embeds out.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

import discord

from bot.core.discord_limits import (
    AUTHOR_NAME,
    EMBED_DESCRIPTION,
    EMBED_FIELDS,
    EMBED_TITLE,
    EMBED_TOTAL,
    FIELD_NAME,
    FIELD_VALUE,
    FOOTER_TEXT,
    MESSAGE_CONTENT,
)

# The bot's own bounds, within Discord's.
ELLIPSIS: Final = "…"
EXCERPT_CHARS: Final = 300
CODE_CHARS: Final = 100

# Every markdown character is escaped, not only paired ones: a lone `*` or backtick could otherwise pair
# with one in the surrounding catalogue text. `<` defuses mention, channel, emoji and timestamp syntax.
_MARKDOWN = re.compile(r"([\\*_~`|>#\-+\[\]<])")
# "1. " at the start of a line would become a numbered list.
_ORDERED_LIST = re.compile(r"(?m)^(\s*\d+)\.")
# A zero-width space after every `@` keeps `@everyone`, `@here`, `<@id>`, `<@!id>` and `<@&id>` from pinging.
_AT = "@\u200b"


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in an ellipsis when cut."""
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return ELLIPSIS[:max(limit, 0)]
    # A trailing backslash would escape the ellipsis or whatever the caller appends.
    return text[: limit - len(ELLIPSIS)].rstrip().rstrip("\\").rstrip() + ELLIPSIS


def _one_line(text: str) -> str:
    """Whitespace runs (newlines included) as one space, and no control characters."""
    return "".join(c for c in " ".join(text.split()) if unicodedata.category(c) != "Cc")


def _escape(text: str) -> str:
    escaped = _ORDERED_LIST.sub(r"\1\\.", _MARKDOWN.sub(r"\\\1", text))
    return escaped.replace("@", _AT)


def plain(text: str, limit: int, *, one_line: bool = True) -> str:
    """User or service text shown as plain words: no markdown, no mentions, at most `limit` characters.

    With `one_line` (the default) newlines become spaces, so the text cannot break a quote or a layout.
    """
    raw = _one_line(text) if one_line else text
    safe = _escape(raw)
    if len(safe) <= limit:
        return safe
    if limit <= len(ELLIPSIS):
        return ELLIPSIS[:max(limit, 0)]
    # Cut the raw text, not the escaped one, so no escape sequence is split: the longest prefix whose
    # escaped form leaves room for the ellipsis (escaped length grows with the prefix).
    room = limit - len(ELLIPSIS)
    low, high = 0, len(raw)
    while low < high:
        mid = (low + high + 1) // 2
        if len(_escape(raw[:mid])) <= room:
            low = mid
        else:
            high = mid - 1
    return _escape(raw[:low]).rstrip() + ELLIPSIS


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A prompt or error reason shortened for display, on one line, pinging nobody."""
    return plain(text, limit)


def inline_code(text: str, limit: int = CODE_CHARS) -> str:
    """Text for between the backticks of a catalogue text: markdown does not apply there, but a backtick
    would end the code span, and a newline would break it."""
    # Markdown escapes would show literally in code: zero-width spaces defuse mention syntax instead.
    inner = _one_line(text).replace("`", "'").replace("@", _AT).replace("<", "<\u200b")
    return shorten(inner, limit)


def code(text: str, limit: int = CODE_CHARS + 2) -> str:
    """`text` as inline code, backticks included, at most `limit` characters."""
    return f"`{inline_code(text, limit - 2) or ' '}`"


def fit_content(text: str) -> str:
    """Message content within Discord's 2,000 characters: the last line of defence."""
    return shorten(text, MESSAGE_CONTENT)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def fit_embed(embed: discord.Embed) -> discord.Embed:
    """Every part of `embed` within its own limit, and all of them within the 6,000 total, in place.

    The builders should already fit; this is the last line of defence. When the total is over, the
    description gives way first, then the longest field values, the footer, the field names, the author
    and the title.
    """
    fields = embed.fields[:EMBED_FIELDS]
    # Discord refuses empty field names and values.
    names = [shorten(_text(f.name), FIELD_NAME) or "—" for f in fields]
    values = [shorten(_text(f.value), FIELD_VALUE) or "—" for f in fields]
    inline = [bool(f.inline) for f in fields]
    # One list of every text part, in the order they give way; single parts are lists of one.
    title = [shorten(_text(embed.title), EMBED_TITLE)]
    description = [shorten(_text(embed.description), EMBED_DESCRIPTION)]
    footer = [shorten(_text(embed.footer.text), FOOTER_TEXT)]
    author = [shorten(_text(embed.author.name), AUTHOR_NAME)]
    parts = [title, description, footer, author, names, values]
    excess = sum(len(text) for part in parts for text in part) - EMBED_TOTAL
    for part, floor in ((description, 0), (values, 1), (footer, 0), (names, 1), (author, 1), (title, 0)):
        for index in sorted(range(len(part)), key=lambda i: len(part[i]), reverse=True):
            if excess <= 0:
                break
            before = len(part[index])
            part[index] = shorten(part[index], max(before - excess, floor))
            excess -= before - len(part[index])

    embed.title = title[0] or None
    embed.description = description[0] or None
    if embed.footer.text is not None:
        embed.set_footer(text=footer[0] or None, icon_url=embed.footer.icon_url)
    if embed.author.name is not None:
        embed.set_author(name=author[0], url=embed.author.url, icon_url=embed.author.icon_url)
    embed.clear_fields()
    for name, value, show_inline in zip(names, values, inline, strict=True):
        embed.add_field(name=name, value=value, inline=show_inline)
    return embed
