"""One view of a batch: what the terminal, the progress lines, Markdown, the HTML report and the MCP
replies say of a batch is computed here, from its results (and a baseline), and only laid out by each
of them (core/formatting.py writes every kind of figure one way for all).

The names below are imported when first read: the batch's plan labels its scripts (discover/script_labels.py)
on the way to the first script, where the rest of the views (and the result models) are not needed.
"""

from __future__ import annotations

import importlib
from typing import Any

_HERE = "jaxrun.present.view."
_LABELS = "jaxrun.discover.script_labels"  # the plan's labels, a layer below: the views say them the same way
_WHERE = {
    "ProgramView": _HERE + "program_rows", "TransferView": _HERE + "program_rows",
    "program_views": _HERE + "program_rows", "transfer_views": _HERE + "program_rows",
    "BatchView": _HERE + "batch_view", "Skipped": _HERE + "batch_view", "read_batch": _HERE + "batch_view",
    "read_batch_view": _HERE + "batch_view", "view_batch": _HERE + "batch_view",
    # The old names (a batch's view was called a run's): still importable, the same objects.
    "RunView": _HERE + "batch_view", "read_run_view": _HERE + "batch_view", "run_view": _HERE + "batch_view",
    "ScriptView": _HERE + "script_rows", "cell_outcome": _HERE + "script_rows", "cells_ran": _HERE + "script_rows",
    "compiles_text": _HERE + "script_rows", "script_view": _HERE + "script_rows",
    "steady_state_text": _HERE + "script_rows",
    "SweepView": _HERE + "sweep_view", "sweep_views": _HERE + "sweep_view",
    "label_from_name": _LABELS, "relative_path": _LABELS, "script_label": _LABELS,
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
