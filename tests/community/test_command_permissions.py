"""Discord's rules for who may use an application command, one test (or one table) a rule."""

from __future__ import annotations

from typing import Any

import pytest

from bot.community.command_permissions import (
    ADMINISTRATOR,
    CommandAccess,
    CommandPermissions,
    Decision,
    PermissionEntry,
    PermissionType,
    Rule,
    decide,
    entries_by_target,
    may_use,
    parse_default_member_permissions,
)

GUILD = 800_000_000_000_000_001
EVERYONE = GUILD  # the @everyone role's id
ALL_CHANNELS = GUILD - 1
APP = 900_000_000_000_000_001
COMMAND = 910_000_000_000_000_001
OTHER_COMMAND = 910_000_000_000_000_002
HERE = 700_000_000_000_000_001  # the channel the command is used in
THERE = 700_000_000_000_000_002
MEMBER = 600_000_000_000_000_001
SOMEONE_ELSE = 600_000_000_000_000_002
HELPER = 610_000_000_000_000_001  # a role the member has
PATRON = 610_000_000_000_000_002  # another role the member has
STRANGER_ROLE = 610_000_000_000_000_003  # a role the member lacks

MANAGE_GUILD = 1 << 5
BAN_MEMBERS = 1 << 2
SEND_MESSAGES = 1 << 11

ROLE, USER, CHANNEL = PermissionType.ROLE, PermissionType.USER, PermissionType.CHANNEL


def role(role_id: int, allow: bool) -> PermissionEntry:
    return PermissionEntry(role_id, ROLE, allow)


def user(user_id: int, allow: bool) -> PermissionEntry:
    return PermissionEntry(user_id, USER, allow)


def channel(channel_id: int, allow: bool) -> PermissionEntry:
    return PermissionEntry(channel_id, CHANNEL, allow)


def check(
    *,
    command: list[PermissionEntry] | None = None,
    app: list[PermissionEntry] | None = None,
    default: int | None = None,
    permissions: int = SEND_MESSAGES,
    roles: tuple[int, ...] = (HELPER, PATRON),
    channel_id: int = HERE,
    extra: dict[int, list[PermissionEntry]] | None = None,
) -> Decision:
    """The decision for MEMBER running COMMAND in HERE, with the command's and the application's entries."""
    targets: dict[int, list[PermissionEntry]] = dict(extra or {})
    if command is not None:
        targets[COMMAND] = command
    if app is not None:
        targets[APP] = app
    arguments: dict[str, Any] = {
        "command_id": COMMAND,
        "application_id": APP,
        "guild_id": GUILD,
        "channel_id": channel_id,
        "user_id": MEMBER,
        "role_ids": roles,
        "member_permissions": permissions,
        "default_member_permissions": default,
        "entries_by_target": targets,
    }
    decision = decide(**arguments)
    assert may_use(**arguments) is decision.allowed
    return decision


def allowed(rule: Rule) -> Decision:
    return Decision(True, rule)


def denied(rule: Rule) -> Decision:
    return Decision(False, rule)


# -- default_member_permissions, with no entry anywhere ------------------------------------------------------


def test_without_entries_a_null_default_lets_everyone_use_the_command() -> None:
    assert check(default=None, permissions=0) == allowed(Rule.DEFAULT_EVERYONE)


def test_without_entries_a_zero_default_lets_nobody_use_it() -> None:
    assert check(default=0, permissions=SEND_MESSAGES | MANAGE_GUILD) == denied(Rule.DEFAULT_NOBODY)


@pytest.mark.parametrize(("permissions", "expected"), [
    (MANAGE_GUILD | BAN_MEMBERS | SEND_MESSAGES, True),
    (MANAGE_GUILD | BAN_MEMBERS, True),
    (MANAGE_GUILD | SEND_MESSAGES, False),  # one of the two is not enough
    (SEND_MESSAGES, False),
])
def test_a_default_bit_set_needs_every_one_of_its_permissions(permissions: int, expected: bool) -> None:
    assert check(default=MANAGE_GUILD | BAN_MEMBERS, permissions=permissions) == Decision(
        expected, Rule.DEFAULT_PERMISSIONS
    )


# -- Administrator --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("setup", [
    {"default": 0},
    {"default": MANAGE_GUILD},
    {"command": [user(MEMBER, False)]},
    {"command": [channel(HERE, False)]},
    {"command": [role(EVERYONE, False)], "app": [channel(ALL_CHANNELS, False)]},
    {"app": [user(MEMBER, False)]},
])
def test_an_administrator_may_use_every_command_whatever_the_entries(setup: dict[str, Any]) -> None:
    assert check(permissions=ADMINISTRATOR, **setup) == allowed(Rule.ADMINISTRATOR)
    # The same member without Administrator is refused: the entries above do bind everyone else.
    assert not check(**setup).allowed


# -- where: channel entries -----------------------------------------------------------------------------------


def test_a_command_denied_in_this_channel_is_refused_even_to_a_member_allowed_by_name() -> None:
    assert check(command=[channel(HERE, False), user(MEMBER, True)]) == denied(Rule.COMMAND_CHANNEL)


def test_a_channel_allow_grants_nothing_by_itself() -> None:
    assert check(command=[channel(HERE, True)], default=0) == denied(Rule.DEFAULT_NOBODY)
    assert check(command=[channel(HERE, True)], default=MANAGE_GUILD) == denied(Rule.DEFAULT_PERMISSIONS)
    assert check(command=[channel(HERE, True), role(EVERYONE, False)]) == denied(Rule.COMMAND_EVERYONE)


def test_the_commands_entry_for_this_channel_beats_its_entry_for_all_channels() -> None:
    assert check(command=[channel(ALL_CHANNELS, False), channel(HERE, True)]) == allowed(Rule.DEFAULT_EVERYONE)
    assert check(command=[channel(ALL_CHANNELS, True), channel(HERE, False)]) == denied(Rule.COMMAND_CHANNEL)


def test_the_commands_entry_for_all_channels_holds_where_no_channel_entry_does() -> None:
    entries = [channel(ALL_CHANNELS, False), channel(THERE, True)]
    assert check(command=entries) == denied(Rule.COMMAND_ALL_CHANNELS)
    assert check(command=entries, channel_id=THERE) == allowed(Rule.DEFAULT_EVERYONE)


@pytest.mark.parametrize("app", [
    [channel(HERE, False)],
    [channel(ALL_CHANNELS, False)],
    [channel(HERE, False), channel(ALL_CHANNELS, False)],
])
@pytest.mark.parametrize("command", [[channel(HERE, True)], [channel(ALL_CHANNELS, True)]])
def test_any_channel_entry_of_the_command_overrides_the_applications(
    command: list[PermissionEntry], app: list[PermissionEntry]
) -> None:
    assert check(command=command, app=app) == allowed(Rule.DEFAULT_EVERYONE)


def test_the_applications_channel_entries_hold_for_a_command_without_its_own() -> None:
    assert check(app=[channel(HERE, False)]) == denied(Rule.APPLICATION_CHANNEL)
    assert check(app=[channel(ALL_CHANNELS, False)]) == denied(Rule.APPLICATION_ALL_CHANNELS)
    assert check(app=[channel(ALL_CHANNELS, False), channel(HERE, True)]) == allowed(Rule.DEFAULT_EVERYONE)
    assert check(app=[channel(ALL_CHANNELS, True), channel(HERE, False)]) == denied(Rule.APPLICATION_CHANNEL)
    # The command's entries about members leave the application's channel entries in force.
    assert check(command=[user(MEMBER, True)], app=[channel(HERE, False)]) == denied(Rule.APPLICATION_CHANNEL)


def test_an_application_channel_allow_grants_nothing_by_itself() -> None:
    assert check(app=[channel(HERE, True)], default=0) == denied(Rule.DEFAULT_NOBODY)


# -- who, at the command's layer: decides for good -------------------------------------------------------------


def test_the_commands_entry_for_the_member_decides_over_roles_and_defaults() -> None:
    assert check(command=[user(MEMBER, True), role(HELPER, False)], default=0) == allowed(Rule.COMMAND_USER)
    assert check(command=[user(MEMBER, True)], default=MANAGE_GUILD) == allowed(Rule.COMMAND_USER)
    assert check(command=[user(MEMBER, False), role(HELPER, True), role(EVERYONE, True)]) == denied(
        Rule.COMMAND_USER
    )


def test_an_entry_for_someone_else_is_not_the_members() -> None:
    assert check(command=[user(SOMEONE_ELSE, False)]) == allowed(Rule.DEFAULT_EVERYONE)
    assert check(command=[user(SOMEONE_ELSE, True)], default=0) == denied(Rule.DEFAULT_NOBODY)


@pytest.mark.parametrize(("entries", "expected"), [
    ([role(HELPER, True)], True),
    ([role(HELPER, False)], False),
    ([role(HELPER, True), role(PATRON, False)], True),  # one allowed role is enough
    ([role(HELPER, False), role(PATRON, True)], True),
    ([role(HELPER, False), role(PATRON, False)], False),  # every one of them denied
])
def test_the_commands_entries_for_the_members_roles_allow_if_one_allows(
    entries: list[PermissionEntry], expected: bool
) -> None:
    assert check(command=entries, default=0) == Decision(expected, Rule.COMMAND_ROLES)


def test_the_members_roles_come_before_everyone() -> None:
    assert check(command=[role(HELPER, False), role(EVERYONE, True)]) == denied(Rule.COMMAND_ROLES)
    assert check(command=[role(HELPER, True), role(EVERYONE, False)]) == allowed(Rule.COMMAND_ROLES)


def test_entries_for_roles_the_member_lacks_do_not_count() -> None:
    assert check(command=[role(STRANGER_ROLE, True), role(EVERYONE, False)]) == denied(Rule.COMMAND_EVERYONE)
    assert check(command=[role(STRANGER_ROLE, False)]) == allowed(Rule.DEFAULT_EVERYONE)
    assert check(command=[role(HELPER, True)], roles=()) == allowed(Rule.DEFAULT_EVERYONE)


def test_the_everyone_role_among_the_members_roles_is_not_a_role_of_theirs() -> None:
    # discord.py's Member.roles holds @everyone: it must not turn the @everyone allow into a role allow.
    entries = [role(HELPER, False), role(EVERYONE, True)]
    assert check(command=entries, roles=(EVERYONE, HELPER)) == denied(Rule.COMMAND_ROLES)
    assert check(command=[role(EVERYONE, False)], roles=(EVERYONE,)) == denied(Rule.COMMAND_EVERYONE)


def test_the_commands_entry_for_everyone_decides_over_the_default() -> None:
    assert check(command=[role(EVERYONE, True)], default=0) == allowed(Rule.COMMAND_EVERYONE)
    assert check(command=[role(EVERYONE, True)], default=MANAGE_GUILD) == allowed(Rule.COMMAND_EVERYONE)
    assert check(command=[role(EVERYONE, False)], default=None) == denied(Rule.COMMAND_EVERYONE)


@pytest.mark.parametrize("command", [[user(MEMBER, True)], [role(PATRON, True)], [role(EVERYONE, True)]])
@pytest.mark.parametrize("app", [[user(MEMBER, False)], [role(HELPER, False)], [role(EVERYONE, False)]])
def test_an_allow_on_the_command_overrides_a_deny_on_the_application(
    command: list[PermissionEntry], app: list[PermissionEntry]
) -> None:
    assert check(command=command, app=app, default=0).allowed


@pytest.mark.parametrize("command", [[user(MEMBER, False)], [role(PATRON, False)], [role(EVERYONE, False)]])
def test_a_deny_on_the_command_overrides_an_allow_on_the_application(command: list[PermissionEntry]) -> None:
    assert not check(command=command, app=[user(MEMBER, True), role(EVERYONE, True)]).allowed


def test_entries_of_another_command_do_not_apply() -> None:
    assert check(extra={OTHER_COMMAND: [user(MEMBER, False), channel(HERE, False)]}) == allowed(
        Rule.DEFAULT_EVERYONE
    )
    assert check(extra={OTHER_COMMAND: [user(MEMBER, True)]}, default=0) == denied(Rule.DEFAULT_NOBODY)


# -- who, at the application's layer: only a deny decides --------------------------------------------------


def test_the_applications_entry_for_the_member_denies_or_leaves_it_to_the_default() -> None:
    assert check(app=[user(MEMBER, False), role(HELPER, True)]) == denied(Rule.APPLICATION_USER)
    assert check(app=[user(MEMBER, True), role(EVERYONE, False)]) == allowed(Rule.DEFAULT_EVERYONE)
    assert check(app=[user(MEMBER, True)], default=0) == denied(Rule.DEFAULT_NOBODY)
    assert check(app=[user(MEMBER, True)], default=MANAGE_GUILD) == denied(Rule.DEFAULT_PERMISSIONS)
    assert check(app=[user(MEMBER, True)], default=MANAGE_GUILD, permissions=MANAGE_GUILD) == allowed(
        Rule.DEFAULT_PERMISSIONS
    )


@pytest.mark.parametrize(("entries", "expected"), [
    ([role(HELPER, True), role(PATRON, False)], allowed(Rule.DEFAULT_EVERYONE)),
    ([role(HELPER, False), role(PATRON, False)], denied(Rule.APPLICATION_ROLES)),
    ([role(HELPER, False), role(EVERYONE, True)], denied(Rule.APPLICATION_ROLES)),
    ([role(HELPER, True), role(EVERYONE, False)], allowed(Rule.DEFAULT_EVERYONE)),
    ([role(STRANGER_ROLE, True), role(EVERYONE, False)], denied(Rule.APPLICATION_EVERYONE)),
    ([role(EVERYONE, True)], allowed(Rule.DEFAULT_EVERYONE)),
])
def test_the_applications_entries_for_roles_and_everyone(entries: list[PermissionEntry], expected: Decision) -> None:
    assert check(app=entries) == expected


def test_an_application_allow_does_not_lift_the_commands_default() -> None:
    for entries in ([role(HELPER, True)], [role(EVERYONE, True)]):
        assert check(app=entries, default=0) == denied(Rule.DEFAULT_NOBODY)
        assert check(app=entries, default=BAN_MEMBERS) == denied(Rule.DEFAULT_PERMISSIONS)


def test_command_entries_that_miss_the_member_fall_back_to_the_application() -> None:
    assert check(command=[role(STRANGER_ROLE, True)], app=[role(EVERYONE, False)]) == denied(
        Rule.APPLICATION_EVERYONE
    )
    assert check(command=[user(SOMEONE_ELSE, True)], app=[user(MEMBER, False)]) == denied(Rule.APPLICATION_USER)


# -- entries the docs do not foresee ----------------------------------------------------------------------


def test_of_two_entries_for_one_target_the_deny_wins() -> None:
    assert check(command=[user(MEMBER, True), user(MEMBER, False)]) == denied(Rule.COMMAND_USER)
    assert check(command=[channel(HERE, True), channel(HERE, False)]) == denied(Rule.COMMAND_CHANNEL)
    assert check(command=[role(EVERYONE, False), role(EVERYONE, True)]) == denied(Rule.COMMAND_EVERYONE)


def test_an_entry_matches_by_type_as_well_as_id() -> None:
    assert check(command=[role(HERE, False)]) == allowed(Rule.DEFAULT_EVERYONE)  # a role id, not the channel
    assert check(command=[user(EVERYONE, False)]) == allowed(Rule.DEFAULT_EVERYONE)  # not the @everyone role
    assert check(command=[channel(MEMBER, False), channel(HELPER, False)]) == allowed(Rule.DEFAULT_EVERYONE)
    assert check(command=[PermissionEntry(MEMBER, 4, False)]) == allowed(Rule.DEFAULT_EVERYONE)  # a type to come


# -- reading Discord's payloads ---------------------------------------------------------------------------


PAYLOAD = {
    "id": str(COMMAND),
    "application_id": str(APP),
    "guild_id": str(GUILD),
    "permissions": [
        {"id": str(HELPER), "type": 1, "permission": True},
        {"id": str(ALL_CHANNELS), "type": 3, "permission": False},
    ],
}


def test_a_permissions_object_is_read_from_discords_json() -> None:
    assert CommandPermissions.from_payload(PAYLOAD) == CommandPermissions(
        COMMAND, APP, GUILD, (role(HELPER, True), channel(ALL_CHANNELS, False))
    )


@pytest.mark.parametrize(("change", "message"), [
    ({"id": "not-a-snowflake"}, "id must be a snowflake"),
    ({"guild_id": None}, "guild_id must be a snowflake"),
    ({"application_id": True}, "application_id must be a snowflake"),
    ({"id": "-5"}, "id must be a snowflake"),
    ({"permissions": None}, "permissions must be a list"),
    ({"permissions": ["x"]}, "must be an object"),
    ({"permissions": [{"id": "1", "type": "1", "permission": True}]}, "type must be an integer"),
    ({"permissions": [{"id": "1", "type": True, "permission": True}]}, "type must be an integer"),
    ({"permissions": [{"id": "1", "type": 1, "permission": "true"}]}, "permission must be true or false"),
    ({"permissions": [{"id": [], "type": 1, "permission": True}]}, "id must be a snowflake"),
])
def test_a_malformed_permissions_object_is_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CommandPermissions.from_payload({**PAYLOAD, **change})


def test_entries_by_target_indexes_one_guilds_objects_the_latest_winning() -> None:
    command = CommandPermissions.from_payload(PAYLOAD)
    whole_app = CommandPermissions(APP, APP, GUILD, (role(EVERYONE, False),))
    newer = CommandPermissions(COMMAND, APP, GUILD, (user(MEMBER, True),))
    assert entries_by_target([command, whole_app, newer]) == {
        COMMAND: (user(MEMBER, True),), APP: (role(EVERYONE, False),)
    }
    assert entries_by_target([]) == {}
    elsewhere = CommandPermissions(COMMAND, APP, GUILD + 1, ())
    with pytest.raises(ValueError, match="several guilds"):
        entries_by_target([command, elsewhere])


@pytest.mark.parametrize(("value", "expected"), [(None, None), ("0", 0), ("32", 32), (8, 8), (0, 0)])
def test_default_member_permissions_are_read_as_a_bit_set(value: str | int | None, expected: int | None) -> None:
    assert parse_default_member_permissions(value) == expected


@pytest.mark.parametrize("value", [True, "-1", -8, "manage", "1.5"])
def test_a_default_member_permissions_that_is_no_bit_set_is_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_default_member_permissions(value)


def test_a_decision_as_the_bot_would_make_it_from_discords_json() -> None:
    """An admin allowed @helper on the command and denied @everyone on the whole application; the command needs
    Manage Server by default. A helper without Manage Server may use it; a member without the role may not."""
    listed = [
        PAYLOAD,
        {"id": str(APP), "application_id": str(APP), "guild_id": str(GUILD),
         "permissions": [{"id": str(GUILD), "type": 1, "permission": False}]},
    ]
    targets = entries_by_target(CommandPermissions.from_payload(p) for p in listed)
    common: dict[str, Any] = {
        "command_id": COMMAND, "application_id": APP, "guild_id": GUILD, "user_id": MEMBER,
        "member_permissions": SEND_MESSAGES, "default_member_permissions": parse_default_member_permissions("32"),
        "entries_by_target": targets,
    }
    # The command's "all channels" deny refuses it everywhere but where an entry says otherwise.
    assert not may_use(channel_id=HERE, role_ids=[GUILD, HELPER], **common)
    targets[COMMAND] = (*targets[COMMAND], channel(HERE, True))
    assert may_use(channel_id=HERE, role_ids=[GUILD, HELPER], **common)
    assert not may_use(channel_id=HERE, role_ids=[GUILD], **common)


def test_command_access_decides_for_each_member_as_decide_does() -> None:
    entries = entries_by_target([
        CommandPermissions(COMMAND, APP, GUILD, (role(HELPER, False),)),
        CommandPermissions(APP, APP, GUILD, (channel(THERE, False),)),
    ])
    access = CommandAccess(COMMAND, APP, GUILD, None, entries)
    assert access.decide(user_id=MEMBER, role_ids=[HELPER], channel_id=HERE, member_permissions=SEND_MESSAGES) \
        == Decision(False, Rule.COMMAND_ROLES)
    assert access.decide(user_id=SOMEONE_ELSE, role_ids=[], channel_id=THERE, member_permissions=SEND_MESSAGES) \
        == Decision(False, Rule.APPLICATION_CHANNEL)
    assert access.decide(user_id=SOMEONE_ELSE, role_ids=[], channel_id=HERE, member_permissions=SEND_MESSAGES) \
        == Decision(True, Rule.DEFAULT_EVERYONE)
    nobody = CommandAccess(COMMAND, APP, GUILD, 0, {})
    assert not nobody.decide(user_id=MEMBER, role_ids=[], channel_id=HERE, member_permissions=SEND_MESSAGES).allowed
    assert nobody.decide(user_id=MEMBER, role_ids=[], channel_id=HERE, member_permissions=ADMINISTRATOR).allowed
