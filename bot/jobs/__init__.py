"""The job pipeline: intake and submission, the worker that polls and delivers, its schedule, offers, chores."""
