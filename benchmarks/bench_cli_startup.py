"""Start-up time of ``jaxrun --help`` (budget: <= 150 ms), optionally against another checkout.

    python benchmarks/bench_cli_startup.py [--runs 21] [--against OTHER_SRC_DIR]

Each run is a new ``python -m jaxrun --help`` process; with ``--against`` the two source trees
run interleaved (A, B, A, B, ...) so machine noise hits both alike. Prints the median and the
interquartile range of each, and their ratio of medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parents[1] / "src"


def once(src: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "jaxrun", "--help"], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def summary(label: str, samples: list[float]) -> float:
    q = statistics.quantiles(samples, n=4)
    median = statistics.median(samples)
    print(f"{label}: median {median * 1e3:.0f} ms (IQR {q[0] * 1e3:.0f}-{q[2] * 1e3:.0f} ms, n={len(samples)})")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--against", type=Path, help="another checkout's src/ folder")
    args = parser.parse_args()
    trees = [("this checkout", HERE_SRC)] + ([("other", args.against)] if args.against else [])
    samples: dict[str, list[float]] = {label: [] for label, _ in trees}
    for label, src in trees:  # warm the file cache and .pyc files first
        once(src)
    for _ in range(args.runs):
        for label, src in trees:
            samples[label].append(once(src))
    medians = {label: summary(label, values) for label, values in samples.items()}
    if args.against:
        print(f"ratio this/other: {medians['this checkout'] / medians['other']:.3f}")


if __name__ == "__main__":
    main()
