"""bot/frontend/permissions.py: what a spending click reads from Discord, with fakes specced against discord.py.

The member now (the interaction's in the server; fetched for a click in a DM, gone after a 404), /video's id from the
synced commands, and the guild's command permissions read once and kept current by the gateway's updates; whatever
cannot be read refuses, never allows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any
from unittest.mock import AsyncMock, MagicMock

import aiohttp
import discord
import pytest
from discord import app_commands

from bot.community.command_permissions import CommandPermissions, PermissionEntry
from bot.community.trust import Membership, Standing
from bot.frontend.permissions import (
    MISS_SECONDS,
    AccessUnreadable,
    GuildPermissions,
    SpendingAccess,
    SyncedCommand,
    SyncedCommands,
)
from tests.conftest import Clock

APP = 900_000_000_000_000_001
GUILD = 800_000_000_000_000_001
OTHER_GUILD = 800_000_000_000_000_002
CHANNEL = 700_000_000_000_000_001
THREAD = 700_000_000_000_000_009
VIDEO_ID = 910_000_000_000_000_001
USER = 600_000_000_000_000_001
ROLE = 610_000_000_000_000_001
SEND_MESSAGES = 1 << 11


def http_error(status: int, code: int = 0) -> discord.HTTPException:
    response = MagicMock(spec=aiohttp.ClientResponse)
    response.status = status
    response.reason = "error"
    kind = {403: discord.Forbidden, 404: discord.NotFound}.get(status, discord.HTTPException)
    if status >= 500:
        kind = discord.DiscordServerError
    return kind(response, {"code": code, "message": "error"})


def payload(target: int, *entries: tuple[int, int, bool], guild: int = GUILD) -> dict[str, Any]:
    return {"id": str(target), "application_id": str(APP), "guild_id": str(guild),
            "permissions": [{"id": str(i), "type": t, "permission": p} for i, t, p in entries]}


def update(target: int, *entries: tuple[int, int, bool], guild: int = GUILD) -> CommandPermissions:
    return CommandPermissions.from_payload(payload(target, *entries, guild=guild))


class Reader:
    """A guild's permissions as Discord answers them, counting the reads; `gate` holds a read until set."""

    def __init__(self, answer: Sequence[Mapping[str, Any]] = ()) -> None:
        self.answer = list(answer)
        self.reads = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.error: BaseException | None = None

    async def __call__(self, guild_id: int) -> Sequence[Mapping[str, Any]]:
        self.reads += 1
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return list(self.answer)


# -- the guild's command permissions -------------------------------------------------------------------------


async def test_a_guilds_permissions_are_read_once_for_every_click_at_once() -> None:
    reader = Reader([payload(VIDEO_ID, (ROLE, 1, False))])
    permissions = GuildPermissions(reader)
    reader.gate.clear()
    waiting = [asyncio.ensure_future(permissions.entries(GUILD)) for _ in range(5)]
    await asyncio.sleep(0)
    reader.gate.set()
    answers = await asyncio.gather(*waiting)
    assert answers == [{VIDEO_ID: (PermissionEntry(ROLE, 1, False),)}] * 5
    await permissions.entries(GUILD)
    assert reader.reads == 1


async def test_a_gateway_update_replaces_its_targets_entries_and_none_clears_them() -> None:
    reader = Reader([payload(VIDEO_ID, (ROLE, 1, False)), payload(APP, (GUILD - 1, 3, True))])
    permissions = GuildPermissions(reader)
    await permissions.entries(GUILD)
    permissions.update(update(VIDEO_ID, (USER, 2, True)))
    assert await permissions.entries(GUILD) == {VIDEO_ID: (PermissionEntry(USER, 2, True),),
                                                APP: (PermissionEntry(GUILD - 1, 3, True),)}
    permissions.update(update(VIDEO_ID))
    assert await permissions.entries(GUILD) == {APP: (PermissionEntry(GUILD - 1, 3, True),)}
    # Another guild's update is kept for nobody: that guild is read when first needed.
    permissions.update(update(APP, (OTHER_GUILD, 1, False), guild=OTHER_GUILD))
    reader.answer = []
    assert await permissions.entries(OTHER_GUILD) == {}
    assert reader.reads == 2


async def test_an_update_while_the_read_is_on_its_way_is_applied_on_top_of_it() -> None:
    reader = Reader([payload(VIDEO_ID, (ROLE, 1, True))])  # read before the admin's change
    permissions = GuildPermissions(reader)
    reader.gate.clear()
    reading = asyncio.ensure_future(permissions.entries(GUILD))
    await asyncio.sleep(0)
    permissions.update(update(VIDEO_ID, (ROLE, 1, False)))
    reader.gate.set()
    assert await reading == {VIDEO_ID: (PermissionEntry(ROLE, 1, False),)}
    assert await permissions.entries(GUILD) == {VIDEO_ID: (PermissionEntry(ROLE, 1, False),)}


@pytest.mark.parametrize("error", [http_error(500), http_error(403, 50001), aiohttp.ClientConnectionError("reset"),
                                   TimeoutError()])
async def test_a_read_that_fails_is_unreadable_and_is_tried_again_next_time(error: BaseException) -> None:
    reader = Reader([payload(VIDEO_ID, (ROLE, 1, False))])
    reader.error = error
    permissions = GuildPermissions(reader)
    with pytest.raises(AccessUnreadable, match=f"server {GUILD}"):
        await permissions.entries(GUILD)
    reader.error = None
    assert VIDEO_ID in await permissions.entries(GUILD)
    assert reader.reads == 2


async def test_an_answer_not_in_discords_shape_is_unreadable() -> None:
    permissions = GuildPermissions(Reader([{"id": "1", "application_id": str(APP), "guild_id": str(GUILD),
                                            "permissions": [{"id": "2", "type": "role", "permission": True}]}]))
    with pytest.raises(AccessUnreadable, match="type must be an integer"):
        await permissions.entries(GUILD)


async def test_forgetting_reads_again_and_a_read_begun_before_is_not_kept() -> None:
    reader = Reader([payload(VIDEO_ID, (ROLE, 1, True))])
    permissions = GuildPermissions(reader)
    await permissions.entries(GUILD)
    permissions.forget(GUILD)
    await permissions.entries(GUILD)
    assert reader.reads == 2
    reader.gate.clear()
    reading = asyncio.ensure_future(permissions.entries(GUILD))
    permissions.forget()  # with a read of GUILD not yet begun: nothing to drop
    await asyncio.sleep(0)
    permissions.forget()  # a gateway session was replaced while the read was on its way
    reader.gate.set()
    assert VIDEO_ID in await reading
    await permissions.entries(GUILD)
    assert reader.reads == 4


# -- /video as registered -----------------------------------------------------------------------------------


def app_command(name: str, command_id: int, default: int | None = None) -> MagicMock:
    command = MagicMock(spec=app_commands.AppCommand)
    command.name = name
    command.id = command_id
    command.default_member_permissions = discord.Permissions(default) if default is not None else None
    return command


async def test_video_is_known_from_the_sync_or_else_read_once_per_scope() -> None:
    read = AsyncMock(return_value=[app_command("status", 1), app_command("video", VIDEO_ID, 1 << 5)])
    commands = SyncedCommands(read)
    commands.remember(GUILD, [app_command("video", 42)])
    assert await commands.get(GUILD) == SyncedCommand(42, None)
    assert read.await_count == 0
    assert await commands.get(None) == SyncedCommand(VIDEO_ID, 1 << 5)
    assert await commands.get(None) == SyncedCommand(VIDEO_ID, 1 << 5)
    assert read.await_args_list == [((None,),)]
    read.return_value = [app_command("status", 1)]
    assert await SyncedCommands(read).get(None) is None  # not registered there


async def test_video_not_registered_is_read_again_after_a_while_not_kept_for_good() -> None:
    # Another process syncs /video after this one found it missing: the clicks are refused only for a while.
    clock = Clock(1_000.0)
    read = AsyncMock(return_value=[app_command("status", 1)])
    commands = SyncedCommands(read, clock=clock)
    assert await commands.get(GUILD) is None
    read.return_value = [app_command("video", VIDEO_ID)]
    clock.now += MISS_SECONDS - 1
    assert await commands.get(GUILD) is None  # the miss is kept briefly: not one read per click
    assert read.await_count == 1
    clock.now += 1
    assert await commands.get(GUILD) == SyncedCommand(VIDEO_ID, None)
    clock.now += 100 * MISS_SECONDS
    assert await commands.get(GUILD) == SyncedCommand(VIDEO_ID, None)  # found: kept
    assert read.await_count == 2
    # A sync of this process that registered no /video is a miss like any other.
    commands.remember(None, [app_command("status", 1)])
    assert await commands.get(None) is None
    clock.now += MISS_SECONDS
    assert await commands.get(None) == SyncedCommand(VIDEO_ID, None)


async def test_commands_that_cannot_be_read_are_unreadable_and_read_again() -> None:
    read = AsyncMock(side_effect=[http_error(503), [app_command("video", VIDEO_ID)]])
    commands = SyncedCommands(read)
    with pytest.raises(AccessUnreadable, match="HTTP 503"):
        await commands.get(None)
    assert await commands.get(None) == SyncedCommand(VIDEO_ID, None)


# -- the member now -------------------------------------------------------------------------------------------


def role(role_id: int) -> MagicMock:
    fake = MagicMock(spec=discord.Role)
    fake.id = role_id
    return fake


def member(*role_ids: int, guild_permissions: int = SEND_MESSAGES) -> MagicMock:
    fake = MagicMock(spec=discord.Member)
    fake.id = USER
    fake.roles = [role(GUILD), *(role(r) for r in role_ids)]
    fake.guild_permissions = discord.Permissions(guild_permissions)
    return fake


def click(*, in_guild: bool, channel_id: int = CHANNEL, roles: Sequence[int] = (), permissions: int = SEND_MESSAGES
          ) -> MagicMock:
    interaction = MagicMock(spec=discord.Interaction)
    interaction.guild_id = GUILD if in_guild else None
    interaction.channel_id = channel_id
    if in_guild:
        interaction.user = member(*roles)
        interaction.permissions = discord.Permissions(permissions)
    else:
        interaction.user = MagicMock(spec=discord.User)
        interaction.user.id = USER
        interaction.permissions = discord.Permissions.none()
    return interaction


def client_with(guild: MagicMock | None, *, fetched: MagicMock | None = None) -> MagicMock:
    client = MagicMock(spec=discord.Client)
    client.application_id = APP
    client.get_guild.return_value = guild
    client.fetch_guild = AsyncMock(return_value=fetched)
    client.get_channel.return_value = None
    return client


def guild_with(fetch: Any, channel: Any = None) -> MagicMock:
    guild = MagicMock(spec=discord.Guild)
    guild.id = GUILD
    guild.fetch_member = AsyncMock(side_effect=fetch) if isinstance(fetch, BaseException) else \
        AsyncMock(return_value=fetch)
    guild.get_channel_or_thread.return_value = channel
    return guild


def access_for(client: MagicMock, *, reader: Reader | None = None, read_seconds: float = 2.0) -> SpendingAccess:
    commands = SyncedCommands(AsyncMock(return_value=[app_command("video", VIDEO_ID)]))
    return SpendingAccess(client, commands, GuildPermissions(reader or Reader()), read_seconds=read_seconds)


async def test_a_click_in_the_server_is_the_interactions_member_with_no_read() -> None:
    client = client_with(None)
    access = access_for(client)
    now = await access.member(click(in_guild=True, roles=[ROLE], permissions=SEND_MESSAGES), GUILD, CHANNEL)
    assert now == Membership(frozenset({GUILD, ROLE}), SEND_MESSAGES, CHANNEL)
    client.fetch_guild.assert_not_awaited()


async def test_a_click_in_a_dm_fetches_the_member_with_their_roles_and_channel_permissions() -> None:
    fetched = member(ROLE)
    channel = MagicMock(spec=discord.TextChannel)
    channel.permissions_for.return_value = discord.Permissions(SEND_MESSAGES | (1 << 3))
    guild = guild_with(fetched, channel)
    access = access_for(client_with(guild))
    now = await access.member(click(in_guild=False), GUILD, CHANNEL)
    assert now == Membership(frozenset({GUILD, ROLE}), SEND_MESSAGES | (1 << 3), CHANNEL)
    guild.fetch_member.assert_awaited_once_with(USER)
    channel.permissions_for.assert_called_once_with(fetched)
    guild.get_channel_or_thread.assert_called_once_with(CHANNEL)


async def test_a_request_in_a_thread_is_checked_for_the_threads_channel() -> None:
    thread = MagicMock(spec=discord.Thread)
    thread.parent_id = CHANNEL
    thread.permissions_for.return_value = discord.Permissions(SEND_MESSAGES)
    access = access_for(client_with(guild_with(member(), thread)))
    assert (await access.member(click(in_guild=False), GUILD, THREAD)).channel_id == CHANNEL  # type: ignore[union-attr]


async def test_a_dm_click_for_a_server_of_another_process_fetches_the_server_too() -> None:
    fetched_guild = guild_with(member(ROLE, guild_permissions=1 << 3), None)
    client = client_with(None, fetched=fetched_guild)
    now = await access_for(client).member(click(in_guild=False), GUILD, CHANNEL)
    client.fetch_guild.assert_awaited_once_with(GUILD)
    assert now == Membership(frozenset({GUILD, ROLE}), 1 << 3, CHANNEL)  # the server-wide permissions


@pytest.mark.parametrize("gone", [http_error(404, 10007), http_error(403, 50001)])
async def test_a_dm_click_from_someone_no_longer_in_the_server_finds_no_member(gone: discord.HTTPException) -> None:
    access = access_for(client_with(guild_with(gone)))
    assert await access.member(click(in_guild=False), GUILD, CHANNEL) is None


async def test_a_membership_discord_cannot_tell_now_is_unreadable() -> None:
    access = access_for(client_with(guild_with(http_error(502))))
    with pytest.raises(AccessUnreadable, match="membership of server"):
        await access.member(click(in_guild=False), GUILD, CHANNEL)


# -- the clicker: member and /video together --------------------------------------------------------------------


async def test_the_standing_carries_videos_access_in_the_server() -> None:
    reader = Reader([payload(VIDEO_ID, (ROLE, 1, False))])
    access = access_for(client_with(guild_with(member(ROLE))), reader=reader)
    standing = await access.standing(click(in_guild=False), GUILD, CHANNEL)
    assert standing.readable and standing.member is not None and standing.video is not None
    assert (standing.video.command_id, standing.video.application_id, standing.video.guild_id) == (VIDEO_ID, APP, GUILD)
    assert not standing.video.decide(user_id=USER, role_ids=standing.member.role_ids, channel_id=CHANNEL,
                                     member_permissions=standing.member.permissions).allowed


async def test_a_former_member_stands_nowhere_and_the_permissions_are_not_read() -> None:
    reader = Reader()
    access = access_for(client_with(guild_with(http_error(404, 10007))), reader=reader)
    assert await access.standing(click(in_guild=False), GUILD, CHANNEL) == Standing(True)
    assert reader.reads == 0


async def test_discord_slower_than_the_clicks_deadline_is_unreadable_and_logged(
    caplog: pytest.LogCaptureFixture
) -> None:
    reader = Reader()
    reader.gate.clear()
    access = access_for(client_with(guild_with(member())), reader=reader, read_seconds=0.05)
    assert await access.standing(click(in_guild=True), GUILD, CHANNEL) == Standing.unreadable()
    assert "did not answer within 0.05 s" in caplog.text


async def test_a_permissions_read_that_fails_is_unreadable_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    reader = Reader()
    reader.error = http_error(500)
    access = access_for(client_with(guild_with(member())), reader=reader)
    assert await access.standing(click(in_guild=True), GUILD, CHANNEL) == Standing.unreadable()
    assert f"command permissions of server {GUILD} could not be read (HTTP 500" in caplog.text


async def test_video_not_registered_where_the_click_is_is_unreadable() -> None:
    client = client_with(guild_with(member()))
    commands = SyncedCommands(AsyncMock(return_value=[]))
    access = SpendingAccess(client, commands, GuildPermissions(Reader()))
    with pytest.raises(AccessUnreadable, match="not registered for every server"):
        await access.video(GUILD)


async def test_the_command_guild_is_read_in_its_own_scope_and_others_globally() -> None:
    read = AsyncMock(return_value=[app_command("video", VIDEO_ID)])
    access = SpendingAccess(client_with(None), SyncedCommands(read), GuildPermissions(Reader()),
                            command_guild_id=GUILD)
    await access.video(GUILD)
    await access.video(OTHER_GUILD)
    assert read.await_args_list == [((GUILD,),), ((None,),)]


async def test_a_gateway_update_reaches_the_cache_and_another_applications_does_not() -> None:
    reader = Reader()
    access = access_for(client_with(None), reader=reader)
    await access.permissions.entries(GUILD)

    def event(application_id: int) -> MagicMock:
        raw = MagicMock(spec=discord.RawAppCommandPermissionsUpdateEvent)
        raw.target_id, raw.application_id = VIDEO_ID, application_id
        raw.guild = MagicMock(spec=discord.Guild)
        raw.guild.id = GUILD
        entry = MagicMock(spec=app_commands.AppCommandPermissions)
        entry.id, entry.type, entry.permission = ROLE, discord.AppCommandPermissionType.role, False
        raw.permissions = [entry]
        return raw

    access.updated(event(APP + 1))
    assert await access.permissions.entries(GUILD) == {}
    access.updated(event(APP))
    assert await access.permissions.entries(GUILD) == {VIDEO_ID: (PermissionEntry(ROLE, 1, False),)}
