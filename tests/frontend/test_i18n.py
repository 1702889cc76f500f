"""The message catalogue: both languages complete and consistent, amounts in each language's form."""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any, get_args

import discord
import pytest
from discord import app_commands

from bot.community.usage import Period
from bot.core.notices import InvalidCode, Notice, RefusalCode, SubmissionKind
from bot.frontend import embeds, usage_embeds
from bot.frontend.i18n import CATALOGUE, EN, JA, CatalogueTranslator, described, description, language, t, yen
from bot.store.jobs import CreditRefusal, JobState

_FORMATTER = string.Formatter()


def placeholders(text: str) -> dict[str, str]:
    """Each `{name:spec}` of a text, as name -> spec."""
    return {name: spec or "" for _, name, spec, _ in _FORMATTER.parse(text) if name is not None}


def sample(spec: str) -> object:
    return 1234 if spec else "X"


def test_both_languages_have_exactly_the_same_keys() -> None:
    assert set(CATALOGUE) == {EN, JA}
    assert sorted(CATALOGUE[EN]) == sorted(CATALOGUE[JA])


@pytest.mark.parametrize("key", sorted(CATALOGUE[EN]))
def test_each_text_has_the_same_placeholders_in_both_languages(key: str) -> None:
    english, japanese = placeholders(CATALOGUE[EN][key]), placeholders(CATALOGUE[JA][key])

    assert english == japanese
    params = {name: sample(spec) for name, spec in english.items()}
    for lang in (EN, JA):
        filled = t(lang, key, **params)
        assert filled.strip()
        assert "{" not in filled and "}" not in filled


#: Each closed set of codes, with the function that turns one of its values into a catalogue key.
CODE_SETS: dict[str, tuple[Any, Callable[[Any], str]]] = {
    "Notice": (Notice, embeds.notice_key),
    "RefusalCode": (RefusalCode, embeds.refusal_key),
    "SubmissionKind": (SubmissionKind, embeds.submission_key),
    "InvalidCode": (InvalidCode, embeds.invalid_key),
    "CreditRefusal": (CreditRefusal, usage_embeds.credit_refusal_key),
    "Period": (Period, usage_embeds.period_key),
}
CODES = [(name, code) for name, (literal, _) in CODE_SETS.items() for code in get_args(literal)]


@pytest.mark.parametrize("literal", [literal for literal, _ in CODE_SETS.values()], ids=list(CODE_SETS))
def test_each_code_set_is_a_literal_with_values(literal: Any) -> None:
    # Were one widened to `str`, get_args would be empty and the test below would check nothing.
    assert get_args(literal)
    assert all(isinstance(code, str) for code in get_args(literal))


@pytest.mark.parametrize(("code_set", "code"), CODES, ids=[f"{name}.{code}" for name, code in CODES])
def test_every_code_has_its_text_in_both_languages(code_set: str, code: str) -> None:
    key = CODE_SETS[code_set][1](code)

    assert key in CATALOGUE[EN]
    assert key in CATALOGUE[JA]


@pytest.mark.parametrize("state", list(JobState), ids=[state.value for state in JobState])
def test_every_state_has_its_name_and_next_step_in_both_languages(state: JobState) -> None:
    for key in (embeds.state_key(state), embeds.status_next_key(state)):
        assert key in CATALOGUE[EN]
        assert key in CATALOGUE[JA]
    assert embeds.state_key(state) == f"state.{state.value}"


def test_japanese_texts_never_hard_code_the_english_currency_sign() -> None:
    assert [key for key, text in CATALOGUE[JA].items() if "¥" in text] == []


@pytest.mark.parametrize(
    ("amount", "locale", "expected"),
    [
        (1250, "ja", "1,250円"),
        (1250, "en-US", "¥1,250"),
        (0, "ja", "0円"),
        (0, "en-GB", "¥0"),
        (250, discord.Locale.japanese, "250円"),
        (10_000_000, "en-US", "¥10,000,000"),
        (1250, None, "¥1,250"),
    ],
)
def test_yen(amount: int, locale: str | discord.Locale | None, expected: str) -> None:
    assert yen(amount, locale) == expected


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("ja", JA),
        ("JA", JA),
        (discord.Locale.japanese, JA),
        ("en-US", EN),
        ("fr", EN),
        (discord.Locale.french, EN),
        ("", EN),
        (None, EN),
    ],
)
def test_language(locale: str | discord.Locale | None, expected: str) -> None:
    assert language(locale) == expected


def test_t_picks_the_language_and_fills_the_parameters() -> None:
    assert t("en-US", "balance.videos_left.value", count=1234, price="¥250") == "1,234 at ¥250 each"
    assert t("ja", "balance.videos_left.value", count=1234, price="250円") == "1,234本（1本250円）"
    assert t("fr", "status.title", ref="#5") == "Request #5"


def test_descriptions_carry_the_price_in_the_locales_currency() -> None:
    assert "¥250" in description("en-US", "cmd.video", 250)
    assert "250円" in description("ja", "cmd.video", 250)
    assert description("ja", "cmd.status") == CATALOGUE[JA]["cmd.status"]


async def test_the_translator_gives_japanese_descriptions_and_leaves_other_locales_alone() -> None:
    translator = CatalogueTranslator()
    text = described("cmd.video", price_yen=250)

    async def video(interaction: discord.Interaction) -> None:
        """Never called: the context names a command, as discord.py's would."""

    command: app_commands.Command[Any, ..., None] = app_commands.Command(
        name="video", description=text, callback=video)
    context: app_commands.TranslationContextTypes = app_commands.TranslationContext(
        app_commands.TranslationContextLocation.command_description, command)

    assert text.message == description(EN, "cmd.video", 250)
    assert await translator.translate(text, discord.Locale.japanese, context) == description(JA, "cmd.video", 250)
    assert await translator.translate(text, discord.Locale.french, context) is None
    assert await translator.translate(text, discord.Locale.american_english, context) is None
    plain = app_commands.locale_str("video")
    assert await translator.translate(plain, discord.Locale.japanese, context) is None
