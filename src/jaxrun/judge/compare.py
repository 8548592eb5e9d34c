"""Compare two runs: per script and phase, did it get faster, slower, or not significantly different?

Inputs are results folders or their JSON files (``jax_benchmark_results.json``, or
``jax_execution_results.json`` whose ``benchmarking`` section may hold the benchmarks). Each
script, keyed by ``(script_name, device_requested)``, contributes the counted runs of every phase
(warm-ups and failed runs are left out). :mod:`jaxrun.judge.verdicts` judges each phase (ratio of
medians with a bootstrap CI, exact or asymptotic Mann-Whitney U, a minimum effect, so a tiny but
consistent change is not called a regression) and gates the script's verdict on the phases that
are the code's own.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Union

from jaxrun.config.options import VerdictOptions, verdict_options
from jaxrun.core.formatting import listed
from jaxrun.core.validate import parse_effect  # noqa: F401 - re-exported: compare.parse_effect
from jaxrun.discover.script_labels import relative_path
from jaxrun.errors import UsageError
from jaxrun.judge import stats
from jaxrun.judge.benchmark_runs import metric_values
from jaxrun.judge.cache_misses import compile_time_moved, program_change
from jaxrun.judge.verdicts import corrected, judge_script, metrics_for
from jaxrun.results import result_files
from jaxrun.results.batch_summary import with_unlisted_results
from jaxrun.results.benchmark_result import resolve_metric
from jaxrun.results.machine import Machine
from jaxrun.results.models import (
    RESULT_FIELDS,
    BatchResult,
    BenchmarkResults,
    ComparisonReport,
    CompileStats,
    Numerics,
    ProgramComparison,
    ScriptBenchmark,
    ScriptComparison,
    ScriptResult,
)

Key = tuple[str, Union[str, None]]
Source = Union[str, "os.PathLike[str]", BenchmarkResults, BatchResult]

logger = logging.getLogger("jaxrun")

_EXPECTED = f"expected {result_files.BENCHMARK_RESULTS} or {result_files.EXECUTION_RESULTS}"


@dataclass
class ScriptSamples:
    samples: dict[str, list[float]]  # per metric
    device_used: str | None
    benchmarked: bool
    numerics: Numerics | None = None  # None: a file from before jaxrun recorded them
    path: str | None = None  # as the run's view names it: relative to the folder searched, with "/"
    compiles: dict[str, CompileStats] | None = None  # per program; None: the file kept none (a benchmark file)


@dataclass
class _Loaded:
    label: str
    entries: dict[Key, ScriptSamples]
    machine: Machine | None = None  # what the batch file says it ran on (None: unknown, a benchmark file alone)


def _machine_of(model: object) -> Machine | None:
    return model.metadata.machine if isinstance(model, BatchResult) else None


# --- reading ------------------------------------------------------------------------------------


def single_value(result: ScriptResult, metric: str) -> float | None:
    """One plain run's value of ``metric`` (a sample figure, read from the ScriptResult field
    RESULT_FIELDS names for it); a KeyError for a name that is no sample figure, never another's value."""
    if metric == "run_time" and result.run_time is None and result.import_time is None and result.body_time is not None:
        # A file from before import_time existed: its steady time (body minus compile) is the
        # closest figure it has.
        return result.body_time - (result.jit_compile_time or 0.0)
    return getattr(result, RESULT_FIELDS[metric])


def _benchmark_entry(bench: ScriptBenchmark, metrics: tuple[str, ...]) -> ScriptSamples:
    return ScriptSamples({m: metric_values(bench.samples, m) for m in metrics}, bench.device_used, True, bench.numerics)


def _benchmarks(model: BenchmarkResults | BatchResult) -> list[ScriptBenchmark]:
    return model.benchmarks if isinstance(model, BenchmarkResults) else model.benchmarking.benchmarks


def script_samples(model: BenchmarkResults | BatchResult, metrics: tuple[str, ...]) -> dict[Key, ScriptSamples]:
    """Per ``(script_name, device_requested)``: the counted samples of each metric (a benchmark's
    runs, or a plain run's one value), as compare and the exports read them."""
    entries: dict[Key, ScriptSamples] = {}
    roots = model.metadata.search_paths if isinstance(model, BatchResult) else model.search_paths
    for bench in _benchmarks(model):
        entry = _benchmark_entry(bench, metrics)
        entry.path = relative_path(bench.script_path, roots) if roots else None
        entries[(bench.script_name, bench.device_requested)] = entry
    if isinstance(model, BatchResult):
        _attach_compiles(entries, model)
        # Scripts without benchmark runs (all of them without --benchmark-runs; a script that
        # failed before benchmarking) contribute their single run, or nothing if it failed.
        for result in model.script_results:
            key = (result.script_name, result.device_requested)
            if key in entries:
                continue
            values = {m: single_value(result, m) if result.success else None for m in metrics}
            samples = {m: [] if v is None else [float(v)] for m, v in values.items()}
            entries[key] = ScriptSamples(samples, result.device_used, False, result.numerics,
                                         relative_path(result.script_path, roots or []),
                                         result.compiles if result.success else None)
    return entries


def _attach_compiles(entries: dict[Key, ScriptSamples], batch: BatchResult) -> None:
    """The per-program figures of the batch's results, for the benchmarked scripts of ``entries``."""
    for result in batch.script_results:
        entry = entries.get((result.script_name, result.device_requested))
        if entry is not None and entry.compiles is None and result.success:
            entry.compiles = result.compiles


def _read_json(path: Path) -> BenchmarkResults | BatchResult:
    """The results file ``path``: its model chosen by its name, or for another name by its keys.
    A damaged file raises result_files.DamagedFileError (one line that says where)."""
    try:
        if path.name == result_files.BENCHMARK_RESULTS:
            parsed: BenchmarkResults | BatchResult = result_files.read_model(path, BenchmarkResults)
        elif path.name == result_files.EXECUTION_RESULTS:
            parsed = result_files.read_model(path, BatchResult)
        else:
            data = result_files.read_json(path)
            if isinstance(data, dict) and "script_results" in data:
                model: type[BenchmarkResults] | type[BatchResult] = BatchResult
            elif isinstance(data, dict) and "benchmarks" in data:
                model = BenchmarkResults
            else:
                raise UsageError(f"{str(path)!r} is not a jaxrun results file: {_EXPECTED}")
            parsed = result_files.validate_model(path, data, model)
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r} ({exc.__class__.__name__}: {exc}): {_EXPECTED}") from None
    if isinstance(parsed, BatchResult) and path.name == result_files.EXECUTION_RESULTS:
        return with_unlisted_results(parsed, path.parent)
    return parsed


def _load(source: Source, metrics: tuple[str, ...]) -> _Loaded:
    if isinstance(source, (BenchmarkResults, BatchResult)):
        return _Loaded(f"<{type(source).__name__}>", script_samples(source, metrics), _machine_of(source))
    if not isinstance(source, (str, os.PathLike)):
        raise UsageError(
            f"cannot compare {type(source).__name__} {source!r}: pass a results folder, a results "
            "JSON file, or a BenchmarkResults / BatchResult"
        )
    path = Path(source).expanduser()
    if path.is_dir():
        # A name that is there is read (result_files.read_model says what is wrong with it: damaged, a
        # FIFO), never taken for a missing file.
        bench_file, batch_file = path / result_files.BENCHMARK_RESULTS, path / result_files.EXECUTION_RESULTS
        if os.path.lexists(bench_file):
            try:
                model = _read_json(bench_file)
            except result_files.DamagedFileError as exc:
                if not os.path.lexists(batch_file):
                    raise
                # The batch file holds the same benchmarks (its "benchmarking" section).
                try:
                    model = _read_json(batch_file)
                except result_files.DamagedFileError as second:
                    raise UsageError(f"{str(path)!r} holds no readable results: {exc}; {second}") from None
                logger.warning("%s; read %s instead", exc, result_files.EXECUTION_RESULTS)
                return _Loaded(str(source), script_samples(model, metrics), _machine_of(model))
            if _benchmarks(model) or not os.path.lexists(batch_file):
                entries = script_samples(model, metrics)
                machine = None
                if os.path.lexists(batch_file):
                    try:  # the per-program figures and the machine are in the batch file
                        batch = _read_json(batch_file)
                        _attach_compiles(entries, batch)  # type: ignore[arg-type]
                        machine = _machine_of(batch)
                    except (UsageError, result_files.DamagedFileError) as exc:
                        logger.warning("%s: the programs' figures are not compared", exc)
                return _Loaded(str(source), entries, machine)
        if os.path.lexists(batch_file):
            batch = _read_json(batch_file)
            return _Loaded(str(source), script_samples(batch, metrics), _machine_of(batch))
        raise UsageError(f"{str(source)!r} is not a jaxrun results folder or results JSON: {_EXPECTED} in it")
    if not path.exists():
        raise UsageError(
            f"{str(source)!r} does not exist: expected a jaxrun results folder or results JSON "
            f"({result_files.BENCHMARK_RESULTS} or {result_files.EXECUTION_RESULTS})"
        )
    model = _read_json(path)
    return _Loaded(str(source), script_samples(model, metrics), _machine_of(model))


def _several(*sides: _Loaded) -> set[str]:
    """The <name>s a side holds on more than one device."""
    return {name for side in sides for name, n in Counter(k[0] for k in side.entries).items() if n > 1}


def _shown(side: _Loaded, key: Key, several: set[str]) -> str:
    """The script as its run's summary names it (view.script_label: its path under the folder
    searched, " @device" when it ran on several); "<name> [device]" when the file does not say
    where it was (a benchmark file alone)."""
    path = side.entries[key].path
    if path is None:
        return f"{key[0]} [{key[1]}]" if key[0] in several else key[0]
    return path + (f" @{key[1]}" if key[0] in several else "")


def labelled_samples(source: Source, metrics: tuple[str, ...]) -> list[tuple[str, Key, dict[str, list[float]]]]:
    """``(label, (name, device), samples per metric)`` of each script of a run, its label as
    compare_results names it (what the exports of a comparison write)."""
    side = _load(source, metrics)
    several = _several(side)
    return [(_shown(side, key, several), key, entry.samples) for key, entry in side.entries.items()]


def load_samples(path: Source, metric: str = "wall_time") -> dict[Key, list[float]]:
    """Counted, successful samples of ``metric`` per ``(script_name, device_requested)``."""
    name = resolve_metric(metric)
    return {key: entry.samples[name] for key, entry in _load(path, (name,)).entries.items()}


# --- options ------------------------------------------------------------------------------------

# --- comparing ----------------------------------------------------------------------------------


def _pair(base: dict[Key, ScriptSamples], new: dict[Key, ScriptSamples]) -> tuple[list[tuple[Key, Key]], list[Key], list[Key]]:
    """Match scripts by (name, requested device); a name left with one device per side still pairs."""
    pairs = [(key, key) for key in base if key in new]
    rest_base = [k for k in base if k not in new]
    rest_new = [k for k in new if k not in base]
    for name in dict.fromkeys(k[0] for k in rest_base):
        mine = [k for k in rest_base if k[0] == name]
        theirs = [k for k in rest_new if k[0] == name]
        if len(mine) == 1 and len(theirs) == 1:
            pairs.append((mine[0], theirs[0]))
            rest_base.remove(mine[0])
            rest_new.remove(theirs[0])
    return pairs, rest_base, rest_new


def compare_results(
    base: Source,
    new: Source,
    options: VerdictOptions | None = None,
    *,
    fail_on_regression: bool = False,
    **given: Any,
) -> ComparisonReport:
    """Compare every script of ``new`` against ``base`` (results folders, their JSON files, or models).

    Per script and phase (wall, import, compile, run, memory): ratio of medians new/base with a 95%
    bootstrap CI, two-sided Mann-Whitney U p-value when both sides have at least 2 samples, and a
    verdict: "slower" / "faster" need p < ``alpha`` *and* a ratio beyond 1 ± ``min_effect``. The
    script's verdict (and ``regressions`` / ``improvements``) looks at run and compile time, or
    only at ``metric`` when given. Scripts found on one side only are listed in ``only_in_base`` /
    ``only_in_new``. A script whose two sides started with other numerics (x64, matmul precision,
    debug flags, XLA flags) is listed in ``numerics_mismatch`` and not judged ("not comparable"),
    unless ``allow_mismatch``. ``fail_on_regression``: the report says the command exits 1 on a
    regression (:func:`exit_reasons`). Raises :class:`UsageError` for unreadable inputs or bad options.
    """
    options = verdict_options(options, given)
    metric, alpha, min_effect, allow_mismatch = options.metric, options.alpha, options.min_effect, options.allow_mismatch
    judged, gate = metrics_for(metric)
    left, right = _load(base, judged), _load(new, judged)
    pairs, only_base, only_new = _pair(left.entries, right.entries)
    several = _several(left, right)

    def label(key: Key) -> str:  # "name [device]" only for scripts run on several devices
        return f"{key[0]} [{key[1]}]" if key[0] in several else key[0]

    def shown(side: _Loaded, key: Key) -> str:
        return _shown(side, key, several)

    if not pairs and (only_base or only_new):
        def names(side: _Loaded, keys: list[Key]) -> str:
            return listed(sorted({shown(side, k) for k in keys}), 5) or "none"

        raise UsageError(f"nothing to compare: no script is in both {left.label!r} and {right.label!r} "
                         f"(BASE has {names(left, only_base)}; NEW has {names(right, only_new)}) — pass two runs of "
                         "the same scripts")

    machines = right.machine.differences(left.machine) if left.machine and right.machine else []
    if machines and not allow_mismatch:
        raise UsageError(f"BASE and NEW ran on different machines ({'; '.join(machines)}; NEW's first): their times "
                         "differ for that alone; compare runs of one machine, or pass --allow-mismatch to compare "
                         "them anyway")
    report = ComparisonReport(base=left.label, new=right.label, metrics=list(judged), gate=list(gate),
                              alpha=alpha, min_effect=min_effect, allow_mismatch=allow_mismatch,
                              fail_on_regression=fail_on_regression, machine_mismatch=machines)
    labels: list[str] = []
    sides: list[tuple[Any, Any]] = []
    for base_key, new_key in pairs:
        old, now = left.entries[base_key], right.entries[new_key]
        # The device the new run used ("auto" was only asked for); the notes say where the sides differ.
        row = judge_script(new_key[0], now.device_used or new_key[1], old.samples, now.samples, options,
                           repeated=old.benchmarked or now.benchmarked)
        if now.path is not None:
            row.path = shown(right, new_key)
        notes = [row.note] if row.note else []
        if base_key != new_key:
            notes.insert(0, f"requested device {base_key[1]} in base, {new_key[1]} in new")
        if old.device_used and now.device_used and old.device_used != now.device_used:
            notes.append(f"ran on {old.device_used} in base but on {now.device_used} in new")
        differences = old.numerics.differences(now.numerics) if old.numerics and now.numerics else []
        if differences:
            report.numerics_mismatch.append(label(new_key))
            notes.insert(0, f"numerics differ (base vs new: {', '.join(differences)})")
            if not allow_mismatch:
                notes[0] += ": not judged; pass --allow-mismatch to judge anyway"
                row.verdict, row.slower, row.faster = "not comparable", [], []
        row.note = "; ".join(notes) or None
        report.scripts.append(row)
        labels.append(label(new_key))
        sides.append((old, now))
    report.scripts = corrected(report.scripts, alpha, options.correction)
    report.correction = options.correction
    for row, name, (old, now) in zip(report.scripts, labels, sides):
        row.programs = compare_programs(old.compiles, now.compiles, row)  # every program when the verdict is a change
        if row.verdict == "slower":
            report.regressions.append(name)
        elif row.verdict == "faster":
            report.improvements.append(name)
    report.only_in_base = [shown(left, k) for k in only_base]
    report.only_in_new = [shown(right, k) for k in only_new]
    report.geometric_mean_ratio = {
        m: stats.geometric_mean([p.ratio for r in report.scripts if (p := r.phases.get(m)) and p.ratio is not None])
        for m in judged
    }
    return report


def exit_reasons(report: ComparisonReport) -> list[str]:
    """Why ``jaxrun compare`` / ``jaxrun ab`` exits 1, one line each (none: it exits 0): what the
    command's exit status is, and what the report of an ab folder says it is, from this one place."""
    if not report.fail_on_regression:
        return []
    reasons = []
    if report.regressions:
        reasons.append(f"slower than the baseline ({', '.join(report.shown(report.regressions))}), "
                       "with --fail-on-regression")
    if report.numerics_mismatch and not report.allow_mismatch:
        reasons.append(f"other numerics than the baseline, not judged ({', '.join(report.numerics_mismatch)}), "
                       "with --fail-on-regression (--allow-mismatch judges them)")
    return reasons


def compare_programs(base: dict[str, CompileStats] | None, new: dict[str, CompileStats] | None,
                     row: ScriptComparison | None = None) -> list[ProgramComparison]:
    """The programs in both runs whose compile time moved (more than 20% and 10 ms), or every one in
    both when ``row``'s verdict or its run time's is a change: compile time base -> new, and
    whether each is the same program (:func:`jaxrun.judge.cache_misses.program_change`)."""
    if not base or not new:
        return []
    changed = row is not None and time_changed(row)
    programs = []
    for name, now in new.items():
        before = base.get(name)
        if before is None:
            continue
        moved = compile_time_moved(before.compile_time, now.compile_time)
        if not (moved or changed):
            continue
        change = program_change(before, now)
        programs.append(ProgramComparison(
            program=name, base_compile_time=before.compile_time, new_compile_time=now.compile_time,
            base_count=before.count, new_count=now.count, moved=moved, change=change,  # type: ignore[arg-type]
            base_cache_loads=before.cache_hits, new_cache_loads=now.cache_hits,
            base_cache_load_time=before.cache_load_time or None, new_cache_load_time=now.cache_load_time or None,
            reason=None if change is not None else "a run kept no fingerprint of it",
        ))
    return programs


def time_changed(row: ScriptComparison) -> bool:
    """Whether a script's verdict, or its run time's, is a change: then every program in both runs
    is worth a line, moved or not (PROGRAMS_NOT_MOVED's heading says so)."""
    run = row.phases.get("run_time")
    return row.verdict in ("slower", "faster") or (run is not None and run.verdict in ("slower", "faster"))


def compile_text(seconds: float, count: int, loads: int = 0, load_time: float | None = None) -> str:
    """What one run did to build a program: ``compiled in 0.120 s``; ``loaded from the persistent
    cache in 0.004 s`` (a load is not a 0 s compilation); both, when it did both; ``not
    compiled`` when it built none (traced inside another program)."""
    loaded = "loaded from the persistent cache" + (f" in {load_time:.3f} s" if load_time else "")
    if count:
        return f"compiled in {seconds:.3f} s" + (f" ({loads} more {loaded})" if loads else "")
    return loaded if loads else "not compiled (traced inside another program, or never run)"


def program_line(script: str, p: ProgramComparison) -> str:
    """``model.py: jit(loss) compiled in 0.120 s -> compiled in 0.310 s: the program changed``."""
    said = p.change or f"unknown whether it is the same program ({p.reason})"
    return (f"{script}: {p.program} {compile_text(p.base_compile_time, p.base_count, p.base_cache_loads, p.base_cache_load_time)}"
            f" -> {compile_text(p.new_compile_time, p.new_count, p.new_cache_loads, p.new_cache_load_time)}: {said}")


PROGRAMS_MOVED = "Programs whose compile time moved"
PROGRAMS_NOT_MOVED = "Programs whose compile time did not move (shown for a script whose time changed)"


def program_sections(report: ComparisonReport, line: Callable[[str, ProgramComparison], str] = program_line
                     ) -> list[tuple[str, list[str]]]:
    """The programs of :attr:`ScriptComparison.programs`, each under the heading that is true of
    it (its ``moved``): what `jaxrun compare`, `jaxrun ab` and their Markdown say. A program that
    did not move is listed only for a script whose time changed (:func:`time_changed`), as its
    heading says: `jaxrun ab` keeps every program of both sides in the JSON, judged or not.
    ``line`` words one program (``jaxrun ab`` adds its trace and lower times)."""
    moved: list[str] = []
    still: list[str] = []
    for row in report.scripts:
        changed = time_changed(row)
        for p in row.programs:
            if p.moved or changed:
                (moved if p.moved else still).append(line(row.path or row.script_name, p))
    return [(heading, lines) for heading, lines in ((PROGRAMS_MOVED, moved), (PROGRAMS_NOT_MOVED, still)) if lines]


def program_lines(report: ComparisonReport) -> list[str]:
    """Every line of :func:`program_sections`, without their headings."""
    return [text for _, lines in program_sections(report) for text in lines]
