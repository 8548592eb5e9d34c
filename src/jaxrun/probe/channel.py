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


def _jsonable(value: Any) -> Any:
    """Turn numpy / jax scalars and arrays into plain JSON values (without importing either)."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
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

    def emit(self, kind: str, **fields: Any) -> None:
        line = json.dumps({ev.TYPE: kind, **_jsonable(fields)}, allow_nan=True) + "\n"
        try:
            os.write(self._fd, line.encode("utf-8"))
        except OSError:
            pass  # a full disk must not turn a working script into a failure

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read every complete event; a line cut short by a kill is ignored."""
    events: list[dict[str, Any]] = []
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
