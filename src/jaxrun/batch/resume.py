"""``--resume``: which scripts of the batch already finished in the results folder.

A script's earlier result is reused when it finished (succeeded, or failed for a reason of its own:
not ``interrupted``), from the same content (sha256) and the same run options; everything else
runs again, so the resumed batch ends with the result files of one uninterrupted run.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from .. import resultfiles
from ..errors import ScriptNotFoundError, UsageError
from ..models import BatchResult, ScriptResult
from ..options import BatchOptions
from ..provenance import script_identity
from ..job import Job
from ..summary import with_unlisted_results

logger = logging.getLogger("jaxrun")


def finished_before(options: BatchOptions, jobs: list[Job]) -> dict[int, ScriptResult]:
    """Job index -> the earlier result to keep."""
    path = options.results_dir / resultfiles.EXECUTION_RESULTS
    if not path.is_file():
        logger.info("--resume: no earlier batch in %s, running every script", options.results_dir)
        return {}
    try:
        before = with_unlisted_results(resultfiles.read_model(path, BatchResult), options.results_dir)
    except (OSError, ValueError, ValidationError) as exc:
        raise UsageError(
            f"--resume: {str(path)!r} cannot be read ({type(exc).__name__}); run without --resume to start over"
        ) from None
    earlier = {(r.script_name, r.device_requested): r for r in before.script_results}
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
