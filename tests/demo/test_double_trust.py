"""The double answers who may act as Discord does: the Public Bot switch, who is still a member, and the command
permissions an admin sets under Server Settings > Integrations, seen by the real discord.py client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands
from discord.ext import commands

from tests.discord_double import DiscordDouble

REQUESTER_ID = 600_000_000_000_000_001
BYSTANDER_ID = 600_000_000_000_000_002
MODERATOR_ROLE = 610_000_000_000_000_001
ROLE, USER, CHANNEL = 1, 2, 3
AUTH = {"Authorization": "Bot double-token"}
MANAGE_GUILD = 1 << 5


@pytest.fixture
async def double(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DiscordDouble]:
    fake = DiscordDouble()
    fake.add_member(REQUESTER_ID, name="requester", roles=[MODERATOR_ROLE])
    fake.add_member(BYSTANDER_ID, name="bystander")
    await fake.start()
    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url))
    try:
        yield fake
    finally:
        await fake.stop()


class Bot(commands.Bot):
    """A real discord.py bot that records the raw events this file is about."""

    def __init__(self, guild_id: int) -> None:
        intents = discord.Intents.default()
        intents.members = True
        super().__init__(command_prefix="!", intents=intents, guild_ready_timeout=0.2)
        self.removed: asyncio.Queue[discord.RawMemberRemoveEvent] = asyncio.Queue()
        self.permission_updates: asyncio.Queue[discord.RawAppCommandPermissionsUpdateEvent] = asyncio.Queue()
        self.interactions: asyncio.Queue[discord.Interaction] = asyncio.Queue()
        self.clicks: asyncio.Queue[discord.Interaction] = asyncio.Queue()
        guild = discord.Object(guild_id)

        @app_commands.command(name="video", description="Turn a prompt into a short video")
        async def video(interaction: discord.Interaction, prompt: str) -> None:
            await self.interactions.put(interaction)

        @app_commands.command(name="settings", description="The server's settings")
        @app_commands.default_permissions(manage_guild=True)
        async def settings(interaction: discord.Interaction) -> None:
            await self.interactions.put(interaction)

        self.tree.add_command(video, guild=guild)
        self.tree.add_command(settings, guild=guild)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is discord.InteractionType.component:
            await interaction.response.send_message("seen", ephemeral=True)
            await self.clicks.put(interaction)

    async def on_raw_member_remove(self, payload: discord.RawMemberRemoveEvent) -> None:
        await self.removed.put(payload)

    async def on_raw_app_command_permissions_update(self, payload: discord.RawAppCommandPermissionsUpdateEvent) -> None:
        await self.permission_updates.put(payload)


@pytest.fixture
async def bot(double: DiscordDouble) -> AsyncIterator[Bot]:
    client = Bot(double.guild_id)
    await client.login("double-token")
    runner = asyncio.create_task(client.connect(reconnect=False))
    try:
        await double.wait_ready()
        await asyncio.wait_for(client.wait_until_ready(), 10)
        yield client
    finally:
        await client.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(runner, 5)


async def next_of(queue: asyncio.Queue[Any]) -> Any:
    return await asyncio.wait_for(queue.get(), 5)


# -- the Public Bot switch ---------------------------------------------------------------------------------


async def test_bot_public_is_on_by_default_and_follows_the_switch(double: DiscordDouble) -> None:
    client = discord.Client(intents=discord.Intents.none())
    await client.login("double-token")
    try:
        assert (await client.application_info()).bot_public is True
        double.bot_public = False  # the owner turns "Public Bot" off in the Developer Portal
        assert (await client.application_info()).bot_public is False
    finally:
        await client.close()
    async with aiohttp.ClientSession() as http:
        answer = await http.get(f"{double.api_base}/applications/@me", headers=AUTH)
        assert (await answer.json())["bot_public"] is False


async def test_bot_public_can_start_off() -> None:
    async with DiscordDouble(bot_public=False) as private, aiohttp.ClientSession() as http:
        answer = await http.get(f"{private.api_base}/applications/@me", headers=AUTH)
        assert answer.status == 200 and (await answer.json())["bot_public"] is False


# -- members -----------------------------------------------------------------------------------------------


async def test_a_member_is_fetched_with_roles_and_join_time_until_they_leave(double: DiscordDouble, bot: Bot) -> None:
    guild = bot.get_guild(double.guild_id)
    assert guild is not None
    member = await guild.fetch_member(REQUESTER_ID)
    assert member.id == REQUESTER_ID and member.name == "requester"
    assert [role.id for role in member.roles if not role.is_default()] == [MODERATOR_ROLE]
    assert member.joined_at is not None

    await double.remove_member(double.guild_id, REQUESTER_ID)
    removed = await next_of(bot.removed)
    assert (removed.guild_id, removed.user.id) == (double.guild_id, REQUESTER_ID)
    assert guild.get_member(REQUESTER_ID) is None and guild.get_member(BYSTANDER_ID) is not None
    assert not double.is_member(double.guild_id, REQUESTER_ID)
    with pytest.raises(discord.NotFound) as gone:
        await guild.fetch_member(REQUESTER_ID)
    assert gone.value.code == 10007
    # Still a Discord user: the bot can look them up and write to them.
    assert (await bot.fetch_user(REQUESTER_ID)).name == "requester"
    # A member list asked for over the gateway leaves them out.
    assert REQUESTER_ID not in {m.id for m in await guild.query_members(user_ids=[REQUESTER_ID, BYSTANDER_ID])}
    # Discord shows a former member nothing in the guild: the double runs nothing for them.
    await bot.tree.sync(guild=guild)
    with pytest.raises(LookupError, match="no longer a member"):
        await double.send_slash_command("video", {"prompt": "a cat"}, user_id=REQUESTER_ID)
    with pytest.raises(LookupError, match="not a member"):
        await double.remove_member(double.guild_id, REQUESTER_ID)

    double.add_member(REQUESTER_ID, name="requester", guild_id=double.guild_id)  # they rejoin
    assert (await guild.fetch_member(REQUESTER_ID)).id == REQUESTER_ID
    await double.send_slash_command("video", {"prompt": "a cat"}, user_id=REQUESTER_ID)
    assert (await next_of(bot.interactions)).user.id == REQUESTER_ID


async def test_leaving_one_guild_keeps_the_others_and_a_stranger_is_unknown(double: DiscordDouble) -> None:
    other = double.add_guild()
    with pytest.raises(ValueError, match="not one of"):
        await double.remove_member(other + 1, REQUESTER_ID)
    with pytest.raises(ValueError, match="bot"):
        await double.remove_member(other, double.bot_user_id)
    await double.remove_member(other, REQUESTER_ID)
    async with aiohttp.ClientSession() as http:

        async def member(guild_id: int, user_id: int) -> tuple[int, Any]:
            answer = await http.get(f"{double.api_base}/guilds/{guild_id}/members/{user_id}", headers=AUTH)
            return answer.status, await answer.json()

        status, body = await member(double.guild_id, REQUESTER_ID)
        assert status == 200
        assert body["user"]["id"] == str(REQUESTER_ID) and body["roles"] == [str(MODERATOR_ROLE)]
        assert {"joined_at", "nick", "deaf", "mute", "flags", "pending"} <= body.keys()
        assert await member(other, REQUESTER_ID) == (404, {"code": 10007, "message": "Unknown Member"})
        assert await member(double.guild_id, 600_000_000_000_000_999) == (
            404, {"code": 10007, "message": "Unknown Member"}
        )
        assert (await member(double.guild_id + 7, REQUESTER_ID))[1]["code"] == 10004  # no such guild

        # A bare gateway client with the members intent: the other guild's member list leaves them out.
        gateway = await http.ws_connect(double.gateway_url)
        await gateway.receive_json()
        await gateway.send_json({"op": 2, "d": {"token": "double-token", "intents": 1 | 1 << 1, "properties": {}}})
        async with asyncio.timeout(5):
            frames = [await gateway.receive_json() for _ in range(3)]
        creates = {f["d"]["id"]: f["d"] for f in frames if f["t"] == "GUILD_CREATE"}
        first, second = creates[str(double.guild_id)], creates[str(other)]
        assert str(REQUESTER_ID) in {m["user"]["id"] for m in first["members"]}
        assert str(REQUESTER_ID) not in {m["user"]["id"] for m in second["members"]}
        assert second["member_count"] == first["member_count"] - 1
        await gateway.close()


async def test_a_user_option_naming_a_former_member_resolves_a_user_only(double: DiscordDouble) -> None:
    whois = {
        "name": "whois",
        "description": "Who is that",
        "type": 1,
        "options": [{"name": "who", "description": "A user", "type": 6, "required": True}],
    }
    async with aiohttp.ClientSession() as http:
        put = await http.put(f"{double.api_base}/applications/{double.application_id}/commands", json=[whois],
                             headers=AUTH)
        assert put.status == 200
        gateway = await http.ws_connect(double.gateway_url)
        await gateway.receive_json()
        await gateway.send_json({"op": 2, "d": {"token": "double-token", "intents": 1, "properties": {}}})
        async with asyncio.timeout(5):
            [await gateway.receive_json() for _ in range(2)]  # READY, GUILD_CREATE
        await double.remove_member(double.guild_id, BYSTANDER_ID)  # no GUILD_MEMBERS intent: no event
        await double.send_slash_command("whois", {"who": BYSTANDER_ID}, user_id=REQUESTER_ID)
        await double.send_slash_command("whois", {"who": REQUESTER_ID}, user_id=REQUESTER_ID)
        async with asyncio.timeout(5):
            former, present = [(await gateway.receive_json())["d"]["data"]["resolved"] for _ in range(2)]
        assert list(former) == ["users"] and list(former["users"]) == [str(BYSTANDER_ID)]
        assert list(present["members"]) == [str(REQUESTER_ID)]
        await gateway.close()


# -- application command permissions ----------------------------------------------------------------------


async def synced(bot: Bot, guild_id: int) -> dict[str, app_commands.AppCommand]:
    return {c.name: c for c in await bot.tree.sync(guild=discord.Object(guild_id))}


async def test_default_member_permissions_are_kept_as_the_bot_synced_them(double: DiscordDouble, bot: Bot) -> None:
    answered = await synced(bot, double.guild_id)
    assert answered["settings"].default_member_permissions == discord.Permissions(manage_guild=True)
    # discord.py sends the bit set as a number; Discord keeps and returns it as a string ("?string").
    [put] = [r for r in double.requests if r.method == "PUT"]
    assert {c["name"]: c["default_member_permissions"] for c in put.json} == {"settings": MANAGE_GUILD, "video": None}
    stored = {c["name"]: c for c in double.synced_commands[double.guild_id]}
    assert stored["settings"]["default_member_permissions"] == str(MANAGE_GUILD)
    assert stored["video"]["default_member_permissions"] is None
    fetched = {c.name: c for c in await bot.tree.fetch_commands(guild=discord.Object(double.guild_id))}
    assert fetched["settings"].default_member_permissions == discord.Permissions(manage_guild=True)
    assert fetched["video"].default_member_permissions is None


@pytest.mark.parametrize("value", ["manage", -1, "1.5", True, "²"])
async def test_a_default_member_permissions_that_is_no_bit_set_is_refused(double: DiscordDouble, value: object) -> None:
    command = {"name": "ping", "description": "Answer", "type": 1, "default_member_permissions": value}
    async with aiohttp.ClientSession() as http:
        put = await http.put(f"{double.api_base}/applications/{double.application_id}/commands", json=[command],
                             headers=AUTH)
        assert (put.status, (await put.json())["code"]) == (400, 50035)


async def test_an_admins_command_permissions_reach_the_bot_and_its_requests(double: DiscordDouble, bot: Bot) -> None:
    guild = double.guild_id
    video = (await synced(bot, guild))["video"]
    with pytest.raises(discord.NotFound) as none_yet:
        await video.fetch_permissions(discord.Object(guild))
    assert none_yet.value.code == 10066
    assert await bot.http.get_guild_application_command_permissions(double.application_id, guild) == []

    entries = [
        (MODERATOR_ROLE, ROLE, True), (guild, ROLE, False), (guild - 1, CHANNEL, True), (BYSTANDER_ID, USER, True)
    ]
    saved = await double.set_command_permissions(guild, video.id, entries)
    update = await next_of(bot.permission_updates)
    assert (update.target_id, update.application_id, update.guild.id) == (video.id, double.application_id, guild)
    assert [(p.id, p.type, p.permission) for p in update.permissions] == [
        (MODERATOR_ROLE, discord.AppCommandPermissionType.role, True),
        (guild, discord.AppCommandPermissionType.role, False),
        (guild - 1, discord.AppCommandPermissionType.channel, True),
        (BYSTANDER_ID, discord.AppCommandPermissionType.user, True),
    ]
    assert isinstance(update.permissions[2].target, app_commands.AllChannels)
    fetched = await video.fetch_permissions(discord.Object(guild))
    assert fetched.id == video.id and [(p.id, p.permission) for p in fetched.permissions] == [
        (MODERATOR_ROLE, True), (guild, False), (guild - 1, True), (BYSTANDER_ID, True)
    ]
    assert saved == {
        "id": str(video.id),
        "application_id": str(double.application_id),
        "guild_id": str(guild),
        "permissions": [
            {"id": str(MODERATOR_ROLE), "type": ROLE, "permission": True},
            {"id": str(guild), "type": ROLE, "permission": False},
            {"id": str(guild - 1), "type": CHANNEL, "permission": True},
            {"id": str(BYSTANDER_ID), "type": USER, "permission": True},
        ],
    }

    # For the whole application: the entry's id is the application's.
    await double.set_command_permissions(guild, double.application_id, [(guild, ROLE, False)])
    assert (await next_of(bot.permission_updates)).target_id == double.application_id
    listed = await bot.http.get_guild_application_command_permissions(double.application_id, guild)
    assert sorted(int(p["id"]) for p in listed) == sorted([video.id, double.application_id])
    whole_app = await bot.http.get_application_command_permissions(double.application_id, guild, double.application_id)
    assert whole_app["permissions"] == [{"id": str(guild), "type": ROLE, "permission": False}]

    # The double does not enforce them: the bot's own checks get to see the request.
    await double.send_slash_command("video", {"prompt": "a cat"}, user_id=REQUESTER_ID)
    assert (await next_of(bot.interactions)).user.id == REQUESTER_ID

    # No entries clear a target; a command deleted by the next sync loses its permissions.
    cleared = await double.set_command_permissions(guild, double.application_id, [])
    assert cleared["permissions"] == [] and (await next_of(bot.permission_updates)).permissions == []
    bot.tree.remove_command("video", guild=discord.Object(guild))
    await bot.tree.sync(guild=discord.Object(guild))
    assert await bot.http.get_guild_application_command_permissions(double.application_id, guild) == []
    assert double.unknown_routes == []


async def test_command_permissions_refuse_what_discord_would_not_store(double: DiscordDouble) -> None:
    guild = double.guild_id
    with pytest.raises(ValueError, match="neither the application nor a command"):
        await double.set_command_permissions(guild, 123, [(guild, ROLE, True)])
    with pytest.raises(ValueError, match="not one of the double's"):
        await double.set_command_permissions(guild + 5, double.application_id, [])
    with pytest.raises(ValueError, match="permission type 4"):
        await double.set_command_permissions(guild, double.application_id, [(guild, 4, True)])
    with pytest.raises(ValueError, match="two entries"):
        await double.set_command_permissions(guild, double.application_id, [(guild, ROLE, True), (guild, ROLE, False)])
    too_many = [(n, USER, True) for n in range(1, 102)]
    with pytest.raises(ValueError, match="at most 100"):
        await double.set_command_permissions(guild, double.application_id, too_many)
    async with aiohttp.ClientSession() as http:
        base = f"{double.api_base}/applications"
        foreign = await http.get(f"{base}/{double.application_id + 1}/guilds/{guild}/commands/permissions",
                                 headers=AUTH)
        assert (foreign.status, (await foreign.json())["code"]) == (403, 50001)
        nowhere = await http.get(f"{base}/{double.application_id}/guilds/{guild + 5}/commands/permissions",
                                 headers=AUTH)
        assert (nowhere.status, (await nowhere.json())["code"]) == (403, 50001)
        unset = await http.get(f"{base}/{double.application_id}/guilds/{guild}/commands/{double.application_id}"
                               "/permissions", headers=AUTH)
        assert (unset.status, await unset.json()) == (404, {"code": 10066,
                                                            "message": "Unknown application command permissions"})


async def test_a_permissions_update_goes_to_the_guilds_shard_only() -> None:
    async with DiscordDouble(shard_count=2) as double, aiohttp.ClientSession() as http:
        home = double.shard_of(double.guild_id)
        elsewhere = double.add_guild(shard=1 - home)
        gateways = {}
        for shard in (0, 1):
            gateway = await http.ws_connect(double.gateway_url)
            await gateway.receive_json()
            await gateway.send_json({"op": 2, "d": {"token": "double-token", "intents": 1, "shard": [shard, 2],
                                                    "properties": {}}})
            async with asyncio.timeout(5):
                [await gateway.receive_json() for _ in range(2)]  # READY, GUILD_CREATE
            gateways[shard] = gateway
        await double.set_command_permissions(elsewhere, double.application_id, [(elsewhere - 1, CHANNEL, False)])
        async with asyncio.timeout(5):
            frame = await gateways[1 - home].receive_json()
        assert frame["t"] == "APPLICATION_COMMAND_PERMISSIONS_UPDATE" and frame["d"]["guild_id"] == str(elsewhere)
        # The home shard got nothing: the next frame it sees answers its heartbeat.
        await gateways[home].send_json({"op": 1, "d": None})
        assert (await gateways[home].receive_json())["op"] == 11
        for gateway in gateways.values():
            await gateway.close()


# -- a click in the bot's DM -------------------------------------------------------------------------------


async def test_a_click_on_a_dm_copy_comes_from_the_user_without_a_guild_even_after_they_left(
    double: DiscordDouble, bot: Bot
) -> None:
    view = discord.ui.View(timeout=None).add_item(discord.ui.Button(label="Re-roll", custom_id="video:reroll:1"))
    sent = await (await bot.fetch_user(REQUESTER_ID)).send("your video", view=view)
    [stored] = double.messages[sent.channel.id]
    assert "guild_id" not in stored

    click = await double.send_component(stored, "video:reroll:1", user_id=REQUESTER_ID, roles=[MODERATOR_ROLE])
    seen = await next_of(bot.clicks)
    payload = click.payload
    assert "guild_id" not in payload and "member" not in payload and "guild" not in payload
    assert payload["user"]["id"] == str(REQUESTER_ID) and payload["context"] == 1
    assert payload["authorizing_integration_owners"] == {"0": "0"}
    assert payload["channel"]["type"] == 1 and payload["message"]["id"] == str(sent.id)
    # discord.py sees a user in a DM: no server, no member, no roles.
    assert seen.guild_id is None and seen.guild is None and isinstance(seen.channel, discord.DMChannel)
    assert type(seen.user) is discord.User and seen.user.id == REQUESTER_ID
    assert seen.context.dm_channel and not seen.is_user_integration()
    assert seen.data is not None and seen.data.get("custom_id") == "video:reroll:1"
    assert seen.app_permissions.attach_files and not seen.app_permissions.manage_messages
    assert (await double.wait_for_callback(click.id))["accepted"]

    # A member who left every server still has the DM, and its button still reaches the bot.
    await double.remove_member(double.guild_id, REQUESTER_ID)
    await double.send_component(stored, "video:reroll:1", user_id=REQUESTER_ID)
    assert (await next_of(bot.clicks)).user.id == REQUESTER_ID
    # Nobody else can see the DM, let alone click in it.
    with pytest.raises(LookupError, match="DM with user"):
        await double.send_component(stored, "video:reroll:1", user_id=BYSTANDER_ID)
    assert double.unknown_routes == []
