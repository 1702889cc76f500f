"""`python -m bot pause` and `resume`: kept in the database for the running bot."""

from pathlib import Path

from bot.store.jobs import JobStore
from bot.store.jobs.meta import HOST_PAUSE
from tests.cli.helpers import TOKEN, run_bot
from tests.conftest import SIM_KEY


async def test_pause_and_resume_are_kept_in_the_database_for_the_running_bot(tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3")}
    code, out, _err = await run_bot(["pause"], env, tmp_path)
    assert (code, out) == (0, "spending is paused in every server: /video, Re-roll, Confirm and Generate are "
                              "refused until `python -m bot resume`\n")
    store = await JobStore.open(tmp_path / "bot.sqlite3")
    try:
        assert await store.get_meta(HOST_PAUSE) is not None
        code, out, _err = await run_bot(["resume"], env, tmp_path)
        assert (code, out) == (0, "spending is open again in every server\n")
        assert await store.get_meta(HOST_PAUSE) is None
    finally:
        await store.close()
