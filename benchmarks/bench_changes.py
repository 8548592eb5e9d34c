"""How well do jaxrun's change points (judge/change_points.py) find real changes, and how seldom do
they cry wolf? On labelled series generated here (fixed seeds: the same numbers every run):

- steps of 2-50 % (up and down) at Gaussian noise of 0.5-5 % of the level, one step a series of
  200 points, at a position drawn away from the ends; and series of 30 (short) and 1,000 (long)
  points, and series with three steps;
- series with no change: plain noise, noise with single-point spikes (a run 1.5x slower), a
  bimodal level (each point one of two levels 3 % apart, at random), and a slow drift (5 % over
  the series: not a step, so what is found is only reported).

A change point found within ``TOLERANCE`` points of a step is a hit (each step hit once); any other
is a false alarm. Reported: precision, recall and F1 by step size and noise; false alarms per
1,000 points of the series that have no change; the time of one 1,000-point series (median of 21).

Also: the candidates the lower bar finds in series with no change (per 1,000 points), and how
often a step of the size ``smallest_step`` names is found (its promise: about 4 times in 5).

``--real``: real histories instead, made by running jaxrun itself: a git repository of
``COMMITS`` commits of one script (a jitted loop), one commit making the loop ``SLOWER`` longer,
each commit benchmarked (`jaxrun run --benchmark-runs R --history DB`) into one history, then
`jaxrun history --changes --confirm` (each change point and candidate re-run as a duet of its two
commits) and `jaxrun report --history`; and the same repository with no slow commit. Run::

    PYTHONPATH=src python benchmarks/bench_changes.py [--series 40]
    PYTHONPATH=src python benchmarks/bench_changes.py --real [--runs 3,5,10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from jaxrun.judge.change_points import CANDIDATE_ALPHA, change_points, smallest_step

STEPS = (0.02, 0.05, 0.10, 0.20, 0.50)
NOISES = (0.005, 0.01, 0.02, 0.05)
TOLERANCE = 2
LEVEL = 100.0


def _steps(rng: np.random.Generator, length: int, count: int, margin: int = 10) -> list[int]:
    """``count`` step positions in ``length`` points, ``margin`` apart and from the ends."""
    while True:
        where = sorted(int(i) for i in rng.integers(margin, length - margin, size=count))
        if all(b - a >= margin for a, b in zip(where, where[1:])):
            return where


def stepped(rng: np.random.Generator, length: int, step: float, noise: float, count: int = 1) -> tuple[np.ndarray, list[int]]:
    """A series of ``length`` points whose level moves by ``step`` (up or down, at random) at
    ``count`` places, with Gaussian noise of ``noise`` of the level; and where it moves."""
    where = _steps(rng, length, count)
    level = np.full(length, LEVEL)
    for at in where:
        level[at:] *= 1.0 + step * rng.choice((-1.0, 1.0))
    return level * (1.0 + noise * rng.standard_normal(length)), where


def unchanged(rng: np.random.Generator, kind: str, length: int = 200, noise: float = 0.01) -> np.ndarray:
    base = LEVEL * (1.0 + noise * rng.standard_normal(length))
    if kind == "spikes":
        base[rng.choice(length, size=max(1, length // 50), replace=False)] *= 1.5
    elif kind == "bimodal":
        base *= np.where(rng.random(length) < 0.5, 1.0, 1.03)
    elif kind == "drift":
        base *= np.linspace(1.0, 1.05, length)
    return base


def scored(found: list[int], truth: list[int]) -> tuple[int, int, int]:
    """(hits, false alarms, misses) of the change points ``found`` against the steps ``truth``."""
    left = list(truth)
    hits = 0
    for index in found:
        near = [t for t in left if abs(t - index) <= TOLERANCE]
        if near:
            left.remove(min(near, key=lambda t: abs(t - index)))
            hits += 1
    return hits, len(found) - hits, len(left)


def f1(hits: int, alarms: int, misses: int) -> tuple[float, float, float]:
    precision = hits / (hits + alarms) if hits + alarms else 1.0
    recall = hits / (hits + misses) if hits + misses else 1.0
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)


COMMITS = 12
SLOW_COMMIT = 7  # (counting from 0) the commit that makes the loop slower
SLOWER = 0.15
LOOP = """import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.tanh(x @ x.T) * 0.5


x = jnp.ones((128, 128))
for _ in range({steps}):
    x = step(x)
x.block_until_ready()
print(float(x[0, 0]))
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@example.com",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def real_history(folder: Path, slow_commit: int | None, runs: int) -> tuple[list[str], Path]:
    """A repository of COMMITS commits, each benchmarked into one history; its commits, the history."""
    repo, db = folder / "repo", folder / "history.sqlite"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    commits = []
    for i in range(COMMITS):
        steps = round(400 * (1 + SLOWER)) if slow_commit is not None and i >= slow_commit else 400
        (repo / "loop.py").write_text(LOOP.format(steps=steps) + f"# commit {i}\n")
        _git(repo, "add", "loop.py")
        _git(repo, "commit", "-q", "-m", f"commit {i}")
        commits.append(_git(repo, "rev-parse", "HEAD"))
        done = subprocess.run([sys.executable, "-m", "jaxrun", "run", str(repo / "loop.py"), "--benchmark-runs",
                               str(runs), "--warmup-runs", "1", "--history", str(db), "--no-config", "-q",
                               "--results-dir", str(folder / f"r{i}")], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"jaxrun failed at commit {i}:\n{done.stdout}{done.stderr}")
    return commits, db


def _jaxrun(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jaxrun", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def real(runs_each: list[int]) -> None:
    """The issue's end to end, as a user runs it: each repository benchmarked commit by commit,
    then `jaxrun history --changes --confirm --json` and `jaxrun report --history`."""
    import json

    print(f"real histories: {COMMITS} commits of a jitted loop, each `jaxrun run --benchmark-runs R` (+1 warm-up) "
          "into one history; then `jaxrun history --changes --confirm` (metric run_time, one point a commit: its "
          "runs' median) and `jaxrun report --history`\n")
    print("| repository | R | noise | smallest step found | change points (candidates) | confirmed | refuted | undecided "
          "| confirmed at | history's change | pairs' ratio (95% CI), pairs | page | time: runs / confirm |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for runs in runs_each:
        for label, slow in ((f"commit {SLOW_COMMIT} makes the loop {SLOWER:.0%} longer", SLOW_COMMIT),
                            ("no slow commit", None)):
            with tempfile.TemporaryDirectory(prefix="bench-changes-") as tmp:
                started = time.perf_counter()
                commits, db = real_history(Path(tmp), slow, runs)
                took = time.perf_counter() - started
                started = time.perf_counter()
                done = _jaxrun("history", "--changes", "--confirm", "--history", db, "--json",
                               "--confirm-dir", Path(tmp) / "confirm", cwd=tmp)
                confirming = time.perf_counter() - started
                if done.returncode not in (0, 1):
                    raise SystemExit(f"jaxrun history --changes --confirm failed:\n{done.stdout}{done.stderr}")
                found = json.loads(done.stdout)
                page = Path(tmp) / "page.html"
                drawn = _jaxrun("report", "--history", db, "-o", page, cwd=tmp)
                text = page.read_text() if drawn.returncode == 0 else ""
            (series,) = found["series"]
            changes = found["changes"]
            verdicts = [c["check"]["verdict"] if c.get("check") else "unchecked" for c in changes]
            confirmed = [c for c, v in zip(changes, verdicts) if v == "confirmed"]
            at = "; ".join(f"commit {commits.index(c['first_after']['git_commit'])}" for c in confirmed) or "-"
            sizes = "; ".join(f"{c['change']:+.1%} ({c['change_low']:+.1%} to {c['change_high']:+.1%})"
                              for c in confirmed) or "-"
            pairs = "; ".join(f"{c['check']['ratio']:.3f} ({c['check']['ratio_ci_low']:.3f}-"
                              f"{c['check']['ratio_ci_high']:.3f}), {c['check']['pairs']}" for c in confirmed) or "-"
            shown = all(c["first_after"]["git_commit"][:10] in text for c in changes) and "confirmed" in text \
                if confirmed else drawn.returncode == 0
            print(f"| {label} | {runs} | {series['noise']:.1%} | {series['smallest_step']:.1%} | "
                  f"{series['changes']} ({series['candidates']}) | {verdicts.count('confirmed')} | "
                  f"{verdicts.count('refuted')} | {verdicts.count('undecided')} | {at} | {sizes} | {pairs} | "
                  f"{'shows it' if shown else 'MISSING'} | {took:.0f} s / {confirming:.0f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=40, help="series of each kind (more: tighter figures)")
    parser.add_argument("--real", action="store_true", help="real histories of jaxrun runs over a git repository")
    parser.add_argument("--runs", default="5", help="with --real: benchmark runs a commit (a list: 3,5,10)")
    args = parser.parse_args()
    if args.real:
        real([int(r) for r in args.runs.split(",")])
        return
    rng = np.random.default_rng(20261129)

    print(f"steps: {args.series} series of 200 points each; a hit within {TOLERANCE} points\n")
    print("| step | noise | precision | recall | F1 |\n|---|---|---|---|---|")
    for step in STEPS:
        for noise in NOISES:
            totals = [0, 0, 0]
            for _ in range(args.series):
                values, truth = stepped(rng, 200, step, noise)
                for i, n in enumerate(scored([c.index for c in change_points(values)], truth)):
                    totals[i] += n
            p, r, f = f1(*totals)
            print(f"| {step:.0%} | {noise:.1%} | {p:.2f} | {r:.2f} | {f:.2f} |")

    print("\n| series | F1 (steps of 5-50 %, noise 0.5-2 %) |\n|---|---|")
    for name, length, count in (("short: 30 points, one step", 30, 1), ("long: 1,000 points, one step", 1000, 1),
                                ("200 points, three steps", 200, 3)):
        totals = [0, 0, 0]
        for step in STEPS[1:]:
            for noise in NOISES[:3]:
                for _ in range(max(1, args.series // 4)):
                    values, truth = stepped(rng, length, step, noise, count)
                    for i, n in enumerate(scored([c.index for c in change_points(values)], truth)):
                        totals[i] += n
        print(f"| {name} | {f1(*totals)[2]:.2f} |")

    print("\n| no change | series | points | change points found | per 1,000 points |\n|---|---|---|---|---|")
    for kind in ("noise", "spikes", "bimodal", "drift"):
        found = points = 0
        for noise in NOISES:
            for _ in range(args.series):
                values = unchanged(rng, kind, noise=noise)
                found += len(change_points(values))
                points += len(values)
        label = kind + (" (not a step: reported only)" if kind == "drift" else "")
        print(f"| {label} | {len(NOISES) * args.series} | {points:,} | {found} | {found / points * 1000:.2f} |")

    print("\n| candidates (p < 0.05, not 0.001) in series with no change | points | found | per 1,000 points |"
          "\n|---|---|---|---|")
    for length in (12, 30, 200):
        found = points = 0
        for noise in NOISES:
            for _ in range(args.series * (200 // length)):
                values = unchanged(rng, "noise", length, noise=noise)
                found += len(change_points(values, alpha=CANDIDATE_ALPHA)) - len(change_points(values))
                points += len(values)
        print(f"| {length} points a series | {points:,} | {found} | {found / points * 1000:.1f} |")

    print("\n| the smallest step found (a step of that size in the middle) | noise | step | found |\n|---|---|---|---|")
    for length in (12, 30, 80):
        for noise in (0.005, 0.02):
            size = smallest_step(length, noise)
            hits = 0
            for _ in range(args.series * 5):
                values = rng.normal(LEVEL, LEVEL * noise, length)
                values[length // 2:] *= 1 + size
                hits += any(abs(c.index - length // 2) <= TOLERANCE for c in change_points(values))
            print(f"| {length} points | {noise:.1%} | {size:.1%} | {hits / (args.series * 5):.2f} |")

    series = [stepped(rng, 1000, 0.05, 0.01)[0] for _ in range(21)]
    change_points(series[0])  # scipy imported once, outside the timing
    took = []
    for values in series:
        started = time.perf_counter()
        change_points(values)
        took.append(time.perf_counter() - started)
    same = all(change_points(v) == change_points(v) for v in series[:5])
    print(f"\none 1,000-point series: {statistics.median(took) * 1000:.1f} ms (median of {len(series)}); "
          f"the same series, the same change points: {same}")


if __name__ == "__main__":
    main()
