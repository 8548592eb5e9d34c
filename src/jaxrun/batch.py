"""Run every JAX script under one or more paths and keep the results directory current.

The results directory (DESIGN §4) is rewritten after every script, atomically, so a batch cut
off by a crash or Ctrl-C still leaves valid, schema-conforming files describing what ran
(``metadata.complete`` tells whether the batch finished).
"""

from __future__ import annotations

import logging
import os
import platform as platform_module
import socket
import threading
from pathlib import Path
from typing import Callable, Iterable, Mapping

from . import __version__, resultfiles
from .config import (
    DEFAULT_RESULTS_DIR,
    compile_cache_dir,
    validate_device,
    validate_host_devices,
    validate_non_negative,
    validate_timeout,
)
from .devices import get_jax_device_info, resolve_device
from .discovery import find_jax_scripts, unique_names
from .errors import DeviceProbeError, UsageError
from .batch_files import BatchWriter, RunLog, clear_previous_run
from .execute import DEFAULT_WARM_CALLS, RunInterrupted, execute_jax_script, now_iso
from .executors.local import Job, run_parallel
from .executors.slots import Slot, SlotPool, cpu_slots, gpu_slots
from .history import HistoryStore, expected_durations, history_path, history_run_from_benchmark
from .models import BatchMetadata, BatchResult, DeviceInfo, ScriptResult
from .runner import failed_before_running

logger = logging.getLogger("jaxrun")

OnStart = Callable[[int, int, str], None]
OnResult = Callable[[int, int, ScriptResult], None]


def parse_devices(device: str | Iterable[str]) -> list[str]:
    """``"cpu,gpu"`` or ``["cpu", "gpu"]`` -> validated names in order, without repeats."""
    items = device.split(",") if isinstance(device, str) else list(device)
    names = [validate_device(item) for item in items if str(item).strip()]
    if not names:
        raise UsageError("no device given: choose one or more of auto, cpu, gpu, tpu (comma-separated)")
    return list(dict.fromkeys(names))


def _as_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def discover(
    paths: list[Path], recursive: bool, include: object, exclude: object
) -> list[tuple[Path, str]]:
    """All scripts to run, in order, each with its batch-unique ``<name>``."""
    found: list[tuple[Path, str]] = []
    taken: set[str] = set()
    for path in paths:
        scripts = find_jax_scripts(path, recursive, include=include, exclude=exclude)  # type: ignore[arg-type]
        root = path if path.is_dir() else path.parent
        for script, name in unique_names(scripts, root).items():
            unique, n = name, 2
            while unique.casefold() in taken:
                unique, n = f"{name}_{n}", n + 1
            taken.add(unique.casefold())
            found.append((script, unique))
    return found


def _record_history(store: HistoryStore, result: ScriptResult, info: DeviceInfo | None) -> ScriptResult:
    """Store the benchmark and judge it against earlier comparable runs of the same script."""
    bench = result.benchmark
    assert bench is not None
    run = history_run_from_benchmark(
        bench,
        jax_version=info.jax_version if info else None,
        jaxlib_version=info.jaxlib_version if info else None,
    )
    run_id = store.record(run)
    check = store.check_regression(run_id)
    return result.model_copy(update={"benchmark": bench.model_copy(update={"history_run_id": run_id, "history_check": check})})


BACKENDS = ("local", "ray")


def _slot_pools(jobs: int, info: DeviceInfo | None, gpus_per_job: int, jobs_per_gpu: int) -> dict[str, SlotPool]:
    """A CPU pool dividing the cores among ``jobs``, and a GPU pool when GPUs are present."""
    pools = {"cpu": SlotPool(cpu_slots(jobs))}
    gpu = info.platforms.get("gpu") if info is not None else None
    if gpu is not None and gpu.available and gpu.devices:
        ids = [d.id for d in gpu.devices]
        pools["gpu"] = SlotPool(gpu_slots(ids, gpus_per_job=gpus_per_job, jobs_per_gpu=jobs_per_gpu))
    return pools


def run_jax_scripts(
    pipeline_output_dir: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    recursive_search: bool = True,
    *,
    device: str | Iterable[str] = "auto",
    timeout: float | None = 300,
    verbose: bool = False,
    results_dir: str | os.PathLike[str] | None = None,
    jobs: int = 1,
    return_detailed_results: bool = False,
    include: str | Iterable[str] | None = None,
    exclude: str | Iterable[str] | None = None,
    retries: int = 0,
    fallback: bool = True,
    debug_nans: bool = False,
    benchmark_runs: int = 0,
    warmup_runs: int = 0,
    enable_profiling: bool = False,
    env: Mapping[str, str] | None = None,
    entry: str | None = None,
    warm_calls: int = DEFAULT_WARM_CALLS,
    history: str | os.PathLike[str] | bool | None = None,
    gpus_per_job: int = 1,
    jobs_per_gpu: int = 1,
    host_devices: int | None = None,
    compile_cache: str | os.PathLike[str] | bool | None = None,
    cold_cache: bool = False,
    backend: str = "local",
    ray_address: str | None = None,
    on_start: OnStart | None = None,
    on_result: OnResult | None = None,
) -> bool | BatchResult:
    """Find the JAX scripts under ``pipeline_output_dir`` (a path or a list) and run each one.

    Returns True when every script succeeded (or the :class:`BatchResult` with
    ``return_detailed_results=True``). A failing script never stops the batch. Result files are
    written to ``results_dir`` (default ``./jaxrun_results``) after every script; files of a
    previous batch in that folder (``script_results/``, ``logs/``, ``outputs/``) are replaced.

    ``device`` may list several devices (``"cpu,gpu"``): each script then runs on each, its files
    are named ``<name>@<device>``, and with ``benchmark_runs`` the benchmarking section reports
    each device's speed-up over the first. ``benchmark_runs`` / ``warmup_runs`` / ``entry`` are
    passed to :func:`execute_jax_script` (see there). Benchmarked scripts are stored in the
    history database (``history``: a path; None for ``$JAXRUN_HISTORY`` or
    ``./.jaxrun/history.sqlite``; False to keep no history) and checked for regressions there.

    ``jobs=N`` runs up to N scripts at once: CPU jobs each get a disjoint share of the cores,
    GPU jobs their own GPU (``gpus_per_job``, or ``jobs_per_gpu`` sharing one with a memory
    fraction), longest first when the history knows durations. ``backend="ray"`` runs each
    script as a Ray task (``ray_address`` of an existing cluster, else a local Ray). Results are
    the same either way. ``host_devices``, ``compile_cache`` and ``cold_cache``: see
    :func:`execute_jax_script`.
    """
    devices = parse_devices(device)
    device = ",".join(devices)
    timeout = validate_timeout(timeout)
    validate_non_negative("retries", retries)
    if validate_non_negative("jobs", jobs) < 1:
        raise UsageError(f"jobs must be >= 1, got {jobs}")
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if ray_address is not None and backend != "ray":
        raise UsageError("ray_address needs backend='ray' (--backend ray)")
    cache = compile_cache_dir(compile_cache)
    host_devices = validate_host_devices(host_devices)
    for option, value in (("gpus_per_job", gpus_per_job), ("jobs_per_gpu", jobs_per_gpu)):
        if validate_non_negative(option, value) < 1:
            raise UsageError(f"{option} must be >= 1, got {value}")
    validate_non_negative("benchmark_runs", benchmark_runs)
    if validate_non_negative("warmup_runs", warmup_runs) and not benchmark_runs:
        raise UsageError("warmup_runs needs benchmark_runs > 0 (warm-ups precede counted runs)")
    if enable_profiling:
        raise UsageError("enable_profiling is not available yet in this version of jaxrun")
    if verbose:
        logging.basicConfig(level=logging.INFO, format="[jaxrun] %(message)s")

    paths = _as_paths(pipeline_output_dir)
    if not paths:
        raise UsageError("no path given: pass a folder of JAX scripts or .py files")
    scripts = discover(paths, recursive_search, include, exclude)
    if not scripts:
        shown = ", ".join(repr(str(p)) for p in paths)
        raise UsageError(
            f"no JAX scripts found in {shown}: a .py file counts when it imports jax, flax, optax, "
            "equinox or pymdp (pass a .py file directly to run it anyway)"
        )

    # Open the history before running anything: a bad --history is a usage error, not a late crash.
    path = history_path(history) if benchmark_runs else None
    store = HistoryStore(path) if path is not None else None

    out = Path(results_dir if results_dir is not None else DEFAULT_RESULTS_DIR).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
        clear_previous_run(out)
    except OSError as exc:
        if store is not None:
            store.close()
        raise UsageError(f"cannot write the results folder {str(out)!r}: {exc.strerror}") from None

    try:
        info: DeviceInfo | None = get_jax_device_info()
    except DeviceProbeError as exc:
        info = None
        logger.warning("device facts unavailable: %s", exc)
    plans, missing_reasons = [], []
    for name in devices:
        planned, missing = resolve_device(name, info) if info is not None else (None, None)
        if planned is None and fallback and info is not None and info.platforms.get("cpu"):
            planned = "cpu"  # the requested accelerator is absent; its scripts will fall back
        plans.append(planned or "none")
        if missing:
            missing_reasons.append(missing + ("; falling back to cpu" if planned == "cpu" else ""))
    planned = ",".join(plans)
    if info is not None:
        resultfiles.write_model(out / resultfiles.DEVICE_INFO, info)

    meta = BatchMetadata(
        jaxrun_version=__version__,
        device_requested=device,
        device_used=planned,
        jax_version=info.jax_version if info else None,
        execution_timestamp=now_iso(),
        scripts_found=len(scripts),
        scripts_executed=0,
        scripts_successful=0,
        scripts_failed=0,
        search_paths=[str(p.resolve()) for p in paths],
        results_dir=str(out),
        host=socket.gethostname(),
        python_version=platform_module.python_version(),
    )
    writer = BatchWriter(out, meta, info, benchmark_runs, warmup_runs, devices)
    log = RunLog(out / resultfiles.EXECUTION_LOG)
    log.write(f"jaxrun {__version__}: {len(scripts)} script(s), device={device}, running on {planned}")
    for reason in missing_reasons:
        log.write(reason)
    if benchmark_runs:
        log.write(f"benchmarking: {warmup_runs} warm-up + {benchmark_runs} counted process runs per script")
    plan_of = dict(zip(devices, plans))
    durations = expected_durations(history, [s for s, _ in scripts]) if jobs > 1 else {}
    job_list = [
        Job(
            index=i, script=script, name=name,
            file_name=name if len(devices) == 1 else f"{name}@{dev}", device=dev,
            platform=plan_of[dev] if plan_of[dev] != "none" else None,
            expected_seconds=durations.get(str(script)),
        )
        for i, (script, name, dev) in enumerate((s, n, d) for s, n in scripts for d in devices)
    ]
    total = len(job_list)
    done: dict[int, ScriptResult] = {}
    writer.write([], complete=False)
    if jobs > 1 or backend == "ray":
        log.write(f"running up to {jobs} script(s) at once on the {backend} backend")

    def run_one(job: Job, slot: Slot | None, stop: threading.Event | None, job_fallback: bool) -> ScriptResult:
        if not job.script.is_file():
            # Deleted (or unmounted) after discovery: a result for this script, not the batch's end.
            result = failed_before_running(
                job.name, job.script, job.device, f"the script no longer exists: {job.script}",
                "script_error", hint="the file was removed or moved after jaxrun found it; run again",
            )
            resultfiles.write_model(resultfiles.script_result_path(out, job.file_name), result)
            return result
        return execute_jax_script(
            job.script, job.device, timeout=timeout, results_dir=out, retries=retries,
            fallback=job_fallback, debug_nans=debug_nans, env=env, name=job.name, verbose=verbose,
            benchmark_runs=benchmark_runs, warmup_runs=warmup_runs, entry=entry,
            warm_calls=warm_calls, file_name=job.file_name, host_devices=host_devices,
            compile_cache=cache if cache is not None else False, cold_cache=cold_cache,
            slot=slot, stop_event=stop,
        )

    def started(job: Job, _: ScriptResult | None = None) -> None:
        log.write(f"[{job.index + 1}/{total}] start {job.file_name} ({job.script})")
        if on_start:
            on_start(job.index + 1, total, job.file_name)

    def finished(job: Job, result: ScriptResult | None) -> None:
        assert result is not None
        if store is not None and result.benchmark is not None and result.benchmark.runs_completed:
            result = _record_history(store, result, info)
        done[job.index] = result
        writer.write([done[i] for i in sorted(done)], complete=False)
        state = "ok" if result.success else f"FAILED {result.error_class}: {result.error_message}"
        log.write(
            f"[{job.index + 1}/{total}] {job.file_name} on {result.device_used}: {state} "
            f"({result.execution_time or 0:.2f} s)"
        )
        if on_result:
            on_result(job.index + 1, total, result)

    try:
        if backend == "ray":
            from .executors.ray import run_on_ray

            run_on_ray(
                job_list, ray_address=ray_address, workers=jobs, run_kwargs=dict(
                    timeout=timeout, results_dir=str(out), retries=retries, fallback=fallback,
                    debug_nans=debug_nans, env=dict(env or {}), verbose=verbose,
                    benchmark_runs=benchmark_runs, warmup_runs=warmup_runs, entry=entry,
                    warm_calls=warm_calls, host_devices=host_devices,
                    compile_cache=str(cache) if cache is not None else False, cold_cache=cold_cache,
                ),
                gpus_per_job=gpus_per_job, jobs_per_gpu=jobs_per_gpu, on_start=started, on_done=finished,
            )
        elif jobs > 1:
            run_parallel(
                job_list, workers=jobs, pools=_slot_pools(jobs, info, gpus_per_job, jobs_per_gpu),
                run_one=run_one, fallback=fallback, on_start=started, on_done=finished,
            )
        else:
            for job in job_list:
                started(job)
                try:
                    result = run_one(job, None, None, fallback)
                except RunInterrupted as stop:
                    finished(job, stop.result)
                    raise
                finished(job, result)
    except KeyboardInterrupt:
        log.write(f"interrupted after {len(done)} of {total} run(s)")
        writer.write([done[i] for i in sorted(done)], complete=False)
        log.close()
        raise
    finally:
        if store is not None:
            store.close()
    results = [done[i] for i in sorted(done)]
    batch = writer.write(results, complete=True)
    log.write(f"done: {batch.metadata.scripts_successful}/{len(results)} succeeded")
    log.close()
    return batch if return_detailed_results else batch.success
