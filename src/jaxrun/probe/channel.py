"""The private channel between the probe (and ``jaxrun.record``) and the parent: a JSON-lines file.

A file, rather than a pipe, survives the child being killed: every event already written stays
readable. Each event is a single ``os.write`` on an ``O_APPEND`` descriptor, so the probe and any
process the script starts that calls ``jaxrun.record`` can share it without interleaving lines.
"""

from __future__ import annotations

import os

from jaxrun.probe import events as ev

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Any, Iterable

EVENTS_ENV = "JAXRUN_EVENTS_FILE"
# The cgroup folders (os.pathsep-separated) the probe joins before the script starts (run/process/cgroups.py).
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


# json's own C encoder, called below as ``json.dumps`` calls it, without importing ``json``: its
# ``re`` (with enum and the rest) is ~5 ms of CPU in a fresh interpreter, in every script's process.
# Bound here, not in send(): an import statement while the script runs would be the script's
# import time (probe/import_timer.py).
try:
    from _json import encode_basestring_ascii as _encode_text
    from _json import make_encoder as _make_encoder
except ImportError:  # an interpreter without it: json.dumps itself
    import json

    _make_encoder = None


def _not_serializable(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _dumps(value: Any) -> str:
    """``json.dumps(value)``: the same text (one shot, no indent, NaN and infinities allowed)."""
    if _make_encoder is None:
        return json.dumps(value, allow_nan=True)
    return "".join(_make_encoder({}, _not_serializable, _encode_text, None, ": ", ", ", False, False, True)(value, 0))


def read_file(path: str) -> bytes:
    """A small file's bytes, in three system calls or so (``open()`` makes eight: its buffer's
    size, whether it is a terminal, where it stands, then the file's size; in jaxrun's process
    each call is a moment another thread may take the interpreter, ~15 files a script)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


class EventWriter:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def send(self, event: "ev.Event") -> None:
        """Write one event (its definition in probe/events.py) as one line, in one write."""
        line = _dumps(_jsonable(event)) + "\n"
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
    import json  # the parent's side: the probe never reads the channel

    events: list[ev.Event] = []
    try:
        lines: Iterable[bytes] = read_file(os.fspath(path)).splitlines()
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
