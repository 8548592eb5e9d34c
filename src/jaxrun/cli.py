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


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _summary_table(results: list) -> Table:
    table = Table(title="jaxrun results", title_justify="left")
    for column, justify in (
        ("script", "left"), ("status", "left"), ("device", "left"), ("time s", "right"),
        ("body s", "right"), ("jit s", "right"), ("compiles", "right"), ("peak RSS MB", "right"),
    ):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for r in results:
        status = "[green]ok[/green]" if r.success else f"[red]{r.error_class}[/red]"
        device = r.device_used or "-"
        if r.fallback_reason:
            device += f" (fallback from {r.device_requested})"
        table.add_row(
            Text(r.script_name), status, Text(device), _fmt(r.execution_time), _fmt(r.body_time),
            _fmt(r.jit_compile_time), "-" if r.compile_count is None else str(r.compile_count),
            _fmt(r.memory_peak, 0),
        )
    return table


@app.command()
def run(
    paths: List[Path] = typer.Argument(..., help="Folders of JAX scripts, or .py files."),
    device: str = typer.Option("auto", "--device", "-d", help="auto, cpu, gpu or tpu."),
    timeout: Optional[float] = typer.Option(300.0, help="Seconds per script before it is stopped."),
    recursive: bool = typer.Option(True, "--recursive/--no-recursive", help="Search sub-folders."),
    include: Optional[List[str]] = typer.Option(None, help="Only scripts matching this glob (repeatable)."),
    exclude: Optional[List[str]] = typer.Option(None, help="Skip scripts matching this glob (repeatable)."),
    results_dir: Path = typer.Option(Path("jaxrun_results"), help="Where result files are written."),
    jobs: int = typer.Option(1, help="Scripts run at once (only 1 in this version)."),
    retries: int = typer.Option(0, help="Retries of transient failures (missing device, accelerator OOM)."),
    no_fallback: bool = typer.Option(False, "--no-fallback", help="Do not re-run failed accelerator scripts on CPU."),
    debug_nans: bool = typer.Option(False, "--debug-nans", help="Run with jax_debug_nans: a NaN is an error."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log each attempt."),
) -> None:
    """Run every JAX script under PATHS, each in its own process, and write the results folder."""
    from .batch import run_jax_scripts
    from .config import validate_device

    try:
        validate_device(device)
        for path in paths:
            if not path.exists():
                raise fail_usage(f"no such file or folder: {str(path)!r} — pass a folder of JAX scripts or a .py file")
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None

    def on_start(index: int, total: int, name: str) -> None:
        err.print(f"[{index}/{total}] {name} ...", markup=False)

    def on_result(index: int, total: int, result) -> None:  # type: ignore[no-untyped-def]
        if result.success:
            err.print(f"  [green]ok[/green] {result.device_used}, {_fmt(result.execution_time)} s")
        else:
            err.print(f"  [red]{result.error_class}[/red]: ", end="")
            err.print(result.error_message or "", markup=False)

    try:
        batch = run_jax_scripts(
            paths, recursive, device=device, timeout=timeout, verbose=verbose, results_dir=results_dir,
            jobs=jobs, return_detailed_results=True, include=include or None, exclude=exclude or None,
            retries=retries, fallback=not no_fallback, debug_nans=debug_nans,
            on_start=None if verbose else on_start, on_result=on_result,
        )
    except KeyboardInterrupt:
        err.print(f"jaxrun: interrupted; partial results are in {results_dir}", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    assert not isinstance(batch, bool)
    out.print(_summary_table(batch.script_results))
    meta = batch.metadata
    out.print(
        f"{meta.scripts_successful}/{meta.scripts_executed} succeeded; results in {meta.results_dir}",
        markup=False,
    )
    raise typer.Exit(EXIT_OK if batch.success else EXIT_FAILED)


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


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code instead of calling sys.exit when embedded."""
    try:
        app(args=argv, prog_name="jaxrun", standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    return EXIT_OK
