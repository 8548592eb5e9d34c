"""``--json`` (``json = true``, ``run_jax_scripts(json=True)``): the batch result on stdout when
the batch ends, the bytes of ``jax_execution_results.json``, for a pipe (``jaxrun run DIR --json |
jq``); the CLI then prints nothing else on stdout (progress and messages go to stderr)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from jaxrun.plan.sink import BaseSink

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.results.models import BatchResult


class BatchJsonSink(BaseSink):
    def on_end(self, batch: "BatchResult") -> None:
        from jaxrun.results.result_files import dump_model

        sys.stdout.write(dump_model(batch))
        sys.stdout.flush()


def for_batch(context: "OutputContext") -> BatchJsonSink:
    return BatchJsonSink()
