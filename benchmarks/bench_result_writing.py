"""How long does jaxrun spend writing results as a batch grows? (DESIGN §10: 10,000 results <= 2 s.)

Writes N tiny scripts, then runs the real batch (`run_batch`: planning, every sink, every result
file, the run log) with an instant stand-in for running a script, so what is timed is jaxrun's own
bookkeeping, not the scripts. Reports the total, the part spent in the sinks (writing), the CPU
seconds of the whole batch (this process's user + system time: what the file system's own waits,
which move with whatever else writes to the disk, are not), and the size of
jax_execution_results.json; beside them, what the file system alone takes for N atomic files. Run::

    PYTHONPATH=src python benchmarks/bench_result_writing.py [--scripts 10000] [--repeats 1]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jaxrun.batch.pipeline import run_batch
from jaxrun.config.options import BatchOptions
from jaxrun.core.timestamps import now_iso
from jaxrun.results.models import ScriptResult


def instant_result(job, options, *, placement, stop, sink) -> ScriptResult:  # type: ignore[no-untyped-def]
    """What a short successful script's result holds, without running it."""
    now = now_iso()
    return ScriptResult(
        script_name=job.name, script_path=str(job.script), success=True, outcome="passed", device_requested=job.device,
        device_used="cpu", execution_time=0.61, body_time=0.52, import_time=0.48, run_time=0.02, cpu_time=0.7,
        memory_peak=151.0, jit_compile_time=0.03, compile_count=1, cache_hits=0, cache_misses=1,
        stdout_log=str(job.stdout_log), stderr_log=str(job.stderr_log), started_at=now, finished_at=now,
        results={"value": job.index},
    )


def tiny_result(job, options, **_) -> ScriptResult:  # type: ignore[no-untyped-def]
    """A result shaped as a real tiny script's (`print(1)`, no jax) as `jaxrun run` makes it: its
    method texts, command line, numerics, environment, hash and timestamps."""
    from jaxrun.results.models import Attempt, Numerics, RunEnvironment

    now, k = now_iso(), job.index
    return ScriptResult(
        script_name=job.name, script_path=str(job.script), success=True, exit_code=0, device_requested=job.device,
        device_used="cpu", attempts=[Attempt(number=1, device="cpu", success=True, exit_code=0,
                                             execution_time=0.19 + k * 1e-7, started_at=now)],
        execution_time=0.19 + k * 1e-7, body_time=0.0059 + k * 1e-9, import_time=0.0005 + k * 1e-9,
        run_time=0.0054 + k * 1e-9, drain_time=0.0, ended_by="return", cpu_time=0.074 + k * 1e-9,
        cpu_method="the run's cgroup's count (cpuacct.usage: every process of the run while it was in the group, "
                   "waited for or not) + the script's process's CPU before it joined the group (its interpreter's start-up)",
        memory_peak=14.7 + k * 1e-6, memory_method="max of the script process's own peak RSS (VmHWM, read by the probe "
        "at the end) and samples of its RSS + the USS of every descendant every 0.05 s",
        device_memory_reason="the script did not import jax",
        device_utilization_reason="utilisation is only measurable on NVIDIA GPUs (ran on cpu)", outcome="passed",
        command=[sys.executable, "-m", "jaxrun.probe", "--events", "/tmp/jaxrun-events-1-x/events.jsonl", "--",
                 str(job.script)],
        prestarted=False, numerics=Numerics(), environment=RunEnvironment(mode="inherited", variables=52),
        content_hash=f"{k:064x}", options_key="d857f249858f5e44", leftover_processes=0, peak_processes=1,
        cgroup=f"/sys/fs/cgroup/pids/jaxrun-1-{k}", kernel_limits=[], stdout_log=str(job.stdout_log),
        stderr_log=str(job.stderr_log), started_at=now, finished_at=now,
    )


def peak_rss(n: int, root: Path) -> int:
    """Peak RSS (VmHWM, KiB) of the real `jaxrun run DIR --jobs 2 -q` parent on ``n`` scripts,
    each script's process replaced by :func:`tiny_result` (the batch, its sinks, its view and its
    summary are the real ones): a fresh process each time."""
    import os
    import subprocess

    scripts = root / f"tiny{n}"
    if not scripts.exists():
        scripts.mkdir(parents=True)
        for i in range(n):
            (scripts / f"s{i:05d}.py").write_text("if False:\n    import jax\nprint(1)\n")
    out = subprocess.run([sys.executable, __file__, "--rss-child", str(scripts), str(root / f"rtiny{n}")],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    line = next((l for l in out.stderr.splitlines() if l.startswith("VmHWM ")), None)
    if line is None:
        raise RuntimeError(out.stderr[-2000:])
    return int(line.split()[1])


def _rss_child(scripts: str, results: str) -> None:
    from jaxrun.interfaces.cli import main
    from jaxrun.run import execute

    execute.run_job = tiny_result  # type: ignore[assignment]
    try:
        main(["run", scripts, "--jobs", "2", "--no-history", "--no-config", "-q", "--results-dir", results])
    finally:
        with open("/proc/self/status") as status:
            print("VmHWM", next(l for l in status if l.startswith("VmHWM")).split()[1], file=sys.stderr)


def measure(n: int, root: Path, plan_first: bool = False, round: int = 0) -> dict[str, float]:
    """The batch of ``n`` instant scripts under ``root``. ``plan_first``: its plan made whole
    before the first result (``plan`` s, in ``total``): instant stand-ins outrun the plan, which
    reads each script in a thread of its own, and the two then share the interpreter for the
    whole batch (a real batch's plan ends while its first scripts run). Each ``round`` writes a
    results folder of its own, as a first run does (a second run into the same folder would
    first clear the earlier one's files)."""
    scripts = root / f"s{n}"
    if not scripts.exists():
        for i in range(n):
            folder = scripts / f"d{i // 500:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"script_{i:05d}.py").write_text("import jax\n")
    results = root / f"r{n}" if not round else root / f"r{n}_{round}"
    options = BatchOptions.build("api", paths=[scripts], results_dir=results, history=False, device="cpu")
    from jaxrun.plan.sink import Sinks

    spent = {"sinks": 0.0}
    depth = [0]  # the batch's sinks are Sinks within Sinks: only the outermost call is timed
    original = {name: getattr(Sinks, name) for name in ("on_begin", "on_start", "on_progress", "on_result", "on_end")}

    def timed(name):  # type: ignore[no-untyped-def]
        def call(self, *args):  # type: ignore[no-untyped-def]
            depth[0] += 1
            started = time.perf_counter()
            try:
                return original[name](self, *args)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    spent["sinks"] += time.perf_counter() - started
        return call

    for name in original:
        setattr(Sinks, name, timed(name))
    from jaxrun.plan.batch_plan import Plan

    start = Plan.start
    planned = {"plan": 0.0}

    def whole(self):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        made = start(self)
        self.go_on()
        self.jobs.wait()
        planned["plan"] = time.perf_counter() - started
        return made

    if plan_first:
        Plan.start = whole  # type: ignore[method-assign]
    try:
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        batch = run_batch(options, run_job=instant_result)
        total = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        Plan.start = start  # type: ignore[method-assign]
        for name, function in original.items():
            setattr(Sinks, name, function)
    assert len(batch.script_results) == n and batch.metadata.complete
    size = (results / "jax_execution_results.json").stat().st_size
    cpu_seconds = (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)
    return {"total": total, "sinks": spent["sinks"], "cpu": cpu_seconds, "mb": size / 2**20, **planned}


def filesystem_floor(n: int, root: Path, size: int, round: int = 0) -> float:
    """Seconds to create, write and rename n files of ``size`` bytes in a new folder: what any
    atomic per-script file costs on this file system, side by side with jaxrun's writing."""
    folder = root / f"floor{n}" if not round else root / f"floor{n}_{round}"
    folder.mkdir()
    data = b"x" * size
    started = time.perf_counter()
    for i in range(n):
        tmp = folder / f".f{i}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        tmp.replace(folder / f"f{i}.json")
    return time.perf_counter() - started


def main() -> None:
    if sys.argv[1:2] == ["--rss-child"]:
        _rss_child(*sys.argv[2:4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scripts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--plan-first", action="store_true",
                        help="Make the plan whole before the first result (measure's plan_first): the writing alone.")
    parser.add_argument("--rss", type=int, nargs="*", metavar="N",
                        help="Instead: the `jaxrun run` parent's peak RSS at each N (default 100 1000), tiny results.")
    args = parser.parse_args()
    if args.rss is not None:
        counts = args.rss or [100, 1000]
        with tempfile.TemporaryDirectory(prefix="jaxrun-bench-rss-") as tmp:
            peaks = {n: statistics.median(peak_rss(n, Path(tmp)) for _ in range(args.repeats)) for n in counts}
        print(f"python {sys.version.split()[0]}; peak RSS (VmHWM) of `jaxrun run DIR --jobs 2 -q`, instant tiny "
              f"results (median of {args.repeats})")
        for n in counts:
            print(f"{n:>7} scripts: {peaks[n] / 1024:.1f} MiB")
        for a, b in zip(counts, counts[1:]):
            print(f"{a:>7} -> {b}: {(peaks[b] - peaks[a]) * 1024 / (b - a):+.0f} B a result")
        return
    print(f"python {sys.version.split()[0]}; result writing of a batch of N instant scripts (median of {args.repeats})"
          + ("; the plan made first" if args.plan_first else ""))
    print(f"{'N':>7} {'batch total s':>14} {'writing (sinks) s':>18} {'per result ms':>14} {'batch CPU s':>12} "
          f"{'results.json MiB':>16} {'fs floor s':>11}")
    with tempfile.TemporaryDirectory(prefix="jaxrun-bench-writing-") as tmp:
        for n in args.scripts:
            rows = [measure(n, Path(tmp), args.plan_first) for _ in range(args.repeats)]
            total = statistics.median(r["total"] for r in rows)
            sinks = statistics.median(r["sinks"] for r in rows)
            cpu = statistics.median(r["cpu"] for r in rows)
            floor = filesystem_floor(n, Path(tmp), 1800)
            print(f"{n:>7} {total:>14.2f} {sinks:>18.2f} {sinks / n * 1000:>14.3f} {cpu:>12.2f} {rows[0]['mb']:>16.1f} "
                  f"{floor:>11.2f}")


if __name__ == "__main__":
    main()
