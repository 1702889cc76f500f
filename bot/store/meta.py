"""The keys of the `meta` table, in one place: small facts of the bot's that are not jobs, one row per key.

The keys are stored: renaming one loses what databases hold under the old name.
"""

from __future__ import annotations

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
