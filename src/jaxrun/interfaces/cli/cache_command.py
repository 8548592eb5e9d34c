"""``jaxrun cache info`` and ``jaxrun cache clear``: JAX's persistent compilation cache that scripts
run with (jaxrun/discover/compile_cache.py), and jaxrun's own cache folder."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import click

from jaxrun.core.formatting import fmt_bytes, plural
from jaxrun.interfaces.cli.console import out

app = click.Group("cache", help="The persistent compilation cache scripts run with: what it holds, and emptying it.",
                  no_args_is_help=True)

_FOLDER_HELP = "The compilation cache folder (default: jaxrun's, as jaxrun run uses it)."


@app.command()
@click.option("--compile-cache", type=click.Path(path_type=Path), metavar="PATH", help=_FOLDER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def info(compile_cache: Optional[Path], as_json: bool) -> None:
    """Where the compilation cache is, how many executables it holds and its size against its bound."""
    from jaxrun.discover.compile_cache import DEFAULT_COMPILE_CACHE_MAX_SIZE, cache_info

    found = cache_info(compile_cache)
    report = {**found.as_dict(), "max_size": DEFAULT_COMPILE_CACHE_MAX_SIZE}
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    when = lambda t: "-" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))  # noqa: E731
    out.print(f"compilation cache: {found.path}{'' if found.exists else ' (not created yet)'}", markup=False)
    out.print(f"  {plural(found.entries, 'executable')}, {fmt_bytes(found.bytes)} of at most "
              f"{fmt_bytes(DEFAULT_COMPILE_CACHE_MAX_SIZE)} (jaxrun run --compile-cache-max-size; JAX deletes the least "
              "recently used past it)", markup=False)
    out.print(f"  oldest {when(found.oldest)}, newest {when(found.newest)}", markup=False)


@app.command()
@click.option("--compile-cache", type=click.Path(path_type=Path), metavar="PATH", help=_FOLDER_HELP)
@click.option("--all", "everything", is_flag=True, help="All of jaxrun's cache folder: the device facts and measured peaks too (not jaxrun ab's checkouts).")
def clear(compile_cache: Optional[Path], everything: bool) -> None:
    """Delete the compiled executables (the next runs compile again and refill it)."""
    from jaxrun.discover.compile_cache import clear_cache

    count, freed = clear_cache(compile_cache, everything=everything)
    out.print(f"deleted {plural(count, 'file')}, {fmt_bytes(freed)}", markup=False)
