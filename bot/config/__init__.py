"""The host's settings, read from the environment and `.env`: values, the database URL, the shard plan."""
