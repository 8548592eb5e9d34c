"""``jaxrun history`` and ``jaxrun compare``: the commands that read earlier results."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import click

from jaxrun.core.formatting import plural
from jaxrun.errors import JAXExecutionError
from jaxrun.interfaces.cli.console import EXIT_FAILED, EXIT_OK, err, fail_usage, out
from jaxrun.interfaces.cli.flags import (
    OptionsCommand,
    compared_models,
    history_models,
    judged_by,
    verdict_models,
)


def verdict_options() -> Any:
    """The VerdictOptions the command line gave (a UsageError for bad values)."""
    from jaxrun.interfaces.cli.flags import given_options

    (model,) = verdict_models()
    given, origins = given_options(click.get_current_context(), (model,))
    return model.build("cli", origins=origins, **given)


def _history_database(given: Optional[str]) -> Path:
    """The database ``jaxrun run`` here would write: ``--history``, else the config file's
    ``history``, ``JAXRUN_HISTORY`` or the default, resolved as every option is (``false`` is no
    history at all: one line saying where it was set)."""
    from jaxrun.config.settings import resolve_batch_options
    from jaxrun.core.paths import is_history_url

    if given is not None and is_history_url(given):  # a PostgreSQL history (judge/history_db.py): a server's, no file
        return given  # type: ignore[return-value]
    given_values = {} if given is None else {"history": given}
    options = resolve_batch_options([Path.cwd()], given_values, source="cli",
                                    origins={"history": "--history"} if given is not None else None).options
    if options.history is None:
        raise fail_usage(f"{options.named('history')} is false: no history is kept, so there is none to read; "
                         "give the database with --history PATH")
    return options.history


@click.command(cls=OptionsCommand, models=history_models, helps=judged_by("stats", own={
    "timeout": "With --confirm: seconds per run of a pair before it is stopped (none: no limit)."}))
@click.argument("script", required=False)
@click.option("--history", "history_path", metavar="PATH",
              help="History database: an SQLite file, or postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE "
                   "(jaxrun[postgres]; PGPASSWORD and ~/.pgpass work) (default: the history option of jaxrun.toml "
                   "or [tool.jaxrun], else $JAXRUN_HISTORY, else ./.jaxrun/history.sqlite).")
@click.option("--limit", type=int, metavar="N", help="Show only the newest N runs per script.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs and checks as JSON.")
@click.option("--check", "check_only", is_flag=True,
              help="Run SQLite's integrity check of the history database and print its findings (exit 1 when damaged).")
@click.option("--repair", is_flag=True,
              help="Save what can be read of a damaged history database into a new one; the old file is kept "
                   "as <file>.damaged-<time>.")
@click.option("--export", "export_path", metavar="FILE",
              help="Write every row of the history to FILE as JSON lines (a new file; - for stdout), for --import "
                   "into another history: an SQLite file moves to PostgreSQL and back.")
@click.option("--import", "import_path", metavar="FILE",
              help="Add the rows of a file --export wrote to the history (one transaction; a run it already holds, "
                   "by its key, is not added again).")
@click.option("--changes", is_flag=True,
              help="Where each script's series of runs changed level: change points over the runs' medians of the "
                   "metric (E-divisive means with Student's t-test; a series is one script, device, machine, mode and "
                   "numerics).")
@click.option("--since", metavar="DATE", help="With --changes: only runs recorded at or after DATE (2026-11-01, or a time).")
@click.option("--fail-on-change", type=click.IntRange(min=1), metavar="N",
              help="With --changes: exit 1 when a change is within the newest N runs of its series.")
@click.option("--markdown", "markdown_path", metavar="FILE",
              help="With --changes: also write the table as Markdown to FILE (and append it to $GITHUB_STEP_SUMMARY "
                   "when that is set), for a CI to post.")
def history(script: Optional[str], history_path: Optional[str], limit: Optional[int], as_json: bool,
            check_only: bool, repair: bool, export_path: Optional[str], import_path: Optional[str], changes: bool,
            since: Optional[str], fail_on_change: Optional[int], markdown_path: Optional[str], **verdict: Any) -> None:
    """Show the benchmark trend per script; flag the newest run when it is significantly slower
    than the earlier comparable runs (same script, device, host, machine and numerics; at least 3
    of them, else it is not judged). Exit 1 on a regression. With --changes: where each series
    changed level instead.

    SCRIPT: a script's path, name or path suffix; all scripts when omitted."""
    import sqlite3

    from jaxrun.interfaces.cli.tables import (
        history_cell,
        history_runs_table,
        history_scripts_table,
    )
    from jaxrun.judge.history import (
        HistoryStore,
        HistoryUnreadable,
    )
    from jaxrun.judge.verdicts import describe_gate
    from jaxrun.present.view import label_from_name

    path = _history_database(history_path)
    if check_only or repair:
        _check_or_repair(path, repair)
    if export_path is not None or import_path is not None:
        if export_path is not None and import_path is not None:
            raise fail_usage("give --export or --import, not both")
        if script is not None or changes or limit is not None or as_json:
            raise fail_usage("--export and --import move the whole history: give them without SCRIPT, --changes, "
                             "--limit or --json")
        _move(path, export_path, import_path)
    confirming = _confirm_options()
    if (since is not None or fail_on_change is not None or markdown_path is not None
            or confirming is not None) and not changes:
        raise fail_usage("--since, --fail-on-change, --markdown and --confirm go with --changes")
    if changes:
        _changes(path, script, since, fail_on_change, as_json, None if markdown_path is None else Path(markdown_path),
                 confirming)
    try:
        options = verdict_options()
        with HistoryStore(path, create=False) as store:
            if script is not None and not store.match_scripts(script):
                known = ", ".join(label_from_name(s.script_path, s.script_name) for s in store.scripts()) \
                    or "none (jaxrun run SCRIPT --benchmark-runs N)"
                raise fail_usage(f"no benchmarked runs of {script!r} in the history {str(store.path)!r}; "
                                 f"scripts benchmarked there: {known}")
            checks = store.check_latest(script, options)
            paths = store.match_scripts(script) if script is not None else [s.script_path for s in store.scripts()]
            runs_by_path = {path: store.runs(path, limit=limit) for path in paths}
            # Each run shown keeps the check it had when it was the newest: against its own earlier runs.
            run_checks = {int(r.id): store.check_regression(int(r.id), options)
                          for runs in runs_by_path.values() for r in runs if r.id}
            programs = store.programs_of_runs([int(r.id) for runs in runs_by_path.values() for r in runs if r.id])
            summary = store.scripts()
    except sqlite3.Error as exc:  # the file opened, a page of it is damaged
        raise fail_usage(str(HistoryUnreadable(path, exc))) from None
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    regressions = [c for c in checks if c.regression]
    if as_json:
        import json

        document = {
            "runs": {p: [r.model_dump(mode="json") for r in runs] for p, runs in runs_by_path.items()},
            "checks": [c.model_dump(mode="json") for c in checks],
            "run_checks": {str(run_id): c.model_dump(mode="json") for run_id, c in run_checks.items()},
            "program_changes": {str(run_id): [c.model_dump(mode="json") for c in changes]
                                for run_id, changes in _program_changes(runs_by_path, programs).items()},
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        raise click.exceptions.Exit(EXIT_FAILED if regressions else EXIT_OK)
    if script is None:
        out.print(history_scripts_table(summary))
    flags = {run_id: history_cell(c) for run_id, c in run_checks.items()}
    import statistics

    from jaxrun.judge.benchmark_runs import metric_values
    from jaxrun.judge.compare import compile_text

    shown = options.metric or "run_time"
    for path, runs in runs_by_path.items():
        medians = []
        for run in runs:
            values = metric_values(run.samples, shown)
            medians.append(statistics.median(values) if values else None)
        name = label_from_name(path, runs[-1].script_name) if runs else path
        out.print(history_runs_table(f"{name}: {shown} per run ({path})", runs, medians, flags, shown))
        for run_id, changes in _program_changes({path: runs}, programs).items():
            for c in changes:
                said = c.change or f"unknown whether it is the same program ({c.reason})"
                out.print(f"run {run_id}: {c.program} "
                          f"{compile_text(c.base_compile_time, c.base_count, c.base_cache_loads, c.base_cache_load_time)} -> "
                          f"{compile_text(c.new_compile_time, c.new_count, c.new_cache_loads, c.new_cache_load_time)} "
                          f"since the run before: {said}",
                          markup=False, soft_wrap=True)
    for check in regressions:
        assert check.comparison is not None
        runs = runs_by_path.get(check.script_path)
        name = label_from_name(check.script_path, runs[-1].script_name) if runs else Path(check.script_path).name
        out.print(
            f"regression: {name} on {check.device} is slower than its "
            f"{plural(check.previous_runs, 'earlier run')}: {describe_gate(check.comparison)}",
            markup=False,
        )
    raise click.exceptions.Exit(EXIT_FAILED if regressions else EXIT_OK)


def _confirm_options() -> Any:
    """``--confirm``'s options (config/ab_options.py's ConfirmOptions), None without ``--confirm``;
    one line for its other options given without it."""
    from jaxrun.config.ab_options import ConfirmOptions
    from jaxrun.config.options import VerdictOptions
    from jaxrun.interfaces.cli.flags import given_options

    values, _ = given_options(click.get_current_context(), history_models())
    for name in VerdictOptions.fields:
        values.pop(name, None)
    if not values.pop("confirm", False):
        if values:
            flags = ", ".join(f"--{name.replace('_', '-')}" for name in values)
            raise fail_usage(f"{flags} go{'es' if len(values) == 1 else ''} with --confirm (--changes --confirm: "
                             "re-run each change point as pairs of its two commits)")
        return None
    try:
        return ConfirmOptions.gathered({"confirm": True, **values}, verdict_options())
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None


def _changes(path: Path, script: Optional[str], since: Optional[str], fail_on_change: Optional[int],
             as_json: bool, markdown: Optional[Path], confirming: Any = None) -> None:
    """``jaxrun history --changes``: the table (or JSON; and Markdown to ``markdown``) of every
    series' change points, each re-run as pairs of its two commits with ``--confirm``
    (``confirming``: its options); exit 1 with ``--fail-on-change N`` when one is within the
    newest N runs of its series and alarms (present/view/changes_view.alarms: not refuted, a
    candidate only once confirmed)."""
    import sqlite3

    from jaxrun.core.validate import validate_since
    from jaxrun.interfaces.cli.tables import history_changes_table, history_series_table
    from jaxrun.judge.history import HistoryStore, HistoryUnreadable
    from jaxrun.judge.history_changes import recent
    from jaxrun.judge.history_db import shown_location
    from jaxrun.outputs.markdown import render_changes_markdown, write_markdown
    from jaxrun.present.view.changes_view import (
        SERIES_HEADING,
        alarms,
        changes_heading,
        no_change_line,
    )
    from jaxrun.results.result_files import check_output_file

    if markdown is not None:
        try:
            check_output_file(markdown, "the Markdown table (--markdown)")
        except JAXExecutionError as exc:
            raise fail_usage(str(exc)) from None

    options = verdict_options()
    metric = options.metric or "run_time"
    try:
        since = None if since is None else validate_since(since)
        with HistoryStore(path, create=False) as store:
            if script is not None and not store.match_scripts(script):
                raise fail_usage(f"no benchmarked runs of {script!r} in the history {str(store.path)!r}")
            series = store.series(script, metric=metric, since=since)
            found = [change for each in series for change in each.changes]
            if confirming is not None and found:
                found = _confirmed(store, found, confirming)
    except sqlite3.Error as exc:
        raise fail_usage(str(HistoryUnreadable(path, exc))) from None
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    summaries = [each.summary for each in series]
    alarming = [c for c in found if fail_on_change is not None and recent(c, fail_on_change) and alarms(c)]
    if markdown is not None or os.environ.get("GITHUB_STEP_SUMMARY"):
        write_markdown(markdown, render_changes_markdown(found, summaries, metric, shown_location(path), since))
    if as_json:
        import json

        sys.stdout.write(json.dumps({"metric": metric, "changes": [c.model_dump(mode="json") for c in found],
                                    "series": [s.model_dump(mode="json") for s in summaries]}, indent=2) + "\n")
    else:
        if found:
            out.print(history_changes_table(changes_heading(metric, shown_location(path), since), found))
        else:
            out.print(no_change_line(metric, shown_location(path), since), markup=False, soft_wrap=True)
        if summaries:
            out.print(history_series_table(SERIES_HEADING, summaries))
    if alarming and not as_json:
        out.print(f"{plural(len(alarming), 'change')} within the newest {plural(fail_on_change or 0, 'run')} "
                  "of its series (--fail-on-change)", markup=False)
    raise click.exceptions.Exit(EXIT_FAILED if alarming else EXIT_OK)


def _confirmed(store: Any, found: list[Any], options: Any) -> list[Any]:
    """``found`` with each change's confirmation (ab/confirm.py), a line on stderr for each run and
    each verdict."""
    from jaxrun.ab.confirm import confirm_changes
    from jaxrun.interfaces.cli.console import err, pair_progress
    from jaxrun.present.view.changes_view import check_text, run_mark

    def on_check(change: Any, check: Any) -> None:
        err.print(f"[confirm] {change.script_name}, {run_mark(change.last_before)} -> {run_mark(change.first_after)}: "
                  f"{check_text(check)}", markup=False, soft_wrap=True)

    return confirm_changes(store, found, options, on_check=on_check, on_run=pair_progress(False, "confirm"))


def _program_changes(runs_by_path: dict[str, list[Any]], programs: dict[int, dict[str, Any]]) -> dict[int, list[Any]]:
    """Per run (its id): its programs whose compile time moved (more than 20% and 10 ms) since the
    script's run before it, each with whether it is the same program (compare.compare_programs)."""
    from jaxrun.judge.compare import compare_programs

    changes: dict[int, list[Any]] = {}
    for runs in runs_by_path.values():
        for before, now in zip(runs, runs[1:]):
            found = compare_programs(programs.get(int(before.id or 0)), programs.get(int(now.id or 0)))
            if found:
                changes[int(now.id or 0)] = found
    return changes


def _move(path: Path, export_path: Optional[str], import_path: Optional[str]) -> None:
    """``jaxrun history --export FILE`` and ``--import FILE`` (judge/history_transfer.py)."""
    import sqlite3

    from jaxrun.judge.history import HistoryStore, HistoryUnreadable
    from jaxrun.judge.history_transfer import rows_said
    from jaxrun.results.result_files import check_output_file

    try:
        if export_path is not None:
            target = Path(export_path)
            if export_path != "-":
                check_output_file(target, "the export (--export)")
                if os.path.lexists(target):
                    raise _exists(target)
            with HistoryStore(path, create=False) as store:
                if export_path == "-":
                    store.export(sys.stdout)
                    raise click.exceptions.Exit(EXIT_OK)
                counts = _write_new(target, store.export)
            err.print(f"exported {rows_said(counts)} of {str(store.path)!r} to {export_path}", markup=False, soft_wrap=True)
        else:
            source = Path(import_path or "")
            try:
                lines = source.open(encoding="utf-8", errors="strict")
            except OSError as exc:
                raise fail_usage(f"cannot read {str(source)!r}: {exc.strerror or exc}") from None
            with lines, HistoryStore(path) as store:
                done = store.import_rows(lines, str(source))
            held = {t: n for t, n in done.already_held.items() if n}
            err.print(f"imported into {str(store.path)!r}: added {rows_said(done.added)}"
                      + (f"; already held, not added: {rows_said(held)}" if held else ""), markup=False, soft_wrap=True)
            if done.left_out:
                err.print(f"left out, no such column in this history: {', '.join(done.left_out)}", markup=False,
                          soft_wrap=True)
    except UnicodeDecodeError as exc:
        raise fail_usage(f"{import_path!r} is not UTF-8 text ({exc.reason}); give a file `jaxrun history --export` "
                         "wrote") from None
    except sqlite3.Error as exc:
        raise fail_usage(str(HistoryUnreadable(path, exc))) from None
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    raise click.exceptions.Exit(EXIT_OK)


def _exists(path: Path) -> click.exceptions.Exit:
    return fail_usage(f"{str(path)!r} exists; --export writes a new file, never over one: give another name")


def _write_new(path: Path, fill: Any) -> Any:
    """``fill(file)`` into a temporary file of its own beside ``path``, then linked as ``path``: a
    reader never sees half of it, and a file made there meanwhile is not written over. It gets
    the mode of any file the user writes, not mkstemp's 0600 (result_files.FILE_MODE)."""
    import tempfile

    from jaxrun.results.result_files import FILE_MODE

    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise fail_usage(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        os.fchmod(handle, FILE_MODE)
        with open(handle, "w", encoding="utf-8") as file:
            done = fill(file)
        os.link(temporary, path)
    except FileExistsError:
        raise _exists(path) from None
    except OSError as exc:
        raise fail_usage(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        os.unlink(temporary)
    return done


def _check_or_repair(path: Path, repair: bool) -> None:
    """``jaxrun history --check`` (exit 0 sound, 1 damaged) and ``--repair``."""
    from jaxrun.core.paths import is_history_url

    if is_history_url(path):
        raise fail_usage("--check and --repair read an SQLite file; a PostgreSQL server checks its own databases "
                         "(pg_amcheck)")
    from jaxrun.judge.history_repair import integrity_check
    from jaxrun.judge.history_repair import repair as save_readable

    try:
        findings = integrity_check(path)
        if not findings:
            what = "nothing to repair" if repair else "no problem found"
            out.print(f"history database {str(path)!r}: SQLite's integrity check: ok ({what})", markup=False, soft_wrap=True)
            raise click.exceptions.Exit(EXIT_OK)
        if not repair:
            out.print(f"history database {str(path)!r} is damaged; SQLite's integrity check found:", markup=False,
                      soft_wrap=True)
            for line in findings:
                out.print(f"  {line}", markup=False, soft_wrap=True)
            out.print("`jaxrun history --repair` saves what can be read into a new file, keeping this one",
                      markup=False, soft_wrap=True)
            raise click.exceptions.Exit(EXIT_FAILED)
        saved = save_readable(path)
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    except OSError as exc:
        raise fail_usage(f"cannot repair {str(path)!r}: {exc.strerror or exc}") from None
    for lost in saved.unreadable:
        out.print(f"could not be read: {lost}", markup=False, soft_wrap=True)
    out.print(f"saved {plural(saved.runs, 'run')} with {plural(saved.samples, 'sample')} into a new {str(saved.path)!r}; "
              f"the damaged file is kept as {str(saved.damaged)!r}", markup=False, soft_wrap=True)
    raise click.exceptions.Exit(EXIT_OK)


@click.command(cls=OptionsCommand, models=compared_models, helps=judged_by("stats", exports=True))
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when a script is significantly slower, or could not be judged for other numerics.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--quiet", "-q", is_flag=True,
              help="No table: one line per script whose verdict is not 'no significant change', then a summary line.")
def compare(base: Path, new: Path, fail_on_regression: bool, as_json: bool, quiet: bool, markdown: Optional[Path] = None,
            export_json: Optional[Path] = None, export_csv: Optional[Path] = None, **verdict: Any) -> None:
    """Compare two runs script by script and phase by phase (wall, import, compile, run, memory):
    ratio of medians with a CI, Mann-Whitney U p-value and a verdict (faster / slower / no
    significant change) that needs both p < alpha and the minimum effect; too few runs to judge
    when the runs are too few for any test to reach p < alpha (3 against 3: at least 0.1). A script is slower when
    its run or compile time is (or --metric's). Usable as a CI gate with --fail-on-regression.

    BASE and NEW: results folders (or their JSON files) of the baseline run and of the run to judge."""
    from jaxrun.judge.compare import compare_results, exit_reasons, program_sections

    try:
        check_exports(export_json, export_csv, markdown)
        options = verdict_options()
        report = compare_results(base, new, options, fail_on_regression=fail_on_regression)
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    _export_comparison(report, base, new, export_json, export_csv, markdown)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    elif quiet:
        for line in quiet_comparison(report, options.allow_mismatch):
            out.print(line, markup=False, soft_wrap=True)
    else:
        print_comparison(report, program_sections(report), options.allow_mismatch)
    raise click.exceptions.Exit(EXIT_FAILED if exit_reasons(report) else EXIT_OK)


def print_comparison(report: Any, programs: list[tuple[str, list[str]]], allow_mismatch: bool) -> None:
    """The comparison as `jaxrun compare` and `jaxrun ab` print it: the table, a line per program
    under the heading true of it (compare.program_sections), what is on one side only, the
    geometric means, what got slower or faster, what was too few."""
    from jaxrun.interfaces.cli.tables import compare_table

    out.print(compare_table(report))
    for heading, lines in programs:
        out.print(f"{heading[0].lower()}{heading[1:]}:", markup=False, soft_wrap=True)
        for line in lines:
            out.print(f"  {line}", markup=False, soft_wrap=True)
    for side, names in (("only in BASE", report.only_in_base), ("only in NEW", report.only_in_new)):
        if names:
            out.print(f"{side}: {', '.join(names)}", markup=False)
    means = [f"{m} {r:.3f}" for m, r in report.geometric_mean_ratio.items() if r is not None]
    if means:
        out.print(f"geometric mean of ratios (NEW/BASE): {', '.join(means)}", markup=False)
    if report.regressions:
        out.print(f"significantly slower: {', '.join(report.shown(report.regressions))}", markup=False)
    if report.improvements:
        out.print(f"significantly faster: {', '.join(report.shown(report.improvements))}", markup=False)
    _print_too_few(report)
    if report.machine_mismatch:
        out.print(f"BASE and NEW ran on different machines, compared anyway (--allow-mismatch): "
                  f"{'; '.join(report.machine_mismatch)}", markup=False, soft_wrap=True)
    if report.numerics_mismatch:
        verb = "judged anyway (--allow-mismatch)" if allow_mismatch else "not judged; pass --allow-mismatch to judge them"
        out.print(f"other numerics in BASE and NEW: {', '.join(report.numerics_mismatch)}: {verb}", markup=False)


def _phase_figures(phase: Any) -> str:
    """``run_time 1.320x (95% CI 1.250-1.400, p=0.0012)``"""
    from jaxrun.interfaces.cli.tables import fmt_p

    if phase.ratio is None:
        return phase.metric
    ci = "" if phase.ratio_ci_low is None else f"95% CI {phase.ratio_ci_low:.3f}-{phase.ratio_ci_high:.3f}, "
    return f"{phase.metric} {phase.ratio:.3f}x ({ci}p={fmt_p(phase.p_value)})"


def quiet_comparison(report: Any, allow_mismatch: bool) -> list[str]:
    """`jaxrun compare -q`: a line for each script whose verdict is not 'no significant change'
    (the gate phases that decided it, or why it could not be judged), then one summary line."""
    from jaxrun.judge.verdicts import runs_needed, too_few_note
    from jaxrun.results.comparisons import TOO_FEW

    lines = []
    for c in report.scripts:
        if c.verdict == "no significant change":
            continue
        name = (c.path or c.script_name) + (f" ({c.device})" if c.device else "")
        decided = [p for m, p in c.phases.items() if m in c.gate and p.verdict == c.verdict]
        if c.verdict in ("slower", "faster"):
            detail = ", ".join(_phase_figures(p) for p in decided)
        elif c.verdict == TOO_FEW:
            detail = runs_needed(c) or too_few_note(c) or ""
        else:
            detail = c.note or ""
        lines.append(f"{name}: {c.verdict}" + (f": {detail}" if detail else ""))
    counts: dict[str, int] = {}
    for c in report.scripts:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    summary = f"{plural(len(report.scripts), 'script')} compared: " + ", ".join(
        f"{counts.get(v, 0)} {v}" for v in ("slower", "faster", "no significant change"))
    for verdict in (TOO_FEW, "not comparable"):
        if counts.get(verdict):
            summary += f", {counts[verdict]} {verdict}"
    means = [f"{m} {r:.3f}" for m, r in report.geometric_mean_ratio.items() if r is not None and m in report.gate]
    if means:
        summary += f"; geometric mean of ratios (NEW/BASE): {', '.join(means)}"
    for side, names in (("only in BASE", report.only_in_base), ("only in NEW", report.only_in_new)):
        if names:
            summary += f"; {side}: {', '.join(names)}"
    if report.numerics_mismatch:
        verb = "judged anyway" if allow_mismatch else "not judged (--allow-mismatch)"
        summary += f"; other numerics: {', '.join(report.numerics_mismatch)}, {verb}"
    return [*lines, summary]


def _print_too_few(report: Any) -> None:
    """The scripts whose gate had too few runs for any test to be significant: not regressions, and
    not "no significant change" either; with the runs each side needs."""
    from jaxrun.judge.verdicts import runs_needed
    from jaxrun.results.comparisons import TOO_FEW

    rows = [c for c in report.scripts if c.verdict == TOO_FEW]
    if rows:
        need = runs_needed(rows[0]) or "more runs"
        out.print(f"too few runs to judge (not a regression): {', '.join(c.path or c.script_name for c in rows)}; "
                  f"{need} ({'--pairs' if getattr(report, 'paired', False) else '--benchmark-runs'})", markup=False)


def check_exports(as_json: Path | None, as_csv: Path | None, as_markdown: Path | None) -> None:
    """Refuse, before anything is read or run, an export of `compare` or `ab` that could not be
    written (the check `jaxrun run` makes of its own files: resultfiles.check_output_file)."""
    from jaxrun.results.result_files import check_output_file

    for path, flag in ((as_json, "--export-json"), (as_csv, "--export-csv"), (as_markdown, "--markdown")):
        if path is not None:
            check_output_file(path, f"the export ({flag})")


def _export_comparison(report, base: Path, new: Path, as_json: Path | None, as_csv: Path | None,  # type: ignore[no-untyped-def]
                       as_markdown: Path | None) -> None:
    from jaxrun.outputs.exports import (
        comparison_csv,
        comparison_export,
        comparison_markdown,
        write_json,
    )
    from jaxrun.results.result_files import atomic_write_text

    try:
        if as_json is not None:
            write_json(as_json, comparison_export(report, base, new))
        if as_csv is not None:
            atomic_write_text(as_csv, comparison_csv(report))
        if as_markdown is not None:
            atomic_write_text(as_markdown, comparison_markdown(report))
    except OSError as exc:
        raise fail_usage(f"cannot write the export {exc.filename!r}: {exc.strerror or exc}") from None


@click.command()
@click.argument("results_dir", type=click.Path(path_type=Path), required=False)
@click.option("--output", "-o", type=click.Path(path_type=Path), metavar="FILE",
              help="Where to write the HTML file (default RESULTS_DIR/report.html; with --history, ./jaxrun_history.html).")
@click.option("--baseline", type=click.Path(path_type=Path), metavar="DIR",
              help="Another results folder (or results JSON) to compare against.")
@click.option("--history", "history_path", is_flag=False, flag_value="", default=None, metavar="[PATH]",
              help="Instead of a results folder: a page of the history over commits (default database: as jaxrun "
                   "history finds it): per series each run's median with its 95% CI, the level between change points, "
                   "each change point with its commit and confirmation, and a table of the latest changes.")
@click.option("--metric", metavar="METRIC", default="run_time", show_default=True,
              help="With --history: the metric drawn and cut into change points.")
@click.option("--since", metavar="DATE", help="With --history: only runs recorded at or after DATE.")
def report(results_dir: Optional[Path], output: Optional[Path], baseline: Optional[Path], history_path: Optional[str],
           metric: str, since: Optional[str]) -> None:
    """Write one self-contained HTML report of a run (no network needed to view it): summary,
    sortable table, time per phase, memory, benchmark distributions, the comparison with a
    baseline, recompile reasons and failures with their logs. With --history: a page of the
    history's series over commits instead.

    RESULTS_DIR: a results folder written by jaxrun run."""
    source = click.get_current_context().get_parameter_source
    history_only = [f"--{name}" for name in ("metric", "since") if source(name) == click.core.ParameterSource.COMMANDLINE]
    if history_path is not None:
        if results_dir is not None or baseline is not None:
            raise fail_usage("--history writes a page of the history, not of a results folder: leave RESULTS_DIR "
                             "and --baseline out")
        from jaxrun.core.validate import validate_since
        from jaxrun.present.reports.history_page import (
            HISTORY_PAGE_FILE,
            write_history_page,
        )

        database = _history_database(history_path or None)
        try:
            since = None if since is None else validate_since(since)
            path = write_history_page(database, output or Path(HISTORY_PAGE_FILE), metric=metric, since=since)
        except JAXExecutionError as exc:
            raise fail_usage(str(exc)) from None
        out.print(f"history page written to {path}", markup=False, soft_wrap=True)
        return
    if history_only:
        raise fail_usage(f"{' and '.join(history_only)} go{'es' if len(history_only) == 1 else ''} with --history")
    if results_dir is None:
        raise fail_usage("give a results folder (jaxrun report RESULTS_DIR), or --history for the history's page")
    from jaxrun.present.reports import write_report

    try:
        path = write_report(results_dir, output, baseline)
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    out.print(f"report written to {path}", markup=False)
