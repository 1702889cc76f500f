"""What each server's admins set: settings, blocklist terms, member blocks, and the events they audit.

It shares the job store's database and write lock, so a settings change and the event that records
it are written in one transaction, and a quota check sees the same database as the jobs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, TypeVar

from bot.store.jobs import JobStore, Row

#: Settings history and log lines: what happened, never a prompt or a matched term.
EventKind = str
#: `{key: (old shown value, new value, reset to default?)}`: what a settings change writes.
SettingWrites = dict[str, tuple[Any, Any, bool]]
_T = TypeVar("_T")
#: Old events deleted per transaction by `prune_events`.
EVENTS_PRUNED_AT_ONCE = 1000


@dataclass(frozen=True, slots=True)
class StoredSetting:
    """A server's own value of one setting, and who set it when."""

    value: Any
    updated_at: float
    updated_by: int


@dataclass(frozen=True, slots=True)
class MemberRecord:
    blocked: bool = False
    quota_reset_at: float | None = None


@dataclass(frozen=True)
class Event:
    id: int
    guild_id: int
    kind: EventKind
    job_id: int | None
    user_id: int | None
    details: dict[str, Any]
    created_at: float


def _event(row: Row) -> Event:
    try:
        details = json.loads(row["details"] or "{}")
    except ValueError:
        details = {}  # a damaged row still posts its kind and ids, never stops the others
    return Event(
        id=row["id"], guild_id=row["guild_id"], kind=row["kind"], job_id=row["job_id"], user_id=row["user_id"],
        details=details if isinstance(details, dict) else {}, created_at=row["created_at"],
    )


@dataclass(frozen=True)
class StoredRules:
    settings: dict[str, StoredSetting]
    member: MemberRecord
    blocklist: list[str]


_SETTINGS = "SELECT key, value, updated_at, updated_by FROM server_settings WHERE guild_id = ?"
_MEMBER = "SELECT blocked_at, quota_reset_at FROM members WHERE guild_id = ? AND user_id = ?"
_BLOCKLIST = "SELECT term FROM blocklist WHERE guild_id = ? ORDER BY term"


def _settings(rows: list[Row]) -> dict[str, StoredSetting]:
    stored: dict[str, StoredSetting] = {}
    for row in rows:
        try:
            value = json.loads(row["value"])
        except ValueError:
            continue  # a damaged row: the setting's default holds (ServerRules.effective says so in the log)
        stored[row["key"]] = StoredSetting(value, row["updated_at"], row["updated_by"])
    return stored


def _member(rows: list[Row]) -> MemberRecord:
    if not rows:
        return MemberRecord()
    return MemberRecord(blocked=rows[0]["blocked_at"] is not None, quota_reset_at=rows[0]["quota_reset_at"])


def _terms(rows: list[Row]) -> list[str]:
    return [row["term"] for row in rows]


class ServerStore:
    def __init__(self, jobs: JobStore) -> None:
        self._db = jobs

    # -- settings -------------------------------------------------------------------------------

    async def settings(self, guild_id: int) -> dict[str, StoredSetting]:
        return _settings(await self._db.fetch_all(_SETTINGS, (guild_id,)))

    async def request_rules(self, guild_id: int, user_id: int) -> StoredRules:
        """What a request from `user_id` is checked against: the server's settings, the member's record and the
        blocklist, read together (on SQLite in one trip: a burst of requests made three each before)."""
        settings, member, blocklist = await self._db.fetch_many(
            [(_SETTINGS, (guild_id,)), (_MEMBER, (guild_id, user_id)), (_BLOCKLIST, (guild_id,))]
        )
        return StoredRules(_settings(settings), _member(member), _terms(blocklist))

    async def edit_settings(
        self, guild_id: int, by_user_id: int, decide: Callable[[dict[str, StoredSetting]], tuple[SettingWrites, _T]]
    ) -> _T:
        """Read the server's settings and write what `decide` makes of them, in ONE write transaction.

        The write lock is taken before the read (SQLite's BEGIN IMMEDIATE; PostgreSQL's advisory lock, which
        every process on the database shares), so two admins editing one list at once, through one process or
        two, each see the other's change and both keep theirs. `decide` raising writes nothing.
        """
        async with self._db.transaction():
            # Inside the transaction, the read runs on its connection (bot/store/postgres.py), after the lock.
            writes, result = decide(await self.settings(guild_id))
            await self._write_settings(guild_id, by_user_id, writes)
        return result

    async def _write_settings(self, guild_id: int, by_user_id: int, changes: SettingWrites) -> None:
        now = self._db.now()
        for key, (old, new, reset) in changes.items():
            if reset:
                await self._db.execute("DELETE FROM server_settings WHERE guild_id = ? AND key = ?", (guild_id, key))
            else:
                await self._db.execute(
                    """INSERT INTO server_settings (guild_id, key, value, updated_at, updated_by)
                       VALUES (?, ?, ?, ?, ?)
                       ON CONFLICT (guild_id, key) DO UPDATE SET value = excluded.value,
                           updated_at = excluded.updated_at, updated_by = excluded.updated_by""",
                    (guild_id, key, json.dumps(new), now, by_user_id),
                )
            await self._add_event(
                guild_id, "setting", user_id=by_user_id,
                details={"key": key, "old": old, "new": None if reset else new, "default": reset},
            )

    async def guilds_with_setting(self, key: str) -> dict[int, Any]:
        """Every server that set `key` itself, with its value."""
        rows = await self._db.fetch_all("SELECT guild_id, value FROM server_settings WHERE key = ?", (key,))
        return {row["guild_id"]: json.loads(row["value"]) for row in rows}

    # -- blocklist --------------------------------------------------------------------------------

    async def blocklist(self, guild_id: int) -> list[str]:
        return _terms(await self._db.fetch_all(_BLOCKLIST, (guild_id,)))

    async def add_term(self, guild_id: int, term: str, by_user_id: int) -> bool:
        """False when the term was already there. The event names no term: log lines never show one."""
        async with self._db.transaction():
            added = await self._db.execute(
                "INSERT INTO blocklist (guild_id, term, added_by, added_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (guild_id, term) DO NOTHING",
                (guild_id, term, by_user_id, self._db.now()),
            )
            if added:
                await self._add_event(guild_id, "setting", user_id=by_user_id, details={"key": "blocklist_add"})
        return bool(added)

    async def remove_term(self, guild_id: int, term: str, by_user_id: int) -> bool:
        async with self._db.transaction():
            removed = await self._db.execute(
                "DELETE FROM blocklist WHERE guild_id = ? AND term = ?", (guild_id, term)
            )
            if removed:
                await self._add_event(
                    guild_id, "setting", user_id=by_user_id, details={"key": "blocklist_remove"}
                )
        return bool(removed)

    # -- members ----------------------------------------------------------------------------------

    async def member(self, guild_id: int, user_id: int) -> MemberRecord:
        return _member(await self._db.fetch_all(_MEMBER, (guild_id, user_id)))

    async def set_member(
        self, guild_id: int, user_id: int, by_user_id: int, *, blocked: bool | None = None, reset_quota: bool = False
    ) -> None:
        now = self._db.now()
        async with self._db.transaction():
            await self._db.execute(
                "INSERT INTO members (guild_id, user_id) VALUES (?, ?) ON CONFLICT (guild_id, user_id) DO NOTHING",
                (guild_id, user_id),
            )
            if blocked is not None:
                await self._db.execute(
                    "UPDATE members SET blocked_at = ?, blocked_by = ? WHERE guild_id = ? AND user_id = ?",
                    (now if blocked else None, by_user_id if blocked else None, guild_id, user_id),
                )
                action = "member_block" if blocked else "member_unblock"
                await self._add_event(guild_id, "setting", user_id=by_user_id, details={"key": action,
                                                                                        "member": user_id})
            if reset_quota:
                await self._db.execute(
                    "UPDATE members SET quota_reset_at = ? WHERE guild_id = ? AND user_id = ?",
                    (now, guild_id, user_id),
                )
                await self._add_event(
                    guild_id, "setting", user_id=by_user_id, details={"key": "member_quota_reset", "member": user_id}
                )

    # -- events -----------------------------------------------------------------------------------

    async def add_event(
        self, guild_id: int, kind: EventKind, *, user_id: int | None = None, job_id: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        async with self._db.transaction():
            await self._add_event(guild_id, kind, user_id=user_id, job_id=job_id, details=details)

    async def add_event_once(
        self, guild_id: int, kind: EventKind, *, once_key: str, details: dict[str, Any] | None = None
    ) -> bool:
        """Add the event unless `once_key` is already marked (in `meta`), and mark it, in one transaction.

        False when it was marked already: of several processes noticing the same thing at once, one tells it.
        The mark stays until deleted (`JobStore.delete_meta`), when the thing can be told again.
        """
        async with self._db.transaction():
            marked = await self._db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                (once_key, str(self._db.now())),
            )
            if marked:
                await self._add_event(guild_id, kind, details=details)
        return bool(marked)

    async def _add_event(
        self, guild_id: int, kind: EventKind, *, user_id: int | None = None, job_id: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        await self._db.execute(
            "INSERT INTO events (guild_id, kind, job_id, user_id, details, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (guild_id, kind, job_id, user_id, json.dumps(details or {}), self._db.now()),
        )

    async def recent_refusal(self, guild_id: int, user_id: int, code: str, since: float) -> bool:
        """Whether this member's refusal for `code` was already logged since `since` (a flood is logged once)."""
        row = await self._db.fetch_one(
            "SELECT 1 FROM events WHERE guild_id = ? AND kind = 'refused' AND user_id = ? AND created_at >= ? "
            "AND details = ? LIMIT 1",
            (guild_id, user_id, since, json.dumps({"code": code})),
        )
        return row is not None

    async def recent_events(self, guild_id: int, kind: EventKind, limit: int = 5) -> list[Event]:
        rows = await self._db.fetch_all(
            "SELECT * FROM events WHERE guild_id = ? AND kind = ? ORDER BY id DESC LIMIT ?", (guild_id, kind, limit)
        )
        return [_event(row) for row in rows]

    async def unposted_events(self, limit: int = 50) -> list[Event]:
        rows = await self._db.fetch_all(
            "SELECT * FROM events WHERE posted_at IS NULL ORDER BY id LIMIT ?", (limit,)
        )
        return [_event(row) for row in rows]

    async def unposted_by_server(
        self, *, per_server: int, servers: int, excluding: Collection[int] = ()
    ) -> dict[int, list[Event]]:
        """One round of waiting events: the oldest `per_server` of each server, for up to `servers` servers (those
        waiting longest first), each server's in order. A server's burst fills its own share, not the round.
        `excluding`: servers left out (their previous share is still being posted)."""
        left_out = tuple(excluding)
        unless = f" AND guild_id NOT IN ({', '.join('?' for _ in left_out)})" if left_out else ""
        rows = await self._db.fetch_all(
            f"""SELECT id, guild_id, kind, job_id, user_id, details, created_at FROM (
                   SELECT *, ROW_NUMBER() OVER (PARTITION BY guild_id ORDER BY id) AS place
                   FROM events WHERE posted_at IS NULL{unless}) AS waiting
               WHERE place <= ? ORDER BY id LIMIT ?""",
            (*left_out, per_server, per_server * servers),
        )
        shares: dict[int, list[Event]] = {}
        for row in rows:
            event = _event(row)
            if event.guild_id in shares or len(shares) < servers:
                shares.setdefault(event.guild_id, []).append(event)
        return shares

    async def pass_over_events(self, guild_id: int, *, written_until: float) -> int:
        """Mark every waiting event of the server written until `written_until` as done without posting it (no
        log channel, or one closed to the bot): in one statement, however many a burst left."""
        async with self._db.transaction():
            return await self._db.execute(
                "UPDATE events SET posted_at = ? WHERE guild_id = ? AND posted_at IS NULL AND created_at <= ?",
                (self._db.now(), guild_id, written_until),
            )

    async def prune_events(self, *, posted_before: float, keep_settings: int, batch: int = EVENTS_PRUNED_AT_ONCE
                           ) -> int:
        """Delete events posted (or passed over) before `posted_before`, except each server's `keep_settings`
        latest settings changes, which `/settings` shows as its history. Returns how many went.

        In batches, each its own short transaction: a /video row never waits long behind the chore.
        """
        where = """posted_at IS NOT NULL AND posted_at < ? AND id NOT IN (
                       SELECT id FROM (
                           SELECT id, ROW_NUMBER() OVER (PARTITION BY guild_id ORDER BY id DESC) AS recent
                           FROM events WHERE kind = 'setting') AS history
                       WHERE recent <= ?)"""
        params = (posted_before, keep_settings)
        pruned = 0
        while await self._db.fetch_one(f"SELECT 1 FROM events WHERE {where} LIMIT 1", params) is not None:
            async with self._db.transaction():
                deleted = await self._db.execute(
                    f"DELETE FROM events WHERE id IN (SELECT id FROM events WHERE {where} ORDER BY id LIMIT ?)",
                    (*params, batch),
                )
            pruned += deleted
            if deleted < batch:
                break
        return pruned

    async def mark_posted(self, event_ids: list[int]) -> None:
        if not event_ids:
            return
        async with self._db.transaction():
            marks = ", ".join("?" for _ in event_ids)
            await self._db.execute(
                f"UPDATE events SET posted_at = ? WHERE id IN ({marks})", (self._db.now(), *event_ids)
            )
