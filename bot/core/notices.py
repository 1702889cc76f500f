"""The closed sets of codes that become message-catalogue keys, so a typo is a type error, not a KeyError.

`tests/frontend/test_i18n.py` checks that every value has its text in both languages.
"""

from __future__ import annotations

from typing import Literal

#: News the worker tells the requester in the channel: `deliver.<notice>`.
Notice = Literal[
    "failed", "slow", "stalled", "undeliverable", "unknown", "interrupted", "rejected", "storage_wait", "unrecorded",
    "accepted_late", "charge_unrecorded",
]

#: Why a guardrail refused a request before anything was spent: `refuse.<code>`.
RefusalCode = Literal[
    "cooldown", "too_many_active", "guild_daily_cap", "guild_monthly_cap", "member_daily_cap", "member_monthly_cap",
    "host_guild_daily_cap", "host_guild_monthly_cap", "host_member_daily_cap", "host_member_monthly_cap",
    "channel", "role", "blocklist", "member_blocked", "paused", "server_not_allowed", "too_many_offers",
]

#: How a recorded request failed to become an accepted job (see `SubmissionFailed`).
SubmissionKind = Literal[
    "rejected", "busy", "unknown", "not_recorded", "stopping", "charged_unusable", "charged_unreadable",
    "charged_unrecorded",
]

#: Input that cannot succeed: `error.<code>`.
InvalidCode = Literal[
    "prompt_empty", "prompt_too_long", "seed_range", "seed_unsupported", "term_empty", "term_too_long",
]
