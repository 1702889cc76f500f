"""Discord's limits, in one place: what a message, an embed, a command and its choices may hold.

The front end fits every text within them (bot/frontend/discord_text.py); the model catalogue reads the choice
limits, as each model is a choice of `/video`'s option (bot/service/catalogue.py). The numbers are Discord's
(its API documentation); tests/core/test_discord_limits.py states them a second time.
The bot's own bounds (an excerpt's length, a prompt's 2,000 characters, which are the video service's) are not
here.
"""

from __future__ import annotations

# A message and an embed, in characters (an embed's fields in number).
MESSAGE_CONTENT = 2000
EMBED_DESCRIPTION = 4096
FIELD_VALUE = 1024
FOOTER_TEXT = 2048
EMBED_TOTAL = 6000
EMBED_FIELDS = 25
# An embed's title, a field's name and an author's name: as many characters each.
EMBED_TITLE = FIELD_NAME = AUTHOR_NAME = 256

# Slash commands: an option's choices (autocomplete's suggestions too); a choice's name and value and a command's
# or an option's description, as many characters each.
CHOICES = 25
CHOICE_NAME = CHOICE_VALUE = DESCRIPTION = 100
