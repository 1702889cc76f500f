"""`python -m bot pause` and `resume`: the host's pause of all spending in every server, without a restart."""

from __future__ import annotations

import time

from bot.app import open_store
from bot.cli.preflight import database_problem, require
from bot.config.settings import Settings
from bot.store.jobs.meta import HOST_PAUSE


async def pause(settings: Settings, *, on: bool) -> int:
    """The host's pause of all spending (/video, Re-roll, Confirm, Generate) in every server, kept in the database:
    the running bot obeys it at once."""
    require(database_problem(settings))
    store = await open_store(settings)
    try:
        if on:
            await store.set_meta(HOST_PAUSE, str(time.time()))
        else:
            await store.delete_meta(HOST_PAUSE)
    finally:
        await store.close()
    print("spending is paused in every server: /video, Re-roll, Confirm and Generate are refused until "
          "`python -m bot resume`" if on else "spending is open again in every server")
    return 0
