"""``jaxrun run``: the flags become one :class:`~jaxrun.config.options.BatchOptions`, each value marked
with where it came from (the command line, an environment variable, or the default)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jaxrun.errors import JAXExecutionError
from jaxrun.interfaces.cli.console import (
    CONTEXT_SETTINGS,
    EXIT_INTERRUPTED,
    err,
    fail_usage,
    out,
)

if TYPE_CHECKING:
    from jaxrun.config.settings import Resolved

RUN_HELP = """Run every JAX script under PATHS, each in its own process, and write the results folder.

    Arguments after `--` go to every script (jaxrun run train.py -- --steps 100). Settings also
    come from [tool.jaxrun] in pyproject.toml or a jaxrun.toml (see jaxrun config), per-script
    tables and '# jaxrun:' comments, and JAXRUN_<OPTION> variables; these flags win over all.

    Exit status: 0 all succeeded (or failed as expected: xfail), 1 a script failed (or, with
    --fail-on-regression, the history judged one slower), 2 bad usage, 130 interrupted.
    """


def _own_params() -> list[click.Parameter]:
    """What `jaxrun run` reads itself: the paths, the config file to use and what to print
    (quiet may come from the config file too: config/config_keys.py DISPLAY_KEYS)."""
    return [
        click.Argument(["paths"], nargs=-1, required=True, type=click.Path(path_type=Path), metavar="PATHS..."),
        click.Option(["--config"], type=click.Path(path_type=Path), metavar="FILE",
                     help="Read settings from this pyproject.toml or jaxrun.toml (default: the nearest one above PATH)."),
        click.Option(["--no-config"], is_flag=True, help="Ignore config files."),
        click.Option(["--quiet", "-q"], is_flag=True, help="No live view: one plain line per script event, then the summary."),
    ]


def command() -> click.Command:
    """`jaxrun run`: its own parameters, and a flag for every option (interfaces/cli/flags.py)."""
    from jaxrun.interfaces.cli.flags import OptionsCommand, run_models

    return OptionsCommand("run", callback=run, params=_own_params(), help=RUN_HELP, models=run_models,
                          context_settings=CONTEXT_SETTINGS)


@click.pass_context
def run(ctx: click.Context, **params: Any) -> None:
    """The `jaxrun run` command (RUN_HELP)."""
    paths, quiet = params["paths"], params["quiet"]
    from jaxrun.batch.pipeline import run_batch
    from jaxrun.core.startup_trace import mark

    mark("the flags parsed, the batch's modules imported")
    resolved = resolve_settings(ctx, paths)
    mark("options resolved (flags, config file, environment)")
    options = resolved.options
    quiet = _display(resolved, "quiet", quiet)
    json_output = options.json  # the batch on stdout, by its sink (outputs/json_stdout.py)
    # A live view only for a person at a terminal; logs, pipes, --quiet and --json get plain lines.
    live = sys.stderr.isatty() and not (quiet or json_output or options.run.verbose)
    if live:
        from jaxrun.interfaces.cli.live import LiveProgress
    else:
        from jaxrun.interfaces.cli.progress import LineProgress
    view = LiveProgress(err.console(), slots=options.jobs, runs=options.run.warmup_runs + options.run.benchmark_runs) \
        if live else LineProgress(sys.stderr)
    pool = (ctx.obj or {}).get("pool")
    if pool is None:
        from jaxrun.run.batch_pool import BatchPool

        pool = BatchPool()
    if not json_output:
        pool.when_started(_load_summary)  # while the first script runs, not after the last one
    # SIGTERM (a scheduler, `kill`) stops the batch as Ctrl-C does: running scripts stopped,
    # unfinished ones marked interrupted, valid files, exit 130.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        batch = run_batch(options, sinks=[view], pool=pool)
    except KeyboardInterrupt:
        err.print(f"jaxrun: interrupted; partial results are in {options.results_dir}", markup=False)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        if live:
            view.stop()
    if options.report:  # written by its sink (outputs/html_report.py) at the batch's end
        from jaxrun.present.reports import REPORT_FILE

        err.print(f"report: {options.results_dir / REPORT_FILE}", markup=False)
    mark("the batch returned (results and files written)")
    if json_output:
        raise click.exceptions.Exit(_exit_status(batch))
    status = _show_batch(batch, programs=options.run.verbose)
    mark("the summary printed")
    raise click.exceptions.Exit(status)


def command_line_values(ctx: click.Context) -> tuple[dict[str, Any], dict[str, str]]:
    """The options given on the command line (flags left out give nothing), with the flag that
    gave each; the script arguments after ``--`` (cli.main sets them aside)."""
    from jaxrun.interfaces.cli.flags import given_options, run_models

    given, origins = given_options(ctx, run_models())
    script_args = (ctx.obj or {}).get("script_args")
    if script_args is not None:
        given["args"], origins["args"] = list(script_args), "arguments after --"
    return given, origins


def resolve_settings(ctx: click.Context, paths: Any) -> "Resolved":
    """Every layer of settings for ``jaxrun run`` (and ``jaxrun config``); usage errors exit 2."""
    from jaxrun.config.settings import resolve_batch_options
    from jaxrun.executors.backends import check_backend

    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.exists():
            raise fail_usage(f"no such file or folder: {str(path)!r} — pass a folder of JAX scripts or a .py file")
    params = ctx.params
    config = False if params.get("no_config") else params.get("config")
    try:
        given, origins = command_line_values(ctx)
        resolved = resolve_batch_options(paths, given, source="cli", origins=origins, config=config)
        check_backend(resolved.options)  # what the chosen backend allows, for `jaxrun config` too
        return resolved
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None


def _display(resolved: "Resolved", key: str, flag: bool) -> bool:
    """A display setting: the flag when given, else the config file's or environment's value."""
    return flag or bool(resolved.display.get(key, (False,))[0])


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _warn(name: str, warnings: list[str]) -> None:
    for warning in warnings:  # one line each, however long: logs and CI output stay greppable
        err.print(f"warning: {name}: {warning}", markup=False, soft_wrap=True)


def _load_summary() -> None:
    """What printing the summary imports (rich's tables ~30 ms, the views), while the first script
    runs: after its last line, the summary is only made and printed."""
    from jaxrun.interfaces.cli import profile_notes, tables  # noqa: F401
    from jaxrun.present.view import program_views, view_batch  # noqa: F401

    out.console().render_str("")  # a first rendering loads what every rendering needs (rich's emoji table)


def _show_batch(batch, programs: bool = False) -> int:  # type: ignore[no-untyped-def]
    """Print the batch's view (the tables, what failed and why, the closing line); its exit status.
    ``programs`` (``-v``): what XLA knows about each program, in a table of its own."""
    from jaxrun.interfaces.cli.tables import (
        benchmark_table,
        cells_table,
        programs_table,
        speedup_table,
        summary_tables,
        sweep_table,
        transfers_table,
        warm_table,
    )
    from jaxrun.present.view import program_views, view_batch, transfer_views
    from jaxrun.results.held_results import having

    view = view_batch(batch)
    for table in summary_tables(view, out.width):  # a few hundred rows at a time: the same lines
        out.print(table)
    for sweep in view.sweeps:
        out.print(sweep_table(sweep))
        for note in sweep.notes:
            out.print(f"note: {sweep.script}: {note}", markup=False, soft_wrap=True)
    if programs and any(True for _ in having(batch.script_results, "compiles")):
        out.print(programs_table(program_views(batch, view)))
        out.print(transfers_table(transfer_views(batch, view)))
    labels = {(s.name, s.device_requested): s.label for s in view.scripts}
    # Only the results that have cells, or warm calls, are read again (a running batch's are read
    # back one at a time: results/held_results.py).
    cells = [(labels.get((r.script_name, r.device_requested), r.script_name), cell)
             for _, r in having(batch.script_results, "cells") for cell in r.cells or ()]
    if programs and cells:
        out.print(cells_table(cells))
    _slowest_and_failed(view)
    for script in view.scripts:
        _warn(script.label, script.warnings)
    bench = batch.benchmarking
    if bench.enabled and bench.benchmarks:
        out.print(benchmark_table(bench.benchmarks, out.width, labels))
        for b in bench.benchmarks:
            _warn(labels.get((b.script_name, b.device_requested), b.script_name), b.warnings)
    # A benchmarked result's .warm already pools the calls of all its runs.
    warm_rows = [(view.scripts[i].label, r.warm) for i, r in having(batch.script_results, "warm")]
    for name, warm in warm_rows:
        _warn(name, warm.warnings)
    if warm_rows:
        out.print(warm_table(warm_rows))
    if bench.device_comparison:  # one row per script and device: its path, the devices in columns of their own
        paths = {s.name: s.path for s in view.scripts}
        out.print(speedup_table(bench.device_comparison, paths))
    _warn("discovery", [f"skipped {path} (could not be read)" for path in view.unreadable])
    for skipped in view.skipped:
        where = f" ({skipped.origin})" if skipped.origin else ""
        out.print(f"skipped: {skipped.label}: {skipped.reason}{where}", markup=False, soft_wrap=True)
    for note in view.notes:
        out.print(f"note: {note}", markup=False, soft_wrap=True)
    from jaxrun.interfaces.cli.profile_notes import (
        print_profile_note,  # --profile: where the traces are, how to open them
    )

    print_profile_note(batch)
    out.print(view.closing, markup=False, soft_wrap=True)
    return view.exit_status


def _slowest_and_failed(view) -> None:  # type: ignore[no-untyped-def]
    """Under the table: where the time went (the slowest scripts), where a script ran other than
    asked and why, and what failed: where, its log and its hint."""
    if view.slowest_line:
        out.print(view.slowest_line, markup=False, soft_wrap=True)
    for s in view.scripts:
        if s.fallback_reason:
            out.print(f"fallback: {s.label}: ran on {s.device} instead of {s.device_requested}: {s.fallback_reason}",
                      markup=False, soft_wrap=True)
        if s.status == "xfailed":
            out.print(f"xfail: {s.label}: {s.outcome_text().removeprefix('xfail: ')}", markup=False, soft_wrap=True)
        elif s.status == "xpassed":
            out.print(f"XPASS: {s.label} passed but is marked xfail ({s.expected_failure}); remove the mark if it is fixed",
                      markup=False, soft_wrap=True)
        elif s.status == "failed":
            out.print(f"failed: {s.label}: {s.outcome_text()}", markup=False, soft_wrap=True)
            if s.log:
                out.print(f"  log: {s.log}", markup=False, soft_wrap=True)
            if s.hint:
                out.print(f"  hint: {s.hint}", markup=False, soft_wrap=True)


def _exit_status(batch) -> int:  # type: ignore[no-untyped-def]
    from jaxrun.present.view import view_batch

    return view_batch(batch).exit_status
