"""The report sinks a batch may add after its own files: each registers here, with what it is
built from in the batch's options, or ``None`` when the options do not ask for it. Its module is
imported only then. A new report (``--junit-xml`` is the example) is its sink module, a line
here, and its option (a ``BatchOptions`` field: its flag, config key, ``JAXRUN_*`` variable and
API keyword are made from it).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.plan.sink import Sink


class ReportSink(NamedTuple):
    target: str  # "module:Class" in jaxrun.present.sinks
    arguments: Callable[["BatchOptions"], "tuple[Any, ...] | None"]  # None: not asked for
    files: dict[str, str] = {}  # option naming a file it writes -> what that file is, for messages
    extra: str | None = None  # the optional feature it needs (jaxrun/core/extras.py), checked before anything runs


def _paths(*names: str) -> Callable[["BatchOptions"], "tuple[Any, ...] | None"]:
    """The options ``names`` (output files) as the sink's arguments, when any is set."""
    def arguments(options: "BatchOptions") -> "tuple[Any, ...] | None":
        values = tuple(getattr(options, name) for name in names)
        return values if any(v is not None for v in values) else None
    return arguments


def _writing(target: str, files: dict[str, str]) -> ReportSink:
    """A sink built from the output files its options name (each named once: ``files``)."""
    return ReportSink(target, _paths(*files), files)


# In the order they run, after the results files and the run log.
REPORT_SINKS: dict[str, ReportSink] = {
    "markdown": _writing("markdown:MarkdownSink", {"markdown": "the Markdown summary"}),
    "exports": _writing("exports:ExportSink", {"export_json": "the export", "export_csv": "the export"}),
    "junit_xml": _writing("junit:JUnitSink", {"junit_xml": "the JUnit report"}),
    # After the batch files, which it reads back as `jaxrun report` does.
    "report": ReportSink("html_report:HtmlReportSink", lambda options: (options.results_dir,) if options.report else None,
                         extra="report"),
    # After the batch files too: stdout gets the batch as its file holds it.
    "json": ReportSink("json_stdout:BatchJsonSink", lambda options: () if options.json else None),
    # Always there: --save-notebooks may be one notebook's own setting; it writes only the
    # notebooks whose cells sent their outputs.
    "notebooks": ReportSink("notebook_outputs:NotebookSink", lambda options: ()),
}


def output_files(options: "BatchOptions") -> list[Path]:
    """The files the report sinks ``options`` ask for write."""
    return [getattr(options, name) for entry in REPORT_SINKS.values() for name in entry.files
            if getattr(options, name) is not None]


def named_output_files(options: "BatchOptions") -> list[tuple[Path, str]]:
    """Every file outside the results folder that ``options`` ask the batch to write, with what
    it is and the option that named it, as the user gave it (``--history``, ``JAXRUN_HISTORY``,
    ``history (jaxrun.toml:2)``): the report sinks' files, and a history database named by the
    user (the default one's folder is jaxrun's to make)."""

    def named(name: str, what: str) -> str:
        return f"{what} ({options.named(name)})"

    found = [(getattr(options, name), named(name, what)) for entry in REPORT_SINKS.values()
             for name, what in entry.files.items() if getattr(options, name) is not None]
    history = options.history
    # One there already is the history store's to open (a folder there is its note, not an error).
    if history is not None and options.source_of("history") != "default" and not history.exists():
        found.append((history, named("history", "the history database")))
    return found


def check_output_files(options: "BatchOptions") -> None:
    """Refuse (UsageError, one line) a file of :func:`named_output_files` that could not be written,
    or a report sink asked for whose optional feature is missing (jaxrun/core/extras.py), before anything
    runs (resultfiles.check_output_file)."""
    from jaxrun.results.result_files import check_output_file

    for entry in REPORT_SINKS.values():
        if entry.extra is not None and entry.arguments(options) is not None:
            from jaxrun.core.extras import require

            require(entry.extra)

    results = Path(options.results_dir).absolute()
    for path, what in named_output_files(options):
        if Path(path).absolute().parent == results and not results.exists():
            continue  # in the results folder, which the batch makes (and checks) itself
        check_output_file(path, what)


def report_sinks(options: "BatchOptions") -> list["Sink"]:
    """The report sinks ``options`` ask for, built."""
    built = []
    for entry in REPORT_SINKS.values():
        arguments = entry.arguments(options)
        if arguments is not None:
            module, name = entry.target.split(":")
            built.append(getattr(importlib.import_module(f"{__package__}.{module}"), name)(*arguments))
    return built
