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

import array
import math
import struct
import zlib
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, overload

from jaxrun.core.formatting import plural
from jaxrun.results.batch_summary import Figures, figures_of
from jaxrun.results.models import ScriptResult
from jaxrun.results.result_files import dump_json, dump_text

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




# A record in a buffer: the buffer, where the record starts and where it ends.
_Span = tuple[bytes | bytearray, int, int]


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


def _figures(span: _Span, words: list[str | None]) -> Figures:
    buffer, start, _ = span
    *numbers, mask, error_class, outcome, device, size = _RECORD.unpack_from(buffer, start)
    name = buffer[start + _RECORD.size:start + _RECORD.size + size].decode("utf-8", "surrogatepass")
    return Figures(name, bool(mask & _SUCCESS), words[error_class], words[outcome], words[device],
                   *[None if mask & (1 << i) else value for i, value in enumerate(numbers)])


def _mask(span: _Span) -> int:
    buffer, start, _ = span
    return _RECORD.unpack_from(buffer, start)[len(_NUMBERS)]


def _compressed(span: _Span) -> bytes | bytearray:
    """What follows the record and the name: the compressed text."""
    buffer, start, end = span
    size = _RECORD.unpack_from(buffer, start)[-1]
    return buffer[start + _RECORD.size + size:end]


_NOT_HELD, _AS_MODEL = -1, -2  # in HeldResults._at, for a job index without a record
_SIZE = struct.Struct("<I")  # before each record in HeldResults._records: its length


class HeldResults:
    """A batch's results by job index, as they come in (any order); read in batch order."""

    def __init__(self) -> None:
        # The records, one after the other in one buffer, never changed once written. Held as
        # an object each (~350 bytes), they pinned the interpreter's small-object pools, among
        # which each result's passing objects (its model, its text) came and went: the peak RSS
        # of a batch grew by 1.77 KB a result, and by 1.61 KB with one buffer
        # (benchmarks/bench_result_writing.py --rss 100 1000, medians of 7, twice).
        self._records = bytearray()
        # By job index (a batch's are 0, 1, 2, ...): its record's offset in _records, or
        # _NOT_HELD, or _AS_MODEL (in _models).
        self._at = array.array("q")
        self._models: dict[int, _Model] = {}
        self._count = 0
        self._dictionary: bytes | None = None  # the first text held: what the others are compressed against
        self._packer: "zlib._Compress | None" = None
        self._vocabulary = _Vocabulary()

    def __contains__(self, index: int) -> bool:
        return index < len(self._at) and self._at[index] != _NOT_HELD

    def __len__(self) -> int:
        return self._count

    def indices(self) -> set[int]:
        return {i for i, at in enumerate(self._at) if at != _NOT_HELD}

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
        if index >= len(self._at):
            self._at.extend([_NOT_HELD] * (index + 1 - len(self._at)))
        if self._at[index] == _NOT_HELD:
            self._count += 1
        if type(held) is _Model:
            self._models[index] = held
            self._at[index] = _AS_MODEL
        else:
            # A result held again leaves its earlier record where it is, unused (a HeldList made
            # before reads it still).
            self._models.pop(index, None)
            self._at[index] = len(self._records)
            self._records += _SIZE.pack(len(held))
            self._records += held

    def results(self) -> "HeldList":
        """The results held now, in batch order (read back on use)."""
        offsets = array.array("q")
        models: dict[int, _Model] = {}
        for index, at in enumerate(self._at):
            if at == _AS_MODEL:
                models[len(offsets)] = self._models[index]
            if at != _NOT_HELD:
                offsets.append(at)
        return HeldList(self._records, offsets, models, self._dictionary, self._vocabulary.words)


class HeldList(Sequence[ScriptResult]):
    """A batch's held results as a read-only sequence of models, each read back from its text
    when asked for (a new model each time: nothing is kept). Compares equal to a list of the
    same results; a copy or a pickle of it is that list."""

    def __init__(self, records: bytearray, offsets: "array.array[int]", models: "dict[int, _Model]",
                 dictionary: bytes | None, words: list[str | None]) -> None:
        """``records``: the batch's (only ever added to); ``offsets``: each result's record in
        them, in order, unless ``models`` has it by its position."""
        self._records, self._offsets, self._models = records, offsets, models
        self._dictionary = dictionary
        self._words = words  # the batch's vocabulary: only ever added to

    def __len__(self) -> int:
        return len(self._offsets)

    def _span(self, position: int) -> _Span:
        model = self._models.get(position)
        if model is not None:
            return model.record, 0, len(model.record)
        at = self._offsets[position]
        start = at + _SIZE.size
        return self._records, start, start + _SIZE.unpack_from(self._records, at)[0]

    def _read_at(self, position: int) -> ScriptResult:
        model = self._models.get(position)
        if model is not None and model.model is not None:
            return model.model
        return ScriptResult.model_validate_json(self._text(position))

    def _text(self, position: int) -> str:
        reader = zlib.decompressobj(_WBITS, self._dictionary)  # type: ignore[arg-type]
        return (reader.decompress(_compressed(self._span(position))) + reader.flush()).decode("utf-8")

    @overload
    def __getitem__(self, index: int) -> ScriptResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[ScriptResult]: ...

    def __getitem__(self, index: int | slice) -> ScriptResult | list[ScriptResult]:
        if isinstance(index, slice):
            return [self._read_at(p) for p in range(len(self))[index]]
        return self._read_at(range(len(self))[index])  # a negative index, and IndexError, as a list's

    def __iter__(self) -> Iterator[ScriptResult]:
        for position in range(len(self)):
            yield self._read_at(position)

    def texts(self) -> Iterator[str]:
        """Each result's JSON as :func:`~jaxrun.results.result_files.dump_json` writes it, in order."""
        for position in range(len(self)):
            model = self._models.get(position)
            yield dump_text(model.model) if model is not None and model.model is not None else self._text(position)

    def figures(self) -> list[Figures]:
        return [_figures(self._span(p), self._words) for p in range(len(self))]

    def benchmarks(self) -> list["ScriptBenchmark"]:
        return [self._models[p].benchmark for p in sorted(self._models)  # type: ignore[misc]
                if self._models[p].benchmark is not None]

    def having(self, names: Iterable[str]) -> Iterator[tuple[int, ScriptResult]]:
        """``(position, result)`` of the results that have one of the fields ``names`` (of
        :data:`HAVING`) set, the others never read."""
        bits = sum(1 << HAVING.index(name) for name in names) << _HAVING_SHIFT
        for position in range(len(self)):
            if _mask(self._span(position)) & bits:
                yield position, self._read_at(position)

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
