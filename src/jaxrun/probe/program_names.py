"""Program names for JAX compile events: ``jit(grad(loss))`` instead of JAX's ``loss``.

``jax.monitoring`` names a compile event by the Python function's name only: ``jit(loss)``,
``jit(grad(loss))`` and ``jit(vmap(loss))`` are all ``loss``, and ``pmap(f)`` is ``_fun``. So when
the trace event fires, we look a few frames up the stack for the callable JAX is tracing and
unwrap it (JAX's transformation wrappers, ``functools.partial``, nested ``jit``) into the program
as the user wrote it and the source location of the user's function. That is JAX-internal
territory: whatever cannot be recognised falls back to ``jit(<name>)``, never to an error.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import Any

# Lowering and compiling report `jit(f)` / `pmap(f)` while tracing reports `f`.
_WRAPPED = re.compile(r"^(?:jit|pjit|pmap|xla_pmap|shard_map)\((.*)\)$")

_LAYERED = re.compile(r"^[A-Za-z_][\w.]*\((.*)\)$")


def base_name(program: str) -> str:
    """The function's own name in a program key: ``jit(grad(loss)) @ m.py:4`` -> ``loss``."""
    name = program.split(" @ ", 1)[0]
    while True:
        match = _LAYERED.match(name)
        if not match:
            return name
        name = match.group(1)


def function_name(raw: object) -> str:
    """``jit(f)`` -> ``f``: the name a trace event gives for a lowering or compile event's name."""
    name = str(raw) if raw is not None else "<unknown>"
    match = _WRAPPED.match(name)
    return match.group(1) if match else name


def program_key(program: str, source: str | None, seen: "dict[str, str | None]") -> str:
    """The key of ``program`` among those in ``seen`` (key -> source, updated): the program itself,
    or ``program @ file:line`` when another function of the same name took the plain key first."""
    key = program
    if seen.setdefault(program, source) != source and source is not None:
        path, _, line = source.rpartition(":")
        key = f"{program} @ {os.path.basename(path)}:{line}"
        seen.setdefault(key, source)
    return key


# --- naming the program ----------------------------------------------------------------------------

_JAX_DIR = os.sep + "jax" + os.sep  # replaced by jax's own folder (set_jax_dir) once jax is imported
# JAX's wrappers, by (file stem, code name) or code name: what the user wrote.
_LAYERS = {
    "grad_f": "grad", "vmap_f": "vmap", "value_and_grad_f": "value_and_grad", "fun_remat": "checkpoint",
    "jacfun": "jac", "hessian": "hessian", ("pmap", "_fun"): "pmap", ("shard_map", "wrapped"): "shard_map",
}
_TRANSPARENT = {"reraise_with_filtered_traceback"}  # api_boundary: the real wrapper is in its closure


def _unwrapped(value: Any) -> Any:
    """A callable, or the Python function inside a ``linear_util.WrappedFun``; else None."""
    if hasattr(value, "transforms") and callable(getattr(value, "f", None)):
        return value.f
    return value if callable(value) and not isinstance(value, type) else None


def _inner(fn: Any) -> Any:
    """The callable a JAX wrapper closes over (its free variable ``fun``, ``f`` or ``fn``, or its
    only callable one), else its ``__wrapped__``."""
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    if code is not None:
        values = {}
        for name, cell in zip(code.co_freevars, cells):
            try:
                value = _unwrapped(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
            if value is not None:
                values[name] = value
        for name in ("fun", "f", "fn"):
            if name in values:
                return values[name]
        if len(values) == 1:
            return next(iter(values.values()))
    return getattr(fn, "__wrapped__", None)


def _in_jax(fn: Any) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and _JAX_DIR in code.co_filename


def _layer(fn: Any) -> str | None:
    code = fn.__code__
    stem = os.path.splitext(os.path.basename(code.co_filename))[0]
    return _LAYERS.get((stem, code.co_name)) or _LAYERS.get(code.co_name)


def describe(fun: Any) -> tuple[str, str | None]:
    """``(program, source)`` for the callable JAX traces for ``jit``: ``("jit(grad(loss))", "m.py:4")``."""
    layers: list[str] = []
    fn = fun
    for _ in range(16):
        if isinstance(fn, functools.partial):
            fn = fn.func
            continue
        if type(fn).__name__ == "PjitFunction":
            layers.append("jit")
            fn = getattr(fn, "__wrapped__", None)
            continue
        if not _in_jax(fn):
            break  # the user's function (or something we do not know): its name is the program's
        inner, wrapped = _inner(fn), getattr(fn, "__wrapped__", None)
        if fn.__code__.co_name in _TRANSPARENT:
            # JAX's API boundary around a transformation of the user's function: the boundary's
            # __wrapped__ is that function, its closure the transformation (grad_f, vmap_f, ...).
            layer = _layer(inner) if _in_jax(inner) else None
            if layer is not None and wrapped is not None and not _in_jax(wrapped):
                layers.append(layer)
                fn = wrapped
            else:
                fn = inner or wrapped
            continue
        if inner is None:
            break
        layer = _layer(fn)
        if layer is not None:
            layers.append(layer)
        fn = inner
    base_code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", None) or type(fn).__name__  # as JAX names it; the source tells apart
    source = None
    if base_code is not None and _JAX_DIR not in base_code.co_filename:
        source = f"{base_code.co_filename}:{base_code.co_firstlineno}"
    if layers[:2] == ["shard_map", "pmap"]:
        layers = layers[1:]  # pmap is implemented with shard_map: the user wrote pmap
    if not layers or layers[0] not in ("pmap", "shard_map"):
        layers.insert(0, "jit")  # the event came from tracing for jit
    program = name
    for layer in reversed(layers):
        program = f"{layer}({program})"
    return program, source


def traced_callable() -> Any:
    """The callable JAX was tracing when the trace event fired: a local ``fun`` a few frames up."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        if _JAX_DIR in frame.f_code.co_filename and "fun" in frame.f_code.co_varnames:
            fun = frame.f_locals.get("fun")
            if fun is not None:
                return getattr(fun, "f", fun) if hasattr(fun, "transforms") else fun  # lu.WrappedFun
        frame = frame.f_back
    return None


def set_jax_dir(path: str) -> None:
    """Where jax is installed: code there is JAX's, code elsewhere the user's."""
    global _JAX_DIR
    _JAX_DIR = os.path.dirname(os.path.abspath(path)) + os.sep
