"""``jaxrun devices``, ``jaxrun check`` and ``jaxrun schema``: what jaxrun sees and writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import click

from jaxrun.core.formatting import plural
from jaxrun.errors import JAXExecutionError, UsageError
from jaxrun.interfaces.cli.console import EXIT_FAILED, EXIT_OK, err, fail_usage, out


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the device facts as JSON.")
@click.option("--refresh", is_flag=True, help="Probe again instead of using the cache.")
@click.option("--python", "python", metavar="PATH", default=None,
              help="The facts as this interpreter (another environment's bin/python) sees them.")
def devices(as_json: bool, refresh: bool, python: Optional[str]) -> None:
    """Show the JAX platforms and devices of this machine (read in a child process)."""
    from rich.table import Table
    from rich.text import Text

    from jaxrun.discover.devices import get_jax_device_info

    try:
        facts = get_jax_device_info(refresh=refresh, python=python)
    except UsageError as exc:
        raise fail_usage(str(exc)) from None
    except JAXExecutionError as exc:
        err.print(f"jaxrun: {exc}", markup=False)
        raise click.exceptions.Exit(EXIT_FAILED) from None
    if as_json:
        sys.stdout.write(facts.model_dump_json(indent=2) + "\n")
        return
    if not facts.jax_available:
        out.print(f"JAX is not usable: {facts.error}", markup=False)
        raise click.exceptions.Exit(EXIT_FAILED)
    out.print(f"jax {facts.jax_version}, jaxlib {facts.jaxlib_version}, default backend {facts.default_backend}")
    table = Table()
    for column in ("platform", "available", "backend", "devices", "details"):
        table.add_column(column)
    for name, p in facts.platforms.items():
        kinds = sorted({d.device_kind for d in p.devices})
        details = ", ".join(kinds) if p.available else (p.error or "")
        table.add_row(name, _availability(p), p.backend or "-", str(len(p.devices)), Text(details))
    out.print(table)


def _availability(platform) -> str:  # type: ignore[no-untyped-def]
    """yes, not installed (no libtpu, no CUDA/ROCm backend) or unavailable (installed, not usable)."""
    if platform.available:
        return "yes"
    return "not installed" if platform.installed is False else "unavailable"


def _version(dist: str) -> str:
    from importlib import metadata  # ~12 ms: only for jaxrun check

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@click.command()
def check() -> None:
    """Check the installation: JAX, its devices, JAX libraries and NVML."""
    from rich.table import Table
    from rich.text import Text

    from jaxrun.discover.devices import get_jax_device_info
    from jaxrun.discover.nvml import nvml_status

    try:
        facts = get_jax_device_info(refresh=True)
    except JAXExecutionError as exc:
        err.print(f"jaxrun: {exc}", markup=False)
        raise click.exceptions.Exit(EXIT_FAILED) from None
    from jaxrun.core.version import __version__  # read on use: `jaxrun --help` need not look for it

    table = Table(title=f"jaxrun {__version__} check", title_justify="left")
    table.add_column("item")
    table.add_column("status")

    def row(item: str, status: str) -> None:
        table.add_row(item, Text(status))

    row("python", f"{facts.python_version} ({facts.python_executable})")
    row("jax", facts.jax_version or f"not usable: {facts.error}")
    row("jaxlib", facts.jaxlib_version or "not installed")
    for name, p in facts.platforms.items():
        state = f"{plural(len(p.devices), 'device')} via {p.backend}" if p.available else f"{_availability(p)}: {p.error}"
        row(f"platform {name}", state)
    from jaxrun.discover.nvml import driver_cuda_version

    cuda = driver_cuda_version()
    row("NVIDIA driver", f"supports CUDA {cuda[0]}.{cuda[1]}" if cuda else "not found")
    for dist in ("optax", "flax", "equinox"):
        row(dist, _version(dist))
    nvml = nvml_status()
    row("NVML", f"usable, driver {nvml.driver_version}, {plural(nvml.gpu_count or 0, 'GPU')}" if nvml.usable
        else f"not usable: {nvml.error}")
    out.print(table, markup=False)
    raise click.exceptions.Exit(EXIT_OK if facts.jax_available else EXIT_FAILED)


@click.command()
@click.argument("model", required=False)
def schema(model: Optional[str]) -> None:
    """Print the JSON Schema of jaxrun's result files.

    MODEL: one of the result files; all when omitted."""
    from jaxrun.results.result_files import SCHEMAS, json_schema

    if model is None:
        document = {name: json_schema(name) for name in SCHEMAS}
    elif model in SCHEMAS:
        document = json_schema(model)
    else:
        raise fail_usage(f"unknown schema {model!r}: choose one of {', '.join(SCHEMAS)}")
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


@click.command()
@click.option("--root", type=click.Path(path_type=Path), multiple=True, metavar="DIR",
              help="A folder clients may name (repeatable); default: the working folder.")
def mcp(root: tuple[Path, ...]) -> None:
    """Serve jaxrun's MCP tools over stdio (execute.run_jax_scripts, execute.check_jax_availability,
    execute.monitor_jax_performance, execute.benchmark_jax_script, history.changes)."""
    from jaxrun.core.extras import require
    from jaxrun.errors import JAXExecutionError

    try:
        require("mcp")  # missing or broken: one line, not a traceback from the server's imports
        from jaxrun.interfaces.mcp_server import serve
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    except ImportError:
        raise fail_usage("jaxrun mcp needs the MCP SDK: pip install 'jaxrun[mcp]'") from None
    for folder in root or ():
        if not folder.is_dir():
            raise fail_usage(f"--root {str(folder)!r} is not a folder; pass folders clients may use")
    serve(list(root or ()))
