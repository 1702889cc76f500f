"""Message formatting: who a message can ping, how prompts are shown, and the receipt embed."""

from __future__ import annotations

import dataclasses
import re

import discord
import pytest

from bot import views
from bot.store import Job, JobState
from bot.video_client import KeyInfo

S = JobState
REQUESTER = 123_456_789_012_345_678
SOMEONE = 987_654_321_098_765_432
ROLE = 111_222_333_444_555_666
CREATED = 1_767_000_000.25
ACCEPTED = 1_767_000_003.75


def job(**changes: object) -> Job:
    base = Job(
        id=42, state=S.PENDING, model="provider/video-model-2.0-fast", prompt="a red fox in the snow", seed=None,
        user_id=REQUESTER, guild_id=9, channel_id=10, locale="en-US", service_job_id="vid_abc", charged_yen=250,
        created_at=CREATED, updated_at=ACCEPTED, accepted_at=ACCEPTED, finished_at=None, next_poll_at=None,
        slow_notice_sent=False, file_path=None, upload_limit_bytes=None, interaction_token=None,
        interaction_expires_at=None, reply_message_id=None, delivered_channel_id=None, delivered_message_id=None,
        last_error=None,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def fields(embed: discord.Embed) -> dict[str, str]:
    return {str(f.name): str(f.value) for f in embed.fields}


# -- who a message can ping ------------------------------------------------------------------------


def test_requester_only_allows_the_requester_and_nobody_else() -> None:
    allowed = views.requester_only(job())

    assert allowed.everyone is False
    assert allowed.roles is False
    assert allowed.replied_user is False
    assert isinstance(allowed.users, list)
    assert [user.id for user in allowed.users] == [REQUESTER]
    assert allowed.to_dict() == {"parse": [], "users": [REQUESTER]}


HOSTILE = f"@everyone @here look <@{SOMEONE}> <@!{SOMEONE}> <@&{ROLE}> <@123>"


def test_the_delivered_text_pings_the_requester_and_defuses_the_prompt() -> None:
    text = views.delivered_text(job(prompt=HOSTILE, seed=7), price_yen=250, compressed=False, via_dm=False)

    assert text.startswith(f"<@{REQUESTER}> your video #42 is ready.")
    assert text.count(f"<@{REQUESTER}>") == 1
    for mention in ("@everyone", "@here", f"<@{SOMEONE}>", f"<@!{SOMEONE}>", f"<@&{ROLE}>"):
        assert mention not in text
    # Whatever still looks like a mention is outside what the message may ping.
    pingable = {int(user_id) for user_id in re.findall(r"<@!?(\d+)>", text)}
    assert pingable <= {REQUESTER, 123}
    assert 123 not in [user.id for user in views.requester_only(job()).users]  # type: ignore[union-attr]
    assert "Seed: 7 · Job: `vid_abc` · Cost: ¥250" in text


def test_a_multi_line_prompt_stays_inside_the_quote() -> None:
    text = views.delivered_text(job(prompt="line one\n\nline two\n# heading"), price_yen=250, compressed=False,
                                via_dm=False)

    lines = text.split("\n")
    assert len(lines) == 3
    assert lines[1].startswith("> line one")
    assert "line two" in lines[1]


def test_the_delivered_text_in_japanese_with_notes() -> None:
    text = views.delivered_text(job(locale="ja"), price_yen=250, compressed=True, via_dm=True)

    assert "動画 #42 ができました" in text
    assert "費用: 250円" in text
    assert "シード: ランダム" in text
    assert "<#10>に投稿できなかったため" in text
    assert "圧縮したコピー" in text


# -- excerpt ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mention", ["@everyone", "@here", f"<@{SOMEONE}>", f"<@!{SOMEONE}>", f"<@&{ROLE}>"])
def test_excerpt_defuses_mentions(mention: str) -> None:
    shown = views.excerpt(f"hello {mention} bye")

    assert mention not in shown
    assert "\u200b" in shown


def test_excerpt_keeps_a_short_prompt_readable() -> None:
    assert views.excerpt("a calm lake at sunset") == "a calm lake at sunset"


def test_excerpt_escapes_markdown() -> None:
    shown = views.excerpt("**bold** _it_ ~~gone~~ `code`")

    assert "**" not in shown.replace("\\*", "")
    assert shown == r"\*\*bold\*\* \_it\_ \~\~gone\~\~ \`code\`"


@pytest.mark.parametrize(
    ("prompt", "limit"),
    [("word " * 400, 300), ("x" * 2000, 1000), ("_" * 2000, 1000), ("@everyone " * 200, 300)],
    ids=["words", "plain", "markdown", "mentions"],
)
def test_excerpt_shortens_long_prompts_to_the_limit(prompt: str, limit: int) -> None:
    shown = views.excerpt(prompt, limit)

    assert len(shown) <= limit
    assert shown.endswith("…")
    assert "@everyone" not in shown


def test_a_long_prompt_fits_the_status_embed_field() -> None:
    embed = views.status_embed(job(prompt="*_" * 1000), price_yen=250)

    assert len(fields(embed)["Prompt"]) <= 1024


# -- the receipt -----------------------------------------------------------------------------------


def test_the_receipt_shows_a_live_relative_timestamp_of_the_acceptance() -> None:
    embed = views.receipt_embed(job(), price_yen=250)

    assert fields(embed)["Started"] == f"<t:{int(ACCEPTED)}:R>"
    assert re.fullmatch(r"<t:\d+:R>", fields(embed)["Started"])


def test_the_receipt_of_a_request_not_yet_accepted_uses_the_request_time() -> None:
    embed = views.receipt_embed(job(state=S.SUBMITTING, accepted_at=None, service_job_id=None, charged_yen=0),
                                price_yen=250)

    assert fields(embed)["Started"] == f"<t:{int(CREATED)}:R>"
    assert fields(embed)["Job"] == "—"
    assert "Expected wait" not in fields(embed)


def test_the_receipt_of_a_delivered_video_links_to_it() -> None:
    embed = views.receipt_embed(job(state=S.DELIVERED, delivered_channel_id=10, delivered_message_id=77),
                                price_yen=250)

    assert embed.description == "Posted: https://discord.com/channels/9/10/77"
    assert embed.colour == discord.Colour.green()
    assert fields(embed)["State"] == "delivered"


def test_the_receipt_of_a_failed_job_names_the_job_id_for_support() -> None:
    embed = views.receipt_embed(job(state=S.FAILED), price_yen=250)

    assert "`vid_abc`" in (embed.description or "")
    assert "service credit" in (embed.description or "")


def test_the_receipt_of_an_undeliverable_video_points_to_status() -> None:
    embed = views.receipt_embed(job(state=S.UNDELIVERABLE), price_yen=250)

    assert embed.description == "It could not be posted. Use `/status #42` to get the file."


# -- other texts -----------------------------------------------------------------------------------


def test_a_failure_announcement_names_the_job_id_and_the_charge() -> None:
    text = views.announcement_text(job(state=S.FAILED), "failed", price_yen=250)

    assert text.startswith(f"<@{REQUESTER}> your video #42 failed")
    assert "charged ¥250" in text and "`vid_abc`" in text


def test_the_balance_embed_never_counts_negative_videos() -> None:
    embed = views.balance_embed(KeyInfo(spend=10_300, max_budget=10_000), masked_key="…abcd", price_yen=250,
                                ledger_all=(0, 0), ledger_guild=(0, 0), locale="en-US")

    assert fields(embed)["Videos left"] == "0 at ¥250 each"
    assert fields(embed)["Key"] == "`…abcd`"
