"""The basics every layer may use: the job lifecycle and its state groups, errors, retries, notices, tasks."""
