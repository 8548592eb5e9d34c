"""The results a batch holds until its end, a few hundred bytes each.

A result as a model is ~5 KB (its fields' dict, its sub-models, its texts); a batch of 10,000
held them all (the budget, benchmarks/README.md: peak RSS <= 2 KB a result). Here each is held as what the batch files
need of it: the text it has in ``jax_execution_results.json`` (its JSON, indented as that file
indents it), compressed against the first result's text (the results of a batch differ in a few
values, so each is ~10x smaller than its text), and its :class:`~jaxrun.results.batch_summary.Figures` packed
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

from jaxrun.core.formatting import plural
from jaxrun.results.batch_summary import Figures, figures_of
from jaxrun.results.models import ScriptResult
from jaxrun.results.result_files import dump_text, dump_json

if TYPE_CHECKING:
    from jaxrun.results.models import ScriptBenchmark

# A held result's record: Figures' 8 floats (0 where None) and 2 ints, a mask (which of them are
# None, whether it succeeded, which fields of HAVING it has), its vocabulary texts (error class,
# outcome, device: positions in the batch's vocabulary, 0 for None) and the length of its name;
# then its name (UTF-8), then its compressed text.
_FLOATS = ("execution_time", "all_runs_time", "body_time", "cpu_time", "memory_peak", "device_memory_peak",
           "device_utilization", "jit_compile_time")
_INTS = ("compile_count", "cache_hits")
_NUMBERS = _FLOATS + _INTS
_WORDS = ("error_class", "outcome", "device")
_RECORD = struct.Struct(f"<{len(_FLOATS)}d{len(_INTS)}qI{len(_WORDS)}HH")
_SUCCESS = 1 << len(_NUMBERS)
# What a result has that the end of a batch looks for without reading every result (:func:`having`).
HAVING = ("cells", "warm", "performance_metrics", "compiles", "benchmark", "params")
_HAVING_SHIFT = len(_NUMBERS) + 1
# zlib: raw deflate with an 8 KB window and little state (each result is compressed on its own:
# the state is made for each), the fastest level: the dictionary does most of the work.
_LEVEL, _WBITS, _MEMLEVEL = 1, -13, 2


def _has(result: ScriptResult, name: str) -> bool:
    """Whether ``result`` has the field ``name`` (of :data:`HAVING`): not None; ``compiles``: not empty."""
    value = getattr(result, name)
    return bool(value) if name == "compiles" else value is not None


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


class _Model:
    """A result held as it is (it does not round-trip through JSON), or one with a benchmark
    (the batch's benchmarking section reads it): its record, and the model or the benchmark."""

    __slots__ = ("record", "model", "benchmark")

    def __init__(self, record: bytes, model: ScriptResult | None, benchmark: "ScriptBenchmark | None") -> None:
        self.record, self.model, self.benchmark = record, model, benchmark




def _record(held: "bytes | _Model") -> bytes:
    return held.record if type(held) is _Model else held  # type: ignore[union-attr,return-value]


class _Vocabulary:
    """The texts a batch's results share (error classes, outcomes, devices), by position from 1."""

    def __init__(self) -> None:
        self.words: list[str | None] = [None]
        self._at: dict[str, int] = {}

    def at(self, word: str | None) -> int:
        if word is None:
            return 0
        found = self._at.get(word)
        if found is None:
            found = self._at[word] = len(self.words)
            self.words.append(word)
        return found


def _pack(r: ScriptResult, having: int, vocabulary: _Vocabulary) -> bytes:
    """The record of ``r``: its :func:`~jaxrun.results.batch_summary.figures_of`, packed."""
    f = figures_of(r)
    values = [f.execution_time, f.all_runs_time, f.body_time, f.cpu_time, f.memory_peak, f.device_memory_peak,
              f.device_utilization, f.jit_compile_time, f.compile_count, f.cache_hits]
    mask = (_SUCCESS if f.success else 0) | having << _HAVING_SHIFT
    for i, value in enumerate(values):
        if value is None:
            mask |= 1 << i
            values[i] = 0
    name = f.script_name.encode("utf-8", "surrogatepass")
    return _RECORD.pack(*values, mask, vocabulary.at(f.error_class), vocabulary.at(f.outcome), vocabulary.at(f.device),
                        len(name)) + name


def _figures(held: "bytes | _Model", words: list[str | None]) -> Figures:
    record = _record(held)
    *numbers, mask, error_class, outcome, device, size = _RECORD.unpack_from(record)
    name = record[_RECORD.size:_RECORD.size + size].decode("utf-8", "surrogatepass")
    return Figures(name, bool(mask & _SUCCESS), words[error_class], words[outcome], words[device],
                   *[None if mask & (1 << i) else value for i, value in enumerate(numbers)])


def _mask(held: "bytes | _Model") -> int:
    return _RECORD.unpack_from(_record(held))[len(_NUMBERS)]


def _compressed(record: bytes) -> bytes:
    """What follows the record and the name: the compressed text."""
    size = _RECORD.unpack_from(record)[-1]
    return record[_RECORD.size + size:]


class HeldResults:
    """A batch's results by job index, as they come in (any order); read in batch order."""

    def __init__(self) -> None:
        self._held: list[bytes | _Model | None] = []  # by job index: a batch's indices are 0, 1, 2, ...
        self._count = 0
        self._dictionary: bytes | None = None  # the first text held: what the others are compressed against
        self._packer: "zlib._Compress | None" = None
        self._vocabulary = _Vocabulary()

    def __contains__(self, index: int) -> bool:
        return index < len(self._held) and self._held[index] is not None

    def __len__(self) -> int:
        return self._count

    def indices(self) -> set[int]:
        return {i for i, h in enumerate(self._held) if h is not None}

    def add(self, index: int, result: ScriptResult, text: str | None = None) -> None:
        """Hold ``result`` as job ``index``'s (replacing one held before); ``text``: its JSON
        (:func:`~jaxrun.results.result_files.dump_json`'s), when it is already made."""
        having = sum(1 << i for i, name in enumerate(HAVING) if _has(result, name))
        record = _pack(result, having, self._vocabulary)
        if round_trips(result):
            text = text if text is not None else dump_json(result)
        else:
            text = None
        held: bytes | _Model
        if text is None:  # held as it is
            held = _Model(record, result, result.benchmark)
        else:
            data = text.encode("utf-8")
            if self._packer is None:
                self._dictionary = data
                self._packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEMLEVEL, zlib.Z_DEFAULT_STRATEGY, data)
            packer = self._packer.copy()  # primed with the dictionary once
            held = record + packer.compress(data) + packer.flush()
            if result.benchmark is not None:
                held = _Model(held, None, result.benchmark)
        if index >= len(self._held):
            self._held.extend([None] * (index + 1 - len(self._held)))
        if self._held[index] is None:
            self._count += 1
        self._held[index] = held

    def results(self) -> "HeldList":
        """The results held now, in batch order (read back on use)."""
        return HeldList([h for h in self._held if h is not None], self._dictionary, self._vocabulary.words)


class HeldList(Sequence[ScriptResult]):
    """A batch's held results as a read-only sequence of models, each read back from its text
    when asked for (a new model each time: nothing is kept). Compares equal to a list of the
    same results; a copy or a pickle of it is that list."""

    def __init__(self, held: "list[bytes | _Model]", dictionary: bytes | None, words: list[str | None]) -> None:
        self._items = held
        self._dictionary = dictionary
        self._words = words  # the batch's vocabulary: only ever added to

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
        """Each result's JSON as :func:`~jaxrun.results.result_files.dump_json` writes it, in order."""
        for h in self._items:
            model = h.model if type(h) is _Model else None  # type: ignore[union-attr]
            yield dump_text(model) if model is not None else self._text(h)

    def figures(self) -> list[Figures]:
        return [_figures(h, self._words) for h in self._items]

    def benchmarks(self) -> list["ScriptBenchmark"]:
        return [h.benchmark for h in self._items if type(h) is _Model and h.benchmark is not None]  # type: ignore[union-attr]

    def having(self, names: Iterable[str]) -> Iterator[tuple[int, ScriptResult]]:
        """``(position, result)`` of the results that have one of the fields ``names`` (of
        :data:`HAVING`) set, the others never read."""
        bits = sum(1 << HAVING.index(name) for name in names) << _HAVING_SHIFT
        for position, h in enumerate(self._items):
            if _mask(h) & bits:
                yield position, self._read(h)

    def _text(self, h: "bytes | _Model") -> str:
        reader = zlib.decompressobj(_WBITS, self._dictionary)  # type: ignore[arg-type]
        return (reader.decompress(_compressed(_record(h))) + reader.flush()).decode("utf-8")

    def _read(self, h: "bytes | _Model") -> ScriptResult:
        if type(h) is _Model and h.model is not None:  # type: ignore[union-attr]
            return h.model  # type: ignore[union-attr]
        return ScriptResult.model_validate_json(self._text(h))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (HeldList, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HeldList({plural(len(self), 'result')})"

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
