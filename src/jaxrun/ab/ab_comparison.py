"""What ``jaxrun ab`` writes and says: the paired comparison (a ``ComparisonReport`` that
``jaxrun report``, the exports and ``--fail-on-regression`` read as they read ``jaxrun compare``'s),
each program's trace, lower and compile time on both sides, and each side's runs as a benchmarked
results folder (``DIR/base``, ``DIR/new``).
"""

from __future__ import annotations

import os
import platform
import socket
import statistics

from jaxrun.ab.session import PairedRuns, Session, metric_samples, script_name
from jaxrun.ab.sides import Side
from jaxrun.core.timestamps import now_iso
from jaxrun.judge.benchmark_runs import (
    benchmarking_section,
    sample_from_result,
    script_benchmark,
)
from jaxrun.judge.cache_misses import compile_time_moved, program_change
from jaxrun.judge.paired import judge_paired_script
from jaxrun.judge.stats import geometric_mean
from jaxrun.judge.verdicts import corrected, metrics_for
from jaxrun.present.reports import (
    AB_COMPARISON as COMPARISON_FILE,  # what jaxrun report looks for
)
from jaxrun.results import result_files
from jaxrun.results.batch_summary import assemble_batch
from jaxrun.results.models import (
    ABSide,
    BatchMetadata,
    ComparisonReport,
    DuetHalf,
    ProgramComparison,
    ScriptComparison,
    ScriptResult,
)
from jaxrun.run.execute import benchmark_medians

__all__ = ["COMPARISON_FILE", "comparison", "program_comparisons", "write_sides"]




def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def program_comparisons(runs: PairedRuns) -> list[ProgramComparison]:
    """Each program compiled on both sides, its phases' medians over the pairs (successful runs)."""
    base = [r for r in runs.base if r.success]
    new = [r for r in runs.new if r.success]
    if not base or not new:
        return []
    names = [n for n in new[-1].compiles if n in base[-1].compiles]
    out = []
    for name in names:
        def phase(results: list[ScriptResult], attr: str) -> float | None:
            return _median([getattr(r.compiles[name], attr) for r in results if name in r.compiles])

        base_compile, new_compile = phase(base, "compile_time"), phase(new, "compile_time")
        base_count = int(phase(base, "count") or 0)
        new_count = int(phase(new, "count") or 0)
        base_loads, new_loads = int(phase(base, "cache_hits") or 0), int(phase(new, "cache_hits") or 0)
        if not (base_count or new_count or base_loads or new_loads):
            continue  # never built on either side (traced inside another program)
        change = program_change(base[-1].compiles[name], new[-1].compiles[name])
        out.append(ProgramComparison(
            program=name, base_compile_time=base_compile or 0.0, new_compile_time=new_compile or 0.0,
            base_count=base_count, new_count=new_count, moved=compile_time_moved(base_compile, new_compile),
            base_cache_loads=base_loads, new_cache_loads=new_loads,
            base_cache_load_time=phase(base, "cache_load_time") if base_loads else None,
            new_cache_load_time=phase(new, "cache_load_time") if new_loads else None,
            change=change,  # type: ignore[arg-type]
            reason=None if change is not None else "a side kept no fingerprint of it",
            base_trace_time=phase(base, "trace_time"), new_trace_time=phase(new, "trace_time"),
            base_lower_time=phase(base, "lower_time"), new_lower_time=phase(new, "lower_time"),
            compile_ratio=(new_compile / base_compile) if base_compile and new_compile is not None else None,
        ))
    # The script's own programs by how much their compile time moved, JAX's helpers after.
    return sorted(out, key=lambda p: (-(abs((p.compile_ratio or 1.0) - 1.0)), p.program))


def _side(side: Side, runs: list[PairedRuns], label: str) -> ABSide:
    results = [r for pr in runs for r in (pr.base if label == "BASE" else pr.new) if r.compile_environment]
    env = results[-1].compile_environment if results else None
    return ABSide(label=label, given=side.given or str(side.root), root=str(side.root), commit=side.commit,
                  python=side.python, jax_version=env.jax_version if env else None,
                  jaxlib_version=env.jaxlib_version if env else None)


def comparison(session: Session, runs: list[PairedRuns], only: tuple[list[str], list[str]] = ([], [])
               ) -> ComparisonReport:
    """The paired verdict of every script, as ``jaxrun compare`` would report it (``only``: the
    scripts on BASE only, and on NEW only)."""
    ab, base, new = session.options, session.base, session.new
    options, pairs, warmup_pairs = ab.verdict, ab.pairs, ab.warmup_pairs
    only_in_base, only_in_new = only
    metrics, gate = metrics_for(options.metric)
    scripts: list[ScriptComparison] = []
    for pr in runs:
        device = next((r.device_used for r in pr.new if r.device_used), None)
        before, after = metric_samples(pr.base, metrics), metric_samples(pr.new, metrics)
        # A phase neither side measured (compile time of a script without JAX) is not judged.
        measured = [m for m in metrics if any(v is not None for v in (*before[m], *after[m]))]
        judged = judge_paired_script(script_name(pr.key), device, {m: before[m] for m in measured},
                                     {m: after[m] for m in measured}, options, scripts=len(runs))
        note = "; ".join(n for n in (judged.note, pr.stopped) if n) or None
        scripts.append(judged.model_copy(update={"path": pr.key, "programs": program_comparisons(pr), "note": note}))
    scripts = corrected(scripts, options.alpha, options.correction)
    halves = next((pr.halves for pr in runs if pr.halves is not None), None)
    duet = [DuetHalf(cpus=list(slot.cpus), gpus=list(slot.gpus)) for slot in halves.slots] if halves else None
    alternating_reason = next((pr.alternating_reason for pr in runs if pr.alternating_reason), None)
    means = {m: geometric_mean([s.phases[m].ratio for s in scripts if m in s.phases and s.phases[m].ratio])
             for m in metrics}
    return ComparisonReport(
        base=base.describe(), new=new.describe(), paired=True, pairs=pairs, warmup_pairs=warmup_pairs,
        sides={"BASE": _side(base, runs, "BASE"), "NEW": _side(new, runs, "NEW")}, duet=duet,
        alternating_reason=alternating_reason,
        metrics=list(metrics), gate=list(gate), alpha=options.alpha, min_effect=options.min_effect,
        correction=options.correction, scripts=scripts, only_in_base=only_in_base, only_in_new=only_in_new, geometric_mean_ratio=means,
        allow_mismatch=options.allow_mismatch, fail_on_regression=ab.fail_on_regression,
        regressions=[s.script_name for s in scripts if s.verdict == "slower"],
        improvements=[s.script_name for s in scripts if s.verdict == "faster"],
    )


def _benchmarked(pr: PairedRuns, label: str, pairs: int, warmup_pairs: int) -> ScriptResult | None:
    """One side's runs of a script as a benchmarked result (its counted runs: the pairs')."""
    results = pr.base if label == "BASE" else pr.new
    warm = [pair[0] if label == "BASE" else pair[1] for pair in pr.warmups]
    if not results:
        return None
    samples = [sample_from_result(r, i + 1, False) for i, r in enumerate(results)]
    warmups = [sample_from_result(r, i + 1, True) for i, r in enumerate(warm)]
    last = results[-1]
    bench = script_benchmark(last, samples, warmups, pairs, warmup_pairs, None)
    return last.model_copy(update={"benchmark": bench.model_copy(update={"script_name": script_name(pr.key)}),
                                   "script_name": script_name(pr.key),
                                   **benchmark_medians(last, samples)})


def write_sides(session: Session, runs: list[PairedRuns], report: ComparisonReport) -> None:
    """``ab_comparison.json`` in the session's folder and each side as a results folder (``base/``,
    ``new/``) with its runs as benchmarked results: ``jaxrun report folder`` renders NEW with the
    paired verdicts."""
    from jaxrun.core.version import version

    ab, folder, base, new = session.options, session.results_dir, session.base, session.new
    pairs, warmup_pairs, device = ab.pairs, ab.warmup_pairs, str(ab.run_keywords.get("device", "auto"))
    for side in (base, new):
        results = [r for r in (_benchmarked(pr, side.label, pairs, warmup_pairs) for pr in runs) if r is not None]
        jax_version = report.sides[side.label].jax_version if side.label in report.sides else None
        meta = BatchMetadata(
            jaxrun_version=version(), device_requested=device, device_used=None, jax_version=jax_version,
            execution_timestamp=now_iso(), scripts_found=len(runs), scripts_executed=len(results),
            scripts_successful=0, scripts_failed=0, search_paths=[str(side.root)],
            results_dir=str(folder / side.label.lower()), host=socket.gethostname(),
            python_version=platform.python_version(),
        )
        benchmarks = [r.benchmark for r in results if r.benchmark is not None]
        benchmarking = benchmarking_section(benchmarks, pairs, warmup_pairs, [device]) if pairs else None
        batch = assemble_batch(meta, None, results, complete=True, benchmarking=benchmarking)
        target = folder / side.label.lower()
        os.makedirs(target, exist_ok=True)
        result_files.write_model(target / result_files.EXECUTION_RESULTS, batch)
    result_files.write_model(folder / COMPARISON_FILE, report)
