"""What the service says about job ids is checked before it goes into a URL or a message."""

import pytest

from bot.core.errors import UnusableJobId, VideoServiceError
from bot.service.answers import MAX_JOB_ID_CHARS, SHOWN_CHARS, safe_job_id, shown_id


@pytest.mark.parametrize(
    "raw", ["vid_1", "a", "A-Z.a_z~0-9", "video_69a1b2c3d4e5f6", "x" * MAX_JOB_ID_CHARS, "..a", "a.."]
)
def test_safe_ids_pass_unchanged(raw: str) -> None:
    assert safe_job_id(raw) == raw


@pytest.mark.parametrize(
    "raw",
    [
        "", ".", "..", "a/b", "../admin", "a\\b", "a b", "a?b=1", "a#b", "a%2Fb", "a\nb", "vid_1\n", "é",
        "x" * (MAX_JOB_ID_CHARS + 1), None, 42, 4.2, True, ["vid_1"], {"id": "vid_1"},
    ],
)
def test_unsafe_ids_are_refused(raw: object) -> None:
    with pytest.raises(UnusableJobId) as error:
        safe_job_id(raw)
    assert isinstance(error.value, VideoServiceError)
    assert error.value.shown == shown_id(raw)
    assert error.value.shown in str(error.value)


@pytest.mark.parametrize(
    "raw", ["`code` @everyone <@123> <#9>", "line\nbreak\r\x00", "a" * 10_000, {"nested": ["x" * 500]}, "日本語||x||"]
)
def test_shown_ids_are_short_plain_ascii_without_markup(raw: object) -> None:
    shown = shown_id(raw)
    assert len(shown) <= SHOWN_CHARS
    assert shown.removesuffix("…").isascii() and shown.isprintable()
    for forbidden in ("`", "@", "<", ">", "\n", "\r", "|"):
        assert forbidden not in shown


def test_shown_id_keeps_a_short_id_readable() -> None:
    assert shown_id("vid_1") == "'vid_1'"
    assert shown_id(None) == "None"
    long = shown_id("v" * 100)
    assert long.endswith("…") and long.startswith("'vvv") and len(long) == SHOWN_CHARS


def test_an_id_of_exactly_the_shown_length_is_shown_whole() -> None:
    raw = "a" * (SHOWN_CHARS - 2)  # ascii() adds the two quotes
    assert shown_id(raw) == f"'{raw}'" and len(shown_id(raw)) == SHOWN_CHARS
    assert shown_id(raw + "b").endswith("…") and len(shown_id(raw + "b")) == SHOWN_CHARS
