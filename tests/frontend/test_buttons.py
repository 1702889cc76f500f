"""bot/frontend/buttons.py's custom ids: a button posted by any earlier run resolves to its class, and to its row,
alone."""

from __future__ import annotations

from typing import Any, cast

import discord
import pytest

from bot.frontend.buttons import (
    DYNAMIC_ITEMS,
    CancelJobButton,
    DeleteButton,
    OfferCancelButton,
    OfferGoButton,
    RerollButton,
)

#: The custom ids on messages already posted: they must keep resolving after any change to the classes.
POSTED = [
    ("video:reroll:42", RerollButton, 42, discord.ButtonStyle.primary),
    ("video:delete:42", DeleteButton, 42, discord.ButtonStyle.secondary),
    ("video:offer:7:go", OfferGoButton, 7, discord.ButtonStyle.success),
    ("video:offer:7:cancel", OfferCancelButton, 7, discord.ButtonStyle.secondary),
    ("video:job:9:cancel", CancelJobButton, 9, discord.ButtonStyle.secondary),
]


@pytest.mark.parametrize(("custom_id", "cls", "row_id", "style"), POSTED)
async def test_a_posted_button_resolves_to_its_class_and_row_alone(
    custom_id: str, cls: type[Any], row_id: int, style: discord.ButtonStyle
) -> None:
    matches = [(item, match) for item in DYNAMIC_ITEMS
               if (match := item.__discord_ui_compiled_template__.fullmatch(custom_id))]
    assert [item for item, _ in matches] == [cls]
    posted = discord.ui.Button[discord.ui.View](label="Label", custom_id=custom_id)
    rebuilt = await cls.from_custom_id(cast(Any, None), posted, matches[0][1])
    assert (rebuilt.row_id, rebuilt.custom_id, rebuilt.item.label) == (row_id, custom_id, "Label")
    fresh = cls(row_id, "Label")
    assert (fresh.custom_id, fresh.item.style) == (custom_id, style), "a new post carries the same id"


@pytest.mark.parametrize("custom_id", ["video:reroll:", "video:reroll:4x", "video:offer:7:gone", "xvideo:delete:1"])
def test_a_custom_id_of_no_button_matches_none(custom_id: str) -> None:
    assert not [item for item in DYNAMIC_ITEMS if item.__discord_ui_compiled_template__.fullmatch(custom_id)]
