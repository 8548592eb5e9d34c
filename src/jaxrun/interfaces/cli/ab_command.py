"""``jaxrun ab`` and ``jaxrun bisect``: interleaved A/B comparisons (jaxrun/ab) on the terminal."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import click

from jaxrun.errors import JAXExecutionError
from jaxrun.interfaces.cli.console import (
    EXIT_FAILED,
    EXIT_OK,
    fail_usage,
    out,
    pair_progress,
)
from jaxrun.interfaces.cli.flags import (
    COMPARISON_EXPORTS,
    OptionsCommand,
    ab_models,
    bisect_models,
    given_options,
    judged_by,
)


def _options(models: Any) -> tuple[Any, dict[str, Any]]:
    """The options the command line gave, made into the command's set (config/ab_options.py: the
    last of ``models``; checked there, once), and the export files asked for (`jaxrun ab`'s)."""
    from jaxrun.config.options import VerdictOptions
    from jaxrun.interfaces.cli.analysis import verdict_options

    *_, kind = models
    values, _ = given_options(click.get_current_context(), models)
    exports = {name: values.pop(name, None) for name in COMPARISON_EXPORTS}
    for name in VerdictOptions.fields:
        values.pop(name, None)  # made into the verdict, with where each came from
    return kind.gathered(values, verdict_options()), exports


def program_phase_line(script: str, p: Any) -> str:
    """``a.py: jit(step) compile 0.800 s -> 1.620 s (x2.03), trace 0.010 -> 0.011 s, lower ..., count 1 -> 1: same program``"""
    ratio = f" (x{p.compile_ratio:.2f})" if p.compile_ratio is not None else ""
    parts = [f"compile {p.base_compile_time:.3f} s -> {p.new_compile_time:.3f} s{ratio}"]
    for name, before, after in (("trace", p.base_trace_time, p.new_trace_time),
                                ("lower", p.base_lower_time, p.new_lower_time)):
        if before is not None and after is not None:
            parts.append(f"{name} {before:.3f} -> {after:.3f} s")
    parts.append(f"count {p.base_count} -> {p.new_count}")
    if p.base_cache_loads or p.new_cache_loads:  # loaded, not compiled: not in the compile time
        parts.append(f"loaded from the persistent cache {p.base_cache_loads} -> {p.new_cache_loads}")
    said = p.change or f"unknown whether it is the same program ({p.reason})"
    return f"{script}: {p.program} {', '.join(parts)}: {said}"


@click.command(cls=OptionsCommand, models=ab_models, helps=judged_by("paired", exports=True))
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path), required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (progress stays on stderr).")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
def ab(base: Path, new: Optional[Path], as_json: bool, quiet: bool, **given: Any) -> None:
    """Run each script of BASE and NEW in pairs, both runs of a pair at once on two halves of the
    machine (a duet; alternating pairs, BASE NEW then NEW BASE, where it cannot be split fairly or
    with --alternate) and judge NEW on the per-pair ratios: drift of the machine's load hits both
    runs of a pair alike, so it cannot pass for a change. Per phase: the paired ratio with its 95% CI, the Wilcoxon signed-rank
    p-value and a verdict gated like `jaxrun compare`'s; per program: trace, lower and compile time
    on both sides. Every run compiles (no persistent cache).

    BASE and NEW: two folders; or one folder (or script) with --base-rev/--new-rev (two revisions
    of its git repository) or --base-python/--new-python (two Python environments)."""
    from jaxrun.ab import run_ab
    from jaxrun.interfaces.cli.analysis import (
        _export_comparison,
        check_exports,
        print_comparison,
    )
    from jaxrun.judge.compare import exit_reasons, program_sections

    try:
        options, exports = _options(ab_models())
        markdown, export_json, export_csv = exports["markdown"], exports["export_json"], exports["export_csv"]
        check_exports(export_json, export_csv, markdown)
        results_dir = options.results_dir
        report = run_ab(base, new, results_dir, options, on_run=pair_progress(quiet))
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    _export_comparison(report, results_dir / "base", results_dir / "new", export_json, export_csv, markdown)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        for label, side in report.sides.items():
            versions = f", jax {side.jax_version}" if side.jax_version else ""
            out.print(f"{label}: {side.given}{f' (commit {side.commit[:12]})' if side.commit else ''}{versions}",
                      markup=False, soft_wrap=True)
        if report.duet:
            halves = " and ".join(",".join(map(str, h.cpus)) + (f" (GPU {','.join(map(str, h.gpus))})" if h.gpus else "")
                                  for h in report.duet)
            out.print(f"duet: BASE and NEW at the same time on CPUs {halves}, swapped every pair (times are a half "
                      "machine's: only the ratios are meant)", markup=False, soft_wrap=True)
        elif report.alternating_reason:
            out.print(f"alternating pairs: {report.alternating_reason}", markup=False, soft_wrap=True)
        print_comparison(report, program_sections(report, program_phase_line), options.verdict.allow_mismatch)
        out.print(f"comparison: {results_dir / 'ab_comparison.json'}; each side's runs in {results_dir / 'base'} and "
                  f"{results_dir / 'new'} (jaxrun report {results_dir})", markup=False, soft_wrap=True)
    raise click.exceptions.Exit(EXIT_FAILED if exit_reasons(report) else EXIT_OK)


@click.command(cls=OptionsCommand, models=bisect_models, helps=judged_by("paired"))
@click.argument("script", type=click.Path(path_type=Path))
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
def bisect(script: Path, quiet: bool, **given: Any) -> None:
    """Find the first revision at which SCRIPT got slower, as git bisect would: each step runs the
    script at a revision against GOOD in pairs (a duet where the machine splits fairly, as jaxrun ab
    does) and judges it (--metric, run and compile time by default). Exit 0 when a commit is named,
    1 when BAD is not slower than GOOD."""
    from jaxrun.ab.bisect import bisect as run_bisect

    def on_step(step: Any) -> None:
        ratio = f" x{step.ratio:.3f}" if step.ratio is not None else ""
        out.print(f"{step.commit[:12]} {step.subject}: {step.verdict}{ratio}", markup=False, soft_wrap=True)

    try:
        options, _ = _options(bisect_models())
        found = run_bisect(script, options, on_step=on_step, on_run=pair_progress(quiet))
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    if found.first_slower is None:
        out.print(found.reason or "nothing named", markup=False, soft_wrap=True)
        raise click.exceptions.Exit(EXIT_FAILED)
    out.print(f"first slower revision: {found.first_slower} {found.subject}", markup=False, soft_wrap=True)
    raise click.exceptions.Exit(EXIT_OK)
