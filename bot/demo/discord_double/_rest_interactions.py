"""REST: interaction callbacks, and the webhook routes of follow-ups and edits of responses."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from . import _payloads
from ._http import UPLOADS, DiscordError, Upload, invalid_form, json_response, request_body
from ._mentions import PARSE_USERS
from ._messages import (
    FLAG_EPHEMERAL,
    FLAG_LOADING,
    MESSAGE_CHAT_INPUT_COMMAND,
    MESSAGE_DEFAULT,
    Messages,
)
from ._state import (
    INTERACTION_APPLICATION_COMMAND,
    INTERACTION_AUTOCOMPLETE,
    INTERACTION_COMPONENT,
    INTERACTION_MODAL_SUBMIT,
    InteractionRecord,
)

CALLBACK_MESSAGE = 4
CALLBACK_DEFERRED_MESSAGE = 5
CALLBACK_DEFERRED_UPDATE = 6
CALLBACK_UPDATE_MESSAGE = 7
CALLBACK_AUTOCOMPLETE_RESULT = 8
CALLBACK_MODAL = 9

# Which callback types Discord accepts for each interaction type.
_CALLBACK_TYPES_BY_INTERACTION = {
    INTERACTION_APPLICATION_COMMAND: {CALLBACK_MESSAGE, CALLBACK_DEFERRED_MESSAGE, CALLBACK_MODAL},
    INTERACTION_COMPONENT: {
        CALLBACK_MESSAGE,
        CALLBACK_DEFERRED_MESSAGE,
        CALLBACK_DEFERRED_UPDATE,
        CALLBACK_UPDATE_MESSAGE,
        CALLBACK_MODAL,
    },
    INTERACTION_AUTOCOMPLETE: {CALLBACK_AUTOCOMPLETE_RESULT},
    INTERACTION_MODAL_SUBMIT: {
        CALLBACK_MESSAGE,
        CALLBACK_DEFERRED_MESSAGE,
        CALLBACK_DEFERRED_UPDATE,
        CALLBACK_UPDATE_MESSAGE,
    },
}


class InteractionRoutes(Messages):
    """POST /interactions/{id}/{token}/callback, and /webhooks/{app}/{token} for follow-ups and edits."""

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        interaction_id = request.match_info["interaction_id"]
        body = request_body(request)
        entry: dict[str, Any] = {
            "type": body.get("type"),
            "data": body.get("data"),
            "time": time.monotonic(),
            "files": [(u.filename, u.data) for u in request[UPLOADS]],
            "accepted": False,
        }
        self.interaction_responses.setdefault(interaction_id, []).append(entry)
        record = self._interactions.get(interaction_id)
        if record is None or record.token != request.match_info["token"]:
            raise DiscordError(404, 10062, "Unknown interaction")
        if record.acknowledged:
            raise DiscordError(400, 40060, "Interaction has already been acknowledged.")
        if entry["time"] - record.created_at > self.callback_deadline:
            raise DiscordError(404, 10062, "Unknown interaction")
        response = await self._accept_callback(record, body, request[UPLOADS])
        entry["accepted"] = True
        return json_response(response)

    async def _accept_callback(
        self, record: InteractionRecord, body: dict[str, Any], uploads: list[Upload]
    ) -> dict[str, Any]:
        kind = body.get("type")
        data = body.get("data") or {}
        if kind not in _CALLBACK_TYPES_BY_INTERACTION.get(record.type, set()):
            raise invalid_form("type", f"callback type {kind} is not valid for interaction type {record.type}")
        interaction: dict[str, Any] = {"id": record.id, "type": record.type}
        resource: dict[str, Any] = {"type": kind}
        if kind == CALLBACK_AUTOCOMPLETE_RESULT:
            _validate_choices(data.get("choices"))
        elif kind in (CALLBACK_MESSAGE, CALLBACK_DEFERRED_MESSAGE):
            if kind == CALLBACK_MESSAGE:
                message = self._message_record(
                    channel_id=record.channel_id,
                    body=data,
                    uploads=uploads,
                    size_limit=record.attachment_size_limit,
                    default_parse=PARSE_USERS,
                    message_type=MESSAGE_CHAT_INPUT_COMMAND,
                    webhook=True,
                )
            else:
                # A deferred response is a placeholder message in the "thinking" state.
                message = self._message_record(
                    channel_id=record.channel_id,
                    body={"flags": int(data.get("flags") or 0) & FLAG_EPHEMERAL},
                    uploads=[],
                    size_limit=record.attachment_size_limit,
                    default_parse=PARSE_USERS,
                    message_type=MESSAGE_CHAT_INPUT_COMMAND,
                    webhook=True,
                    placeholder=True,
                )
                message["flags"] |= FLAG_LOADING
            message["interaction_user_id"] = record.user_id
            record.original_message_id = message["id"]
            messages = self.webhook_messages.setdefault(record.token, {})
            messages[message["id"]] = message
            messages["@original"] = message
            interaction["response_message_id"] = message["id"]
            interaction["response_message_loading"] = kind == CALLBACK_DEFERRED_MESSAGE
            interaction["response_message_ephemeral"] = bool(message["flags"] & FLAG_EPHEMERAL)
            resource["message"] = self._wire(message)
            await self._announce("MESSAGE_CREATE", message)
        elif kind in (CALLBACK_DEFERRED_UPDATE, CALLBACK_UPDATE_MESSAGE):
            # The response is the message the component is on: updated now (7) or by a later edit (6).
            target = record.message
            if target is None or target["deleted"]:
                raise DiscordError(404, 10008, "Unknown Message")
            if kind == CALLBACK_UPDATE_MESSAGE:
                self._apply_message_fields(target, data, uploads, default_parse=PARSE_USERS)
                target["edited_timestamp"] = _payloads.iso_now()
                await self._announce("MESSAGE_UPDATE", target)
            record.original_message_id = target["id"]
            messages = self.webhook_messages.setdefault(record.token, {})
            messages[target["id"]] = target
            messages["@original"] = target
            resource["message"] = self._wire(target)
        record.acknowledged = True
        return {"interaction": interaction, "resource": resource}

    def _webhook_interaction(self, request: web.Request) -> InteractionRecord:
        if int(request.match_info["app_id"]) != self.application_id:
            raise DiscordError(404, 10015, "Unknown Webhook")
        record = self._interactions_by_token.get(request.match_info["token"])
        if record is None:
            raise DiscordError(401, 50027, "Invalid Webhook Token")
        if time.monotonic() - record.created_at > self.token_lifetime:
            raise DiscordError(401, 50027, "Invalid Webhook Token")
        if not record.acknowledged:
            raise DiscordError(404, 10015, "Unknown Webhook")
        return record

    def _webhook_message(self, request: web.Request, record: InteractionRecord) -> dict[str, Any]:
        message = self.webhook_messages.get(record.token, {}).get(request.match_info["message_id"])
        if message is None or message["deleted"]:
            raise DiscordError(404, 10008, "Unknown Message")
        return message

    async def _execute_webhook(self, request: web.Request) -> web.Response:
        record = self._webhook_interaction(request)
        body = request_body(request)
        message = self._message_record(
            channel_id=record.channel_id,
            body=body,
            uploads=request[UPLOADS],
            size_limit=record.attachment_size_limit,
            default_parse=PARSE_USERS,
            message_type=MESSAGE_DEFAULT,
            webhook=True,
        )
        message["interaction_user_id"] = record.user_id
        self.webhook_messages.setdefault(record.token, {})[message["id"]] = message
        await self._announce("MESSAGE_CREATE", message)
        if request.query.get("wait", "").lower() in ("1", "true"):
            return json_response(self._wire(message))
        return web.Response(status=204)

    async def _get_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_interaction(request)
        return json_response(self._wire(self._webhook_message(request, record)))

    async def _edit_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_interaction(request)
        message = self._webhook_message(request, record)
        uploads: list[Upload] = request[UPLOADS]
        self._check_upload_sizes(uploads, record.attachment_size_limit)
        was_loading = bool(message["flags"] & FLAG_LOADING)
        self._apply_message_fields(message, request_body(request), uploads, default_parse=PARSE_USERS)
        if was_loading:
            # The first edit of a deferred response replaces the "thinking" placeholder.
            message["flags"] &= ~FLAG_LOADING
        else:
            message["edited_timestamp"] = _payloads.iso_now()
        await self._announce("MESSAGE_UPDATE", message)
        return json_response(self._wire(message))

    async def _delete_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_interaction(request)
        self._webhook_message(request, record)["deleted"] = True
        return web.Response(status=204)


def _validate_choices(choices: object) -> None:
    if not isinstance(choices, list) or len(choices) > 25:
        raise invalid_form("data.choices", "Must be a list of 25 or fewer choices.")
    for index, choice in enumerate(choices):
        name = choice.get("name") if isinstance(choice, dict) else None
        if not isinstance(name, str) or not 1 <= len(name) <= 100:
            raise invalid_form(f"data.choices.{index}.name", "Must be between 1 and 100 in length.")
        if not isinstance(choice, dict) or "value" not in choice:
            raise invalid_form(f"data.choices.{index}.value", "This field is required")
