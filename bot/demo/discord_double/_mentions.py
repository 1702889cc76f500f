"""Who a message actually pings, following Discord's `allowed_mentions` rules.

https://discord.com/developers/docs/resources/message#allowed-mentions-object
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

USER_MENTION = re.compile(r"<@!?(\d{15,21})>")
ROLE_MENTION = re.compile(r"<@&(\d{15,21})>")
EVERYONE_MENTION = re.compile(r"@(everyone|here)")

# Plain channel messages parse everything when `allowed_mentions` is absent; interaction
# responses and webhook executions by a token parse users only.
PARSE_ALL = ("users", "roles", "everyone")
PARSE_USERS = ("users",)


class AllowedMentionsError(ValueError):
    """The `allowed_mentions` object is one Discord would reject with 50035 Invalid Form Body."""


@dataclass(frozen=True)
class Mentions:
    users: list[int]
    roles: list[int]
    everyone: bool


def _unique(ids: list[int]) -> list[int]:
    return list(dict.fromkeys(ids))


def resolve_mentions(
    content: str,
    allowed_mentions: dict[str, Any] | None,
    *,
    default_parse: tuple[str, ...],
    replied_user_id: int | None = None,
) -> Mentions:
    in_content_users = _unique([int(m) for m in USER_MENTION.findall(content)])
    in_content_roles = _unique([int(m) for m in ROLE_MENTION.findall(content)])
    has_everyone = EVERYONE_MENTION.search(content) is not None

    if allowed_mentions is None:
        parse: list[str] = list(default_parse)
        allowed_users: list[int] = []
        allowed_roles: list[int] = []
        # Without allowed_mentions a reply pings the author of the message it answers.
        replied_user = True
    else:
        parse = list(allowed_mentions.get("parse", []))
        unknown = set(parse) - set(PARSE_ALL)
        if unknown:
            raise AllowedMentionsError(f"allowed_mentions.parse has unknown values {sorted(unknown)}")
        allowed_users = [int(u) for u in allowed_mentions.get("users", [])]
        allowed_roles = [int(r) for r in allowed_mentions.get("roles", [])]
        if "users" in parse and allowed_users:
            raise AllowedMentionsError("allowed_mentions: parse:users and users are mutually exclusive")
        if "roles" in parse and allowed_roles:
            raise AllowedMentionsError("allowed_mentions: parse:roles and roles are mutually exclusive")
        if len(allowed_users) > 100 or len(allowed_roles) > 100:
            raise AllowedMentionsError("allowed_mentions: at most 100 users and 100 roles")
        replied_user = bool(allowed_mentions.get("replied_user", False))

    users = in_content_users if "users" in parse else [u for u in in_content_users if u in allowed_users]
    if replied_user and replied_user_id is not None and replied_user_id not in users:
        users.append(replied_user_id)

    roles = in_content_roles if "roles" in parse else [r for r in in_content_roles if r in allowed_roles]

    return Mentions(users=users, roles=roles, everyone=has_everyone and "everyone" in parse)
