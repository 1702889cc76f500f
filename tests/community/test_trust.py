"""The trust model: each rule, the order a refusal comes in, and what is refused when a fact is missing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.community import trust
from bot.community.command_permissions import CommandAccess, PermissionEntry, PermissionType
from bot.community.server_rules import defaults_from
from bot.community.trust import Check, Facts, Host, MemberRules, Membership, PublicBot, Reroll, Stage, Standing, Target
from bot.config.settings import read_settings
from bot.store.servers import MemberRecord

LISTED, UNLISTED = 10, 12
REQUESTER, OTHER = 1, 2
CLICKED = 500
HOST = Host(frozenset({LISTED, 11}), paused=False)
EVERYONE = MemberRules(100, frozenset(), False, frozenset(), frozenset())
APP, VIDEO_ID, ROLE = 900, 910, 55
SEND_MESSAGES, ADMINISTRATOR = 1 << 11, 1 << 3


def standing(*entries: tuple[int, int, bool], roles: frozenset[int] = frozenset({ROLE}),
             permissions: int = SEND_MESSAGES, app: tuple[tuple[int, int, bool], ...] = ()) -> Standing:
    """A member of LISTED in channel 100, with /video's command permissions there (entries of /video, of the app)."""
    by_target = {target: tuple(PermissionEntry(*e) for e in found)
                 for target, found in ((VIDEO_ID, entries), (APP, app)) if found}
    return Standing(True, Membership(roles, permissions, 100), CommandAccess(VIDEO_ID, APP, LISTED, None, by_target))


#: A member whom nothing keeps from /video.
STANDING = standing()


def member_in(guild_id: int | None = LISTED, **facts: object) -> Facts:
    return replace(Facts(user_id=REQUESTER, guild_id=guild_id, in_dm=guild_id is None), **facts)  # type: ignore[arg-type]


def click(guild_id: int | None = LISTED, owner: int = REQUESTER, row_guild: int | None = LISTED,
          message_id: int | None = CLICKED, **facts: object) -> Facts:
    """A click on the message the bot recorded for a row of `owner` in `row_guild`."""
    return member_in(guild_id, **{"message_id": CLICKED, "target": Target(owner, row_guild, message_id),
                                  "reroll": Reroll(owner, "requester"), "member": EVERYONE, "standing": STANDING,
                                  **facts})


def actions(*kinds: trust.Kind) -> list[str]:
    return [action for action, policy in trust.POLICY.items() if policy.kind in kinds]


# -- the host's rules --------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", actions(trust.Kind.COMMAND, trust.Kind.AUTOCOMPLETE, trust.Kind.BUTTON))
def test_an_unlisted_server_gets_one_short_refusal_for_everything(action: str) -> None:
    facts = click(UNLISTED, row_guild=UNLISTED, manage_server=True, manage_messages=True)
    decision = trust.decide(action, facts, HOST, trust.GATE)
    assert (decision.check, decision.reason) == (Check.SERVER_LISTED, "server_not_allowed")
    assert trust.decide(action, click(LISTED, manage_server=True), HOST, trust.GATE).allowed


def test_no_server_list_allows_every_server() -> None:
    assert Host().lists(UNLISTED) and Host().lists(None)
    assert trust.decide(trust.BALANCE, member_in(UNLISTED), Host(), trust.GATE).allowed


def test_the_pause_stops_spending_and_only_spending() -> None:
    paused = replace(HOST, paused=True)
    refused = {
        action for action in actions(trust.Kind.COMMAND, trust.Kind.AUTOCOMPLETE, trust.Kind.BUTTON)
        if trust.decide(action, click(manage_server=True), paused, trust.GATE).reason == "paused"
    }
    assert refused == {trust.VIDEO, trust.REROLL, trust.CONFIRM, trust.GENERATE}
    assert trust.decide(trust.VIDEO, member_in(), HOST, trust.GATE).allowed


def test_the_pause_must_be_read_where_it_is_checked_and_is_not_read_elsewhere() -> None:
    with pytest.raises(trust.MissingFact):
        trust.decide(trust.VIDEO, member_in(), Host(), trust.GATE)
    assert trust.needs(trust.VIDEO, Check.NOT_PAUSED, trust.GATE)
    assert not trust.needs(trust.BALANCE, Check.NOT_PAUSED, trust.GATE)
    assert not trust.needs(trust.REROLL, Check.NOT_PAUSED, {Stage.TARGET})
    assert trust.decide(trust.BALANCE, member_in(), Host(HOST.allowed_guild_ids), trust.GATE).allowed


def test_a_command_in_a_dm_is_for_servers_only_before_anything_else() -> None:
    decision = trust.decide(trust.BALANCE, member_in(None), HOST, trust.GATE)
    assert (decision.check, decision.reason) == (Check.IN_SERVER, "guild_only")


def test_a_click_in_a_dm_is_checked_against_its_rows_server() -> None:
    assert trust.decide(trust.DELETE, click(None, row_guild=LISTED), HOST).allowed
    refused = trust.decide(trust.DELETE, click(None, row_guild=UNLISTED), HOST)
    assert refused.reason == "server_not_allowed"
    # Without its row, a DM click cannot be checked at all: never allowed by default.
    with pytest.raises(trust.MissingFact):
        trust.decide(trust.DELETE, member_in(None), HOST, trust.GATE)


# -- the caller --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", [a for a in trust.POLICY if a.startswith("/settings")] + [trust.CREDIT])
def test_settings_and_credit_need_manage_server(action: str) -> None:
    decision = trust.decide(action, member_in(), HOST, trust.GATE)
    assert (decision.check, decision.reason) == (Check.MANAGE_SERVER, "missing_permission")
    assert trust.decide(action, member_in(manage_server=True), HOST, trust.GATE).allowed


# -- the row -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", actions(trust.Kind.BUTTON))
def test_a_click_on_a_message_the_bot_did_not_write_for_that_row_is_refused_as_unknown(action: str) -> None:
    assert trust.decide(action, click(), HOST).allowed
    for recorded in (CLICKED + 1, None):  # another message; or none recorded (yet, or ever)
        decision = trust.decide(action, click(message_id=recorded), HOST)
        assert (decision.check, decision.reason) == (Check.BOT_MESSAGE, "unknown")


@pytest.mark.parametrize("action", actions(trust.Kind.BUTTON))
def test_a_click_on_another_servers_row_is_refused_as_unknown(action: str) -> None:
    decision = trust.decide(action, click(LISTED, row_guild=11), HOST)
    assert (decision.check, decision.reason) == (Check.SAME_SERVER, "unknown")


@pytest.mark.parametrize("action", [trust.CONFIRM, trust.GENERATE, trust.CANCEL_OFFER, trust.CANCEL_REQUEST])
def test_only_its_owner_uses_an_offer_or_cancels_a_request(action: str) -> None:
    decision = trust.decide(action, click(owner=OTHER), HOST)
    assert (decision.check, decision.reason) == (Check.OWNER, "not_yours")


def test_delete_is_the_requesters_or_a_moderators() -> None:
    assert trust.decide(trust.DELETE, click(), HOST).allowed
    refused = trust.decide(trust.DELETE, click(owner=OTHER), HOST)
    assert (refused.check, refused.reason) == (Check.OWNER_OR_MANAGE_MESSAGES, "delete_refused")
    assert trust.decide(trust.DELETE, click(owner=OTHER, manage_messages=True), HOST).allowed
    assert not trust.decide(trust.DELETE, click(owner=OTHER, manage_server=True), HOST).allowed


@pytest.mark.parametrize("action", [trust.REROLL, trust.CONFIRM])
def test_who_may_reroll_follows_the_servers_setting(action: str) -> None:
    # The clicker owns the offer (Confirm) but the video is someone else's.
    theirs = click(owner=OTHER if action == trust.REROLL else REQUESTER, reroll=Reroll(OTHER, "requester"))
    refused = trust.decide(action, theirs, HOST)
    assert (refused.check, refused.reason) == (Check.REROLL_BY, "reroll_not_allowed")
    assert trust.decide(action, replace(theirs, reroll=Reroll(OTHER, "anyone")), HOST).allowed


def test_someone_elses_request_answers_exactly_as_one_that_does_not_exist() -> None:
    mine = member_in(target=Target(REQUESTER, LISTED))
    theirs = member_in(target=Target(OTHER, LISTED))
    assert trust.decide(trust.STATUS, mine, HOST).allowed
    refused = trust.decide(trust.STATUS, theirs, HOST)
    assert (refused.check, refused.reason) == (Check.SEES_REQUEST, trust.POLICY[trust.STATUS].unknown)
    assert refused.reason == "not_found"
    # Members with Manage Server moderate: they see every request of their server.
    assert trust.decide(trust.STATUS, replace(theirs, manage_server=True), HOST).allowed
    elsewhere = trust.decide(trust.STATUS, replace(theirs, target=Target(REQUESTER, 11), manage_server=True), HOST)
    assert elsewhere.reason == "not_found"


def test_usage_shows_the_whole_server_only_with_manage_server() -> None:
    assert not trust.sees_server(trust.USAGE, member_in())
    assert trust.sees_server(trust.USAGE, member_in(manage_server=True))
    assert not trust.sees_server(trust.STATUS_AUTOCOMPLETE, member_in(manage_server=True)), "own only"
    with pytest.raises(trust.UnknownAction):
        trust.sees_server(trust.BALANCE, member_in())


# -- what Discord says of the clicker -----------------------------------------------------------------------

SPENDING_BUTTONS = [trust.REROLL, trust.CONFIRM, trust.GENERATE]


@pytest.mark.parametrize("action", actions(trust.Kind.BUTTON))
def test_buttons_that_spend_ask_discord_what_slash_commands_are_held_to_and_no_other_does(action: str) -> None:
    asks = trust.checks(action, {Stage.DISCORD})
    assert asks == ((Check.STILL_MEMBER, Check.VIDEO_PERMISSION) if action in SPENDING_BUTTONS else ())
    # Nothing but a click reads Discord: /video is checked by Discord itself before the bot sees it.
    assert not any(trust.checks(other, {Stage.DISCORD}) for other in actions(trust.Kind.COMMAND, trust.Kind.CHORE))


@pytest.mark.parametrize("action", SPENDING_BUTTONS)
def test_a_click_in_a_dm_from_someone_no_longer_in_the_server_spends_nothing(action: str) -> None:
    gone = click(None, standing=Standing(True))
    decision = trust.decide(action, gone, HOST)
    assert (decision.check, decision.reason) == (Check.STILL_MEMBER, "not_member")
    assert trust.decide(action, click(None), HOST).allowed


@pytest.mark.parametrize("action", SPENDING_BUTTONS)
def test_what_discord_could_not_tell_refuses(action: str) -> None:
    decision = trust.decide(action, click(standing=Standing.unreadable()), HOST)
    assert (decision.check, decision.reason) == (Check.STILL_MEMBER, "standing_unreadable")
    # Either check refuses alone too.
    assert trust.decide(action, click(standing=Standing.unreadable()), HOST, {Stage.DISCORD}).reason \
        == "standing_unreadable"
    with pytest.raises(trust.MissingFact, match="what Discord says"):
        trust.decide(action, click(standing=None), HOST)


@pytest.mark.parametrize("action", SPENDING_BUTTONS)
def test_the_servers_command_permissions_for_video_bind_the_buttons_that_spend(action: str) -> None:
    role, user, channel = PermissionType.ROLE, PermissionType.USER, PermissionType.CHANNEL

    def reason(found: Standing) -> str | None:
        return trust.decide(action, click(standing=found), HOST).reason

    assert reason(standing((ROLE, role, False))) == "video_denied"  # the member's role
    assert reason(standing((REQUESTER, user, False))) == "video_denied"  # the member
    assert reason(standing((LISTED, role, False))) == "video_denied"  # @everyone
    assert reason(standing((100, channel, False))) == "video_denied"  # the request's channel
    assert reason(standing((LISTED - 1, channel, False))) == "video_denied"  # all channels
    assert reason(standing(app=((ROLE, role, False),))) == "video_denied"  # the whole application
    assert reason(standing((101, channel, False))) is None  # another channel
    assert reason(standing((ROLE, role, False), (REQUESTER, user, True))) is None  # the member's own entry wins
    assert reason(standing((ROLE, role, False), permissions=ADMINISTRATOR)) is None  # administrators: everything
    denied = trust.decide(action, click(standing=standing((ROLE, role, False))), HOST)
    assert denied.check is Check.VIDEO_PERMISSION


def test_discords_word_comes_before_the_servers_member_rules() -> None:
    blocked = replace(EVERYONE, blocked=True)
    gone = trust.decide(trust.REROLL, click(None, member=blocked, standing=Standing(True)), HOST)
    assert gone.reason == "not_member"
    assert trust.decide(trust.REROLL, click(None, member=blocked), HOST).reason == "member_blocked"


# -- the application -----------------------------------------------------------------------------------------


def test_a_public_application_with_no_server_list_is_refused_unless_the_host_accepts_it() -> None:
    def verdict(bot_public: bool, listed: frozenset[int], accepted: bool) -> PublicBot:
        return trust.public_bot(bot_public=bot_public, allowed_guild_ids=listed, accepted=accepted)

    assert verdict(True, frozenset(), False) is PublicBot.REFUSED
    assert verdict(True, frozenset(), True) is PublicBot.ACCEPTED
    assert verdict(True, frozenset({LISTED}), False) is PublicBot.LISTED
    assert verdict(False, frozenset(), False) is PublicBot.PRIVATE
    line = str(trust.PublicBotRefused())
    assert "\n" not in line and "Public Bot" in line and "Developer Portal" in line and "ALLOWED_GUILD_IDS" in line


# -- the server's member rules -----------------------------------------------------------------------------


def test_allowed_channels_required_role_and_blocked_members() -> None:
    env = {"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k"}
    server = defaults_from(read_settings({**env, "ALLOWED_CHANNEL_IDS": "100,101", "REQUIRED_ROLE_ID": "55"}))
    everywhere = defaults_from(read_settings(env))

    def rules(channel: int, roles: list[int], *, blocked: bool = False, settings: object = server) -> trust.Decision:
        member = MemberRules.of(settings, MemberRecord(blocked=blocked), channel, roles)  # type: ignore[arg-type]
        return trust.decide(trust.VIDEO, member_in(member=member), HOST, {Stage.REQUEST})

    assert rules(100, [55]).allowed
    assert rules(102, [55]).reason == "channel"
    role = rules(101, [54])
    assert (role.reason, role.roles) == ("role", (55,))
    assert rules(101, [54], settings=replace(server, allowed_role_ids=frozenset({54, 55}))).allowed  # any one
    assert rules(999, [], settings=everywhere).allowed  # the defaults: everywhere, everyone
    assert rules(999, [], settings=everywhere, blocked=True).reason == "member_blocked"


# -- the model itself --------------------------------------------------------------------------------------


def test_a_missing_fact_refuses_as_a_fault_never_allows() -> None:
    for facts in (member_in(), member_in(target=Target(REQUESTER, LISTED, CLICKED))):
        with pytest.raises(trust.MissingFact):
            trust.decide(trust.CANCEL_OFFER, facts, HOST)
    with pytest.raises(trust.MissingFact):
        trust.decide(trust.VIDEO, member_in(), HOST, {Stage.REQUEST})


def test_a_decision_is_allowed_only_when_made_so_never_by_a_refusal_left_half_made() -> None:
    assert trust.Decision(trust.VIDEO).allowed
    assert not trust.Decision(trust.VIDEO, Check.NOT_PAUSED, "paused").allowed
    for half_made in ({"reason": "unknown"}, {"check": Check.OWNER}, {"roles": (ROLE,)}):
        with pytest.raises(ValueError):
            trust.Decision(trust.VIDEO, **half_made)


def test_an_action_with_no_policy_is_a_fault() -> None:
    with pytest.raises(trust.UnknownAction):
        trust.decide("/nothing", member_in(), HOST)


def test_the_spending_limits_are_left_to_the_store_and_chores_act_for_nobody() -> None:
    assert trust.checks(trust.VIDEO, {Stage.STORE}) == (Check.SPENDING_LIMITS,)
    assert trust.decide(trust.VIDEO, member_in(member=EVERYONE), HOST).allowed
    assert trust.decide(trust.LOG_LINES, Facts(guild_id=LISTED), HOST).allowed
    assert not trust.decide(trust.BUDGET_ALERTS, Facts(guild_id=UNLISTED), HOST).allowed
    assert trust.decide(trust.RECEIPTS, Facts(guild_id=UNLISTED), HOST).allowed


def test_autocomplete_and_subcommand_actions_are_named_like_the_command() -> None:
    assert trust.command_action("settings limits") == "/settings limits"
    assert trust.command_action("status", "job_id") == trust.STATUS_AUTOCOMPLETE
