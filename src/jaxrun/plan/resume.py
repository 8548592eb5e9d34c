"""``--resume``: which scripts of the batch already finished in the results folder.

A script's earlier result is reused when it finished (succeeded, or failed for a reason of its own:
not ``interrupted``), from the same content (sha256) and the same run options; everything else
runs again, so the resumed batch ends with the result files of one uninterrupted run.

The earlier results are those of the batch file, with the scripts that only have their own file
(a batch cut off between two rewrites of it). When the batch file is damaged (cut off, garbled,
missing fields) or gone, the batch is rebuilt from the per-script files alone, and one line says
so; a script whose own file is damaged too runs again.
"""

from __future__ import annotations

import logging
from pathlib import Path

from jaxrun.config.options import BatchOptions
from jaxrun.core.formatting import listed
from jaxrun.errors import ScriptNotFoundError, UsageError
from jaxrun.plan.job import Job
from jaxrun.results import result_files
from jaxrun.results.batch_summary import script_files, with_unlisted_results
from jaxrun.results.models import BatchResult, ScriptResult
from jaxrun.results.provenance import script_identity

logger = logging.getLogger("jaxrun")


def earlier_results(results_dir: Path) -> list[ScriptResult]:
    """The results an earlier batch left in ``results_dir``: of its batch file when it can be
    read, else of the per-script files that can (with a warning naming what was used)."""
    path = Path(results_dir) / result_files.EXECUTION_RESULTS
    try:
        return with_unlisted_results(result_files.read_model(path, BatchResult), Path(results_dir)).script_results
    except result_files.DamagedFileError as exc:  # a FIFO or a device in its place included: never read
        why = exc.problem if isinstance(exc, result_files.NotRegularFileError) else f"damaged: {exc.problem}"
    except FileNotFoundError:
        why = None
    except OSError as exc:
        raise UsageError(f"--resume: cannot read {str(path)!r} ({type(exc).__name__}: {exc.strerror or exc}); "
                         "make it readable, or run without --resume to start over") from None
    found = script_files(results_dir)
    if why is None and not found.readable and not found.damaged:
        logger.info("--resume: no earlier batch in %s, running every script", results_dir)
        return []
    used = [p.name for _, p in found.readable]
    line = (f"--resume: {str(path)!r} is {why or 'missing'}; "
            f"rebuilt the batch from {len(used)} per-script result file{'' if len(used) == 1 else 's'}"
            + (f" ({_names(used)})" if used else ""))
    if found.damaged:
        line += ("; damaged, so their scripts run again: "
                 + _names([f"{e.path.name} ({e.problem})" for e in found.damaged]))
    logger.warning(line)
    return [result for result, _ in found.readable]


def _names(names: list[str], shown: int = 10) -> str:
    return listed(names, shown)


def finished_before(options: BatchOptions, jobs: list[Job]) -> dict[int, ScriptResult]:
    """Job index -> the earlier result to keep."""
    earlier = {(r.script_name, r.device_requested): r for r in earlier_results(options.results_dir)}
    reused: dict[int, ScriptResult] = {}
    for job in jobs:
        result = earlier.get((job.name, job.device))
        if result is None or result.error_class == "interrupted" or result.content_hash is None:
            continue
        try:
            _, digest = script_identity(job.script)
        except ScriptNotFoundError:
            continue
        if digest == result.content_hash and result.options_key == options.options_for(job).key:
            reused[job.index] = result
    return reused
