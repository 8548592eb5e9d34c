"""Makespan of a parallel batch (``jobs=2``) against the ideal, on this machine's cores.

Eight crafted CPU-bound scripts, each a *fixed amount* of JAX work (a jitted ``fori_loop`` of
64x64 matmul + tanh steps, called a fixed number of times: single-threaded work, so one script
saturates one core and a slowdown under parallelism shows up as a longer run, not as less work).

Each pair of batches is:
  1. ``jobs=1``: every script alone on the machine; its ``execution_time`` (whole process) is its
     single-job time;
  2. ``jobs=2``: the same scripts, two at a time.
The ideal makespan is sum(single-job times) / 2. The measured makespan is the wall time of the
whole ``run_jax_scripts(jobs=2)`` call (what a user waits for; the figure judged against 1.10x),
and, for reference, the span of the results' timestamps (first ``started_at`` to last
``finished_at``). The persistent compilation cache is off on both sides (``compile_cache=False``),
so every run pays the same (small) compilation.

    python benchmarks/bench_makespan.py [--pairs 3] [--scripts 8] [--calls 10]

Goal (issue 5): median ratio measured / ideal <= 1.10 on a 2-core box. Another process using the
cores while this runs (a test suite, a build) inflates the parallel run more than the sequential
one, because the ideal assumes every core is free: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import jaxrun

GOAL = 1.10
WORK = """\
import time
import jax
import jax.numpy as jnp
from jax import lax
import jaxrun

SIZE, STEPS, CALLS, SEED = 64, {steps}, {calls}, {seed}


@jax.jit
def chain(x):
    def body(i, x):
        return jnp.tanh(x @ x * 0.05 + 0.01 * i)
    return lax.fori_loop(0, STEPS, body, x)


x = jax.random.normal(jax.random.PRNGKey(SEED), (SIZE, SIZE))
started = time.perf_counter()
for _ in range(CALLS):
    x = chain(x).block_until_ready()
jaxrun.record(work_seconds=time.perf_counter() - started, checksum=float(x.sum()))
"""


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def run_batch(folder: Path, results: Path, jobs: int):
    started = time.perf_counter()
    batch = jaxrun.run_jax_scripts(
        folder, device="cpu", jobs=jobs, results_dir=results, history=False, compile_cache=False,
        return_detailed_results=True, timeout=600,
    )
    wall = time.perf_counter() - started
    failed = [(r.script_name, r.error_message) for r in batch.script_results if not r.success]
    if failed:
        sys.exit(f"a benchmark script failed: {failed}")
    return batch, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="jobs=1 / jobs=2 pairs (medians over them)")
    parser.add_argument("--scripts", type=int, default=8)
    parser.add_argument("--calls", type=int, default=10, help="calls of the jitted loop per script")
    parser.add_argument("--steps", type=int, default=20000)
    args = parser.parse_args()

    cores = len(os.sched_getaffinity(0))
    jaxrun.get_jax_device_info()  # cached device probe: keep it out of the figures
    print(f"jaxrun {jaxrun.__version__}, python {platform.python_version()}, {cores} usable cores, "
          f"{args.scripts} scripts x {args.calls} calls x {args.steps} steps, compile cache off")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="jaxrun-makespan-") as tmp:
        root = Path(tmp)
        folder = root / "scripts"
        folder.mkdir()
        for i in range(args.scripts):
            (folder / f"work_{i:02d}.py").write_text(WORK.format(steps=args.steps, calls=args.calls, seed=i))
        for pair in range(1, args.pairs + 1):
            seq, seq_wall = run_batch(folder, root / "seq", jobs=1)
            par, par_wall = run_batch(folder, root / "par", jobs=2)
            single = [r.execution_time for r in seq.script_results]
            ideal = sum(single) / 2
            span = seconds_between(
                min(r.started_at for r in par.script_results), max(r.finished_at for r in par.script_results)
            )
            per_script_par = statistics.mean(r.execution_time for r in par.script_results)
            rows.append({
                "pair": pair, "sum": sum(single), "ideal": ideal, "seq_wall": seq_wall, "par_wall": par_wall,
                "span": span, "ratio": par_wall / ideal, "span_ratio": span / ideal,
                "slowdown": per_script_par / statistics.mean(single),
            })

    header = (f"{'pair':>4} {'sum 1-job s':>12} {'ideal s':>8} {'jobs=1 wall s':>14} {'jobs=2 wall s':>14} "
              f"{'jobs=2 span s':>14} {'wall/ideal':>11} {'span/ideal':>11} {'per-script x':>13}")
    print(header)
    print("-" * len(header))

    def line(label: str, r: dict) -> str:
        return (f"{label:>4} {r['sum']:12.2f} {r['ideal']:8.2f} {r['seq_wall']:14.2f} {r['par_wall']:14.2f} "
                f"{r['span']:14.2f} {r['ratio']:11.3f} {r['span_ratio']:11.3f} {r['slowdown']:13.3f}")

    for r in rows:
        print(line(str(r["pair"]), r))
    med = {key: statistics.median(r[key] for r in rows) for key in rows[0] if key != "pair"}
    print(line("med", med))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    verdict = "PASS" if med["ratio"] <= GOAL else "FAIL"
    print(f"median jobs=2 makespan / ideal = {med['ratio']:.3f} (timestamps: {med['span_ratio']:.3f}); "
          f"goal <= {GOAL:.2f}: {verdict}")
    print("(per-script x: mean execution_time of a script under jobs=2 / its mean single-job time)")


if __name__ == "__main__":
    main()
