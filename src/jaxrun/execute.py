"""``execute_jax_script``: run one script once, or benchmark it over repeated process runs.

Validation of the caller's options happens here, before anything is launched; the runs
themselves are made by :mod:`jaxrun.runner` and the samples aggregated by :mod:`jaxrun.benchmark`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from pathlib import Path
from typing import Mapping

from . import resultfiles
from .benchmark import sample_from_result, script_benchmark, warm_summary
from .config import (
    compile_cache_dir,
    validate_device,
    validate_host_devices,
    validate_non_negative,
    validate_timeout,
)
from .executors.slots import Slot
from .errors import ScriptFailedError, ScriptNotFoundError, UsageError
from .models import RunSample, ScriptResult, WarmCall
from .runner import RunInterrupted, RunSpec, now_iso, run_script

DEFAULT_WARM_CALLS = 10

__all__ = ["execute_jax_script", "RunInterrupted", "now_iso", "DEFAULT_WARM_CALLS"]


def _validate_entry(entry: str | None, warm_calls: int) -> None:
    if entry is None:
        return
    if not isinstance(entry, str) or not entry.isidentifier():
        raise UsageError(f"entry must be the name of a function in the script (like 'main'), got {entry!r}")
    if not isinstance(warm_calls, int) or isinstance(warm_calls, bool) or warm_calls < 2:
        raise UsageError(
            f"warm_calls must be at least 2 (one first call, then steady-state calls), got {warm_calls!r}"
        )


def execute_jax_script(
    script_path: str | os.PathLike[str],
    device: str = "auto",
    *,
    timeout: float | None = 300,
    verbose: bool = False,
    results_dir: str | os.PathLike[str] | None = None,
    retries: int = 0,
    fallback: bool = True,
    debug_nans: bool = False,
    benchmark_runs: int = 0,
    warmup_runs: int = 0,
    enable_profiling: bool = False,
    env: Mapping[str, str] | None = None,
    name: str | None = None,
    args: list[str] | None = None,
    raise_on_error: bool = False,
    entry: str | None = None,
    warm_calls: int = DEFAULT_WARM_CALLS,
    file_name: str | None = None,
    host_devices: int | None = None,
    compile_cache: str | os.PathLike[str] | bool | None = None,
    cold_cache: bool = False,
    slot: Slot | None = None,
    stop_event: threading.Event | None = None,
) -> ScriptResult:
    """Run one JAX script in its own process and return what happened.

    The script runs with its folder as working directory, ``JAX_PLATFORMS`` set for the chosen
    device, ``JAXRUN_OUTPUT_DIR`` pointing at ``results_dir/outputs/<name>`` and its output streamed
    to ``results_dir/logs/<name>.stdout.log`` / ``.stderr.log``. With ``results_dir=None`` a new
    temporary folder holds them. A failing script returns a result with ``success=False``; only
    ``raise_on_error=True`` turns that into :class:`ScriptFailedError`.

    ``benchmark_runs=N, warmup_runs=W`` run the script W+N times, each as a new process; the
    result is the last run's, with every run's samples and their statistics in ``.benchmark``.
    ``entry="main"`` is warm mode: the module is loaded without its ``__main__`` block and
    ``main()`` is called ``warm_calls`` times in one process, each call ended with
    ``jax.block_until_ready``; the first call (with compilation) and the steady-state calls are
    reported apart in ``.warm``.

    ``host_devices=N`` makes the CPU platform show N devices (XLA's host device count), so
    sharding code runs on one machine; ``result.device_count`` says what the script saw.
    ``compile_cache`` is JAX's persistent compilation cache folder: on by default in jaxrun's
    cache folder, a path to choose another, False for none. A benchmark reuses it across its
    runs (later runs load compiled programs instead of compiling); ``cold_cache=True`` gives every
    run an empty cache so each pays its full compilation. ``slot`` confines the run to a share
    of the machine (set by the parallel scheduler); setting ``stop_event`` from another thread
    stops the run as Ctrl-C would.
    """
    script = Path(script_path).expanduser()
    if not script.is_file():
        raise ScriptNotFoundError(f"no such script: {str(script_path)!r} — pass the path of a .py file")
    script = script.resolve()
    requested = validate_device(device)
    timeout = validate_timeout(timeout)
    retries = validate_non_negative("retries", retries)
    benchmark_runs = validate_non_negative("benchmark_runs", benchmark_runs)
    warmup_runs = validate_non_negative("warmup_runs", warmup_runs)
    if warmup_runs and not benchmark_runs:
        raise UsageError("warmup_runs needs benchmark_runs > 0 (warm-ups precede counted runs)")
    _validate_entry(entry, warm_calls)
    host_devices = validate_host_devices(host_devices)
    cache = compile_cache_dir(compile_cache)
    if enable_profiling:
        raise UsageError("enable_profiling is not available yet in this version of jaxrun")
    name = name or script.stem
    base = Path(results_dir) if results_dir is not None else Path(tempfile.mkdtemp(prefix="jaxrun-"))
    spec = RunSpec(
        script=script, name=name, file_name=file_name or name, requested=requested,
        results_dir=base, timeout=timeout, retries=retries, fallback=fallback,
        debug_nans=debug_nans, env=env, args=args, entry=entry, calls=warm_calls, verbose=verbose,
        slot=slot, host_devices=host_devices, compile_cache=cache, stop=stop_event,
    )
    result_path = resultfiles.script_result_path(base, spec.file_name)
    try:
        if benchmark_runs:
            result = _benchmark(
                spec, benchmark_runs, warmup_runs, result_path if results_dir is not None else None,
                cold_cache=cold_cache,
            )
        else:
            result = run_script(spec)
    except RunInterrupted as stop:
        if results_dir is not None:
            resultfiles.write_model(result_path, stop.result)
        raise
    if results_dir is not None:
        resultfiles.write_model(result_path, result)
    if raise_on_error and not result.success:
        raise ScriptFailedError(f"{name} failed ({result.error_class}): {result.error_message}", result)
    return result


def _benchmark(
    spec: RunSpec, benchmark_runs: int, warmup_runs: int, result_path: Path | None, *, cold_cache: bool
) -> ScriptResult:
    """W warm-up then N counted process runs; stops at the first failed run (it would repeat)."""
    samples: list[RunSample] = []
    warmups: list[RunSample] = []
    calls: list[WarmCall] = []
    first: ScriptResult | None = None
    result: ScriptResult | None = None
    device: str | None = None
    for number in range(1, warmup_runs + benchmark_runs + 1):
        warmup = number <= warmup_runs
        if cold_cache and spec.compile_cache is not None:
            with tempfile.TemporaryDirectory(prefix="jaxrun-cold-cache-") as empty:
                result = run_script(dataclasses.replace(spec, compile_cache=Path(empty)), device)
        else:
            result = run_script(spec, device)
        if first is None:
            first = result
            # After a fallback, later runs start on the platform that worked: re-trying the
            # missing accelerator each time would only add noise.
            device = result.device_used if result.success else None
        index = number if warmup else number - warmup_runs
        sample = sample_from_result(result, index, warmup)
        (warmups if warmup else samples).append(sample)
        if not warmup and result.warm is not None:
            calls += [call.model_copy(update={"run": index}) for call in result.warm.calls]
        if result_path is not None:
            resultfiles.write_model(result_path, result)  # progress survives a crash of the parent
        if not result.success:
            break
    assert result is not None and first is not None
    warm = warm_summary(spec.entry, calls) if spec.entry and calls else result.warm
    mode = f"warm:{spec.entry}x{spec.calls}" if spec.entry else "process"
    bench = script_benchmark(result, samples, warmups, benchmark_runs, warmup_runs, warm, mode)
    update = {"benchmark": bench, "started_at": first.started_at, "finished_at": now_iso()}
    if spec.entry and calls:
        # The last run's own summary labels its calls run=1 whatever counted run it was, and
        # leaves the other runs out; the result's .warm must say the same as .benchmark.warm.
        update["warm"] = warm
    if first.fallback_reason and not result.fallback_reason:
        update["fallback_reason"] = first.fallback_reason
    return result.model_copy(update=update)
