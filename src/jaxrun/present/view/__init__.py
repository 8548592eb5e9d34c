"""One view of a run: what the terminal, the progress lines, Markdown, the HTML report and the MCP
replies say of a run is computed here, from its results (and a baseline), and only laid out by each
of them (core/formatting.py writes every kind of figure one way for all).

The names below are imported when first read: the batch's plan labels its scripts (present/view/script_rows.py)
on the way to the first script, where the rest of the views (and the result models) are not needed.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ProgramView": "program_rows", "TransferView": "program_rows", "program_views": "program_rows", "transfer_views": "program_rows",
    "RunView": "batch_view", "Skipped": "batch_view", "read_batch": "batch_view", "read_run_view": "batch_view", "run_view": "batch_view",
    "ScriptView": "script_rows", "cell_outcome": "script_rows", "cells_ran": "script_rows", "compiles_text": "script_rows",
    "label_from_name": "jaxrun.discover.script_labels", "relative_path": "jaxrun.discover.script_labels", "script_label": "jaxrun.discover.script_labels", "script_view": "script_rows",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name] if "." in _WHERE[name] else f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
