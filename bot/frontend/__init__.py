"""Discord: the Bot subclass, the command tree, cogs, buttons, delivery, embeds within Discord's limits, i18n."""
