"""One run of one script through the probe, with retries and CPU fallback, as a ScriptResult.

Attempts follow DESIGN §5: a requested platform that the device facts say is absent is
``device_unavailable`` before anything is launched; transient failures (a missing device, an
accelerator out-of-memory) are retried with backoff on the same device, then fall back to CPU
unless ``fallback=False``. Every attempt is kept in the result.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping

from . import resultfiles
from .classify import Classification, classification, classify
from .benchmark import warm_summary
from .config import JAX_PLATFORMS_VALUE, importable_pythonpath, log_cap_bytes
from .devices import get_jax_device_info, resolve_device
from .executors.slots import Slot, merge_xla_flags
from .errors import DeviceProbeError
from .launch import Interrupted, LaunchOutcome, launch, probe_command
from .models import Attempt, DeviceInfo, ScriptResult
from .nvml import UtilizationSampler, visible_gpus
from .outcome import compile_totals, device_memory, memory_peak_mb, read_probe_report
from .policies import backoff_seconds, next_action

logger = logging.getLogger("jaxrun")

_STDERR_TAIL_BYTES = 64 * 1024


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the script; its (interrupted) result was saved and travels with this."""

    def __init__(self, result: ScriptResult) -> None:
        super().__init__()
        self.result = result


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def failed_before_running(
    name: str, script: Path, device: str, message: str, error_class: str, *, hint: str
) -> ScriptResult:
    """The result of a script that never got to run (it vanished, or its worker was lost)."""
    now = now_iso()
    return ScriptResult(
        script_name=name,
        script_path=str(script),
        success=False,
        error_class=error_class,  # type: ignore[arg-type]
        error_message=message,
        hint=hint,
        device_requested=device,
        device_used=None,
        attempts=[Attempt(number=1, device=device, success=False, error_class=error_class,  # type: ignore[arg-type]
                          error_message=message, started_at=now)],
        started_at=now,
        finished_at=now,
    )


def child_env(spec: RunSpec, platform: str, device_info: DeviceInfo | None, events_path: Path) -> dict[str, str]:
    """The script's environment: the user's, plus what selects the device and opens the channel."""
    env = dict(os.environ)
    env.update(spec.env or {})
    backend = None
    if device_info is not None and platform in device_info.platforms:
        backend = device_info.platforms[platform].backend
    env["JAX_PLATFORMS"] = backend or JAX_PLATFORMS_VALUE[platform]
    if platform == "gpu":
        # Several scripts (and jaxrun's own probes) may share the GPU: grab memory as needed.
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    xla_flags: list[str] = []
    slot = spec.slot
    if slot is not None and slot.kind == platform:
        for key, value in slot.env().items():
            # The slot decides which GPUs a job sees; thread counts are only a default.
            if key == "CUDA_VISIBLE_DEVICES" or key not in env:
                env[key] = value
        xla_flags += slot.xla_cpu_flags()
    if spec.host_devices is not None:
        xla_flags.append(f"--xla_force_host_platform_device_count={spec.host_devices}")
    if xla_flags:
        env["XLA_FLAGS"] = merge_xla_flags(env.get("XLA_FLAGS"), xla_flags)
    if spec.compile_cache is not None:
        # Thresholds at 0: JAX's defaults (1 s, and a size floor) would leave most real
        # compilations of small and medium programs uncached.
        env.setdefault("JAX_COMPILATION_CACHE_DIR", str(spec.compile_cache))
        env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    if spec.debug_nans:
        env["JAX_DEBUG_NANS"] = "True"
    env["JAXRUN_OUTPUT_DIR"] = str(spec.output_dir)
    env["JAXRUN_EVENTS_FILE"] = str(events_path)
    env["PYTHONUNBUFFERED"] = "1"
    # The probe must be importable even when jaxrun runs from a source tree.
    env["PYTHONPATH"] = importable_pythonpath(env.get("PYTHONPATH"))
    return env


def _stderr_tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _STDERR_TAIL_BYTES))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _list_outputs(output_dir: Path) -> list[str]:
    """Files the script wrote to JAXRUN_OUTPUT_DIR; an empty folder is removed, not left behind."""
    if not output_dir.is_dir():
        return []
    files = sorted(str(p.relative_to(output_dir)) for p in output_dir.rglob("*") if p.is_file())
    if not files and not any(output_dir.iterdir()):
        output_dir.rmdir()
    return files


def _keep_attempt_logs(stdout_log: Path, stderr_log: Path, number: int) -> None:
    """Before a new attempt overwrites the logs, keep the previous attempt's under its number."""
    for log in (stdout_log, stderr_log):
        if log.exists():
            # `<name>.stdout.log`: the name itself may hold dots (`v1.2__model`), so split from the right.
            stem, stream, ext = log.name.rsplit(".", 2)
            log.rename(log.with_name(f"{stem}.attempt{number}.{stream}.{ext}"))


class _Run:
    """One launch and everything learnt from it."""

    def __init__(self, outcome: LaunchOutcome | None, failure: Classification | None) -> None:
        self.outcome = outcome
        self.failure = failure
        self.report = read_probe_report(outcome.events if outcome else [])
        self.utilization: tuple[float | None, str | None] | None = None


def _launch_once(spec: RunSpec, platform: str, info: DeviceInfo | None) -> _Run:
    output_dir, stdout_log, stderr_log, timeout = spec.output_dir, spec.stdout_log, spec.stderr_log, spec.timeout
    output_dir.mkdir(parents=True, exist_ok=True)
    stdout_log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jaxrun-events-") as tmp:
        events_path = Path(tmp) / "events.jsonl"
        env = child_env(spec, platform, info, events_path)
        # Utilisation is sampled only where NVML can see the job's devices: NVIDIA GPUs.
        sampler = UtilizationSampler(visible_gpus(env.get("CUDA_VISIBLE_DEVICES"))).start() if platform == "gpu" else None
        try:
            outcome = launch(
                probe_command(spec.script, events_path, spec.args, entry=spec.entry, calls=spec.calls),
                cwd=spec.script.parent,
                env=env,
                stdout_log=stdout_log,
                stderr_log=stderr_log,
                events_path=events_path,
                timeout=timeout,
                log_cap=log_cap_bytes(),
                cpu_affinity=spec.slot.cpus if spec.slot is not None and platform == "cpu" else None,
                stop=spec.stop,
            )
        except Interrupted as stop:
            outcome = stop.outcome
        finally:
            if sampler is not None:
                sampler.stop()
    failure = classify(
        events=outcome.events,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        timed_out=outcome.timed_out,
        interrupted=outcome.interrupted,
        timeout=timeout,
        stderr_tail=_stderr_tail(stderr_log),
    )
    run = _Run(outcome, failure)
    if sampler is not None:
        run.utilization = sampler.result()
    return run


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs, validated by :func:`jaxrun.execute.execute_jax_script`."""

    script: Path
    name: str
    file_name: str
    requested: str
    results_dir: Path
    timeout: float | None
    retries: int
    fallback: bool
    debug_nans: bool
    env: Mapping[str, str] | None
    args: list[str] | None
    entry: str | None
    calls: int
    verbose: bool
    slot: Slot | None = None
    host_devices: int | None = None
    compile_cache: Path | None = None
    stop: threading.Event | None = field(default=None, compare=False)

    @property
    def stdout_log(self) -> Path:
        return self.results_dir / resultfiles.LOGS_DIR / f"{self.file_name}.stdout.log"

    @property
    def stderr_log(self) -> Path:
        return self.results_dir / resultfiles.LOGS_DIR / f"{self.file_name}.stderr.log"

    @property
    def output_dir(self) -> Path:
        return self.results_dir / resultfiles.OUTPUTS_DIR / self.file_name


def run_script(spec: RunSpec, device: str | None = None) -> ScriptResult:
    """Run ``spec.script`` once (over as many attempts as retries and fallback need).

    ``device`` overrides the platform to start on (benchmark runs after a fallback start on the
    platform that worked). Raises :class:`RunInterrupted` when jaxrun itself is interrupted.
    """
    script, name, requested, retries = spec.script, spec.name, spec.requested, spec.retries
    stdout_log, stderr_log, output_dir = spec.stdout_log, spec.stderr_log, spec.output_dir
    if output_dir.exists():
        shutil.rmtree(output_dir)  # outputs of an earlier run must not pass for this run's
    started_at = now_iso()
    try:
        info: DeviceInfo | None = get_jax_device_info()
    except DeviceProbeError:
        info = None  # the script still runs; if it needs JAX it fails with the real reason

    attempts: list[Attempt] = []
    fallback_reason: str | None = None
    retries_left = retries
    target = device or requested
    run = _Run(None, None)
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
            run = _Run(None, classification("device_unavailable", missing or f"{target} is not available"))
        else:
            if number > 1:
                _keep_attempt_logs(stdout_log, stderr_log, number - 1)
            run = _launch_once(spec, platform, info)
        failure = run.failure
        outcome = run.outcome
        attempts.append(
            Attempt(
                number=number,
                device=platform or target,
                success=failure is None,
                error_class=failure.error_class if failure else None,
                error_message=failure.message if failure else None,
                exit_code=outcome.exit_code if outcome else None,
                signal=outcome.signal if outcome else None,
                execution_time=outcome.wall_time if outcome else None,
                started_at=attempt_started,
            )
        )
        if spec.verbose:
            state = "ok" if failure is None else f"{failure.error_class}: {failure.message}"
            logger.info("%s attempt %d on %s: %s", name, number, platform or target, state)
        action = next_action(
            failure.error_class if failure else None,
            platform or target,
            retries_left=retries_left,
            fallback=spec.fallback,
            launched=outcome is not None,
        )
        if action == "retry":
            retries_left -= 1
            try:
                time.sleep(backoff_seconds(retries - retries_left))
            except KeyboardInterrupt:
                user_interrupted = True
                run = _Run(None, classification("interrupted", "interrupted while waiting to retry"))
                break
        elif action == "fallback":
            fallback_reason = f"{platform or target} failed with {failure.error_class}: {failure.message}"
            target = "cpu"
        else:
            break

    result = _build_result(
        name, script, requested, platform, run, attempts, fallback_reason,
        stdout_log, stderr_log, output_dir, started_at, spec.entry,
    )
    if user_interrupted or (run.outcome is not None and run.outcome.interrupted):
        raise RunInterrupted(result)
    return result


def _build_result(
    name: str,
    script: Path,
    requested: str,
    platform: str | None,
    run: _Run,
    attempts: list[Attempt],
    fallback_reason: str | None,
    stdout_log: Path,
    stderr_log: Path,
    output_dir: Path,
    started_at: str,
    entry: str | None,
) -> ScriptResult:
    outcome, report, failure = run.outcome, run.report, run.failure
    jit_seconds, compile_count, cache_hits = compile_totals(report)
    device_peak, device_reason = device_memory(report)
    device = report.device or {}
    traceback_text = None
    for event in reversed(outcome.events if outcome else []):
        if event.get("type") == "exception":
            traceback_text = event.get("traceback")
            break
    utilisation: float | None = None
    if run.utilization is not None:
        utilisation, utilisation_reason = run.utilization
    else:
        utilisation_reason = f"utilisation is only measurable on NVIDIA GPUs (ran on {platform or 'no device'})"
    return ScriptResult(
        script_name=name,
        script_path=str(script),
        success=failure is None,
        error_class=failure.error_class if failure else None,
        error_message=failure.message if failure else None,
        exception_type=failure.exception_type if failure else None,
        traceback=traceback_text,
        hint=failure.hint if failure else None,
        exit_code=outcome.exit_code if outcome else None,
        signal=outcome.signal if outcome else None,
        device_requested=requested,
        device_used=platform,
        jax_backend=device.get("backend"),
        device_count=device.get("device_count"),
        fallback_reason=fallback_reason,
        attempts=attempts,
        execution_time=outcome.wall_time if outcome else None,
        body_time=report.body_time,
        cpu_time=outcome.cpu_time if outcome and outcome.cpu_time is not None else report.cpu_time,
        memory_peak=memory_peak_mb(outcome, report) if outcome else None,
        device_memory_peak=device_peak,
        device_memory_reason=device_reason,
        device_utilization=utilisation,
        device_utilization_reason=utilisation_reason,
        jit_compile_time=jit_seconds,
        compile_count=compile_count,
        compiles=report.compiles,
        cache_hits=cache_hits,
        compile_time_saved=report.compile_time_saved if report.jax_loaded else None,
        output_files=_list_outputs(output_dir),
        results=report.results,
        stdout_log=str(stdout_log) if outcome else None,
        stderr_log=str(stderr_log) if outcome else None,
        stdout_truncated=bool(outcome and outcome.stdout_truncated),
        stderr_truncated=bool(outcome and outcome.stderr_truncated),
        started_at=started_at,
        finished_at=now_iso(),
        warm=warm_summary(entry, report.calls) if entry and report.calls else None,
    )
