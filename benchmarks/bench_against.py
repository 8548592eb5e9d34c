"""This checkout against another one (``--against OTHER/src``), interleaved, medians: whether a
change made jaxrun slower where its users wait.

- ``jaxrun run one.py`` to the script's first line (the script stamps ``time.time()`` there);
- a batch of 10 trivial JAX scripts (no compile cache, no history), whole command;
- the sinks' seconds for N instant results (bench_result_writing.measure of each checkout).

Each side runs with its own ``src`` first on PYTHONPATH and its own device-facts cache. Rounds
alternate which side goes first. The machine's noise moves both sides alike; read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"


def _env(src: Path, cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src), "JAXRUN_CACHE_DIR": str(cache)}


def _jaxrun(src: Path, cache: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "jaxrun", "run", *args, "--no-history", "-q"], env=_env(src, cache),
                   check=True, capture_output=True)


def _first_line(src: Path, cache: Path, work: Path) -> float:
    stamp = work / "stamp"
    started = time.time()
    _jaxrun(src, cache, str(work / "one.py"), "--results-dir", str(work / f"first-{cache.name}"))
    return float(stamp.read_text()) - started


def _batch(src: Path, cache: Path, work: Path) -> float:
    started = time.perf_counter()
    _jaxrun(src, cache, str(work / "batch"), "--device", "cpu", "--no-compile-cache",
            "--results-dir", str(work / f"batch-{cache.name}"))
    return time.perf_counter() - started


def _sinks(src: Path, cache: Path, results: int) -> float:
    code = (f"import sys, json, pathlib, tempfile; sys.path.insert(0, {str(src.parent / 'benchmarks')!r}); "
            "import bench_result_writing as b; "
            f"print(json.dumps(b.measure({results}, pathlib.Path(tempfile.mkdtemp()))))")
    out = subprocess.run([sys.executable, "-c", code], env=_env(src, cache), capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["sinks"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="The other checkout's src folder.")
    parser.add_argument("--rounds", type=int, default=9, help="Interleaved rounds (each side once a round).")
    parser.add_argument("--results", type=int, default=2000, help="Instant results for the sinks' figure.")
    args = parser.parse_args()
    sides = {"this": HERE, "other": args.against.resolve()}
    work = Path(tempfile.mkdtemp(prefix="jaxrun-against-"))
    (work / "one.py").write_text(f"import time\nopen({str(work / 'stamp')!r}, 'w').write(repr(time.time()))\n"
                                 "if False:\n    import jax\n")
    (work / "batch").mkdir()
    for i in range(10):
        (work / "batch" / f"t{i}.py").write_text("import jax.numpy as jnp\nprint(float(jnp.ones(3).sum()))\n")
    figures: dict[str, dict[str, list[float]]] = {side: {"first": [], "batch": [], "sinks": []} for side in sides}
    try:
        for round_ in range(args.rounds):
            for side in (list(sides) if round_ % 2 == 0 else list(sides)[::-1]):
                cache = work / f"cache-{side}"
                figures[side]["first"].append(_first_line(sides[side], cache, work))
                figures[side]["batch"].append(_batch(sides[side], cache, work))
                figures[side]["sinks"].append(_sinks(sides[side], cache, args.results))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = (("first", "jaxrun run one.py to its first line", 1e3, "ms"),
            ("batch", "a batch of 10 trivial JAX scripts", 1, "s"),
            ("sinks", f"the sinks of {args.results:,} instant results", 1, "s"))
    print(f"medians of {args.rounds} interleaved rounds; this = {sides['this']}, other = {sides['other']}")
    for key, what, scale, unit in rows:
        this, other = (statistics.median(figures[s][key]) * scale for s in ("this", "other"))
        print(f"{what}: this {this:.3f} {unit}, other {other:.3f} {unit}, ratio this/other {this / other:.3f}")


if __name__ == "__main__":
    main()
