"""Which process works on a job: each one has an owner id, and holds its jobs through leases in the database.

A lease is renewed by its holder every third of its length (one batched write, with the process's
heartbeat); a process that stops renewing (it died, or stalled) loses its jobs when their leases expire,
and a live process claims them. Every write a worker makes for a job is conditional on still holding its
lease, so a process that lost one cannot post or tell twice.

The heartbeat also names the Discord shards the process runs: one that starts on a shard a live process
runs is refused (`take_shards`), since Discord would give each of those servers' interactions to either.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

from bot.config.settings import DEFAULT_LEASE_SECONDS
from bot.config.shards import ShardPlan
from bot.core.errors import BotError

log = logging.getLogger(__name__)

#: Jobs one claim takes at most: a survivor adopts a dead process's jobs in bounded batches.
CLAIM_BATCH = 100
#: A host's clock this far off the database server's is worth a warning: leases follow the server's clock
#: anyway (bot/store/jobs/leasing.py), but the bot's other times (the logs, the daily caps' days) follow the host's.
CLOCK_SKEW_WARNING_S = 2.0


#: Read for the proof that two processes number their pids alike (`pid_space`): a random id per boot of the
#: kernel (two machines, however named, differ), and this process's PID namespace (a container has its own).
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PID_NAMESPACE = Path("/proc/self/ns/pid")


def pid_space() -> str | None:
    """Where this process's pid means something: `<boot id>.<PID namespace inode>`, or None where either cannot be
    read (not Linux, no /proc). Two processes with the same one see the same processes under the same pids."""
    try:
        boot = BOOT_ID.read_text(encoding="ascii").strip().replace("-", "")[:16]
        namespace = PID_NAMESPACE.stat().st_ino
    except (OSError, UnicodeDecodeError):
        return None
    return f"{boot}.{namespace}" if boot else None


def new_owner() -> str:
    """An owner id unique to this start: host name, process id, a random part (a pid is reused) and the pid's space
    (`pid_space`, `?` when unknown) that proves to a later process of the same space whether that pid still runs.

    An older version's ids lack the last part; this one's have four parts, so an older version's `owner_gone`
    (host name first of three) never takes one for its own.
    """
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}:{pid_space() or '?'}"


def owner_gone(owner: str) -> bool:
    """Is `owner` certainly dead: a process of this host name, boot and PID namespace (`pid_space`) whose pid no
    longer runs, or that had this very process id?

    Anything else may live, and is waited for: a process in another PID namespace or on another machine of the
    same name (its pid says nothing here), one whose pid runs (even if reused), one whose space is unknown (an
    older version's id, or a host without /proc), an id of another form. A container restarted in place (PID 1
    again, in a new namespace) knows its own predecessor from its data folder instead (bot/store/owner_record.py).
    """
    parts = owner.rsplit(":", 3)
    if len(parts) != 4 or parts[0] != socket.gethostname():
        return False
    here = pid_space()
    if here is None or parts[3] != here:
        return False
    try:
        pid = int(parts[1])
    except ValueError:
        return False
    if pid == os.getpid():
        return True  # this process is that pid now, and its owner id is another: the earlier run is gone
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except OSError:  # it exists, under another user
        return False
    return False


def same_boot(owner: str) -> bool:
    """Was `owner` started on this machine since its last boot (by the boot id in its pid space)?"""
    parts, here = owner.rsplit(":", 3), pid_space()
    return len(parts) == 4 and here is not None and parts[3].split(".")[0] == here.split(".")[0]


@dataclass(frozen=True)
class Lease:
    """This process's identity and the length of the leases it takes."""

    owner: str
    seconds: float = DEFAULT_LEASE_SECONDS
    shards: str | None = None  # the Discord shards it runs (ShardPlan.token); None: none (a tool, the benchmark)

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError("a lease lasts more than 0 seconds")

    @classmethod
    def for_this_process(cls, seconds: float = DEFAULT_LEASE_SECONDS, shards: str | None = None) -> Lease:
        return cls(new_owner(), seconds, shards)

    @property
    def renew_every(self) -> float:
        """Renewals (and claims) come this often, at fixed times: after one skipped round the next waits for the
        database, so a live process keeps its leases."""
        return self.seconds / 3

    def expires(self, now: float) -> float:
        return now + self.seconds

    def live_after(self, now: float) -> float:
        """A process is live while its last heartbeat is later than this: within one lease of `now`."""
        return now - self.seconds


@dataclass(frozen=True)
class LiveProcess:
    """A process with a heartbeat within one lease, as its row in the database says."""

    owner: str
    started_at: float
    heartbeat_at: float
    shards: str | None


class ShardsTaken(BotError):
    def __init__(self, plan: ShardPlan, rival: LiveProcess) -> None:
        self.rival = rival
        super().__init__(
            f"another live bot process ({rival.owner}) runs {_described(rival.shards)}, and Discord would send "
            f"some servers' commands to either: this one runs {plan.describe()}. Give each process its own "
            "SHARD_IDS out of the same SHARD_COUNT"
        )


class Processes(Protocol):
    """The processes' rows (the job store)."""

    async def renew_leases(self, lease: Lease, *, wait: bool = False) -> Any: ...

    async def live_processes(self, lease: Lease) -> Sequence[LiveProcess]: ...

    async def release_leases(self, owner: str) -> int: ...


#: How often, in leases, the start-up looks again at a process running the same shards, and how many times:
#: a third of a lease shows a live one beating, a whole lease a crashed one gone silent.
_LOOK_EVERY = 1 / 12
_LOOKS = 17


async def take_shards(
    processes: Processes, lease: Lease, plan: ShardPlan, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    gone: Callable[[str], bool] = owner_gone, predecessor: str | None = None,
) -> None:
    """Start on shards no other live process runs, or raise ShardsTaken.

    Two processes on the same shard would both get some servers' commands, and Discord gives each
    interaction to one of them. The one that started first keeps the shards. Its heartbeat may be that of a
    crashed run of this very process, not yet a lease old. When its owner is certainly dead (`gone`: a process
    of this host and PID namespace that no longer runs, or `predecessor`: the run before this one on its data
    folder, bot/store/owner_record.py), its shards and jobs are taken at once; otherwise this waits up to one
    lease for it to go silent, and refuses as soon as it beats again (a live process renews every third of a
    lease).
    """
    beats: dict[str, float] = {}
    for look in range(_LOOKS):
        # This process's row first, with its shards, and kept alive while it waits: one starting meanwhile sees it.
        await processes.renew_leases(lease, wait=True)
        rows = await processes.live_processes(lease)
        me = next((row for row in rows if row.owner == lease.owner), None)
        rivals = [
            row for row in rows
            if row.owner != lease.owner and row.shards is not None
            and (me is None or (row.started_at, row.owner) < (me.started_at, me.owner))
            and _shares(plan, row.shards)
        ]  # fmt: skip
        for dead in [rival for rival in rivals if rival.owner == predecessor or gone(rival.owner)]:
            # Its heartbeat outlives it by up to a lease: waiting that out would leave its servers unanswered.
            await processes.release_leases(dead.owner)
            log.info("process %s, which ran %s, no longer runs on this host: taking over at once", dead.owner,
                     _described(dead.shards))
            rivals.remove(dead)
        if not rivals:
            return
        for rival in rivals:
            if rival.owner in beats and rival.heartbeat_at > beats[rival.owner]:
                await _refuse(processes, lease, plan, rival)
            beats.setdefault(rival.owner, rival.heartbeat_at)
        if look == 0:
            log.warning("process %s runs %s too: waiting up to %.0f s for it to go silent (a run that crashed) "
                        "before refusing to start", rivals[0].owner, _described(rivals[0].shards),
                        lease.seconds * _LOOK_EVERY * (_LOOKS - 1))
        if look < _LOOKS - 1:
            await sleep(lease.seconds * _LOOK_EVERY)
    await _refuse(processes, lease, plan, rivals[0])


async def _refuse(processes: Processes, lease: Lease, plan: ShardPlan, rival: LiveProcess) -> NoReturn:
    await processes.release_leases(lease.owner)  # its row goes: no process starting next waits it out
    raise ShardsTaken(plan, rival)


def _shares(plan: ShardPlan, token: str) -> bool:
    try:
        return plan.shares_a_server_with(ShardPlan.from_token(token))
    except ValueError:
        return True  # a row no process of this version wrote: it may run any shard


def _described(token: str | None) -> str:
    if token is None:
        return "no shard"
    try:
        return ShardPlan.from_token(token).describe()
    except ValueError:
        return f"shards {token!r}"
