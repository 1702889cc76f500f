"""How the bot writes its log: text or one JSON object per line, colour only on a terminal.

Lines about one request carry its context, passed as `extra`:

    log.info("video posted", extra=job_fields(job))

The text formatter appends ` [request=#12 job=vid_abc guild=1 member=2]`; the JSON formatter
adds the same names as fields. Secrets handed to `setup_logging` are masked in every line, as a
last line of defence: no code should log them in the first place.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from bot.core.log_context import CONTEXT_FIELDS
from bot.service.transport import mask_key

LOG_FORMATS = ("text", "json")

_TEXT_FORMAT = "%(asctime)s %(levelname)-8s %(name)s: %(message)s"
_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
_RESET = "\x1b[0m"
_LEVEL_COLOURS = {
    logging.DEBUG: "\x1b[2m",  # dim
    logging.INFO: "\x1b[34m",  # blue
    logging.WARNING: "\x1b[33m",  # yellow
    logging.ERROR: "\x1b[31m",  # red
    logging.CRITICAL: "\x1b[41m",  # red background
}


def _context(record: logging.LogRecord) -> dict[str, object]:
    return {name: getattr(record, name) for name in CONTEXT_FIELDS if hasattr(record, name)}


class _Masking(logging.Formatter):
    def __init__(self, secrets: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Longest first, so a secret that contains another is masked whole. Very short values are
        # not masked: they would blank out ordinary words.
        self._secrets = sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True)

    def mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, mask_key(secret))
        return text


class TextFormatter(_Masking):
    """`2026-01-02 03:04:05 INFO     bot.worker: message [request=#12 job=vid_1 guild=1 member=2]`."""

    def __init__(self, *, colour: bool = False, secrets: Iterable[str] = ()) -> None:
        super().__init__(secrets, fmt=_TEXT_FORMAT, datefmt=_DATE_FORMAT)
        self.colour = colour

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        context = " ".join(f"{name}={value}" for name, value in _context(record).items() if value is not None)
        if context:
            line += f" [{context}]"
        if self.colour:
            colour = _LEVEL_COLOURS.get(record.levelno, "")
            line = line.replace(record.levelname, f"{colour}{record.levelname}{_RESET}", 1)
        return line

    def format(self, record: logging.LogRecord) -> str:
        return self.mask(super().format(record))


class JsonFormatter(_Masking):
    """One JSON object per line: time, level, logger, message, exception, and the context fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        entry.update(_context(record))
        # default=str: a context value of an odd type must not lose the line.
        return self.mask(json.dumps(entry, ensure_ascii=False, default=str))


def wants_colour(stream: TextIO) -> bool:
    """Colour only for a person at a terminal: never in files, pipes or `docker logs`."""
    if "NO_COLOR" in os.environ:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _BotHandler(logging.StreamHandler[TextIO]):
    """The handler `setup_logging` installs (and replaces on the next call)."""


def make_handler(
    log_format: str = "text", *, stream: TextIO | None = None, secrets: Iterable[str] = ()
) -> logging.Handler:
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}; expected one of {', '.join(LOG_FORMATS)}")
    target = stream if stream is not None else sys.stderr
    handler = _BotHandler(target)
    if log_format == "json":
        handler.setFormatter(JsonFormatter(secrets))
    else:
        handler.setFormatter(TextFormatter(colour=wants_colour(target), secrets=secrets))
    return handler


class HeldLogs(_BotHandler):
    """Keeps the records logged before the log's format is known (while the settings that name it are read).

    `setup_logging` replaces it like any handler it installed; `replay` then writes what it kept in the format
    the settings asked for, so a JSON log is JSON from its first line.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def replay(self) -> None:
        root = logging.getLogger()
        for record in self.records:
            if record.levelno >= root.getEffectiveLevel():
                for handler in root.handlers:
                    if record.levelno >= handler.level:
                        handler.handle(record)
        self.records.clear()


def hold_logs(level: str | int = logging.INFO) -> HeldLogs:
    """Hold every record until `setup_logging`, then `replay` them: nothing is written in a format not yet chosen."""
    held = HeldLogs()
    _install(held, level)
    return held


def setup_logging(
    level: str | int = logging.INFO,
    log_format: str = "text",
    *,
    stream: TextIO | None = None,
    secrets: Iterable[str] = (),
) -> logging.Handler:
    """Send every logger's records to one handler on the root logger; calling it again replaces it."""
    handler = make_handler(log_format, stream=stream, secrets=secrets)
    _install(handler, level)
    return handler


def _install(handler: logging.Handler, level: str | int) -> None:
    """`handler` becomes the root logger's one handler of the bot's, replacing (and closing) the one before."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _BotHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level)
