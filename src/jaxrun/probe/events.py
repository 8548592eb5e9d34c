"""The events on the probe's private channel: each defined once, here, for the child that writes
them and the parent that reads them (run/reading/probe_reading.py, run/reading/classify.py, run/process/process_watch.py).

Each event is one JSON object per line: ``type`` (one of the names below) and the fields of its
``TypedDict``. They are plain dicts at run time (no cost in the script's process, no pydantic or
jax to import); :func:`problems` checks a line against its definition (tests/probe/test_probe_events.py
holds every event a real probe writes to it). docs/ARCHITECTURE.md describes the channel itself.
"""

# Required fields sit in a total base class, optional ones in the event. The annotations stay text:
# nothing at run time reads more than their names.
from __future__ import annotations

# The probe imports this module in every script's process, and ``typing`` (with the re, enum and
# collections it pulls in) is ~10 ms of CPU in a fresh interpreter: type checkers read typing's
# TypedDict; at run time an event is a plain dict, its definition a class that says which keys
# it has and which it requires (what problems() checks).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal, TypedDict, Union
else:
    class _Definition(type):
        """typing's TypedDict as far as the run needs it: calling a definition makes a plain
        dict; ``__annotations__`` holds its keys (its bases' too), ``__required_keys__`` those it
        requires (the keys of each total class in its bases)."""

        __call__ = dict  # not bound: Start(type=..., pid=...) is dict(type=..., pid=...)

        def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], total: bool = True) -> type:
            own = namespace.get("__annotations__", {})
            keys: dict[str, Any] = {}
            required: set[str] = set()
            for base in bases:
                keys.update(base.__annotations__)
                required.update(base.__required_keys__)
            keys.update(own)
            if total:
                required.update(own)
            namespace = {**namespace, "__annotations__": keys, "__required_keys__": frozenset(required),
                         "__optional_keys__": frozenset(keys.keys() - required), "__total__": total}
            return super().__new__(mcs, name, (), namespace)

    class TypedDict(metaclass=_Definition):
        pass

TYPE = "type"

START = "start"
JAX_LOADED = "jax_loaded"
COMPILE = "compile"
CACHE_SAVED = "cache_saved"
PROGRAM = "program"
RECORD = "record"
CALL = "call"
EXCEPTION = "exception"
EXIT = "exit"
BODY = "body"
PROBE_WARNING = "probe_warning"
END = "end"
PROFILE = "profile"
TRANSFER_GUARD = "transfer_guard"
CELL = "cell"
NOTEBOOK = "notebook"

# Phases of a COMPILE event.
PHASE_TRACE, PHASE_LOWER, PHASE_COMPILE = "trace", "lower", "compile"


class _StartFields(TypedDict):
    type: Literal["start"]
    pid: int
    python: str


class Start(_StartFields, total=False):
    """The probe is running (its absence: it never started)."""

    cgroup_joined: bool  # it joined the run's cgroups (run/process/cgroups.py)
    cgroup_error: str
    cpu_before_join: float  # its CPU seconds before it joined (what the group's count lacks)
    spare_ready_at: float  # perf_counter when it was ready as a spare (run/process/spare.py)


class JaxLoaded(TypedDict):
    """The script imported jax and the listeners are attached."""

    type: Literal["jax_loaded"]


class _CompileFields(TypedDict):
    type: Literal["compile"]
    phase: str  # PHASE_TRACE | PHASE_LOWER | PHASE_COMPILE
    fun: str  # the program key, e.g. "jit(grad(loss))"
    s: float
    at: float  # perf_counter when it ended


class Compile(_CompileFields, total=False):
    """One jax.monitoring duration of a program's trace, lowering or compilation."""

    source: str  # "path:line" of the user's function
    reason: str  # a trace: why JAX traced again
    cached: bool  # a compile: the executable was loaded from the persistent cache


class _ProgramFields(TypedDict):
    type: Literal["program"]
    fun: str  # the program key, as in the COMPILE event it follows
    s: float  # seconds spent reading XLA's analyses (after the COMPILE event's own time)


class Program(_ProgramFields, total=False):
    """What XLA knows about the executable just built or loaded for ``fun`` (probe/xla_facts.py)."""

    source: str
    cost: dict[str, Any]  # flops, bytes_accessed, transcendentals, source, reason
    memory: dict[str, int]  # argument/output/alias/temp/generated_code/total bytes
    fingerprint: str
    input_fingerprint: str
    device_kind: str
    device_count: int
    reason: str  # what could not be read, and why


class CacheSaved(TypedDict):
    type: Literal["cache_saved"]
    s: float  # compile seconds the persistent cache saved (JAX's lower bound)


class Record(TypedDict):
    type: Literal["record"]
    values: dict[str, Any]  # what the script passed to jaxrun.record


class _CallFields(TypedDict):
    type: Literal["call"]
    index: int
    seconds: float
    compile_time: float


class Call(_CallFields, total=False):
    """One call of the entry function in warm mode."""

    live_array_bytes: int  # bytes of the jax.Arrays alive after it (its return value dropped)


class TransferGuard(TypedDict):
    """The script set JAX's transfer guard itself (jax.config.update, jax.transfer_guard*): the
    guard's lines in its stderr are no longer jaxrun's count of its implicit transfers. Once."""

    type: Literal["transfer_guard"]
    setting: str  # what it called, e.g. "jax.config.update('jax_transfer_guard', 'disallow')"


class Exception_(TypedDict):
    type: Literal["exception"]
    pid: int
    exc_type: str
    exc_module: str
    exc_mro: list[str]
    message: str
    traceback: str  # as `python script.py` prints it, the probe's frames left out


class _ExitFields(TypedDict):
    type: Literal["exit"]
    pid: int
    code: int


class Exit(_ExitFields, total=False):
    """The script called sys.exit."""

    message: str  # sys.exit("text") printed it (status 1)


class Body(TypedDict):
    """The script's first line is about to run."""

    type: Literal["body"]
    pid: int
    at: float  # perf_counter


class ProbeWarning(TypedDict):
    """The probe could not do something (attach listeners, start profiling, ...)."""

    type: Literal["probe_warning"]
    message: str


class _EndFields(TypedDict):
    type: Literal["end"]
    body_start: float  # perf_counter
    body_time: float
    import_time: float
    compile_wall_time: float
    run_time: float
    phases_notes: list[str]  # what could not be told apart
    drain_time: float  # waited after the last line for the device work it dispatched
    ended_by: str  # return | exception | sys.exit(N) | os._exit(N) | a signal it sent itself
    cpu_time: float
    peak_rss_kb: int | None
    device: dict[str, Any] | None  # the backend used, peak device memory, live array bytes; None without jax
    compile_cache: dict[str, Any] | None  # {enabled, misses}; None without jax
    exit_code: int | None


class End(_EndFields, total=False):
    """The body ended (probe/ending.py): its phases, a partition of it (probe/phases.py)."""

    compile_environment: dict[str, Any]  # what JAX's cache key takes from the process (xla_facts.py)
    imports: list[list[Any]]  # profiling: [[start, end, module], ...]: the union of the imports, each
    # interval with the module its outermost import statement named (several: "jax, numpy"); a block
    # of consecutive short statements (probe/import_timer.py) adds [..., statements, seconds]


class _CellFields(TypedDict):
    type: Literal["cell"]
    index: int  # the code cell's number from 1: In [index] after Restart & Run All
    at: float  # perf_counter when it started


class Cell(_CellFields, total=False):
    """A notebook's code cell (probe/notebook.py): one at its start (``source``), one at its end
    (``s``, ``outcome``); a cell with no end never ended (the process was stopped in it)."""

    source: str  # start: its first line of code
    s: float  # end: seconds it ran (compiling and running its code)
    outcome: str  # end: ok | error | exit (sys.exit; or os._exit, os.abort, a signal to itself: sent as the body ends)
    error_line: int  # end: the line of the cell where it failed
    outputs: list[list[str]]  # end, --save-notebooks: [[stdout|stderr, text], ...] its Python code wrote


class Notebook(TypedDict):
    """A notebook's code cells, before the first runs (probe/notebook.py): a cell no CELL event
    started afterwards was never run (an earlier cell failed or exited, or the process ended)."""

    type: Literal["notebook"]
    cells: list[str]  # each code cell's first line of code, in order: cell N is cells[N - 1]


class Profile(TypedDict):
    """--profile: the trace and the device memory samples."""

    type: Literal["profile"]
    trace_dir: str | None
    trace_reason: str | None
    device_samples: dict[str, list[list[float]]]  # {"gpu:0": [[perf_counter, MiB], ...]}
    interval: float
    memory_profile: str | None  # the pprof file
    memory_profile_reason: str | None


if TYPE_CHECKING:
    Event = Union[Start, JaxLoaded, Compile, Program, CacheSaved, Record, Call, Exception_, Exit, Body, ProbeWarning,
                  End, Profile, TransferGuard, Cell, Notebook]
else:
    Event = dict

DEFINITIONS: dict[str, type] = {
    START: Start, JAX_LOADED: JaxLoaded, COMPILE: Compile, PROGRAM: Program, CACHE_SAVED: CacheSaved, RECORD: Record,
    CALL: Call, EXCEPTION: Exception_, EXIT: Exit, BODY: Body, PROBE_WARNING: ProbeWarning, END: End, PROFILE: Profile,
    TRANSFER_GUARD: TransferGuard, CELL: Cell, NOTEBOOK: Notebook,
}


def problems(event: dict[str, Any]) -> list[str]:
    """What in ``event`` does not match its definition: an unknown type, a missing required
    field, a field it does not define. (Values' types are for the type checker.)"""
    definition = DEFINITIONS.get(str(event.get(TYPE)))
    if definition is None:
        return [f"unknown event type {event.get(TYPE)!r}"]
    keys = set(event)
    missing = sorted(definition.__required_keys__ - keys)  # type: ignore[attr-defined]
    unknown = sorted(keys - set(definition.__annotations__))
    return [f"{event[TYPE]}: missing {name}" for name in missing] + [f"{event[TYPE]}: no field {name}" for name in unknown]
