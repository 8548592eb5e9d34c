"""The arguments of an MCP tool call checked against the tool's input schema (the JSON Schema a
client reads, made from the options' declarations), before the tool runs: no argument the tool
does not take, none missing, each of the schema's JSON type, never converted. Plain Python: it
reads the schema, whatever SDK made it."""

from __future__ import annotations

import json
from typing import Any

from jaxrun.core.formatting import listed, shorten_middle
from jaxrun.core.validate import shown_value

_KINDS = {"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
          "null": "null", "array": "a list", "object": "an object"}


def _kind(value: object) -> str:
    """The JSON type of a value as the protocol's JSON decoder gives it."""
    if value is None:
        return "null"
    for python, kind in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array")):
        if isinstance(value, python):
            return kind
    return "object"


def _fits(value: object, schema: dict[str, Any]) -> bool:
    if "anyOf" in schema:
        return any(_fits(value, s) for s in schema["anyOf"])
    kind, wanted = _kind(value), schema.get("type")
    if wanted is not None and kind != wanted and not (wanted == "number" and kind == "integer"):
        return False
    if "const" in schema and value != schema["const"]:
        return False
    return "enum" not in schema or value in schema["enum"]


def _expected(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_expected(s) for s in schema["anyOf"])
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    return _KINDS.get(schema.get("type", ""), "any value")


def _json_text(value: object) -> str:
    return shorten_middle(json.dumps(value, ensure_ascii=False, default=str), 80)


def _name(argument: str) -> str:
    """An argument's name as a refusal starts with it: as given, or quoted when it is not a plain name."""
    return argument if argument.isidentifier() and len(argument) <= 80 else shown_value(argument)


def argument_problem(tool: str, schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why a call of ``tool`` cannot run, said before it runs (None: nothing wrong here): an
    argument ``tool`` does not take (named, with every valid one), a required one missing, or a
    value of another JSON type than its input schema's (a number given as text, a count with a
    fraction, null: what a JSON client sends for NaN and infinity). Each starts with the
    argument's name. The values are then checked by the options' own validators, in the tool."""
    properties: dict[str, Any] = schema.get("properties", {})
    valid = ", ".join(properties) or "none"
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        names = listed((_name(name) for name in unknown), 5)
        verb = "is not an argument" if len(unknown) == 1 else "are not arguments"
        return f"{names} {verb} of {tool}; its arguments: {valid}"
    for name in schema.get("required", ()):
        if name not in arguments:
            return f"{name} is missing: {tool} needs it ({_expected(properties[name])})"
    for name, value in arguments.items():
        if not _fits(value, properties[name]):
            said = f"{name} must be {_expected(properties[name])}, got {_json_text(value)}"
            if value is None and "number" in _expected(properties[name]):
                said += " (a JSON client sends NaN and infinity as null)"
            return said
    return None
