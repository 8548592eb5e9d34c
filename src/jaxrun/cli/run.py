"""``jaxrun run``: the flags become one :class:`~jaxrun.options.BatchOptions`, each value marked
with where it came from (the command line, an environment variable, or the default)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import JAXExecutionError

if TYPE_CHECKING:
    from ..settings import Resolved
from .console import CONTEXT_SETTINGS, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, err, fail_usage, out

RUN_HELP = """Run every JAX script under PATHS, each in its own process, and write the results folder.

    Arguments after `--` go to every script (jaxrun run train.py -- --steps 100). Settings also
    come from [tool.jaxrun] in pyproject.toml or a jaxrun.toml (see jaxrun config), per-script
    tables and '# jaxrun:' comments, and JAXRUN_<OPTION> variables; these flags win over all.

    Exit status: 0 all succeeded (or failed as expected: xfail), 1 a script failed or the history
    flags a regression, 2 bad usage, 130 interrupted.
    """


def _own_params() -> list[click.Parameter]:
    """What `jaxrun run` reads itself: the paths, the config file to use and what to print
    (quiet and report may come from the config file too: settings/keys.py DISPLAY_KEYS)."""
    return [
        click.Argument(["paths"], nargs=-1, required=True, type=click.Path(path_type=Path), metavar="PATHS..."),
        click.Option(["--config"], type=click.Path(path_type=Path), metavar="FILE",
                     help="Read settings from this pyproject.toml or jaxrun.toml (default: the nearest one above PATH)."),
        click.Option(["--no-config"], is_flag=True, help="Ignore config files."),
        click.Option(["--quiet", "-q"], is_flag=True, help="No live view: one plain line per script event, then the summary."),
        click.Option(["--report"], is_flag=True, help="Also write the HTML report (RESULTS_DIR/report.html; see jaxrun report)."),
        click.Option(["--json", "json_output"], is_flag=True,
                     help="Print the batch result (as in jax_execution_results.json) on stdout and nothing else there."),
    ]


def command() -> click.Command:
    """`jaxrun run`: its own parameters, and a flag for every option (cli/flags.py)."""
    from .flags import OptionsCommand, run_models

    return OptionsCommand("run", callback=run, params=_own_params(), help=RUN_HELP, models=run_models,
                          context_settings=CONTEXT_SETTINGS)


@click.pass_context
def run(ctx: click.Context, **params: Any) -> None:
    """The `jaxrun run` command (RUN_HELP)."""
    paths, quiet, report, json_output = params["paths"], params["quiet"], params["report"], params["json_output"]
    from ..batch.pipeline import run_batch
    from ..resultfiles import dump_model
    from ..startup_trace import mark

    mark("the flags parsed, the batch's modules imported")
    resolved = resolve_settings(ctx, paths)
    mark("options resolved (flags, config file, environment)")
    options = resolved.options
    quiet = _display(resolved, "quiet", quiet)
    report = _display(resolved, "report", report)

    # A live view only for a person at a terminal; logs, pipes, --quiet and --json get plain lines.
    live = sys.stderr.isatty() and not (quiet or json_output or options.run.verbose)
    if live:
        from .live import LiveProgress
    else:
        from .progress import LineProgress
    view = LiveProgress(err.console(), slots=options.jobs) if live else LineProgress(sys.stderr)
    launcher = (ctx.obj or {}).get("launcher")
    if launcher is None:
        from ..run.launcher import Launcher

        launcher = Launcher()
    if not json_output:
        launcher.when_started(_load_summary)  # while the first script runs, not after the last one
    # SIGTERM (a scheduler, `kill`) stops the batch as Ctrl-C does: running scripts stopped,
    # unfinished ones marked interrupted, valid files, exit 130.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        batch = run_batch(options, sinks=[view], launcher=launcher)
    except KeyboardInterrupt:
        err.print(f"jaxrun: interrupted; partial results are in {options.results_dir}", markup=False)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        if live:
            view.stop()
    if report:
        from ..reports import write_report

        try:
            written = write_report(options.results_dir)
        except JAXExecutionError as exc:
            raise fail_usage(str(exc)) from None
        err.print(f"report: {written}", markup=False)
    mark("the batch returned (results and files written)")
    if json_output:
        out.file.write(dump_model(batch))
        out.file.flush()
        raise click.exceptions.Exit(_exit_status(batch))
    status = _report_run(batch)
    mark("the summary printed")
    raise click.exceptions.Exit(status)


def command_line_values(ctx: click.Context) -> tuple[dict[str, Any], dict[str, str]]:
    """The options given on the command line (flags left out give nothing), with the flag that
    gave each; the script arguments after ``--`` (cli.main sets them aside)."""
    from .flags import given_options, run_models

    given, origins = given_options(ctx, run_models())
    script_args = (ctx.obj or {}).get("script_args")
    if script_args is not None:
        given["args"], origins["args"] = list(script_args), "arguments after --"
    return given, origins


def resolve_settings(ctx: click.Context, paths: Any) -> "Resolved":
    """Every layer of settings for ``jaxrun run`` (and ``jaxrun config``); usage errors exit 2."""
    from ..settings import resolve_batch_options

    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.exists():
            raise fail_usage(f"no such file or folder: {str(path)!r} — pass a folder of JAX scripts or a .py file")
    params = ctx.params
    config = False if params.get("no_config") else params.get("config")
    try:
        given, origins = command_line_values(ctx)
        return resolve_batch_options(paths, given, source="cli", origins=origins, config=config)
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
    from . import tables  # noqa: F401 - rich's tables: ~30 ms

    out.console()


def _report_run(batch) -> int:  # type: ignore[no-untyped-def]
    """Print the run's tables and return its exit status."""
    from .tables import benchmark_table, speedup_table, summary_table, warm_table

    out.print(summary_table(batch.script_results))
    _slowest_and_failed(batch.script_results)
    for result in batch.script_results:
        _warn(result.script_name, result.warnings)
    bench = batch.benchmarking
    if bench.enabled and bench.benchmarks:
        out.print(benchmark_table(bench.benchmarks))
        for b in bench.benchmarks:
            _warn(b.script_name, b.warnings)
    # A benchmarked result's .warm already pools the calls of all its runs.
    warm_rows = [(r.script_name, r.warm) for r in batch.script_results if r.warm is not None]
    for name, warm in warm_rows:
        _warn(name, warm.warnings)
    if warm_rows:
        out.print(warm_table(warm_rows))
    if bench.device_comparison:
        out.print(speedup_table(bench.device_comparison))
    regressions = _regressions(batch)
    meta = batch.metadata
    _warn("discovery", [f"skipped {path} (could not be read)" for path in meta.unreadable_paths])
    for skipped in meta.skipped:
        where = f" ({skipped.origin})" if skipped.origin else ""
        out.print(f"skipped: {skipped.script_name}: {skipped.reason}{where}", markup=False, soft_wrap=True)
    counts = [f"{meta.scripts_successful}/{meta.scripts_executed} succeeded"]
    counts += [f"{n} {word}" for n, word in ((meta.scripts_xfailed, "failed as expected (xfail)"),
                                             (meta.scripts_xpassed, "passed unexpectedly (xfail)"),
                                             (len(meta.skipped), "skipped")) if n]
    out.print(f"{', '.join(counts)}; results in {meta.results_dir}", markup=False)
    if regressions:
        err.print(f"jaxrun: regression against history: {', '.join(regressions)}", markup=False)
    from .profiling import print_profile_note  # --profile: where the traces are, how to open them
    print_profile_note(batch)
    return _exit_status(batch)


def _slowest_and_failed(results) -> None:  # type: ignore[no-untyped-def]
    """Under the table: where the time went (the slowest scripts) and what failed, with its hint."""
    timed = sorted((r for r in results if r.execution_time is not None), key=lambda r: -r.execution_time)
    if len(timed) > 1:
        out.print("slowest: " + ", ".join(f"{r.script_name} {r.execution_time:.2f} s" for r in timed[:3]),
                  markup=False, soft_wrap=True)
    for r in results:
        if r.outcome == "xfailed":
            out.print(f"xfail: {r.script_name}: {r.error_class}, as expected ({r.xfail})", markup=False, soft_wrap=True)
        elif r.outcome == "xpassed":
            out.print(f"XPASS: {r.script_name} passed but is marked xfail ({r.xfail}); remove the mark if it is fixed",
                      markup=False, soft_wrap=True)
        elif not r.success:
            out.print(f"failed: {r.script_name}: {r.error_class}: {r.error_message or ''}", markup=False, soft_wrap=True)
            if r.hint:
                out.print(f"  hint: {r.hint}", markup=False, soft_wrap=True)


def _regressions(batch) -> list[str]:  # type: ignore[no-untyped-def]
    return [b.script_name for b in batch.benchmarking.benchmarks
            if b.history_check is not None and b.history_check.regression]


def _exit_status(batch) -> int:  # type: ignore[no-untyped-def]
    return EXIT_OK if batch.success and not _regressions(batch) else EXIT_FAILED
