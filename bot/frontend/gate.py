"""The front end's side of the trust model (bot/community/trust.py): it gathers the facts of an interaction,
asks the model, and words its refusals. It decides nothing itself."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol, cast, get_args

import discord

from bot.community import trust
from bot.core.notices import RefusalCode
from bot.frontend import embeds
from bot.frontend.i18n import t
from bot.store.jobs import AdmissionRefused

Interaction = discord.Interaction[Any]


class HostRules(Protocol):
    async def host_rules(self, action: str, stages: Collection[trust.Stage] = ...) -> trust.Host: ...


class TrustClient(Protocol):
    """The client (VideoBot) as the gate sees it: its requests read the host's rules."""

    @property
    def requests(self) -> HostRules: ...


def facts_of(interaction: Interaction, *, target: trust.Target | None = None, reroll: trust.Reroll | None = None,
             member: trust.MemberRules | None = None, standing: trust.Standing | None = None) -> trust.Facts:
    """The facts an interaction carries, with those the caller read from the database."""
    permissions = interaction.permissions
    message = interaction.message if interaction.type is discord.InteractionType.component else None
    return trust.Facts(
        user_id=interaction.user.id,
        guild_id=interaction.guild_id,
        in_dm=interaction.guild_id is None,
        manage_server=permissions.manage_guild is True,
        manage_messages=permissions.manage_messages is True,
        message_id=message.id if message is not None else None,
        target=target,
        reroll=reroll,
        member=member,
        standing=standing,
    )


async def decide(interaction: Interaction, action: str, stages: Collection[trust.Stage], *,
                 target: trust.Target | None = None, reroll: trust.Reroll | None = None,
                 member: trust.MemberRules | None = None, standing: trust.Standing | None = None) -> trust.Decision:
    """The trust model's answer for this interaction, at these stages (the host's pause read only if checked)."""
    client = cast(TrustClient, interaction.client)
    host = await client.requests.host_rules(action, stages)
    facts = facts_of(interaction, target=target, reroll=reroll, member=member, standing=standing)
    return trust.decide(action, facts, host, stages)


#: The answer to each refusal of the model (the member rules' and the host's are the request refusals' own).
_TEXTS = {
    "guild_only": "error.guild_only",
    "missing_permission": "error.missing_permission",
    "unknown": "button.unknown",
    "not_yours": "button.not_yours",
    "delete_refused": "delete.refused",
    "reroll_not_allowed": "reroll.not_allowed",
    "not_member": "spend.not_member",
    "video_denied": "spend.video_denied",
    "standing_unreadable": "spend.standing_unreadable",
}
_REQUEST_REFUSALS: frozenset[str] = frozenset(get_args(RefusalCode))


def refusal_text(decision: trust.Decision, locale: str) -> str:
    """What the member reads for a refusal (a lookup's "not found" is worded by its command, with the reference)."""
    reason = decision.reason or "unknown"
    if reason in _REQUEST_REFUSALS:
        params: dict[str, object] = {"roles": list(decision.roles)} if decision.roles else {}
        return embeds.refusal_text(AdmissionRefused(cast(RefusalCode, reason), None, **params), locale)
    return t(locale, _TEXTS[reason])
