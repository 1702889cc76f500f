"""Application command schemas: the checks Discord applies on sync, and typed option values.

Discord rejects a bulk overwrite that breaks its limits with 50035 Invalid Form Body; the
double does the same for the limits a bot is likely to trip over, so a bad schema fails the
test suite instead of production.
"""

from __future__ import annotations

import re
from typing import Any

OPTION_STRING = 3
OPTION_INTEGER = 4
OPTION_BOOLEAN = 5
OPTION_NUMBER = 10
OPTION_SUB_COMMAND = 1
OPTION_USER = 6
OPTION_CHANNEL = 7
OPTION_ROLE = 8
#: Snowflake options: the client sends the id as a string and the objects in `data.resolved`.
SNOWFLAKE_OPTION_TYPES = {OPTION_USER, OPTION_CHANNEL, OPTION_ROLE}
SUPPORTED_OPTION_TYPES = {OPTION_STRING, OPTION_INTEGER, OPTION_BOOLEAN, OPTION_NUMBER, *SNOWFLAKE_OPTION_TYPES}

COMMAND_CHAT_INPUT = 1
MAX_SAFE_INTEGER = 2**53 - 1
#: Discord's interaction context types (`contexts`): 0 GUILD, 1 BOT_DM, 2 PRIVATE_CHANNEL.
CONTEXT_TYPES = frozenset({0, 1, 2})
#: Discord's application integration types (`integration_types`): 0 GUILD_INSTALL, 1 USER_INSTALL.
INTEGRATION_TYPES = frozenset({0, 1})
_NAME = re.compile(r"^[-_\w]{1,32}$")
_BIT_SET = re.compile(r"[0-9]+")


class CommandSchemaError(ValueError):
    """A command payload Discord would refuse; the message names the offending field."""


def _check_description(text: object, where: str) -> None:
    if not isinstance(text, str) or not 1 <= len(text) <= 100:
        raise CommandSchemaError(f"{where}.description must be 1-100 characters, got {text!r}")


def _check_localizations(values: object, where: str, *, limit: int) -> None:
    if values is None:
        return
    if not isinstance(values, dict):
        raise CommandSchemaError(f"{where} must be an object")
    for locale, text in values.items():
        if not isinstance(text, str) or not 1 <= len(text) <= limit:
            raise CommandSchemaError(f"{where}.{locale} must be 1-{limit} characters")


def _check_name(name: object, where: str, *, chat_input: bool) -> None:
    if not isinstance(name, str) or not 1 <= len(name) <= 32:
        raise CommandSchemaError(f"{where}.name must be 1-32 characters, got {name!r}")
    if chat_input and (not _NAME.match(name) or name != name.lower()):
        raise CommandSchemaError(f"{where}.name {name!r} must be lowercase letters, digits, - or _")


def _check_option(option: dict[str, Any], where: str) -> None:
    _check_name(option.get("name"), where, chat_input=True)
    _check_description(option.get("description"), where)
    _check_localizations(option.get("description_localizations"), f"{where}.description_localizations", limit=100)
    choices = option.get("choices") or []
    if len(choices) > 25:
        raise CommandSchemaError(f"{where}.choices: at most 25")
    if choices and option.get("autocomplete"):
        raise CommandSchemaError(f"{where}: choices and autocomplete are mutually exclusive")
    if "max_length" in option and not 1 <= option["max_length"] <= 6000:
        raise CommandSchemaError(f"{where}.max_length must be 1-6000, got {option['max_length']}")
    if "min_length" in option and not 0 <= option["min_length"] <= 6000:
        raise CommandSchemaError(f"{where}.min_length must be 0-6000, got {option['min_length']}")
    if option.get("type") == OPTION_INTEGER:
        for bound in ("min_value", "max_value"):
            value = option.get(bound)
            if value is not None and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise CommandSchemaError(f"{where}.{bound} must be within +-(2^53-1), got {value}")
    sub_options = option.get("options") or []
    _check_option_list(sub_options, f"{where}.options")


def _check_option_list(options: list[dict[str, Any]], where: str) -> None:
    if len(options) > 25:
        raise CommandSchemaError(f"{where}: at most 25 options")
    seen_optional = False
    names: set[str] = set()
    for index, option in enumerate(options):
        _check_option(option, f"{where}.{index}")
        if option["name"] in names:
            raise CommandSchemaError(f"{where}.{index}: duplicate option name {option['name']!r}")
        names.add(option["name"])
        if option.get("type") in (1, 2):
            continue
        if option.get("required"):
            if seen_optional:
                raise CommandSchemaError(f"{where}.{index}: required options must come before optional ones")
        else:
            seen_optional = True


def _check_kinds(values: object, where: str, allowed: frozenset[int]) -> None:
    """`contexts` and `integration_types`: absent or null (Discord's defaults), else a non-empty array of distinct
    known values."""
    if values is None:
        return
    if (not isinstance(values, list) or not values or len(set(map(repr, values))) != len(values)
            or not all(isinstance(value, int) and not isinstance(value, bool) and value in allowed
                       for value in values)):
        raise CommandSchemaError(f"{where} must be an array of distinct values from {sorted(allowed)}, got {values!r}")


def validate_commands(commands: object) -> list[dict[str, Any]]:
    if not isinstance(commands, list):
        raise CommandSchemaError("body must be an array of commands")
    keys: set[tuple[int, str]] = set()
    for index, command in enumerate(commands):
        if not isinstance(command, dict):
            raise CommandSchemaError(f"{index}: must be an object")
        kind = command.get("type", COMMAND_CHAT_INPUT)
        chat_input = kind == COMMAND_CHAT_INPUT
        _check_name(command.get("name"), str(index), chat_input=chat_input)
        if chat_input:
            _check_description(command.get("description"), str(index))
            _check_localizations(
                command.get("description_localizations"), f"{index}.description_localizations", limit=100
            )
            _check_option_list(command.get("options") or [], f"{index}.options")
        default_member_permissions(command.get("default_member_permissions"))
        _check_kinds(command.get("contexts"), f"{index}.contexts", CONTEXT_TYPES)
        _check_kinds(command.get("integration_types"), f"{index}.integration_types", INTEGRATION_TYPES)
        key = (kind, command["name"])
        if key in keys:
            raise CommandSchemaError(f"{index}: duplicate command name {command['name']!r}")
        keys.add(key)
    return commands


def default_member_permissions(value: object) -> str | None:
    """A command's `default_member_permissions` as Discord stores and returns it: a bit set as a string, or null.

    discord.py sends an integer; Discord takes either and always answers with the string.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or not _BIT_SET.fullmatch(str(value)):
        raise CommandSchemaError(f"default_member_permissions must be a permission bit set, got {value!r}")
    return str(int(value))


def find_option(command: dict[str, Any], name: str) -> dict[str, Any]:
    options: list[dict[str, Any]] = command.get("options") or []
    for option in options:
        if option["name"] == name:
            return option
    known = [o["name"] for o in command.get("options") or []]
    raise ValueError(f"/{command['name']} has no option {name!r}; it has {known}")


def typed_value(command: dict[str, Any], option: dict[str, Any], value: object) -> object:
    """Check a value the way the Discord client does before letting a user submit it."""
    kind = option.get("type")
    label = f"/{command['name']} {option['name']}"
    if kind not in SUPPORTED_OPTION_TYPES:
        raise ValueError(f"{label}: option type {kind} is not supported by the double")
    if kind in SNOWFLAKE_OPTION_TYPES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{label} expects an id, got {value!r}")
        return str(value)
    if kind == OPTION_STRING:
        if not isinstance(value, str):
            raise ValueError(f"{label} expects a string, got {value!r}")
        if "max_length" in option and len(value) > option["max_length"]:
            raise ValueError(f"{label}: {len(value)} characters exceeds max_length {option['max_length']}")
        if len(value) < option.get("min_length", 0):
            raise ValueError(f"{label}: shorter than min_length {option['min_length']}")
    elif kind == OPTION_INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{label} expects an integer, got {value!r}")
    elif kind == OPTION_NUMBER:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{label} expects a number, got {value!r}")
    elif not isinstance(value, bool):
        raise ValueError(f"{label} expects a boolean, got {value!r}")
    if kind in (OPTION_INTEGER, OPTION_NUMBER):
        assert isinstance(value, int | float)
        if option.get("min_value") is not None and value < option["min_value"]:
            raise ValueError(f"{label}: {value} is below min_value {option['min_value']}")
        if option.get("max_value") is not None and value > option["max_value"]:
            raise ValueError(f"{label}: {value} is above max_value {option['max_value']}")
    choices = option.get("choices")
    if choices and value not in [c["value"] for c in choices]:
        raise ValueError(f"{label}: {value!r} is not one of the choices")
    return value


def subcommand(command: dict[str, Any], name: str) -> dict[str, Any]:
    """`/group name` as a command of its own, for building its options."""
    option = find_option(command, name)
    if option.get("type") != OPTION_SUB_COMMAND:
        raise ValueError(f"/{command['name']} {name} is not a subcommand")
    return {"name": f"{command['name']} {name}", "options": option.get("options") or []}


def build_options(
    command: dict[str, Any],
    values: dict[str, object],
    *,
    focused: str | None = None,
) -> list[dict[str, Any]]:
    """Interaction `data.options` for the given values, typed from the synced schema."""
    options: list[dict[str, Any]] = []
    for name, value in values.items():
        option = find_option(command, name)
        if name == focused:
            if not option.get("autocomplete"):
                raise ValueError(f"/{command['name']} {name} was not synced with autocomplete")
            # While typing, the focused value is whatever text is in the box, unchecked.
            options.append({"name": name, "type": option["type"], "value": str(value), "focused": True})
            continue
        typed = typed_value(command, option, value)
        options.append({"name": name, "type": option["type"], "value": typed})
    if focused is None:
        missing = [o["name"] for o in command.get("options") or [] if o.get("required") and o["name"] not in values]
        if missing:
            raise ValueError(f"/{command['name']} is missing required options {missing}")
    return options
