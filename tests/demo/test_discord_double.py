"""The Discord double speaks enough of Discord for the real discord.py client, in and out of process."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands
from discord.ext import commands

from tests.discord_double import DiscordDouble, bot_process_env, subprocess_env, without_bot_settings

REQUESTER_ID = 600_000_000_000_000_001
BYSTANDER_ID = 600_000_000_000_000_002
# A small limit keeps the oversized uploads small; the double applies it like Discord's 10 MiB.
UPLOAD_LIMIT = 4096
CLIP = bytes(range(256)) * 8  # 2 KiB, under the limit
OVERSIZED = b"\0" * (UPLOAD_LIMIT + 1)


@pytest.fixture
async def double() -> AsyncIterator[DiscordDouble]:
    fake = DiscordDouble(default_upload_limit=UPLOAD_LIMIT)
    fake.add_member(REQUESTER_ID, name="requester")
    fake.add_member(BYSTANDER_ID, name="bystander")
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
def pointed_at_double(double: DiscordDouble, monkeypatch: pytest.MonkeyPatch) -> DiscordDouble:
    monkeypatch.setattr(discord.http.Route, "BASE", double.api_base)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(double.gateway_url))
    return double


def build_bot(guild_id: int, outcome: asyncio.Future[dict[str, Any]]) -> commands.Bot:
    # A short guild_ready_timeout: on_ready otherwise waits 2 s after the last GUILD_CREATE.
    bot = commands.Bot(command_prefix="!", intents=discord.Intents.default(), guild_ready_timeout=0.2)

    @app_commands.command(name="video", description="Turn a prompt into a short video")
    @app_commands.describe(prompt="What the video shows", seconds="Length in seconds")
    async def video(
        interaction: discord.Interaction,
        prompt: app_commands.Range[str, 1, 200],
        seconds: app_commands.Range[int, 1, 10],
    ) -> None:
        try:
            await interaction.response.defer(thinking=True)
            requester = interaction.user
            await interaction.edit_original_response(
                content=f"{requester.mention} your video is ready",
                embed=discord.Embed(title=prompt, description=f"{seconds} s"),
                attachments=[discord.File(io.BytesIO(CLIP), "preview.mp4")],
                allowed_mentions=discord.AllowedMentions(everyone=False, roles=False, users=[requester]),
            )
            await interaction.followup.send("Only you can see this receipt.", ephemeral=True)
            too_big_status = None
            try:
                await interaction.followup.send(file=discord.File(io.BytesIO(OVERSIZED), "huge.mp4"))
            except discord.HTTPException as error:
                too_big_status = (error.status, error.code)
            outcome.set_result(
                {
                    "prompt": prompt,
                    "seconds": seconds,
                    "user": requester.id,
                    "filesize_limit": interaction.filesize_limit,
                    "too_big": too_big_status,
                }
            )
        except Exception as error:
            outcome.set_exception(error)

    @video.autocomplete("prompt")
    async def complete_prompt(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=f"{current} at sunset", value=f"{current} at sunset")]

    bot.tree.add_command(video, guild=discord.Object(guild_id))
    return bot


async def test_real_client_round_trip(pointed_at_double: DiscordDouble) -> None:
    double = pointed_at_double
    outcome: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    bot = build_bot(double.guild_id, outcome)
    runner: asyncio.Task[None] | None = None
    try:
        await bot.login("double-token")
        synced = await bot.tree.sync(guild=discord.Object(double.guild_id))
        assert [command.name for command in synced] == ["video"]
        schema = {o["name"]: o for o in double.synced_commands[double.guild_id][0]["options"]}
        assert schema["prompt"]["max_length"] == 200 and schema["prompt"]["autocomplete"] is True
        assert (schema["seconds"]["min_value"], schema["seconds"]["max_value"]) == (1, 10)

        runner = asyncio.create_task(bot.connect(reconnect=False))
        await double.wait_ready()
        await asyncio.wait_for(bot.wait_until_ready(), 10)
        channel = bot.get_channel(double.channel_ids[0])
        assert isinstance(channel, discord.TextChannel)

        # The double refuses values the Discord client would not let a user submit.
        with pytest.raises(ValueError, match="max_value"):
            await double.send_slash_command("video", {"prompt": "a cat", "seconds": 11})

        interaction = await double.send_slash_command("video", {"prompt": "a cat", "seconds": 5}, user_id=REQUESTER_ID)
        result = await asyncio.wait_for(outcome, 10)
        assert result == {
            "prompt": "a cat",
            "seconds": 5,
            "user": REQUESTER_ID,
            "filesize_limit": UPLOAD_LIMIT,
            "too_big": (413, 40005),
        }
        first_callback = await double.wait_for_callback(interaction.id)
        assert first_callback["type"] == 5 and first_callback["accepted"]
        assert first_callback["time"] - interaction.created_at < 3
        callback_paths = [r.path for r in double.requests if r.path.startswith(f"/interactions/{interaction.id}/")]
        assert callback_paths == [f"/interactions/{interaction.id}/{interaction.token}/callback?with_response=1"]

        by_token = double.webhook_messages[interaction.token]
        original = by_token["@original"]
        assert by_token[original["id"]] is original
        assert original["embeds"][0]["title"] == "a cat"
        assert original["flags"] == 0  # the "thinking" placeholder was replaced
        assert original["attachments_data"] == [("preview.mp4", CLIP)]
        assert original["mentions"] == [REQUESTER_ID] and not original["mention_everyone"]
        followups = [m for key, m in by_token.items() if key not in ("@original", original["id"])]
        assert [(m["content"], m["flags"] & 64) for m in followups] == [("Only you can see this receipt.", 64)]

        # Channel message with a file: the exact bytes arrive, and the bot can read them back.
        sent = await channel.send(
            f"<@{REQUESTER_ID}> here is your clip",
            file=discord.File(io.BytesIO(CLIP), "clip.mp4"),
            allowed_mentions=discord.AllowedMentions(everyone=False, roles=False, users=[discord.Object(REQUESTER_ID)]),
        )
        stored = await double.wait_for_message(channel.id, predicate=lambda m: m["id"] == str(sent.id))
        assert stored["attachments_data"] == [("clip.mp4", CLIP)]
        assert stored["mentions"] == [REQUESTER_ID]
        assert await sent.attachments[0].read() == CLIP

        # Without allowed_mentions a channel message pings everyone it names, as on Discord.
        loud = await channel.send(f"@everyone and <@{BYSTANDER_ID}>")
        loud_stored = await double.wait_for_message(channel.id, predicate=lambda m: m["id"] == str(loud.id))
        assert loud_stored["mention_everyone"] and loud_stored["mentions"] == [BYSTANDER_ID]
        assert loud_stored["allowed_mentions"] is None

        # The same nonce twice stores one message.
        once = await channel.send("job 42 finished", nonce="job-42")
        again = await channel.send("job 42 finished", nonce="job-42")
        assert once.id == again.id
        assert [m["nonce"] for m in double.messages[channel.id]].count("job-42") == 1

        requester = await bot.fetch_user(REQUESTER_ID)
        await requester.send("Your video is ready.")
        dm = await double.wait_for_dm(REQUESTER_ID, timeout=5)
        assert dm["content"] == "Your video is ready."
        assert dm["channel_id"] == str(double.dm_channel_id(REQUESTER_ID))

        double.forbid_dm(BYSTANDER_ID)
        with pytest.raises(discord.Forbidden) as closed_dms:
            await (await bot.fetch_user(BYSTANDER_ID)).send("hello")
        assert closed_dms.value.code == 50007

        double.forbid_channel(double.channel_ids[1])
        other_channel = bot.get_channel(double.channel_ids[1])
        assert isinstance(other_channel, discord.TextChannel)
        with pytest.raises(discord.Forbidden) as forbidden:
            await other_channel.send("anyone there?")
        assert forbidden.value.code == 50001

        with pytest.raises(discord.HTTPException) as too_large:
            await channel.send(file=discord.File(io.BytesIO(OVERSIZED), "huge.mp4"))
        assert (too_large.value.status, too_large.value.code) == (413, 40005)

        completion = await double.send_autocomplete("video", "prompt", "a dog", user_id=REQUESTER_ID)
        answer = await double.wait_for_callback(completion.id)
        assert answer["type"] == 8
        assert answer["data"]["choices"] == [{"name": "a dog at sunset", "value": "a dog at sunset"}]

        assert double.unknown_routes == []
    finally:
        await bot.close()
        if runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(runner, 5)


CLIENT_SCRIPT = """
import discord

client = discord.Client(intents=discord.Intents.default())


@client.event
async def on_ready():
    print("READY", client.user.id, flush=True)
    await client.close()


client.run("double-token", log_handler=None)
"""


async def test_unmodified_subprocess_reaches_double(double: DiscordDouble, tmp_path: Path) -> None:
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(CLIENT_SCRIPT))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        env=subprocess_env(double, os.environ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 20)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, stderr.decode()
    assert double.identified.is_set()
    assert f"READY {double.bot_user_id}" in stdout.decode()
    assert double.identify_payloads[0]["token"] == "double-token"
    assert double.unknown_routes == []


async def test_a_bot_process_gets_its_settings_and_none_of_the_hosts(double: DiscordDouble, tmp_path: Path) -> None:
    host = {"PATH": "/bin", "PYTHONPATH": "elsewhere", "DISCORD_TOKEN": "host-token", "VIDEO_API_KEY": "host-key",
            "VIDEO_COOLDOWN_SECONDS": "60"}
    env = bot_process_env(
        double, without_bot_settings(host, tmp_path / "checkout"), token="double-token",
        service_url="http://127.0.0.1:1", api_key="sim-key", workdir=tmp_path, LOG_LEVEL="DEBUG",
    )
    assert (env["DISCORD_TOKEN"], env["VIDEO_API_KEY"], env["LOG_LEVEL"]) == ("double-token", "sim-key", "DEBUG")
    assert "VIDEO_COOLDOWN_SECONDS" not in env, "no setting of the host's reaches the bot"
    assert env["DATABASE_PATH"] == str(tmp_path / "bot.sqlite3") and env["DISCORD_GUILD_ID"] == str(double.guild_id)
    assert env["PYTHONPATH"].split(os.pathsep)[1:] == [str(tmp_path / "checkout"), "elsewhere"]
    assert env["PATH"] == "/bin"


async def test_discord_rules_over_raw_http(double: DiscordDouble) -> None:
    """Mistakes a bot can make get Discord's answers, not silent success."""
    auth = {"Authorization": "Bot double-token"}
    async with aiohttp.ClientSession() as http:
        command = {
            "name": "ping",
            "description": "Answer",
            "type": 1,
            "options": [{"name": "n", "description": "A number", "type": 4, "required": True}],
        }
        put = await http.put(
            f"{double.api_base}/applications/{double.application_id}/commands", json=[command], headers=auth
        )
        assert put.status == 200 and put.headers["Content-Type"] == "application/json"
        bad = await http.put(
            f"{double.api_base}/applications/{double.application_id}/commands",
            json=[{**command, "description": "x" * 101}],
            headers=auth,
        )
        assert (bad.status, (await bad.json())["code"]) == (400, 50035)

        # A bare gateway client is enough for the double to deliver interactions.
        gateway = await http.ws_connect(double.gateway_url)
        assert (await gateway.receive_json())["op"] == 10
        await gateway.send_json({"op": 2, "d": {"token": "double-token", "intents": 1, "properties": {}}})
        assert [(await gateway.receive_json())["t"] for _ in range(2)] == ["READY", "GUILD_CREATE"]

        late = await double.send_slash_command("ping", {"n": 1}, user_id=REQUESTER_ID)
        double.callback_deadline = 0.0  # as if the bot took longer than 3 s
        answer = await http.post(f"{double.api_base}/interactions/{late.id}/{late.token}/callback", json={"type": 5})
        assert (answer.status, (await answer.json())["code"]) == (404, 10062)
        double.callback_deadline = 3.0

        prompt = await double.send_slash_command("ping", {"n": 2}, user_id=REQUESTER_ID)
        callback = f"{double.api_base}/interactions/{prompt.id}/{prompt.token}/callback?with_response=1"
        early = await http.post(
            f"{double.api_base}/webhooks/{double.application_id}/{prompt.token}?wait=1", json={"content": "x"}
        )
        assert (early.status, (await early.json())["code"]) == (404, 10015)  # follow-up before any response
        content = f"@everyone <@{REQUESTER_ID}> <@{BYSTANDER_ID}>"
        first = await http.post(callback, json={"type": 4, "data": {"content": content}})
        assert first.status == 200
        assert (await first.json())["interaction"]["response_message_loading"] is False
        again = await http.post(callback, json={"type": 4, "data": {"content": "again"}})
        assert (again.status, (await again.json())["code"]) == (400, 40060)
        # Interaction responses parse users only, unless allowed_mentions says otherwise.
        original = double.webhook_messages[prompt.token]["@original"]
        assert original["mentions"] == [REQUESTER_ID, BYSTANDER_ID] and not original["mention_everyone"]

        unknown = await http.get(f"{double.api_base}/guilds/{double.guild_id}/bans", headers=auth)
        assert unknown.status == 404
        assert double.unknown_routes == [f"GET /api/v10/guilds/{double.guild_id}/bans"]
        await gateway.close()


# -- shards ------------------------------------------------------------------------------------------

PING = {"name": "ping", "description": "Answer", "type": 1}
AUTH = {"Authorization": "Bot double-token"}


@pytest.fixture
async def sharded() -> AsyncIterator[DiscordDouble]:
    fake = DiscordDouble(shard_count=2)
    fake.add_member(REQUESTER_ID, name="requester")
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def identify(http: aiohttp.ClientSession, double: DiscordDouble, shard: list[int] | None) -> Any:
    gateway = await http.ws_connect(double.gateway_url)
    assert (await gateway.receive_json())["op"] == 10
    data: dict[str, Any] = {"token": "double-token", "intents": 1 | 1 << 9, "properties": {}}  # guilds, messages
    if shard is not None:
        data["shard"] = shard
    await gateway.send_json({"op": 2, "d": data})
    return gateway


async def events(gateway: Any, count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(5):
        return [await gateway.receive_json() for _ in range(count)]


def test_add_guild_picks_an_id_on_the_chosen_shard() -> None:
    double = DiscordDouble(shard_count=3)
    for shard in (0, 1, 2, 1):
        guild_id = double.add_guild(shard=shard, channels=2)
        assert (guild_id >> 22) % 3 == shard == double.shard_of(guild_id)
        assert len(double.guild_channel_ids(guild_id)) == 2
        assert all(double.guild_of_channel(c) == guild_id for c in double.guild_channel_ids(guild_id))
    with pytest.raises(ValueError, match="shard 3"):
        double.add_guild(shard=3)


async def test_each_shard_gets_its_own_guilds_and_their_interactions_only(sharded: DiscordDouble) -> None:
    double = sharded
    first_shard = double.shard_of(double.guild_id)
    other_shard = 1 - first_shard
    second = double.add_guild(shard=other_shard)
    third = double.add_guild(shard=first_shard)
    async with aiohttp.ClientSession() as http:
        gateway_bot = await (await http.get(f"{double.api_base}/gateway/bot", headers=AUTH)).json()
        assert gateway_bot["shards"] == 2
        put = await http.put(f"{double.api_base}/applications/{double.application_id}/commands", json=[PING],
                             headers=AUTH)
        assert put.status == 200

        on_first = await identify(http, double, [first_shard, 2])
        ready, *creates = await events(on_first, 3)
        assert ready["t"] == "READY" and ready["d"]["shard"] == [first_shard, 2]
        assert {g["id"] for g in ready["d"]["guilds"]} == {str(double.guild_id), str(third)}
        assert [(e["t"], e["d"]["id"]) for e in creates] == [
            ("GUILD_CREATE", str(double.guild_id)), ("GUILD_CREATE", str(third))
        ]
        assert creates[1]["d"]["channels"][0]["id"] == str(double.guild_channel_ids(third)[0])

        # No connection for the second guild's shard yet: Discord would hold its events; the double says so.
        with pytest.raises(RuntimeError, match=f"shard {other_shard}"):
            await double.send_slash_command("ping", guild_id=second, user_id=REQUESTER_ID)

        on_other = await identify(http, double, [other_shard, 2])
        ready, create = await events(on_other, 2)
        assert [g["id"] for g in ready["d"]["guilds"]] == [str(second)]
        assert create["t"] == "GUILD_CREATE" and create["d"]["id"] == str(second)
        assert double.connected_shards() == {0, 1}

        asked = await double.send_slash_command("ping", guild_id=second, user_id=REQUESTER_ID)
        (arrived,) = await events(on_other, 1)
        assert arrived["t"] == "INTERACTION_CREATE" and arrived["d"]["id"] == asked.id
        assert arrived["d"]["guild_id"] == str(second)
        assert arrived["d"]["channel_id"] == str(double.guild_channel_ids(second)[0])

        here = await double.send_slash_command("ping", guild_id=third, user_id=REQUESTER_ID)
        (arrived,) = await events(on_first, 1)
        assert arrived["d"]["id"] == here.id and arrived["d"]["guild_id"] == str(third)

        # The bot's own message in the second guild is announced on that guild's shard only.
        posted = await http.post(f"{double.api_base}/channels/{double.guild_channel_ids(second)[0]}/messages",
                                 json={"content": "hello"}, headers=AUTH)
        assert posted.status == 200 and (await posted.json())["guild_id"] == str(second)
        (announced,) = await events(on_other, 1)
        assert announced["t"] == "MESSAGE_CREATE" and announced["d"]["guild_id"] == str(second)
        # Nothing more reached the first shard: the next frame it sees is the answer to its heartbeat.
        await on_first.send_json({"op": 1, "d": None})
        assert (await on_first.receive_json())["op"] == 11

        guild = await (await http.get(f"{double.api_base}/guilds/{second}/channels", headers=AUTH)).json()
        assert [c["id"] for c in guild] == [str(c) for c in double.guild_channel_ids(second)]
        await on_first.close()
        await on_other.close()


@pytest.mark.parametrize(("shard", "code"), [
    ([2, 2], 4010),  # no shard 2 out of 2
    ([-1, 2], 4010),
    ("0,2", 4010),
    ([0, 3], 4011),  # not the double's count
    (None, 4011),  # no shard at all on a sharded double
])
async def test_a_bad_identify_shard_is_closed_with_discords_code(
    sharded: DiscordDouble, shard: Any, code: int
) -> None:
    async with aiohttp.ClientSession() as http:
        gateway = await identify(http, sharded, shard)
        closing = await gateway.receive()
        assert closing.type == aiohttp.WSMsgType.CLOSE and closing.data == code
        assert sharded.connected_shards() == set()


async def test_a_real_auto_sharded_client_sees_each_guild_on_its_shard(
    sharded: DiscordDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    double = sharded
    monkeypatch.setattr(discord.http.Route, "BASE", double.api_base)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(double.gateway_url))
    added = [double.add_guild(shard=0), double.add_guild(shard=1)]

    class Client(discord.AutoShardedClient):
        async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
            pass  # discord.py waits 5 s between identifies for Discord's rate limit; the double has none

    client = Client(intents=discord.Intents.none() | discord.Intents(guilds=True), guild_ready_timeout=0.2)
    ready = asyncio.Event()
    client.event(_setter(ready))
    await client.login("double-token")
    runner = asyncio.create_task(client.connect(reconnect=False))
    try:
        async with asyncio.timeout(15):
            await ready.wait()
        assert client.shard_count == 2  # from GET /gateway/bot
        seen = {guild.id: guild.shard_id for guild in client.guilds}
        assert seen == {g: double.shard_of(g) for g in (double.guild_id, *added)}
        assert sorted(p["shard"] for p in double.identify_payloads) == [[0, 2], [1, 2]]
    finally:
        await client.close()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


def _setter(event: asyncio.Event) -> Any:
    async def on_ready() -> None:
        event.set()

    return on_ready
