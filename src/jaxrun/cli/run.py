"""``jaxrun run``: the flags become one :class:`~jaxrun.options.BatchOptions`, each value marked
with where it came from (the command line, an environment variable, or the default)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

import typer

from ..errors import JAXExecutionError

if TYPE_CHECKING:
    from ..settings import Resolved
from .console import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, err, fail_usage, out

# CLI parameters whose option has another name or value: (option name, value from the flag).
# A value of None means the flag sets nothing.
_RENAMED = {
    "no_fallback": ("fallback", lambda v: not v),
    "warm": ("entry", lambda v: "main" if v else None),
    "no_compile_cache": ("compile_cache", lambda v: False if v else None),
    "no_history": ("history", lambda v: False if v else None),
    "profile": ("enable_profiling", lambda v: v),
}
_NEGATIONS = ("no_compile_cache", "no_history")
# Flags that shape what the CLI prints, not the batch: never options (quiet and report may come
# from the config file too); and the flags that choose the config file.
_DISPLAY_ONLY = ("quiet", "json_output", "report")
_NOT_OPTIONS = (*_DISPLAY_ONLY, "config", "no_config", "paths")


def run(
    ctx: typer.Context,
    paths: List[Path] = typer.Argument(..., help="Folders of JAX scripts, or .py files."),
    device: str = typer.Option("auto", "--device", "-d", help="auto, cpu, gpu or tpu; a list (cpu,gpu) runs each script on each."),
    timeout: Optional[float] = typer.Option(300.0, help="Seconds per script before it is stopped."),
    recursive: bool = typer.Option(True, "--recursive/--no-recursive", help="Search sub-folders."),
    include: Optional[List[str]] = typer.Option(None, help="Only scripts matching this glob (repeatable)."),
    exclude: Optional[List[str]] = typer.Option(None, help="Skip scripts matching this glob (repeatable)."),
    results_dir: Path = typer.Option(Path("jaxrun_results"), help="Where result files are written."),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Scripts run at once (each CPU job gets its share of the cores)."),
    gpus_per_job: int = typer.Option(1, "--gpus-per-job", help="GPUs given to each job."),
    jobs_per_gpu: int = typer.Option(1, "--jobs-per-gpu", help="Jobs sharing one GPU (each gets a memory fraction)."),
    host_devices: Optional[int] = typer.Option(None, "--host-devices", help="Simulated CPU devices per script (for sharding code)."),
    compile_cache: Optional[Path] = typer.Option(None, "--compile-cache", help="Persistent compilation cache folder (default: jaxrun's cache)."),
    no_compile_cache: bool = typer.Option(False, "--no-compile-cache", help="Run without JAX's persistent compilation cache."),
    cold_cache: bool = typer.Option(False, "--cold-cache", help="Each run (each benchmark run too) starts with an empty compilation cache."),
    compile_cache_max_size: Optional[str] = typer.Option(None, "--compile-cache-max-size", help="Bound of the compilation cache (default 4GB; none: unbounded); JAX deletes the least recently used executables past it."),
    backend: str = typer.Option("local", "--backend", help="local, or ray to run each script as a Ray task."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Address of an existing Ray cluster."),
    retries: int = typer.Option(0, help="Retries of transient failures (missing device, accelerator OOM)."),
    no_fallback: bool = typer.Option(False, "--no-fallback", help="Do not re-run failed accelerator scripts on CPU."),
    debug_nans: bool = typer.Option(False, "--debug-nans", help="Run with jax_debug_nans: a NaN is an error."),
    debug_infs: bool = typer.Option(False, "--debug-infs", help="Run with jax_debug_infs: an Inf is an error."),
    log_compiles: bool = typer.Option(False, "--log-compiles", help="JAX logs every compilation to the script's stderr log."),
    resume: bool = typer.Option(False, "--resume", help="Continue the batch in --results-dir: keep the scripts that finished there (same content and options), run the rest."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help="Host memory per script, e.g. 4GB or 512MB (MB = 2^20 bytes, as memory_peak): over it the script is stopped (out_of_memory)."),
    max_processes: Optional[int] = typer.Option(None, "--max-processes", help="Processes each script's tree may hold at once (fork bombs): over it the script is stopped."),
    profile: bool = typer.Option(False, "--profile", help="Profile each script: jax.profiler trace, memory and timing profiles in jax_profiling/."),
    benchmark_runs: int = typer.Option(0, "--benchmark-runs", help="Counted process runs per script (0: run once)."),
    warmup_runs: int = typer.Option(0, "--warmup-runs", help="Uncounted process runs before the counted ones."),
    warm: bool = typer.Option(False, "--warm", help="Call the script's main() repeatedly in one process."),
    warm_calls: int = typer.Option(10, "--warm-calls", help="Calls of main() per process in --warm mode."),
    history: Optional[Path] = typer.Option(None, "--history", help="History database (default $JAXRUN_HISTORY or ./.jaxrun/history.sqlite)."),
    no_history: bool = typer.Option(False, "--no-history", help="Do not store benchmarks in the history."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", "--export-markdown", help="Also write the summary as Markdown tables to this file (and to $GITHUB_STEP_SUMMARY when set)."),
    export_json: Optional[Path] = typer.Option(None, "--export-json", help="Also write each script's figures with every raw sample as JSON (hyperfine's names: mean, median, times...)."),
    export_csv: Optional[Path] = typer.Option(None, "--export-csv", help="Also write one CSV row per script."),
    junit_xml: Optional[Path] = typer.Option(None, "--junit-xml", help="Also write the batch as JUnit XML (pytest's format: a testcase per script), for CI test reports."),
    x64: bool = typer.Option(False, "--x64", help="Run with jax_enable_x64 (64-bit floats and ints)."),
    matmul_precision: Optional[str] = typer.Option(None, "--matmul-precision", help="jax_default_matmul_precision: default, high, highest, bfloat16, tensorfloat32, float32, or a dot algorithm like BF16_BF16_F32."),
    disable_jit: bool = typer.Option(False, "--disable-jit", help="Run with jax_disable_jit (op by op), to debug a failing script."),
    xla_flags: Optional[str] = typer.Option(None, "--xla-flags", help="XLA flags added to XLA_FLAGS (a flag set both ways takes this value)."),
    env: Optional[List[str]] = typer.Option(None, "--env", help="KEY=VALUE set in each script's environment (repeatable)."),
    isolate_env: bool = typer.Option(False, "--isolate-env", help="Scripts get a minimal environment (PATH, HOME, locale, JAX_*, XLA_*, CUDA_*...) instead of all of yours."),
    strict_xfail: bool = typer.Option(False, "--strict-xfail", help="A script marked xfail that passes fails the batch."),
    allow_mismatch: bool = typer.Option(False, "--allow-mismatch", help="Check regressions against history runs with other numerics too."),
    config: Optional[Path] = typer.Option(None, "--config", help="Read settings from this pyproject.toml or jaxrun.toml (default: the nearest one above PATH)."),
    no_config: bool = typer.Option(False, "--no-config", help="Ignore config files."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log each attempt."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live view: one plain line per script event, then the summary."),
    report: bool = typer.Option(False, "--report", help="Also write the HTML report (RESULTS_DIR/report.html; see jaxrun report)."),
    json_output: bool = typer.Option(False, "--json", help="Print the batch result (as in jax_execution_results.json) on stdout and nothing else there."),
) -> None:
    """Run every JAX script under PATHS, each in its own process, and write the results folder.

    Arguments after `--` go to every script (jaxrun run train.py -- --steps 100). Settings also
    come from [tool.jaxrun] in pyproject.toml or a jaxrun.toml (see jaxrun config), per-script
    tables and '# jaxrun:' comments, and JAXRUN_<OPTION> variables; these flags win over all.

    Exit status: 0 all succeeded (or failed as expected: xfail), 1 a script failed or the history
    flags a regression, 2 bad usage, 130 interrupted.
    """
    from ..batch.run import run_batch
    from ..resultfiles import dump_model

    resolved = resolve_settings(ctx, paths)
    options = resolved.options
    quiet = _display(resolved, "quiet", quiet)
    report = _display(resolved, "report", report)

    # A live view only for a person at a terminal; logs, pipes, --quiet and --json get plain lines.
    live = sys.stderr.isatty() and not (quiet or json_output or verbose)
    if live:
        from .live import LiveProgress
    else:
        from .progress import LineProgress
    view = LiveProgress(err.console(), slots=options.jobs) if live else LineProgress(sys.stderr)
    if not json_output:
        from ..run.launch import when_started

        when_started(_load_summary)  # while the first script runs, not after the last one
    # SIGTERM (a scheduler, `kill`) stops the batch as Ctrl-C does: running scripts stopped,
    # unfinished ones marked interrupted, valid files, exit 130.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        batch = run_batch(options, sinks=[view])
    except KeyboardInterrupt:
        err.print(f"jaxrun: interrupted; partial results are in {options.results_dir}", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
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
    if json_output:
        out.file.write(dump_model(batch))
        out.file.flush()
        raise typer.Exit(_exit_status(batch))
    raise typer.Exit(_report_run(batch))


def command_line_values(ctx: typer.Context) -> tuple[dict[str, Any], dict[str, str]]:
    """The options given on the command line (flags left at their defaults give nothing), with
    the flag that gave each; the script arguments after ``--`` (cli.main sets them aside)."""
    given: dict[str, Any] = {}
    origins: dict[str, str] = {}
    # The switches that turn something off (--no-history, --no-compile-cache) are applied after
    # everything else, so they win over --history and --compile-cache.
    for param in sorted((p for p in ctx.params if p not in _NOT_OPTIONS), key=lambda p: p in _NEGATIONS):
        # By name: typer >= 0.29 carries its own copy of click, with its own ParameterSource enum.
        source = getattr(ctx.get_parameter_source(param), "name", None)
        if source in ("DEFAULT", "DEFAULT_MAP", None):
            continue
        name, convert = _RENAMED.get(param, (param, lambda v: v))
        value = convert(ctx.params[param])
        if value is None:
            continue  # a switch left off sets nothing
        if name == "env":
            from ..settings.keys import pairs

            value = pairs(value)
        given[name] = value
        origins[name] = "--" + param.replace("_", "-")
    script_args = (ctx.obj or {}).get("script_args")
    if script_args is not None:
        given["args"], origins["args"] = list(script_args), "arguments after --"
    return given, origins


def resolve_settings(ctx: typer.Context, paths: List[Path]) -> "Resolved":
    """Every layer of settings for ``jaxrun run`` (and ``jaxrun config``); usage errors exit 2."""
    from ..settings import resolve_batch_options

    paths = [Path(p) for p in paths]  # typer converts the run command's own arguments, not another's
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
