"""The private channel between the probe (and ``jaxrun.record``) and the parent: a JSON-lines file.

A file, rather than a pipe, survives the child being killed: every event already written stays
readable. Each event is a single ``os.write`` on an ``O_APPEND`` descriptor, so the probe and any
process the script starts that calls ``jaxrun.record`` can share it without interleaving lines.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from . import events as ev
EVENTS_ENV = "JAXRUN_EVENTS_FILE"
# The cgroup folders (os.pathsep-separated) the probe joins before the script starts (run/cgroups.py).
CGROUPS_ENV = "JAXRUN_CGROUPS"


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: bytes that were not UTF-8 (a file name, a script's message; Python
    keeps them as lone surrogates, which no UTF-8 file can hold) become ``\\xNN`` escapes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")  # undecodable bytes back to themselves
        except UnicodeEncodeError:
            raw = text.encode("utf-8", "backslashreplace")  # a lone surrogate of another origin
        return raw.decode("utf-8", "backslashreplace")


def valid_texts(value: Any) -> Any:
    """:func:`valid_text` applied to every string (keys included) of a JSON-like value."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_texts(k): valid_texts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_texts(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    """Turn numpy / jax scalars and arrays into plain JSON values (without importing either)."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, dict):
        return {valid_text(str(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return _jsonable(tolist())
    item = getattr(value, "item", None)
    if callable(item):
        return _jsonable(item())
    return str(value)


class EventWriter:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def send(self, event: "ev.Event") -> None:
        """Write one event (its definition in probe/events.py) as one line, in one write."""
        line = json.dumps(_jsonable(event), allow_nan=True) + "\n"
        try:
            os.write(self._fd, line.encode("utf-8"))
        except OSError:
            pass  # a full disk must not turn a working script into a failure

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass


def read_events(path: str | os.PathLike[str]) -> list[ev.Event]:
    """Read every complete event (defined in probe/events.py); a line cut short by a kill is ignored."""
    events: list[ev.Event] = []
    try:
        with open(path, "rb") as handle:
            lines: Iterable[bytes] = handle.read().splitlines()
    except FileNotFoundError:
        return events
    for raw in lines:
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict) and ev.TYPE in event:
            events.append(event)
    return events
