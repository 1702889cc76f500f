"""Which Discord shards this process runs, and so which servers it answers for.

Discord sends a server's events (its interactions included) to one gateway shard only:
`(guild_id >> 22) % shard_count`. A process that runs some of the shards sees some of the servers;
whatever reasons about "every server the bot is in" must ask `owns_guild` first, or it would take a
server on another process's shard for one the bot has left.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

#: How a process's row in the database names a process that runs every shard.
EVERY_SHARD = "*"


def shard_of(guild_id: int, shard_count: int) -> int:
    """The shard Discord routes a server's events to (Discord's formula, also discord.py's)."""
    if shard_count < 1:
        raise ValueError("shard_count must be 1 or more")
    return (guild_id >> 22) % shard_count


def shard_problems(count: int | None, ids: tuple[int, ...] | None) -> list[str]:
    """What is wrong with SHARD_IDS given SHARD_COUNT (the one check, for the settings and for ShardPlan)."""
    if ids is None:
        return []
    if count is None:
        return ["SHARD_IDS needs SHARD_COUNT: the ids are counted out of a fixed number of shards"]
    problems = []
    if not ids:
        problems.append("SHARD_IDS names no shard")
    if beyond := sorted({i for i in ids if not 0 <= i < count}):
        problems.append(f"SHARD_IDS: shard ids run from 0 to {count - 1} with SHARD_COUNT={count}, not "
                        + ", ".join(map(str, beyond)))
    if twice := sorted({i for i in ids if ids.count(i) > 1}):
        problems.append("SHARD_IDS lists a shard more than once: " + ", ".join(map(str, twice)))
    return problems


@dataclass(frozen=True)
class ShardPlan:
    """`SHARD_COUNT` and `SHARD_IDS`: None and None is automatic sharding, every shard in this process."""

    count: int | None = None
    ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.count is not None and self.count < 1:
            raise ValueError("the shard count must be 1 or more")
        if problems := shard_problems(self.count, self.ids):
            raise ValueError("; ".join(problems))

    @property
    def runs_every_shard(self) -> bool:
        return self.ids is None or (self.count is not None and len(self.ids) == self.count)

    def owns_guild(self, guild_id: int) -> bool:
        """Whether this process receives the server's events (always, when it runs every shard)."""
        if self.ids is None or self.count is None:
            return True
        return shard_of(guild_id, self.count) in self.ids

    @property
    def syncs_commands(self) -> bool:
        """One process syncs the slash commands for the whole application: the one that runs shard 0."""
        return self.ids is None or 0 in self.ids

    @property
    def token(self) -> str:
        """This plan in a process's row of the database: `*` for every shard, else `count:id,id`."""
        if self.runs_every_shard or self.ids is None or self.count is None:
            return EVERY_SHARD
        return f"{self.count}:{','.join(map(str, sorted(self.ids)))}"

    @classmethod
    def from_token(cls, token: str) -> ShardPlan:
        """The plan a process's row names (ValueError for one no process wrote)."""
        if token == EVERY_SHARD:
            return cls()
        count, _, ids = token.partition(":")
        return cls(int(count), tuple(int(i) for i in ids.split(",")))

    def shares_a_server_with(self, other: ShardPlan) -> bool:
        """Whether Discord could send both processes the same server's interactions.

        Under different shard counts too: a server's `x = id >> 22` goes to shard `x % count` of each, and some
        `x` meets shard i of one and shard j of the other exactly when i and j agree modulo the counts' gcd.
        """
        if self.runs_every_shard or other.runs_every_shard:
            return True
        assert self.count is not None and other.count is not None and self.ids is not None and other.ids is not None
        common = gcd(self.count, other.count)
        return any((i - j) % common == 0 for i in self.ids for j in other.ids)

    def describe(self) -> str:
        if self.count is None:
            return "automatic sharding (Discord's recommended count), every shard in this process"
        if self.ids is None:
            return f"all {self.count} shards in this process"
        return f"shard{'s' if len(self.ids) > 1 else ''} {', '.join(map(str, self.ids))} of {self.count}"
