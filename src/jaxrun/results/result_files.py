"""The one place where models become files: atomic JSON writes, reads and JSON Schemas.

Every write goes to a temporary file in the same folder and is moved into place with
``os.replace``, so a reader (or a crash) never sees a half-written result file.
"""

from __future__ import annotations

import errno
import importlib
import itertools
import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator, TypeVar

from jaxrun.core.formatting import one_line
from jaxrun.errors import ResultsWriteError, UsageError

if TYPE_CHECKING:
    # The models are imported where one is written or read, never on the way to the first script
    # (its file names and atomic writes are needed there).
    from jaxrun.results.base_model import MappingModel as BaseModel

M = TypeVar("M", bound="BaseModel")

EXECUTION_RESULTS = "jax_execution_results.json"
PERFORMANCE_METRICS = "jax_performance_metrics.json"
EXECUTION_LOG = "jax_execution_log.txt"
DEVICE_INFO = "jax_device_info.json"
BENCHMARK_RESULTS = "jax_benchmark_results.json"
SCRIPT_RESULTS_DIR = "script_results"
LOGS_DIR = "logs"
# --backend slurm: what submitit writes for each task (its pickled job and result, its logs) and
# the record of the arrays a batch submitted (executors/slurm_record.py).
SLURM_DIR = "slurm"
OUTPUTS_DIR = "outputs"
NOTEBOOKS_DIR = "notebooks"  # --save-notebooks: each notebook executed, with its outputs (outputs/notebook_outputs.py)
PROFILING_DIR = "jax_profiling"
MEMORY_PROFILE = "memory_profile.json"
TIMING_PROFILE = "timing_profile.json"
TRACES_DIR = "traces"
# Room a batch keeps on the results folder's disk for its batch files' last rewrite (outputs/batch_files.py).
RESERVE = ".jaxrun.reserve"

# mkstemp creates its file with mode 0600; result files must get the mode any other file the
# user writes gets (0666 minus the umask), or they end up unreadable to teammates and CI jobs.
# The umask can only be read by setting it: done once, at import, with a value that is stricter
# than any real umask so a file created concurrently is never more open than intended.
_UMASK = os.umask(0o077)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK

# Model behind each file, for `jaxrun schema` and for validation in tests ("module:Class", imported
# on use: this module is imported by every write, and the pytest plugin's model lives in bench/).
SCHEMAS: dict[str, str] = {
    "execution_results": "jaxrun.results.models:BatchResult",
    "performance_metrics": "jaxrun.results.models:PerformanceMetrics",
    "device_info": "jaxrun.results.models:DeviceInfo",
    "script_result": "jaxrun.results.models:ScriptResult",
    "benchmark_results": "jaxrun.results.models:BenchmarkResults",
    "comparison": "jaxrun.results.models:ComparisonReport",
    "pytest_benchmarks": "jaxrun.bench.records:PytestBenchmarks",
    "memory_profile": "jaxrun.results.models:MemoryProfile",
    "timing_profile": "jaxrun.results.models:TimingProfile",
}


def schema_model(name: str) -> type[BaseModel]:
    """The model of the file ``name`` (a key of :data:`SCHEMAS`)."""
    module_name, class_name = SCHEMAS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def check_output_file(path: str | os.PathLike[str], what: str) -> None:
    """Refuse, before anything runs, a file the user asked jaxrun to write that it could not
    write at the end: its folder missing (never created for it: a typo would make folders), the
    path a folder, or a folder where no file can be created (/proc, a read-only file system, no
    permission: tried, since root passes every os.access check). ``what``: what the file is and
    the option that named it, for the message (``the JUnit report (--junit-xml)``)."""
    path = Path(path)
    folder = path.parent
    said = f"cannot write {what} {str(path)!r}"
    if path.is_dir():
        raise UsageError(f"{said}: it is a folder; name a file")
    if not folder.exists():
        raise UsageError(f"{said}: the folder {str(folder)!r} does not exist (jaxrun does not create it); "
                         "create it first or pass a path in an existing folder")
    if not folder.is_dir():
        raise UsageError(f"{said}: {str(folder)!r} is not a folder; pass a path in an existing folder")
    trial = folder / f".jaxrun-check.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.close(os.open(trial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        raise UsageError(f"{said}: no file can be created in {str(folder)!r} ({exc.strerror or exc}); "
                         "pass a path in a folder you can write to") from None
    try:
        os.unlink(trial)
    except OSError:
        pass


def atomic_write_text(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never half.

    ``durable=False`` skips the fsync: the file then survives a crash of jaxrun but perhaps not
    of the machine; per-script result files use it (a 10,000-script batch would spend seconds in
    fsync), and so do the batch files' rewrites but their last (outputs/batch_files.py)."""
    atomic_write_chunks(path, (text,), durable=durable)


def atomic_write_chunks(path: str | os.PathLike[str], chunks: Iterable[str], *, durable: bool = True) -> None:
    """:func:`atomic_write_text` of the text ``chunks`` make, written as they come: the whole
    text is never held at once (a batch file of 10,000 results is tens of MB)."""
    try:
        _atomic_write(os.fspath(path), chunks, durable)
    except ResultsWriteError:
        raise
    except OSError as exc:
        # A full disk, an I/O error: one line naming the file (errors.py), never a traceback.
        raise ResultsWriteError(Path(path), exc) from None


# One temporary name per writer (process, thread): no random names to try, no clash.
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.\d+\.\d+\.tmp", re.DOTALL)  # a name may hold a newline


def temporary_of(name: str) -> str | None:
    """The file whose atomic write left the temporary file ``name`` (a killed writer's), or None."""
    match = _TEMPORARY.fullmatch(name)
    return match["name"] if match else None


_BUFFER = 1 << 16  # text gathered before each write of a file written in chunks


def _atomic_write(where: str, chunks: Iterable[str], durable: bool) -> None:
    # Plain os calls on the path's text: a batch writes one such file per script (10,000 in
    # benchmarks/README.md's budgets), and each pathlib operation or buffered file object costs microseconds
    # (and a Path keeps each new file name in the interpreter's table of interned texts).
    folder, name = os.path.split(where)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            os.fchmod(fd, FILE_MODE)  # the mode O_CREAT gave is filtered by the umask
            pending: list[str] = []
            size = 0
            for chunk in chunks:
                pending.append(chunk)
                size += len(chunk)
                if size >= _BUFFER:
                    _write_all(fd, "".join(pending).encode("utf-8"))
                    pending, size = [], 0
            if pending:
                _write_all(fd, "".join(pending).encode("utf-8"))
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, where)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def dump_model(model: BaseModel) -> str:
    return dump_text(model) + "\n"


def dump_json(model: BaseModel) -> str | None:
    """``model`` as indented JSON (what :func:`dump_model` writes, without the final newline), or
    None when it holds a text that is not valid Unicode (then :func:`dump_text` writes it escaped)."""
    from jaxrun.results.model_json import exact_json_text

    return exact_json_text(model)


def dump_text(model: BaseModel) -> str:
    """``model`` as indented JSON, without the final newline (a text that is not valid Unicode,
    such as a file name with non-UTF-8 bytes, escaped, not lost)."""
    from jaxrun.results.model_json import json_text

    return json_text(model)


def write_model(path: str | os.PathLike[str], model: BaseModel, *, durable: bool = True) -> None:
    atomic_write_text(path, dump_model(model), durable=durable)


def dump_model_chunks(model: BaseModel, key: str, items: Iterable[Any]) -> Iterator[str]:
    """The text of :func:`dump_model` of ``model`` with its top-level field ``key`` holding
    ``items``, one item at a time: ``key`` is empty in ``model`` (``[]`` or ``{}``), ``items``
    are the list's models or the dict's ``(name, model)`` pairs, a model possibly given as its
    text (:func:`dump_json`'s, or :func:`dump_text`'s). The same bytes as dumping the whole model,
    without ever holding them all (a batch's files: one result at a time)."""
    text = dump_model(model)
    for empty, opening, closing in (("[]", "[", "]"), ("{}", "{", "}")):
        marker = f'\n  "{key}": {empty}'
        at = text.find(marker)  # unique: a top-level key is the only line with two spaces then "key"
        if at >= 0:
            break
    else:
        raise ValueError(f"{type(model).__name__} has no empty top-level field {key!r}")
    items = iter(items)
    first = next(items, None)
    if first is None:
        yield text
        return
    yield text[:at] + f'\n  "{key}": {opening}'
    separator = "\n    "
    for item in itertools.chain((first,), items):
        if opening == "{":
            name, item = item
            yield separator + _json_key(name) + ": " + _item_text(item)
        else:
            yield separator + _item_text(item)
        separator = ",\n    "
    yield f"\n  {closing}" + text[at + len(marker):]


def _item_text(item: BaseModel | str) -> str:
    """A model (or its text, :func:`dump_text`'s) indented as an item of a top-level list or dict."""
    return (item if isinstance(item, str) else dump_text(item)).replace("\n", "\n    ")


def _json_key(name: str) -> str:
    from jaxrun.results.model_json import json_key

    return json_key(name)


def write_model_chunks(path: Path, model: BaseModel, key: str, items: Iterable[Any], *, durable: bool = True) -> None:
    """:func:`write_model` of ``model`` with ``key`` holding ``items`` (:func:`dump_model_chunks`)."""
    atomic_write_chunks(Path(path), dump_model_chunks(model, key, items), durable=durable)


def write_json(path: Path, data: Any) -> None:
    atomic_write_text(Path(path), json.dumps(data, indent=2, default=str) + "\n")


def existing_folder(path: str | os.PathLike[str], what: str = "a results folder `jaxrun run` wrote") -> Path:
    """``path``, a folder that exists; else a UsageError that says it does not (or is a file),
    rather than naming a file missing in it."""
    folder = Path(path)
    if not folder.exists():
        raise UsageError(f"no such folder {str(folder)!r}: pass {what}")
    if not folder.is_dir():
        raise UsageError(f"{str(folder)!r} is not a folder: pass {what}")
    return folder


class DamagedFileError(UsageError):
    """A result file that exists but cannot be used: not JSON (cut off, garbled) or not of its model.
    The message is one line that names the file and says what is wrong in it."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{str(path)!r} is damaged: {problem}")
        self.path = Path(path)
        self.problem = problem


def _cut_literal(rest: str) -> bool:
    """Whether ``rest``, the text from where JSON stopped, is the start of true, false or null
    and the end of the file (``"done": nu``)."""
    rest = rest.rstrip()
    return bool(rest) and any(word.startswith(rest) and word != rest for word in ("true", "false", "null"))


def _not_json(text: str) -> str:
    """Where ``text`` stops being JSON: ``not valid JSON at line L column C (why)``."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        # json's own words point at the position it prints after them ("Unterminated string
        # starting at: line 3 column 9"); here the position comes first, so they point back at it.
        why = re.sub(r" at$", " there", exc.msg)
        why = why[:1].lower() + why[1:]
        if not text.strip():
            cut = "; the file is empty"
        elif exc.msg.startswith("Unterminated string"):  # a string that runs to the end: cut inside it
            cut = "; the file ends inside it: cut off?"
        elif exc.pos >= len(text.rstrip()) or _cut_literal(text[exc.pos:]):
            cut = "; the file ends there: cut off?"
        else:
            cut = ""
        return f"not valid JSON at line {exc.lineno} column {exc.colno} ({why}{cut})"
    except (ValueError, RecursionError) as exc:
        return f"not valid JSON ({type(exc).__name__})"
    return "not valid JSON"  # json accepts what msgspec does not (NaN, Infinity)


def _wrong_fields(exc: Exception, model: "type[BaseModel]") -> str:
    """The first field that does not match ``model``: ``script_results.0.success: Field required``."""
    from jaxrun.results.model_json import misfit

    return one_line(f"does not match {model.__name__}: {misfit(exc)}") or ""  # type: ignore[arg-type]


class NotRegularFileError(DamagedFileError):
    """A result file's name held by something that is not a regular file (a FIFO, a socket, a
    device): never opened for reading as one (a FIFO's open waits for a writer, a device never
    ends), one line that says what it is."""

    def __init__(self, path: Path, kind: str) -> None:
        UsageError.__init__(self, f"{str(path)!r} is not a regular file but {kind}: jaxrun reads its results only "
                                  "from regular files; remove it, or pass the folder a run wrote")
        self.path = Path(path)
        self.problem = f"not a regular file but {kind}"


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading when it is a regular file (symbolic links followed). Opening
    never waits: a FIFO is opened without blocking, looked at, and closed. Raises
    :class:`NotRegularFileError` for a FIFO, socket or device, ``IsADirectoryError`` for a folder,
    and OSError (missing, unreadable) for the caller to word."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, next((kind for test, kind in _KINDS if test(mode)), "not a file"))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_text(path: Path) -> str:
    with open_regular(path) as handle:  # OSError (missing, unreadable) is the caller's to word
        raw = handle.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DamagedFileError(path, f"not valid JSON: not UTF-8 text at byte {exc.start}") from None


def read_json(path: Path) -> Any:
    """The JSON in ``path``; raises :class:`DamagedFileError` (one line) when it is not JSON."""
    text = _read_text(path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise DamagedFileError(path, _not_json(text)) from None


def validate_model(path: Path, data: Any, model: type[M]) -> M:
    """``data`` read from ``path`` as a ``model``; raises :class:`DamagedFileError` naming the field."""
    import msgspec

    try:
        return model.model_validate(data)
    except msgspec.ValidationError as exc:
        raise DamagedFileError(path, _wrong_fields(exc, model)) from None


def read_model(path: Path, model: type[M]) -> M:
    """The ``model`` in the file ``path``: the one reader of result files (report, compare, --resume,
    the MCP tools). Raises OSError when it cannot be read and :class:`DamagedFileError` (a
    UsageError, so a ValueError) when it is damaged, with one line saying where: ``not valid JSON
    at line L column C`` or ``does not match BatchResult: script_results.0.success: Field required``;
    :class:`NotRegularFileError` (a DamagedFileError) when the name is a FIFO, a socket or a device,
    which is never read (:func:`open_regular`)."""
    import msgspec

    text = _read_text(path)
    try:
        return model.model_validate_json(text)
    except msgspec.ValidationError as exc:
        raise DamagedFileError(path, _wrong_fields(exc, model)) from None
    except (msgspec.DecodeError, RecursionError):
        raise DamagedFileError(path, _not_json(text)) from None


def json_schema(name: str) -> dict[str, Any]:
    return schema_model(name).model_json_schema()


# File names hold at most 255 bytes; a script's files add up to 34 (".<stem>_result.json.XXXXXXXX.tmp",
# "<stem>.attempt10.stdout.log"), so a longer <name> is cut, and a hash of the whole keeps it unique.
MAX_STEM_BYTES = 200


def file_stem(name: str) -> str:
    """``name`` as the stem of its files: itself, or when too long for a file name its first bytes
    and ``~`` and 8 hex digits of its hash."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= MAX_STEM_BYTES:
        return name
    import hashlib

    digest = hashlib.sha256(raw).hexdigest()[:8]
    head = raw[: MAX_STEM_BYTES - 9].decode("utf-8", "ignore")  # never half a character
    return f"{head}~{digest}"


def script_result_path(results_dir: Path, name: str) -> Path:
    return Path(script_result_file(results_dir, name))


def script_result_file(results_dir: str | os.PathLike[str], name: str) -> str:
    """:func:`script_result_path` as text (what a batch writes for each of its scripts)."""
    return os.path.join(results_dir, SCRIPT_RESULTS_DIR, f"{name}_result.json")
