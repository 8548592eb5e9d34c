"""The report sinks a batch may add after its own files: each registers here, with what it is
built from in the batch's options, or ``None`` when the options do not ask for it. Its module is
imported only then. A new report (``--junit-xml`` is the example) is its sink module, a line
here, and its option (``BatchOptions``, and its flag in cli/run.py).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

if TYPE_CHECKING:
    from ..options import BatchOptions
    from . import Sink


class ReportSink(NamedTuple):
    target: str  # "module:Class" in jaxrun.sinks
    arguments: Callable[["BatchOptions"], "tuple[Any, ...] | None"]  # None: not asked for


def _paths(*names: str) -> Callable[["BatchOptions"], "tuple[Any, ...] | None"]:
    """The options ``names`` (output files) as the sink's arguments, when any is set."""
    def arguments(options: "BatchOptions") -> "tuple[Any, ...] | None":
        values = tuple(getattr(options, name) for name in names)
        return values if any(v is not None for v in values) else None
    return arguments


# In the order they run, after the results files and the run log.
REPORT_SINKS: dict[str, ReportSink] = {
    "markdown": ReportSink("markdown:MarkdownSink", _paths("markdown")),
    "exports": ReportSink("exports:ExportSink", _paths("export_json", "export_csv")),
    "junit_xml": ReportSink("junit:JUnitSink", _paths("junit_xml")),
    # Always there: --save-notebooks may be one notebook's own setting; it writes only the
    # notebooks whose cells sent their outputs.
    "notebooks": ReportSink("notebooks:NotebookSink", lambda options: ()),
}


def output_files(options: "BatchOptions") -> list[Path]:
    """The files the report sinks ``options`` ask for write (the options naming a file)."""
    return [value for entry in REPORT_SINKS.values() for value in (entry.arguments(options) or ())
            if isinstance(value, Path)]


def report_sinks(options: "BatchOptions") -> list["Sink"]:
    """The report sinks ``options`` ask for, built."""
    built = []
    for entry in REPORT_SINKS.values():
        arguments = entry.arguments(options)
        if arguments is not None:
            module, name = entry.target.split(":")
            built.append(getattr(importlib.import_module(f"{__package__}.{module}"), name)(*arguments))
    return built
