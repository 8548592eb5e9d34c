"""One script's run: its result, attempts and compiles."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from msgspec import Meta

from jaxrun.core.formatting import joined
from jaxrun.results.base_model import SCHEMA_VERSION, ErrorClass, MappingModel
from jaxrun.results.benchmark_result import ScriptBenchmark
from jaxrun.results.figures import SCRIPT_FIGURES
from jaxrun.results.numerics import Numerics
from jaxrun.results.profile_result import ScriptProfile
from jaxrun.results.run_samples import WarmSummary

MAX_RECOMPILE_REASONS = 100


class ProgramCost(MappingModel):
    """XLA's cost analysis of a compiled program (the last executable built for it)."""

    flops: Annotated[float | None, Meta(description=(
        "Floating-point operations per call, every device's share"
    ))] = None
    bytes_accessed: Annotated[float | None, Meta(description="Bytes read and written per call")] = None
    transcendentals: Annotated[float | None, Meta(description="exp, log, tanh, ... per call")] = None
    source: Annotated[Literal["xla", "xla_trip_counts"] | None, Meta(description=(
        "xla: XLA's analysis as it is (no loop left); xla_trip_counts: XLA's analysis with each "
        "loop's body counted as often as the trip count XLA proved; null: unknown (see reason)"
    ))] = None
    reason: Annotated[str | None, Meta(description="Why the figures are null, or how they were corrected")] = None


class ProgramMemory(MappingModel):
    """XLA's memory analysis of a compiled program: the device memory its executable needs, per device."""

    argument_bytes: Annotated[int, Meta(description="Its inputs")]
    output_bytes: Annotated[int, Meta(description="Its outputs")]
    alias_bytes: Annotated[int, Meta(description="Outputs that reuse an input's buffer (donated arguments)")]
    temp_bytes: Annotated[int, Meta(description="Temporary buffers while it runs")]
    generated_code_bytes: Annotated[int, Meta(description="The executable's code")]
    total_bytes: Annotated[int, Meta(description=(
        "argument + output - alias + temp + generated code: what the program needs on the device, "
        "its inputs included"
    ))]

    @property
    def beyond_arguments(self) -> int:
        """What a call allocates besides its (already resident) inputs."""
        return self.total_bytes - self.argument_bytes


class CompileEnvironment(MappingModel):
    """What JAX's persistent-cache key takes from the process besides the program
    (jax/_src/cache_key.py): a program compiled again in a warm cache differs in one of these."""

    jax_version: str | None = None
    jaxlib_version: str | None = None
    backend: Annotated[str | None, Meta(description="The platform JAX compiled for (cpu, gpu, tpu)")] = None
    platform_version: Annotated[str | None, Meta(description="The backend's own version (CUDA, libtpu, ...)")] = None
    xla_flags: Annotated[list[str], Meta(description=(
        "The XLA flags JAX's cache key hashes, sorted: XLA_FLAGS, LIBTPU_INIT_ARGS and --xla* "
        "arguments of the script's command line"
    ))] = []
    cache_dir: Annotated[str | None, Meta(description=(
        "The persistent compilation cache's folder; null when it is off"
    ))] = None
    jax_config: Annotated[dict[str, str], Meta(description=(
        "JAX settings that shape the program JAX hands XLA, and so enter the key through it, as the "
        "script's end saw them: jax_enable_x64, jax_default_matmul_precision, jax_threefry_partitionable, "
        "jax_default_prng_impl, jax_use_shardy_partitioner (those this JAX has)"
    ))] = {}


class Transfers(MappingModel):
    """Implicit copies of one direction that JAX's transfer guard saw (jax_transfer_guard="log")."""

    count: int
    bytes: Annotated[int | None, Meta(description=(
        "Bytes of the arrays copied (each array once, however many devices got it); "
        "null when JAX logged a transfer without naming its array (its C++ dispatch path)"
    ))]


class TransferStats(MappingModel):
    """Implicit host<->device transfers of a script (explicit jax.device_put / device_get not counted)."""

    host_to_device: Transfers | None = None
    device_to_host: Annotated[Transfers | None, Meta(description=(
        "null on CPU: its arrays are host memory, JAX's guard sees no copy to the host"
    ))] = None
    device_to_device: Transfers | None = None
    examples: Annotated[list[str], Meta(description="The first transfers, as JAX logged them")] = []
    reason: Annotated[str | None, Meta(description="Why a direction is null")] = None


class CompileStats(MappingModel):
    """JIT work for one program, keyed by the name JAX's transformations give it (``jit(loss)``,
    ``jit(grad(loss))``, ``pmap(step)``; ``name @ file:line`` when two functions share a name),
    from ``jax.monitoring`` duration events."""

    count: Annotated[int, Meta(description=(
        "XLA compilations (executables loaded from the persistent cache are cache_hits)"
    ))] = 0
    trace_time: Annotated[float, Meta(description="Seconds of tracing to a jaxpr")] = 0.0
    lower_time: Annotated[float, Meta(description="Seconds of lowering to StableHLO")] = 0.0
    compile_time: Annotated[float, Meta(description="Seconds of XLA compilation (cache loads not included)")] = 0.0
    source: Annotated[str | None, Meta(description="path:line of the function (null for JAX's own)")] = None
    traces: Annotated[int, Meta(description="Times the program was traced; more than 1 means JAX retraced it")] = 0
    cache_hits: Annotated[int, Meta(description="Executables loaded from the persistent compilation cache")] = 0
    cache_load_time: Annotated[float, Meta(description="Seconds spent loading them")] = 0.0
    recompile_reasons: Annotated[list[str], Meta(description=(
        "Why each trace after the first happened, as JAX explains its cache misses "
        f"(jax_explain_cache_misses); at most {MAX_RECOMPILE_REASONS} kept"
    ))] = []
    # What XLA knows about the program: its last executable's analyses.
    cost: Annotated[ProgramCost | None, Meta(description=(
        "XLA's cost analysis; null when no executable was read"
    ))] = None
    memory: Annotated[ProgramMemory | None, Meta(description=(
        "XLA's memory analysis; null when the backend gives none"
    ))] = None
    fingerprint: Annotated[str | None, Meta(description=(
        "Of the optimized program XLA built (its HLO as XLA prints it for fingerprints: no "
        "source lines, canonical names): equal across processes for the same program and compiler, different "
        "when either changes"
    ))] = None
    input_fingerprint: Annotated[str | None, Meta(description=(
        "Of the program JAX handed to XLA (StableHLO, debug info stripped: what JAX's "
        "persistent-cache key hashes): different only when the program itself changed"
    ))] = None
    variants: Annotated[int, Meta(description=(
        "Different input programs seen (shapes, dtypes, devices): executables "
        "the fields above describe the last of"
    ))] = 0
    device_kind: Annotated[str | None, Meta(description=(
        "The kind of device it was compiled for, e.g. 'NVIDIA H100'"
    ))] = None
    device_count: Annotated[int | None, Meta(description="How many devices it was compiled for")] = None
    analysis_time: Annotated[float, Meta(description=(
        "Seconds jaxrun spent reading XLA's analyses (in the compile "
        "phase's wall time, not in compile_time)"
    ))] = 0.0
    analysis_reason: Annotated[str | None, Meta(description=(
        "Why the analyses are null (a JAX internal moved, ...)"
    ))] = None
    cache_miss_reason: Annotated[str | None, Meta(description=(
        "Why a warm persistent cache compiled this program where an earlier run of the same "
        "script loaded it or wrote it there: the cache key's ingredient that changed (from the history)"
    ))] = None


class Attempt(MappingModel):
    """One launch of the script (retries and the CPU fallback each add one)."""

    number: int
    device: str
    success: bool
    error_class: ErrorClass | None = None
    error_message: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    execution_time: float | None = None
    started_at: str


class RunEnvironment(MappingModel):
    """Which environment a script got (the rule: README, "The script's environment")."""

    mode: Annotated[Literal["inherited", "isolated"], Meta(description=(
        "inherited: all of the user's variables; isolated: --isolate-env's minimal set"
    ))]
    set: Annotated[dict[str, str], Meta(description="What --env / the env setting set on top")] = {}
    variables: Annotated[int, Meta(description="How many variables the script's environment held")]
    setup_padding: Annotated[int | None, Meta(description=(
        "--randomize-setup: bytes of the random padding (JAXRUN_SETUP_PADDING) in this run's "
        "environment; null when the setup was not randomised"
    ))] = None
    cpus: Annotated[list[int] | None, Meta(description=(
        "The CPU cores the run's processes were pinned to (their affinity: a --jobs N share of the "
        "cores, a jaxrun ab --duet half); null when it was not pinned and had every core jaxrun had"
    ))] = None


Outcome = Literal["passed", "failed", "xfailed", "xpassed"]


class ProcessResult(MappingModel):
    """One process of a multi-process job (--processes N): its own figures, as a one-process
    script's result has them (README, "Multi-process programs")."""

    process_id: Annotated[int, Meta(description="Its id in the job (jax.process_index()), 0 the coordinator")]
    success: bool
    error_class: Annotated[ErrorClass | None, Meta(description=(
        "Why it failed; null on success and for a process jaxrun stopped (see stopped)"
    ))] = None
    error_message: str | None = None
    stopped: Annotated[str | None, Meta(description=(
        "Why jaxrun stopped it though it had not failed itself (another process failed first)"
    ))] = None
    exit_code: int | None = None
    signal: int | None = None
    execution_time: Annotated[float | None, Meta(description="Seconds, its whole process")] = None
    body_time: float | None = None
    import_time: float | None = None
    jit_compile_time: float | None = None
    run_time: float | None = None
    cpu_time: Annotated[float | None, Meta(description="Seconds user+sys of its process tree")] = None
    memory_peak: Annotated[float | None, Meta(description=(
        "MiB (2^20 bytes), peak host memory of its process tree"
    ))] = None
    compile_count: int | None = None
    results: Annotated[dict[str, Any], Meta(description="What it passed to jaxrun.record")] = {}
    stdout_log: str | None = None
    stderr_log: str | None = None


class CellTiming(MappingModel, dict=True):
    """One code cell of a notebook as it ran (probe/notebook.py)."""

    EXCLUDED = {"outputs": "--save-notebooks: what its Python code wrote, [(stdout|stderr, text)]; for the "
                           "executed copy only"}
    outputs = None

    index: Annotated[int, Meta(description=(
        "The code cell's number from 1: what Jupyter shows as In [index] after "
        "Restart & Run All (markdown cells are not counted)"
    ))]
    source: Annotated[str, Meta(description="Its first line of code")]
    seconds: Annotated[float | None, Meta(description=(
        "Seconds it ran (its code compiled and run); for the cell the "
        "process was stopped in (not finished), up to the process's end; null: unknown, "
        "or it never ran"
    ))] = None
    outcome: Annotated[Literal["ok", "error", "exit", "not finished", "not run"], Meta(description=(
        "ok; error: it raised (the script's error); exit: it ended the process itself (sys.exit, "
        "os._exit, os.abort or a signal to itself: the result's ended_by says which); not finished: the process was "
        "stopped in it (a timeout, a kill); not run: the run never reached it (an earlier cell failed or exited)"
    ))]
    error_line: Annotated[int | None, Meta(description="The line of the cell where it failed")] = None


class ScriptResult(MappingModel, dict=True):
    """What happened when one script ran (possibly over several attempts)."""

    EXCLUDED = {
        "profile": "The profiled run's samples and timeline, for the jax_profiling/ files",
        # Its backend lost sight of its process, which may still run and write its files (a Slurm
        # controller or a Ray cluster that stopped answering): its files are not recorded as final
        # (results/ownership.py), so a later run still knows every file under its names as jaxrun's.
        # Not in the result file: its error message and hint say so.
        "may_still_run": "Its backend lost sight of its process, which may still run and write its files",
    }
    profile: ClassVar[ScriptProfile | None] = None
    may_still_run: ClassVar[bool] = False

    schema_version: Annotated[int, Meta(description=(
        "Version of this file's layout (raised when a field changes meaning)"
    ))] = SCHEMA_VERSION
    script_name: Annotated[str, Meta(description=(
        "The script's name in the batch: its path under the folder searched, "
        "folders joined by __, without .py (a notebook keeps .ipynb); _2, _3... where two "
        "would clash"
    ))]
    script_path: Annotated[str, Meta(description="Absolute path of the script (or notebook)")]
    params: Annotated[dict[str, Any] | None, Meta(description=(
        "The point of a parameter sweep this run was (name -> value, in the sweep's order; "
        "--param): its script_name ends with them, as in train[batch=64,devices=2]; null outside a sweep"
    ))] = None
    success: Annotated[bool, Meta(description=(
        "Its last attempt ran to its end without an error (exit status 0); outcome "
        "says whether that was expected"
    ))]
    error_class: Annotated[ErrorClass | None, Meta(description=(
        "Why it failed (the failure classes: docs/reference/errors.md); "
        "null when it succeeded"
    ))] = None
    error_message: Annotated[str | None, Meta(description=(
        "The failure in one line (the exception's message, or what "
        "stopped the process)"
    ))] = None
    exception_type: Annotated[str | None, Meta(description=(
        "The class of the Python exception that ended the script, "
        "when one did"
    ))] = None
    traceback: Annotated[str | None, Meta(description="Tail of the Python traceback, when one exists")] = None
    hint: Annotated[str | None, Meta(description="What to try about the failure (its class's hint)")] = None
    exit_code: Annotated[int | None, Meta(description=(
        "The process's exit status; null when a signal ended it"
    ))] = None
    signal: Annotated[int | None, Meta(description="Number of the signal that ended the process, or null")] = None
    device_requested: Annotated[str, Meta(description=(
        "The device asked for (--device, a config file, the script's own "
        "settings): auto, cpu, gpu, tpu or one device such as gpu:1"
    ))]
    device_used: Annotated[str | None, Meta(description="Platform the last attempt ran on")] = None
    device_index: Annotated[int | None, Meta(description=(
        "Id of the one device of that platform the run was given (--device gpu:1 -> 1); null "
        "when any device of the platform would do (--device gpu, a fallback to cpu). Shown as gpu:1"
    ))] = None
    jax_backend: Annotated[str | None, Meta(description="Backend JAX actually initialised in the child")] = None
    device_count: Annotated[int | None, Meta(description="Devices the script saw, when it used JAX")] = None
    fallback_reason: Annotated[str | None, Meta(description=(
        "Why it ran on another device than the one asked for "
        "(the failure there); null when it did not fall back"
    ))] = None
    attempts: Annotated[list[Attempt], Meta(description=(
        "Each attempt in order (a retry or a fallback is one more)"
    ))] = []
    execution_time: Annotated[float | None, Meta(description="Seconds, whole process")] = None
    timing: Annotated[str | None, Meta(description=(
        "'median of N counted runs' for a benchmarked script whose N counted runs all "
        f"succeeded: {joined(f.field for f in SCRIPT_FIGURES)} are then each "
        "the median of those runs (" + "".join(f"{f.field} the lower middle one, a run's own; " for f in SCRIPT_FIGURES
        if f.aggregate == "median_low")
        + "benchmark.samples holds every run); null: the figures are of one run"
    ))] = None
    body_time: Annotated[float | None, Meta(description=(
        "Seconds, the script body inside the probe: from its first line to its end (return, "
        "exception, sys.exit, os._exit, a signal it sent itself), and on success to the end of the device "
        "work it dispatched"
    ))] = None
    import_time: Annotated[float | None, Meta(description=(
        "Seconds of the body during which at least one import statement ran, in any thread "
        "(jax included, with what it loads and any JIT work inside the import)"
    ))] = None
    run_time: Annotated[float | None, Meta(description=(
        "Seconds of the script's own work: the body when neither an import nor JAX's "
        "tracing, lowering or compiling ran (device work it dispatched included, kept or dropped). "
        "import_time + the JIT work's wall time outside imports + run_time = body_time (within 1 µs; "
        "jit_compile_time sums nested phases, so it can be a little larger than their wall time)"
    ))] = None
    drain_time: Annotated[float | None, Meta(description=(
        "Seconds after the script's last line until the device work it had dispatched "
        "ended (part of body_time and run_time); 0 when the devices were idle, null when unmeasured"
    ))] = None
    ended_by: Annotated[str | None, Meta(description=(
        "How the body ended: return, exception, sys.exit(N), os._exit(N), os.abort(), a "
        "signal the script sent itself; null when the process was stopped from outside"
    ))] = None
    phases_note: Annotated[str | None, Meta(description=(
        "Where the phases could not be told apart exactly, why (null when they are exact)"
    ))] = None
    cpu_time: Annotated[float | None, Meta(description=(
        "Seconds user+sys of the script's process and every descendant, waited for or not "
        "(daemons that left its tree, children nobody waited for); null when unmeasured"
    ))] = None
    cpu_method: Annotated[str | None, Meta(description=(
        "How cpu_time was measured: the run's cgroup's own count (+ the process's start-up "
        "before it joined), or, without a cgroup, rusage + sampled CPU of descendants nobody in the tree waited for"
    ))] = None
    memory_peak: Annotated[float | None, Meta(description=(
        "MiB (2^20 bytes), peak host memory of the script's processes (its own, its "
        "descendants'; shared pages counted once; nothing inherited from the launcher)"
    ))] = None
    memory_method: Annotated[str | None, Meta(description="How memory_peak was measured")] = None
    device_memory_peak: Annotated[float | None, Meta(description=(
        "MiB (2^20 bytes), peak device memory (null on CPU)"
    ))] = None
    device_memory_reason: Annotated[str | None, Meta(description="Why device_memory_peak is null, when it is")] = None
    device_utilization: Annotated[float | None, Meta(description="0-1, null when not measurable")] = None
    device_utilization_reason: Annotated[str | None, Meta(description=(
        "Why device_utilization is null, when it is"
    ))] = None
    jit_compile_time: Annotated[float | None, Meta(description=(
        "Seconds, trace + lower + compile (or load from the persistent cache), every program"
    ))] = None
    compile_count: Annotated[int | None, Meta(description="XLA compilations (cache loads are cache_hits)")] = None
    compiles: Annotated[dict[str, CompileStats], Meta(description=(
        "Per program, e.g. jit(loss), jit(grad(loss))"
    ))] = {}
    compile_environment: Annotated[CompileEnvironment | None, Meta(description=(
        "What JAX's persistent-cache key took from the process; null when it did not use JAX"
    ))] = None
    transfers: Annotated[TransferStats | None, Meta(description=(
        "Implicit host<->device transfers; null when JAX was unused (a direction is null, with the "
        "reason, where they could not be counted: a guard level the script or its environment set, CPU's device-to-host)"
    ))] = None
    live_array_bytes: Annotated[int | None, Meta(description=(
        "Bytes of the jax.Arrays alive when the body ended (jax.live_arrays()); null without JAX"
    ))] = None
    device_energy: Annotated[float | None, Meta(description=(
        "Joules the job's GPUs used while it ran: NVML's total-energy counter (Volta or newer) read at its start "
        "and end, the GPUs' sum; null with device_energy_reason"))] = None
    device_power: Annotated[float | None, Meta(description=(
        "Watts, the GPUs' mean power: device_energy over the seconds between the two readings"))] = None
    device_power_sampled: Annotated[float | None, Meta(description=(
        "Watts, the mean of NVML's power readings taken through the run (every 0.1 s, the GPUs' sum): a check of "
        "device_power from another reading; null where none was taken"))] = None
    device_energy_reason: Annotated[str | None, Meta(description="Why device_energy is null, when it is")] = None
    host_energy: Annotated[float | None, Meta(description=(
        "Joules the host's CPU packages used while the job ran: their RAPL counters (Linux's powercap) read at its "
        "start and end; every process's work on the machine counts, not only the job's; null with host_energy_reason"
    ))] = None
    host_power: Annotated[float | None, Meta(description=(
        "Watts, the CPU packages' mean power: host_energy over the seconds between the two readings"))] = None
    host_energy_reason: Annotated[str | None, Meta(description="Why host_energy is null, when it is")] = None
    cache_hits: Annotated[int | None, Meta(description=(
        "Executables loaded from the persistent compilation cache; null when it is off"
    ))] = None
    cache_misses: Annotated[int | None, Meta(description=(
        "Persistent-cache lookups that found nothing (requests - hits); null when it is off"
    ))] = None
    compile_time_saved: Annotated[float | None, Meta(description=(
        "Seconds of compilation the persistent cache saved, a lower bound (JAX stores "
        "compile times in whole seconds)"
    ))] = None
    warnings: Annotated[list[str], Meta(description=(
        "What deserves a look though the run succeeded, e.g. a program compiled many times and why"
    ))] = []
    outcome: Annotated[Outcome | None, Meta(description=(
        "passed / failed, or xfailed / xpassed for a script expected to fail (xfail)"
    ))] = None
    xfail: Annotated[str | None, Meta(description="Why the script is expected to fail (its xfail setting)")] = None
    command: Annotated[list[str] | None, Meta(description="The command line the script's process ran")] = None
    python: Annotated[str | None, Meta(description=(
        "The interpreter it ran under when not jaxrun's own (--python, another environment); "
        "compile_environment holds that environment's jax and jaxlib versions"
    ))] = None
    prestarted: Annotated[bool | None, Meta(description=(
        "Its process was started before the script was known (a spare, to hide Python's "
        "start-up); the time it waited is not in execution_time"
    ))] = None
    start_mode: Annotated[Literal["exec", "fork", "fork+jax"] | None, Meta(description=(
        "How its process started (--prestart): exec (a new interpreter), fork (forked from a "
        "prestarted interpreter that had imported jaxrun's probe) or fork+jax (one that had also imported jax: the "
        "script's own import_time then finds jax imported); wall and CPU time start at the fork; null when it "
        "never started"
    ))] = None
    prestart_reason: Annotated[str | None, Meta(description=(
        "Why its process was exec'd where --prestart asked for a fork (or auto chose exec)"
    ))] = None
    prestart_import_time: Annotated[float | None, Meta(description=(
        "fork+jax: seconds the prestarted interpreter spent importing jax, once for the batch "
        "(not in this script's figures)"
    ))] = None
    script_args: Annotated[list[str], Meta(description="The script's own arguments (its sys.argv[1:])")] = []
    numerics: Annotated[Numerics | None, Meta(description="The numerics it started with")] = None
    environment: Annotated[RunEnvironment | None, Meta(description=(
        "Which environment variables the script got"
    ))] = None
    settings: Annotated[dict[str, str], Meta(description=(
        "Options set for this script alone, and where (a per-script table, its header comment)"
    ))] = {}
    content_hash: Annotated[str | None, Meta(description="sha256 of the script as it ran")] = None
    options_key: Annotated[str | None, Meta(description=(
        "Fingerprint of the run options (--resume compares it)"
    ))] = None
    leftover_processes: Annotated[int | None, Meta(description=(
        "Processes the script left running when it ended (daemons, escaped children), "
        "stopped by jaxrun; null when it never ran"
    ))] = None
    peak_processes: Annotated[int | None, Meta(description=(
        "Most processes of the script's tree alive at one sample (the script's own "
        "included); null when it never ran"
    ))] = None
    cgroup: Annotated[str | None, Meta(description=(
        "The kernel control group the script ran in (every process it started "
        "tracked; --memory-limit and --max-processes held by the kernel); null where jaxrun could "
        "not create one (then limits are watched by sampling)"
    ))] = None
    kernel_limits: Annotated[list[str] | None, Meta(description=(
        "The limits the kernel held through the cgroup: \"memory\" (--memory-limit), "
        "\"processes\" (--max-processes); the others were watched by sampling only. Null without a cgroup"
    ))] = None
    node: Annotated[str | None, Meta(description=(
        "Host name of the machine that ran the script's last attempt (--backend ray or "
        "slurm: the node's host name; null for a local run, and when the script never ran)"
    ))] = None
    ray_node_id: Annotated[str | None, Meta(description=(
        "Ray's id of the node that ran the last attempt (ray.get_runtime_context()."
        "get_node_id(), as `ray list nodes` shows it); null outside --backend ray"
    ))] = None
    slurm_job_id: Annotated[str | None, Meta(description=(
        "--backend slurm: the Slurm task that ran the script's last attempt, as squeue and "
        "sacct name it (<array job id>_<task index>, or the job id of an array of one); null elsewhere"
    ))] = None
    queue_wait: Annotated[float | None, Meta(description=(
        "--backend slurm: seconds from the submission of the script's Slurm task to the "
        "start of the task on its node (the wait in the queue and the task's own start-up, not part of "
        "execution_time); null elsewhere, and when the task never started"
    ))] = None
    processes: Annotated[list[ProcessResult] | None, Meta(description=(
        "--processes N: each process of the job, by id; the job's own figures are described in "
        "the README (\"Multi-process programs\"); null for a one-process run"
    ))] = None
    output_files: Annotated[list[str], Meta(description=(
        "Files the script wrote to JAXRUN_OUTPUT_DIR "
        "(RESULTS_DIR/outputs/<name>), relative to it"
    ))] = []
    results: Annotated[dict[str, Any], Meta(description="What the script passed to jaxrun.record")] = {}
    stdout_log: Annotated[str | None, Meta(description=(
        "Path of the file holding what the script printed on stdout"
    ))] = None
    stderr_log: Annotated[str | None, Meta(description=(
        "Path of the file holding what the script printed on stderr"
    ))] = None
    stdout_truncated: Annotated[bool, Meta(description=(
        "The stdout log stops at its cap (50 MiB, "
        "JAXRUN_LOG_CAP_BYTES); the rest was read and dropped"
    ))] = False
    stderr_truncated: Annotated[bool, Meta(description=(
        "The stderr log stops at its cap, as stdout_truncated"
    ))] = False
    started_at: Annotated[str, Meta(description=(
        "When its first attempt was started: UTC, ISO 8601 with milliseconds"
    ))]
    finished_at: Annotated[str, Meta(description="When its last attempt ended: UTC, ISO 8601 with milliseconds")]
    kept: Annotated[bool, Meta(description=(
        "Kept from an earlier run in this results folder by --resume (not run "
        "again: started_at and finished_at are that run's)"
    ))] = False
    cells: Annotated[list[CellTiming] | None, Meta(description=(
        "A notebook's code cells in the order they ran, each timed (their seconds are part of "
        "body_time); null for a .py script"
    ))] = None
    warm: Annotated[WarmSummary | None, Meta(description="Warm mode: the entry function's calls")] = None
    benchmark: Annotated[ScriptBenchmark | None, Meta(description="Process benchmark runs, when asked")] = None
    performance_metrics: Annotated[dict[str, Any] | None, Meta(description=(
        "With profiling (enable_profiling / --profile): the run's figures and its profile files"
    ))] = None

    def __bool__(self) -> bool:
        """True exactly when the script succeeded (``if execute_jax_script(...):``)."""
        return self.success
