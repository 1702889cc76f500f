import logging
import re
from pathlib import Path
from typing import Any

import pytest

from bot.config.settings import Settings, SettingsError, load_settings, read_settings

REPO_ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {
    "DISCORD_TOKEN": "discord-token-value",
    "VIDEO_API_BASE_URL": "https://video.example/",
    "VIDEO_API_KEY": "sk-very-secret-key-1234",
}


def test_defaults() -> None:
    s = read_settings(REQUIRED)
    assert s.video_api_base_url == "https://video.example"
    assert s.database_path == Path("data/bot.sqlite3")
    assert s.video_storage_dir == Path("data/videos")
    assert s.poll_interval_seconds == 20.0
    assert s.http_timeout_seconds == 30.0 and s.download_timeout_seconds == 600.0
    assert s.discord_guild_id is None
    assert s.log_level == "INFO"
    assert s.video_cooldown_seconds == 60.0 and s.max_active_jobs_per_user == 2
    assert s.guild_daily_budget_yen is None and s.budget_timezone == "Asia/Tokyo"
    assert s.allowed_channel_ids == frozenset() and s.required_role_id is None
    assert s.metrics_port is None and s.metrics_host == "127.0.0.1"


def test_values_are_parsed() -> None:
    s = read_settings({**REQUIRED, "POLL_INTERVAL_SECONDS": "0.5", "DISCORD_GUILD_ID": "123", "LOG_LEVEL": "debug",
                       "KEEP_DELIVERED_VIDEOS": "true", "ALLOWED_CHANNEL_IDS": "1, 2,3",
                       "GUILD_DAILY_BUDGET_YEN": "5000", "BUDGET_TIMEZONE": "UTC"})
    assert s.poll_interval_seconds == 0.5 and s.discord_guild_id == 123 and s.log_level == "DEBUG"
    assert s.keep_delivered_videos is True and s.allowed_channel_ids == {1, 2, 3}
    assert s.guild_daily_budget_yen == 5000 and s.budget_timezone == "UTC"


def test_metrics_endpoint_settings() -> None:
    s = read_settings({**REQUIRED, "METRICS_PORT": "9108", "METRICS_HOST": "0.0.0.0"})
    assert s.metrics_port == 9108 and s.metrics_host == "0.0.0.0"
    for bad in ("0", "65536", "http", "-1"):
        with pytest.raises(SettingsError) as error:
            read_settings({**REQUIRED, "METRICS_PORT": bad})
        assert error.value.problems == ["METRICS_PORT must be a TCP port from 1 to 65535"]


def test_every_problem_is_listed_at_once_without_secret_values() -> None:
    env = {"VIDEO_API_BASE_URL": "ftp://x", "POLL_INTERVAL_SECONDS": "sk-leaked-secret", "LOG_LEVEL": "LOUD",
           "BUDGET_TIMEZONE": "Mars/Olympus"}
    with pytest.raises(SettingsError) as error:
        read_settings(env)
    problems = error.value.problems
    assert len(problems) == 6
    text = str(error.value)
    for name in ("DISCORD_TOKEN", "VIDEO_API_KEY", "VIDEO_API_BASE_URL", "POLL_INTERVAL_SECONDS", "LOG_LEVEL",
                 "BUDGET_TIMEZONE"):
        assert name in text
    assert "sk-leaked-secret" not in text


@pytest.mark.parametrize("url", [
    "https://video.example", "http://127.0.0.1:8080", "http://localhost:8080/", "http://[::1]:8080",
    "http://10.0.0.5:8080", "http://192.168.1.20", "http://simulator:8080", "http://sim.localhost:1",
])
def test_a_local_or_private_service_may_be_plain_http(url: str) -> None:
    assert read_settings({**REQUIRED, "VIDEO_API_BASE_URL": url}).video_api_base_url == url.rstrip("/")


@pytest.mark.parametrize("url", ["http://video.example", "http://api.example.com:8080/v1", "http://93.184.216.34"])
def test_a_remote_service_must_be_https_and_the_error_names_the_fix(url: str) -> None:
    with pytest.raises(SettingsError) as error:
        read_settings({**REQUIRED, "VIDEO_API_BASE_URL": url})
    [problem] = error.value.problems
    assert problem.startswith("VIDEO_API_BASE_URL is plain http:// to a remote host")
    assert "use " + url.replace("http://", "https://") in problem


def test_repr_hides_secrets() -> None:
    s = read_settings(REQUIRED)
    assert isinstance(s, Settings)
    assert "discord-token-value" not in repr(s) and "sk-very-secret-key-1234" not in repr(s)


def test_dotenv_is_loaded_and_real_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in (*REQUIRED, "POLL_INTERVAL_SECONDS"):
        monkeypatch.setenv(name, "")  # recorded, so that what .env sets below is undone after the test
        monkeypatch.delenv(name)
    env_file = tmp_path / ".env"
    env_file.write_text(
        "DISCORD_TOKEN=from-file\nVIDEO_API_BASE_URL=http://127.0.0.1:9\nVIDEO_API_KEY=file-key-123456\n"
        "POLL_INTERVAL_SECONDS=1\n"
    )
    monkeypatch.setenv("DISCORD_TOKEN", "from-environment")
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING):
        s = load_settings()
    assert s.discord_token == "from-environment"
    assert s.video_api_key == "file-key-123456"
    assert "below the service's 15 s guidance" in caplog.text


def test_the_download_timeout_reaches_the_client() -> None:
    import asyncio

    import aiohttp

    from bot.app import build_client

    async def built() -> float | None:
        async with aiohttp.ClientSession() as session:
            client = build_client(read_settings({**REQUIRED, "DOWNLOAD_TIMEOUT_SECONDS": "42"}), session)
            return client._transport.download_timeout.total

    assert asyncio.run(built()) == 42.0


def test_database_url_picks_the_backend_and_wins_over_database_path() -> None:
    postgres = read_settings({**REQUIRED, "DATABASE_URL": "postgresql://bot:pa55word@db.internal:5432/videos",
                              "DATABASE_PATH": "ignored.sqlite3"})
    assert postgres.database_url == "postgresql://bot:pa55word@db.internal:5432/videos"
    assert postgres.database_shown == "postgresql://bot:***@db.internal:5432/videos"
    assert postgres.database_secrets == ("pa55word",)
    assert "pa55word" not in repr(postgres)
    relative = read_settings({**REQUIRED, "DATABASE_URL": "sqlite:///state/bot.sqlite3", "DATABASE_PATH": "x.db"})
    assert (relative.database_url, relative.database_path) == (None, Path("state/bot.sqlite3"))
    absolute = read_settings({**REQUIRED, "DATABASE_URL": "sqlite:////srv/bot/bot.sqlite3"})
    assert absolute.database_path == Path("/srv/bot/bot.sqlite3") and absolute.database_shown == "/srv/bot/bot.sqlite3"
    assert read_settings({**REQUIRED, "DATABASE_PATH": "x.db"}).database_url is None


@pytest.mark.parametrize("url", ["mysql://bot:pa55word@db/videos", "postgresql://bot:pa55word@db:port/videos",
                                 "postgresql://bot:pa55word@db:5432/", "sqlite:///", "pa55word"])
def test_a_bad_database_url_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(SettingsError) as refused:
        read_settings({**REQUIRED, "DATABASE_URL": url})
    assert any(problem.startswith("DATABASE_URL must be") for problem in refused.value.problems)
    assert "pa55word" not in str(refused.value)


def test_sharding_is_automatic_by_default() -> None:
    s = read_settings(REQUIRED)
    assert s.shard_count is None and s.shard_ids is None
    assert s.shards.count is None and s.shards.runs_every_shard and s.shards.syncs_commands


def test_shard_count_and_ids_are_parsed() -> None:
    s = read_settings({**REQUIRED, "SHARD_COUNT": "4", "SHARD_IDS": " 2, 3"})
    assert s.shard_count == 4 and s.shard_ids == (2, 3)
    assert not s.shards.syncs_commands
    only_count = read_settings({**REQUIRED, "SHARD_COUNT": "2"})
    assert only_count.shard_count == 2 and only_count.shard_ids is None and only_count.shards.runs_every_shard


@pytest.mark.parametrize(("env", "problem"), [
    ({"SHARD_COUNT": "0"}, "SHARD_COUNT must be a whole number of shards, 1 or more"),
    ({"SHARD_COUNT": "two"}, "SHARD_COUNT must be a whole number of shards, 1 or more"),
    ({"SHARD_IDS": "0"}, "SHARD_IDS needs SHARD_COUNT: the ids are counted out of a fixed number of shards"),
    ({"SHARD_COUNT": "2", "SHARD_IDS": "0,x"},
     "SHARD_IDS must be a comma-separated list of shard ids (whole numbers from 0), such as 0,1"),
    ({"SHARD_COUNT": "2", "SHARD_IDS": "-1"},
     "SHARD_IDS must be a comma-separated list of shard ids (whole numbers from 0), such as 0,1"),
    ({"SHARD_COUNT": "2", "SHARD_IDS": ","},
     "SHARD_IDS must be a comma-separated list of shard ids (whole numbers from 0), such as 0,1"),
    ({"SHARD_COUNT": "2", "SHARD_IDS": "1,2,3"},
     "SHARD_IDS: shard ids run from 0 to 1 with SHARD_COUNT=2, not 2, 3"),
    ({"SHARD_COUNT": "4", "SHARD_IDS": "1,3,1"}, "SHARD_IDS lists a shard more than once: 1"),
])
def test_bad_shard_settings_are_named(env: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError) as error:
        read_settings({**REQUIRED, **env})
    assert error.value.problems == [problem]


def test_a_bad_shard_count_is_one_problem_not_two() -> None:
    with pytest.raises(SettingsError) as error:
        read_settings({**REQUIRED, "SHARD_COUNT": "many", "SHARD_IDS": "0"})
    assert error.value.problems == ["SHARD_COUNT must be a whole number of shards, 1 or more"]


def test_a_public_bots_spending_is_off_unless_the_host_says_so() -> None:
    assert read_settings(REQUIRED).allow_public_bot_spending is False
    assert read_settings({**REQUIRED, "ALLOW_PUBLIC_BOT_SPENDING": "1"}).allow_public_bot_spending is True
    with pytest.raises(SettingsError) as error:
        read_settings({**REQUIRED, "ALLOW_PUBLIC_BOT_SPENDING": "maybe"})
    assert error.value.problems == ["ALLOW_PUBLIC_BOT_SPENDING must be true or false"]


# -- values pasted from a web page or a chat ------------------------------------------------------------


def test_whitespace_and_invisible_characters_around_values_are_stripped() -> None:
    s = read_settings({**REQUIRED, "VIDEO_API_KEY": "\u200b sk-very-secret-key-1234\t\ufeff",
                       "DISCORD_TOKEN": "\u00a0discord-token-value\n"})
    assert s.video_api_key == "sk-very-secret-key-1234" and s.discord_token == "discord-token-value"


@pytest.mark.parametrize(
    ("name", "pasted", "scheme"),
    [("VIDEO_API_KEY", "Bearer sk-very-secret-key-1234", "Bearer"),
     ("VIDEO_API_KEY", "bearer  sk-very-secret-key-1234", "Bearer"),
     ("DISCORD_TOKEN", "Bot discord-token-value", "Bot")],
)
def test_a_pasted_scheme_prefix_is_dropped_with_a_warning(
    name: str, pasted: str, scheme: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        s = read_settings({**REQUIRED, name: pasted})
    assert (s.video_api_key, s.discord_token) == ("sk-very-secret-key-1234", "discord-token-value")
    [warning] = caplog.messages
    assert warning == f"{name} starts with '{scheme}', which the bot adds itself: using the rest; remove '{scheme}' " \
                      "from the setting to silence this warning"
    assert "secret" not in warning and "discord-token-value" not in warning


@pytest.mark.parametrize(
    ("pasted", "problem"),
    [("ｓｋ-very-secret-key-1234", "holds full-width characters (the first is character 1)"),
     ("sk-very-secret\u3000key-1234", "holds full-width characters (the first is character 15)"),
     ("sk-very secret-key-1234", "holds a space or line break inside (at character 8)"),
     ("sk-very-secret-kéy-1234", "holds a character that no key or token has (character 17"),
     ("sk-very-secret\u200bkey-1234", "holds a character that no key or token has (character 15")],
)
def test_a_character_no_key_has_is_refused_without_showing_the_value(pasted: str, problem: str) -> None:
    with pytest.raises(SettingsError) as refused:
        read_settings({**REQUIRED, "VIDEO_API_KEY": pasted})
    [line] = refused.value.problems
    assert line.startswith(f"VIDEO_API_KEY {problem}") and line.endswith("(the value is not shown here)")
    assert "secret" not in str(refused.value)


def test_load_settings_names_the_env_file_read_or_where_none_was_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in REQUIRED:
        monkeypatch.setenv(name, "")  # recorded, so that what .env sets below is undone after the test
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingsError) as missing:
        load_settings()
    assert missing.value.env_file is not None and not missing.value.env_file.found
    assert str(missing.value).splitlines()[-1].startswith(f"no .env file at {tmp_path / '.env'}: ")
    (tmp_path / ".env").write_text("".join(f"{name}={value}\n" for name, value in REQUIRED.items()))
    settings = load_settings()
    assert settings.env_file is not None and settings.env_file.describe() == str(tmp_path / ".env")


class ReadNames(dict[str, str]):
    """An environment that notes every name the settings ask it for."""

    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.asked: set[str] = set()

    def get(self, name: str, default: Any = None) -> Any:
        self.asked.add(name)
        return super().get(name, default)


def documented_settings() -> set[str]:
    """The names in the first column of the settings table of docs/configuration.md."""
    text = (REPO_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = text.split("## Settings", 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", table, flags=re.MULTILINE))


def test_every_setting_the_bot_reads_is_in_the_documented_table_and_in_env_example() -> None:
    env = ReadNames({"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "https://api.example.com", "VIDEO_API_KEY": "k",
                     "SHARD_COUNT": "2"})
    read_settings(env)
    read = env.asked
    # Every name settings.py reads is one the reader was asked for (none hides behind a branch not taken here).
    in_source = set(re.findall(r'(?:raw|required|parsed|_secret\(r,)\(?\s*"([A-Z][A-Z0-9_]*)"',
                               (REPO_ROOT / "bot" / "config" / "settings.py").read_text(encoding="utf-8")))
    assert in_source <= read and len(read) > 30
    assert read - documented_settings() == set(), "missing from the table in docs/configuration.md"
    example = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", (REPO_ROOT / ".env.example").read_text(encoding="utf-8"),
                             flags=re.MULTILINE))
    assert read - example == set(), "missing from .env.example"
    assert documented_settings() - read == set(), "documented, but the bot reads no such setting"


@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_value_in_matching_quotes_is_used_without_them_with_a_warning(
    quote: str, caplog: pytest.LogCaptureFixture
) -> None:
    # `docker run --env-file` keeps a line's quotes as part of the value: the key would pass, then get HTTP 401.
    env = {**REQUIRED, "VIDEO_API_KEY": f"{quote}Bearer sk-very-secret-key-1234{quote}",
           "DATABASE_PATH": f"{quote}/srv/bot/bot.sqlite3{quote}", "SHARD_COUNT": f"{quote}2{quote}"}
    with caplog.at_level(logging.WARNING):
        s = read_settings(env)
    assert (s.video_api_key, s.database_path, s.shard_count) == ("sk-very-secret-key-1234",
                                                                  Path("/srv/bot/bot.sqlite3"), 2)
    quoted = [message for message in caplog.messages if "quotes" in message]
    # One warning a setting (SHARD_COUNT is read twice), never the value.
    assert quoted == [
        f"{name} is wrapped in quotes, which `docker run --env-file` keeps as part of the value: using what is "
        "inside; remove the quotes to silence this warning"
        for name in ("VIDEO_API_KEY", "DATABASE_PATH", "SHARD_COUNT")
    ]
    assert not any("secret" in message for message in caplog.messages)


@pytest.mark.parametrize("value", ['"sk-very-secret-key-1234', "'sk-very-secret-key-1234\"", '"'])
def test_quotes_that_do_not_pair_are_left_alone(value: str) -> None:
    assert read_settings({**REQUIRED, "VIDEO_API_KEY": value}).video_api_key == value
