"""Does pairing beat two sequential samples when the machine drifts? (issue 26: ``jaxrun ab``)

A CPU-bound script (pure Python, a fixed amount of work, ~0.15 s; it does not import jax, so each
run is short, but ``if False: import jax`` makes jaxrun's discovery take it) is judged against
itself (A/A: every flag is a false alarm) and against a copy doing 1.10x the work (A/B: 10%
slower, every "slower" a detection), T trials each, while a background load (one CPU burner per
core, all in one process group, killed at the end) switches on and off every few seconds. Two
methods on the same cases:

* ab:      ``python -m jaxrun ab BASE NEW --pairs 10 --warmup-pairs 1 --json --no-config``
           (B N, N B, ...: each pair sees the same load; a ComparisonReport, scripts[0].verdict);
* duet:    the same with ``--duet``: the two runs of a pair at the same time, each pinned to its
           own half of the cores, the halves swapped every pair (judged exactly like ab);
* compare: ``python -m jaxrun run DIR --benchmark-runs 10 --warmup-runs 1 --no-history
           --results-dir R --no-config`` for BASE, then for NEW, then
           ``python -m jaxrun compare R_BASE R_NEW --json`` (two independent samples, taken one
           after the other: the load may be on for one and off for the other).

Prints a table for benchmarks/README.md: per method, A/A false alarms out of T and A/B detections
out of T (and A/B judged faster, the wrong way).

    python benchmarks/bench_ab_drift.py [--trials 20] [--pairs 10] [--period 3] [--load-workers N]
        [--work-seconds 0.15] [--methods ab,duet,compare]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORK = """\
if False:
    import jax  # noqa: F401  (jaxrun's discovery takes files that import jax; running it would not)

total = 0
for i in range({iterations}):
    total += i * i % 7
print(total)
"""

# One burner per worker, in the load's process group: on for PERIOD seconds, off for PERIOD, all
# in step (the phase is read from the clock), so the whole machine is loaded or quiet at once.
LOAD = """\
import os, sys, time
period, workers = float(sys.argv[1]), int(sys.argv[2])
for _ in range(workers - 1):
    if os.fork() == 0:
        break
while True:
    now = time.time()
    if int(now / period) % 2 == 0:
        end = (int(now / period) + 1) * period
        while time.time() < end:
            pass
    else:
        time.sleep((int(now / period) + 1) * period - now)
"""


def calibrate(seconds: float) -> int:
    """Iterations of WORK's loop that take ``seconds`` here, on a quiet machine."""
    iterations = 200_000
    while True:
        start = time.perf_counter()
        total = 0
        for i in range(iterations):
            total += i * i % 7
        took = time.perf_counter() - start
        if took > 0.05:
            return max(1, int(iterations * seconds / took))
        iterations *= 4


def write_case(root: Path, base_iterations: int, new_iterations: int) -> tuple[Path, Path]:
    base, new = root / "base", root / "new"
    for folder, iterations in ((base, base_iterations), (new, new_iterations)):
        folder.mkdir(parents=True)
        (folder / "work.py").write_text(WORK.format(iterations=iterations))
    return base, new


def jaxrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jaxrun", *args], check=False, cwd=cwd,
                          capture_output=True, text=True)


def verdict_of(done: subprocess.CompletedProcess, what: str) -> str:
    """scripts[0].verdict of a ComparisonReport printed as JSON (exit 0, or 1 for a regression)."""
    try:
        report = json.loads(done.stdout)
        return report["scripts"][0]["verdict"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise SystemExit(f"{what} gave no comparison (exit {done.returncode}):\n{done.stdout[-2000:]}\n"
                         f"{done.stderr[-2000:]}") from None


def by_ab(base: Path, new: Path, work: Path, pairs: int, *extra: str) -> str:
    done = jaxrun("ab", str(base), str(new), "--pairs", str(pairs), "--warmup-pairs", "1", "--json", "--no-config",
                  *extra, cwd=work)
    return verdict_of(done, "jaxrun ab")


def by_duet(base: Path, new: Path, work: Path, pairs: int) -> str:
    return by_ab(base, new, work, pairs, "--duet")


def by_compare(base: Path, new: Path, work: Path, pairs: int) -> str:
    results = {}
    for side, folder in (("base", base), ("new", new)):
        results[side] = work / f"results_{side}"
        done = jaxrun("run", str(folder), "--benchmark-runs", str(pairs), "--warmup-runs", "1", "--no-history",
                      "--results-dir", str(results[side]), "--no-config", "-q", cwd=work)
        if done.returncode != 0:
            raise SystemExit(f"jaxrun run {folder} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return verdict_of(jaxrun("compare", str(results["base"]), str(results["new"]), "--json", cwd=work),
                      "jaxrun compare")


METHODS = {"ab": by_ab, "duet": by_duet, "compare": by_compare}


def start_load(period: float, workers: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", LOAD, str(period), str(workers)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_load(load: subprocess.Popen) -> None:
    try:
        os.killpg(load.pid, signal.SIGKILL)  # its own session: the burners it forked, nothing else
    except ProcessLookupError:
        pass
    load.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="Trials of each case (A/A, A/B) per method")
    parser.add_argument("--pairs", type=int, default=10, help="Pairs (ab) or runs per side (compare)")
    parser.add_argument("--period", type=float, default=3.0, help="Seconds the load is on, then off")
    parser.add_argument("--load-workers", type=int, default=os.cpu_count() or 2, help="CPU burners when on")
    parser.add_argument("--work-seconds", type=float, default=0.15, help="The A script's work, quiet")
    parser.add_argument("--slowdown", type=float, default=1.10, help="B's work over A's")
    parser.add_argument("--methods", default="ab,compare", help="Comma-separated: ab, duet, compare")
    args = parser.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method {', '.join(unknown)}: choose from {', '.join(METHODS)}")

    iterations = calibrate(args.work_seconds)
    cases = {"A/A": iterations, "A/B": round(iterations * args.slowdown)}
    counts = {(m, c): {} for m in methods for c in cases}
    seconds = {m: 0.0 for m in methods}
    quiet_load = os.getloadavg()  # the machine's own load (others' work), before the burners start
    load = start_load(args.period, args.load_workers)
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="jaxrun_ab_drift_") as tmp:
            for trial in range(args.trials):
                for case, new_iterations in cases.items():
                    for method in methods:  # interleaved: every method sees the same load pattern
                        work = Path(tmp) / f"t{trial}_{case.replace('/', '')}_{method}"
                        base, new = write_case(work, iterations, new_iterations)
                        begun = time.perf_counter()
                        verdict = METHODS[method](base, new, work, args.pairs)
                        seconds[method] += time.perf_counter() - begun
                        tally = counts[(method, case)]
                        tally[verdict] = tally.get(verdict, 0) + 1
                print(f"trial {trial + 1}/{args.trials} done, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    finally:
        stop_load(load)

    t = args.trials
    print(f"{t} trials per case; A does {iterations:,} iterations (~{args.work_seconds} s quiet), B x{args.slowdown}; "
          f"{args.pairs} pairs / runs per side; load: {args.load_workers} CPU burners, {args.period:g} s on, "
          f"{args.period:g} s off; {os.cpu_count()} CPUs; load average before the burners "
          f"{', '.join(f'{x:.2f}' for x in quiet_load)}, at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| method | A/A false alarms | A/B detected slower | A/B judged faster | A/B other verdicts | s per trial |")
    print("|---|---|---|---|---|---|")
    for method in methods:
        aa, ab = counts[(method, "A/A")], counts[(method, "A/B")]
        alarms = aa.get("slower", 0) + aa.get("faster", 0)
        others = ", ".join(f"{v}: {k}" for v, k in sorted(ab.items()) if v not in ("slower", "faster")) or "-"
        print(f"| {method} | {alarms}/{t} | {ab.get('slower', 0)}/{t} | {ab.get('faster', 0)}/{t} | {others} | "
              f"{seconds[method] / (2 * t):.1f} |")


if __name__ == "__main__":
    main()
