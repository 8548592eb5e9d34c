"""After `jaxrun run --profile`: where the jax.profiler traces went and how to open them.

Each profiled script's trace is RESULTS_DIR/jax_profiling/traces/<name>/ (written by its own
process, probe/profiler.py): ``plugins/profile/<time>/<host>.xplane.pb``, what XProf (or
TensorBoard with its profile plugin) reads, and ``<host>.trace.json.gz``, a JSON trace that
https://ui.perfetto.dev opens; ``device_memory.prof`` (pprof) beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from jaxrun.core.formatting import plural
from jaxrun.interfaces.cli.console import out
from jaxrun.results.result_files import PROFILING_DIR, TRACES_DIR

if TYPE_CHECKING:
    from jaxrun.results.models import BatchResult

PERFETTO = "https://ui.perfetto.dev"


def profile_note(batch: "BatchResult") -> list[str]:
    """The lines that say where a profiled batch's traces are and how to open them (none when
    the batch was not profiled): where, then how."""
    from jaxrun.results.held_results import having

    profiled = [r for _, r in having(batch.script_results, "performance_metrics")]
    if not profiled:
        return []
    folder = Path(batch.metadata.results_dir) / PROFILING_DIR
    traces = [Path(r.performance_metrics["trace_dir"]) for r in profiled if r.performance_metrics.get("trace_dir")]
    if not traces:
        return [f"profile: no jax.profiler trace (no profiled script imported jax); memory and timing profiles "
                f"in {folder}"]
    untraced = len(profiled) - len(traces)
    skipped = f", {untraced} without one (see trace_reason in timing_profile.json)" if untraced else ""
    if len(traces) == 1:
        where = f"profile: jax.profiler trace of {traces[0].name} in {traces[0]}{skipped}"
        logdir = traces[0]
    else:
        logdir = folder / TRACES_DIR
        where = f"profile: jax.profiler traces of {plural(len(traces), 'script')} in {logdir}/<script>/{skipped}"
    where += f"; memory and timing profiles in {folder}"
    how = f"  open with: xprof --logdir {logdir} (pip install xprof; or tensorboard --logdir with tensorboard-plugin-profile)"
    json_traces = sorted(traces[0].glob("plugins/profile/*/*.trace.json.gz"))
    if len(traces) == 1 and json_traces:
        how += f", or load {json_traces[-1]} in {PERFETTO}"
    elif any(True for t in traces for _ in t.glob("plugins/profile/*/*.trace.json.gz")):
        how += f", or load a script's plugins/profile/*/*.trace.json.gz in {PERFETTO}"
    return [where, how]


def print_profile_note(batch: "BatchResult") -> None:
    for line in profile_note(batch):
        out.print(line, markup=False, soft_wrap=True)
