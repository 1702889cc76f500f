"""Turn the Discord calls the bot made (as the double recorded them) into lines a person can read."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from bot.demo.discord_double import DiscordDouble, InteractionRecord, RecordedRequest

_CALLBACK = re.compile(r"^/interactions/(\d+)/[^/]+/callback")
_WEBHOOK = re.compile(r"^/webhooks/\d+/([^/?]+)(?:/messages/([^/?]+))?")
_CHANNEL_MESSAGE = re.compile(r"^/channels/(\d+)/messages(?:/\d+)?(?:\?|$)")
_COMMANDS = re.compile(r"^/applications/\d+/(?:guilds/\d+/)?commands")
_MENTION = re.compile(r"<@!?(\d+)>")
_CHANNEL = re.compile(r"<#(\d+)>")
_TIMESTAMP = re.compile(r"<t:(-?\d+)(?::[tTdDfFR])?>")
_TOKEN_SEGMENT = re.compile(r"/[A-Za-z0-9_-]{40,}")
#: A call still unanswered after this long is shown anyway, so one stuck request cannot hold up the rest.
_STUCK_SECONDS = 5.0
_CALLBACK_DEFERRED = 5
_CALLBACK_MESSAGE = 4
_EPHEMERAL = 1 << 6


def message_lines(body: Mapping[str, Any], names: Mapping[int, str], channels: Mapping[int, str]) -> list[str]:
    """A message's text, embeds included, one entry per line, with Discord's markup shown as Discord shows it."""

    def readable(text: str) -> list[str]:
        text = _MENTION.sub(lambda m: "@" + names.get(int(m.group(1)), m.group(1)), text)
        text = _CHANNEL.sub(lambda m: "#" + channels.get(int(m.group(1)), m.group(1)), text)
        text = _TIMESTAMP.sub(lambda m: time.strftime("%H:%M:%S", time.localtime(int(m.group(1)))), text)
        return [line for line in text.splitlines() if line.strip()]

    lines = readable(str(body.get("content") or ""))
    for embed in body.get("embeds") or []:
        lines += readable(str(embed.get("title") or "")) + readable(str(embed.get("description") or ""))
        for field in embed.get("fields") or []:
            lines += readable(f"{field['name']}: {field['value']}")
        lines += readable(str((embed.get("footer") or {}).get("text") or ""))
    return lines


class Narrator:
    """Prints each finished Discord call once, in the order the bot made them."""

    def __init__(self, double: DiscordDouble, say: Callable[[str], None], names: Mapping[int, str],
                 channel_names: Mapping[int, str]) -> None:
        self.double = double
        self.say = say
        self.names = names
        self.channel_names = channel_names
        self.commands_by_id: dict[str, str] = {}
        self.commands_by_token: dict[str, str] = {}
        #: The calls already printed, in order: what the demo's steps wait on, so a step never ends before
        #: the line that shows it.
        self.shown: list[RecordedRequest] = []
        self._last_lines: dict[str, list[str]] = {}
        self._next = 0

    def sent(self, interaction: InteractionRecord) -> None:
        """Remember which command an interaction was, to label the bot's answers to it."""
        self.commands_by_id[interaction.id] = interaction.name
        self.commands_by_token[interaction.token] = interaction.name

    def pump(self) -> None:
        requests = self.double.requests
        while self._next < len(requests):
            request = requests[self._next]
            if request.status == 0 and time.monotonic() - request.time < _STUCK_SECONDS:
                return  # still being answered; later calls wait for it, to keep the order
            self._next += 1
            self._describe(request)
            self.shown.append(request)

    def _block(self, head: str, lines: list[str]) -> None:
        self.say(f"  {head}")
        for line in lines:
            self.say(f"      | {line}")

    def _lines(self, body: Mapping[str, Any]) -> list[str]:
        return message_lines(body, self.names, self.channel_names)

    def _edited(self, key: str, head: str, lines: list[str]) -> None:
        """An edit shows only the lines that changed since the message was last shown: the progress."""
        before = self._last_lines.get(key)
        self._last_lines[key] = lines
        if before is None:
            self._block(head, lines)
            return
        changed = [line for line in lines if line not in before]
        self._block(f"{head}:" if changed else f"{head} (no visible change)", changed)

    def _describe(self, request: RecordedRequest) -> None:
        body: Mapping[str, Any] = request.json if isinstance(request.json, dict) else {}
        path = request.path
        refused = f" -> refused, HTTP {request.status}" if request.status >= 400 else ""
        if request.method == "PUT" and _COMMANDS.match(path):
            names = ", ".join(f"/{c.get('name')}" for c in request.json or [] if isinstance(c, dict))
            self.say(f"  bot synced its slash commands: {names}{refused}")
        elif request.method == "POST" and (match := _CALLBACK.match(path)):
            command = "/" + self.commands_by_id.get(match.group(1), "?")
            data: Mapping[str, Any] = body.get("data") or {}
            private = " (only the member sees it)" if int(data.get("flags") or 0) & _EPHEMERAL else ""
            if body.get("type") == _CALLBACK_DEFERRED:
                self.say(f"  {command}: acknowledged at once; Discord shows 'thinking...'{private}{refused}")
            elif body.get("type") == _CALLBACK_MESSAGE:
                self._block(f"{command}: answered{private}{refused}", self._lines(data))
        elif (match := _WEBHOOK.match(path)) and request.method == "PATCH":
            command = "/" + self.commands_by_token.get(match.group(1), "?")
            token, message_id = match.group(1), match.group(2)
            if message_id == "@original":  # the same message as its id: the bot uses either
                message_id = str(self.double.webhook_messages.get(token, {}).get("@original", {}).get("id"))
            key = f"{token}/{message_id}"
            self._edited(key, f"{command}: reply edited{refused}", self._lines(body) + self._files(request))
        elif (match := _WEBHOOK.match(path)) and request.method == "POST":
            command = "/" + self.commands_by_token.get(match.group(1), "?")
            self._block(f"{command}: follow-up sent{refused}", self._lines(body) + self._files(request))
        elif request.method == "POST" and (match := _CHANNEL_MESSAGE.match(path)):
            channel = self.channel_names.get(int(match.group(1)), match.group(1))
            self._block(f"bot posted in #{channel}{refused}", self._lines(body) + self._files(request))
        elif request.status >= 400:
            route = _TOKEN_SEGMENT.sub("/<token>", path.split("?")[0])  # interaction tokens stay off the screen
            self.say(f"  bot called {request.method} {route}{refused}")

    @staticmethod
    def _files(request: RecordedRequest) -> list[str]:
        return [f"[attached file {name}, {len(data):,} bytes]" for name, data in request.files]
