"""`python -m bot [run|sync|check]`: start the bot, force a command sync, or check the set-up."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

import aiohttp
import discord

from bot.errors import VideoServiceError
from bot.i18n import EN, yen
from bot.models import DEFAULT_MODEL
from bot.settings import Settings, SettingsError, load_settings
from bot.video_bot import VideoBot
from bot.video_client import VideoServiceClient, mask_key

log = logging.getLogger("bot")


async def run(settings: Settings) -> int:
    bot = VideoBot(settings)
    closing: set[asyncio.Task[None]] = set()

    def stop(signame: str) -> None:
        # `docker stop` sends SIGTERM: close cleanly, in order, instead of dying mid-write.
        log.info("%s received; shutting down", signame)
        task = asyncio.create_task(bot.close())
        closing.add(task)
        task.add_done_callback(closing.discard)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig.name)
    async with bot:
        try:
            await bot.start(settings.discord_token)
        except discord.LoginFailure:
            log.error("Discord refused DISCORD_TOKEN: check it in the developer portal")
            return 1
    await asyncio.gather(*closing)
    return 0


async def sync(settings: Settings) -> int:
    bot = VideoBot(settings, force_sync=True)
    async with bot:
        try:
            await bot.login(settings.discord_token)  # setup_hook runs here and syncs
        except discord.LoginFailure:
            log.error("Discord refused DISCORD_TOKEN: check it in the developer portal")
            return 1
    return 0


async def check(settings: Settings) -> int:
    """Validate the settings and reach the video service; never connects to Discord."""
    print(f"settings: OK (service {settings.video_api_base_url}, database {settings.database_path})")
    async with aiohttp.ClientSession() as session:
        client = VideoServiceClient(
            session, settings.video_api_base_url, settings.video_api_key,
            timeout_seconds=settings.http_timeout_seconds,
        )
        try:
            info = await client.key_info()
        except VideoServiceError as exc:
            print(f"check failed: cannot read the key's balance: {exc}", file=sys.stderr)
            return 1
    price = DEFAULT_MODEL.price_yen
    print(f"key: {mask_key(settings.video_api_key)}")
    if info.max_budget is None or info.available is None:
        print(f"balance: spent {yen(info.spend, EN)}, no budget limit")
    else:
        print(f"balance: spent {yen(info.spend, EN)} of {yen(info.max_budget, EN)}; available "
              f"{yen(info.available, EN)} ({max(0, info.available) // price} videos at {yen(price, EN)})")
        if info.available < price:
            print("check failed: the budget cannot pay for one more video", file=sys.stderr)
            return 1
    print("check: OK")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description=__doc__)
    parser.add_argument("command", nargs="?", default="run", choices=("run", "sync", "check"),
                        help="run the bot (default), force a slash-command sync, or check the set-up")
    args = parser.parse_args(argv)
    discord.utils.setup_logging(level=logging.INFO)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"python -m bot: {exc}", file=sys.stderr)
        return 2
    logging.getLogger().setLevel(settings.log_level)
    commands = {"run": run, "sync": sync, "check": check}
    return asyncio.run(commands[args.command](settings))


if __name__ == "__main__":
    sys.exit(main())
