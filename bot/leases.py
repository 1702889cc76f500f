"""Which process works on a job: each one has an owner id, and holds its jobs through leases in the database.

A lease is renewed by its holder every third of its length (one batched write, with the process's
heartbeat); a process that stops renewing (it died, or stalled) loses its jobs when their leases expire,
and a live process claims them. Every write a worker makes for a job is conditional on still holding its
lease, so a process that lost one cannot post or tell twice.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

#: How long a lease lasts without renewal unless LEASE_SECONDS says otherwise: well above the HTTP timeout
#: (30 s), so a request in flight cannot outlive its process's lease while the process lives.
DEFAULT_LEASE_SECONDS = 60.0
#: Jobs one claim takes at most: a survivor adopts a dead process's jobs in bounded batches.
CLAIM_BATCH = 100
#: A host's clock this far off the database server's is worth a warning: leases follow the server's clock
#: anyway (bot/store.py), but the bot's other times (the logs, the daily caps' days) follow the host's.
CLOCK_SKEW_WARNING_S = 2.0


def new_owner() -> str:
    """An owner id unique to this start: host name, process id and a random part (a pid is reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True)
class Lease:
    """This process's identity and the length of the leases it takes."""

    owner: str
    seconds: float = DEFAULT_LEASE_SECONDS

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError("a lease lasts more than 0 seconds")

    @classmethod
    def for_this_process(cls, seconds: float = DEFAULT_LEASE_SECONDS) -> Lease:
        return cls(new_owner(), seconds)

    @property
    def renew_every(self) -> float:
        """Renewals (and claims) come this often, at fixed times: after one skipped round the next waits for the
        database, so a live process keeps its leases."""
        return self.seconds / 3

    def expires(self, now: float) -> float:
        return now + self.seconds
