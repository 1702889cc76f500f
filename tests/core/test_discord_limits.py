"""Discord's limits, stated a second time from its API documentation: a typo in bot/core/discord_limits.py fails."""

from __future__ import annotations

from bot.core import discord_limits

#: https://discord.com/developers/docs/resources/message (content), .../resources/message#embed-object-embed-limits
#: and .../interactions/application-commands (choices, names, values, descriptions).
DOCUMENTED = {
    "MESSAGE_CONTENT": 2000, "EMBED_TITLE": 256, "EMBED_DESCRIPTION": 4096, "FIELD_NAME": 256, "FIELD_VALUE": 1024,
    "FOOTER_TEXT": 2048, "AUTHOR_NAME": 256, "EMBED_TOTAL": 6000, "EMBED_FIELDS": 25,
    "CHOICES": 25, "CHOICE_NAME": 100, "CHOICE_VALUE": 100, "DESCRIPTION": 100,
}


def test_the_limits_are_discords() -> None:
    ours = {name: value for name, value in vars(discord_limits).items() if name.isupper()}
    assert ours == DOCUMENTED
