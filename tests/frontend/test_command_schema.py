"""The slash-command schema the bot syncs to Discord, and when it syncs it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast
from unittest.mock import AsyncMock, MagicMock

import aiohttp
import discord
import pytest
from discord import app_commands

from bot.app import catalogue_of
from bot.demo.discord_double._commands import CommandSchemaError, validate_commands
from bot.frontend.bot import EXTENSIONS, VideoBot
from bot.frontend.i18n import CATALOGUE, CatalogueTranslator
from bot.store.jobs import JobStore
from tests.frontend.cogs.helpers import bot_settings

DISCORD_MAX_INTEGER = 2**53 - 1


async def build_bot(tmp_path: Path, **env: str) -> VideoBot:
    """The bot as setup_hook wires its commands, without logging in or opening the HTTP session."""
    settings = bot_settings("http://127.0.0.1:9", "sk-test-key-0123456789", tmp_path / "bot.sqlite3", **env)
    bot = VideoBot(settings, catalogue_of(settings))
    await bot.tree.set_translator(CatalogueTranslator())
    for extension in EXTENSIONS:
        await bot.load_extension(extension)
    return bot


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[VideoBot]:
    bot = await build_bot(tmp_path)
    bot.store = await JobStore.open(bot.settings.database_path)
    yield bot
    await bot.store.close()


async def payloads(bot: VideoBot) -> dict[str, dict[str, Any]]:
    """What discord.py sends to Discord for each command, with translations."""
    translator = CatalogueTranslator()
    return {
        command.name: await command.get_translated_payload(bot.tree, translator)
        for command in bot.tree.get_commands()
    }


def options(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {option["name"]: option for option in payload.get("options", [])}


# -- the schema ------------------------------------------------------------------------------------


COMMANDS = ["balance", "credit", "settings", "status", "usage", "video"]


async def test_the_commands_are_registered(bot: VideoBot) -> None:
    assert sorted(command.name for command in bot.tree.get_commands()) == COMMANDS


async def test_settings_are_offered_only_to_members_who_can_manage_the_server(bot: VideoBot) -> None:
    settings = (await payloads(bot))["settings"]
    assert settings["default_member_permissions"] == discord.Permissions(manage_guild=True).value
    assert sorted(options(settings)) == [
        "blocklist", "budget_alert", "channels", "confirm", "language", "limits", "log_channel", "member", "models",
        "reroll", "reset", "roles", "show", "timezone",
    ]
    for name, payload in (await payloads(bot)).items():
        if name not in ("settings", "credit"):
            assert payload["default_member_permissions"] is None, name


async def test_video_prompt_and_seed_options(bot: VideoBot) -> None:
    video = options((await payloads(bot))["video"])

    assert list(video) == ["prompt", "seed"]
    prompt, seed = video["prompt"], video["seed"]
    assert prompt["type"] == discord.AppCommandOptionType.string.value == 3
    assert prompt["required"] is True
    assert prompt["min_length"] == 1
    assert prompt["max_length"] == 2000
    assert seed["type"] == discord.AppCommandOptionType.integer.value == 4
    assert seed["required"] is False
    assert seed["min_value"] == 0
    assert seed["max_value"] == 4_294_967_295
    assert seed["max_value"] <= DISCORD_MAX_INTEGER


async def test_status_takes_an_optional_autocompleted_job_id_and_balance_takes_nothing(bot: VideoBot) -> None:
    every = await payloads(bot)

    job_id = options(every["status"])["job_id"]
    assert job_id["type"] == 3
    assert job_id["required"] is False
    assert job_id["autocomplete"] is True
    assert options(every["balance"]) == {}


async def test_every_command_is_a_guild_only_chat_command(bot: VideoBot) -> None:
    for name, payload in (await payloads(bot)).items():
        assert payload["type"] == discord.AppCommandType.chat_input.value, name
        assert payload["dm_permission"] is False, name
        assert payload["contexts"] == [0], name  # 0: guild only (no bot DM, no private channel)
        # 0: installed to a server only. A user install would let anyone run the commands outside every server's
        # rules (Discord's default for an application that allows both is both).
        assert payload["integration_types"] == [0], name


async def test_a_command_added_later_is_guild_only_too(bot: VideoBot) -> None:
    """The defaults are the bot's own, not each command's: one added without a decorator inherits them."""

    @discord.app_commands.command(name="later", description="a command added later")
    async def later(interaction: discord.Interaction[VideoBot]) -> None: ...

    bot.tree.add_command(later)
    payload = later.to_dict(bot.tree)
    assert (payload["contexts"], payload["integration_types"]) == ([0], [0])


async def test_the_synced_schema_passes_the_doubles_checks_of_contexts_and_install_types(bot: VideoBot) -> None:
    synced = validate_commands(list((await payloads(bot)).values()))
    assert all(command["integration_types"] == [0] for command in synced)
    bad_fields: list[dict[str, object]] = [
        {"contexts": [3]}, {"integration_types": [2]}, {"contexts": []}, {"integration_types": "0"},
        {"contexts": [0, 0]}, {"contexts": [True]},
    ]
    for bad in bad_fields:
        with pytest.raises(CommandSchemaError):
            validate_commands([{**synced[0], **bad}])


async def test_descriptions_state_the_price_and_the_wait(bot: VideoBot) -> None:
    video = (await payloads(bot))["video"]

    assert "¥250" in video["description"]
    assert "1-3 minutes" in video["description"]
    assert "250円" in video["description_localizations"]["ja"]
    assert "1〜3分" in video["description_localizations"]["ja"]
    prompt = options(video)["prompt"]
    assert "2,000 characters" in prompt["description"] and "¥250" in prompt["description"]
    assert "250円" in prompt["description_localizations"]["ja"]


async def test_every_command_and_option_has_a_japanese_description_within_discords_limit(bot: VideoBot) -> None:
    described = 0

    def walk(item: dict[str, Any]) -> None:
        nonlocal described
        described += 1
        english = item["description"]
        localized = item["description_localizations"]
        assert set(localized) == {"ja"}, item["name"]
        for text in (english, localized["ja"]):
            assert 1 <= len(text) <= 100, text
        assert localized["ja"] != english
        for choice in item.get("choices", []):
            if isinstance(choice["value"], str) and choice["name"] != choice["value"]:
                assert set(choice.get("name_localizations") or {}) == {"ja"}, choice
        for option in item.get("options", []):
            walk(option)

    for payload in (await payloads(bot)).values():
        walk(payload)
        # Names stay as typed: `/video` everywhere.
        assert not payload.get("name_localizations")
    settings_items = 1 + 14 + 6 + 1 + 2 + 2 + 1 + 1 + 2 + 2 + 2 + 1 + 1 + 1 + 1  # group, subcommands, their options
    assert described == 3 + 2 + 1 + 3 + 2 + settings_items


async def test_usage_offers_three_localized_periods_and_a_csv_switch(bot: VideoBot) -> None:
    usage = options((await payloads(bot))["usage"])

    assert list(usage) == ["period", "csv"]
    period, csv = usage["period"], usage["csv"]
    assert period["type"] == discord.AppCommandOptionType.string.value and period["required"] is False
    assert [(c["value"], c["name"], c["name_localizations"]) for c in period["choices"]] == [
        ("today", "Today", {"ja": "今日"}),
        ("this_month", "This month", {"ja": "今月"}),
        ("last_month", "Last month", {"ja": "先月"}),
    ]
    assert csv["type"] == discord.AppCommandOptionType.boolean.value and csv["required"] is False


async def test_credit_is_offered_by_default_to_manage_server_alone(bot: VideoBot) -> None:
    every = await payloads(bot)

    manage_guild = discord.Permissions(manage_guild=True).value
    assert every["credit"]["default_member_permissions"] == manage_guild
    # Everyone may ask for /usage: members see their own figures.
    assert all(every[name]["default_member_permissions"] is None for name in ("balance", "status", "usage", "video"))
    job = options(every["credit"])["job"]
    assert job["type"] == 3 and job["required"] is True


# -- the digest and the sync -------------------------------------------------------------------------


async def test_the_digest_is_stable_for_an_unchanged_tree(bot: VideoBot, tmp_path: Path) -> None:
    first = await bot.command_digest(None)

    assert await bot.command_digest(None) == first
    # A fresh process building the same commands gets the same digest.
    other = await build_bot(tmp_path / "other")
    assert await other.command_digest(None) == first
    assert len(first) == 64


async def test_the_digest_changes_when_a_description_changes(bot: VideoBot) -> None:
    before = await bot.command_digest(None)
    balance = bot.tree.get_command("balance")
    assert balance is not None

    balance.description = "Show the shared budget."

    assert await bot.command_digest(None) != before


async def test_the_digest_changes_when_a_translation_changes(bot: VideoBot, monkeypatch: pytest.MonkeyPatch) -> None:
    before = await bot.command_digest(None)

    monkeypatch.setitem(CATALOGUE["ja"], "cmd.balance", "共有予算を表示します。")

    assert await bot.command_digest(None) != before


def registered(command: app_commands.Command[Any, ..., Any] | app_commands.Group | app_commands.ContextMenu,
               command_id: int) -> app_commands.AppCommand:
    """The command as Discord answers a sync with it: with its id."""
    answer = MagicMock(spec=app_commands.AppCommand)
    answer.name, answer.id = command.name, command_id
    answer.default_member_permissions = command.default_permissions
    return cast(app_commands.AppCommand, answer)


@pytest.fixture
def sync(bot: VideoBot, monkeypatch: pytest.MonkeyPatch) -> AsyncMock:
    mock = AsyncMock(side_effect=lambda *, guild=None: [
        registered(command, 990_000_000_000_000_000 + n) for n, command in enumerate(bot.tree.get_commands(guild=guild))
    ])
    monkeypatch.setattr(bot.tree, "sync", mock)
    return mock


async def test_the_sync_tells_the_buttons_videos_id(bot: VideoBot, sync: AsyncMock, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    fetch = AsyncMock(side_effect=AssertionError("the sync's answer says it"))
    monkeypatch.setattr(bot.tree, "fetch_commands", fetch)
    await bot.sync_commands()
    names = [command.name for command in bot.tree.get_commands()]
    video = await bot.access.commands.get(None)
    assert video is not None and video.id == 990_000_000_000_000_000 + names.index("video")
    assert video.default_member_permissions is None


async def test_sync_happens_once_then_is_skipped_while_nothing_changed(bot: VideoBot, sync: AsyncMock) -> None:
    assert await bot.sync_commands() is True
    assert await bot.sync_commands() is False

    sync.assert_awaited_once_with(guild=None)
    assert await bot.store.get_meta(f"command_sync:{bot.application_id}:global") == await bot.command_digest(None)


async def test_a_forced_sync_always_syncs(bot: VideoBot, sync: AsyncMock) -> None:
    await bot.sync_commands()

    assert await bot.sync_commands(force=True) is True

    assert sync.await_count == 2


async def test_a_changed_description_is_synced_again(bot: VideoBot, sync: AsyncMock) -> None:
    await bot.sync_commands()
    status = bot.tree.get_command("status")
    assert status is not None
    status.description = "Show your video requests."

    assert await bot.sync_commands() is True

    assert sync.await_count == 2


async def test_a_failed_sync_is_tried_again_next_time(bot: VideoBot, sync: AsyncMock) -> None:
    refused = MagicMock(spec=aiohttp.ClientResponse)
    refused.status, refused.reason = 500, "Internal Server Error"
    sync.side_effect = discord.HTTPException(refused, "try later")

    with pytest.raises(discord.HTTPException):
        await bot.sync_commands()

    sync.side_effect = None
    sync.return_value = []
    assert await bot.sync_commands() is True
    assert sync.await_count == 2


async def test_a_development_server_gets_its_own_copy_and_its_own_record(tmp_path: Path) -> None:
    bot = await build_bot(tmp_path, DISCORD_GUILD_ID="424242")
    bot.store = await JobStore.open(bot.settings.database_path)
    try:
        bot.tree.sync = AsyncMock(return_value=[])  # type: ignore[method-assign]

        assert await bot.sync_commands() is True
        assert await bot.sync_commands() is False

        bot.tree.sync.assert_awaited_once()
        assert bot.tree.sync.await_args is not None
        assert bot.tree.sync.await_args.kwargs["guild"].id == 424242
        guild = discord.Object(id=424242)
        assert sorted(c.name for c in bot.tree.get_commands(guild=guild)) == COMMANDS
        assert await bot.store.get_meta(f"command_sync:{bot.application_id}:424242") is not None
        assert await bot.store.get_meta(f"command_sync:{bot.application_id}:global") is None
    finally:
        await bot.store.close()


# -- more than one model -------------------------------------------------------------------------------

TWO_MODELS = """
[[models]]
id = "provider/video-model-2.0-fast"
name = "Video 2.0 Fast"
create_path = "/gateway/videos/create"
price_yen = 250
seed = true

[[models]]
id = "provider/video-model-2.0-pro"
name = "Video 2.0 Pro"
create_path = "/gateway/videos/create-pro"
price_yen = 1200
"""


@pytest.fixture
async def two_model_bot(tmp_path: Path) -> VideoBot:
    models = tmp_path / "models.toml"
    models.write_text(TWO_MODELS, encoding="utf-8")
    return await build_bot(tmp_path, MODELS_FILE=str(models))


async def test_with_one_model_video_offers_no_model_option(bot: VideoBot) -> None:
    assert "model" not in options((await payloads(bot))["video"])


async def test_with_several_models_video_offers_each_with_its_price(two_model_bot: VideoBot) -> None:
    video = options((await payloads(two_model_bot))["video"])

    assert list(video) == ["prompt", "model", "seed"]
    model = video["model"]
    assert model["type"] == 3 and model["required"] is False
    assert [(c["name"], c["value"]) for c in model["choices"]] == [
        ("Video 2.0 Fast · ¥250", "provider/video-model-2.0-fast"),
        ("Video 2.0 Pro · ¥1,200", "provider/video-model-2.0-pro"),
    ]
    assert [c["name_localizations"] for c in model["choices"]] == [
        {"ja": "Video 2.0 Fast・250円"}, {"ja": "Video 2.0 Pro・1,200円"},
    ]
    assert video["prompt"]["max_length"] == 2000 and video["seed"]["max_value"] == 4_294_967_295


async def test_with_several_models_the_descriptions_name_no_single_price(two_model_bot: VideoBot) -> None:
    video = (await payloads(two_model_bot))["video"]

    texts = [video["description"], video["description_localizations"]["ja"]]
    for option in video["options"]:
        texts += [option["description"], option["description_localizations"]["ja"]]
    assert not [text for text in texts if "¥" in text or "円" in text]
    assert "1-3 minutes" in video["description"] and "price depends on the model" in options(video)["prompt"][
        "description"]
    for text in texts:
        assert 1 <= len(text) <= 100, text
    assert described_count(video) == 4


def described_count(payload: dict[str, Any]) -> int:
    return sum(1 for item in (payload, *payload.get("options", [])) if item["description_localizations"].get("ja"))


async def test_the_digest_changes_when_the_catalogue_does(bot: VideoBot, two_model_bot: VideoBot) -> None:
    assert await bot.command_digest(None) != await two_model_bot.command_digest(None)
