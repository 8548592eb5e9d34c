"""One run of one script, over as many attempts as the failure table asks for, as a ScriptResult
(built by run/reading/result.py once the attempts are over).

A requested platform that the device facts say is absent is ``device_unavailable`` before anything
is launched. After a failed attempt, :func:`jaxrun.core.failures.next_action` decides: retry on the same
device after a backoff, move to another GPU (when the placement has one and the device was not
chosen: ``gpu:1`` stays on GPU 1), fall back to CPU, or stop.
Every attempt is kept in the result. The attempt itself is a parameter (``attempt``: run/attempt.py's
:func:`~jaxrun.run.attempt.make_attempt` by default), so the policy can be exercised without a
GPU (tests pass a fake attempt; see docs/ARCHITECTURE.md).

What only an ended attempt needs (the result models, classification) is imported after its
process has started: the way to a script's first line imports none of it.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from jaxrun.config.options import RunOptions
from jaxrun.core.formatting import one_line
from jaxrun.core.timestamps import now_iso
from jaxrun.core.validate import device_label, split_device
from jaxrun.discover.devices import device_facts, resolve_device
from jaxrun.errors import DeviceProbeError
from jaxrun.plan.job import Job
from jaxrun.run.attempt import make_attempt
from jaxrun.run.process.environment import chosen_index
from jaxrun.run.process.placement import WHOLE_MACHINE, Placement, Slot
from jaxrun.run.reading.attempt_run import AttemptRun

if TYPE_CHECKING:
    from jaxrun.discover.devices import Facts
    from jaxrun.results.models import Attempt, ScriptResult

logger = logging.getLogger("jaxrun")

class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the script; its (interrupted) result was saved and travels with this."""

    def __init__(self, result: "ScriptResult") -> None:
        super().__init__()
        self.result = result


# attempt(job, options, platform, slot, facts, stop, compile_cache) -> AttemptRun
AttemptFn = Callable[
    [Job, RunOptions, str, "Slot | None", "Facts | None", "threading.Event | None", "Path | None"], AttemptRun
]


def _keep_attempt_logs(job: Job, number: int, processes: int = 1) -> None:
    """Before a new attempt overwrites the logs, keep the previous attempt's under its number."""
    if processes > 1:
        from jaxrun.run.process.process_group import (
            job_log_files,  # (socket, queue): only multi-process jobs import it
        )

        logs = job_log_files(job, processes)
    else:
        logs = [job.stdout_log, job.stderr_log]
    for log in logs:
        if log.exists():
            # `<name>.stdout.log`: the name itself may hold dots (`v1.2__model`), so split from the right.
            stem, stream, ext = log.name.rsplit(".", 2)
            log.rename(log.with_name(f"{stem}.attempt{number}.{stream}.{ext}"))


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
    attempt: AttemptFn = make_attempt,
    read_facts: "Callable[[], Facts] | None" = None,
) -> "ScriptResult":
    """Run ``job.script`` once (over as many attempts as the failure table asks for).

    ``device`` overrides the device to start on (benchmark runs after a fallback start on the
    platform that worked). ``attempt`` and ``read_facts`` (reads the device facts) are the seams through
    which tests drive the failure policy as if a GPU were present. Raises
    :class:`RunInterrupted` when jaxrun itself is interrupted.
    """
    if options.cold_cache and options.compile_cache is not None and compile_cache is None:
        # Every run, benchmarked or not, starts from an empty compilation cache of its own.
        with tempfile.TemporaryDirectory(prefix="jaxrun-cold-cache-") as empty:
            return run_attempts(job, options, placement=placement, stop=stop, device=device,
                            compile_cache=Path(empty), attempt=attempt, read_facts=read_facts)
    if job.output_dir.exists():
        shutil.rmtree(job.output_dir)  # outputs of an earlier run must not pass for this run's
    started_at = now_iso()
    try:
        # The facts of the interpreter that runs the script (--python: another environment's).
        facts: Facts | None = read_facts() if read_facts is not None else device_facts(python=options.python)
    except DeviceProbeError:
        facts = None  # the script still runs; if it needs JAX it fails with the real reason

    attempts: list["Attempt"] = []
    fallback_reason: str | None = None
    retries_left = options.retries
    target = device or options.device
    run = AttemptRun(None, None)
    platform: str | None = None
    user_interrupted = False
    while True:
        number = len(attempts) + 1
        attempt_started = now_iso()
        if facts is None:
            platform, missing = ("cpu" if target in ("auto", "cpu") else None), "device facts unavailable"
        else:
            platform, missing = resolve_device(target, facts)
        if platform is None:
            from jaxrun.run.reading.classify import classification

            run = AttemptRun(None, classification("device_unavailable", missing or f"{target} is not available"))
        else:
            if number > 1:
                _keep_attempt_logs(job, number - 1, options.processes)
            run = attempt(job, options, platform, placement.slot(platform), facts, stop, compile_cache)
        failure, outcome = run.failure, run.outcome
        chosen = chosen_index(options.device, platform)  # gpu:1: that GPU only, or the CPU by the fallback
        from jaxrun.core.failures import backoff_seconds, next_action
        from jaxrun.results.models import Attempt

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
                from jaxrun.run.reading.classify import classification

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

    from jaxrun.run.reading.result import build_result

    result = build_result(job, options, platform, run, attempts, fallback_reason, started_at)
    if user_interrupted or (run.outcome is not None and run.outcome.interrupted):
        raise RunInterrupted(result)
    return result


