"""One script's run: its result, attempts and compiles."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

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

    flops: float | None = Field(None, description="Floating-point operations per call, every device's share")
    bytes_accessed: float | None = Field(None, description="Bytes read and written per call")
    transcendentals: float | None = Field(None, description="exp, log, tanh, ... per call")
    source: Literal["xla", "xla_trip_counts"] | None = Field(
        None, description="xla: XLA's analysis as it is (no loop left); xla_trip_counts: XLA's analysis with each "
        "loop's body counted as often as the trip count XLA proved; null: unknown (see reason)"
    )
    reason: str | None = Field(None, description="Why the figures are null, or how they were corrected")


class ProgramMemory(MappingModel):
    """XLA's memory analysis of a compiled program: the device memory its executable needs, per device."""

    argument_bytes: int = Field(description="Its inputs")
    output_bytes: int = Field(description="Its outputs")
    alias_bytes: int = Field(description="Outputs that reuse an input's buffer (donated arguments)")
    temp_bytes: int = Field(description="Temporary buffers while it runs")
    generated_code_bytes: int = Field(description="The executable's code")
    total_bytes: int = Field(
        description="argument + output - alias + temp + generated code: what the program needs on the device, "
        "its inputs included"
    )

    @property
    def beyond_arguments(self) -> int:
        """What a call allocates besides its (already resident) inputs."""
        return self.total_bytes - self.argument_bytes


class CompileEnvironment(MappingModel):
    """What JAX's persistent-cache key takes from the process besides the program
    (jax/_src/cache_key.py): a program compiled again in a warm cache differs in one of these."""

    jax_version: str | None = None
    jaxlib_version: str | None = None
    backend: str | None = Field(None, description="The platform JAX compiled for (cpu, gpu, tpu)")
    platform_version: str | None = Field(None, description="The backend's own version (CUDA, libtpu, ...)")
    xla_flags: list[str] = Field(
        [], description="The XLA flags JAX's cache key hashes, sorted: XLA_FLAGS, LIBTPU_INIT_ARGS and --xla* "
        "arguments of the script's command line"
    )
    cache_dir: str | None = Field(None, description="The persistent compilation cache's folder; null when it is off")
    jax_config: dict[str, str] = Field(
        {}, description="JAX settings that shape the program JAX hands XLA, and so enter the key through it, as the "
        "script's end saw them: jax_enable_x64, jax_default_matmul_precision, jax_threefry_partitionable, "
        "jax_default_prng_impl, jax_use_shardy_partitioner (those this JAX has)"
    )


class Transfers(MappingModel):
    """Implicit copies of one direction that JAX's transfer guard saw (jax_transfer_guard="log")."""

    count: int
    bytes: int | None = Field(description="Bytes of the arrays copied (each array once, however many devices got it); "
                              "null when JAX logged a transfer without naming its array (its C++ dispatch path)")


class TransferStats(MappingModel):
    """Implicit host<->device transfers of a script (explicit jax.device_put / device_get not counted)."""

    host_to_device: Transfers | None = None
    device_to_host: Transfers | None = Field(
        None, description="null on CPU: its arrays are host memory, JAX's guard sees no copy to the host"
    )
    device_to_device: Transfers | None = None
    examples: list[str] = Field([], description="The first transfers, as JAX logged them")
    reason: str | None = Field(None, description="Why a direction is null")


class CompileStats(MappingModel):
    """JIT work for one program, keyed by the name JAX's transformations give it (``jit(loss)``,
    ``jit(grad(loss))``, ``pmap(step)``; ``name @ file:line`` when two functions share a name),
    from ``jax.monitoring`` duration events."""

    count: int = Field(0, description="XLA compilations (executables loaded from the persistent cache are cache_hits)")
    trace_time: float = Field(0.0, description="Seconds of tracing to a jaxpr")
    lower_time: float = Field(0.0, description="Seconds of lowering to StableHLO")
    compile_time: float = Field(0.0, description="Seconds of XLA compilation (cache loads not included)")
    source: str | None = Field(None, description="path:line of the function (null for JAX's own)")
    traces: int = Field(0, description="Times the program was traced; more than 1 means JAX retraced it")
    cache_hits: int = Field(0, description="Executables loaded from the persistent compilation cache")
    cache_load_time: float = Field(0.0, description="Seconds spent loading them")
    recompile_reasons: list[str] = Field(
        [], description="Why each trace after the first happened, as JAX explains its cache misses "
        f"(jax_explain_cache_misses); at most {MAX_RECOMPILE_REASONS} kept"
    )
    # What XLA knows about the program: its last executable's analyses.
    cost: ProgramCost | None = Field(None, description="XLA's cost analysis; null when no executable was read")
    memory: ProgramMemory | None = Field(None, description="XLA's memory analysis; null when the backend gives none")
    fingerprint: str | None = Field(
        None, description="Of the optimized program XLA built (its HLO as XLA prints it for fingerprints: no "
        "source lines, canonical names): equal across processes for the same program and compiler, different "
        "when either changes"
    )
    input_fingerprint: str | None = Field(
        None, description="Of the program JAX handed to XLA (StableHLO, debug info stripped: what JAX's "
        "persistent-cache key hashes): different only when the program itself changed"
    )
    variants: int = Field(0, description="Different input programs seen (shapes, dtypes, devices): executables "
                                         "the fields above describe the last of")
    device_kind: str | None = Field(None, description="The kind of device it was compiled for, e.g. 'NVIDIA H100'")
    device_count: int | None = Field(None, description="How many devices it was compiled for")
    analysis_time: float = Field(0.0, description="Seconds jaxrun spent reading XLA's analyses (in the compile "
                                                  "phase's wall time, not in compile_time)")
    analysis_reason: str | None = Field(None, description="Why the analyses are null (a JAX internal moved, ...)")
    cache_miss_reason: str | None = Field(
        None, description="Why a warm persistent cache compiled this program where an earlier run of the same "
        "script loaded it or wrote it there: the cache key's ingredient that changed (from the history)"
    )


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

    mode: Literal["inherited", "isolated"] = Field(
        description="inherited: all of the user's variables; isolated: --isolate-env's minimal set"
    )
    set: dict[str, str] = Field({}, description="What --env / the env setting set on top")
    variables: int = Field(description="How many variables the script's environment held")
    setup_padding: int | None = Field(
        None, description="--randomize-setup: bytes of the random padding (JAXRUN_SETUP_PADDING) in this run's "
        "environment; null when the setup was not randomised")
    cpus: list[int] | None = Field(
        None, description="The CPU cores the run's processes were pinned to (their affinity: a --jobs N share of the "
        "cores, a jaxrun ab --duet half); null when it was not pinned and had every core jaxrun had")


Outcome = Literal["passed", "failed", "xfailed", "xpassed"]


class ProcessResult(MappingModel):
    """One process of a multi-process job (--processes N): its own figures, as a one-process
    script's result has them (README, "Multi-process programs")."""

    process_id: int = Field(description="Its id in the job (jax.process_index()), 0 the coordinator")
    success: bool
    error_class: ErrorClass | None = Field(
        None, description="Why it failed; null on success and for a process jaxrun stopped (see stopped)")
    error_message: str | None = None
    stopped: str | None = Field(
        None, description="Why jaxrun stopped it though it had not failed itself (another process failed first)")
    exit_code: int | None = None
    signal: int | None = None
    execution_time: float | None = Field(None, description="Seconds, its whole process")
    body_time: float | None = None
    import_time: float | None = None
    jit_compile_time: float | None = None
    run_time: float | None = None
    cpu_time: float | None = Field(None, description="Seconds user+sys of its process tree")
    memory_peak: float | None = Field(None, description="MiB (2^20 bytes), peak host memory of its process tree")
    compile_count: int | None = None
    results: dict[str, Any] = Field({}, description="What it passed to jaxrun.record")
    stdout_log: str | None = None
    stderr_log: str | None = None


class CellTiming(MappingModel):
    """One code cell of a notebook as it ran (probe/notebook.py)."""

    index: int = Field(description="The code cell's number from 1: what Jupyter shows as In [index] after "
                       "Restart & Run All (markdown cells are not counted)")
    source: str = Field(description="Its first line of code")
    seconds: float | None = Field(None, description="Seconds it ran (its code compiled and run); for the cell the "
                                  "process was stopped in (not finished), up to the process's end; null: unknown, "
                                  "or it never ran")
    outcome: Literal["ok", "error", "exit", "not finished", "not run"] = Field(
        description="ok; error: it raised (the script's error); exit: it ended the process itself (sys.exit, "
        "os._exit, os.abort or a signal to itself: the result's ended_by says which); not finished: the process was "
        "stopped in it (a timeout, a kill); not run: the run never reached it (an earlier cell failed or exited)")
    error_line: int | None = Field(None, description="The line of the cell where it failed")
    # --save-notebooks: what its Python code wrote, [(stdout|stderr, text)]; for the executed copy only.
    outputs: list[tuple[str, str]] | None = Field(None, exclude=True)


class ScriptResult(MappingModel):
    """What happened when one script ran (possibly over several attempts)."""

    schema_version: int = Field(SCHEMA_VERSION, description="Version of this file's layout (raised when a field changes meaning)")
    script_name: str = Field(description="The script's name in the batch: its path under the folder searched, "
                             "folders joined by __, without .py (a notebook keeps .ipynb); _2, _3... where two "
                             "would clash")
    script_path: str = Field(description="Absolute path of the script (or notebook)")
    params: dict[str, Any] | None = Field(
        None, description="The point of a parameter sweep this run was (name -> value, in the sweep's order; "
        "--param): its script_name ends with them, as in train[batch=64,devices=2]; null outside a sweep")
    success: bool = Field(description="Its last attempt ran to its end without an error (exit status 0); outcome "
                          "says whether that was expected")
    error_class: ErrorClass | None = Field(None, description="Why it failed (the failure classes: docs/reference/errors.md); "
                                           "null when it succeeded")
    error_message: str | None = Field(None, description="The failure in one line (the exception's message, or what "
                                      "stopped the process)")
    exception_type: str | None = Field(None, description="The class of the Python exception that ended the script, "
                                       "when one did")
    traceback: str | None = Field(None, description="Tail of the Python traceback, when one exists")
    hint: str | None = Field(None, description="What to try about the failure (its class's hint)")
    exit_code: int | None = Field(None, description="The process's exit status; null when a signal ended it")
    signal: int | None = Field(None, description="Number of the signal that ended the process, or null")
    device_requested: str = Field(description="The device asked for (--device, a config file, the script's own "
                                  "settings): auto, cpu, gpu, tpu or one device such as gpu:1")
    device_used: str | None = Field(None, description="Platform the last attempt ran on")
    device_index: int | None = Field(
        None, description="Id of the one device of that platform the run was given (--device gpu:1 -> 1); null "
        "when any device of the platform would do (--device gpu, a fallback to cpu). Shown as gpu:1")
    jax_backend: str | None = Field(None, description="Backend JAX actually initialised in the child")
    device_count: int | None = Field(None, description="Devices the script saw, when it used JAX")
    fallback_reason: str | None = Field(None, description="Why it ran on another device than the one asked for "
                                        "(the failure there); null when it did not fall back")
    attempts: list[Attempt] = Field([], description="Each attempt in order (a retry or a fallback is one more)")
    execution_time: float | None = Field(None, description="Seconds, whole process")
    timing: str | None = Field(
        None, description="'median of N counted runs' for a benchmarked script whose N counted runs all "
        f"succeeded: {joined(f.field for f in SCRIPT_FIGURES)} are then each "
        "the median of those runs (" + "".join(f"{f.field} the lower middle one, a run's own; " for f in SCRIPT_FIGURES
                                               if f.aggregate == "median_low")
        + "benchmark.samples holds every run); null: the figures are of one run"
    )
    body_time: float | None = Field(
        None, description="Seconds, the script body inside the probe: from its first line to its end (return, "
        "exception, sys.exit, os._exit, a signal it sent itself), and on success to the end of the device "
        "work it dispatched"
    )
    import_time: float | None = Field(
        None, description="Seconds of the body during which at least one import statement ran, in any thread "
        "(jax included, with what it loads and any JIT work inside the import)"
    )
    run_time: float | None = Field(
        None, description="Seconds of the script's own work: the body when neither an import nor JAX's "
        "tracing, lowering or compiling ran (device work it dispatched included, kept or dropped). "
        "import_time + the JIT work's wall time outside imports + run_time = body_time (within 1 µs; "
        "jit_compile_time sums nested phases, so it can be a little larger than their wall time)"
    )
    drain_time: float | None = Field(
        None, description="Seconds after the script's last line until the device work it had dispatched "
        "ended (part of body_time and run_time); 0 when the devices were idle, null when unmeasured"
    )
    ended_by: str | None = Field(
        None, description="How the body ended: return, exception, sys.exit(N), os._exit(N), os.abort(), a "
        "signal the script sent itself; null when the process was stopped from outside"
    )
    phases_note: str | None = Field(
        None, description="Where the phases could not be told apart exactly, why (null when they are exact)"
    )
    cpu_time: float | None = Field(
        None, description="Seconds user+sys of the script's process and every descendant, waited for or not "
        "(daemons that left its tree, children nobody waited for); null when unmeasured"
    )
    cpu_method: str | None = Field(
        None, description="How cpu_time was measured: the run's cgroup's own count (+ the process's start-up "
        "before it joined), or, without a cgroup, rusage + sampled CPU of descendants nobody in the tree waited for"
    )
    memory_peak: float | None = Field(
        None, description="MiB (2^20 bytes), peak host memory of the script's processes (its own, its "
        "descendants'; shared pages counted once; nothing inherited from the launcher)"
    )
    memory_method: str | None = Field(None, description="How memory_peak was measured")
    device_memory_peak: float | None = Field(None, description="MiB (2^20 bytes), peak device memory (null on CPU)")
    device_memory_reason: str | None = Field(None, description="Why device_memory_peak is null, when it is")
    device_utilization: float | None = Field(None, description="0-1, null when not measurable")
    device_utilization_reason: str | None = Field(None, description="Why device_utilization is null, when it is")
    jit_compile_time: float | None = Field(
        None, description="Seconds, trace + lower + compile (or load from the persistent cache), every program"
    )
    compile_count: int | None = Field(None, description="XLA compilations (cache loads are cache_hits)")
    compiles: dict[str, CompileStats] = Field({}, description="Per program, e.g. jit(loss), jit(grad(loss))")
    compile_environment: CompileEnvironment | None = Field(
        None, description="What JAX's persistent-cache key took from the process; null when it did not use JAX"
    )
    transfers: TransferStats | None = Field(
        None, description="Implicit host<->device transfers; null when JAX was unused (a direction is null, with the "
        "reason, where they could not be counted: a guard level the script or its environment set, CPU's device-to-host)"
    )
    live_array_bytes: int | None = Field(
        None, description="Bytes of the jax.Arrays alive when the body ended (jax.live_arrays()); null without JAX"
    )
    cache_hits: int | None = Field(
        None, description="Executables loaded from the persistent compilation cache; null when it is off"
    )
    cache_misses: int | None = Field(
        None, description="Persistent-cache lookups that found nothing (requests - hits); null when it is off"
    )
    compile_time_saved: float | None = Field(
        None,
        description="Seconds of compilation the persistent cache saved, a lower bound (JAX stores "
        "compile times in whole seconds)",
    )
    warnings: list[str] = Field(
        [], description="What deserves a look though the run succeeded, e.g. a program compiled many times and why"
    )
    outcome: Outcome | None = Field(
        None, description="passed / failed, or xfailed / xpassed for a script expected to fail (xfail)"
    )
    xfail: str | None = Field(None, description="Why the script is expected to fail (its xfail setting)")
    command: list[str] | None = Field(None, description="The command line the script's process ran")
    python: str | None = Field(
        None, description="The interpreter it ran under when not jaxrun's own (--python, another environment); "
        "compile_environment holds that environment's jax and jaxlib versions"
    )
    prestarted: bool | None = Field(
        None, description="Its process was started before the script was known (a spare, to hide Python's "
        "start-up); the time it waited is not in execution_time"
    )
    start_mode: str | None = Field(
        None, description="How its process started (--prestart): exec (a new interpreter), fork (forked from a "
        "prestarted interpreter that had imported jaxrun's probe) or fork+jax (one that had also imported jax: the "
        "script's own import_time then finds jax imported); wall and CPU time start at the fork"
    )
    prestart_reason: str | None = Field(
        None, description="Why its process was exec'd where --prestart asked for a fork (or auto chose exec)"
    )
    prestart_import_time: float | None = Field(
        None, description="fork+jax: seconds the prestarted interpreter spent importing jax, once for the batch "
        "(not in this script's figures)"
    )
    script_args: list[str] = Field([], description="The script's own arguments (its sys.argv[1:])")
    numerics: Numerics | None = Field(None, description="The numerics it started with")
    environment: RunEnvironment | None = Field(None, description="Which environment variables the script got")
    settings: dict[str, str] = Field(
        {}, description="Options set for this script alone, and where (a per-script table, its header comment)"
    )
    content_hash: str | None = Field(None, description="sha256 of the script as it ran")
    options_key: str | None = Field(None, description="Fingerprint of the run options (--resume compares it)")
    leftover_processes: int | None = Field(
        None, description="Processes the script left running when it ended (daemons, escaped children), "
        "stopped by jaxrun; null when it never ran"
    )
    peak_processes: int | None = Field(
        None, description="Most processes of the script's tree alive at one sample (the script's own "
        "included); null when it never ran"
    )
    cgroup: str | None = Field(
        None, description="The kernel control group the script ran in (every process it started "
        "tracked; --memory-limit and --max-processes held by the kernel); null where jaxrun could "
        "not create one (then limits are watched by sampling)"
    )
    kernel_limits: list[str] | None = Field(
        None, description="The limits the kernel held through the cgroup: \"memory\" (--memory-limit), "
        "\"processes\" (--max-processes); the others were watched by sampling only. Null without a cgroup"
    )
    node: str | None = Field(
        None, description="Host name of the machine that ran the script's last attempt (--backend ray or "
        "slurm: the node's host name; null for a local run, and when the script never ran)"
    )
    ray_node_id: str | None = Field(
        None, description="Ray's id of the node that ran the last attempt (ray.get_runtime_context()."
        "get_node_id(), as `ray list nodes` shows it); null outside --backend ray"
    )
    slurm_job_id: str | None = Field(
        None, description="--backend slurm: the Slurm task that ran the script's last attempt, as squeue and "
        "sacct name it (<array job id>_<task index>, or the job id of an array of one); null elsewhere")
    queue_wait: float | None = Field(
        None, description="--backend slurm: seconds from the submission of the script's Slurm task to the "
        "start of the task on its node (the wait in the queue and the task's own start-up, not part of "
        "execution_time); null elsewhere, and when the task never started")
    processes: list[ProcessResult] | None = Field(
        None, description="--processes N: each process of the job, by id; the job's own figures are described in "
        "the README (\"Multi-process programs\"); null for a one-process run")
    output_files: list[str] = Field([], description="Files the script wrote to JAXRUN_OUTPUT_DIR "
                                    "(RESULTS_DIR/outputs/<name>), relative to it")
    results: dict[str, Any] = Field({}, description="What the script passed to jaxrun.record")
    stdout_log: str | None = Field(None, description="Path of the file holding what the script printed on stdout")
    stderr_log: str | None = Field(None, description="Path of the file holding what the script printed on stderr")
    stdout_truncated: bool = Field(False, description="The stdout log stops at its cap (50 MiB, "
                                   "JAXRUN_LOG_CAP_BYTES); the rest was read and dropped")
    stderr_truncated: bool = Field(False, description="The stderr log stops at its cap, as stdout_truncated")
    started_at: str = Field(description="When its first attempt was started: UTC, ISO 8601 with milliseconds")
    finished_at: str = Field(description="When its last attempt ended: UTC, ISO 8601 with milliseconds")
    kept: bool = Field(False, description="Kept from an earlier run in this results folder by --resume (not run "
                       "again: started_at and finished_at are that run's)")
    cells: list[CellTiming] | None = Field(
        None, description="A notebook's code cells in the order they ran, each timed (their seconds are part of "
        "body_time); null for a .py script")
    warm: WarmSummary | None = Field(None, description="Warm mode: the entry function's calls")
    benchmark: ScriptBenchmark | None = Field(None, description="Process benchmark runs, when asked")
    performance_metrics: dict[str, Any] | None = Field(
        None, description="With profiling (enable_profiling / --profile): the run's figures and its profile files"
    )
    # The profiled run's samples and timeline, for the jax_profiling/ files; not in the result file.
    profile: ScriptProfile | None = Field(None, exclude=True)
    # Its backend lost sight of its process, which may still run and write its files (a Slurm
    # controller or a Ray cluster that stopped answering): its files are not recorded as final
    # (results/ownership.py), so a later run still knows every file under its names as jaxrun's.
    # Not in the result file: its error message and hint say so.
    may_still_run: bool = Field(False, exclude=True)

    def __bool__(self) -> bool:
        """True exactly when the script succeeded (``if execute_jax_script(...):``)."""
        return self.success
