"""The Discord double now ships in the package (`bot.demo.discord_double`, for `python -m bot demo`).

This re-export keeps the tests' `from tests.discord_double import ...` working unchanged.
"""

from bot.demo.discord_double import (
    API_BASE_ENV,
    GATEWAY_ENV,
    HOOK_DIR,
    DiscordDouble,
    DiscordError,
    InteractionRecord,
    RecordedRequest,
    bot_process_env,
    subprocess_env,
    without_bot_settings,
)

__all__ = [
    "API_BASE_ENV",
    "GATEWAY_ENV",
    "HOOK_DIR",
    "DiscordDouble",
    "DiscordError",
    "InteractionRecord",
    "RecordedRequest",
    "bot_process_env",
    "subprocess_env",
    "without_bot_settings",
]
