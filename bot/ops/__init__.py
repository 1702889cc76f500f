"""Running it: logs, metrics, the heartbeat for health checks, garbage-collection timing."""
