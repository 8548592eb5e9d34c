"""Result models to JSON and back, with msgspec: the text of a model (NaN kept apart from null,
texts that are not valid Unicode escaped, numpy's scalars as numbers), a model from JSON or plain
data (older files' layouts brought up to date first), a one-line reason when data does not fit its
model, and the JSON Schema of a model.

A model class may define ``_older(data) -> data``: how a dict written by an earlier jaxrun becomes
one of today's layout (a field renamed, one metric that became per-phase verdicts). It is applied
to every dict read as that class, wherever the class sits in the file, before the dict is checked.
"""

from __future__ import annotations

import functools
import math
import os
import re
import typing
from typing import Any, Sequence

import msgspec

from jaxrun.probe.channel import valid_texts

# -- writing ----------------------------------------------------------------------------------------


def plain_value(value: Any) -> Any:
    """What msgspec cannot write as it is, as plain data: numpy and jax scalars and arrays (a
    script's recorded figures), a batch's held results (a sequence), paths, sets. Anything else is
    a TypeError (never a guessed text in a result file)."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Sequence):
        return list(value)
    raise TypeError(f"{type(value).__name__} cannot be written as JSON: {value!r}")


_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def tagged_non_finite(value: Any) -> Any:
    """``value`` (plain data) with NaN and infinities as the strings "NaN", "Infinity" and
    "-Infinity": valid JSON, never confused with null (a value not measured). msgspec itself
    writes them as null."""
    kind = type(value)
    if kind is float:
        if value != value:
            return "NaN"
        return _NON_FINITE.get(value, value)
    if kind is dict:
        return {k: tagged_non_finite(v) for k, v in value.items()}
    if kind is list or kind is tuple:  # to_builtins keeps a tuple a tuple
        return [tagged_non_finite(v) for v in value]
    return value


_JSON = msgspec.json.Encoder(enc_hook=plain_value)
_MSGPACK = msgspec.msgpack.Encoder(enc_hook=plain_value)
# msgspec's MessagePack holds every float as a float64 (0xcb, then its 8 bytes, big-endian): a NaN or
# an infinity starts with 0x7f or 0xff, then 0xf0 or more. A text that happens to hold these bytes
# only sends the model through the slower path; no non-finite float escapes it.
_NON_FINITE_FLOAT = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")


def _may_hold_non_finite(model: Any) -> bool:
    """Whether ``model`` may hold a NaN or an infinity (5 us, where walking it takes 25)."""
    return _NON_FINITE_FLOAT.search(_MSGPACK.encode(model)) is not None


def plain_data(model: Any) -> Any:
    """``model`` as plain JSON-able data, as its file holds it (:func:`tagged_non_finite`)."""
    return tagged_non_finite(msgspec.to_builtins(model, enc_hook=plain_value))


def json_text(model: Any, indent: int = 2) -> str:
    """``model`` as JSON text, indented by ``indent`` spaces (0: on one line), without a final
    newline. A text that is not valid Unicode (a file name's undecodable bytes) is escaped as
    the probe escapes it, not lost."""
    text = exact_json_text(model, indent)
    if text is None:
        raw = msgspec.json.encode(valid_texts(plain_data(model)))
        return (msgspec.json.format(raw, indent=indent) if indent else raw).decode("utf-8")
    return text


def exact_json_text(model: Any, indent: int = 2) -> str | None:
    """:func:`json_text`, or None when ``model`` holds a text that is not valid Unicode (its JSON
    would hold it escaped, not as it is)."""
    try:
        raw = _JSON.encode(model)
        if _may_hold_non_finite(model):
            raw = _JSON.encode(plain_data(model))
    except UnicodeEncodeError:
        return None
    if indent:
        raw = msgspec.json.format(raw, indent=indent)
    return raw.decode("utf-8")


def json_key(name: str) -> str:
    """``name`` as a JSON object's key (escaped where it is not valid Unicode)."""
    try:
        return msgspec.json.encode(name).decode("utf-8")
    except UnicodeEncodeError:
        return msgspec.json.encode(valid_texts(name)).decode("utf-8")


# -- reading ----------------------------------------------------------------------------------------


def decoded(text: str | bytes, model: type) -> Any:
    """The ``model`` in the JSON ``text``; raises msgspec.ValidationError (not of the model) or
    msgspec.DecodeError (not JSON)."""
    prepare(model)
    if not _older_fields(model) and not hasattr(model, "_older"):
        return msgspec.json.decode(text, type=model, strict=False)
    return converted(msgspec.json.decode(text), model)


def converted(data: Any, model: type) -> Any:
    """Plain data (a dict as the files hold it) as ``model``; numpy's scalars and the like (which
    msgspec takes for no number, not even numpy's float64) as the plain values they stand for."""
    prepare(model)
    data = upgraded(data, model)
    try:
        return msgspec.convert(data, type=model, strict=False)
    except msgspec.ValidationError:
        return msgspec.convert(msgspec.to_builtins(data, enc_hook=plain_value), type=model, strict=False)


def upgraded(data: Any, model: type) -> Any:
    """``data`` with every dict read as a class that has ``_older`` brought to today's layout
    (a copy where something changed; ``data`` itself is never changed)."""
    if not isinstance(data, dict):
        return data
    older = getattr(model, "_older", None)
    if older is not None:
        data = older(data)
    for name, shape, inner in _older_fields(model):
        value = data.get(name)
        if value is None:
            continue
        if shape == "one":
            new = upgraded(value, inner)
        elif shape == "list" and isinstance(value, list):
            new = [upgraded(v, inner) for v in value]
        elif shape == "dict" and isinstance(value, dict):
            new = {k: upgraded(v, inner) for k, v in value.items()}
        else:
            continue
        data = {**data, name: new}
    return data


@functools.cache
def _older_fields(model: type) -> tuple[tuple[str, str, type], ...]:
    """The fields of ``model`` whose values may hold a model with ``_older`` (:func:`nested_models`'s)."""
    if not isinstance(model, type) or not issubclass(model, msgspec.Struct):
        return ()
    return tuple(field for field in nested_models(model) if _has_older(field[2]))


def _inner_model(hint: Any) -> tuple[str, type] | None:
    """``X``, ``X | None``, ``list[X]``, ``dict[str, X]`` (X a model) as its shape and X."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    if len(args) != 1:
        return None
    hint = args[0]
    origin = typing.get_origin(hint)
    if origin is list:
        inner, shape = typing.get_args(hint)[0], "list"
    elif origin is dict:
        inner, shape = typing.get_args(hint)[1], "dict"
    else:
        inner, shape = hint, "one"
    if isinstance(inner, type) and issubclass(inner, msgspec.Struct):
        return shape, inner
    return None


def _is_union(hint: Any) -> bool:
    import types

    return typing.get_origin(hint) in (typing.Union, types.UnionType)


@functools.cache
def nested_models(model: type) -> tuple[tuple[str, str, type], ...]:
    """Every field of ``model`` that holds models: (name, "one" | "list" | "dict", the model)."""
    return tuple((name, *found) for name, hint in typing.get_type_hints(model).items()
                 if name in model.__struct_fields__ and (found := _inner_model(hint)) is not None)


@functools.cache
def prepare(model: type) -> None:
    """Work out now what reading ``model`` (and the models it holds) first works out: msgspec's
    types of every field (their annotations evaluated: ~10 ms for a script's result) and the
    nested models :func:`as_models` and :func:`upgraded` look into (~7 ms). A Ctrl-C meanwhile is
    raised once that is done (core/held_interrupt.py says why). Anything but a model: nothing to do."""
    if not (isinstance(model, type) and issubclass(model, msgspec.Struct)):
        return
    from jaxrun.core.held_interrupt import interrupt_held

    with interrupt_held():
        msgspec.json.Decoder(model)
        todo, seen = [model], set()
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            _older_fields(current)
            todo.extend(inner for _, _, inner in nested_models(current))


def as_models(model: Any) -> None:
    """Turn the dicts that ``model``'s code gave for its nested models into those models (as
    pydantic did on construction): ``ScriptResult(compile_environment={...})`` reads like the
    file it writes. Only plain lists and dicts are looked into: a batch's held results (a
    sequence that reads each result back when asked) are models already, and are never read here."""
    for name, shape, inner in nested_models(type(model)):
        value = getattr(model, name)
        if value is None:
            continue
        if shape == "one":
            if type(value) is dict:
                setattr(model, name, converted(value, inner))
        elif shape == "list":
            if type(value) is list and any(type(v) is dict for v in value):
                setattr(model, name, [converted(v, inner) if type(v) is dict else v for v in value])
        elif type(value) is dict and any(type(v) is dict for v in value.values()):
            setattr(model, name, {k: converted(v, inner) if type(v) is dict else v for k, v in value.items()})


_SEEN: set[type] = set()


def _has_older(model: type) -> bool:
    """Whether ``model`` or a model it holds has ``_older``."""
    if hasattr(model, "_older"):
        return True
    if model in _SEEN:  # a model that holds itself: already being looked at
        return False
    _SEEN.add(model)
    try:
        return bool(_older_fields(model))
    finally:
        _SEEN.discard(model)


# -- what does not fit --------------------------------------------------------------------------------

_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_MISSING = re.compile(r"Object missing required field `(?P<name>[^`]*)`")
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<name>[^`]*)`")


def misfit(exc: msgspec.ValidationError) -> str:
    """Where and how data does not fit its model, from msgspec's message: ``script_results.0.success:
    Field required``, ``surprise: Extra inputs are not permitted``, ``success: Expected `bool`, got
    `str```; the words of the earlier readers kept, for the people who search for them."""
    match = _AT.match(str(exc))
    what, path = match["what"], match["path"] or ""
    where = [part for part in re.split(r"\.|\[|\]", path) if part]
    for pattern, words in ((_MISSING, "Field required"), (_UNKNOWN, "Extra inputs are not permitted")):
        found = pattern.fullmatch(what)
        if found:
            where.append(found["name"])
            what = words
            break
    return f"{'.'.join(where) or '(top level)'}: {what}"


# -- JSON Schema ------------------------------------------------------------------------------------------


def json_schema_of(model: type) -> dict[str, Any]:
    """The JSON Schema of ``model``: its own properties at the top, the models it holds in
    ``$defs``."""
    schema = msgspec.json.schema(model)
    defs = schema.pop("$defs", {})
    ref = schema.get("$ref", "")
    name = ref.rsplit("/", 1)[-1]
    if ref and name in defs:
        top = defs.pop(name)
        if not _refers_to(defs, ref):
            return {**top, "$defs": defs} if defs else top
        defs[name] = top
        return {**top, "$defs": defs}
    return {**schema, "$defs": defs} if defs else schema


def _refers_to(value: Any, ref: str) -> bool:
    if isinstance(value, dict):
        return value.get("$ref") == ref or any(_refers_to(v, ref) for v in value.values())
    if isinstance(value, list):
        return any(_refers_to(v, ref) for v in value)
    return False
