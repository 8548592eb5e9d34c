"""The results a batch holds until its end, a few hundred bytes each.

A result as a model is ~5 KB (its fields' dict, its sub-models, its texts); a batch of 10,000
held them all (DESIGN §10: peak RSS <= 2 KB a result). Here each is held as what the batch files
need of it: the text it has in ``jax_execution_results.json`` (its JSON, indented as that file
indents it), compressed against the first result's text (the results of a batch differ in a few
values, so each is ~10x smaller than its text), and its :class:`~jaxrun.summary.Figures` packed
in a few bytes. The batch files are written from these texts; the batch's summary, counts and
metrics from the figures; a result is read back as a model only when something asks for it
(:class:`HeldList`, the returned batch's ``script_results``), one at a time.

A result whose JSON does not give it back as it was (a field that is not written: ``profile``,
a notebook cell's ``outputs``; a value JSON changes: NaN or a tuple in ``results``; a text that is
not valid Unicode) is held as the model it is.
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, overload

from .models import ScriptResult
from .resultfiles import _dump, dump_json
from .summary import Figures, figures_of

if TYPE_CHECKING:
    from .models import ScriptBenchmark

# The numbers of Figures, in order: 8 floats (0 where None), 2 ints, and a mask: which are None,
# whether it succeeded, which of HAVING it has.
_FLOATS = ("execution_time", "all_runs_time", "body_time", "cpu_time", "memory_peak", "device_memory_peak",
           "device_utilization", "jit_compile_time")
_INTS = ("compile_count", "cache_hits")
_NUMBERS = _FLOATS + _INTS
_PACKED = struct.Struct(f"<{len(_FLOATS)}d{len(_INTS)}qI")
_SUCCESS = 1 << len(_NUMBERS)
# What a result has that the end of a batch looks for without reading every result (:func:`having`).
HAVING = ("cells", "warm", "performance_metrics", "compiles", "benchmark")


def _has(result: ScriptResult, name: str) -> bool:
    """Whether ``result`` has the field ``name`` (of :data:`HAVING`): not None; ``compiles``: not empty."""
    value = getattr(result, name)
    return bool(value) if name == "compiles" else value is not None

_HAVING_SHIFT = len(_NUMBERS) + 1
# zlib: raw deflate with an 8 KB window and little state (each result is compressed on its own:
# the state is made for each), the fastest level: the dictionary does most of the work.
_LEVEL, _WBITS, _MEMLEVEL = 1, -13, 2


def _json_native(value: Any) -> bool:
    """Whether ``value`` reads back from JSON as it is: dicts of texts, lists, texts, finite numbers."""
    kind = type(value)
    if kind is str or kind is bool or kind is int or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(_json_native(v) for v in value)
    if kind is dict:
        return all(type(k) is str and _json_native(v) for k, v in value.items())
    return False


def round_trips(result: ScriptResult) -> bool:
    """Whether ``result`` read back from its JSON is equal to it (module docstring)."""
    if result.profile is not None or result.performance_metrics is not None:
        return False
    if result.cells is not None and any(cell.outputs is not None for cell in result.cells):
        return False
    if result.results and not _json_native(result.results):
        return False
    return result.processes is None or all(_json_native(p.results) for p in result.processes)


class _Held:
    """One result: ``blob`` (its packed numbers, then its compressed text), or ``model`` (and
    its packed numbers in ``blob``)."""

    __slots__ = ("blob", "model", "script_name", "error_class", "outcome", "device", "benchmark")

    def __init__(self, blob: bytes, model: ScriptResult | None, figures: Figures, words: dict[str, str],
                 benchmark: "ScriptBenchmark | None") -> None:
        self.blob, self.model, self.benchmark = blob, model, benchmark
        self.script_name = figures.script_name
        # One object per vocabulary text (error class, outcome, device) for the whole batch.
        self.error_class = None if figures.error_class is None else words.setdefault(figures.error_class, figures.error_class)
        self.outcome = None if figures.outcome is None else words.setdefault(figures.outcome, figures.outcome)
        self.device = None if figures.device is None else words.setdefault(figures.device, figures.device)

    @property
    def mask(self) -> int:
        return _PACKED.unpack_from(self.blob)[-1]


def _pack(f: Figures, having: int) -> bytes:
    mask = (_SUCCESS if f.success else 0) | having << _HAVING_SHIFT
    values = []
    for i, name in enumerate(_NUMBERS):
        value = getattr(f, name)
        if value is None:
            mask |= 1 << i
            value = 0 if i >= len(_FLOATS) else 0.0
        values.append(value)
    return _PACKED.pack(*values, mask)


def _figures(h: _Held) -> Figures:
    *numbers, mask = _PACKED.unpack_from(h.blob)
    return Figures(h.script_name, bool(mask & _SUCCESS), h.error_class, h.outcome, h.device,
                   *[None if mask & (1 << i) else value for i, value in enumerate(numbers)])


class HeldResults:
    """A batch's results by job index, as they come in (any order); read in batch order."""

    def __init__(self) -> None:
        self._held: list[_Held | None] = []  # by job index: a batch's indices are 0, 1, 2, ...
        self._count = 0
        self._dictionary: bytes | None = None  # the first text held: what the others are compressed against
        self._words: dict[str, str] = {}

    def __contains__(self, index: int) -> bool:
        return index < len(self._held) and self._held[index] is not None

    def __len__(self) -> int:
        return self._count

    def indices(self) -> set[int]:
        return {i for i, h in enumerate(self._held) if h is not None}

    def add(self, index: int, result: ScriptResult) -> None:
        """Hold ``result`` as job ``index``'s (replacing one held before)."""
        figures = figures_of(result)
        having = sum(1 << i for i, name in enumerate(HAVING) if _has(result, name))
        numbers = _pack(figures, having)
        text = dump_json(result) if round_trips(result) else None
        if text is None:  # held as it is
            held = _Held(numbers, result, figures, self._words, result.benchmark)
        else:
            data = text.encode("utf-8")
            if self._dictionary is None:
                self._dictionary = data
            packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEMLEVEL, zlib.Z_DEFAULT_STRATEGY, self._dictionary)
            held = _Held(numbers + packer.compress(data) + packer.flush(), None, figures, self._words, result.benchmark)
        if index >= len(self._held):
            self._held.extend([None] * (index + 1 - len(self._held)))
        if self._held[index] is None:
            self._count += 1
        self._held[index] = held

    def results(self) -> "HeldList":
        """The results held now, in batch order (read back on use)."""
        return HeldList([h for h in self._held if h is not None], self._dictionary)


class HeldList(Sequence[ScriptResult]):
    """A batch's held results as a read-only sequence of models, each read back from its text
    when asked for (a new model each time: nothing is kept). Compares equal to a list of the
    same results; a copy or a pickle of it is that list."""

    def __init__(self, held: list[_Held], dictionary: bytes | None) -> None:
        self._items = held
        self._dictionary = dictionary

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> ScriptResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[ScriptResult]: ...

    def __getitem__(self, index: int | slice) -> ScriptResult | list[ScriptResult]:
        if isinstance(index, slice):
            return [self._read(h) for h in self._items[index]]
        return self._read(self._items[index])

    def __iter__(self) -> Iterator[ScriptResult]:
        for h in self._items:
            yield self._read(h)

    def texts(self) -> Iterator[str]:
        """Each result's JSON as :func:`~jaxrun.resultfiles.dump_json` writes it, in order."""
        for h in self._items:
            yield _dump(h.model) if h.model is not None else self._text(h)

    def figures(self) -> list[Figures]:
        return [_figures(h) for h in self._items]

    def benchmarks(self) -> list["ScriptBenchmark"]:
        return [h.benchmark for h in self._items if h.benchmark is not None]

    def having(self, names: Iterable[str]) -> Iterator[tuple[int, ScriptResult]]:
        """``(position, result)`` of the results that have one of the fields ``names`` (of
        :data:`HAVING`) set, the others never read."""
        bits = sum(1 << HAVING.index(name) for name in names) << _HAVING_SHIFT
        for position, h in enumerate(self._items):
            if h.mask & bits:
                yield position, self._read(h)

    def _text(self, h: _Held) -> str:
        reader = zlib.decompressobj(_WBITS, self._dictionary)  # type: ignore[arg-type]
        return (reader.decompress(h.blob[_PACKED.size:]) + reader.flush()).decode("utf-8")  # type: ignore[index]

    def _read(self, h: _Held) -> ScriptResult:
        if h.model is not None:
            return h.model
        return ScriptResult.model_validate_json(self._text(h))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (HeldList, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HeldList({len(self)} results)"

    def __copy__(self) -> "HeldList":
        return self  # it never changes

    def __deepcopy__(self, memo: Any) -> list[ScriptResult]:
        return list(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))


def having(results: Sequence[ScriptResult], *names: str) -> Iterator[tuple[int, ScriptResult]]:
    """``(position, result)`` of the results in ``results`` that have one of the fields ``names``
    (of :data:`HAVING`: not None; ``compiles``: not empty), a batch's held results without
    reading the others."""
    if isinstance(results, HeldList):
        yield from results.having(names)
        return
    for position, result in enumerate(results):
        if any(_has(result, name) for name in names):
            yield position, result
