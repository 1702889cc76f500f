"""Builders for the JSON objects Discord sends (users, roles, channels, members).

Only the fields discord.py reads, plus the common ones a reader of a recorded payload would
expect, so the cached objects on the client side look like the real thing.
"""

from __future__ import annotations

import datetime
import itertools
import time
from typing import Any

DISCORD_EPOCH_MS = 1_420_070_400_000

# Permission bits (https://discord.com/developers/docs/topics/permissions).
ADMINISTRATOR = 1 << 3
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
MANAGE_MESSAGES = 1 << 13
EMBED_LINKS = 1 << 14
ATTACH_FILES = 1 << 15
READ_MESSAGE_HISTORY = 1 << 16
MENTION_EVERYONE = 1 << 17
USE_EXTERNAL_EMOJIS = 1 << 18
USE_APPLICATION_COMMANDS = 1 << 31
ALL_PERMISSIONS = (1 << 51) - 1

# What @everyone gets in a freshly created guild (close enough to Discord's default).
EVERYONE_PERMISSIONS = 311_455_894_593
# The bot's managed role: the default plus what a media-posting bot is invited with.
BOT_ROLE_PERMISSIONS = EVERYONE_PERMISSIONS | MANAGE_MESSAGES | EMBED_LINKS | ATTACH_FILES

CHANNEL_TYPE_GUILD_TEXT = 0
CHANNEL_TYPE_DM = 1

# An interaction's app_permissions in the bot's own DM.
DM_APP_PERMISSIONS = ATTACH_FILES | EMBED_LINKS | MENTION_EVERYONE | USE_EXTERNAL_EMOJIS

# Gateway intents the double looks at.
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12


class SnowflakeFactory:
    """Time-based, strictly increasing ids, so `discord.utils.snowflake_time` gives sane dates."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._last = 0

    def next(self) -> int:
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        candidate = (ms << 22) | (next(self._counter) & 0xFFF)
        # Never go backwards, even if the clock does or the counter wraps within one ms.
        self._last = max(candidate, self._last + 1)
        return self._last


def iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def user_object(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "global_name": None if bot else name,
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
        "flags": 0,
        "banner": None,
        "accent_color": None,
    }


def role_object(
    role_id: int,
    name: str,
    *,
    permissions: int,
    position: int,
    managed: bool = False,
    mentionable: bool = False,
    bot_id: int | None = None,
) -> dict[str, Any]:
    role: dict[str, Any] = {
        "id": str(role_id),
        "name": name,
        "color": 0,
        "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
        "hoist": False,
        "icon": None,
        "unicode_emoji": None,
        "position": position,
        "permissions": str(permissions),
        "managed": managed,
        "mentionable": mentionable,
        "flags": 0,
    }
    if bot_id is not None:
        role["tags"] = {"bot_id": str(bot_id)}
    return role


def text_channel_object(channel_id: int, guild_id: int, name: str, position: int) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "type": CHANNEL_TYPE_GUILD_TEXT,
        "guild_id": str(guild_id),
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "nsfw": False,
        "topic": None,
        "rate_limit_per_user": 0,
        "parent_id": None,
        "last_message_id": None,
        "flags": 0,
    }


def dm_channel_object(channel_id: int, recipient: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "type": CHANNEL_TYPE_DM,
        "last_message_id": None,
        "flags": 0,
        "recipients": [recipient],
    }


def member_object(user: dict[str, Any], roles: list[int], joined_at: str) -> dict[str, Any]:
    return {
        "user": user,
        "nick": None,
        "avatar": None,
        "banner": None,
        "roles": [str(r) for r in roles],
        "joined_at": joined_at,
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "pending": False,
        "communication_disabled_until": None,
    }
