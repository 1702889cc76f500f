"""The `meta` table: small facts of the bot's that are not jobs, one row per key, and every key in one place.

The keys are stored: renaming one loses what databases hold under the old name.
"""

from __future__ import annotations

from bot.store.jobs.base import StoreBase

#: Set while the host has paused spending in every server (`python -m bot pause`; its value is when): every action
#: whose policy has `not_paused` is refused (bot/community/trust.py: /video, Re-roll, Confirm, Generate).
HOST_PAUSE = "host_pause"
#: Rows of the learned job durations, one per model (bot/jobs/durations.py): this, then the model's id.
DURATIONS_PREFIX = "durations:"


def budget_alert(guild_id: int) -> str:
    """Set while a server's budget alert stands (posted once until the key's budget recovers)."""
    return f"budget_alert:{guild_id}"


def command_sync(application_id: int | None, guild_id: int | None) -> str:
    """The digest of the slash commands last synced by an application, to one server or (None) globally."""
    return f"command_sync:{application_id}:{guild_id if guild_id is not None else 'global'}"


class MetaRows(StoreBase):
    """The `meta` table's rows."""

    async def get_meta(self, key: str) -> str | None:
        row = await self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return str(row[0]) if row else None

    async def delete_meta(self, key: str) -> None:
        async with self._write():
            await self._db.execute("DELETE FROM meta WHERE key = ?", (key,))

    async def set_meta(self, key: str, value: str) -> None:
        async with self._write():
            await self._db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    async def meta_with_prefix(self, prefix: str) -> dict[str, str]:
        """Every meta row whose key starts with `prefix` (compared exactly, not as a LIKE pattern)."""
        rows = await self._db.fetch_all(
            "SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
        )
        return {str(row[0]): str(row[1]) for row in rows}
