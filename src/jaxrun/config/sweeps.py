"""Parameter sweeps (``--param batch=32,64 --param devices=1,2``, a ``sweep`` table of the config
file, a per-script one): the values, checked once; the points (the cartesian product of each
grid, or its values side by side with ``--zip``); and what a point changes in its run.

Every point passes its parameters to the script (probe/sweep_point.py: ``JAXRUN_PARAMS``,
``JAXRUN_PARAM_<NAME>``, ``jaxrun.params()``, and ``{name}`` in the script's arguments and in
``--env`` values). A few parameters jaxrun applies itself (:data:`SPECIAL`): ``devices`` (simulated
CPU devices, or the first N GPUs), ``device``, ``x64``, ``matmul_precision``, ``xla_flags`` and
``python``.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Iterable, Mapping

from jaxrun.core.validate import validate_device, validate_matmul_precision
from jaxrun.errors import UsageError

# A sweep of more points than this is almost surely a mistake (a product of five 10-value lists).
MAX_POINTS = 10_000

Grid = dict[str, tuple[Any, ...]]  # each parameter's values, in the order given
Point = dict[str, Any]



def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"parameter {name}: a device count is a whole number >= 1, got {value!r}")
    return value


def _switch(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"parameter {name}: true or false, got {value!r}")
    return value


def _flags(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"parameter {name}: XLA flags like --xla_cpu_enable_fast_math=false, got {value!r}")
    return value.strip()


def _python(name: str, value: Any) -> str:
    from jaxrun.core.interpreters import validate_python

    return validate_python(str(value))  # type: ignore[return-value]


# The parameters jaxrun applies itself (each checked here, applied by point_changes and the plan).
SPECIAL: dict[str, Callable[[str, Any], Any]] = {
    "devices": _count,
    "device": lambda name, value: validate_device(str(value)),
    "x64": _switch,
    "matmul_precision": lambda name, value: validate_matmul_precision(value),
    "xla_flags": _flags,
    "python": _python,
}


def typed(text: str) -> Any:
    """A value typed on the command line as its type: ``64`` -> 64, ``1e-3`` -> 0.001,
    ``true`` -> True, anything else the text itself."""
    word = text.strip()
    digits = word[1:] if word[:1] in "+-" else word
    if digits.isascii() and digits.isdigit():
        return int(word)
    if word.lower() in ("true", "false"):
        return word.lower() == "true"
    try:
        number = float(word)
    except ValueError:
        return word
    return number if math.isfinite(number) else word


def _scalar(name: str, value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    raise UsageError(f"parameter {name}: values are numbers, true/false or text, got {value!r}")


def _values(name: str, values: Any) -> tuple[Any, ...]:
    if not isinstance(name, str) or not (name.isascii() and name.isidentifier()):
        raise UsageError(f"parameter name {name!r}: use letters, digits and _ (it becomes the variable "
                         f"JAXRUN_PARAM_<NAME> and {{name}} in the script's arguments)")
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    if not items:
        raise UsageError(f"parameter {name} has no values: give at least one (--param {name}=V1,V2)")
    check = SPECIAL.get(name, _scalar)
    checked = [check(name, item) for item in items]
    seen: dict[str, Any] = {}
    for item in checked:
        key = f"{type(item).__name__}:{item}"
        if key in seen:
            raise UsageError(f"parameter {name} lists {item!r} twice")
        seen[key] = item
    return tuple(checked)


def _from_specs(specs: Iterable[str]) -> Grid:
    """``["batch=32,64", "lr=1e-3"]`` (``--param``, repeated) -> one grid."""
    grid: dict[str, tuple[Any, ...]] = {}
    for spec in specs:
        name, sep, text = str(spec).partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"a parameter is NAME=V1,V2,... (--param batch=32,64), got {spec!r}")
        if name in grid:
            raise UsageError(f"parameter {name} is given twice: list all its values in one --param {name}=V1,V2")
        grid[name] = _values(name, [typed(part) for part in text.split(",") if part.strip()])
    return grid


def _from_table(table: Mapping[str, Any]) -> Grid:
    return {name: _values(name, values) for name, values in table.items()}


def parse_sweep(value: Any) -> tuple[Grid, ...] | None:
    """The ``sweep`` option: None, or its grids. Given as ``--param`` texts (``"batch=32,64"``, a
    list of them, or ``JAXRUN_SWEEP="batch=32,64 devices=1,2"``), a table (``batch = [32, 64]``)
    or a list of tables (``[[sweep]]``: the points of each, one after the other)."""
    if value is None:
        return None
    if isinstance(value, str):
        import shlex  # only for the environment's and a header comment's text

        value = shlex.split(value)
    if isinstance(value, Mapping):
        grids = (_from_table(value),)
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping) for v in value):
        grids = tuple(_from_table(v) for v in value)
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        grids = (_from_specs(value),)
    else:
        raise UsageError(f"sweep must be NAME=V1,V2 texts (--param), a table of lists (batch = [32, 64]) or a list "
                         f"of such tables, got {value!r}")
    if not all(grids):  # an empty table: a sweep of nothing, most likely its values left out by mistake
        raise UsageError("sweep has a table without parameters: give each NAME = [V1, V2, ...], or leave the sweep out")
    return grids


def parse_point(value: Any) -> Point | None:
    """The ``params`` option (one point, as the plan or ``execute_jax_script(params=...)`` gives it)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UsageError(f"params must be a mapping of parameter names to values, got {value!r}")
    if not value:
        raise UsageError("params has no parameters: give NAME = VALUE pairs, or leave it out")
    return {name: _values(name, [item])[0] for name, item in value.items()}


def points(grids: tuple[Grid, ...], zipped: bool = False) -> list[Point]:
    """Every point of the sweep, in order, each once: per grid, the product of its values (the
    last parameter varying fastest), or with ``zipped`` its values side by side."""
    out: dict[str, Point] = {}
    for grid in grids:
        names, lists = list(grid), list(grid.values())
        if zipped:
            lengths = {name: len(values) for name, values in grid.items()}
            if len(set(lengths.values())) > 1:
                shown = ", ".join(f"{name} has {n}" for name, n in lengths.items())
                raise UsageError(f"--zip pairs the parameters' values one by one, so each needs as many: {shown}")
            combos: Iterable[tuple[Any, ...]] = zip(*lists)
        else:
            total = math.prod(len(values) for values in lists)
            if total > MAX_POINTS:
                raise UsageError(f"the sweep has {total:,} points (more than {MAX_POINTS:,}): sweep fewer values, "
                                 "or pair them with --zip")
            combos = itertools.product(*lists)
        for combo in combos:
            point = dict(zip(names, combo))
            out.setdefault(repr(sorted((k, type(v).__name__, v) for k, v in point.items())), point)
    if len(out) > MAX_POINTS:
        raise UsageError(f"the sweep has {len(out):,} points (more than {MAX_POINTS:,}): sweep fewer values")
    return list(out.values())


def names_of(grids: tuple[Grid, ...]) -> list[str]:
    """Every parameter of the sweep, in the order first given."""
    return list(dict.fromkeys(name for grid in grids for name in grid))


def substitute(text: str, point: Mapping[str, Any]) -> str:
    """``{batch}`` in ``text`` replaced by the point's value (a name not in the point is left as
    written, braces and all: arguments may hold JSON)."""
    import re  # compiled on first use: not on the way to the first script of a batch without a sweep

    from jaxrun.probe.sweep_point import value_text

    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}",
                  lambda m: value_text(point[m.group(1)]) if m.group(1) in point else m.group(0), text)


def point_changes(point: Mapping[str, Any], args: tuple[str, ...] | None,
                  env: Mapping[str, str] | None) -> dict[str, Any]:
    """What ``point`` changes in its run's options: the parameters themselves, the options of the
    special ones it sets (``devices`` is the simulated CPU devices here; on GPUs the plan also
    chooses them), and ``{name}`` in the arguments and the variables."""
    changes: dict[str, Any] = {"params": dict(point), "sweep": None, "sweep_zip": False}
    if "devices" in point:
        changes["host_devices"] = point["devices"]
    for name in ("x64", "matmul_precision", "xla_flags", "python"):
        if name in point:
            changes[name] = point[name]
    if args:
        changes["args"] = tuple(substitute(a, point) for a in args)
    if env:
        changes["env"] = {k: substitute(v, point) for k, v in env.items()}
    return changes
