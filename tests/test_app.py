"""bot/app.py: the composition root holds a logged-in bot to the trust model's rule on public applications before
it opens anything."""

from __future__ import annotations

import logging
from unittest.mock import MagicMock

import discord
import pytest

from bot.app import refuse_public_bot
from bot.community import trust
from bot.config.settings import Settings, read_settings
from bot.frontend.bot import VideoBot

REQUIRED = {"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k"}


def logged_in(bot_public: bool | None) -> MagicMock:
    """A bot after login: discord.py read its application (None: not read)."""
    bot = MagicMock(spec=VideoBot)
    if bot_public is None:
        bot.application = None
    else:
        bot.application = MagicMock(spec=discord.AppInfo)
        bot.application.bot_public = bot_public
    return bot


def settings(**env: str) -> Settings:
    return read_settings({**REQUIRED, **env})


@pytest.mark.parametrize("bot_public", [True, None])
def test_a_public_application_with_no_server_list_is_refused(bot_public: bool | None) -> None:
    with pytest.raises(trust.PublicBotRefused, match="Public Bot"):
        refuse_public_bot(logged_in(bot_public), settings())


def test_a_private_or_listed_application_starts_quietly(caplog: pytest.LogCaptureFixture) -> None:
    refuse_public_bot(logged_in(False), settings())
    refuse_public_bot(logged_in(True), settings(ALLOWED_GUILD_IDS="5"))
    assert caplog.records == []


def test_a_host_who_accepts_the_risk_by_name_starts_and_the_log_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        refuse_public_bot(logged_in(True), settings(ALLOW_PUBLIC_BOT_SPENDING="1"))
    assert [r.getMessage() for r in caplog.records] == [trust.PUBLIC_BOT_ACCEPTED]
