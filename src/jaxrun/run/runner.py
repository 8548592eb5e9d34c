"""One run of one script, over as many attempts as the failure table asks for, as a ScriptResult.

A requested platform that the device facts say is absent is ``device_unavailable`` before anything
is launched. After a failed attempt, :func:`jaxrun.failures.next_action` decides: retry on the same
device after a backoff, move to another GPU (when the placement has one and the device was not
chosen: ``gpu:1`` stays on GPU 1), fall back to CPU, or stop.
Every attempt is kept in the result. The attempt itself is a parameter (``attempt``), so the
policy can be exercised without a GPU (tests pass a fake attempt; see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import resultfiles
from ..defaults import device_label, log_cap_bytes, split_device
from ..interpreters import is_other
from ..devices import get_jax_device_info, resolve_device
from ..errors import DeviceProbeError, ResultsWriteError, ScriptNotFoundError
from ..failures import backoff_seconds, next_action
from ..models import Attempt, DeviceInfo, Numerics, ProcessResult, RunEnvironment, ScriptResult
from ..nvml import UtilizationSampler, visible_gpus
from ..options import RunOptions
from ..probe.memory_fit import with_fit_evidence
from ..provenance import script_identity
from ..formatting import one_line
from ..timestamps import now_iso
from .classify import Classification, Evidence, classification, classify, stderr_tail
from .environment import child_env, chosen_index, numerics_of, probe_command
from ..job import Job
from .launch import Interrupted, LaunchOutcome, Limits, cpu_time_of, launch
from .compiles import recompile_warnings, totals
from .profiles import profile_metrics, script_profile
from .probe_report import (MEMORY_METHOD, ProbeReport, cell_timings, device_memory, live_array_bytes, memory_peak_mb,
                           phases, read_probe_report)
from .transfers import guard_variables, transfer_stats
from .placement import WHOLE_MACHINE, Placement, Slot

if TYPE_CHECKING:
    from .launcher import Launcher
    from .multiprocess import JobRun

logger = logging.getLogger("jaxrun")

class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the script; its (interrupted) result was saved and travels with this."""

    def __init__(self, result: ScriptResult) -> None:
        super().__init__()
        self.result = result


@dataclass
class AttemptRun:
    """One launch (or a launch that could not happen) and everything learnt from it."""

    outcome: LaunchOutcome | None
    failure: Classification | None
    report: ProbeReport = field(default_factory=ProbeReport)
    utilization: tuple[float | None, str | None] | None = None
    command: list[str] | None = None  # what the process ran
    numerics: Numerics | None = None  # read from its environment
    environment: RunEnvironment | None = None
    guard_env: dict[str, str] = field(default_factory=dict)  # its transfer-guard variables (run/transfers.py)
    processes: "JobRun | None" = None  # --processes N: each process (run/multiprocess.py); None: one process


# attempt(job, options, platform, slot, device_info, stop, compile_cache) -> AttemptRun
AttemptFn = Callable[
    [Job, RunOptions, str, "Slot | None", "DeviceInfo | None", "threading.Event | None", "Path | None"], AttemptRun
]


def failed_before_running(job: Job, message: str, error_class: str, *, hint: str) -> ScriptResult:
    """The result of a script that never got to run (it vanished, or its worker was lost)."""
    now = now_iso()
    return ScriptResult(
        script_name=job.name,
        script_path=str(job.script),
        success=False,
        error_class=error_class,  # type: ignore[arg-type]
        error_message=message,
        hint=hint,
        device_requested=job.device,
        device_used=None,
        attempts=[Attempt(number=1, device=job.device, success=False, error_class=error_class,  # type: ignore[arg-type]
                          error_message=message, started_at=now)],
        started_at=now,
        finished_at=now,
    )


def _list_outputs(output_dir: Path) -> list[str]:
    """Files the script wrote to JAXRUN_OUTPUT_DIR; an empty folder is removed, not left behind."""
    if not output_dir.is_dir():
        return []
    files = sorted(str(p.relative_to(output_dir)) for p in output_dir.rglob("*") if p.is_file())
    if not files and not any(output_dir.iterdir()):
        output_dir.rmdir()
    return files


def _keep_attempt_logs(job: Job, number: int, processes: int = 1) -> None:
    """Before a new attempt overwrites the logs, keep the previous attempt's under its number."""
    if processes > 1:
        from .multiprocess import job_log_files  # (socket, queue): only multi-process jobs import it

        logs = job_log_files(job, processes)
    else:
        logs = [job.stdout_log, job.stderr_log]
    for log in logs:
        if log.exists():
            # `<name>.stdout.log`: the name itself may hold dots (`v1.2__model`), so split from the right.
            stem, stream, ext = log.name.rsplit(".", 2)
            log.rename(log.with_name(f"{stem}.attempt{number}.{stream}.{ext}"))


_EVENTS_PREFIX = "jaxrun-events-"  # + the pid of the jaxrun process that made the folder


@functools.lru_cache(maxsize=None)
def _sweep_stale_event_folders() -> None:
    """Remove the probe channel folders of jaxrun processes that were killed before they could
    (once per process: a killed run's folders go at the next run)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_EVENTS_PREFIX}*"):
        owner = folder.name[len(_EVENTS_PREFIX):].split("-")[0]
        if owner.isdigit() and int(owner) != os.getpid() and not _alive(owner):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: str) -> bool:
    """Whether process ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def launch_attempt(
    job: Job,
    options: RunOptions,
    platform: str,
    slot: Slot | None,
    info: DeviceInfo | None,
    stop: threading.Event | None,
    compile_cache: Path | None,
    launcher: "Launcher | None" = None,
) -> AttemptRun:
    """The real attempt: the script in its own process through the probe (``launcher``: the
    batch's, with its spare process; :meth:`Launcher.attempt` passes it)."""
    for folder in (job.output_dir, job.stdout_log.parent):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a full disk: the batch stops with one line (errors.py), no traceback
            raise ResultsWriteError(folder, exc) from None
    _sweep_stale_event_folders()
    with tempfile.TemporaryDirectory(prefix=f"{_EVENTS_PREFIX}{os.getpid()}-") as tmp:
        events_path = Path(tmp) / "events.jsonl"
        env = child_env(job, options, platform, info, events_path, slot, compile_cache)
        command = probe_command(job.script, events_path, options, job.profile_dir)
        # Utilisation is sampled only where NVML can see the job's devices: NVIDIA GPUs.
        sampler = UtilizationSampler(visible_gpus(env.get("CUDA_VISIBLE_DEVICES"))).start() if platform == "gpu" else None
        job_run: JobRun | None = None
        try:
            if options.processes > 1:
                from .multiprocess import launch_processes

                job_run = launch_processes(job, options, env, Path(tmp), stop=stop, launcher=launcher,
                                           cpu_affinity=slot.cpus if slot is not None and platform == "cpu" else None)
                outcome = job_run.outcome
            else:
                outcome = launch(
                    command,
                    cwd=job.script.parent,
                    env=env,
                    stdout_log=job.stdout_log,
                    stderr_log=job.stderr_log,
                    events_path=events_path,
                    limits=Limits(options.timeout, options.memory_limit, options.max_processes),
                    log_cap=log_cap_bytes(),
                    cpu_affinity=slot.cpus if slot is not None and platform == "cpu" else None,
                    stop=stop,
                    record_memory=options.enable_profiling,
                    launcher=launcher,
                )
        except Interrupted as stopped:
            outcome = stopped.outcome
        finally:
            if sampler is not None:
                sampler.stop()
    if job_run is not None:
        failure, report = job_run.failure, job_run.lead.report
    else:
        failure = classify(Evidence.of(outcome, options, stderr_tail(job.stderr_log)))
        report = read_probe_report(outcome.events)
    environment = RunEnvironment(mode="isolated" if options.isolate_env else "inherited", set=options.env or {},
                                 variables=len(env))
    return AttemptRun(outcome, failure, report, sampler.result() if sampler else None,
                      command=command, numerics=numerics_of(env), environment=environment,
                      guard_env=guard_variables(env), processes=job_run)


def _interrupted_during_backoff(delay: float, stop: threading.Event | None) -> bool:
    """Wait ``delay`` seconds before a retry; True if Ctrl-C (or the batch's stop event, set from
    another thread in a parallel batch) came first."""
    try:
        if stop is not None:
            return stop.wait(delay)
        time.sleep(delay)
        return False
    except KeyboardInterrupt:
        return True


def run_attempts(
    job: Job,
    options: RunOptions,
    *,
    placement: Placement = WHOLE_MACHINE,
    stop: threading.Event | None = None,
    device: str | None = None,
    compile_cache: Path | None = None,
    attempt: AttemptFn = launch_attempt,
    facts: Callable[[], DeviceInfo] | None = None,
) -> ScriptResult:
    """Run ``job.script`` once (over as many attempts as the failure table asks for).

    ``device`` overrides the device to start on (benchmark runs after a fallback start on the
    platform that worked). ``attempt`` and ``facts`` (the device facts) are the seams through
    which tests drive the failure policy as if a GPU were present. Raises
    :class:`RunInterrupted` when jaxrun itself is interrupted.
    """
    if options.cold_cache and options.compile_cache is not None and compile_cache is None:
        # Every run, benchmarked or not, starts from an empty compilation cache of its own.
        with tempfile.TemporaryDirectory(prefix="jaxrun-cold-cache-") as empty:
            return run_attempts(job, options, placement=placement, stop=stop, device=device,
                            compile_cache=Path(empty), attempt=attempt, facts=facts)
    if job.output_dir.exists():
        shutil.rmtree(job.output_dir)  # outputs of an earlier run must not pass for this run's
    started_at = now_iso()
    try:
        # The facts of the interpreter that runs the script (--python: another environment's).
        info: DeviceInfo | None = facts() if facts is not None else get_jax_device_info(python=options.python)
    except DeviceProbeError:
        info = None  # the script still runs; if it needs JAX it fails with the real reason

    attempts: list[Attempt] = []
    fallback_reason: str | None = None
    retries_left = options.retries
    target = device or options.device
    run = AttemptRun(None, None)
    platform: str | None = None
    user_interrupted = False
    while True:
        number = len(attempts) + 1
        attempt_started = now_iso()
        if info is None:
            platform, missing = ("cpu" if target in ("auto", "cpu") else None), "device facts unavailable"
        else:
            platform, missing = resolve_device(target, info)
        if platform is None:
            run = AttemptRun(None, classification("device_unavailable", missing or f"{target} is not available"))
        else:
            if number > 1:
                _keep_attempt_logs(job, number - 1, options.processes)
            run = attempt(job, options, platform, placement.slot(platform), info, stop, compile_cache)
        failure, outcome = run.failure, run.outcome
        chosen = chosen_index(options.device, platform)  # gpu:1: that GPU only, or the CPU by the fallback
        attempts.append(
            Attempt(
                number=number,
                device=device_label(platform, chosen) or target,
                success=failure is None,
                error_class=failure.error_class if failure else None,  # type: ignore[arg-type]
                error_message=failure.message if failure else None,
                exit_code=outcome.exit_code if outcome else None,
                signal=outcome.signal if outcome else None,
                execution_time=outcome.wall_time if outcome else None,
                started_at=attempt_started,
            )
        )
        if outcome is not None and outcome.interrupted:
            break
        action = next_action(
            failure.error_class if failure and not failure.final else None,
            platform or split_device(target)[0],  # gpu:1 follows gpu's rules (fallback included)
            retries_left=retries_left,
            fallback=options.fallback,
            launched=outcome is not None,
            other_gpu=placement.has_other_gpu(),  # never for a chosen GPU (executors/slots.py's placement)
        )
        if options.verbose and failure is not None and outcome is not None and action in ("retry", "other_gpu", "fallback"):
            # Only a launched attempt that another follows: the last one is the script's result, and
            # a device known to be missing before launching is said once, by the batch's header.
            next_step = {"retry": "retrying", "other_gpu": "trying another GPU", "fallback": "falling back to cpu"}
            logger.info("%s: attempt %d on %s: %s: %s; %s", job.name, number, platform or target,
                        failure.error_class, one_line(failure.message), next_step[action])
        if action == "retry":
            retries_left -= 1
            if _interrupted_during_backoff(backoff_seconds(options.retries - retries_left), stop):
                user_interrupted = True
                run = AttemptRun(None, classification("interrupted", "interrupted while waiting to retry"))
                break
        elif action == "other_gpu" and placement.move_to_other_gpu():
            continue
        elif action == "fallback":
            assert failure is not None
            fallback_reason = f"{device_label(platform, chosen) or target} failed with {failure.error_class}: {failure.message}"
            target = "cpu"
        else:
            break

    result = _build_result(job, options, platform, run, attempts, fallback_reason, started_at)
    if user_interrupted or (run.outcome is not None and run.outcome.interrupted):
        raise RunInterrupted(result)
    return result


def _content_hash(job: Job) -> str | None:
    try:
        return script_identity(job.script)[1]
    except ScriptNotFoundError:
        return None


def _process_warnings(outcome: LaunchOutcome | None, failed: bool) -> list[str]:
    if outcome is None:
        return []
    found = list(outcome.log_errors)  # a log the disk would not take: the script ran on, its log stops short
    stopped_by_jaxrun = outcome.timed_out or outcome.interrupted or outcome.over_memory_limit or outcome.over_process_limit
    if outcome.leftovers and not stopped_by_jaxrun:
        found.append(f"the script left {outcome.leftovers} process(es) running when it ended; jaxrun stopped them")
    if outcome.oom_kills and not failed:
        found.append(f"the kernel stopped {outcome.oom_kills} of the script's processes at the memory limit "
                     "(the script itself went on)")
    return found


def _hint(failure: Classification | None, warnings: list[str], python: str | None = None) -> str | None:
    """The failure's hint; an out-of-memory one says what jaxrun foresaw as the programs compiled,
    a missing module under another interpreter (--python) which environment lacks it."""
    if failure is None:
        return None
    if failure.error_class == "import_error" and python is not None and is_other(python):
        return f"a module the script imports is missing; pip install it into the environment of {python} (--python)"
    return with_fit_evidence(failure.hint, warnings) if failure.error_class == "out_of_memory" else failure.hint


def _warm_summary(entry: str, calls: list) -> object:  # type: ignore[type-arg]
    from ..benchmark import warm_summary  # numpy: only for warm mode

    return warm_summary(entry, calls)


def _build_result(
    job: Job,
    options: RunOptions,
    platform: str | None,
    run: AttemptRun,
    attempts: list[Attempt],
    fallback_reason: str | None,
    started_at: str,
) -> ScriptResult:
    outcome, report, failure = run.outcome, run.report, run.failure
    jit_seconds, compile_count, cache_hits, cache_misses = totals(report.jax_loaded, report.compiles, report.compile_cache)
    device_peak, device_reason = device_memory(report)
    device = report.device or {}
    utilisation: float | None = None
    if run.utilization is not None:
        utilisation, utilisation_reason = run.utilization
    else:
        utilisation_reason = f"utilisation is only measurable on NVIDIA GPUs (ran on {platform or 'no device'})"
    passed = failure is None
    job_run = run.processes  # --processes N: the job's figures and its lead's (run/multiprocess.py)
    if job_run is not None:
        from .multiprocess import process_results
    lead = job_run.lead if job_run is not None else None
    # The probe's own CPU figure is one process's: never a job's stand-in.
    cpu_seconds, cpu_method = cpu_time_of(outcome, report.cpu_time if job_run is None else None)
    body_time, import_time, run_seconds, phases_note = phases(report, lead.outcome if lead is not None else outcome)
    result = ScriptResult(
        script_name=job.name,
        script_path=str(job.script),
        success=passed,
        outcome=("xpassed" if passed else "xfailed") if options.xfail else ("passed" if passed else "failed"),
        xfail=options.xfail,
        command=run.command,
        python=options.python if options.python is not None and is_other(options.python) else None,
        prestarted=outcome.prestarted if outcome else None,
        script_args=list(options.args or ()),
        numerics=run.numerics,
        environment=run.environment,
        settings={name: options.origin_of(name) or "per-script setting"
                  for name, source in options.sources.items() if source == "script"},
        error_class=failure.error_class if failure else None,  # type: ignore[arg-type]
        error_message=failure.message if failure else None,
        exception_type=failure.exception_type if failure else None,
        traceback=report.traceback if outcome else None,
        hint=_hint(failure, report.warnings, options.python),
        exit_code=outcome.exit_code if outcome else None,
        signal=outcome.signal if outcome else None,
        device_requested=options.device,
        device_used=platform,
        device_index=chosen_index(options.device, platform),
        jax_backend=device.get("backend"),
        device_count=device.get("device_count"),
        fallback_reason=fallback_reason,
        attempts=attempts,
        execution_time=outcome.wall_time if outcome else None,
        body_time=body_time,
        import_time=import_time,
        run_time=run_seconds,
        drain_time=report.drain_time,
        ended_by=report.ended_by,
        phases_note=phases_note,
        cpu_time=cpu_seconds,
        cpu_method=cpu_method,
        memory_peak=memory_peak_mb(outcome, report) if outcome else None,
        memory_method=MEMORY_METHOD if outcome else None,
        device_memory_peak=device_peak,
        device_memory_reason=device_reason,
        device_utilization=utilisation,
        device_utilization_reason=utilisation_reason,
        jit_compile_time=jit_seconds,
        compile_count=compile_count,
        compiles=report.compiles,
        compile_environment=report.compile_environment,
        transfers=transfer_stats(outcome.transfers, run.guard_env, jax_loaded=report.jax_loaded,
                                 platform=device.get("platform") or platform,
                                 script_set=report.transfer_guard_set) if outcome else None,
        live_array_bytes=live_array_bytes(report),
        cache_hits=cache_hits,
        cache_misses=cache_misses,
        compile_time_saved=report.compile_time_saved if cache_hits is not None else None,
        # A split that is not exact is worth a look on a run that passed (a failed one says why it ended).
        warnings=[*report.warnings, *recompile_warnings(report.compiles), *_process_warnings(outcome, failure is not None),
                  *([f"phases: {phases_note}"] if phases_note and passed else [])],
        leftover_processes=outcome.leftovers if outcome else None,
        peak_processes=outcome.peak_processes if outcome else None,
        cgroup=outcome.cgroup if outcome else None,
        kernel_limits=outcome.kernel_limits if outcome else None,
        content_hash=_content_hash(job),
        options_key=options.key,
        processes=[ProcessResult(**process) for process in process_results(job_run)] if job_run is not None else None,
        output_files=_list_outputs(job.output_dir),
        results=job_run.processes[0].report.results if job_run is not None else report.results,
        stdout_log=str(lead.stdout_log if lead is not None else job.stdout_log) if outcome else None,
        stderr_log=str(lead.stderr_log if lead is not None else job.stderr_log) if outcome else None,
        stdout_truncated=bool(outcome and outcome.stdout_truncated),
        stderr_truncated=bool(outcome and outcome.stderr_truncated),
        started_at=started_at,
        finished_at=now_iso(),
        warm=_warm_summary(options.entry, report.calls) if options.entry and report.calls else None,
        cells=cell_timings(report, lead.outcome if lead is not None else outcome),
    )
    if options.enable_profiling and outcome is not None:
        profile = script_profile(outcome, report, result)
        folder = job.results_dir / resultfiles.PROFILING_DIR
        files = {"memory_profile": str(folder / resultfiles.MEMORY_PROFILE),
                 "timing_profile": str(folder / resultfiles.TIMING_PROFILE)}
        result.profile = profile
        result.performance_metrics = profile_metrics(result, profile, files)
    return result
