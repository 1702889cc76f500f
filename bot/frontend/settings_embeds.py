"""What /settings shows: every setting in force and where it comes from, changes, and log-channel lines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import discord

from bot.community.server_rules import (
    AT_LEAST,
    CEILING_KEYS,
    SETTING_KEYS,
    Change,
    LooserThanHost,
    ServerSettings,
    SettingKey,
)
from bot.core.discord_limits import EMBED_DESCRIPTION, FIELD_VALUE
from bot.frontend.discord_text import fit_content, fit_embed, inline_code, plain, shorten
from bot.frontend.i18n import t, yen
from bot.store.servers import Event

#: A setting's value as shown, at most (the bot's own bound, well within a field).
_VALUE_CHARS = 100
_AMOUNTS = {
    "guild_daily_cap_yen", "guild_monthly_cap_yen", "member_daily_cap_yen", "member_monthly_cap_yen",
    "budget_alert_yen",
}


def setting_name(key: SettingKey, locale: str) -> str:
    return t(locale, f"setting.{key}")


def setting_value(key: SettingKey, value: Any, locale: str) -> str:
    """A setting's value as an admin reads it; ids become mentions that ping nobody (replies allow none)."""
    if key in _AMOUNTS:
        return yen(int(value), locale) if value is not None else t(locale, "setting.value.none")
    if key == "cooldown_seconds":
        return t(locale, "setting.value.seconds", seconds=int(value))
    if key == "max_active_jobs":
        return str(int(value)) if value is not None else t(locale, "setting.value.none")
    if key == "allowed_channel_ids":
        return _listed((f"<#{int(v)}>" for v in sorted(value)), t(locale, "setting.value.every_channel"))
    if key == "allowed_role_ids":
        return _listed((f"<@&{int(v)}>" for v in sorted(value)), t(locale, "setting.value.everyone"))
    if key == "log_channel_id":
        return f"<#{int(value)}>" if value is not None else t(locale, "setting.value.off")
    if key == "allowed_models":
        return _listed((f"`{plain(str(v), 60)}`" for v in sorted(value or ())), t(locale, "setting.value.all_models"))
    if key == "default_model":
        return f"`{plain(str(value), 60)}`" if value else t(locale, "setting.value.catalogue_default")
    if key == "language":
        return t(locale, f"setting.value.language.{value}") if value else t(locale, "setting.value.server_locale")
    if key == "reroll_by":
        return t(locale, f"setting.value.reroll.{value}")
    if key == "confirm_before_spending":
        return t(locale, "setting.value.on" if value else "setting.value.off")
    return plain(str(value), _VALUE_CHARS)


def _listed(items: Iterable[str], empty: str) -> str:
    shown = list(items)
    return ", ".join(shown) if shown else empty


def _source(server: ServerSettings, key: SettingKey, locale: str) -> str:
    if key in server.held_to_host:
        return t(locale, "settings.source.held")
    return t(locale, "settings.source.server" if key in server.from_server else "settings.source.default")


def host_limit(key: SettingKey, ceiling: Any, locale: str) -> str:
    """The host's ceiling of one setting, as /settings show names it."""
    if ceiling is None:
        return t(locale, "settings.host.show.none")
    direction = "at_least" if key in AT_LEAST else "at_most"
    return t(locale, f"settings.host.show.{direction}", ceiling=setting_value(key, ceiling, locale))


def settings_embed(server: ServerSettings, changes: list[Event], locale: str,
                   ceilings: Mapping[SettingKey, Any] | None = None, host_zone: str | None = None) -> discord.Embed:
    """Every setting in force and where it comes from; `ceilings`: the host's, shown beside their settings;
    `host_zone`: the host's time zone, in which the host's caps count (shown when the server's differs)."""
    embed = discord.Embed(title=t(locale, "settings.show.title"))
    lines = []
    for key in SETTING_KEYS:
        line = (f"**{setting_name(key, locale)}**: {setting_value(key, getattr(server, key), locale)} "
                f"({_source(server, key, locale)})")
        if ceilings is not None and key in CEILING_KEYS:
            line += f" · {host_limit(key, ceilings.get(key), locale)}"
        if key == "timezone" and host_zone is not None and host_zone != server.timezone:
            line += f" · {host_zone_note(host_zone, locale)}"
        lines.append(line)
    embed.description = shorten("\n".join(lines), EMBED_DESCRIPTION)
    if changes:
        embed.add_field(
            name=t(locale, "settings.show.changes"),
            value=shorten("\n".join(change_line(event, locale) for event in changes), FIELD_VALUE),
            inline=False,
        )
    return fit_embed(embed)


def quota_reset_text(member_id: int, locale: str, *, host_caps: bool) -> str:
    """A member's quota reset; `host_caps`: the host caps spending, and those caps are not reset."""
    text = t(locale, "settings.member.reset", member=f"<@{member_id}>")
    if host_caps:
        text += " " + t(locale, "settings.member.reset.host")
    return fit_content(text)


def host_zone_note(host_zone: str, locale: str) -> str:
    """That the host's caps keep the host's calendar, whatever time zone the server chose."""
    return t(locale, "settings.host.show.zone", zone=plain(host_zone, _VALUE_CHARS))


def looser_than_host_text(refused: LooserThanHost, locale: str) -> str:
    """A change refused for asking more than the host allows: each value with the host's limit, nothing changed."""
    lines = [
        t(locale, "settings.host.at_least" if b.key in AT_LEAST else "settings.host.at_most",
          name=setting_name(b.key, locale), ceiling=setting_value(b.key, b.ceiling, locale),
          value=setting_value(b.key, b.value, locale))
        for b in refused.breaches
    ]
    return fit_content(t(locale, "settings.host.refused") + "\n" + "\n".join(lines))


def changes_text(changes: list[Change], locale: str) -> str:
    if not changes:
        return t(locale, "settings.unchanged")
    lines = [
        t(locale, "settings.changed.line", name=setting_name(c.key, locale),
          old=setting_value(c.key, c.old, locale), new=setting_value(c.key, c.new, locale))
        for c in changes
    ]
    return fit_content(t(locale, "settings.changed") + "\n" + "\n".join(lines))


def timezone_changed_text(changes: list[Change], zone: str, host_zone: str | None, locale: str) -> str:
    """A time zone change; a zone other than the host's says that the host's caps keep the host's calendar
    (`host_zone`: None when the host caps no spending)."""
    text = changes_text(changes, locale)
    if host_zone is not None and zone != host_zone:
        text += "\n" + t(locale, "settings.timezone.host", zone=plain(host_zone, _VALUE_CHARS))
    return fit_content(text)


def change_line(event: Event, locale: str) -> str:
    """One settings change, for /settings show and the log channel: who, when, what, old → new."""
    details = event.details
    key = str(details.get("key", ""))
    who = f"<@{int(event.user_id or 0)}>"
    when = f"<t:{int(event.created_at)}:R>"
    if key in SETTING_KEYS:
        try:
            new = t(locale, "settings.source.default") if details.get("default") else setting_value(
                key, _from_json(key, details.get("new")), locale)
            old = setting_value(key, _from_json(key, details.get("old")), locale)
        except (TypeError, ValueError):
            new = old = "?"  # a damaged row: the change is still listed
        return t(locale, "log.setting", who=who, when=when, name=setting_name(key, locale), old=old, new=new)
    member = details.get("member")
    return t(locale, f"log.{key}" if key in _ADMIN_ACTIONS else "log.other", who=who, when=when,
             member=f"<@{int(member)}>" if isinstance(member, int) else "")


_ADMIN_ACTIONS = {"blocklist_add", "blocklist_remove", "member_block", "member_unblock", "member_quota_reset"}


def _from_json(key: SettingKey, value: Any) -> Any:
    if isinstance(value, list):
        return frozenset(value)
    return value


def _whole(value: object) -> int:
    """An amount read back from an event row: a damaged one shows as 0 rather than stopping the log."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def event_line(event: Event, locale: str) -> str:
    """One log-channel line: ids, amounts and reason codes; never a prompt or a matched term."""
    details = event.details
    if event.kind == "setting":
        return change_line(event, locale)
    params = {
        "ref": f"#{int(event.job_id)}" if event.job_id is not None else "",
        "user": f"<@{int(event.user_id or 0)}>",
        "job_id": inline_code(str(details.get("service_job_id") or "-")),
        "amount": yen(_whole(details.get("yen")), locale),
        "code": inline_code(str(details.get("code") or details.get("state") or "-"), 40),
    }
    if event.kind == "budget_low":
        params["left"] = yen(_whole(details.get("left")), locale)
        params["threshold"] = yen(_whole(details.get("threshold")), locale)
    if event.kind not in _JOB_EVENTS:
        return fit_content(t(locale, "log.other", who=params["user"], when="", member=""))
    key = f"log.{event.kind}"
    return fit_content(t(locale, key, **params))


_JOB_EVENTS = {"accepted", "failed", "unknown", "refused", "budget_low"}
