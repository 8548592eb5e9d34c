"""The abstract signature of a call, and what changed between two of them.

JAX compiles a jitted function once per *abstract* signature: the pytree structure of every
argument, the shape, dtype and weak type of every array leaf, and the value of every static
argument. Recording that signature per named argument (from ``inspect.signature``) lets a
recompilation be explained in the user's terms: "argument 'x' changed shape from (3,) to (4,)".
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from jaxrun.core.formatting import listed

_SCALARS = (bool, int, float, complex)
_REPR_LIMIT = 60


@dataclass(frozen=True, eq=False)
class Leaf:
    """One leaf: an array (shape, dtype, weak type), a Python scalar, or another (static) object."""

    kind: str  # "array" | "scalar" | "object"
    shape: tuple[int, ...] | None = None
    dtype: str | None = None  # the type's name for scalars and objects
    weak_type: bool = False
    value: Any = None  # scalars and objects: their value matters when the argument is static

    def shown(self) -> str:
        return _short(repr(self.value))

    def describe(self) -> str:
        if self.kind == "array":
            return f"{self.dtype}{list(self.shape or ())}" + (" (weakly typed)" if self.weak_type else "")
        return f"{self.dtype} {self.shown()}"

    def same_value(self, other: "Leaf") -> bool:
        try:
            return bool(self.value == other.value)
        except Exception:  # an object whose == is not a plain bool
            return self.value is other.value

    def differs(self, other: "Leaf") -> bool:
        return (self.kind, self.shape, self.dtype, self.weak_type) != (
            other.kind, other.shape, other.dtype, other.weak_type
        ) or not self.same_value(other)


@dataclass(frozen=True)
class ArgSignature:
    """Cheap to record on every call (one C++ flatten); leaf paths are only worked out for a message."""

    structure: Any  # the PyTreeDef (compares by structure)
    leaves: tuple[Leaf, ...]
    passed: str = "position"  # "position" | "keyword" | "default": jit keys its cache on how, too

    def paths(self) -> list[str]:
        import jax

        placeholder = self.structure.unflatten(list(range(len(self.leaves))))
        return [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(placeholder)[0]]


def _short(text: str) -> str:
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def leaf_of(x: Any) -> Leaf:
    if isinstance(x, _SCALARS):
        # Python scalars are traced as weakly-typed values; only their type is part of the
        # signature unless the argument is static, when the value is.
        return Leaf("scalar", dtype=type(x).__name__, value=x)
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is not None and dtype is not None:
        return Leaf("array", tuple(shape), str(dtype), bool(getattr(x, "weak_type", False)))
    return Leaf("object", dtype=type(x).__name__, value=x)


def arg_signature(value: Any, passed: str = "position") -> ArgSignature:
    import jax

    flat, treedef = jax.tree_util.tree_flatten(value)
    return ArgSignature(treedef, tuple(leaf_of(x) for x in flat), passed)


def bind_arguments(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], signature: inspect.Signature | None = None
) -> dict[str, tuple[Any, str]]:
    """``{name: (value, how)}`` with ``how`` "position", "keyword" or "default" (filled in from the
    signature); ``*args`` become ``args[0]``..., and a call that does not bind (no signature)
    gives ``arg0``, ``arg1``...."""
    try:
        signature = signature or inspect.signature(fn)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):  # builtins without a signature, or a call that will fail anyway
        named = {f"arg{i}": (a, "position") for i, a in enumerate(args)}
        named.update({k: (v, "keyword") for k, v in kwargs.items()})
        return named
    explicit = set(bound.arguments)
    bound.apply_defaults()
    named: dict[str, tuple[Any, str]] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            named.update({f"{name}[{i}]": (v, "position") for i, v in enumerate(value)})
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named.update({k: (v, "keyword") for k, v in value.items()})
        else:
            how = "keyword" if name in kwargs else "position" if name in explicit else "default"
            named[name] = (value, how)
    return named


def call_signature(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], signature: inspect.Signature | None = None
) -> dict[str, ArgSignature]:
    return {name: arg_signature(v, how) for name, (v, how) in bind_arguments(fn, args, kwargs, signature).items()}


@dataclass(frozen=True)
class Change:
    argument: str
    kind: str  # "added" | "removed" | "structure" | "shape" | "dtype" | "weak_type" | "value" | "passed"
    message: str


def _where(argument: str, path: str) -> str:
    return f"argument {argument!r}" + (f" at {path}" if path else "")


def _leaf_changes(argument: str, path: str, old: Leaf, new: Leaf) -> list[Change]:
    where = _where(argument, path)
    if old.kind != new.kind or (old.kind != "array" and old.dtype != new.dtype):
        return [Change(argument, "dtype", f"{where} changed from {old.describe()} to {new.describe()}")]
    if old.kind == "array":
        changes = []
        if old.shape != new.shape:
            changes.append(Change(argument, "shape", f"{where} changed shape from {old.shape} to {new.shape}"))
        if old.dtype != new.dtype:
            changes.append(Change(argument, "dtype", f"{where} changed dtype from {old.dtype} to {new.dtype}"))
        elif old.weak_type != new.weak_type:
            strength = ("weakly", "strongly") if old.weak_type else ("strongly", "weakly")
            changes.append(
                Change(argument, "weak_type", f"{where} changed from a {strength[0]}-typed to a {strength[1]}-typed {new.dtype}")
            )
        return changes
    if not old.same_value(new):
        return [Change(argument, "value", f"{where} changed value from {old.shown()} to {new.shown()}")]
    return []


def diff(old: dict[str, ArgSignature], new: dict[str, ArgSignature]) -> list[Change]:
    """Every change from ``old`` to ``new``, most telling first (structure, shape, dtype, value)."""
    changes: list[Change] = []
    for name in new.keys() - old.keys():
        changes.append(Change(name, "added", f"argument {name!r} was passed now but not before"))
    for name in old.keys() - new.keys():
        changes.append(Change(name, "removed", f"argument {name!r} was passed before but not now"))
    for name in (n for n in new if n in old):
        a, b = old[name], new[name]
        if a.structure != b.structure:
            changes.append(
                Change(name, "structure", f"argument {name!r} changed pytree structure from "
                       f"{_short(str(a.structure))} to {_short(str(b.structure))}")
            )
            continue
        differing = [i for i, (la, lb) in enumerate(zip(a.leaves, b.leaves)) if la.differs(lb)]
        if differing:
            paths = b.paths()
            for i in differing:
                changes.extend(_leaf_changes(name, paths[i], a.leaves[i], b.leaves[i]))
        elif a.passed != b.passed:
            how = {"position": "passed by position", "keyword": "passed by keyword", "default": "left to its default"}
            changes.append(Change(name, "passed", f"argument {name!r} was {how[a.passed]} before and {how[b.passed]} now"))
    order = ["added", "removed", "structure", "shape", "dtype", "weak_type", "value", "passed"]
    return sorted(changes, key=lambda c: order.index(c.kind))


_ADVICE = {
    "added": "pass the same arguments on every call",
    "removed": "pass the same arguments on every call",
    "structure": "keep the pytree structure fixed (same keys, same list lengths, no None that comes and goes)",
    "shape": "keep shapes fixed (pad or bucket) or mark the argument static",
    "dtype": "cast to one dtype before the call",
    "weak_type": "pass a jnp array of fixed dtype instead of mixing Python scalars and arrays",
    "value": "a static argument compiles once per value: keep it fixed, or make it a traced argument",
    "passed": "jax.jit caches on the arguments as passed: pass it the same way on every call",
}


def explain(changes: list[Change]) -> str:
    """``"argument 'x' changed shape from (3,) to (4,); keep shapes fixed ..."``."""
    parts = listed([c.message for c in changes], 4, "; ", what="more changes")
    advice = []
    for c in changes:
        if _ADVICE[c.kind] not in advice:
            advice.append(_ADVICE[c.kind])
    return f"{parts}; {'; '.join(advice)}"
