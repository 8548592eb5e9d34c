"""``jaxrun.record``: how a script adds its own figures to its result.

Outside jaxrun (no channel in the environment) it does nothing, so scripts stay runnable as plain
``python script.py``. It never imports jax.
"""

from __future__ import annotations

import os

from jaxrun.probe import events
from jaxrun.probe.channel import EVENTS_ENV, EventWriter

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Any

_writer: EventWriter | None = None
_writer_pid: int | None = None


def record(**metrics: Any) -> None:
    """Add ``name=value`` pairs to this script's result (``results`` in its result file).

    Values may be numbers, strings, booleans, lists/dicts of those, or numpy / jax scalars and
    arrays (converted with ``tolist``). Later calls with the same name overwrite earlier ones.
    """
    global _writer, _writer_pid
    path = os.environ.get(EVENTS_ENV)
    if not path or not metrics:
        return
    # A forked child must open its own descriptor.
    if _writer is None or _writer_pid != os.getpid():
        _writer = EventWriter(path)
        _writer_pid = os.getpid()
    _writer.send(events.Record(type=events.RECORD, values=metrics))
