"""A server's rules on the shared key: server settings, limits, the blocklist, windows and usage reports."""
