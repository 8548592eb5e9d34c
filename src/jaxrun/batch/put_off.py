"""The batch's start-up work that no script need wait for, put off until its first script's process
has started and done while that script runs (the batch's pool calls it, in the thread that started
the process; a batch whose jobs run elsewhere, when the first is handed over). Each part is also
done by its owner when it is needed first, so each is safe to do twice, and a part that fails
here is left for its owner to fail where the error belongs."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from jaxrun.batch.batch_outputs import BatchOutputs
    from jaxrun.plan.batch_plan import Plan

logger = logging.getLogger(__name__)


def import_result_code() -> None:
    """Import the code that turns an ended process into its result (run/reading/result.py, the
    result models and what they import) and work out the models' types, so that the first result
    is not kept waiting for them after its script's last line."""
    from jaxrun.results.model_json import prepare
    from jaxrun.results.models import BatchResult, ScriptResult
    from jaxrun.run.reading import result  # noqa: F401 - imported for the first result's sake

    for model in (ScriptResult, BatchResult):
        prepare(model)  # the models' types, which reading the first result back would work out


class PutOffStartUp:
    def __init__(self, plan: "Plan", outputs: "BatchOutputs") -> None:
        self.parts: list[Callable[[], object]] = [
            plan.go_on,  # the rest of a large folder's plan
            lambda: outputs.files().begin(),  # the result files' sinks made, the batch files' first version
            lambda: outputs.reports.build() if outputs.reports is not None else None,  # the reports' sinks
            import_result_code,
        ]

    def __call__(self) -> None:
        for part in self.parts:
            try:
                part()
            except Exception:  # noqa: BLE001 - its owner does it again where the error belongs
                logger.debug("put-off start-up work failed; its owner repeats it", exc_info=True)
