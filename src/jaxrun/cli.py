"""The ``jaxrun`` command (typer + rich). The only module that prints and chooses exit codes.

Exit codes: 0 all scripts succeeded, 1 a script failed, 2 bad usage or input, 130 interrupted.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import __version__
from .cli_tables import fmt
from .errors import JAXExecutionError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

app = typer.Typer(
    name="jaxrun",
    help="Run a folder of JAX programs on the best device and record what happened.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# Piped output (CI logs, files) gets a wide table instead of rich's 80-column default.
_WIDTH = None if sys.stdout.isatty() else 160
out = Console(highlight=False, width=_WIDTH)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


def fail_usage(message: str) -> typer.Exit:
    err.print(f"jaxrun: error: {message}", markup=False, soft_wrap=True)
    return typer.Exit(EXIT_USAGE)


@app.command()
def run(
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
    cold_cache: bool = typer.Option(False, "--cold-cache", help="Benchmark runs each start with an empty compilation cache."),
    backend: str = typer.Option("local", "--backend", help="local, or ray to run each script as a Ray task."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Address of an existing Ray cluster."),
    retries: int = typer.Option(0, help="Retries of transient failures (missing device, accelerator OOM)."),
    no_fallback: bool = typer.Option(False, "--no-fallback", help="Do not re-run failed accelerator scripts on CPU."),
    debug_nans: bool = typer.Option(False, "--debug-nans", help="Run with jax_debug_nans: a NaN is an error."),
    benchmark_runs: int = typer.Option(0, "--benchmark-runs", help="Counted process runs per script (0: run once)."),
    warmup_runs: int = typer.Option(0, "--warmup-runs", help="Uncounted process runs before the counted ones."),
    warm: bool = typer.Option(False, "--warm", help="Call the script's main() repeatedly in one process."),
    warm_calls: int = typer.Option(10, "--warm-calls", help="Calls of main() per process in --warm mode."),
    history: Optional[Path] = typer.Option(None, "--history", envvar="JAXRUN_HISTORY", help="History database (default ./.jaxrun/history.sqlite)."),
    no_history: bool = typer.Option(False, "--no-history", help="Do not store benchmarks in the history."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log each attempt."),
) -> None:
    """Run every JAX script under PATHS, each in its own process, and write the results folder.

    Exit status: 0 all succeeded, 1 a script failed or the history flags a regression, 2 bad
    usage, 130 interrupted.
    """
    from .batch import parse_devices, run_jax_scripts

    try:
        parse_devices(device)
        for path in paths:
            if not path.exists():
                raise fail_usage(f"no such file or folder: {str(path)!r} — pass a folder of JAX scripts or a .py file")
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None

    def on_start(index: int, total: int, name: str) -> None:
        err.print(f"[{index}/{total}] {name} ...", markup=False)

    def on_result(index: int, total: int, result) -> None:  # type: ignore[no-untyped-def]
        if result.success:
            err.print(f"  [green]ok[/green] {result.device_used}, {fmt(result.execution_time)} s")
        else:
            err.print(f"  [red]{result.error_class}[/red]: ", end="")
            err.print(result.error_message or "", markup=False)

    try:
        batch = run_jax_scripts(
            paths, recursive, device=device, timeout=timeout, verbose=verbose, results_dir=results_dir,
            jobs=jobs, return_detailed_results=True, include=include or None, exclude=exclude or None,
            retries=retries, fallback=not no_fallback, debug_nans=debug_nans,
            benchmark_runs=benchmark_runs, warmup_runs=warmup_runs,
            entry="main" if warm else None, warm_calls=warm_calls,
            history=False if no_history else history,
            gpus_per_job=gpus_per_job, jobs_per_gpu=jobs_per_gpu, host_devices=host_devices,
            compile_cache=False if no_compile_cache else compile_cache, cold_cache=cold_cache,
            backend=backend, ray_address=ray_address,
            on_start=None if verbose else on_start, on_result=on_result,
        )
    except KeyboardInterrupt:
        err.print(f"jaxrun: interrupted; partial results are in {results_dir}", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    assert not isinstance(batch, bool)
    raise typer.Exit(_report_run(batch))


def _report_run(batch) -> int:  # type: ignore[no-untyped-def]
    """Print the run's tables and return its exit status."""
    from .cli_tables import benchmark_table, speedup_table, summary_table, warm_table

    out.print(summary_table(batch.script_results))
    bench = batch.benchmarking
    if bench.enabled and bench.benchmarks:
        out.print(benchmark_table(bench.benchmarks))
        for b in bench.benchmarks:
            for warning in b.warnings:
                err.print(f"warning: {b.script_name}: {warning}", markup=False)
    # A benchmarked result's .warm already pools the calls of all its runs.
    warm_rows = [(r.script_name, r.warm) for r in batch.script_results if r.warm is not None]
    if warm_rows:
        out.print(warm_table(warm_rows))
    if bench.device_comparison:
        out.print(speedup_table(bench.device_comparison))
    regressions = [
        b.script_name for b in bench.benchmarks if b.history_check is not None and b.history_check.regression
    ]
    meta = batch.metadata
    out.print(
        f"{meta.scripts_successful}/{meta.scripts_executed} succeeded; results in {meta.results_dir}",
        markup=False,
    )
    if regressions:
        err.print(f"jaxrun: regression against history: {', '.join(regressions)}", markup=False)
    return EXIT_OK if batch.success and not regressions else EXIT_FAILED


@app.command()
def devices(
    as_json: bool = typer.Option(False, "--json", help="Print the device facts as JSON."),
    refresh: bool = typer.Option(False, "--refresh", help="Probe again instead of using the cache."),
) -> None:
    """Show the JAX platforms and devices of this machine (read in a child process)."""
    from .devices import get_jax_device_info

    try:
        info = get_jax_device_info(refresh=refresh)
    except JAXExecutionError as exc:
        err.print(f"jaxrun: {exc}", markup=False)
        raise typer.Exit(EXIT_FAILED) from None
    if as_json:
        sys.stdout.write(info.model_dump_json(indent=2) + "\n")
        return
    if not info.jax_available:
        out.print(f"JAX is not usable: {info.error}", markup=False)
        raise typer.Exit(EXIT_FAILED)
    out.print(f"jax {info.jax_version}, jaxlib {info.jaxlib_version}, default backend {info.default_backend}")
    table = Table()
    for column in ("platform", "available", "backend", "devices", "details"):
        table.add_column(column)
    for name, p in info.platforms.items():
        kinds = sorted({d.device_kind for d in p.devices})
        details = ", ".join(kinds) if p.available else (p.error or "")
        table.add_row(name, "yes" if p.available else "no", p.backend or "-", str(len(p.devices)), Text(details))
    out.print(table)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@app.command()
def check() -> None:
    """Check the installation: JAX, its devices, JAX libraries and NVML."""
    from .devices import get_jax_device_info
    from .nvml import nvml_status

    try:
        info = get_jax_device_info(refresh=True)
    except JAXExecutionError as exc:
        err.print(f"jaxrun: {exc}", markup=False)
        raise typer.Exit(EXIT_FAILED) from None
    table = Table(title=f"jaxrun {__version__} check", title_justify="left")
    table.add_column("item")
    table.add_column("status")

    def row(item: str, status: str) -> None:
        table.add_row(item, Text(status))

    row("python", f"{info.python_version} ({info.python_executable})")
    row("jax", info.jax_version or f"not usable: {info.error}")
    row("jaxlib", info.jaxlib_version or "not installed")
    for name, p in info.platforms.items():
        state = f"{len(p.devices)} device(s) via {p.backend}" if p.available else f"unavailable: {p.error}"
        row(f"platform {name}", state)
    for dist in ("optax", "flax", "equinox"):
        row(dist, _version(dist))
    nvml = nvml_status()
    row("NVML", f"usable, driver {nvml.driver_version}, {nvml.gpu_count} GPU(s)" if nvml.usable else f"not usable: {nvml.error}")
    out.print(table, markup=False)
    raise typer.Exit(EXIT_OK if info.jax_available else EXIT_FAILED)


@app.command()
def schema(model: Optional[str] = typer.Argument(None, help="One of the result files; all when omitted.")) -> None:
    """Print the JSON Schema of jaxrun's result files."""
    from .resultfiles import SCHEMAS, json_schema

    if model is None:
        document = {name: json_schema(name) for name in SCHEMAS}
    elif model in SCHEMAS:
        document = json_schema(model)
    else:
        raise fail_usage(f"unknown schema {model!r}: choose one of {', '.join(SCHEMAS)}")
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


def _register_analysis_commands() -> None:
    from .cli_history import compare, history

    app.command()(compare)
    app.command()(history)


_register_analysis_commands()


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code instead of calling sys.exit when embedded."""
    try:
        app(args=argv, prog_name="jaxrun", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    return EXIT_OK
