"""A 2-process JAX program as one jaxrun job (``--processes 2``), and how fast a failing one ends.

    python benchmarks/bench_multiprocess.py --runs 5

``ok``: ``jax.distributed.initialize()`` with no arguments, a ``pmap``/``psum`` across both
processes (gloo on the CPU), ``jaxrun.record`` of the sum; the job's phases and each process's,
one line a run, then the medians. ``fails``: process 1 raises 0.3 s after initialize(); each
process writes its pid, and a thread polls them every 5 ms: the seconds from the raise (the
script's own ``time.monotonic()``) to the last process gone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

import jaxrun

PSUM = """\
import jax
import jax.numpy as jnp
import jaxrun
jax.distributed.initialize()
me = jax.process_index()
total = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.array([me + 1.0]))
jaxrun.record(total=float(total[0]))
jax.distributed.shutdown()
"""
FAILS = """\
import os, time
import jax
import jax.numpy as jnp
jax.distributed.initialize()
open(os.environ["MARK"] + ".pid%d" % jax.process_index(), "w").write(str(os.getpid()))
if jax.process_index() == 1:
    time.sleep(0.3)
    open(os.environ["MARK"], "w").write(repr(time.monotonic()))
    raise ValueError("process one gave up")
jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.array([1.0]))
"""
FIELDS = ("execution_time", "body_time", "import_time", "jit_compile_time", "run_time", "cpu_time", "memory_peak")


def job(folder: Path, results: Path):  # type: ignore[no-untyped-def]
    return jaxrun.run_jax_scripts(folder, results_dir=results, device="cpu", processes=2, history=False,
                                  compile_cache=False, return_detailed_results=True).script_results[0]


def ok(root: Path, runs: int) -> None:
    (root / "ok").mkdir()
    (root / "ok" / "psum.py").write_text(PSUM)
    rows: dict[str, list[list[float]]] = {"job": [], "p0": [], "p1": []}
    for i in range(runs):
        r = job(root / "ok", root / f"ok{i}")
        assert r.success and r.results["total"] == 3.0, (r.error_message, r.results)
        for who, figures in (("job", r), *((f"p{p.process_id}", p) for p in r.processes)):
            rows[who].append([figures[k] for k in FIELDS])
            print(f"run {i} {who}:", " ".join(f"{k}={figures[k]:.3f}" for k in FIELDS))
    for who, values in rows.items():
        print(f"median {who}:", " ".join(f"{k}={statistics.median(v[j] for v in values):.3f}" for j, k in enumerate(FIELDS)))


def fails(root: Path, runs: int) -> None:
    (root / "bad").mkdir()
    (root / "bad" / "fails.py").write_text(FAILS)
    mark = root / "mark"
    os.environ["MARK"] = str(mark)
    for i in range(runs):
        for path in (mark, Path(f"{mark}.pid0"), Path(f"{mark}.pid1")):
            path.unlink(missing_ok=True)
        last, done = [0.0], threading.Event()

        def poll() -> None:
            while not done.is_set():
                for k in (0, 1):
                    try:
                        if psutil.Process(int(Path(f"{mark}.pid{k}").read_text())).status() != psutil.STATUS_ZOMBIE:
                            last[0] = time.monotonic()
                    except (OSError, ValueError, psutil.Error):
                        pass
                time.sleep(0.005)

        watcher = threading.Thread(target=poll)
        watcher.start()
        r = job(root / "bad", root / f"bad{i}")
        done.set()
        watcher.join()
        print(f"run {i}: {r.error_class} {r.error_message!r}; raise -> last process gone "
              f"{last[0] - float(mark.read_text()):.3f} s; job {r.execution_time:.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jaxrun-bench-mp-"))
    ok(work, args.runs)
    fails(work, args.runs)
