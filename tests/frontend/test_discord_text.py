"""Discord's limits and text made safe to show: the helpers every message builder goes through.

`assert_embed_fits`, `assert_content_fits` and `assert_defused` are shared with tests/frontend/test_embeds.py.
"""

from __future__ import annotations

import re

import discord
import pytest

from bot.frontend import discord_text as dt

SOMEONE = 987_654_321_098_765_432
ROLE = 111_222_333_444_555_666

# Discord's documented limits, written out here rather than read from the module under test.
LIMITS = {"content": 2000, "title": 256, "description": 4096, "field_name": 256, "field_value": 1024,
          "footer": 2048, "author": 256, "total": 6000, "fields": 25}

_PIECE = (f"@everyone @here <@123> <@!123> <@&456> <@{SOMEONE}> <@&{ROLE}> <#789> ```x``` ` **bold** __u__ "
          "~~s~~ ||spoiler|| \\ \n# head\n> quote\n-# small\n1. item [link](https://x.y) \r\n\u2028 ")
#: 5,000 characters of everything that must not act: mentions, markdown, backticks, newlines.
HOSTILE = (_PIECE * (5000 // len(_PIECE) + 1))[:5000]

_MENTION = re.compile(r"@everyone|@here|<@!?(\d+)>|<@&(\d+)>|<#(\d+)>")


def embed_parts(embed: discord.Embed) -> dict[str, str]:
    data = embed.to_dict()
    parts = {"title": data.get("title", ""), "description": data.get("description", ""),
             "footer": data.get("footer", {}).get("text", ""), "author": data.get("author", {}).get("name", "")}
    for index, field in enumerate(data.get("fields", [])):
        parts[f"field {index} name"] = field["name"]
        parts[f"field {index} value"] = field["value"]
    return parts


def assert_embed_fits(embed: discord.Embed) -> None:
    """Every limit Discord puts on an embed, the 6,000-character total included."""
    data = embed.to_dict()
    fields = data.get("fields", [])
    assert len(fields) <= LIMITS["fields"]
    assert len(data.get("title", "")) <= LIMITS["title"]
    assert len(data.get("description", "")) <= LIMITS["description"]
    assert len(data.get("footer", {}).get("text", "")) <= LIMITS["footer"]
    assert len(data.get("author", {}).get("name", "")) <= LIMITS["author"]
    for field in fields:
        assert 0 < len(field["name"]) <= LIMITS["field_name"], field["name"][:80]
        assert 0 < len(field["value"]) <= LIMITS["field_value"], field["value"][:80]
    total = sum(len(text) for text in embed_parts(embed).values())
    assert total <= LIMITS["total"]
    assert len(embed) == total


def assert_content_fits(text: str) -> None:
    assert 0 < len(text) <= LIMITS["content"]


def mentions(text: str) -> list[str]:
    """Everything in `text` that Discord would treat as a mention."""
    return [match.group(0) for match in _MENTION.finditer(text)]


def assert_defused(text: str, allowed: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """No mention survives in `text` except the ones the bot put there itself (`allowed`)."""
    assert "@everyone" not in text and "@here" not in text
    assert set(mentions(text)) <= allowed, set(mentions(text)) - allowed


def active(text: str, char: str) -> int:
    """How many times `char` occurs unescaped (not after an odd run of backslashes)."""
    return sum(1 for match in re.finditer(r"(\\*)" + re.escape(char), text) if len(match.group(1)) % 2 == 0)


def outside_code(text: str) -> str:
    """`text` without its inline code spans, where markdown does not apply."""
    pieces = re.split(r"(?<!\\)`", text)
    return "".join(pieces[::2])


def assert_no_markdown(text: str) -> None:
    """No markdown character acts outside code spans, and no line starts a heading, quote or list."""
    prose = outside_code(text)
    for char in "*_~|":
        assert active(prose, char) == 0, (char, prose[:200])
    for line in prose.split("\n"):
        assert not re.match(r"\s*(#|>|-|\d+\.)", line) or line.startswith("> "), line[:80]


# -- plain -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mention", ["@everyone", "@here", f"<@{SOMEONE}>", f"<@!{SOMEONE}>", f"<@&{ROLE}>",
                                     "<@123>", "<@&456>", "<#789>"])
def test_plain_defuses_every_kind_of_mention(mention: str) -> None:
    shown = dt.plain(f"hello {mention} bye", 100)

    assert mention not in shown
    assert mentions(shown) == []


def test_plain_keeps_ordinary_words_as_they_are() -> None:
    assert dt.plain("a calm lake at sunset", 100) == "a calm lake at sunset"


def test_plain_escapes_every_markdown_character_even_when_unpaired() -> None:
    assert dt.plain("**bold** _it_ ~~gone~~ `code`", 100) == r"\*\*bold\*\* \_it\_ \~\~gone\~\~ \`code\`"
    # A lone one would pair with a backtick or an asterisk in the catalogue text around it.
    assert dt.plain("a ` b * c _ d | e", 100) == r"a \` b \* c \_ d \| e"


@pytest.mark.parametrize("start", ["# big", "> quote", "-# small", "- item", "1. item", ">>> all"])
def test_plain_never_starts_a_heading_quote_or_list(start: str) -> None:
    assert_no_markdown(dt.plain(start, 100))


def test_plain_puts_everything_on_one_line() -> None:
    shown = dt.plain("one\n\ntwo\r\nthree\u2028four\tfive\x07", 100)

    assert shown == "one two three four five"


def test_plain_can_keep_the_lines() -> None:
    assert dt.plain("one\n# two", 100, one_line=False) == "one\n\\# two"


@pytest.mark.parametrize("limit", [1, 2, 3, 10, 99, 300, 1000, 1024, 4096])
@pytest.mark.parametrize(
    "text", [HOSTILE, "x" * 5000, "`" * 5000, "\\" * 5000, "@" * 5000, "word " * 1000, "*_" * 2500],
    ids=["hostile", "plain", "backticks", "backslashes", "ats", "words", "markdown"],
)
def test_plain_never_exceeds_the_limit_after_escaping(text: str, limit: int) -> None:
    shown = dt.plain(text, limit)

    assert len(shown) <= limit
    assert shown.endswith("…")
    assert_defused(shown)
    # Cut between whole escapes: no lone backslash before the ellipsis.
    assert active(shown, "…") == 1
    if limit > 1:
        assert_no_markdown(shown)


def test_plain_of_hostile_text_fits_a_field_and_keeps_most_of_it() -> None:
    shown = dt.plain(HOSTILE, 1024)

    assert 1000 <= len(shown) <= 1024
    assert "\n" not in shown


# -- excerpt (the prompt shown in messages) -------------------------------------------------------------


def test_excerpt_keeps_a_short_prompt_readable() -> None:
    assert dt.excerpt("a calm lake at sunset") == "a calm lake at sunset"


@pytest.mark.parametrize(
    ("prompt", "limit"),
    [("word " * 400, 300), ("x" * 2000, 1000), ("_" * 2000, 1000), ("@everyone " * 200, 300)],
    ids=["words", "plain", "markdown", "mentions"],
)
def test_excerpt_shortens_long_prompts_to_the_limit(prompt: str, limit: int) -> None:
    shown = dt.excerpt(prompt, limit)

    assert len(shown) <= limit
    assert shown.endswith("…")
    assert "@everyone" not in shown


def test_excerpt_defaults_to_300_characters() -> None:
    assert len(dt.excerpt(HOSTILE)) <= 300


# -- inline code ------------------------------------------------------------------------------------


def test_inline_code_cannot_be_broken_out_of() -> None:
    inner = dt.inline_code("vid_1` **gotcha** `\n<@123> @everyone", 100)

    assert "`" not in inner
    assert "\n" not in inner
    assert_defused(inner)
    assert inner.startswith("vid_1' **gotcha** '")


def test_inline_code_keeps_an_ordinary_job_id_exactly() -> None:
    assert dt.inline_code("vid_abc-123") == "vid_abc-123"
    assert dt.code("vid_abc-123") == "`vid_abc-123`"


@pytest.mark.parametrize("limit", [3, 10, 102, 1024])
def test_code_is_one_span_within_the_limit(limit: int) -> None:
    shown = dt.code(HOSTILE, limit)

    assert len(shown) <= limit
    assert shown.startswith("`") and shown.endswith("`")
    assert shown.count("`") == 2
    assert "\n" not in shown
    assert_defused(shown)


def test_inline_code_never_exceeds_the_limit() -> None:
    assert len(dt.inline_code("@" * 5000, 100)) <= 100
    assert len(dt.inline_code(HOSTILE)) <= 100


# -- last lines of defence ---------------------------------------------------------------------------


def test_fit_content_cuts_to_2000_and_leaves_short_text_alone() -> None:
    assert dt.fit_content("hello") == "hello"
    long = dt.fit_content("x" * 5000)
    assert_content_fits(long)
    assert long.endswith("…")


def oversized_embed() -> discord.Embed:
    embed = discord.Embed(title="t" * 1000, description="d" * 10_000)
    for index in range(30):
        embed.add_field(name=f"{index}" + "n" * 1000, value="v" * 5000, inline=index % 2 == 0)
    embed.set_footer(text="f" * 5000)
    embed.set_author(name="a" * 1000)
    return embed


def test_fit_embed_brings_every_part_and_the_total_within_the_limits() -> None:
    embed = dt.fit_embed(oversized_embed())

    assert_embed_fits(embed)
    assert len(embed.fields) == 25
    # Field order and inline flags survive.
    assert [field.inline for field in embed.fields] == [index % 2 == 0 for index in range(25)]


def test_fit_embed_cuts_the_description_first_when_only_the_total_is_over() -> None:
    embed = discord.Embed(title="Request", description="d" * 4000)
    for index in range(25):
        embed.add_field(name=f"field {index}", value="v" * 100)
    assert len(embed) > 6000

    fitted = dt.fit_embed(embed)

    assert_embed_fits(fitted)
    assert [str(field.value) for field in fitted.fields] == ["v" * 100] * 25
    assert [str(field.name) for field in fitted.fields] == [f"field {index}" for index in range(25)]
    assert (fitted.description or "").endswith("…")


def test_fit_embed_leaves_an_embed_that_fits_unchanged() -> None:
    embed = discord.Embed(title="Request #1", description="all fine", colour=discord.Colour.green())
    embed.add_field(name="Job", value="`vid_abc`")
    embed.add_field(name="Prompt", value="p" * 1024, inline=False)
    embed.set_footer(text="footer")
    before = embed.to_dict()

    assert dt.fit_embed(embed).to_dict() == before


def test_fit_embed_never_leaves_an_empty_field() -> None:
    embed = discord.Embed()
    embed.add_field(name="", value="")

    assert_embed_fits(dt.fit_embed(embed))
