"""Every output of a batch, declared as data: its name, the option that asks for it, the files it
writes outside the results folder, the optional feature it needs, and when it is made. Nothing
here imports an output's module: each is imported when a batch makes it.

An output is a sink (plan/sink.py) made by a function of its module, ``for_batch(context)``,
from what the batch holds (:class:`OutputContext`). The batch makes them stage by stage
(:data:`STAGES`), in the order of :data:`OUTPUTS` within a stage; the stages' sinks are told of
every job in the order of the stages. A third-party package adds an output with an entry point in
the ``jaxrun.outputs`` group naming an :class:`Output` (outputs/installed.py); it is made with the
reports. docs/ARCHITECTURE.md, "Add an output", is the recipe.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.plan.sink import Sink
    from jaxrun.results.models import BatchMetadata, DeviceInfo
    from jaxrun.results.ownership import ResultsFolder

# When each stage's outputs are made, in the order their sinks are told of a job:
STAGES = (
    "claims",   # before the first script starts: each script's files claimed before any is made
    "results",  # while the first script runs: the result files (and the history)
    "log",      # before the first script starts: the run log says what starts
    "reports",  # while the first script runs: what is made of the results (after their files)
    "record",   # before the first script starts: what each script wrote, once all of it is written
)
PUT_OFF = ("results", "reports")  # the stages made once the first script's process has started


class Output(NamedTuple):
    """One output of a batch."""

    name: str
    make: str  # "module:function": the function makes its sink from an OutputContext
    stage: str = "reports"  # one of STAGES
    # The option that asks for it (a true value, a path; several, space-separated: any of them);
    # None: every batch has it.
    asked_by: str | None = None
    files: dict[str, str] = {}  # option naming a file it writes outside the results folder -> what that file is
    extra: str | None = None  # the optional feature it needs (core/extras.py), checked before anything runs


# In each stage, in the order they are told of a job.
OUTPUTS: tuple[Output, ...] = (
    Output("claims", "jaxrun.outputs.claims:claims_for_batch", "claims"),
    Output("history", "jaxrun.outputs.history_sink:for_batch", "results", asked_by="history"),
    Output("script_files", "jaxrun.outputs.script_files:for_batch", "results"),
    Output("profiles", "jaxrun.outputs.profile_files:for_batch", "results", asked_by="enable_profiling"),
    Output("batch_files", "jaxrun.outputs.batch_files:for_batch", "results"),
    Output("run_log", "jaxrun.outputs.run_log:for_batch", "log"),
    Output("markdown", "jaxrun.outputs.markdown:for_batch", asked_by="markdown",
           files={"markdown": "the Markdown summary"}),
    Output("exports", "jaxrun.outputs.exports:for_batch", asked_by="export_json export_csv",
           files={"export_json": "the export", "export_csv": "the export"}),
    Output("junit_xml", "jaxrun.outputs.junit:for_batch", asked_by="junit_xml", files={"junit_xml": "the JUnit report"}),
    # After the batch files, which it reads back as `jaxrun report` does.
    Output("report", "jaxrun.outputs.html_report:for_batch", asked_by="report", extra="report"),
    # After the batch files too: stdout gets the batch as its file holds it.
    Output("json", "jaxrun.outputs.json_stdout:for_batch", asked_by="json"),
    # Every batch: --save-notebooks may be one notebook's own setting; it writes only the notebooks
    # whose cells sent their outputs.
    Output("notebooks", "jaxrun.outputs.notebook_outputs:for_batch"),
    Output("record", "jaxrun.outputs.claims:record_for_batch", "record"),
)


class OutputContext:
    """What a batch's outputs are made from. The batch fills in ``meta`` and ``facts`` (the device
    facts, as the results hold them) before the result files' stage is made; ``built`` holds each
    output made so far by name (the batch files hold each result as the text its own file was
    written with: ``built["script_files"]``)."""

    def __init__(self, options: "BatchOptions", folder: "ResultsFolder", history: Any,
                 header: Callable[[], "list[str]"], expected: Callable[[], "int | None"]) -> None:
        self.options, self.folder, self.history = options, folder, history  # history: history_sink.HistoryOpener
        self.header = header  # the run log's first lines
        self.expected = expected  # how many results the batch will hold (None while unknown)
        self.meta: "BatchMetadata | None" = None
        self.facts: "DeviceInfo | None" = None
        self.built: dict[str, "Sink"] = {}

    @property
    def info(self) -> "DeviceInfo | None":
        """The old name of :attr:`facts`, kept for installed outputs (``jaxrun.outputs``) that read it."""
        return self.facts


def asks_for(output: Output, options: "BatchOptions") -> bool:
    """Whether ``options`` ask for ``output`` (any of its options set: a true value, a path)."""
    if output.asked_by is None:
        return True
    return any(_value(options, name) not in (None, False) for name in output.asked_by.split())


def _value(options: "BatchOptions", name: str) -> Any:
    """Option ``name`` of the batch, or of each script's run (``enable_profiling``)."""
    return getattr(options, name) if name in type(options).fields else getattr(options.run, name)


def make(output: Output, context: OutputContext) -> "Sink":
    module, function = output.make.split(":")
    sink = getattr(importlib.import_module(module), function)(context)
    context.built[output.name] = sink
    return sink


def made(stage: str, context: OutputContext, outputs: "tuple[Output, ...]" = OUTPUTS) -> "list[Sink]":
    """The sinks of ``stage`` that the batch's options ask for, made in order."""
    return [make(output, context) for output in outputs if output.stage == stage and asks_for(output, context.options)]


def output_files(options: "BatchOptions") -> list[Path]:
    """The files outside the results folder the outputs ``options`` ask for write."""
    return [path for path, _ in named_output_files(options, history=False)]


def named_output_files(options: "BatchOptions", *, history: bool = True) -> list[tuple[Path, str]]:
    """Every file outside the results folder that ``options`` ask the batch to write, with what
    it is and the option that named it, as the user gave it (``--history``, ``JAXRUN_HISTORY``,
    ``history (jaxrun.toml:2)``): the outputs' files, and a history database named by the user
    (the default one's folder is jaxrun's to make)."""
    found = [(getattr(options, name), f"{what} ({options.named(name)})") for output in OUTPUTS
             for name, what in output.files.items() if getattr(options, name) is not None]
    path = options.history
    # One there already is the history store's to open (a folder there is its note, not an error);
    # a PostgreSQL history is a server's, no file here.
    if history and isinstance(path, Path) and options.source_of("history") != "default" and not path.exists():
        found.append((path, f"the history database ({options.named('history')})"))
    return found


def check_output_files(options: "BatchOptions") -> None:
    """Refuse (UsageError, one line) a file of :func:`named_output_files` that could not be written,
    or an output asked for whose optional feature is missing (core/extras.py), before anything
    runs (result_files.check_output_file)."""
    from jaxrun.core.extras import require
    from jaxrun.results.result_files import check_output_file

    for output in OUTPUTS:
        if output.extra is not None and asks_for(output, options):
            require(output.extra)
    results = Path(options.results_dir).absolute()
    for path, what in named_output_files(options):
        if Path(path).absolute().parent == results and not results.exists():
            continue  # in the results folder, which the batch makes (and checks) itself
        check_output_file(path, what)
