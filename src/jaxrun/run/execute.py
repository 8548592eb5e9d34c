"""``execute_jax_script`` (the API for one script) and :func:`run_job`, which every executor calls
to run one job: once, or W warm-up + N counted process runs when benchmarking."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import resultfiles
from ..devices import get_jax_device_info
from ..errors import ScriptFailedError, ScriptNotFoundError
from ..models import DeviceInfo, RunSample, ScriptResult, WarmCall
from ..options import DEFAULT_WARM_CALLS, RunOptions
from ..probe.channel import valid_text
from ..sinks import NO_SINK, Sink, Sinks
from ..sinks.profiles import ProfileSink
from ..sinks.run_log import seed_line
from ..sinks.script_files import ScriptFileSink
from ..timestamps import now_iso
from .job import Job
from .placement import WHOLE_MACHINE, Placement
from .runner import AttemptFn, RunInterrupted, failed_before_running, launch_attempt, run_once

logger = logging.getLogger("jaxrun")

__all__ = ["execute_jax_script", "run_job", "RunInterrupted", "DEFAULT_WARM_CALLS"]


def run_job(
    job: Job,
    options: RunOptions,
    *,
    placement: Placement = WHOLE_MACHINE,
    stop: threading.Event | None = None,
    sink: Sink = NO_SINK,
    attempt: AttemptFn = launch_attempt,
    facts: Callable[[], DeviceInfo] = get_jax_device_info,
) -> ScriptResult:
    """Run one job as ``options`` say; ``sink.on_progress`` sees each benchmark run's result.
    ``attempt`` and ``facts``: see :func:`jaxrun.run.runner.run_once`.

    Raises :class:`RunInterrupted` (carrying the interrupted result) when stopped.
    """
    if not job.script.is_file():
        # Deleted (or unmounted) after discovery: a result for this script, not the batch's end.
        return failed_before_running(
            job, f"the script no longer exists (ScriptNotFoundError: no such script {str(job.script)!r})",
            "script_error", hint="the file was removed or moved after jaxrun found it; run again (on a "
            "cluster, e.g. with Ray, check that the script path is reachable on every node)",
        )
    if not options.benchmark_runs:
        return run_once(job, options, placement=placement, stop=stop, attempt=attempt, facts=facts)
    return _benchmark(job, options, placement, stop, sink, attempt, facts)


def _benchmark(
    job: Job, options: RunOptions, placement: Placement, stop: threading.Event | None, sink: Sink,
    attempt: AttemptFn, facts: Callable[[], DeviceInfo],
) -> ScriptResult:
    """W warm-up then N counted process runs; stops at the first failed run (it would repeat)."""
    # Statistics need numpy (~50 ms to import): only a batch that benchmarks pays for it.
    from ..benchmark import sample_from_result, script_benchmark, warm_summary

    samples: list[RunSample] = []
    warmups: list[RunSample] = []
    calls: list[WarmCall] = []
    first: ScriptResult | None = None
    result: ScriptResult | None = None
    device: str | None = None
    warmup_runs, benchmark_runs = options.warmup_runs, options.benchmark_runs
    for number in range(1, warmup_runs + benchmark_runs + 1):
        warmup = number <= warmup_runs
        result = run_once(job, options, placement=placement, stop=stop, device=device, attempt=attempt, facts=facts)
        if first is None:
            first = result
            # After a fallback, later runs start on the platform that worked: re-trying the
            # missing accelerator each time would only add noise.
            device = result.device_used if result.success else None
        index = number if warmup else number - warmup_runs
        (warmups if warmup else samples).append(sample_from_result(result, index, warmup))
        if not warmup and result.warm is not None:
            calls += [call.model_copy(update={"run": index}) for call in result.warm.calls]
        sink.on_progress(job, result)  # progress survives a crash of the parent
        if not result.success:
            break
    assert result is not None and first is not None
    entry = options.entry
    warm = warm_summary(entry, calls) if entry and calls else result.warm
    bench = script_benchmark(result, samples, warmups, benchmark_runs, warmup_runs, warm, options.mode)
    update: dict[str, Any] = {"benchmark": bench, "started_at": first.started_at, "finished_at": now_iso()}
    if entry and calls:
        # The last run's own summary labels its calls run=1 whatever counted run it was, and
        # leaves the other runs out; the result's .warm must say the same as .benchmark.warm.
        update["warm"] = warm
    if first.fallback_reason and not result.fallback_reason:
        update["fallback_reason"] = first.fallback_reason
        update["benchmark"] = bench.model_copy(update={"fallback_reason": first.fallback_reason})
    return result.model_copy(update=update)


def _with_settings(script: Path, given: dict[str, Any], config: Any) -> RunOptions:
    """The run options of one script called through the API: the keywords over ``JAXRUN_*``, the
    script's own settings (its header comment, per-script tables) and the config file's run
    options (a skip setting is the batch's business: a script named here runs)."""
    from ..settings.resolve import explicit_keywords, resolve_batch_options, script_settings

    batch = resolve_batch_options([script], explicit_keywords(execute_jax_script, given), source="api",
                                  config=config).options
    own = script_settings(batch, script)
    device = None if batch.given("device") else own.values.get("device")
    found = own.run_settings(batch, device or (batch.run.device if batch.run.device != "auto" else None), device)
    return batch.run.overlay(found.values, "script", found.origins) if found.values else batch.run


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
    raise_on_error: bool = False,
    **options: Any,
) -> ScriptResult:
    """Run one JAX script in its own process and return what happened.

    The script runs with its folder as working directory, ``JAX_PLATFORMS`` set for the chosen
    device, ``JAXRUN_OUTPUT_DIR`` pointing at ``results_dir/outputs/<name>`` and its output streamed
    to ``results_dir/logs/<name>.stdout.log`` / ``.stderr.log``; the result is written to
    ``results_dir/script_results/<name>_result.json``. With ``results_dir=None`` a new temporary
    folder holds the logs and no result file is written. A failing script returns a result with
    ``success=False``; only ``raise_on_error=True`` turns that into :class:`ScriptFailedError`.

    ``benchmark_runs=N, warmup_runs=W`` run the script W+N times, each as a new process; the
    result is the last run's, with every run's samples and their statistics in ``.benchmark``.

    Further options (each validated, see :class:`jaxrun.RunOptions`): ``args`` (the script's
    command-line arguments); ``entry="main"`` is warm mode: the module is loaded without its
    ``__main__`` block and ``main()`` is called ``warm_calls`` times in one process, each call ended
    with ``jax.block_until_ready``, the first call (with compilation) and the steady-state calls
    reported apart in ``.warm``; ``host_devices=N`` makes the CPU platform show N devices;
    ``compile_cache`` is JAX's persistent compilation cache folder (on by default in jaxrun's
    cache folder, a path to choose another, False for none), and ``cold_cache=True`` gives every
    run (each benchmark run too) an empty cache so each pays its full compilation.
    """
    config = options.pop("config", None)
    given = dict(
        device=device, timeout=timeout, verbose=verbose, retries=retries, fallback=fallback, debug_nans=debug_nans,
        benchmark_runs=benchmark_runs, warmup_runs=warmup_runs, enable_profiling=enable_profiling, env=env,
        **options,
    )
    run_options = RunOptions.build("api", **given)  # checks the keywords: only run options here
    script = Path(script_path).expanduser()
    if not script.is_file():
        raise ScriptNotFoundError(f"no such script: {str(script_path)!r} — pass the path of a .py file")
    script = script.resolve()
    run_options = _with_settings(script, given, config)
    name = valid_text(name or script.stem)
    base = Path(results_dir) if results_dir is not None else Path(tempfile.mkdtemp(prefix="jaxrun-"))
    job = Job(index=0, script=script, name=name, file_name=resultfiles.file_stem(name), device=run_options.device, platform=None,
              results_dir=base)
    sink: Sink = NO_SINK
    if results_dir is not None:
        sink = Sinks([ScriptFileSink(), *([ProfileSink(base)] if run_options.enable_profiling else [])])
    try:
        result = run_job(job, run_options, sink=sink)
    except RunInterrupted as stopped:
        sink.on_result(job, stopped.result)
        raise
    result = sink.on_result(job, result)
    if run_options.verbose:
        logger.info(seed_line(result))
    if raise_on_error and not result.success:
        raise ScriptFailedError(f"{name} failed ({result.error_class}): {result.error_message}", result)
    return result
