import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.app import catalogue_of
from bot.config.settings import Settings, SettingsError, read_settings
from bot.core.log_context import job_fields
from bot.frontend.bot import VideoBot
from bot.ops.logs import make_handler, setup_logging
from bot.store.jobs import Job, JobState, JobStore, NewJob

KEY = "sk-live-secret-key-0123456789"
REQUIRED = {"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": KEY}


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
async def job(tmp_path: Path) -> AsyncIterator[Job]:
    store = await JobStore.open(tmp_path / "jobs.sqlite3")
    new = NewJob(model="m", prompt="a cat", seed=None, user_id=222, guild_id=111, channel_id=333)
    submitted = await store.add_submission(new)
    await store.transition(submitted.id, JobState.SUBMITTING)
    yield await store.mark_accepted(submitted.id, "vid_abc", 250, next_poll_at=0.0)
    await store.close()


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("tests.logs")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    yield log
    for handler in log.handlers[:]:
        log.removeHandler(handler)
    log.propagate = True


def test_job_fields_name_the_request_the_job_the_server_and_the_member(job: Job) -> None:
    assert job_fields(job) == {"request": "#1", "job": "vid_abc", "guild": 111, "member": 222}


def test_text_lines_carry_the_request_context(job: Job, logger: logging.Logger) -> None:
    out = io.StringIO()
    logger.addHandler(make_handler("text", stream=out))
    logger.info("video posted", extra=job_fields(job))
    logger.info("worker started")
    first, second = out.getvalue().splitlines()
    assert first.endswith("INFO     tests.logs: video posted [request=#1 job=vid_abc guild=111 member=222]")
    assert second.endswith("tests.logs: worker started")


def test_json_lines_are_one_object_each_with_context_and_exception(job: Job, logger: logging.Logger) -> None:
    out = io.StringIO()
    logger.addHandler(make_handler("json", stream=out))
    logger.info("video posted: %s", "ok", extra=job_fields(job))
    try:
        raise RuntimeError("disk on fire\nsecond line")
    except RuntimeError:
        logger.exception("delivery failed", extra={**job_fields(job), "job": None})
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    posted, failed = (json.loads(line) for line in lines)
    assert posted["message"] == "video posted: ok" and posted["level"] == "INFO" and posted["logger"] == "tests.logs"
    assert (posted["request"], posted["job"], posted["guild"], posted["member"]) == ("#1", "vid_abc", 111, 222)
    assert posted["time"].endswith("+00:00") and "exception" not in posted
    assert failed["level"] == "ERROR" and failed["job"] is None
    assert "RuntimeError: disk on fire" in failed["exception"] and "Traceback" in failed["exception"]


def test_no_colour_codes_in_a_file_but_colour_at_a_terminal(
    tmp_path: Path, logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    path = tmp_path / "bot.log"
    with path.open("w") as file:
        logger.addHandler(make_handler("text", stream=file))
        logger.warning("to a file")
        logger.handlers[0].flush()
    assert "to a file" in path.read_text() and "\x1b[" not in path.read_text()
    terminal = Tty()
    logger.addHandler(make_handler("text", stream=terminal))
    logger.warning("to a person")
    assert "\x1b[33mWARNING\x1b[0m" in terminal.getvalue()


def test_secrets_are_masked_in_every_format(logger: logging.Logger) -> None:
    text, structured = io.StringIO(), io.StringIO()
    logger.addHandler(make_handler("text", stream=text, secrets=[KEY, "short"]))
    logger.addHandler(make_handler("json", stream=structured, secrets=[KEY]))
    logger.error("the service echoed Bearer %s", KEY)
    assert KEY not in text.getvalue() + structured.getvalue()
    assert "Bearer …6789" in text.getvalue() and "Bearer …6789" in json.loads(structured.getvalue())["message"]


def test_setup_logging_replaces_its_own_handler_only() -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    level = root.level
    try:
        first = setup_logging("DEBUG", "text", stream=io.StringIO())
        second = setup_logging("WARNING", "json", stream=io.StringIO())
        assert first not in root.handlers and second in root.handlers
        assert [h for h in root.handlers if h not in before] == [second]
        assert root.level == logging.WARNING
    finally:
        for handler in root.handlers[:]:
            if handler not in before:
                root.removeHandler(handler)
        root.setLevel(level)


def test_log_format_setting() -> None:
    assert read_settings(REQUIRED).log_format == "text"
    assert read_settings({**REQUIRED, "LOG_FORMAT": "JSON"}).log_format == "json"
    with pytest.raises(SettingsError, match="LOG_FORMAT must be text or json"):
        read_settings({**REQUIRED, "LOG_FORMAT": "xml"})


def bot_of(settings: Settings) -> VideoBot:
    return VideoBot(settings, catalogue_of(settings))
