"""`python -m bot demo`: the real bot against a local Discord stand-in and the video-service simulator.

Nothing here is imported when the bot starts normally; only the `demo` command loads this package.
"""
