"""One view of a run (issue 23): what the terminal, the progress lines, Markdown, the HTML report
and the MCP replies say of a run is computed here, from its results (and a baseline), and only
laid out by each of them (jaxrun/formatting.py writes every kind of figure one way for all)."""

from .programs import ProgramView, TransferView, program_views, transfer_views
from .run import RunView, Skipped, read_batch, read_run_view, run_view
from .scripts import ScriptView, cell_outcome, cells_ran, compiles_text, label_from_name, relative_path, script_label, script_view

__all__ = ["ProgramView", "RunView", "ScriptView", "Skipped", "cell_outcome", "cells_ran", "compiles_text", "label_from_name", "read_batch", "read_run_view", "relative_path", "run_view",
           "program_views", "script_label", "script_view", "TransferView", "transfer_views"]
