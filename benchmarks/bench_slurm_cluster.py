"""N tiny scripts as one Slurm job array on a private single-node Slurm, beside the same scripts
under a local ``--jobs 2``; used by ``python benchmarks/run.py --only-slurm --scripts N``.

The cluster is the test suite's (tests/slurm_cluster.py): a slurmctld, a slurmd and a munged of
its own, under one state folder, on ports free at start, so the benchmark never touches (or
depends on) a system Slurm, and every Slurm command and jaxrun reach it through ``SLURM_CONF``
(``cluster.env``). :func:`private_cluster` stops every process it started, whatever happens.
"""

from __future__ import annotations

import collections
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import bench_ray_cluster

# The suite's cluster, not a copy of it: the benchmark then measures the cluster the tests check
# (its configuration, its start-up and stop), and a fix there is a fix here. tests/ is no package;
# appended, so that its folders (core, results, ...) never shadow a module found before it.
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))
import slurm_cluster


@contextlib.contextmanager
def private_cluster() -> Iterator[slurm_cluster.SlurmCluster]:
    """A single-node Slurm (one node with this machine's cores), idle and scheduling; stopped
    (its queue cancelled, its daemons and any step left) and its folder removed on the way out."""
    # Short and under /tmp: munged's socket path must fit a sockaddr_un (108 bytes).
    state_dir = Path(tempfile.mkdtemp(prefix="sb", dir="/tmp"))
    cluster = slurm_cluster.SlurmCluster.create(state_dir / "c")
    try:
        cluster.start(idle_timeout=120)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def completeness(results: Path, n: int) -> dict:
    """What the run left (bench_ray_cluster.completeness: every script once, successful, in one
    attempt), and Slurm's side: how many distinct task ids and arrays, the queue waits, who ran how many."""
    c = bench_ray_cluster.completeness(results, n)
    rows = json.loads((results / "jax_execution_results.json").read_text())["script_results"]
    ids = [r.get("slurm_job_id") for r in rows if r.get("slurm_job_id")]
    waits = sorted(r["queue_wait"] for r in rows if r.get("queue_wait") is not None)
    c["by_node"] = collections.Counter(r.get("node") for r in rows)
    c["task_ids"] = len(set(ids))
    c["arrays"] = len({i.partition("_")[0] for i in ids})
    c["waits"] = len(waits)
    c["wait_median"] = statistics.median(waits) if waits else None
    c["wait_max"] = waits[-1] if waits else None
    return c


def describe(c: dict, n: int) -> str:
    return bench_ray_cluster.describe(c, n)


def describe_slurm(c: dict, n: int) -> str:
    """The Slurm side: one task id a script, one array; the queue waits."""
    ids = f"{c['task_ids']} task ids of {n} in {c['arrays']} array{'s' if c['arrays'] != 1 else ''}"
    if c["waits"] == 0:
        return f"{ids}; no queue_wait recorded"
    return (f"{ids}; queue_wait ({c['waits']} tasks) median {c['wait_median']:.1f} s, max {c['wait_max']:.1f} s")
