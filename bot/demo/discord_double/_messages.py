"""Messages the bot posts, in channels and through interactions: their checks, attachments, mentions, and how
Discord shows and announces them."""

from __future__ import annotations

import logging
import mimetypes
from typing import Any

from . import _payloads
from ._gateway import Gateway
from ._http import DiscordError, Upload, invalid_form
from ._mentions import AllowedMentionsError, resolve_mentions

_log = logging.getLogger(__name__)

MAX_CONTENT_LENGTH = 2000

FLAG_SUPPRESS_EMBEDS = 1 << 2
FLAG_EPHEMERAL = 1 << 6
FLAG_LOADING = 1 << 7
FLAG_SUPPRESS_NOTIFICATIONS = 1 << 12
FLAG_COMPONENTS_V2 = 1 << 15
_SENDABLE_FLAGS = FLAG_SUPPRESS_EMBEDS | FLAG_SUPPRESS_NOTIFICATIONS | FLAG_COMPONENTS_V2

MESSAGE_DEFAULT = 0
MESSAGE_REPLY = 19
MESSAGE_CHAT_INPUT_COMMAND = 20

# Keys kept on stored messages for tests that Discord never sends back.
_PRIVATE_MESSAGE_KEYS = frozenset({"attachments_data", "allowed_mentions", "deleted", "interaction_user_id"})


class Messages(Gateway):
    """The message layer, shared by the channel routes and the interaction routes."""

    def _message_record(
        self,
        *,
        channel_id: int,
        body: dict[str, Any],
        uploads: list[Upload],
        size_limit: int,
        default_parse: tuple[str, ...],
        message_type: int,
        webhook: bool = False,
        placeholder: bool = False,
    ) -> dict[str, Any]:
        self._check_upload_sizes(uploads, size_limit)
        message_id = str(self._ids.next())
        record: dict[str, Any] = {
            "id": message_id,
            "type": message_type,
            "channel_id": str(channel_id),
            "author": self._bot_user,
            "content": "",
            "timestamp": _payloads.iso_now(),
            "edited_timestamp": None,
            "tts": bool(body.get("tts", False)),
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "components": [],
            "pinned": False,
            "flags": 0,
            "nonce": body.get("nonce"),
            "attachments_data": [],
            "allowed_mentions": None,
            "deleted": False,
        }
        if channel_id in self._channels:
            record["guild_id"] = self._channels[channel_id]["guild_id"]
        if body.get("message_reference"):
            record["type"] = MESSAGE_REPLY
            record["message_reference"] = body["message_reference"]
        if webhook:
            record["webhook_id"] = str(self.application_id)
            record["application_id"] = str(self.application_id)
        self._apply_message_fields(
            record, body, uploads, default_parse=default_parse, allow_ephemeral=webhook, allow_empty=placeholder
        )
        return record

    def _apply_message_fields(
        self,
        record: dict[str, Any],
        body: dict[str, Any],
        uploads: list[Upload],
        *,
        default_parse: tuple[str, ...],
        allow_ephemeral: bool = False,
        allow_empty: bool = False,
    ) -> None:
        """Validate and merge a create/edit body into `record` (in place, only if valid)."""
        updated = dict(record)
        if "content" in body:
            content = body["content"] or ""
            if not isinstance(content, str) or len(content) > MAX_CONTENT_LENGTH:
                raise invalid_form("content", f"Must be {MAX_CONTENT_LENGTH} or fewer in length.")
            updated["content"] = content
        if "embeds" in body:
            embeds = body["embeds"] or []
            _validate_embeds(embeds)
            updated["embeds"] = embeds
        if "components" in body:
            updated["components"] = body["components"] or []
        if body.get("flags") is not None:
            # Ephemerality is fixed at creation; only the sendable flags change on edit.
            sticky = updated["flags"] & (FLAG_EPHEMERAL | FLAG_LOADING)
            settable = _SENDABLE_FLAGS | (FLAG_EPHEMERAL if allow_ephemeral else 0)
            updated["flags"] = sticky | (int(body["flags"]) & settable)
        if "allowed_mentions" in body:
            updated["allowed_mentions"] = body["allowed_mentions"]
        if uploads or "attachments" in body:
            attachments, data = self._attachments(record, body, uploads)
            updated["attachments"] = attachments
            updated["attachments_data"] = data
        if not allow_empty and not (
            updated["content"]
            or updated["embeds"]
            or updated["attachments"]
            or updated["components"]
            or body.get("sticker_ids")
            or body.get("poll")
        ):
            raise DiscordError(400, 50006, "Cannot send an empty message")

        replied_user_id: int | None = None
        reference = updated.get("message_reference")
        if reference:
            referenced = self._find_message(int(reference.get("channel_id") or updated["channel_id"]), reference)
            if referenced is not None:
                replied_user_id = int(referenced["author"]["id"])
        try:
            mentions = resolve_mentions(
                updated["content"],
                updated["allowed_mentions"],
                default_parse=default_parse,
                replied_user_id=replied_user_id,
            )
        except AllowedMentionsError as error:
            raise invalid_form("allowed_mentions", str(error)) from None
        updated["mentions"] = mentions.users
        updated["mention_roles"] = mentions.roles
        updated["mention_everyone"] = mentions.everyone
        record.update(updated)

    def _find_message(self, channel_id: int, reference: dict[str, Any]) -> dict[str, Any] | None:
        wanted = str(reference.get("message_id"))
        for message in self.messages.get(channel_id, []):
            if message["id"] == wanted:
                return message
        return None

    def _check_upload_sizes(self, uploads: list[Upload], size_limit: int) -> None:
        for upload in uploads:
            if len(upload.data) > size_limit:
                _log.info("upload %s is %d bytes, limit %d", upload.filename, len(upload.data), size_limit)
                raise DiscordError(413, 40005, "Request entity too large")

    def _attachments(
        self, record: dict[str, Any], body: dict[str, Any], uploads: list[Upload]
    ) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
        by_index = {_file_index(u.field): u for u in uploads}
        existing = {
            a["id"]: (a, data) for a, data in zip(record["attachments"], record["attachments_data"], strict=False)
        }
        attachments: list[dict[str, Any]] = []
        data: list[tuple[str, bytes]] = []
        used: set[str | None] = set()
        wanted = body.get("attachments")
        if wanted is None:
            # No attachments array: keep what is there and add every uploaded file.
            wanted = [{"id": a["id"]} for a in record["attachments"]]
            wanted += [{"id": index} for index in by_index]
        for entry in wanted:
            key = str(entry.get("id"))
            if key in by_index and key not in used:
                upload = by_index[key]
                used.add(key)
                attachment = self._store_attachment(record, entry.get("filename") or upload.filename, upload.data)
                if entry.get("description"):
                    attachment["description"] = entry["description"]
                attachments.append(attachment)
                data.append((attachment["filename"], upload.data))
            elif key in existing:
                attachments.append(existing[key][0])
                data.append(existing[key][1])
            else:
                raise invalid_form("attachments", f"unknown attachment id {entry.get('id')!r}")
        for key, upload in by_index.items():
            if key not in used and body.get("attachments") is not None:
                attachment = self._store_attachment(record, upload.filename, upload.data)
                attachments.append(attachment)
                data.append((upload.filename, upload.data))
        return attachments, data

    def _store_attachment(self, record: dict[str, Any], filename: str, data: bytes) -> dict[str, Any]:
        attachment_id = self._ids.next()
        self._blobs[attachment_id] = data
        url = f"{self._http_base}/attachments/{record['channel_id']}/{attachment_id}/{filename}"
        return {
            "id": str(attachment_id),
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": mimetypes.guess_type(filename)[0] or "application/octet-stream",
            "ephemeral": bool(record["flags"] & FLAG_EPHEMERAL),
        }

    def _wire(self, record: dict[str, Any]) -> dict[str, Any]:
        """The message as Discord returns it: mention ids become user objects."""
        wire = {k: v for k, v in record.items() if k not in _PRIVATE_MESSAGE_KEYS}
        wire["mentions"] = [self._user(uid) for uid in record["mentions"]]
        wire["mention_roles"] = [str(r) for r in record["mention_roles"]]
        return wire

    async def _announce(self, event: str, record: dict[str, Any]) -> None:
        """MESSAGE_CREATE/UPDATE for the bot's own non-ephemeral messages, as Discord sends them."""
        if record["flags"] & FLAG_EPHEMERAL:
            return
        payload = self._wire(record)
        if "guild_id" in record:
            payload["member"] = {
                k: v for k, v in self._member_payload(self._members[self.bot_user_id]).items() if k != "user"
            }
            intent = _payloads.INTENT_GUILD_MESSAGES
        else:
            intent = _payloads.INTENT_DIRECT_MESSAGES
        await self._broadcast(event, payload, intent=intent)


def _file_index(field_name: str) -> str:
    # "files[3]" -> "3"; Discord matches attachments[].id against that index.
    if field_name.startswith("files[") and field_name.endswith("]"):
        return field_name[len("files[") : -1]
    return field_name


def _validate_embeds(embeds: object) -> None:
    if not isinstance(embeds, list) or len(embeds) > 10:
        raise invalid_form("embeds", "Must be 10 or fewer in length.")
    total = 0
    limits = {"title": 256, "description": 4096}
    for index, embed in enumerate(embeds):
        if not isinstance(embed, dict):
            raise invalid_form(f"embeds.{index}", "must be an object")
        for key, limit in limits.items():
            text = embed.get(key) or ""
            if len(text) > limit:
                raise invalid_form(f"embeds.{index}.{key}", f"Must be {limit} or fewer in length.")
            total += len(text)
        fields = embed.get("fields") or []
        if len(fields) > 25:
            raise invalid_form(f"embeds.{index}.fields", "Must be 25 or fewer in length.")
        for number, embed_field in enumerate(fields):
            name, value = embed_field.get("name") or "", embed_field.get("value") or ""
            if len(name) > 256 or len(value) > 1024:
                raise invalid_form(f"embeds.{index}.fields.{number}", "name <= 256 and value <= 1024")
            total += len(name) + len(value)
        total += len((embed.get("footer") or {}).get("text") or "")
        total += len((embed.get("author") or {}).get("name") or "")
    if total > 6000:
        raise invalid_form("embeds", "Embed size exceeds maximum size of 6000")
