"""XLA's cost analysis of a compiled program, with each while loop counted as often as it runs.

XLA's ``HloCostAnalysis`` counts the body and the condition of a while loop once, whatever its
trip count (``HandleWhile`` in hlo_cost_analysis.cc), so ``compiled.cost_analysis()`` of a
``lax.scan`` of 10 matmuls reports the FLOPs and bytes of one. Every JAX loop (``scan``,
``fori_loop``, ``while_loop``) is an HLO ``while`` by then, and XLA writes the trip count it can
prove into the loop's ``backend_config`` (``"known_trip_count":{"n":"10"}``): a counter that
steps by a constant to a constant bound. A loop whose end depends on the data has none.

This module reads the compiled module's text, has XLA analyse each loop's body and condition on
their own (each made the entry of a module of its own, with the analysis that produced the whole
program's figures), and adds what the whole-program analysis left out, for FLOPs, bytes accessed
and transcendentals alike:

    extra(loop) = (trips - 1) x body + trips x condition + trips x extra(body) + (trips + 1) x extra(condition)

(the condition runs once more than the body: the test that ends the loop). A loop XLA unrolled is
no longer a ``while``: the analysis already counted every copy. Should a backend's analysis ever
multiply by the trip count itself, nothing is added: a tiny scan, analysed once per platform,
tells which convention the backend follows. The private jaxlib functions this needs (a module
parsed from text, a module's cost analysis) may move between JAX versions: any failure raises
:class:`LoopCostUnavailable`, and the caller counts from the jaxpr instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["LoopCost", "LoopCostUnavailable", "has_loops", "loop_cost"]

Figures = dict[str, float]
_KEYS = ("flops", "bytes_accessed", "transcendentals")
_XLA_KEYS = {"flops": "flops", "bytes_accessed": "bytes accessed", "transcendentals": "transcendentals"}

_COMPUTATION = re.compile(r"^(ENTRY\s+)?%([\w.\-]+)\s.*\{\s*$")  # "%body.2 (p: (s32[], ...)) -> ... {"
_WHILE = re.compile(r"=.*?\swhile\(")
_CONDITIONAL = re.compile(r"=.*?\sconditional\(")
_REFERENCE = re.compile(r"\b(\w+)=(%[\w.\-]+|\{%[^}]*\})")  # body=%b, branch_computations={%t, %f}
_NAME = re.compile(r"%([\w.\-]+)")
_TRIPS = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_MODULE_SIZE = re.compile(r"\b(?:replica_count|num_partitions)=\d+")


class LoopCostUnavailable(RuntimeError):
    """XLA's per-loop figures could not be had (private jaxlib API missing, text not parsed, ...)."""


@dataclass
class _While:
    label: str  # JAX's op_name of the loop, e.g. "jit(train)/while"
    condition: str
    body: str
    trips: int | None  # None: XLA could not prove it


@dataclass
class _Computation:
    name: str
    lines: list[str]
    whiles: list[_While] = field(default_factory=list)
    conditionals: list[list[str]] = field(default_factory=list)  # branch computations of each
    calls: list[str] = field(default_factory=list)  # every other computation it calls


@dataclass
class LoopCost:
    figures: dict[str, float | None]  # the whole program, loops counted trip times; None if unbounded
    loops: list[tuple[str, int]]  # (loop, trips) for every loop XLA bounded, as the text holds it
    unbounded: list[str]  # loops without a known trip count
    scaled: bool = True  # False: the backend's own analysis already counted every trip


def has_loops(compiled: Any) -> bool:
    """Whether the compiled program still holds a while loop (XLA may have unrolled JAX's)."""
    try:
        return any(_WHILE.search(line) for line in compiled.as_text().splitlines())
    except Exception:  # no text from this backend: the caller cannot correct, and says so
        return True


def loop_cost(compiled: Any, whole: Figures, device: Any) -> LoopCost:
    """``whole`` (XLA's figures for the program on ``device``) with every loop counted by its trip count."""
    header, computations, entry = _parse(compiled.as_text())
    analyse = _analyser(compiled, header, computations)
    _check_round_trip(analyse, entry, whole)
    walk = _Walk(computations, analyse)
    extra = walk.extra(entry)
    if walk.unbounded:
        return LoopCost(dict.fromkeys(_KEYS), walk.loops, walk.unbounded)
    if not _counts_each_body_once(device):
        return LoopCost(dict(whole), walk.loops, [], scaled=False)
    return LoopCost({k: whole[k] + extra[k] for k in _KEYS}, walk.loops, [])


_PROBE_TRIPS, _PROBE_SIDE = 1000, 8
_body_once: dict[str, bool] = {}  # platform -> its analysis counts a loop body once


def _counts_each_body_once(device: Any) -> bool:
    """Whether ``device``'s cost analysis counts a loop body once (XLA's HandleWhile so far) rather
    than trip times: asked of a scan of 1000 small matmuls, once per platform. So many trips that
    no backend unrolls it; if one did, the answer would be unknown, and the caller says so."""
    if device.platform not in _body_once:
        import jax
        import jax.numpy as jnp

        x = jax.device_put(jnp.ones((_PROBE_SIDE, _PROBE_SIDE), jnp.float32), device)
        probe = jax.jit(lambda c: jax.lax.scan(lambda c, _: (c @ c, None), c, None, length=_PROBE_TRIPS)[0])
        compiled = probe.lower(x).compile()
        if not has_loops(compiled):
            raise LoopCostUnavailable(f"XLA on {device.platform} unrolled a {_PROBE_TRIPS}-trip scan, so whether its "
                                      "cost analysis counts a loop body once could not be told")
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        one_trip = 2.0 * _PROBE_SIDE**3
        _body_once[device.platform] = _figures(cost, "a probe scan")["flops"] < 2 * one_trip
    return _body_once[device.platform]


def _parse(text: str) -> tuple[list[str], dict[str, _Computation], str]:
    """The module's header lines, its computations by name, and the entry's name."""
    header: list[str] = []
    computations: dict[str, _Computation] = {}
    entry, current = None, None
    for line in text.splitlines():
        if current is None:
            match = _COMPUTATION.match(line)
            if match:
                current = _Computation(match[2], [line])
                entry = match[2] if match[1] else entry
            elif not computations:
                header.append(line)
            continue
        current.lines.append(line)
        if line.strip() == "}":
            computations[current.name], current = current, None
        else:
            _read_instruction(current, line)
    if entry is None or not header:
        raise LoopCostUnavailable("no ENTRY computation in the compiled module's text")
    return header, computations, entry


def _read_instruction(computation: _Computation, line: str) -> None:
    references = {key: _NAME.findall(value) for key, value in _REFERENCE.findall(line)}
    if _WHILE.search(line):
        trips = _TRIPS.search(line)
        label = _OP_NAME.search(line)
        computation.whiles.append(_While(
            label=label[1] if label else line.split("=")[0].strip(),
            condition=references["condition"][0], body=references["body"][0],
            trips=int(trips[1]) if trips else None,
        ))
    elif _CONDITIONAL.search(line):
        keys = ("branch_computations", "true_computation", "false_computation")
        computation.conditionals.append([name for key in keys for name in references.get(key, [])])
    else:
        computation.calls += [name for names in references.values() for name in names]


def _analyser(compiled: Any, header: list[str], computations: dict[str, _Computation]) -> Callable[[str], Figures]:
    """A function: computation name -> XLA's figures for one run of it, memoised."""
    try:
        from jax._src.lib import hlo, xla_client  # private: XLA's parser and cost analysis

        parse, analyse = hlo.hlo_module_from_text, xla_client._xla.hlo_module_cost_analysis
        client = compiled.runtime_executable().client
    except Exception as error:
        raise LoopCostUnavailable(f"this jaxlib does not expose XLA's module cost analysis ({error})") from error
    first = _MODULE_SIZE.findall(header[0])
    module_line = ", ".join(["HloModule loop_part", *first])
    memo: dict[str, Figures] = {}

    def figures(name: str) -> Figures:
        if name not in memo:
            text = _module_text(module_line, header[1:], computations, name)
            try:
                cost = analyse(client, parse(text))
            except Exception as error:
                raise LoopCostUnavailable(f"XLA could not analyse computation {name} on its own ({error})") from error
            memo[name] = _figures(cost, name)
        return memo[name]

    return figures


def _module_text(module_line: str, header: list[str], computations: dict[str, _Computation], root: str) -> str:
    """A module whose entry is ``root``, holding the computations ``root`` reaches, in order."""
    reached, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in reached or name not in computations:
            continue
        reached.add(name)
        c = computations[name]
        todo += c.calls + [n for w in c.whiles for n in (w.condition, w.body)] + [n for b in c.conditionals for n in b]
    lines = [module_line, *header]
    for name, c in computations.items():
        if name in reached:
            first = c.lines[0].removeprefix("ENTRY").lstrip()
            lines += [("ENTRY " if name == root else "") + first, *c.lines[1:]]
    return "\n".join(lines) + "\n"


def _figures(cost: Any, name: str) -> Figures:
    if not isinstance(cost, dict):
        raise LoopCostUnavailable(f"XLA's analysis of {name} is not a dict: {cost!r}")
    values = {key: float(cost.get(xla_key, 0.0)) for key, xla_key in _XLA_KEYS.items()}
    if any(v < 0 for v in values.values()):  # -1: XLA could not analyse it
        raise LoopCostUnavailable(f"XLA's analysis of {name} is unknown (-1)")
    return values


def _check_round_trip(analyse: Callable[[str], Figures], entry: str, whole: Figures) -> None:
    """The entry re-read from text must cost what the compiled program did: else the text lost
    something, and no per-loop figure read the same way can be trusted."""
    again = analyse(entry)
    for key in _KEYS:
        expected = whole.get(key)
        if expected is not None and abs(again[key] - expected) > 1e-6 * max(1.0, abs(expected)):
            raise LoopCostUnavailable(
                f"the module re-read from its text costs {again[key]:g} {key}, the compiled one {expected:g}"
            )


class _Walk:
    """What XLA's whole-program analysis left out, computation by computation (memoised)."""

    def __init__(self, computations: dict[str, _Computation], analyse: Callable[[str], Figures]):
        self.computations, self.analyse = computations, analyse
        self.loops: list[tuple[str, int]] = []
        self.unbounded: list[str] = []
        self.memo: dict[str, Figures] = {}

    def extra(self, name: str) -> Figures:
        if name not in self.memo:
            self.memo[name] = self._extra(self.computations.get(name))
        return self.memo[name]

    def _extra(self, computation: _Computation | None) -> Figures:
        total = dict.fromkeys(_KEYS, 0.0)
        if computation is None:
            return total
        for loop in computation.whiles:
            _add(total, self._loop_extra(loop))
        for branches in computation.conditionals:
            _add(total, self._branches_extra(branches))
        for callee in computation.calls:
            _add(total, self.extra(callee))
        return total

    def _loop_extra(self, loop: _While) -> Figures:
        if loop.trips is None:
            self.unbounded.append(loop.label)
            return dict.fromkeys(_KEYS, 0.0)
        self.loops.append((loop.label, loop.trips))
        total = dict.fromkeys(_KEYS, 0.0)
        _add(total, self.analyse(loop.body), loop.trips - 1)
        _add(total, self.analyse(loop.condition), loop.trips)
        _add(total, self.extra(loop.body), loop.trips)
        _add(total, self.extra(loop.condition), loop.trips + 1)
        return total

    def _branches_extra(self, branches: list[str]) -> Figures:
        """XLA counts a conditional as its costliest branch, property by property: so do we, with
        the loops inside the branches counted by their trips."""
        extras = [self.extra(b) for b in branches]
        if not any(v for e in extras for v in e.values()):
            return dict.fromkeys(_KEYS, 0.0)
        once = [self.analyse(b) for b in branches]
        return {k: max(o[k] + e[k] for o, e in zip(once, extras)) - max(o[k] for o in once) for k in _KEYS}


def _add(total: Figures, part: Figures, times: float = 1.0) -> None:
    for key in _KEYS:
        total[key] += times * part[key]
