"""Who may spend the host's key and who may see what: one model for every entry point.

Each action (a slash command or subcommand, an autocomplete, a button, a background chore) has one declared
`Policy`: the checks it passes, in the order they are made, and which members' requests it shows. The front end
gathers plain facts (the server, the member's permissions, the row a click is about, the message clicked) and
asks `decide`; it never decides itself. docs/trust.md shows `POLICY` as one table, and a test keeps the two equal.

A check belongs to a `Stage`, the moment its facts are known: the host's rules and the caller's permissions
from the interaction alone (the command tree's `interaction_check`, a button's first step), the row a click or
a lookup is about once it is read, the server's member rules when a request is checked before it is recorded,
and the spending limits in the store's own transaction that records it (bot/store/jobs.py `add_submission`).

Discord checks a slash command before the bot sees it (the member is in the server, and the server's command
permissions let them use it there) and checks no button. So the buttons that spend pass those two checks here too,
from what the front end read from Discord once the row names the server (`Standing`, bot/frontend/permissions.py):
a click in a DM from someone no longer in the server, or from a member the server's settings keep from /video,
spends nothing.

Safe by default: a check whose fact was not gathered raises `MissingFact` (an internal error, nothing done),
never passes; a fact Discord could not give now refuses too. To add a check: add it to `Check`, give it a stage,
a predicate in `_PREDICATES` that reads a new field of `Facts`, list it in the policies of the actions it binds,
and have the front end gather the fact.

The application itself is held to one rule before anything runs (`public_bot`): a public application with no
server list does not serve, unless the host accepts that risk by name.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import TypeVar

from bot.community.command_permissions import CommandAccess
from bot.community.server_rules import RerollBy, ServerSettings
from bot.store.servers import MemberRecord

T = TypeVar("T")


class Check(StrEnum):
    """One rule an action can pass. The value is the name docs/trust.md uses."""

    IN_SERVER = "in_server"  # a server's command, not run in a DM
    SERVER_LISTED = "server_listed"  # the host's ALLOWED_GUILD_IDS (empty: every server)
    NOT_PAUSED = "not_paused"  # the host's pause of spending (`python -m bot pause`)
    MANAGE_SERVER = "manage_server"  # the member has Manage Server
    SAME_SERVER = "same_server"  # the row belongs to the server the interaction comes from (a DM click: any)
    BOT_MESSAGE = "bot_message"  # the click is on the message the bot wrote for that row
    OWNER = "owner"  # the row is the clicker's own
    OWNER_OR_MANAGE_MESSAGES = "owner_or_manage_messages"
    REROLL_BY = "reroll_by"  # the video's requester, or anyone where the server's /settings reroll says so
    STILL_MEMBER = "still_member"  # the clicker is in the server now (a click in a DM: as Discord answers now)
    VIDEO_PERMISSION = "video_permission"  # the server's command permissions for /video let the clicker use it
    SEES_REQUEST = "sees_request"  # the request is the caller's own, or the caller has Manage Server
    MEMBER_RULES = "member_rules"  # the server's channels, roles and blocked members
    SPENDING_LIMITS = "spending_limits"  # caps, cooldown and videos in flight: the store's recording transaction


class Stage(Enum):
    HOST = "host"
    CALLER = "caller"
    TARGET = "target"
    DISCORD = "discord"  # what Discord says of the clicker in the row's server now, read by the front end
    REQUEST = "request"
    STORE = "store"


STAGE: dict[Check, Stage] = {
    Check.IN_SERVER: Stage.CALLER,
    Check.SERVER_LISTED: Stage.HOST,
    Check.NOT_PAUSED: Stage.HOST,
    Check.MANAGE_SERVER: Stage.CALLER,
    Check.SAME_SERVER: Stage.TARGET,
    Check.BOT_MESSAGE: Stage.TARGET,
    Check.OWNER: Stage.TARGET,
    Check.OWNER_OR_MANAGE_MESSAGES: Stage.TARGET,
    Check.REROLL_BY: Stage.TARGET,
    Check.SEES_REQUEST: Stage.TARGET,
    Check.STILL_MEMBER: Stage.DISCORD,
    Check.VIDEO_PERMISSION: Stage.DISCORD,
    Check.MEMBER_RULES: Stage.REQUEST,
    Check.SPENDING_LIMITS: Stage.STORE,
}

#: What can be decided from the interaction alone: the command tree checks these before any command runs.
GATE: frozenset[Stage] = frozenset({Stage.HOST, Stage.CALLER})
#: Everything `decide` itself evaluates (the store makes the spending limits, in the transaction that records).
EVERY_STAGE: frozenset[Stage] = frozenset(Stage) - {Stage.STORE}


class Kind(StrEnum):
    COMMAND = "command"
    AUTOCOMPLETE = "autocomplete"
    BUTTON = "button"
    CHORE = "chore"


class Scope(StrEnum):
    """Whose requests an action shows."""

    NONE = "none"
    OWN = "own"
    OWN_OR_SERVER = "own; all with Manage Server"


@dataclass(frozen=True)
class Policy:
    kind: Kind
    checks: tuple[Check, ...]
    scope: Scope = Scope.NONE
    #: The reason a row that is not there, or not the caller's to see, is answered with: one answer for both.
    unknown: str = "unknown"


# -- the actions ----------------------------------------------------------------------------------------

_C = Check
_SERVER = (_C.IN_SERVER, _C.SERVER_LISTED)
_ADMIN = (*_SERVER, _C.MANAGE_SERVER)
#: What Discord checks before a slash command reaches the bot, and a button that spends must pass too.
_AS_VIDEO = (_C.STILL_MEMBER, _C.VIDEO_PERMISSION)

#: The subcommands of /settings (bot/frontend/cogs/settings.py): each is an action, all bound alike.
SETTINGS_SUBCOMMANDS = (
    "show", "limits", "reset", "channels", "roles", "log_channel", "blocklist", "member", "models", "language",
    "timezone", "budget_alert", "reroll", "confirm",
)

VIDEO = "/video"
STATUS = "/status"
STATUS_AUTOCOMPLETE = "/status job_id"
BALANCE = "/balance"
USAGE = "/usage"
CREDIT = "/credit"
REROLL = "Re-roll"
DELETE = "Delete"
CONFIRM = "Confirm"
GENERATE = "Generate"
CANCEL_OFFER = "Cancel offer"
CANCEL_REQUEST = "Cancel request"
LOG_LINES = "log lines"
BUDGET_ALERTS = "budget alerts"
RECEIPTS = "receipt refresh"
PROMPT_RETENTION = "prompt retention"
RECORD_RETENTION = "event and offer retention"

POLICY: dict[str, Policy] = {
    VIDEO: Policy(Kind.COMMAND, (*_SERVER, _C.NOT_PAUSED, _C.MEMBER_RULES, _C.SPENDING_LIMITS)),
    STATUS: Policy(Kind.COMMAND, (*_SERVER, _C.SAME_SERVER, _C.SEES_REQUEST), Scope.OWN_OR_SERVER,
                   unknown="not_found"),
    STATUS_AUTOCOMPLETE: Policy(Kind.AUTOCOMPLETE, _SERVER, Scope.OWN),
    BALANCE: Policy(Kind.COMMAND, _SERVER),
    USAGE: Policy(Kind.COMMAND, _SERVER, Scope.OWN_OR_SERVER),
    CREDIT: Policy(Kind.COMMAND, (*_ADMIN, _C.SAME_SERVER), unknown="not_found"),
    **{f"/settings {name}": Policy(Kind.COMMAND, _ADMIN) for name in SETTINGS_SUBCOMMANDS},
    "/settings models model": Policy(Kind.AUTOCOMPLETE, _ADMIN),
    "/settings timezone zone": Policy(Kind.AUTOCOMPLETE, _ADMIN),
    REROLL: Policy(Kind.BUTTON, (_C.SERVER_LISTED, _C.NOT_PAUSED, _C.SAME_SERVER, _C.BOT_MESSAGE, _C.REROLL_BY,
                                 *_AS_VIDEO, _C.MEMBER_RULES)),
    DELETE: Policy(Kind.BUTTON, (_C.SERVER_LISTED, _C.SAME_SERVER, _C.BOT_MESSAGE, _C.OWNER_OR_MANAGE_MESSAGES)),
    CONFIRM: Policy(Kind.BUTTON, (_C.SERVER_LISTED, _C.NOT_PAUSED, _C.SAME_SERVER, _C.BOT_MESSAGE, _C.OWNER,
                                  _C.REROLL_BY, *_AS_VIDEO, _C.MEMBER_RULES, _C.SPENDING_LIMITS)),
    GENERATE: Policy(Kind.BUTTON, (_C.SERVER_LISTED, _C.NOT_PAUSED, _C.SAME_SERVER, _C.BOT_MESSAGE, _C.OWNER,
                                   *_AS_VIDEO, _C.MEMBER_RULES, _C.SPENDING_LIMITS)),
    CANCEL_OFFER: Policy(Kind.BUTTON, (_C.SERVER_LISTED, _C.SAME_SERVER, _C.BOT_MESSAGE, _C.OWNER)),
    CANCEL_REQUEST: Policy(Kind.BUTTON, (_C.SERVER_LISTED, _C.SAME_SERVER, _C.BOT_MESSAGE, _C.OWNER)),
    # Chores act for nobody: a server the host no longer lists hears nothing more from the bot, but a paid
    # request's own receipt and video still reach its requester (a paid video is never lost).
    LOG_LINES: Policy(Kind.CHORE, (_C.SERVER_LISTED,)),
    BUDGET_ALERTS: Policy(Kind.CHORE, (_C.SERVER_LISTED,)),
    RECEIPTS: Policy(Kind.CHORE, ()),
    PROMPT_RETENTION: Policy(Kind.CHORE, ()),
    RECORD_RETENTION: Policy(Kind.CHORE, ()),
}


class UnknownAction(LookupError):
    """An entry point with no declared policy: refused, as a fault to fix, never allowed by default."""


def policy(action: str) -> Policy:
    try:
        return POLICY[action]
    except KeyError:
        raise UnknownAction(action) from None


def command_action(qualified_name: str, focused: str | None = None) -> str:
    """The action of a slash command (`settings limits`), or of its autocomplete of option `focused`."""
    return f"/{qualified_name} {focused}" if focused is not None else f"/{qualified_name}"


# -- the facts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Host:
    """The host's rules above every server: the environment's server list, and the pause (read from the
    database when an action needs it; None: not read)."""

    allowed_guild_ids: frozenset[int] = frozenset()
    paused: bool | None = None

    def lists(self, guild_id: int | None) -> bool:
        return not self.allowed_guild_ids or guild_id in self.allowed_guild_ids


@dataclass(frozen=True)
class Target:
    """The job or offer an action is about, as the bot recorded it."""

    owner_id: int  # who asked for it
    guild_id: int | None
    #: The message the bot wrote for it, where its buttons are (None: not recorded, so no click on it passes).
    message_id: int | None = None


@dataclass(frozen=True)
class MemberRules:
    """What the server's channel, role and block rules need: where the request would be posted, and who asks."""

    channel_id: int
    role_ids: frozenset[int]
    blocked: bool
    allowed_channel_ids: frozenset[int]
    allowed_role_ids: frozenset[int]

    @classmethod
    def of(cls, server: ServerSettings, member: MemberRecord, channel_id: int,
           role_ids: Collection[int]) -> MemberRules:
        return cls(channel_id, frozenset(role_ids), member.blocked, server.allowed_channel_ids,
                   server.allowed_role_ids)


@dataclass(frozen=True)
class Reroll:
    """A re-roll's facts: who asked for the video, and who the server lets re-roll it."""

    requester_id: int
    reroll_by: RerollBy


@dataclass(frozen=True)
class Membership:
    """The clicker as a member of the row's server now: the interaction's member for a click there, the member
    Discord answers with for a click in a DM."""

    role_ids: frozenset[int]
    #: Their permissions (bits) in the request's channel, as Discord computes them.
    permissions: int
    #: The channel command permissions are read for: the request's, or its parent channel for a thread.
    channel_id: int


@dataclass(frozen=True)
class Standing:
    """What Discord says of the clicker in the row's server now (bot/frontend/permissions.py reads it).

    `member` None: not a member (left, kicked or banned). `video`: /video's command permissions there (None when
    there is no member to ask about). `readable` False: Discord could not be asked now; both checks refuse.
    """

    readable: bool
    member: Membership | None = None
    video: CommandAccess | None = None

    @classmethod
    def unreadable(cls) -> Standing:
        return cls(False)


@dataclass(frozen=True)
class Facts:
    """What the front end gathered about one interaction (or the server a chore would speak to)."""

    user_id: int | None = None  # None: a chore, acting for nobody
    guild_id: int | None = None  # the server the interaction comes from (None: a DM)
    in_dm: bool = False
    manage_server: bool = False
    manage_messages: bool = False
    message_id: int | None = None  # the message a button was clicked on
    target: Target | None = None
    reroll: Reroll | None = None
    member: MemberRules | None = None
    standing: Standing | None = None

    @property
    def server_id(self) -> int | None:
        """The server the action acts in: the interaction's, or for a click in a DM its row's."""
        if self.in_dm and self.target is not None:
            return self.target.guild_id
        return self.guild_id


class MissingFact(RuntimeError):
    """A check ran without the fact it reads: the front end's fault, answered as an internal error."""

    def __init__(self, action: str, check: Check, fact: str) -> None:
        super().__init__(f"{action}: {check} needs {fact}")


@dataclass(frozen=True)
class Decision:
    action: str
    check: Check | None = None  # the check that refused; None: allowed
    reason: str | None = None  # the reason code the answer is worded from
    roles: tuple[int, ...] = ()  # a role refusal: the roles that would do

    def __post_init__(self) -> None:
        # A refusal names both the check that failed and its reason. One without the other is a fault in the
        # caller, never a decision: read as "no check refused", it would let the action through.
        if (self.check is None) != (self.reason is None) or (self.roles and self.check is None):
            raise ValueError(f"{self.action}: a refusal needs both its check and its reason, not {self!r}")

    @property
    def allowed(self) -> bool:
        return self.check is None


# -- the checks -----------------------------------------------------------------------------------------

#: A predicate answers None when the check passes, else the reason code of its refusal (and the roles that
#: would do, for a role refusal).
Verdict = tuple[str, tuple[int, ...]] | None
Predicate = Callable[[str, Facts, Host], Verdict]


def _need(value: T | None, action: str, check: Check, fact: str) -> T:
    if value is None:
        raise MissingFact(action, check, fact)
    return value


def _no(reason: str) -> Verdict:
    return reason, ()


def _in_server(action: str, facts: Facts, host: Host) -> Verdict:
    return _no("guild_only") if facts.in_dm or facts.guild_id is None else None


def _server_listed(action: str, facts: Facts, host: Host) -> Verdict:
    if facts.in_dm:
        _need(facts.target, action, Check.SERVER_LISTED, "the row of a click in a DM")
    return None if host.lists(facts.server_id) else _no("server_not_allowed")


def _not_paused(action: str, facts: Facts, host: Host) -> Verdict:
    return _no("paused") if _need(host.paused, action, Check.NOT_PAUSED, "the pause") else None


def _manage_server(action: str, facts: Facts, host: Host) -> Verdict:
    return None if facts.manage_server else _no("missing_permission")


def _same_server(action: str, facts: Facts, host: Host) -> Verdict:
    target = _need(facts.target, action, Check.SAME_SERVER, "the row")
    if facts.in_dm or target.guild_id == facts.guild_id:
        return None
    return _no(policy(action).unknown)  # another server's row is not there, as far as this one can tell


def _bot_message(action: str, facts: Facts, host: Host) -> Verdict:
    target = _need(facts.target, action, Check.BOT_MESSAGE, "the row")
    clicked = _need(facts.message_id, action, Check.BOT_MESSAGE, "the message clicked")
    return None if target.message_id is not None and target.message_id == clicked else _no(policy(action).unknown)


def _user(action: str, facts: Facts, check: Check) -> int:
    return _need(facts.user_id, action, check, "the member")


def _owner(action: str, facts: Facts, host: Host) -> Verdict:
    target = _need(facts.target, action, Check.OWNER, "the row")
    return None if target.owner_id == _user(action, facts, Check.OWNER) else _no("not_yours")


def _owner_or_manage_messages(action: str, facts: Facts, host: Host) -> Verdict:
    target = _need(facts.target, action, Check.OWNER_OR_MANAGE_MESSAGES, "the row")
    if target.owner_id == _user(action, facts, Check.OWNER_OR_MANAGE_MESSAGES) or facts.manage_messages:
        return None
    return _no("delete_refused")


def _reroll_by(action: str, facts: Facts, host: Host) -> Verdict:
    reroll = _need(facts.reroll, action, Check.REROLL_BY, "the re-roll rule")
    if reroll.requester_id == _user(action, facts, Check.REROLL_BY) or reroll.reroll_by == "anyone":
        return None
    return _no("reroll_not_allowed")


def _sees_request(action: str, facts: Facts, host: Host) -> Verdict:
    target = _need(facts.target, action, Check.SEES_REQUEST, "the row")
    if target.owner_id == _user(action, facts, Check.SEES_REQUEST) or sees_server(action, facts):
        return None
    return _no(policy(action).unknown)  # someone else's request answers exactly as one that does not exist


def _standing(action: str, facts: Facts, check: Check) -> Standing:
    return _need(facts.standing, action, check, "what Discord says of the member")


def _still_member(action: str, facts: Facts, host: Host) -> Verdict:
    standing = _standing(action, facts, Check.STILL_MEMBER)
    if not standing.readable:
        return _no("standing_unreadable")
    return None if standing.member is not None else _no("not_member")


def _video_permission(action: str, facts: Facts, host: Host) -> Verdict:
    standing = _standing(action, facts, Check.VIDEO_PERMISSION)
    if not standing.readable:
        return _no("standing_unreadable")
    if standing.member is None:
        return _no("not_member")
    video = _need(standing.video, action, Check.VIDEO_PERMISSION, "/video's command permissions")
    member = standing.member
    decision = video.decide(user_id=_user(action, facts, Check.VIDEO_PERMISSION), role_ids=member.role_ids,
                            channel_id=member.channel_id, member_permissions=member.permissions)
    return None if decision.allowed else _no("video_denied")


def _member_rules(action: str, facts: Facts, host: Host) -> Verdict:
    member = _need(facts.member, action, Check.MEMBER_RULES, "the member rules")
    if member.blocked:
        return _no("member_blocked")
    if member.allowed_channel_ids and member.channel_id not in member.allowed_channel_ids:
        return _no("channel")
    if member.allowed_role_ids and not member.allowed_role_ids & member.role_ids:
        return "role", tuple(sorted(member.allowed_role_ids))
    return None


def _in_the_store(action: str, facts: Facts, host: Host) -> Verdict:
    raise AssertionError("the spending limits are checked by the store, in the transaction that records")


_PREDICATES: dict[Check, Predicate] = {
    Check.IN_SERVER: _in_server,
    Check.SERVER_LISTED: _server_listed,
    Check.NOT_PAUSED: _not_paused,
    Check.MANAGE_SERVER: _manage_server,
    Check.SAME_SERVER: _same_server,
    Check.BOT_MESSAGE: _bot_message,
    Check.OWNER: _owner,
    Check.OWNER_OR_MANAGE_MESSAGES: _owner_or_manage_messages,
    Check.REROLL_BY: _reroll_by,
    Check.SEES_REQUEST: _sees_request,
    Check.STILL_MEMBER: _still_member,
    Check.VIDEO_PERMISSION: _video_permission,
    Check.MEMBER_RULES: _member_rules,
    Check.SPENDING_LIMITS: _in_the_store,
}
assert set(_PREDICATES) == set(Check) == set(STAGE), "every check needs its stage and its predicate"


# -- deciding -------------------------------------------------------------------------------------------


def checks(action: str, stages: Collection[Stage] = EVERY_STAGE) -> tuple[Check, ...]:
    """The action's checks made at these stages, in order."""
    return tuple(check for check in policy(action).checks if STAGE[check] in stages)


def needs(action: str, check: Check, stages: Collection[Stage] = EVERY_STAGE) -> bool:
    """Whether deciding `action` at these stages makes `check` (so the front end gathers its fact)."""
    return check in checks(action, stages)


def decide(action: str, facts: Facts, host: Host, stages: Collection[Stage] = EVERY_STAGE) -> Decision:
    """Allowed, or refused by the first of the action's checks (at these stages) that fails, with its reason."""
    for check in checks(action, stages):
        if check is Check.SPENDING_LIMITS:
            continue  # the store's transaction makes it (bot/community/guardrails.py `admission`)
        verdict = _PREDICATES[check](action, facts, host)
        if verdict is not None:
            reason, roles = verdict
            return Decision(action, check, reason, roles)
    return Decision(action)


def sees_server(action: str, facts: Facts) -> bool:
    """Whether the caller sees every member's requests in the server (else only their own)."""
    scope = policy(action).scope
    if scope is Scope.NONE:
        raise UnknownAction(f"{action} shows no requests")
    return scope is Scope.OWN_OR_SERVER and facts.manage_server


# -- the application ------------------------------------------------------------------------------------

#: Why a public application with no server list does not start, and both ways out: one line.
PUBLIC_BOT_REFUSAL = (
    'the Discord application is public ("Public Bot" is on) and ALLOWED_GUILD_IDS is empty, so anyone could add '
    'the bot to a server of their own and spend the key: turn off "Public Bot" on the Bot page of the Developer '
    "Portal, or set ALLOWED_GUILD_IDS to your servers"
)
#: The start-up warning of a host who accepted that risk (ALLOW_PUBLIC_BOT_SPENDING).
PUBLIC_BOT_ACCEPTED = (
    "the Discord application is public and ALLOWED_GUILD_IDS is empty: ALLOW_PUBLIC_BOT_SPENDING lets any server "
    "that adds the bot spend the key"
)


class PublicBot(Enum):
    """Who can put the application to work, and so spend the key."""

    PRIVATE = "private"  # only its owner can add it to a server
    LISTED = "listed"  # public, but the host's server list binds every interaction
    REFUSED = "refused"  # public, no server list: anyone's server spends the key
    ACCEPTED = "accepted"  # as REFUSED, and the host said so (ALLOW_PUBLIC_BOT_SPENDING)


class PublicBotRefused(Exception):
    """The application is public and no server list is set: the bot does not serve."""

    def __init__(self) -> None:
        super().__init__(PUBLIC_BOT_REFUSAL)


def public_bot(*, bot_public: bool, allowed_guild_ids: Collection[int], accepted: bool) -> PublicBot:
    """Safe by default: Discord makes a new application public ("Public Bot" on), and the bot serves every server
    when ALLOWED_GUILD_IDS is empty, so together they hand the key to anyone who finds the bot."""
    if not bot_public:
        return PublicBot.PRIVATE
    if allowed_guild_ids:
        return PublicBot.LISTED
    return PublicBot.ACCEPTED if accepted else PublicBot.REFUSED
