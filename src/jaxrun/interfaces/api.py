"""The executor API in Python: :func:`run_jax_scripts` (a folder of scripts) and
:func:`execute_jax_script` (one script). Both take every option as a keyword (``**options``,
validated by :class:`~jaxrun.config.options.BatchOptions` / :class:`~jaxrun.config.options.RunOptions`, which
declare them once); their signatures list those options with their defaults, made from the same
declarations, for ``help()`` and editors."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

from jaxrun.batch.one_script import checked_script, script_outputs
from jaxrun.batch.pipeline import run_batch
from jaxrun.config.option_spec import default_of, keyword_signature
from jaxrun.config.options import BatchOptions, RunOptions
from jaxrun.config.resolve import (
    explicit_keywords,
    resolve_batch_options,
)
from jaxrun.core.validate import log_cap_bytes
from jaxrun.discover.script_labels import point_name
from jaxrun.discover.scripts import script_display_name
from jaxrun.errors import (
    ScriptFailedError,
)
from jaxrun.plan.job import Job
from jaxrun.outputs.callbacks import CallbackSink, OnResult, OnStart
from jaxrun.outputs.run_log import performance_line
from jaxrun.probe.channel import valid_text
from jaxrun.results import result_files
from jaxrun.results.models import BatchResult, ScriptResult
from jaxrun.results.ownership import take_script_place
from jaxrun.plan.sink import NO_SINK, Sink
from jaxrun.run.execute import RunInterrupted, run_job
from jaxrun.run.process.placement import WHOLE_MACHINE, Placement

__all__ = ["run_jax_scripts", "execute_jax_script"]

logger = logging.getLogger("jaxrun")


def run_jax_scripts(
    pipeline_output_dir: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    recursive_search: bool = True,
    *,
    return_detailed_results: bool = False,
    on_start: OnStart | None = None,
    on_result: OnResult | None = None,
    config: str | os.PathLike[str] | bool | None = None,
    **options: Any,
) -> bool | BatchResult:
    """Find the JAX scripts under ``pipeline_output_dir`` (a path or a list) and run each one.

    Returns True when every script succeeded (or the :class:`BatchResult` with
    ``return_detailed_results=True``). A failing script never stops the batch. Result files are
    written to ``results_dir`` (default ``./jaxrun_results``) after every script; files of a
    previous batch in that folder (``script_results/``, ``logs/``, ``outputs/``) are replaced.

    ``device`` may list several devices (``"cpu,gpu"``): each script then runs on each, its files
    are named ``<name>@<device>``, and with ``benchmark_runs`` the benchmarking section reports
    each device's speed-up over the first. ``jobs=N`` runs up to N scripts at once: CPU jobs each
    get a disjoint share of the cores, GPU jobs their own GPU (``gpus_per_job``, or
    ``jobs_per_gpu`` sharing one with a memory fraction), longest first when the history knows
    durations; ``backend="ray"`` runs each script as a Ray task (``ray_address`` of an existing
    cluster, else a local Ray). Benchmarked scripts are stored in the ``history`` database (a path;
    None for ``$JAXRUN_HISTORY`` or ``./.jaxrun/history.sqlite``; False for none) and checked for
    regressions there. ``markdown`` writes the run summary as Markdown tables to that file.

    Every option (the keywords of this signature after ``config``: :class:`jaxrun.BatchOptions`
    and :class:`jaxrun.RunOptions`) is validated before anything runs; a keyword left out takes
    the config file's or ``JAXRUN_*``'s value, else its default. ``config``: the config file
    (default: the nearest above the first path; False: none). ``on_start(i, n, name)`` and
    ``on_result(i, n, result)`` are called as scripts start and finish (``n`` is None while the
    plan of a large folder is still finding its scripts: the first ones run meanwhile).
    """
    given = explicit_keywords(run_jax_scripts, {"recursive": recursive_search}, renamed={"recursive": "recursive_search"})
    batch_options = resolve_batch_options(pipeline_output_dir, {**given, **options}, source="api", config=config).options
    batch = run_batch(batch_options, sinks=[CallbackSink(on_start, on_result)])
    # The batch held its results compactly, read back on use (results/held_results.py); the caller gets a list.
    batch = batch.model_copy(update={"script_results": list(batch.script_results)})
    return batch if return_detailed_results else batch.success


def execute_jax_script(
    script_path: str | os.PathLike[str],
    device: str = default_of(RunOptions, "device"),
    *,
    results_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    raise_on_error: bool = False,
    config: str | os.PathLike[str] | bool | None = None,
    allow_other_files: bool = False,
    placement: Placement | None = None,
    **options: Any,
) -> ScriptResult:
    """Run one JAX script in its own process and return what happened.

    The script runs with its folder as working directory, ``JAX_PLATFORMS`` set for the chosen
    device, ``JAXRUN_OUTPUT_DIR`` pointing at ``results_dir/outputs/<name>`` and its output streamed
    to ``results_dir/logs/<name>.stdout.log`` / ``.stderr.log``; the result is written to
    ``results_dir/script_results/<name>_result.json``. With ``results_dir=None`` a new temporary
    folder holds the logs and no result file is written. The script's files of an earlier run in
    ``results_dir`` are replaced; a folder that holds files jaxrun did not write is refused
    (:class:`UsageError`) unless ``allow_other_files=True``, and then they are kept. A failing script returns a result with
    ``success=False``; only ``raise_on_error=True`` turns that into :class:`ScriptFailedError`.

    ``placement`` (a :class:`jaxrun.run.process.placement.Placement`) says where on the machine the script's
    processes go: a slot's CPU cores become their affinity, its GPUs the ones they see
    (``FixedPlacement(Slot(0, cpus=(0,)))`` pins every attempt to core 0; ``jaxrun ab --duet``
    gives each side its half); None: the whole machine, as ``jaxrun run`` runs one script.

    ``benchmark_runs=N, warmup_runs=W`` run the script W+N times, each as a new process; the
    result is the last run's, with every run's samples and their statistics in ``.benchmark``.

    Every further keyword is an option of :class:`jaxrun.RunOptions` (listed in this signature
    with its default), validated before anything runs: ``args`` (the script's command-line
    arguments); ``entry="main"`` is warm mode: the module is loaded without its ``__main__`` block
    and ``main()`` is called ``warm_calls`` times in one process, each call ended with
    ``jax.block_until_ready``, the first call (with compilation) and the steady-state calls
    reported apart in ``.warm``; ``host_devices=N`` makes the CPU platform show N devices;
    ``compile_cache`` is JAX's persistent compilation cache folder (on by default in jaxrun's
    cache folder, a path to choose another, False for none), and ``cold_cache=True`` gives every
    run (each benchmark run too) an empty cache so each pays its full compilation.
    """
    given = {**explicit_keywords(execute_jax_script, {"device": device}), **options}
    RunOptions.build("api", **given)  # checks the keywords: only run options here
    log_cap_bytes()  # JAXRUN_LOG_CAP_BYTES that is no size: refused before the script runs
    script, run_options = checked_script(script_path, given, config, lambda where: (
        "execute_jax_script runs one point; a sweep is a batch of them: run_jax_scripts(path, sweep=...) (or "
        f"jaxrun run --param), or pass one point as params= (sweep set by {where})"))
    name = valid_text(name or point_name(script_display_name(script, script.parent), run_options.params))
    base = Path(results_dir) if results_dir is not None else Path(tempfile.mkdtemp(prefix="jaxrun-"))
    job = Job(index=0, script=script, name=name, file_name=result_files.file_stem(name), device=run_options.device,
              platform=None, results_dir=base)
    sink: Sink = NO_SINK
    if results_dir is not None:
        take_script_place(base, job.file_name, allow_other_files)
        sink = script_outputs(base, run_options)
    try:
        result = run_job(job, run_options, sink=sink, placement=placement or WHOLE_MACHINE)
    except RunInterrupted as stopped:
        sink.on_result(job, stopped.result)
        raise
    result = sink.on_result(job, result)
    if run_options.verbose:
        logger.info(performance_line(result))
    if raise_on_error and not result.success:
        raise ScriptFailedError(f"{name} failed ({result.error_class}): {result.error_message}", result)
    return result


# help() and editors show every option with its default (declared once, in jaxrun/config/options.py).
run_jax_scripts.__signature__ = keyword_signature(  # type: ignore[attr-defined]
    run_jax_scripts, BatchOptions, RunOptions, skip=("recursive", "paths"))
execute_jax_script.__signature__ = keyword_signature(execute_jax_script, RunOptions)  # type: ignore[attr-defined]
