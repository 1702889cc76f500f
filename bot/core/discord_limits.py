"""Discord's limits, in one place: what a message, an embed, a command and its choices may hold.

The front end fits every text within them (bot/frontend/discord_text.py); the model catalogue reads the choice
limits, as each model is a choice of `/video`'s option (bot/service/catalogue.py). The numbers are Discord's
(its API documentation); tests/core/test_discord_limits.py states them a second time.
The bot's own bounds (an excerpt's length, a prompt's 2,000 characters, which are the video service's) are not
here.
"""

from __future__ import annotations

from typing import Final

# A message and an embed, in characters (an embed's fields in number).
MESSAGE_CONTENT: Final = 2000
EMBED_TITLE: Final = 256
EMBED_DESCRIPTION: Final = 4096
FIELD_NAME: Final = 256
FIELD_VALUE: Final = 1024
FOOTER_TEXT: Final = 2048
AUTHOR_NAME: Final = 256
EMBED_TOTAL: Final = 6000
EMBED_FIELDS: Final = 25

# Slash commands: an option's choices (autocomplete's suggestions too), and the characters of a choice's name
# and value and of a command's or an option's description.
CHOICES: Final = 25
CHOICE_NAME: Final = 100
CHOICE_VALUE: Final = 100
DESCRIPTION: Final = 100
