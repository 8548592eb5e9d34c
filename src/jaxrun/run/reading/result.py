"""What an attempt left (its process's outcome, the probe's reading, how it failed: an
:class:`~jaxrun.run.reading.attempt_run.AttemptRun`) and the
:class:`~jaxrun.results.models.ScriptResult` of a script's run, built from its attempts. Imported once a
script's process has started (run/attempt.py), never on the way to its first line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from jaxrun.config.options import RunOptions
from jaxrun.core.formatting import plural
from jaxrun.core.interpreters import is_other
from jaxrun.core.timestamps import now_iso
from jaxrun.errors import ScriptNotFoundError
from jaxrun.plan.job import Job
from jaxrun.probe.memory_fit import with_fit_evidence
from jaxrun.results import result_files
from jaxrun.results.models import Attempt, ProcessResult, RunEnvironment, ScriptResult
from jaxrun.results.provenance import script_identity
from jaxrun.run.process.environment import chosen_index, numerics_of, setup_padding
from jaxrun.run.process.process_watch import ProcessOutcome, cpu_time_of
from jaxrun.run.process.transfers import guard_variables, transfer_stats
from jaxrun.run.reading.attempt_run import AttemptRun
from jaxrun.run.reading.classify import Classification, Evidence, classify, stderr_tail
from jaxrun.run.reading.compiles import recompile_warnings, totals
from jaxrun.run.reading.job_run import JobRun, process_results
from jaxrun.run.reading.probe_reading import (
    MEMORY_METHOD,
    ProbeReading,
    cell_timings,
    device_memory,
    live_array_bytes,
    memory_peak_mb,
    phases,
    read_probe_events,
)
from jaxrun.run.reading.profiled_run import profile_metrics, script_profile

if TYPE_CHECKING:
    from jaxrun.discover.energy import JobEnergy


def ended_attempt(job: Job, options: RunOptions, env: dict[str, str], command: list[str], outcome: ProcessOutcome,
                  job_run: JobRun | None, utilization: "tuple[float | None, str | None] | None",
                  cpus: tuple[int, ...] | None = None, energy: "JobEnergy | None" = None) -> AttemptRun:
    """What one launched attempt left: how it failed (if it did), the probe's reading, the
    variables it ran with (and ``cpus``, the cores it was pinned to)."""
    if job_run is not None:
        failure, reading = job_run.failure, job_run.lead.reading
    else:
        failure = classify(Evidence.of(outcome, options, stderr_tail(job.stderr_log)))
        reading = read_probe_events(outcome.events)
    environment = RunEnvironment(mode="isolated" if options.isolate_env else "inherited", set=options.env or {},
                                 variables=len(env),
                                 setup_padding=setup_padding(env) if options.randomize_setup else None,
                                 cpus=list(cpus) if cpus else None)
    return AttemptRun(outcome, failure, reading, utilization, energy=energy, command=command, numerics=numerics_of(env),
                      environment=environment, guard_env=guard_variables(env), processes=job_run)


def failed_before_running(job: Job, message: str, error_class: str, *, hint: str) -> ScriptResult:
    """The result of a script that never got to run (it vanished, or its worker was lost)."""
    now = now_iso()
    return ScriptResult(
        script_name=job.name,
        script_path=str(job.script),
        params=job.run_options.params if job.run_options is not None else None,
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
    try:
        # Most scripts write nothing there: one call removes the empty folder, where a walk of
        # it costs a dozen on a batch's way from each script to the next.
        os.rmdir(output_dir)
        return []
    except FileNotFoundError:
        return []
    except OSError:
        pass  # not empty (or not a folder): listed below
    if not output_dir.is_dir():
        return []
    files = sorted(str(p.relative_to(output_dir)) for p in output_dir.rglob("*") if p.is_file())
    if not files and not any(output_dir.iterdir()):
        output_dir.rmdir()
    return files


def _content_hash(job: Job) -> str | None:
    try:
        return script_identity(job.script)[1]
    except ScriptNotFoundError:
        return None


def _process_warnings(outcome: ProcessOutcome | None, failed: bool) -> list[str]:
    if outcome is None:
        return []
    found = list(outcome.log_errors)  # a log the disk would not take: the script ran on, its log stops short
    stopped_by_jaxrun = outcome.timed_out or outcome.interrupted or outcome.over_memory_limit or outcome.over_process_limit
    if outcome.leftovers and not stopped_by_jaxrun:
        found.append(f"the script left {plural(outcome.leftovers, 'process')} running when it ended; jaxrun stopped them")
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


def _processes(job_run: JobRun | None) -> list[ProcessResult] | None:
    if job_run is None:
        return None
    return [ProcessResult(**process) for process in process_results(job_run)]


def _warm_summary(entry: str, calls: list) -> object:  # type: ignore[type-arg]
    from jaxrun.judge.benchmark_runs import warm_summary  # numpy: only for warm mode

    return warm_summary(entry, calls)


# ScriptResult fields read as they are from what ended the run: the launched process's outcome
# (none when nothing was launched: the fields stay null) and how it failed (none on success).
_FROM_OUTCOME: dict[str, str] = {
    "exit_code": "exit_code", "signal": "signal", "execution_time": "wall_time", "prestarted": "prestarted",
    "start_mode": "start_mode", "prestart_reason": "prestart_reason", "prestart_import_time": "prestart_import_time",
    "leftover_processes": "leftovers", "peak_processes": "peak_processes", "cgroup": "cgroup",
    "kernel_limits": "kernel_limits", "stdout_truncated": "stdout_truncated", "stderr_truncated": "stderr_truncated",
}
_FROM_FAILURE: dict[str, str] = {"error_class": "error_class", "error_message": "message",
                                 "exception_type": "exception_type"}


def _read(source: object, fields: dict[str, str]) -> dict[str, object]:
    return {} if source is None else {name: getattr(source, attr) for name, attr in fields.items()}


def _launched(run: AttemptRun, reading: ProbeReading, outcome: ProcessOutcome, platform: str | None,
              job: Job, lead: object) -> dict[str, object]:
    """What only a launched attempt has: its process tree's memory, its logs, its transfers."""
    logs = lead if lead is not None else job
    return {
        "traceback": reading.traceback, "memory_peak": memory_peak_mb(outcome, reading), "memory_method": MEMORY_METHOD,
        "transfers": transfer_stats(outcome.transfers, run.guard_env, jax_loaded=reading.jax_loaded,
                                    platform=(reading.device or {}).get("platform") or platform,
                                    script_set=reading.transfer_guard_set),
        "stdout_log": str(logs.stdout_log), "stderr_log": str(logs.stderr_log),  # type: ignore[attr-defined]
    }


def build_result(
    job: Job,
    options: RunOptions,
    platform: str | None,
    run: AttemptRun,
    attempts: list[Attempt],
    fallback_reason: str | None,
    started_at: str,
) -> ScriptResult:
    outcome, failure = run.outcome, run.failure
    reading = run.reading if run.reading is not None else ProbeReading()
    jit_seconds, compile_count, cache_hits, cache_misses = totals(reading.jax_loaded, reading.compiles, reading.compile_cache)
    device_peak, device_reason = device_memory(reading)
    device = reading.device or {}
    utilisation, utilisation_reason = run.utilization or (
        None, f"utilisation is only measurable on NVIDIA GPUs (ran on {platform or 'no device'})")
    passed = failure is None
    job_run = run.processes  # --processes N: the job's figures and its lead's (run/reading/job_run.py)
    lead = job_run.lead if job_run is not None else None
    # The probe's own CPU figure is one process's: never a job's stand-in.
    cpu_seconds, cpu_method = cpu_time_of(outcome, reading.cpu_time if job_run is None else None)
    body_time, import_time, run_seconds, phases_note = phases(reading, lead.outcome if lead is not None else outcome)
    result = ScriptResult(
        script_name=job.name,
        script_path=str(job.script),
        params=options.params,
        success=passed,
        outcome=("xpassed" if passed else "xfailed") if options.xfail else ("passed" if passed else "failed"),
        xfail=options.xfail,
        command=run.command,
        python=options.python if options.python is not None and is_other(options.python) else None,
        script_args=list(options.args or ()),
        numerics=run.numerics,
        environment=run.environment,
        settings={name: options.origin_of(name) or "per-script setting"
                  for name, source in options.sources.items() if source == "script"},
        **_read(failure, _FROM_FAILURE),
        **_read(outcome, _FROM_OUTCOME),
        **(_launched(run, reading, outcome, platform, job, lead) if outcome is not None else {}),
        hint=_hint(failure, reading.warnings, options.python),
        device_requested=options.device,
        device_used=platform,
        device_index=chosen_index(options.device, platform),
        jax_backend=device.get("backend"),
        device_count=device.get("device_count"),
        fallback_reason=fallback_reason,
        attempts=attempts,
        body_time=body_time,
        import_time=import_time,
        run_time=run_seconds,
        drain_time=reading.drain_time,
        ended_by=reading.ended_by,
        phases_note=phases_note,
        cpu_time=cpu_seconds,
        cpu_method=cpu_method,
        device_memory_peak=device_peak,
        device_memory_reason=device_reason,
        device_utilization=utilisation,
        device_utilization_reason=utilisation_reason,
        jit_compile_time=jit_seconds,
        compile_count=compile_count,
        compiles=reading.compiles,
        compile_environment=reading.compile_environment,
        live_array_bytes=live_array_bytes(reading),
        **(run.energy.fields() if run.energy is not None else {}),
        cache_hits=cache_hits,
        cache_misses=cache_misses,
        compile_time_saved=reading.compile_time_saved if cache_hits is not None else None,
        # A split that is not exact is worth a look on a run that passed (a failed one says why it ended).
        warnings=[*reading.warnings, *recompile_warnings(reading.compiles), *_process_warnings(outcome, failure is not None),
                  *([f"phases: {phases_note}"] if phases_note and passed else [])],
        content_hash=_content_hash(job),
        options_key=options.key,
        processes=_processes(job_run),
        output_files=_list_outputs(job.output_dir),
        results=job_run.processes[0].reading.results if job_run is not None else reading.results,
        started_at=started_at,
        finished_at=now_iso(),
        warm=_warm_summary(options.entry, reading.calls) if options.entry and reading.calls else None,
        cells=cell_timings(reading, lead.outcome if lead is not None else outcome),
    )
    if options.enable_profiling and outcome is not None:
        profile = script_profile(outcome, reading, result)
        folder = job.results_dir / result_files.PROFILING_DIR
        files = {"memory_profile": str(folder / result_files.MEMORY_PROFILE),
                 "timing_profile": str(folder / result_files.TIMING_PROFILE)}
        result.profile = profile
        result.performance_metrics = profile_metrics(result, profile, files)
    return result
