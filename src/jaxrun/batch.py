"""Run every JAX script under one or more paths and keep the results directory current.

The results directory (DESIGN §4) is rewritten after every script, atomically, so a batch cut
off by a crash or Ctrl-C still leaves valid, schema-conforming files describing what ran
(``metadata.complete`` tells whether the batch finished).
"""

from __future__ import annotations

import logging
import os
import platform as platform_module
import shutil
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Mapping

from . import __version__, resultfiles
from .config import (
    DEFAULT_RESULTS_DIR,
    validate_device,
    validate_non_negative,
    validate_timeout,
)
from .devices import get_jax_device_info, resolve_device
from .discovery import find_jax_scripts, unique_names
from .errors import DeviceProbeError, UsageError
from .history import HistoryStore, default_history_path, history_run_from_benchmark
from .execute import DEFAULT_WARM_CALLS, RunInterrupted, execute_jax_script, now_iso
from .benchmark import benchmarking_section
from .models import BatchMetadata, BatchResult, BenchmarkingSection, BenchmarkResults, DeviceInfo, ScriptResult
from .summary import performance_metrics, performance_summary

logger = logging.getLogger("jaxrun")

OnStart = Callable[[int, int, str], None]
OnResult = Callable[[int, int, ScriptResult], None]


class RunLog:
    """``jax_execution_log.txt``: one timestamped line per event of the batch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "a", encoding="utf-8")

    def write(self, message: str) -> None:
        stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        self._handle.write(f"{stamp} {message}\n")
        self._handle.flush()
        logger.info(message)

    def close(self) -> None:
        self._handle.close()


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


def _clear_previous_run(results_dir: Path) -> None:
    """Per-script files from an earlier batch would pass for this one's: start from a clean slate."""
    for sub in (resultfiles.SCRIPT_RESULTS_DIR, resultfiles.LOGS_DIR, resultfiles.OUTPUTS_DIR):
        target = results_dir / sub
        if target.is_dir():
            shutil.rmtree(target)
    # jax_device_info.json too: when this run cannot read device facts it writes none, and the
    # previous run's file must not pass for this machine's current state.
    for name in (resultfiles.EXECUTION_LOG, resultfiles.BENCHMARK_RESULTS, resultfiles.DEVICE_INFO):
        (results_dir / name).unlink(missing_ok=True)


class _BatchWriter:
    def __init__(
        self,
        results_dir: Path,
        meta: BatchMetadata,
        info: DeviceInfo | None,
        benchmark_runs: int,
        warmup_runs: int,
        devices: list[str],
    ) -> None:
        self.results_dir, self.meta, self.info = results_dir, meta, info
        self.benchmark_runs, self.warmup_runs, self.devices = benchmark_runs, warmup_runs, devices

    def _benchmarking(self, results: list[ScriptResult]) -> BenchmarkingSection:
        if not self.benchmark_runs:
            return BenchmarkingSection()
        benchmarks = [r.benchmark for r in results if r.benchmark is not None]
        fields = benchmarking_section(benchmarks, self.benchmark_runs, self.warmup_runs, self.devices)
        resultfiles.write_model(
            self.results_dir / resultfiles.BENCHMARK_RESULTS,
            BenchmarkResults(
                generated_at=now_iso(), host=self.meta.host, jaxrun_version=__version__,
                jax_version=self.meta.jax_version, **fields,
            ),
        )
        return BenchmarkingSection(**fields)

    def write(self, results: list[ScriptResult], complete: bool) -> BatchResult:
        used = sorted({r.device_used for r in results if r.device_used})
        meta = self.meta.model_copy(
            update={
                "device_used": ",".join(used) if used else self.meta.device_used,
                "scripts_executed": len(results),
                "scripts_successful": sum(r.success for r in results),
                "scripts_failed": sum(not r.success for r in results),
                "complete": complete,
                "finished_timestamp": now_iso() if complete else None,
            }
        )
        batch = BatchResult(
            metadata=meta,
            device_info=self.info,
            performance_summary=performance_summary(results),
            script_results=results,
            benchmarking=self._benchmarking(results),
        )
        resultfiles.write_model(self.results_dir / resultfiles.EXECUTION_RESULTS, batch)
        resultfiles.write_model(self.results_dir / resultfiles.PERFORMANCE_METRICS, performance_metrics(results))
        return batch


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
    """
    devices = parse_devices(device)
    device = ",".join(devices)
    timeout = validate_timeout(timeout)
    validate_non_negative("retries", retries)
    if validate_non_negative("jobs", jobs) != 1:
        raise UsageError(f"jobs={jobs}: parallel jobs are not available yet in this version; use jobs=1")
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
    store = None
    if benchmark_runs and history is not False:
        store = HistoryStore(default_history_path() if history in (None, True) else Path(history))  # type: ignore[arg-type]

    out = Path(results_dir if results_dir is not None else DEFAULT_RESULTS_DIR).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
        _clear_previous_run(out)
    except OSError as exc:
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
    writer = _BatchWriter(out, meta, info, benchmark_runs, warmup_runs, devices)
    log = RunLog(out / resultfiles.EXECUTION_LOG)
    log.write(f"jaxrun {__version__}: {len(scripts)} script(s), device={device}, running on {planned}")
    for reason in missing_reasons:
        log.write(reason)
    if benchmark_runs:
        log.write(f"benchmarking: {warmup_runs} warm-up + {benchmark_runs} counted process runs per script")
    jobs_list = [(script, name, dev) for script, name in scripts for dev in devices]
    total = len(jobs_list)
    results: list[ScriptResult] = []
    writer.write(results, complete=False)
    try:
        for index, (script, name, dev) in enumerate(jobs_list, start=1):
            file_name = name if len(devices) == 1 else f"{name}@{dev}"
            log.write(f"[{index}/{total}] start {file_name} ({script})")
            if on_start:
                on_start(index, total, file_name)
            try:
                result = execute_jax_script(
                    script, dev, timeout=timeout, results_dir=out, retries=retries,
                    fallback=fallback, debug_nans=debug_nans, env=env, name=name, verbose=verbose,
                    benchmark_runs=benchmark_runs, warmup_runs=warmup_runs, entry=entry,
                    warm_calls=warm_calls, file_name=file_name,
                )
            except RunInterrupted as stop:
                results.append(stop.result)
                raise
            if store is not None and result.benchmark is not None and result.benchmark.runs_completed:
                result = _record_history(store, result, info)
            results.append(result)
            writer.write(results, complete=False)
            state = "ok" if result.success else f"FAILED {result.error_class}: {result.error_message}"
            log.write(
                f"[{index}/{total}] {file_name} on {result.device_used}: {state} "
                f"({result.execution_time or 0:.2f} s)"
            )
            if on_result:
                on_result(index, total, result)
    except KeyboardInterrupt:
        log.write(f"interrupted after {len(results)} of {total} run(s)")
        writer.write(results, complete=False)
        log.close()
        raise
    finally:
        if store is not None:
            store.close()
    batch = writer.write(results, complete=True)
    log.write(f"done: {batch.metadata.scripts_successful}/{len(results)} succeeded")
    log.close()
    return batch if return_detailed_results else batch.success
