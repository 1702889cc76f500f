"""Message formatting: who a message can ping, how outside text is shown, the receipt, and Discord's limits."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from typing import get_args

import discord
import pytest

from bot.core.errors import BudgetTooLow, InvalidRequest, ModelUnavailable, SubmissionFailed
from bot.core.notices import Notice
from bot.frontend import embeds
from bot.service.answers import KeyInfo
from bot.service.catalogue import BUILT_IN, DEFAULT_MODEL, Catalogue, VideoModel
from bot.store.jobs import UNREADABLE_202, AdmissionRefused, Job, JobState
from tests.frontend.test_discord_text import (
    HOSTILE,
    active,
    assert_content_fits,
    assert_defused,
    assert_embed_fits,
    assert_no_markdown,
    embed_parts,
)

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


PRO = VideoModel(id="provider/video-model-2.0-pro", name="Video 2.0 Pro", create_path="/gateway/videos/create-pro",
                 price_yen=1_200, supports_seed=False)
TWO_MODELS = Catalogue((DEFAULT_MODEL, PRO), DEFAULT_MODEL.id)


def fields(embed: discord.Embed) -> dict[str, str]:
    return {str(f.name): str(f.value) for f in embed.fields}


# -- who a message can ping ------------------------------------------------------------------------


def test_requester_only_allows_the_requester_and_nobody_else() -> None:
    allowed = embeds.requester_only(job())

    assert allowed.everyone is False
    assert allowed.roles is False
    assert allowed.replied_user is False
    assert isinstance(allowed.users, list)
    assert [user.id for user in allowed.users] == [REQUESTER]
    # dict(): the payload's TypedDict declares every key, but only the ones set are sent.
    assert dict(allowed.to_dict()) == {"parse": [], "users": [REQUESTER]}


MENTIONS = f"@everyone @here look <@{SOMEONE}> <@!{SOMEONE}> <@&{ROLE}> <@123>"


def test_the_delivered_text_pings_the_requester_and_defuses_the_prompt() -> None:
    text = embeds.delivered_text(job(prompt=MENTIONS, seed=7), catalogue=BUILT_IN, compressed=False, via_dm=False)

    assert text.startswith(f"<@{REQUESTER}> your video #42 is ready.")
    assert text.count(f"<@{REQUESTER}>") == 1
    for mention in ("@everyone", "@here", f"<@{SOMEONE}>", f"<@!{SOMEONE}>", f"<@&{ROLE}>"):
        assert mention not in text
    # Whatever still looks like a mention is outside what the message may ping.
    pingable = {int(user_id) for user_id in re.findall(r"<@[!&]?(\d+)>", text)}
    assert pingable == {REQUESTER}
    assert "Seed: 7 · Model: Video 2.0 Fast · Job: `vid_abc` · Cost: ¥250" in text


def test_a_multi_line_prompt_stays_inside_the_quote() -> None:
    text = embeds.delivered_text(job(prompt="line one\n\nline two\n# heading"), catalogue=BUILT_IN, compressed=False,
                                via_dm=False)

    lines = text.split("\n")
    assert len(lines) == 3
    assert lines[1].startswith("> line one")
    assert "line two" in lines[1]


def test_the_delivered_text_in_japanese_with_notes() -> None:
    text = embeds.delivered_text(job(locale="ja"), catalogue=BUILT_IN, compressed=True, via_dm=True)

    assert "動画 #42 ができました" in text
    assert "費用: 250円" in text
    assert "シード: ランダム" in text
    assert "<#10>に投稿できなかったため" in text
    assert "圧縮したコピー" in text


# -- the prompt in /status --------------------------------------------------------------------------


def test_a_long_prompt_fits_the_status_embed_field() -> None:
    embed = embeds.status_embed(job(prompt="*_" * 1000), catalogue=BUILT_IN)

    assert len(fields(embed)["Prompt"]) <= 1024


@pytest.mark.parametrize("locale", ["en-US", "ja"])
def test_status_of_a_charged_202_the_bot_cannot_follow_gives_support_the_reference_and_the_time(locale: str) -> None:
    at = 1_700_000_000.0
    unreadable = job(state=S.FAILED, service_job_id=None, accepted_at=at, finished_at=at,
                     last_error=f"{UNREADABLE_202} (2023-11-14 22:13:20 UTC)")
    text = embeds.status_embed(unreadable, catalogue=BUILT_IN, locale=locale).description or ""
    assert "`—`" not in text, text  # no job id to give: the reference and the time instead
    assert "#42" in text and "`2023-11-14 22:13:20 UTC`" in text and f"<t:{int(at)}:f>" in text, text
    assert "250" in text, text

    unusable = dataclasses.replace(unreadable, last_error="the service gave an unusable job id ..")
    text = embeds.status_embed(unusable, catalogue=BUILT_IN, locale=locale).description or ""
    assert "#42" in text and "unusable job id .." in text and "`—`" not in text, text


# -- the receipt -----------------------------------------------------------------------------------


def test_the_receipt_shows_a_live_relative_timestamp_of_the_acceptance() -> None:
    embed = embeds.receipt_embed(job(), catalogue=BUILT_IN)

    assert fields(embed)["Started"] == f"<t:{int(ACCEPTED)}:R>"
    assert re.fullmatch(r"<t:\d+:R>", fields(embed)["Started"])


def test_the_receipt_of_a_request_not_yet_accepted_uses_the_request_time() -> None:
    embed = embeds.receipt_embed(job(state=S.SUBMITTING, accepted_at=None, service_job_id=None, charged_yen=0),
                                catalogue=BUILT_IN)

    assert fields(embed)["Started"] == f"<t:{int(CREATED)}:R>"
    assert fields(embed)["Job"] == "—"
    assert "Expected wait" not in fields(embed)


def test_the_receipt_gives_one_estimate_of_the_wait() -> None:
    # Without a learned estimate, the general range; with one, when it is likely ready, and not both.
    general = fields(embeds.receipt_embed(job(state=S.PENDING), catalogue=BUILT_IN))
    assert general["Expected wait"] == "about 1-3 minutes" and "Expected ready" not in general
    learned = fields(embeds.receipt_embed(job(state=S.IN_PROGRESS), catalogue=BUILT_IN, ready_at=ACCEPTED + 95))
    assert learned["Expected ready"] == f"<t:{int(ACCEPTED + 95)}:R>" and "Expected wait" not in learned


def test_the_receipt_of_a_delivered_video_links_to_it() -> None:
    embed = embeds.receipt_embed(job(state=S.DELIVERED, delivered_channel_id=10, delivered_message_id=77),
                                catalogue=BUILT_IN)

    assert embed.description == "Posted: https://discord.com/channels/9/10/77"
    assert embed.colour == discord.Colour.green()
    assert fields(embed)["State"] == "delivered"


def test_the_receipt_of_a_failed_job_names_the_job_id_for_support() -> None:
    embed = embeds.receipt_embed(job(state=S.FAILED), catalogue=BUILT_IN)

    assert "`vid_abc`" in (embed.description or "")
    assert "service credit" in (embed.description or "")


def test_the_receipt_of_an_undeliverable_video_points_to_status() -> None:
    embed = embeds.receipt_embed(job(state=S.UNDELIVERABLE), catalogue=BUILT_IN)

    assert embed.description == "It could not be posted. Use `/status #42` to get the file."


# -- other texts -----------------------------------------------------------------------------------


def test_a_failure_announcement_names_the_job_id_and_the_charge() -> None:
    text = embeds.announcement_text(job(state=S.FAILED), "failed", catalogue=BUILT_IN)

    assert text.startswith(f"<@{REQUESTER}> your video #42 failed")
    assert "charged ¥250" in text and "`vid_abc`" in text


@pytest.mark.parametrize("locale", ["en-US", "ja"])
def test_a_charge_that_could_not_be_recorded_is_told_with_its_reference_and_time(locale: str) -> None:
    charged = job(state=S.SUBMITTING, service_job_id=None, locale=locale)
    text = embeds.announcement_text(charged, "charge_unrecorded", catalogue=BUILT_IN)

    assert text.startswith(f"<@{REQUESTER}> ") and "#42" in text
    assert ("¥250" if locale == "en-US" else "250円") in text
    assert time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ACCEPTED)) in text and f"<t:{int(ACCEPTED)}:f>" in text


@pytest.mark.parametrize(
    ("locale", "one", "many"),
    [("en-US", "All time: 1 video, ¥250", "This server: 2 videos, ¥500"),
     ("ja", "累計: 1本、250円", "このサーバー: 2本、500円")],
)
def test_the_balance_ledger_counts_one_video_and_many_videos(locale: str, one: str, many: str) -> None:
    embed = embeds.balance_embed(KeyInfo(spend=500, max_budget=10_000), masked_key="…abcd", price_yen=250,
                                 ledger_all=(1, 250), ledger_guild=(2, 500), locale=locale)

    ledger = list(fields(embed).values())[-1]
    assert ledger.splitlines() == [one, many]


def test_the_balance_embed_never_counts_negative_videos() -> None:
    embed = embeds.balance_embed(KeyInfo(spend=10_300, max_budget=10_000), masked_key="…abcd", price_yen=250,
                                ledger_all=(0, 0), ledger_guild=(0, 0), locale="en-US")

    assert fields(embed)["Videos left"] == "0 at ¥250 each"
    assert fields(embed)["Key"] == "`…abcd`"


# -- every builder, fed 5,000 hostile characters ---------------------------------------------------------

Built = str | discord.Embed
DELIVERED_CHANNEL = 11
#: The only mentions the bot itself writes: the requester, the configured role, the job's channels.
OURS = {f"<@{REQUESTER}>", f"<@&{ROLE}>", "<#10>", f"<#{DELIVERED_CHANNEL}>"}
RESETS = 1_767_193_200.0


def benign(state: JobState) -> Job:
    return job(state=state, last_error="the service said no", delivered_channel_id=DELIVERED_CHANNEL,
               delivered_message_id=77, seed=7)


def hostile(state: JobState) -> Job:
    """A job whose every outside text (prompt, service job id, error reason) is 5,000 hostile characters."""
    return dataclasses.replace(benign(state), prompt=HOSTILE, service_job_id=HOSTILE, last_error=HOSTILE)


def _builders() -> dict[str, tuple[JobState, Callable[[Job], Built]]]:
    builders: dict[str, tuple[JobState, Callable[[Job], Built]]] = {}

    # Each binds its argument now (not the loop variable's last value) and gives the lambda a type.
    def delivered(compressed: bool, via_dm: bool) -> Callable[[Job], Built]:
        return lambda j: embeds.delivered_text(j, catalogue=BUILT_IN, compressed=compressed, via_dm=via_dm)

    def announced(notice: Notice) -> Callable[[Job], Built]:
        return lambda j: embeds.announcement_text(j, notice, catalogue=BUILT_IN)

    def refused(refusal: AdmissionRefused) -> Callable[[Job], Built]:
        return lambda j: embeds.refusal_text(refusal, j.locale)

    def invalid_text(error: InvalidRequest) -> Callable[[Job], Built]:
        return lambda j: embeds.invalid_request_text(error, j.locale)

    for state in S:
        builders[f"receipt-{state}"] = (state, lambda j: embeds.receipt_embed(j, catalogue=BUILT_IN))
        builders[f"status-{state}"] = (state, lambda j: embeds.status_embed(j, catalogue=BUILT_IN))
        builders[f"status-ja-{state}"] = (state, lambda j: embeds.status_embed(j, catalogue=BUILT_IN, locale="ja"))
    builders["status-list"] = (S.FAILED, lambda j: embeds.status_list_embed([j] * 3, "en-US"))
    builders["status-list-200"] = (S.FAILED, lambda j: embeds.status_list_embed([j] * 200, "ja"))
    builders["balance"] = (S.PENDING, lambda j: embeds.balance_embed(
        KeyInfo(spend=10_300, max_budget=100_000), masked_key=j.service_job_id or "", price_yen=250,
        ledger_all=(3, 750), ledger_guild=(1, 250), locale="en-US"))
    builders["balance-no-limit"] = (S.PENDING, lambda j: embeds.balance_embed(
        KeyInfo(spend=10_300, max_budget=None), masked_key=j.service_job_id or "", price_yen=250,
        ledger_all=(3, 750), ledger_guild=(1, 250), locale="ja"))
    for compressed in (False, True):
        for via_dm in (False, True):
            builders[f"delivered-{compressed=}-{via_dm=}"] = (S.DELIVERED, delivered(compressed, via_dm))
    builders["delivered-ja"] = (S.DELIVERED, lambda j: embeds.delivered_text(
        dataclasses.replace(j, locale="ja"), catalogue=BUILT_IN, compressed=True, via_dm=True))
    for notice in get_args(Notice):
        builders[f"announce-{notice}"] = (S.FAILED, announced(notice))
    builders["submission-rejected"] = (S.REJECTED, lambda j: embeds.submission_failed_text(
        SubmissionFailed(j.id, "rejected", j.last_error or "", price_yen=250), "en-US"))
    builders["submission-busy"] = (S.REJECTED, lambda j: embeds.submission_failed_text(
        SubmissionFailed(j.id, "busy", j.last_error or "", price_yen=250), "ja"))
    builders["submission-unknown"] = (S.UNKNOWN, lambda j: embeds.submission_failed_text(
        SubmissionFailed(j.id, "unknown", j.last_error or "", price_yen=250), "en-US"))
    builders["submission-charged_unreadable"] = (S.FAILED, lambda j: embeds.submission_failed_text(
        SubmissionFailed(j.id, "charged_unreadable", j.last_error or "", price_yen=250, at=RESETS), "ja"))
    refusals = [AdmissionRefused("cooldown", RESETS), AdmissionRefused("too_many_active", None, active=2, limit=2),
                AdmissionRefused("guild_daily_cap", RESETS, spent=4_750, cap=5_000, left=250),
                AdmissionRefused("channel", None), AdmissionRefused("role", None, roles=[ROLE]),
                AdmissionRefused("too_many_offers", RESETS, open=3, limit=3)]
    for refusal in refusals:
        builders[f"refusal-{refusal.code}"] = (S.SUBMITTING, refused(refusal))
    invalid = [InvalidRequest("prompt_empty", "empty"), InvalidRequest("prompt_too_long", "long", length=5000,
                                                                          limit=2000),
               InvalidRequest("seed_range", "seed", low=0, high=2**32 - 1), InvalidRequest("seed_unsupported", "no")]
    for error in invalid:
        builders[f"invalid-{error.code}"] = (S.SUBMITTING, invalid_text(error))
    builders["budget"] = (S.SUBMITTING, lambda j: embeds.budget_text(BudgetTooLow(9_900, 10_000, 250), j.locale))
    # The model asked for is outside text (a typed option value): the hostile service job id stands in for it.
    offered = (("Video 2.0 Fast", 250), ("Video 2.0 Pro", 1_200))
    builders["model-unknown"] = (S.SUBMITTING, lambda j: embeds.model_text(
        ModelUnavailable("unknown", j.service_job_id or "", offered=offered), j.locale))
    builders["model-not-allowed-ja"] = (S.SUBMITTING, lambda j: embeds.model_text(
        ModelUnavailable("not_allowed", j.service_job_id or "", offered=offered), "ja"))
    builders["model-none-allowed"] = (S.SUBMITTING, lambda j: embeds.model_text(
        ModelUnavailable("none_allowed", j.service_job_id or ""), j.locale))
    builders["model-label"] = (S.PENDING, lambda j: embeds.model_label("Video 2.0 Pro", 1_200, j.locale))
    builders["receipt-two-models"] = (S.PENDING, lambda j: embeds.receipt_embed(j, catalogue=TWO_MODELS))
    builders["job-id-text"] = (S.PENDING, embeds.job_id_text)
    builders["state-name"] = (S.PENDING, embeds.state_name)
    return builders


BUILDERS = _builders()


def texts(built: Built) -> dict[str, str]:
    return embed_parts(built) if isinstance(built, discord.Embed) else {"content": built}


def assert_fits(built: Built) -> None:
    if isinstance(built, discord.Embed):
        assert_embed_fits(built)
    else:
        assert_content_fits(built)


@pytest.fixture(params=[True, False], ids=["with-last-line", "builder-alone"])
def last_line(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run once as shipped, and once with fit_embed/fit_content doing nothing: each builder must fit by itself."""
    if not request.param:
        monkeypatch.setattr(embeds, "fit_embed", lambda embed: embed)
        monkeypatch.setattr(embeds, "fit_content", lambda text: text)
    return bool(request.param)


def test_every_builder_is_covered() -> None:
    """A new public builder in views must join BUILDERS."""
    covered = {"receipt_embed", "status_embed", "status_list_embed", "balance_embed", "delivered_text",
               "announcement_text", "submission_failed_text", "refusal_text", "invalid_request_text", "budget_text",
               "job_id_text", "state_name", "model_text", "model_label"}
    helpers = {"relative", "mention", "requester_only", "job_id_param", "state_key", "status_next_key", "notice_key",
               "refusal_key", "invalid_key", "submission_key", "model_key"}
    public = {name for name, value in vars(embeds).items()
              if callable(value) and not name.startswith("_") and getattr(value, "__module__", "") == embeds.__name__}
    assert public == covered | helpers


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_fits_discords_limits_with_5000_hostile_characters(name: str, last_line: bool) -> None:
    state, build = BUILDERS[name]

    built = build(hostile(state))

    assert_fits(built)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_defuses_hostile_text(name: str, last_line: bool) -> None:
    state, build = BUILDERS[name]
    calm, wild = texts(build(benign(state))), texts(build(hostile(state)))

    assert calm.keys() == wild.keys()
    for part, text in wild.items():
        assert_defused(text, OURS)
        assert_no_markdown(text)
        # Hostile text adds no line and no backtick that acts: the layout is the catalogue's.
        assert text.count("\n") == calm[part].count("\n"), part
        assert active(text, "`") == active(calm[part], "`"), part


def test_job_id_text_of_a_5000_character_id_is_one_short_code_span() -> None:
    shown = embeds.job_id_text(hostile(S.PENDING))

    assert len(shown) <= 102
    assert shown.startswith("`") and shown.endswith("…`") and shown.count("`") == 2


def test_the_hostile_prompt_in_status_is_cut_to_1000_characters() -> None:
    embed = embeds.status_embed(hostile(S.PENDING), catalogue=BUILT_IN)

    assert 900 <= len(fields(embed)["Prompt"]) <= 1000
    assert fields(embed)["Prompt"].endswith("…")


def test_the_role_in_a_refusal_can_only_be_a_number() -> None:
    assert embeds.refusal_text(AdmissionRefused("role", None, roles=[ROLE]), "en-US") == (
        f"You need one of these roles to request videos: <@&{ROLE}>. Nothing was spent.")
    with pytest.raises(ValueError):
        embeds.refusal_text(AdmissionRefused("role", None, roles=["1> @everyone <@123"]), "en-US")
