"""One attempt at a script: its process (or a ``--processes N`` job's processes) launched through
the probe and watched to its end (run/process/), then read into what it left (run/reading/). The
attempt loop (run/runner.py) calls it as its ``attempt``; a batch hands it its process pool
(run/batch_pool.py).

What only an ended attempt needs (the result models, the probe's reading, classification) is
imported after its process has started: the way to a script's first line imports none of it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from jaxrun.config.options import RunOptions
from jaxrun.discover.energy import HostEnergy, JobEnergy, not_on_gpu
from jaxrun.errors import ResultsWriteError
from jaxrun.plan.job import Job
from jaxrun.run.process.environment import child_env, probe_command
from jaxrun.run.process.placement import Slot, pinned_cpus
from jaxrun.run.process.prestart import plan_start
from jaxrun.run.process.process_pool import ProcessPool
from jaxrun.run.process.process_watch import Interrupted, Limits, launch

if TYPE_CHECKING:
    from jaxrun.discover.devices import Facts
    from jaxrun.run.reading.attempt_run import AttemptRun
    from jaxrun.run.reading.job_run import JobRun


_EVENTS_PREFIX = "jaxrun-events-"  # + the pid of the jaxrun process that made the folder


@functools.lru_cache(maxsize=None)
def _sweep_stale_event_folders() -> None:
    """Remove the probe channel folders of jaxrun processes that were killed before they could
    (once per process: a killed run's folders go at the next run)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_EVENTS_PREFIX}*"):
        owner = folder.name[len(_EVENTS_PREFIX):].split("-")[0]
        if owner.isdigit() and int(owner) != os.getpid() and not _alive(owner):
            shutil.rmtree(folder, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def _events_folder() -> Path:
    """This process's one folder of probe channels (each attempt a numbered folder in it): made
    once, removed when the process exits (a killed one's by the next run's sweep)."""
    import atexit

    folder = Path(tempfile.mkdtemp(prefix=f"{_EVENTS_PREFIX}{os.getpid()}-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


_attempts = itertools.count(1)


@contextlib.contextmanager
def _attempt_channels(processes: int) -> Iterator[Path]:
    """Where one attempt's probe channels go: a file of this process's folder for one process, a
    folder of one file a process for a ``--processes N`` job; removed after. (A file, not a folder
    each: on a batch's way from one script to the next, two fewer file-system operations.)"""
    number = next(_attempts)
    place = _events_folder() / (str(number) if processes > 1 else f"{number}.jsonl")
    if processes > 1:
        place.mkdir()
    try:
        yield place
    finally:
        if processes > 1:
            shutil.rmtree(place, ignore_errors=True)
        else:
            try:
                os.unlink(place)
            except FileNotFoundError:  # the probe never started
                pass


def _alive(pid: str) -> bool:
    """Whether process ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def make_attempt(
    job: Job,
    options: RunOptions,
    platform: str,
    slot: Slot | None,
    facts: "Facts | None",
    stop: threading.Event | None,
    compile_cache: Path | None,
    pool: ProcessPool | None = None,
) -> AttemptRun:
    """The real attempt: the script in its own process through the probe (``pool``: the
    batch's process pool, with its spare process; run/batch_pool.py's ``BatchPool.attempt`` passes
    it), read into what it left once it has ended."""
    for folder in (job.output_dir, job.stdout_log.parent):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a full disk: the batch stops with one line (errors.py), no traceback
            raise ResultsWriteError(folder, exc) from None
    _sweep_stale_event_folders()
    if options.randomize_setup:
        pool = None  # a spare already runs with the environment it was started with: not this run's
    cpus = pinned_cpus(slot, platform)
    with _attempt_channels(options.processes) as channels:
        events_path = channels if options.processes == 1 else channels / "events.jsonl"
        env = child_env(job, options, platform, facts, events_path, slot, compile_cache)
        command = probe_command(job.script, events_path, options, job.profile_dir)
        sampler = None
        if platform == "gpu":  # utilisation is sampled only where NVML can see the job's devices: NVIDIA GPUs
            from jaxrun.discover.nvml import UtilizationSampler, visible_gpus

            sampler = UtilizationSampler(visible_gpus(env.get("CUDA_VISIBLE_DEVICES"))).start()
        host = HostEnergy().start()  # the CPU packages' counters, read last before the job starts
        job_run: JobRun | None = None
        try:
            if options.processes > 1:
                # (socket, queue, the probe's reading: only multi-process jobs import them)
                from jaxrun.run.process.process_group import run_group
                from jaxrun.run.reading.job_run import read_job

                group = run_group(job, options, env, channels, stop=stop, pool=pool,
                                         cpu_affinity=cpus)
                job_run = read_job(job, options, group)
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
                    cpu_affinity=cpus,
                    stop=stop,
                    record_memory=options.enable_profiling,
                    pool=pool,
                    start=plan_start(options, pool.prestart.auto if pool is not None else None, job.script),
                )
        except Interrupted as stopped:
            outcome = stopped.outcome
        finally:
            host_energy = host.stop()
            if sampler is not None:
                sampler.stop()
    from jaxrun.run.reading.result import ended_attempt  # once the script has run

    device_energy, sampled_watts = sampler.energy() if sampler is not None else (not_on_gpu(platform), None)
    return ended_attempt(job, options, env, command, outcome, job_run, sampler.result() if sampler else None,
                         cpus=cpus, energy=JobEnergy(device_energy, sampled_watts, host_energy))
