"""``jaxrun history`` and ``jaxrun compare``: the commands that read earlier results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import JAXExecutionError
from .console import EXIT_FAILED, EXIT_OK, fail_usage, out

_METRIC_HELP = (
    "The one metric that decides a regression: wall_time, body_time, import_time, compile_time, run_time "
    "or memory_peak. Default: run_time and compile_time (the code's own phases); every phase is judged."
)


def history(
    script: Optional[str] = typer.Argument(None, help="Script path, name or path suffix; all scripts when omitted."),
    history_path: Optional[Path] = typer.Option(None, "--history", envvar="JAXRUN_HISTORY", help="History database (default ./.jaxrun/history.sqlite)."),
    metric: Optional[str] = typer.Option(None, help=_METRIC_HELP),
    alpha: float = typer.Option(0.01, help="Significance level of the Mann-Whitney U test."),
    min_effect: str = typer.Option("5%", "--min-effect", help="Smallest slowdown that counts, e.g. 5% or 0.05."),
    limit: Optional[int] = typer.Option(None, help="Show only the newest N runs per script."),
    allow_mismatch: bool = typer.Option(False, "--allow-mismatch", help="Judge the newest run against earlier runs with other numerics too."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs and checks as JSON."),
) -> None:
    """Show the benchmark trend per script; flag the newest run when it is significantly slower
    than the earlier comparable runs (same script, device and host). Exit 1 on a regression."""
    from ..compare import parse_effect
    from ..history import HistoryStore, default_history_path
    from ..stats import check_verdict_options
    from ..verdicts import describe_gate
    from .tables import history_cell, history_runs_table, history_scripts_table

    try:
        effect = parse_effect(min_effect)
        check_verdict_options(alpha, effect)
        options = {"metric": metric, "alpha": alpha, "min_effect": effect, "allow_mismatch": allow_mismatch}
        with HistoryStore(history_path or default_history_path(), create=False) as store:
            if script is not None and not store.match_scripts(script):
                known = ", ".join(s.script_name for s in store.scripts()) or "none"
                raise fail_usage(f"no runs of {script!r} in the history {str(store.path)!r}; scripts there: {known}")
            checks = store.check_latest(script, **options)
            paths = store.match_scripts(script) if script is not None else [s.script_path for s in store.scripts()]
            runs_by_path = {path: store.runs(path, limit=limit) for path in paths}
            summary = store.scripts()
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    regressions = [c for c in checks if c.regression]
    if as_json:
        import json

        document = {
            "runs": {p: [r.model_dump(mode="json") for r in runs] for p, runs in runs_by_path.items()},
            "checks": [c.model_dump(mode="json") for c in checks],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        raise typer.Exit(EXIT_FAILED if regressions else EXIT_OK)
    if script is None:
        out.print(history_scripts_table(summary))
    flags = {c.newest_run_id: history_cell(c) for c in checks}
    from ..benchmark import metric_values, resolve_metric

    import statistics

    shown = resolve_metric(metric) if metric else "run_time"
    for path, runs in runs_by_path.items():
        medians = []
        for run in runs:
            values = metric_values(run.samples, shown)
            medians.append(statistics.median(values) if values else None)
        name = runs[-1].script_name if runs else path
        out.print(history_runs_table(f"{name}: {shown} per run ({path})", runs, medians, flags))
    for check in regressions:
        assert check.comparison is not None
        out.print(
            f"regression: {Path(check.script_path).name} on {check.device} is slower than its "
            f"{check.previous_runs} earlier run(s): {describe_gate(check.comparison)}",
            markup=False,
        )
    raise typer.Exit(EXIT_FAILED if regressions else EXIT_OK)


def compare(
    base: Path = typer.Argument(..., help="Results folder or JSON file of the baseline run."),
    new: Path = typer.Argument(..., help="Results folder or JSON file of the run to judge."),
    metric: Optional[str] = typer.Option(None, help=_METRIC_HELP),
    alpha: float = typer.Option(0.01, help="Significance level of the Mann-Whitney U test."),
    min_effect: str = typer.Option("5%", "--min-effect", help="Smallest change that counts, e.g. 5% or 0.05."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 when a script is significantly slower, or could not be judged for other numerics."),
    allow_mismatch: bool = typer.Option(False, "--allow-mismatch", help="Judge scripts whose runs had other numerics (x64, matmul precision, debug or XLA flags) too."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    export_json: Optional[Path] = typer.Option(None, "--export-json", help="Also write the comparison with both sides' raw samples as JSON."),
    export_csv: Optional[Path] = typer.Option(None, "--export-csv", help="Also write one CSV row per script and phase."),
    export_markdown: Optional[Path] = typer.Option(None, "--export-markdown", help="Also write the comparison as a Markdown table."),
) -> None:
    """Compare two runs script by script and phase by phase (wall, import, compile, run, memory):
    ratio of medians with a CI, Mann-Whitney U p-value and a verdict (faster / slower / no
    significant change) that needs both p < alpha and the minimum effect. A script is slower when
    its run or compile time is (or --metric's). Usable as a CI gate with --fail-on-regression."""
    from ..compare import compare_results, parse_effect
    from .tables import compare_table

    try:
        report = compare_results(base, new, metric=metric, alpha=alpha, min_effect=parse_effect(min_effect),
                                 allow_mismatch=allow_mismatch)
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    _export_comparison(report, base, new, export_json, export_csv, export_markdown)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        out.print(compare_table(report))
        for side, names in (("only in BASE", report.only_in_base), ("only in NEW", report.only_in_new)):
            if names:
                out.print(f"{side}: {', '.join(names)}", markup=False)
        means = [f"{m} {r:.3f}" for m, r in report.geometric_mean_ratio.items() if r is not None]
        if means:
            out.print(f"geometric mean of ratios (NEW/BASE): {', '.join(means)}", markup=False)
        if report.regressions:
            out.print(f"significantly slower: {', '.join(report.regressions)}", markup=False)
        if report.improvements:
            out.print(f"significantly faster: {', '.join(report.improvements)}", markup=False)
        if report.numerics_mismatch:
            verb = "judged anyway (--allow-mismatch)" if allow_mismatch else "not judged; pass --allow-mismatch to judge them"
            out.print(f"other numerics in BASE and NEW: {', '.join(report.numerics_mismatch)}: {verb}", markup=False)
    refused = report.numerics_mismatch and not allow_mismatch
    raise typer.Exit(EXIT_FAILED if fail_on_regression and (report.regressions or refused) else EXIT_OK)


def _export_comparison(report, base: Path, new: Path, as_json: Path | None, as_csv: Path | None,  # type: ignore[no-untyped-def]
                       as_markdown: Path | None) -> None:
    from ..resultfiles import atomic_write_text
    from ..sinks.exports import comparison_csv, comparison_export, comparison_markdown, write_json

    try:
        if as_json is not None:
            write_json(as_json, comparison_export(report, base, new))
        if as_csv is not None:
            atomic_write_text(as_csv, comparison_csv(report))
        if as_markdown is not None:
            atomic_write_text(as_markdown, comparison_markdown(report))
    except OSError as exc:
        raise fail_usage(f"cannot write the export {exc.filename!r}: {exc.strerror or exc}") from None


def report(
    results_dir: Path = typer.Argument(..., help="A results folder written by jaxrun run."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Where to write the HTML file (default RESULTS_DIR/report.html)."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Another results folder (or results JSON) to compare against."),
) -> None:
    """Write one self-contained HTML report of a run (no network needed to view it): summary,
    sortable table, time per phase, memory, benchmark distributions, the comparison with a
    baseline, recompile reasons and failures with their logs."""
    from ..reports import write_report

    try:
        path = write_report(results_dir, output, baseline)
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    out.print(f"report written to {path}", markup=False)
