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
parsed from text, a module's cost analysis: :mod:`.jax_internals`) may move between JAX versions:
any failure raises :class:`LoopCostUnavailable`, and the caller says the figures are unknown (or,
in ``jaxrun.bench``, counts from the jaxpr instead).

Used in the script's process by the probe (:mod:`.xla_facts`, every program a script compiles) and
by ``jaxrun.bench``: it imports nothing heavy, and compiles nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from jaxrun.core.formatting import listed  # standard library only, as the probe must be

__all__ = ["LoopCost", "LoopCostUnavailable", "XlaCost", "cost_figures", "has_loops", "loop_cost", "xla_cost"]

Figures = dict[str, float]
_KEYS = ("flops", "bytes_accessed", "transcendentals")
_XLA_KEYS = {"flops": "flops", "bytes_accessed": "bytes accessed", "transcendentals": "transcendentals"}

# The regular expressions of the text's reading, compiled (_compile_patterns) only when a program
# with loops is analysed, or an empty analysis is checked: the probe imports this module at the
# first compilation of every JAX script, whose time compiling ten of them (~2 ms) would count in.
_PATTERNS = {
    "_COMPUTATION": r"^(ENTRY\s+)?%([\w.\-]+)\s.*\{\s*$",  # "%body.2 (p: (s32[], ...)) -> ... {"
    "_WHILE": r"=.*?\swhile\(",
    "_CONDITIONAL": r"=.*?\sconditional\(",
    "_REFERENCE": r"\b(\w+)=(%[\w.\-]+|\{%[^}]*\})",  # body=%b, branch_computations={%t, %f}
    "_NAME": r"%([\w.\-]+)",
    "_TRIPS": r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)',
    "_OP_NAME": r'op_name="([^"]*)"',
    # ", metadata={op_name="..." source_file="..." ...}" of one instruction (quoted strings may hold braces).
    "_METADATA": r',\s*metadata=\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}',
    "_MODULE_SIZE": r"\b(?:replica_count|num_partitions)=\d+",
    "_OPCODE": r"=\s*(?:\(.*?\)|\S+)\s+([a-z][\w\-]*)\(",  # an instruction's opcode (computes_nothing)
}
_COMPUTATION: re.Pattern[str]
_WHILE: re.Pattern[str]
_CONDITIONAL: re.Pattern[str]
_REFERENCE: re.Pattern[str]
_NAME: re.Pattern[str]
_TRIPS: re.Pattern[str]
_OP_NAME: re.Pattern[str]
_METADATA: re.Pattern[str]
_MODULE_SIZE: re.Pattern[str]
_OPCODE: re.Pattern[str]


def _compile_patterns() -> None:
    if "_OPCODE" not in globals():
        globals().update({name: re.compile(pattern) for name, pattern in _PATTERNS.items()})


class LoopCostUnavailable(RuntimeError):
    """XLA's per-loop figures could not be had (private jaxlib API missing, text not parsed, ...)."""


# Plain classes, not dataclasses, for what only a program with loops needs: making a dataclass is
# ~0.4 ms, at the first compilation of every JAX script (XlaCost, which every program's figures
# use, stays one).
class _While:
    __slots__ = ("label", "condition", "body", "trips")

    def __init__(self, label: str, condition: str, body: str, trips: int | None) -> None:
        self.label = label  # JAX's op_name of the loop, e.g. "jit(train)/while"
        self.condition = condition
        self.body = body
        self.trips = trips  # None: XLA could not prove it


class _Computation:
    __slots__ = ("name", "lines", "whiles", "conditionals", "calls")

    def __init__(self, name: str, lines: list[str]) -> None:
        self.name = name
        self.lines = lines
        self.whiles: list[_While] = []
        self.conditionals: list[list[str]] = []  # branch computations of each
        self.calls: list[str] = []  # every other computation it calls


class LoopCost:
    __slots__ = ("figures", "loops", "unbounded", "scaled")

    def __init__(self, figures: dict[str, float | None], loops: list[tuple[str, int]], unbounded: list[str],
                 scaled: bool = True) -> None:
        self.figures = figures  # the whole program, loops counted trip times; None if unbounded
        self.loops = loops  # (loop, trips) for every loop XLA bounded, as the text holds it
        self.unbounded = unbounded  # loops without a known trip count
        self.scaled = scaled  # False: the backend's own analysis already counted every trip


def has_loops(text: str) -> bool:
    """Whether a compiled program's text still holds a while loop (XLA may have unrolled JAX's):
    an instruction ``... = ... while(``, found without a regex over every line (~0.1 s of text)."""
    at = text.find(" while(")
    while at != -1:
        if "=" in text[text.rfind("\n", 0, at) + 1:at]:
            return True
        at = text.find(" while(", at + 1)
    return False


def loop_cost(text: str, client: Any, whole: Figures, platform: str) -> LoopCost:
    """``whole`` (XLA's figures for the program whose optimized text is ``text``, compiled by
    ``client``) with every loop counted by its trip count."""
    _compile_patterns()
    header, computations, entry = _parse(text)
    analyse = _analyser(client, header, computations)
    if platform not in _round_trips_checked:  # a property of the jaxlib, not of one program
        _check_round_trip(analyse, entry, whole)
        _round_trips_checked.add(platform)
    walk = _Walk(computations, analyse)
    extra = walk.extra(entry)
    if walk.unbounded:
        return LoopCost(dict.fromkeys(_KEYS), walk.loops, walk.unbounded)
    if not _counts_each_body_once(client, platform):
        return LoopCost(dict(whole), walk.loops, [], scaled=False)
    return LoopCost({k: whole[k] + extra[k] for k in _KEYS}, walk.loops, [])


_PROBE_TRIPS = 1000
_round_trips_checked: set[str] = set()  # platforms whose module text re-read costs what was compiled
_body_once: dict[str, bool] = {}  # platform -> its analysis counts a loop body once
# A loop of 1000 8x8 matmuls with its trip count known, as XLA writes it: analysed (never compiled)
# once per platform, to tell whether the backend's analysis counts a loop body once or trip times.
_PROBE_LOOP = """HloModule probe_loop

body {
  p = (s32[], f32[8,8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8,8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (s32[], f32[8,8]) tuple(j, y)
}

cond {
  p = (s32[], f32[8,8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(%d)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[8,8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8,8]) tuple(zero, x)
  w = (s32[], f32[8,8]) while(init), condition=cond, body=body, backend_config={"known_trip_count":{"n":"%d"}}
  ROOT r = f32[8,8] get-tuple-element(w), index=1
}
""" % (_PROBE_TRIPS, _PROBE_TRIPS)


def _counts_each_body_once(client: Any, platform: str) -> bool:
    """Whether ``client``'s cost analysis counts a loop body once (XLA's HandleWhile so far) rather
    than trip times: asked of a 1000-trip loop of small matmuls, once per platform."""
    if platform not in _body_once:
        try:
            from jaxrun.probe.jax_internals import hlo_analysis

            parse, analyse = hlo_analysis()
            cost = analyse(client, parse(_PROBE_LOOP))
        except Exception as error:
            raise LoopCostUnavailable(f"XLA on {platform} could not analyse a probe loop ({error})") from error
        one_trip = 2.0 * 8**3
        _body_once[platform] = _figures(cost, "a probe loop")["flops"] < 2 * one_trip
    return _body_once[platform]


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
        current.lines.append(_without_metadata(line))
        if line.strip() == "}":
            computations[current.name], current = current, None
        else:
            _read_instruction(current, line)
    if entry is None or not header:
        raise LoopCostUnavailable("no ENTRY computation in the compiled module's text")
    return header, computations, entry


def _without_metadata(line: str) -> str:
    """The instruction without its ``, metadata={...}`` (XLA's analysis does not read it)."""
    start = line.find(", metadata={")
    if start == -1:
        return line
    end = line.find("}", start)
    if end != -1 and line.count('"', start, end) % 2 == 0 and "{" not in line[start + 12:end]:
        return line[:start] + line[end + 1:]
    return _METADATA.sub("", line)  # a brace inside a quoted op name


def _read_instruction(computation: _Computation, line: str) -> None:
    if "=%" not in line and "={%" not in line:
        return  # calls no computation (most instructions): no regex over its long metadata
    references = {key: _NAME.findall(value) for key, value in _REFERENCE.findall(line)}
    if " while(" in line and _WHILE.search(line):
        trips = _TRIPS.search(line)
        label = _OP_NAME.search(line)
        computation.whiles.append(_While(
            label=label[1] if label else line.split("=")[0].strip(),
            condition=references["condition"][0], body=references["body"][0],
            trips=int(trips[1]) if trips else None,
        ))
    elif " conditional(" in line and _CONDITIONAL.search(line):
        keys = ("branch_computations", "true_computation", "false_computation")
        computation.conditionals.append([name for key in keys for name in references.get(key, [])])
    else:
        computation.calls += [name for names in references.values() for name in names]


def _analyser(client: Any, header: list[str], computations: dict[str, _Computation]) -> Callable[[str], Figures]:
    """A function: computation name -> XLA's figures for one run of it, memoised."""
    try:
        from jaxrun.probe.jax_internals import hlo_analysis

        parse, analyse = hlo_analysis()
    except Exception as error:
        raise LoopCostUnavailable(f"this jaxlib does not expose XLA's module cost analysis ({error})") from error
    first = _MODULE_SIZE.findall(header[0])
    module_line = ", ".join(["HloModule loop_part", *first])
    memo: dict[str, Figures] = {}

    def figures(name: str) -> Figures:
        if name not in memo:
            text = _module_text(module_line, computations, name)
            try:
                cost = analyse(client, parse(text))
            except Exception as error:
                raise LoopCostUnavailable(f"XLA could not analyse computation {name} on its own ({error})") from error
            memo[name] = _figures(cost, name)
        return memo[name]

    return figures


def _module_text(module_line: str, computations: dict[str, _Computation], root: str) -> str:
    """A module whose entry is ``root``, holding the computations ``root`` reaches, in order,
    without their metadata (source lines, op names) and the module's tables of source locations:
    the analysis needs neither, and parsing them was most of its time."""
    reached, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in reached or name not in computations:
            continue
        reached.add(name)
        c = computations[name]
        todo += c.calls + [n for w in c.whiles for n in (w.condition, w.body)] + [n for b in c.conditionals for n in b]
    lines = [module_line, ""]
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
    something, and no per-loop figure read the same way can be trusted. Asked of the first
    program with a loop on each platform (re-reading a whole program costs ~20 ms)."""
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


# --- one program's figures -----------------------------------------------------------------------

_UNKNOWN: dict[str, float | None] = {"flops": None, "bytes_accessed": None, "transcendentals": None}
CURE = ("to get figures, give the loop static bounds (lax.scan, or lax.fori_loop with Python-int bounds), "
        "or measure its body alone and multiply by the trips you expect")
UNAVAILABLE = "XLA gives no cost analysis for this program on this backend"
NOT_ANALYSABLE = ("XLA could not analyse part of this program (it reports -1: a host callback or a custom call "
                  "it cannot see into)")
EMPTY_ANALYSIS = "XLA's cost analysis of this program is empty, and its text does not show that it computes nothing"
# What an instruction may be in a program that does no work: it only names its inputs or groups them.
_NO_WORK = frozenset({"parameter", "tuple", "get-tuple-element", "constant"})


@dataclass
class XlaCost:
    """A compiled program's figures from XLA, loops counted by their trip counts where XLA proved them."""

    figures: dict[str, float | None]  # flops, bytes_accessed, transcendentals
    source: str | None  # "xla", "xla_trip_counts" or None (unknown)
    reason: str | None = None  # why unknown, or how corrected
    unbounded: list[str] = field(default_factory=list)  # loops without a trip count
    one_trip: dict[str, float | None] | None = None  # XLA's own figures (a loop body counted once)

    @property
    def countable_elsewhere(self) -> bool:
        """Unknown for want of XLA's figures (not for an unbounded loop): the jaxpr may count it."""
        return self.source is None and not self.unbounded


def _number(value: Any) -> float | None:
    """XLA reports -1 for "could not analyse" (e.g. across a host callback): that is unknown."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def cost_figures(cost: Any) -> dict[str, float | None]:
    """flops / bytes accessed / transcendentals from XLA's ``cost_analysis()``.

    Depending on the JAX version that is a dict, a list with one dict per computation, or None.
    XLA leaves out properties that are zero (a matmul has no "transcendentals" key), so a missing
    key in a valid analysis is 0; an analysis that is absent, empty or -1 is unknown (None).
    """
    if isinstance(cost, (list, tuple)):
        dicts = [c for c in cost if isinstance(c, dict)]
        cost = None if not dicts else {k: sum(float(d.get(k, 0.0)) for d in dicts) for k in set().union(*dicts)}
    if not isinstance(cost, dict) or not cost:
        return dict(_UNKNOWN)
    values = {key: _number(cost.get(xla_key, 0.0)) for key, xla_key in _XLA_KEYS.items()}
    if any(_number(v) is None for v in cost.values() if isinstance(v, (int, float))):
        # One -1 means the analysis failed somewhere: totals would be silently short.
        return dict(_UNKNOWN)
    return values


def _empty(cost: Any) -> bool:
    """An analysis XLA gave, with nothing in it (``{}``, or a list of empty dicts)."""
    if isinstance(cost, (list, tuple)):
        return bool(cost) and all(isinstance(c, dict) and not c for c in cost)
    return isinstance(cost, dict) and not cost


def computes_nothing(text: str) -> bool:
    """Whether a compiled program's text is one computation whose instructions only take its
    parameters, constants and tuples of them (``jax.jit(lambda x: ())``, or an ``update`` that
    returns an empty state): a program that does no arithmetic and moves no data."""
    _compile_patterns()
    computations = 0
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("HloModule", "//", "}")):
            continue
        if stripped.endswith("{") and "=" not in stripped.split("(", 1)[0]:
            computations += 1  # "ENTRY %main.1 () -> () {": a computation's header
            continue
        opcode = _OPCODE.search(stripped)
        if opcode is None or opcode.group(1) not in _NO_WORK:
            return False
    return computations == 1


def _unknown_reason(cost: Any) -> str:
    if _empty(cost):
        return EMPTY_ANALYSIS
    if isinstance(cost, (dict, list, tuple)) and cost:
        return NOT_ANALYSABLE
    return UNAVAILABLE


def xla_cost(raw_cost: Any, text: str | None, client: Any, platform: str) -> XlaCost:
    """The figures of one compiled program: ``raw_cost`` is its ``cost_analysis()``, ``text`` its
    optimized module as text (None: not readable), ``client`` the PJRT client that compiled it.

    XLA's analysis of a program that computes nothing is empty (no property at all, not even the
    bytes a copy would access): when its text shows that it only passes parameters and constants
    along, its figures are 0, measured, not unknown."""
    xla = cost_figures(raw_cost)
    if xla["flops"] is None:
        if _empty(raw_cost) and text is not None and computes_nothing(text):
            return XlaCost(dict.fromkeys(_KEYS, 0.0), "xla")
        return XlaCost(dict(_UNKNOWN), None, _unknown_reason(raw_cost))
    if text is None:
        return XlaCost(dict(_UNKNOWN), None, "the compiled program's text could not be read, so whether XLA's "
                       "cost analysis left a loop's trips out cannot be told", one_trip=xla)
    if not has_loops(text):
        return XlaCost(xla, "xla")
    try:
        loops = loop_cost(text, client, xla, platform)  # type: ignore[arg-type]
    except LoopCostUnavailable as error:
        return XlaCost(dict(_UNKNOWN), None, "XLA's cost analysis counts each loop body once, whatever its trip "
                       f"count, and its per-loop figures could not be read ({error})", one_trip=xla)
    if loops.unbounded:
        what = f"XLA found no static trip count for loop {listed(loops.unbounded, 3)}"
        return XlaCost(dict(_UNKNOWN), None, f"{what}: FLOPs, bytes accessed and transcendentals are unknown. "
                       f"XLA's cost analysis counts the loop's body once, so its {xla['flops']:.4g} FLOPs are only a "
                       f"lower bound; {CURE}", unbounded=loops.unbounded, one_trip=xla)
    if not loops.scaled:
        return XlaCost(xla, "xla")
    shown = listed((f"{label} x{trips}" for label, trips in loops.loops), 4)
    reason = (
        "XLA's cost analysis counts each loop body once, whatever its trip count: FLOPs, bytes accessed and "
        "transcendentals here are XLA's, with each loop's body analysed on its own and counted by its trip count "
        f"({shown}; cost_source 'xla_trip_counts'). XLA's one-trip figure was {xla['flops']:.4g} FLOPs and "
        f"{xla['bytes_accessed']:.4g} bytes per device"
    )
    return XlaCost(loops.figures, "xla_trip_counts", reason, one_trip=xla)
