"""One view of a run: what the terminal, the progress lines, Markdown, the HTML report and the MCP
replies say of a run is computed here, from its results (and a baseline), and only laid out by each
of them (jaxrun/formatting.py writes every kind of figure one way for all).

The names below are imported when first read: the batch's plan labels its scripts (view/scripts.py)
on the way to the first script, where the rest of the views (and the result models) are not needed.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ProgramView": "programs", "TransferView": "programs", "program_views": "programs", "transfer_views": "programs",
    "RunView": "run", "Skipped": "run", "read_batch": "run", "read_run_view": "run", "run_view": "run",
    "ScriptView": "scripts", "cell_outcome": "scripts", "cells_ran": "scripts", "compiles_text": "scripts",
    "label_from_name": "labels", "relative_path": "labels", "script_label": "labels", "script_view": "scripts",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
