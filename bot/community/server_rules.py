"""Per-server settings: the host's environment gives the defaults, each server's admins override them.

The host's caps, cooldown and videos in flight are also ceilings (`CEILING_KEYS`): a server may set something
stricter, never looser, and a stored value that a later, stricter host value undercuts is held to it when read.

Every setting is read from the database at the moment it is needed, so a change made with /settings
holds for the next request, in every process on the database, with no restart and no cache to go stale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.config.settings import Settings
from bot.store.servers import MemberRecord, ServerStore, SettingWrites, StoredSetting

log = logging.getLogger(__name__)

Language = Literal["en", "ja"]
RerollBy = Literal["requester", "anyone"]
LANGUAGES: tuple[Language, ...] = ("en", "ja")
REROLL_BY: tuple[RerollBy, ...] = ("requester", "anyone")

#: How many channels, roles or models one server may list: a bound on what a row and a reply hold.
MAX_LISTED = 25
#: Bounds of numbers an admin may set; past them a value is a typo, not a policy.
MAX_YEN = 100_000_000
MAX_COOLDOWN_SECONDS = 7 * 24 * 3600
MAX_ACTIVE_JOBS = 100


@dataclass(frozen=True)
class ServerSettings:
    """The settings in force in one server. `from_server` names the ones the server set itself."""

    guild_daily_cap_yen: int | None = None
    guild_monthly_cap_yen: int | None = None
    member_daily_cap_yen: int | None = None
    member_monthly_cap_yen: int | None = None
    cooldown_seconds: int = 0
    max_active_jobs: int | None = None
    allowed_channel_ids: frozenset[int] = frozenset()  # empty: every channel
    allowed_role_ids: frozenset[int] = frozenset()  # empty: every member
    log_channel_id: int | None = None
    allowed_models: frozenset[str] | None = None  # None: every model in the catalogue
    default_model: str | None = None  # None: the catalogue's default
    language: Language | None = None  # None: the server's own preferred locale
    timezone: str = "Asia/Tokyo"
    budget_alert_yen: int | None = None
    reroll_by: RerollBy = "requester"
    confirm_before_spending: bool = False
    from_server: frozenset[str] = field(default=frozenset(), compare=False)
    #: The server's own values that are looser than the host's ceiling now: the ceiling holds instead.
    held_to_host: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


SettingKey = str
SETTING_KEYS: tuple[SettingKey, ...] = tuple(
    f.name for f in fields(ServerSettings) if f.name not in ("from_server", "held_to_host")
)

#: The caps on spending, per server and per member, per day and per month.
SPENDING_CAP_KEYS: tuple[SettingKey, ...] = (
    "guild_daily_cap_yen", "guild_monthly_cap_yen", "member_daily_cap_yen", "member_monthly_cap_yen",
)
#: The settings whose host value (the environment's) is also a ceiling over every server.
CEILING_KEYS: tuple[SettingKey, ...] = (*SPENDING_CAP_KEYS, "cooldown_seconds", "max_active_jobs")
#: Of those, the ones where stricter is more (a longer cooldown); for the others stricter is less, and none
#: (no cap) is the loosest of all.
AT_LEAST: frozenset[SettingKey] = frozenset({"cooldown_seconds"})


def within(key: SettingKey, value: Any, ceiling: Any) -> bool:
    """Whether a server's value is as strict as the host's ceiling, or stricter."""
    if key in AT_LEAST:
        return bool(value >= ceiling)
    if ceiling is None:
        return True  # the host set no cap: any cap, or none, is within it
    return value is not None and bool(value <= ceiling)


def defaults_from(settings: Settings) -> ServerSettings:
    """The environment's values: what a server that set nothing gets, and for CEILING_KEYS the most any server
    may set (a server makes them stricter only)."""
    return ServerSettings(
        # Money;
        guild_daily_cap_yen=settings.guild_daily_budget_yen,
        guild_monthly_cap_yen=settings.guild_monthly_budget_yen,
        member_daily_cap_yen=settings.member_daily_budget_yen,
        member_monthly_cap_yen=settings.member_monthly_budget_yen,
        # who may ask, and where;
        allowed_role_ids=frozenset({settings.required_role_id}) if settings.required_role_id else frozenset(),
        allowed_channel_ids=settings.allowed_channel_ids,
        # a member's pace;
        cooldown_seconds=round(settings.video_cooldown_seconds),
        max_active_jobs=settings.max_active_jobs_per_user,
        # the calendar of the caps' days and months (and of /usage).
        timezone=settings.budget_timezone,
    )


class InvalidSetting(ValueError):
    """A value an admin (or a damaged row) gave that the setting cannot take."""

    def __init__(self, key: SettingKey, value: object) -> None:
        self.key = key
        self.value = value
        super().__init__(f"{key} cannot be {value!r}")


@dataclass(frozen=True)
class Breach:
    """A value asked for that is looser than the host's ceiling."""

    key: SettingKey
    value: Any
    ceiling: Any


class LooserThanHost(InvalidSetting):
    """A change asked for something looser than the host allows: nothing was changed."""

    def __init__(self, breaches: tuple[Breach, ...]) -> None:
        self.breaches = breaches
        super().__init__(breaches[0].key, breaches[0].value)


# -- values: checked the same way when an admin sets them and when they are read back -------------


def _amount(limit: int) -> Callable[[SettingKey, Any], Any]:
    def check(key: SettingKey, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= limit:
            raise InvalidSetting(key, value)
        return value
    return check


def _count(key: SettingKey, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COOLDOWN_SECONDS:
        raise InvalidSetting(key, value)
    return value


def _ids(key: SettingKey, value: Any) -> frozenset[int]:
    if not isinstance(value, list | tuple | set | frozenset) or len(value) > MAX_LISTED:
        raise InvalidSetting(key, value)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        raise InvalidSetting(key, value)
    return frozenset(value)


def _channel(key: SettingKey, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidSetting(key, value)
    return value


def _models(key: SettingKey, value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple | set | frozenset) or not 0 < len(value) <= MAX_LISTED:
        raise InvalidSetting(key, value)
    if not all(isinstance(v, str) and 0 < len(v) <= 200 for v in value):
        raise InvalidSetting(key, value)
    return frozenset(value)


def _model(key: SettingKey, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= 200:
        raise InvalidSetting(key, value)
    return value


def _choice(options: tuple[str, ...], *, optional: bool) -> Callable[[SettingKey, Any], Any]:
    def check(key: SettingKey, value: Any) -> str | None:
        if value is None and optional:
            return None
        if value not in options:
            raise InvalidSetting(key, value)
        return str(value)
    return check


def _timezone(key: SettingKey, value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 64:
        raise InvalidSetting(key, value)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidSetting(key, value) from exc
    return value


def _flag(key: SettingKey, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidSetting(key, value)
    return value


_CHECKS: dict[SettingKey, Callable[[SettingKey, Any], Any]] = {
    "guild_daily_cap_yen": _amount(MAX_YEN),
    "guild_monthly_cap_yen": _amount(MAX_YEN),
    "member_daily_cap_yen": _amount(MAX_YEN),
    "member_monthly_cap_yen": _amount(MAX_YEN),
    "cooldown_seconds": _count,
    "max_active_jobs": _amount(MAX_ACTIVE_JOBS),
    "allowed_channel_ids": _ids,
    "allowed_role_ids": _ids,
    "log_channel_id": _channel,
    "allowed_models": _models,
    "default_model": _model,
    "language": _choice(LANGUAGES, optional=True),
    "timezone": _timezone,
    "budget_alert_yen": _amount(MAX_YEN),
    "reroll_by": _choice(REROLL_BY, optional=False),
    "confirm_before_spending": _flag,
}
assert set(_CHECKS) == set(SETTING_KEYS), "every setting needs its check"


def check_value(key: SettingKey, value: Any) -> Any:
    """The value as the setting holds it; raises InvalidSetting."""
    if key not in _CHECKS:
        raise InvalidSetting(key, value)
    return _CHECKS[key](key, value)


def _stored(value: Any) -> Any:
    """A value as JSON can hold it (sets become sorted lists)."""
    if isinstance(value, frozenset | set):
        return sorted(value)
    return value


@dataclass(frozen=True)
class Change:
    """One setting changed by an admin: what it was and what it is now (the history and the log channel say so)."""

    key: SettingKey
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class RequestRules:
    server: ServerSettings
    member: MemberRecord
    blocklist: list[str]


class ServerRules:
    """Reads and changes one server's settings, blocklist and member records."""

    def __init__(self, store: ServerStore, defaults: ServerSettings) -> None:
        """`defaults`: the host's values (bot/config/settings.py), which are also the ceilings of CEILING_KEYS."""
        self.store = store
        self.defaults = defaults

    def ceiling(self, key: SettingKey) -> Any:
        """The host's ceiling of a CEILING_KEYS setting."""
        return getattr(self.defaults, key)

    @property
    def host_caps_spending(self) -> bool:
        """Whether the host set any spending cap: only then do replies say that the host's limits still count what
        a server's quota reset or credit frees."""
        return any(getattr(self.defaults, key) for key in SPENDING_CAP_KEYS)

    def _check_ceilings(self, checked: Mapping[SettingKey, Any]) -> None:
        breaches = tuple(
            Breach(key, value, self.ceiling(key)) for key, value in checked.items()
            if key in CEILING_KEYS and not within(key, value, self.ceiling(key))
        )
        if breaches:
            raise LooserThanHost(breaches)

    async def effective(self, guild_id: int | None) -> ServerSettings:
        if guild_id is None:
            return self.defaults
        return self._effective(guild_id, await self.store.settings(guild_id))

    def _effective(self, guild_id: int, stored: Mapping[str, StoredSetting]) -> ServerSettings:
        values: dict[str, Any] = {}
        held: set[str] = set()
        for key, setting in stored.items():
            try:
                values[key] = check_value(key, setting.value)
            except InvalidSetting:
                # A damaged or outdated row must not stop the server: its default holds, and the host hears of it.
                log.warning("server %s: stored setting %s is unusable; using the default", guild_id, key)
                continue
            if key in CEILING_KEYS and not within(key, values[key], self.ceiling(key)):
                # Set before the host made its own value stricter: the host's holds.
                values[key] = self.ceiling(key)
                held.add(key)
        return replace(self.defaults, **values, from_server=frozenset(values), held_to_host=frozenset(held))

    # An edit reads the current value and writes the next one: both happen in one write transaction of the
    # store (ServerStore.edit_settings), so two admins editing at once, in one process or two, lose neither change.

    async def change(self, guild_id: int, by_user_id: int, values: Mapping[SettingKey, Any]) -> list[Change]:
        """Set the given settings (validated first, all or none); returns what actually changed. Raises
        LooserThanHost, with nothing changed, when a value is looser than the host's ceiling."""
        checked = {key: check_value(key, value) for key, value in values.items()}
        self._check_ceilings(checked)
        return await self.store.edit_settings(
            guild_id, by_user_id, lambda stored: _changes(checked, self._effective(guild_id, stored))
        )

    async def edit(
        self, guild_id: int, by_user_id: int, key: SettingKey, update: Callable[[Any], Any]
    ) -> list[Change]:
        """Set `key` to `update(its current value)`, with no other change in between (adding a channel, say)."""
        def decide(stored: Mapping[str, StoredSetting]) -> tuple[SettingWrites, list[Change]]:
            current = self._effective(guild_id, stored)
            checked = {key: check_value(key, update(getattr(current, key)))}
            self._check_ceilings(checked)
            return _changes(checked, current)

        return await self.store.edit_settings(guild_id, by_user_id, decide)

    async def reset(self, guild_id: int, by_user_id: int, key: SettingKey) -> Change | None:
        """Back to the host's default; None when the server had not set it."""
        if key not in SETTING_KEYS:
            raise InvalidSetting(key, None)

        def decide(stored: Mapping[str, StoredSetting]) -> tuple[SettingWrites, Change | None]:
            current = self._effective(guild_id, stored)
            if key not in current.from_server:
                return {}, None
            old = getattr(current, key)
            return {key: (_stored(old), None, True)}, Change(key, old, getattr(self.defaults, key))

        return await self.store.edit_settings(guild_id, by_user_id, decide)

    async def member(self, guild_id: int, user_id: int) -> MemberRecord:
        return await self.store.member(guild_id, user_id)

    async def for_request(self, guild_id: int | None, user_id: int) -> RequestRules:
        """The server's settings, the member's record and the blocklist a request is checked against, read
        together from the database now (so a change an admin made a moment ago holds)."""
        if guild_id is None:
            return RequestRules(self.defaults, MemberRecord(), [])
        stored = await self.store.request_rules(guild_id, user_id)
        return RequestRules(self._effective(guild_id, stored.settings), stored.member, stored.blocklist)


def _changes(checked: Mapping[SettingKey, Any], current: ServerSettings) -> tuple[SettingWrites, list[Change]]:
    """What setting `checked` (values already checked) over `current` writes, and the changes it makes."""
    changes = [
        Change(key, getattr(current, key), value)
        for key, value in checked.items()
        # A value held to the host's ceiling is written again even when it equals what holds now: the admin's.
        if value != getattr(current, key) or key not in current.from_server or key in current.held_to_host
    ]
    return {c.key: (_stored(c.old), _stored(c.new), False) for c in changes}, changes
