"""Small helpers shared by the test modules (crafted scripts in tmp folders, result files)."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from types import ModuleType

from jaxrun.models import BatchResult


def write(root: Path, rel: str, text: str) -> Path:
    """Write a dedented script at ``root/rel`` (folders created) and return its path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def load_module(path: Path, module_name: str) -> ModuleType:
    """Import a script (an example program) as a module, by its file path."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_batch(folder: Path, results: Path, **options) -> BatchResult:
    """``run_jax_scripts`` on CPU with no history and no compile cache unless a test asks for them."""
    import jaxrun

    options.setdefault("device", "cpu")
    options.setdefault("history", False)
    options.setdefault("compile_cache", False)
    result = jaxrun.run_jax_scripts(folder, results_dir=results, return_detailed_results=True, **options)
    assert isinstance(result, BatchResult)
    return result


# A Ctrl-C must reach Python's handler even if the tests run with SIGINT ignored (as background jobs
# of a non-interactive shell do): this shim restores the default and execs jaxrun, rather than a
# preexec_fn, which forks a process that may already hold JAX's threads.
_SIGINT_SHIM = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'jaxrun', *sys.argv[1:]])"
)


def jaxrun_command_with_sigint(*args: str) -> list[str]:
    """``python -m jaxrun ARGS`` that Ctrl-C (SIGINT) can interrupt."""
    return [sys.executable, "-c", _SIGINT_SHIM, *args]
