"""Every JAX internal jaxrun relies on, in one place, each with a check that says when it moved.

JAX's public API says nothing about which program a compile event belongs to, hands out no
executable at compile time, and has no way to print an optimized program without its source
lines. What jaxrun needs of that comes from JAX's private modules and from the locals of two of
its functions; all of it is here (and ``program_names.traced_callable``: the callable a trace event
belongs to, a local ``fun`` of JAX's frames, with the event's name as its fallback). :func:`check`
lists what this JAX lacks (``tests/probe/test_xla_facts.py`` fails, naming it, on a JAX where one moved),
and each caller falls back to null with the reason (:data:`MOVED`) instead of failing the script.

Nothing here imports jax at import time: the probe loads this module only once the script has.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from typing import Any, Callable

__all__ = [
    "COMPILING_FRAME", "EXPLAIN_LOGGERS", "LOWERING_FRAME", "MOVED", "backend_errors", "backends", "backends_initialized",
    "caller_locals", "check", "register_cluster", "hlo_analysis", "source_info_util", "input_fingerprint", "optimized_text",
]

# JAX's functions whose locals hold the program being lowered or compiled (jax/_src/interpreters/
# pxla.py), and the locals read there. The compile event fires as ``_cached_compilation`` leaves
# its ``log_elapsed_time`` block, after ``xla_executable`` is assigned.
LOWERING_FRAME = "_cached_lowering_to_hlo"
LOWERING_LOCALS = ("closed_jaxpr", "lowering_result")
COMPILING_FRAME = "_cached_compilation"
COMPILING_LOCALS = ("computation", "xla_executable", "dev")
_FRAMES_SEARCHED = 12

MOVED = "a JAX internal jaxrun reads has moved in this JAX version ({what}): XLA's analyses cannot be read"

# Where JAX logs its cache-miss explanations ("TRACING CACHE MISS"; with a persistent cache also
# "PERSISTENT COMPILATION CACHE MISS"): probe/programs.py filters them.
EXPLAIN_LOGGERS = (
    "jax._src.interpreters.partial_eval",
    "jax._src.pjit",
    "jax._src.linear_util",
    "jax._src.util",
    "jax._src.compiler",
    "jax._src.compilation_cache",
)


def caller_locals(code_name: str, names: tuple[str, ...], depth: int = 2) -> tuple[Any, ...] | None:
    """The locals ``names`` of the nearest caller frame running JAX's ``code_name``, or None."""
    frame = sys._getframe(depth)
    for _ in range(_FRAMES_SEARCHED):
        if frame is None:
            return None
        if frame.f_code.co_name == code_name:
            values = frame.f_locals
            return tuple(values.get(name) for name in names)
        frame = frame.f_back
    return None


def backends_initialized() -> bool:
    """Whether JAX has started a backend (asking for devices would start one: ms on CPU, s on a GPU)."""
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())


def backends() -> dict[str, Any]:
    """The PJRT clients JAX has started, by platform."""
    from jax._src import xla_bridge

    return dict(xla_bridge.backends())


def backend_errors() -> dict[str, str]:
    """Why each platform that failed to start failed."""
    from jax._src import xla_bridge

    return dict(getattr(xla_bridge, "_backend_errors", {}) or {})


def source_info_util() -> Any:
    """JAX's module that turns an equation's source info into ``file:line`` (a jaxpr's loops)."""
    from jax._src import source_info_util as module

    return module


def hlo_analysis() -> tuple[Callable[[str], Any], Callable[[Any, Any], Any]]:
    """XLA's HLO text parser and its cost analysis of a parsed module on a client."""
    from jax._src.lib import hlo, xla_client

    return hlo.hlo_module_from_text, xla_client._xla.hlo_module_cost_analysis


def _print_options() -> Any:
    """The optimized program as text without what changes between processes for the same program:
    source lines (metadata), instruction ids and names, backend configs (autotuning choices)."""
    from jaxlib import _hlo

    options = _hlo.HloPrintOptions.canonical()
    options.print_metadata = False
    options.print_backend_config = False
    # Small constants are printed (a changed learning rate is a changed program); large ones are
    # elided, their values are in the input fingerprint.
    options.print_large_constants = False
    return options


def optimized_text(executable: Any) -> str:
    """The optimized modules of a loaded executable, printed for fingerprinting."""
    options = _print_options()
    return "\n".join(module.to_string(options) for module in executable.hlo_modules())


def input_fingerprint(computation: Any) -> str:
    """sha256 of the StableHLO module JAX handed XLA without its debug info: the ``computation``
    part of JAX's persistent-cache key (jax/_src/cache_key.py ``_canonicalize_ir``)."""
    from jax._src import cache_key
    from jax._src.lib.mlir import passmanager

    with computation.context:
        module = computation.operation.clone()
        passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(module.operation)
        serialized = cache_key._serialize_ir(module, cache_key.IgnoreCallbacks.NO)
    return hashlib.sha256(serialized).hexdigest()[:32]


def cache_key_xla_flags() -> list[str]:
    """The XLA flags JAX's persistent-cache key hashes, sorted (jax/_src/cache_key.py
    ``_hash_xla_flags``: XLA_FLAGS, LIBTPU_INIT_ARGS, ``--xla*`` arguments, minus the excluded)."""
    from jax._src import cache_key

    flags = [*os.environ.get("XLA_FLAGS", "").split(), *os.environ.get("LIBTPU_INIT_ARGS", "").split()]
    prefixes = list(cache_key.get_flag_prefixes())
    flags += [a for a in sys.argv if a.startswith("--xla") or any(a.startswith(p) for p in prefixes)]
    excluded = set(cache_key.xla_flags_to_exclude_from_cache_key)
    return sorted(f for f in flags if f.split("=")[0] not in excluded)


def register_cluster(make: Callable[[type], type]) -> type:
    """The class ``make(ClusterEnv)`` returns, registered first among JAX's cluster environments
    (``jax._src.clusters``; probe/cluster.py says why first)."""
    from jax._src import clusters

    types = clusters.ClusterEnv._cluster_types
    cls = make(clusters.ClusterEnv)  # ClusterEnv.__init_subclass__ appends it
    if cls in types:
        types.remove(cls)
    types.insert(0, cls)
    return cls


def _cluster_check() -> str | None:
    from jax._src import clusters

    env = getattr(clusters, "ClusterEnv", None)
    if env is None:
        return "jax._src.clusters has no ClusterEnv"
    needed = ("_cluster_types", "auto_detect_unset_distributed_params", "get_local_process_id")
    missing = [n for n in needed if not hasattr(env, n)]
    return f"ClusterEnv has no {', '.join(missing)}" if missing else None


# --- the check -----------------------------------------------------------------------------------


def _function_names(path: str, function: str) -> set[str] | None:
    """Arguments and assigned names of ``function`` in the module at ``path`` (None: no such function)."""
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            names = {a.arg for a in node.args.args + node.args.kwonlyargs}
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            return names
    return None


def _frame_check(function: str, needed: tuple[str, ...]) -> Callable[[], str | None]:
    def check() -> str | None:
        from jax._src.interpreters import pxla

        names = _function_names(pxla.__file__, function)
        if names is None:
            return f"jax._src.interpreters.pxla.{function} is gone"
        missing = [n for n in needed if n not in names]
        return f"pxla.{function} has no local {', '.join(missing)}" if missing else None

    return check


def _attribute_check(module: str, *attributes: str) -> Callable[[], str | None]:
    def check() -> str | None:
        import importlib

        target = importlib.import_module(module)
        missing = [a for a in attributes if not hasattr(target, a)]
        return f"{module} has no {', '.join(missing)}" if missing else None

    return check


def _executable_check() -> str | None:
    from jax._src.lib import _jax

    needed = ("hlo_modules", "cost_analysis", "get_compiled_memory_stats", "client")
    missing = [n for n in needed if not hasattr(_jax.LoadedExecutable, n)]
    return f"LoadedExecutable has no {', '.join(missing)}" if missing else None


def _hlo_analysis_check() -> str | None:
    parse, analyse = hlo_analysis()
    return None


def _print_options_check() -> str | None:
    _print_options()
    return None


# Each internal, what depends on it, and how to tell it is still there.
INTERNALS: dict[str, tuple[str, Callable[[], str | None]]] = {
    "pxla._cached_lowering_to_hlo locals": ("which program a lowering belongs to",
                                            _frame_check(LOWERING_FRAME, LOWERING_LOCALS)),
    "pxla._cached_compilation locals": ("which program a compilation belongs to, and its executable",
                                        _frame_check(COMPILING_FRAME, COMPILING_LOCALS)),
    "LoadedExecutable analyses": ("cost, memory analysis, fingerprint", _executable_check),
    "jaxlib._hlo.HloPrintOptions": ("the optimized program's fingerprint", _print_options_check),
    "xla_bridge backends": ("whether a device was used; draining; device memory",
                            _attribute_check("jax._src.xla_bridge", "backends_are_initialized", "backends")),
    "hlo parser and cost analysis": ("loops counted by their trip counts",
                                     _hlo_analysis_check),
    "source_info_util": ("the source line of a jaxpr's loop (jaxrun.bench)",
                         _attribute_check("jax._src.source_info_util", "summarize")),
    "clusters.ClusterEnv": ("jax.distributed.initialize() with no arguments in a --processes N job",
                            _cluster_check),
    "cache_key": ("the input fingerprint and the cache key's XLA flags",
                  _attribute_check("jax._src.cache_key", "_serialize_ir", "IgnoreCallbacks", "get_flag_prefixes",
                                   "xla_flags_to_exclude_from_cache_key")),
}


def check() -> dict[str, str | None]:
    """Each internal -> None when this JAX has it, else what moved."""
    problems: dict[str, str | None] = {}
    for name, (_, test) in INTERNALS.items():
        try:
            problems[name] = test()
        except Exception as error:  # an import that fails is a moved internal too
            problems[name] = f"{type(error).__name__}: {error}"
    return problems
