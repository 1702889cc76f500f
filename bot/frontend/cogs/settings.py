"""/settings: a server's admins set its video rules from Discord; every reply is private.

Discord offers the group only to members with Manage Server (`default_permissions`), and the trust model
checks again in code before any of it runs (bot/frontend/tree.py `interaction_check`; docs/trust.md), because a
client or an admin's override can show the commands to anyone. The host's caps, cooldown and videos in flight
are ceilings: a looser value is refused with the host's limit named (bot/community/server_rules.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import available_timezones

import discord
from discord import app_commands
from discord.ext import commands

from bot.community.blocklist import MAX_TERMS, clean_term
from bot.community.server_rules import (
    CEILING_KEYS,
    MAX_ACTIVE_JOBS,
    MAX_COOLDOWN_SECONDS,
    MAX_LISTED,
    MAX_YEN,
    REROLL_BY,
    SETTING_KEYS,
    ServerRules,
)
from bot.core.discord_limits import CHOICE_NAME, CHOICES, EMBED_DESCRIPTION
from bot.frontend import settings_embeds
from bot.frontend.discord_text import inline_code, shorten
from bot.frontend.i18n import described, t
from bot.frontend.tree import respond
from bot.service.catalogue import MAX_ID_CHARS

if TYPE_CHECKING:
    from bot.frontend.bot import VideoBot

Interaction = discord.Interaction["VideoBot"]
Yen = app_commands.Range[int, 0, MAX_YEN]
_ZONES = sorted(available_timezones())


def _choice(key: str, value: str) -> app_commands.Choice[str]:
    return app_commands.Choice(name=described(f"choice.{key}"), value=value)


def _guild(interaction: Interaction) -> int:
    assert interaction.guild_id is not None  # the group is guild_only
    return interaction.guild_id


def _host_zone(rules: ServerRules) -> str | None:
    """The host's time zone, in which the host's caps count; None when the host caps no spending."""
    return rules.defaults.timezone if rules.host_caps_spending else None


def _cap(value: int | None) -> int | None:
    """0 removes a cap: the admin's way to say "no limit" in a number option (refused where the host sets one)."""
    return value or None


@app_commands.guild_only()
@app_commands.default_permissions(manage_guild=True)
class SettingsCog(commands.GroupCog, group_name="settings", group_description=described("cmd.settings")):
    def __init__(self, bot: VideoBot) -> None:
        self.bot = bot
        super().__init__()

    async def _changed(self, interaction: Interaction, values: dict[str, Any]) -> None:
        changes = await self.bot.requests.rules.change(_guild(interaction), interaction.user.id, values)
        await respond(interaction, settings_embeds.changes_text(changes, interaction.locale.value))

    @app_commands.command(name="show", description=described("cmd.settings.show"))
    async def show(self, interaction: Interaction) -> None:
        rules = self.bot.requests.rules
        server = await rules.effective(_guild(interaction))
        changes = await rules.store.recent_events(_guild(interaction), "setting", limit=5)
        ceilings = {key: rules.ceiling(key) for key in CEILING_KEYS}
        await respond(interaction, embed=settings_embeds.settings_embed(
            server, changes, interaction.locale.value, ceilings, host_zone=_host_zone(rules)))

    @app_commands.command(name="limits", description=described("cmd.settings.limits"))
    @app_commands.describe(
        server_daily=described("cmd.settings.limits.server_daily"),
        server_monthly=described("cmd.settings.limits.server_monthly"),
        member_daily=described("cmd.settings.limits.member_daily"),
        member_monthly=described("cmd.settings.limits.member_monthly"),
        cooldown=described("cmd.settings.limits.cooldown"),
        in_flight=described("cmd.settings.limits.in_flight"),
    )
    async def limits(
        self,
        interaction: Interaction,
        server_daily: Yen | None = None,
        server_monthly: Yen | None = None,
        member_daily: Yen | None = None,
        member_monthly: Yen | None = None,
        cooldown: app_commands.Range[int, 0, MAX_COOLDOWN_SECONDS] | None = None,
        in_flight: app_commands.Range[int, 0, MAX_ACTIVE_JOBS] | None = None,
    ) -> None:
        given = {
            "guild_daily_cap_yen": server_daily, "guild_monthly_cap_yen": server_monthly,
            "member_daily_cap_yen": member_daily, "member_monthly_cap_yen": member_monthly,
            "max_active_jobs": in_flight,
        }
        # Only the options given change.
        values: dict[str, Any] = {key: _cap(value) for key, value in given.items() if value is not None}
        if cooldown is not None:
            values["cooldown_seconds"] = cooldown
        await self._changed(interaction, values)

    @app_commands.command(name="reset", description=described("cmd.settings.reset"))
    @app_commands.describe(setting=described("cmd.settings.reset.setting"))
    @app_commands.choices(setting=[
        app_commands.Choice(name=described(f"setting.{key}"), value=key) for key in SETTING_KEYS
    ])
    async def reset(self, interaction: Interaction, setting: app_commands.Choice[str]) -> None:
        locale = interaction.locale.value
        change = await self.bot.requests.rules.reset(_guild(interaction), interaction.user.id, setting.value)
        if change is None:
            await respond(interaction, t(locale, "settings.reset.none",
                                         name=settings_embeds.setting_name(setting.value, locale)))
        else:
            await respond(interaction, settings_embeds.changes_text([change], locale))

    async def _edit_ids(
        self, interaction: Interaction, key: str, action: str, target: int | None, what: str
    ) -> None:
        if action == "clear":
            await self._changed(interaction, {key: []})
            return
        if target is None:
            locale = interaction.locale.value
            await respond(interaction, t(locale, "settings.need_target", what=t(locale, what),
                                         action=t(locale, f"choice.{action}")))
            return

        def updated(current: frozenset[int]) -> list[int]:
            return sorted(current | {target} if action == "add" else current - {target})[:MAX_LISTED + 1]

        changes = await self.bot.requests.rules.edit(_guild(interaction), interaction.user.id, key, updated)
        await respond(interaction, settings_embeds.changes_text(changes, interaction.locale.value))

    @app_commands.command(name="channels", description=described("cmd.settings.channels"))
    @app_commands.describe(action=described("cmd.settings.action"), channel=described("cmd.settings.channel"))
    @app_commands.choices(action=[_choice("add", "add"), _choice("remove", "remove"), _choice("clear", "clear")])
    async def channels(
        self, interaction: Interaction, action: app_commands.Choice[str],
        channel: discord.TextChannel | discord.VoiceChannel | discord.Thread | None = None,
    ) -> None:
        await self._edit_ids(interaction, "allowed_channel_ids", action.value, channel.id if channel else None,
                             "cmd.settings.channel")

    @app_commands.command(name="roles", description=described("cmd.settings.roles"))
    @app_commands.describe(action=described("cmd.settings.action"), role=described("cmd.settings.role"))
    @app_commands.choices(action=[_choice("add", "add"), _choice("remove", "remove"), _choice("clear", "clear")])
    async def roles(
        self, interaction: Interaction, action: app_commands.Choice[str], role: discord.Role | None = None
    ) -> None:
        await self._edit_ids(interaction, "allowed_role_ids", action.value, role.id if role else None,
                             "cmd.settings.role")

    @app_commands.command(name="log_channel", description=described("cmd.settings.log_channel"))
    @app_commands.describe(channel=described("cmd.settings.log_channel.channel"))
    async def log_channel(
        self, interaction: Interaction, channel: discord.TextChannel | discord.Thread | None = None
    ) -> None:
        await self._changed(interaction, {"log_channel_id": channel.id if channel else None})

    @app_commands.command(name="blocklist", description=described("cmd.settings.blocklist"))
    @app_commands.describe(action=described("cmd.settings.action"), term=described("cmd.settings.blocklist.term"))
    @app_commands.choices(action=[_choice("add", "add"), _choice("remove", "remove"), _choice("list", "list")])
    async def blocklist(
        self, interaction: Interaction, action: app_commands.Choice[str],
        term: app_commands.Range[str, 1, 200] | None = None,
    ) -> None:
        locale = interaction.locale.value
        store = self.bot.requests.rules.store
        guild_id = _guild(interaction)
        terms = await store.blocklist(guild_id)
        if action.value == "list":
            if not terms:
                await respond(interaction, t(locale, "settings.blocklist.empty"))
                return
            embed = discord.Embed(title=t(locale, "settings.blocklist.title", count=len(terms)))
            embed.description = shorten("\n".join(inline_code(term) for term in terms), EMBED_DESCRIPTION)
            await respond(interaction, embed=embed)
            return
        if term is None:
            await respond(interaction, t(locale, "settings.need_target", what=t(locale, "cmd.settings.blocklist.term"),
                                         action=t(locale, f"choice.{action.value}")))
            return
        cleaned = clean_term(term)
        if action.value == "add":
            if len(terms) >= MAX_TERMS:
                await respond(interaction, t(locale, "settings.blocklist.full", limit=MAX_TERMS))
                return
            added = await store.add_term(guild_id, cleaned, interaction.user.id)
            await respond(interaction, t(locale, "settings.blocklist.added" if added else "settings.blocklist.exists"))
        else:
            removed = await store.remove_term(guild_id, cleaned, interaction.user.id)
            await respond(interaction, t(locale, "settings.blocklist.removed" if removed else
                                         "settings.blocklist.missing"))

    @app_commands.command(name="member", description=described("cmd.settings.member"))
    @app_commands.describe(action=described("cmd.settings.action"), member=described("cmd.settings.member.member"))
    @app_commands.choices(action=[
        _choice("block", "block"), _choice("unblock", "unblock"), _choice("reset_quota", "reset_quota"),
    ])
    async def member(
        self, interaction: Interaction, action: app_commands.Choice[str], member: discord.Member | discord.User
    ) -> None:
        store = self.bot.requests.rules.store
        guild_id = _guild(interaction)
        if action.value == "reset_quota":
            await store.set_member(guild_id, member.id, interaction.user.id, reset_quota=True)
            await respond(interaction, settings_embeds.quota_reset_text(
                member.id, interaction.locale.value, host_caps=self.bot.requests.rules.host_caps_spending))
            return
        blocked = action.value == "block"
        await store.set_member(guild_id, member.id, interaction.user.id, blocked=blocked)
        key = "settings.member.blocked" if blocked else "settings.member.unblocked"
        await respond(interaction, t(interaction.locale.value, key, member=f"<@{member.id}>"))

    @app_commands.command(name="models", description=described("cmd.settings.models"))
    @app_commands.describe(action=described("cmd.settings.action"), model=described("cmd.settings.models.model"))
    @app_commands.choices(action=[
        _choice("allow", "allow"), _choice("disallow", "disallow"), _choice("all", "all"),
        _choice("default", "default"),
    ])
    async def models(
        self, interaction: Interaction, action: app_commands.Choice[str], model: str | None = None
    ) -> None:
        locale = interaction.locale.value
        catalogue = self.bot.catalogue.ids
        if action.value == "all":
            await self._changed(interaction, {"allowed_models": None})
            return
        if model is None or model not in catalogue:
            await respond(interaction, t(locale, "settings.models.unknown", model=shorten(model or "", MAX_ID_CHARS)))
            return
        if action.value == "default":
            await self._changed(interaction, {"default_model": model})
            return
        def updated(current: frozenset[str] | None) -> list[str] | None:
            allowed = set(current if current is not None else catalogue)
            allowed = allowed | {model} if action.value == "allow" else allowed - {model}
            return sorted(allowed) if allowed != set(catalogue) else None

        rules = self.bot.requests.rules
        changes = await rules.edit(_guild(interaction), interaction.user.id, "allowed_models", updated)
        await respond(interaction, settings_embeds.changes_text(changes, locale))

    @models.autocomplete("model")
    async def model_autocomplete(self, interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [
            app_commands.Choice(name=model_id[:CHOICE_NAME], value=model_id)
            for model_id in self.bot.catalogue.ids if current.lower() in model_id.lower()
        ][:CHOICES]

    @app_commands.command(name="language", description=described("cmd.settings.language"))
    @app_commands.describe(language=described("cmd.settings.language.language"))
    @app_commands.choices(language=[
        _choice("english", "en"), _choice("japanese", "ja"), _choice("auto", "auto"),
    ])
    async def language(self, interaction: Interaction, language: app_commands.Choice[str]) -> None:
        value: Literal["en", "ja"] | None = None if language.value == "auto" else language.value  # type: ignore[assignment]
        await self._changed(interaction, {"language": value})

    @app_commands.command(name="timezone", description=described("cmd.settings.timezone"))
    @app_commands.describe(zone=described("cmd.settings.timezone.zone"))
    async def timezone(self, interaction: Interaction, zone: app_commands.Range[str, 1, 64]) -> None:
        if zone not in _ZONES:
            await respond(interaction, t(interaction.locale.value, "settings.timezone.invalid",
                                         zone=shorten(zone, 64)))
            return
        rules = self.bot.requests.rules
        changes = await rules.change(_guild(interaction), interaction.user.id, {"timezone": zone})
        await respond(interaction, settings_embeds.timezone_changed_text(
            changes, zone, _host_zone(rules), interaction.locale.value))

    @timezone.autocomplete("zone")
    async def zone_autocomplete(self, interaction: Interaction, current: str) -> list[app_commands.Choice[str]]:
        needle = current.lower()
        return [app_commands.Choice(name=zone, value=zone) for zone in _ZONES if needle in zone.lower()][:CHOICES]

    @app_commands.command(name="budget_alert", description=described("cmd.settings.budget_alert"))
    @app_commands.describe(yen=described("cmd.settings.budget_alert.yen"))
    async def budget_alert(self, interaction: Interaction, yen: Yen) -> None:
        await self._changed(interaction, {"budget_alert_yen": _cap(yen)})

    @app_commands.command(name="reroll", description=described("cmd.settings.reroll"))
    @app_commands.describe(who=described("cmd.settings.reroll.who"))
    @app_commands.choices(who=[
        app_commands.Choice(name=described(f"setting.value.reroll.{value}"), value=value) for value in REROLL_BY
    ])
    async def reroll(self, interaction: Interaction, who: app_commands.Choice[str]) -> None:
        await self._changed(interaction, {"reroll_by": who.value})

    @app_commands.command(name="confirm", description=described("cmd.settings.confirm"))
    @app_commands.describe(enabled=described("cmd.settings.confirm.enabled"))
    async def confirm(self, interaction: Interaction, enabled: bool) -> None:
        await self._changed(interaction, {"confirm_before_spending": enabled})


async def setup(bot: VideoBot) -> None:
    await bot.add_cog(SettingsCog(bot))
