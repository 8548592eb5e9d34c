"""Backend-compile seconds with a cold and a warm persistent compilation cache.

For each script, each pair is two runs through ``jaxrun.execute_jax_script`` sharing one new,
empty cache folder (``compile_cache=<tmp>``): the first run compiles and stores, the second loads
what the first stored. Figures are jaxrun's own, from JAX's monitoring events:
``backend s`` = sum of ``compiles[*].compile_time + cache_load_time`` (XLA backend compilation,
or loading the executable from the cache), ``jit s`` = ``jit_compile_time`` (trace + lower + backend), and the
persistent-cache hits. Medians over the pairs; the ratio is cold / warm backend seconds.

Scripts:
  * ``many_functions``: 40 distinct small jitted functions (3 matmul+sin layers on 32x32 each),
    ~2-3 s of backend compile for milliseconds of work (the script of tests/discover/test_compile_cache.py);
  * ``one_deep_function``: one jitted function unrolled into 45 matmul+sin layers on 64x64;
  * ``examples/workloads/surrogate_training.py`` (optax training, jit vs no-jit: many programs).
Loading an executable from the cache is not free: for one huge function it costs about a tenth
of compiling it when XLA can compile on both cores (one core: ~1/18), so that script sits near the
10x line on an idle 2-core machine, while programs made of many functions are well above it.

    python benchmarks/bench_compile_cache.py [--pairs 3]

Goal (issue 5): the warm run of the compile-heavy script (many_functions) reports >= 10x fewer backend-compile
seconds. Note for benchmarking: a cache shared across runs makes every run after the first a
warm one; ``--cold-cache`` / ``cold_cache=True`` gives each benchmark run an empty cache.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import jaxrun

REPO_ROOT = Path(__file__).resolve().parents[1]
GOAL = 10.0
MANY_FUNCTIONS = """\
import jax
import jax.numpy as jnp
import jaxrun

FUNCTIONS, LAYERS = 40, 3


def make(k):
    def f(x):
        for i in range(LAYERS):
            x = jnp.sin(x @ x.T * (1.0 / (k + i + 1)) + x)
        return x.sum()
    return jax.jit(f)


jaxrun.record(value=sum(float(make(k)(jnp.ones((32, 32)) * 0.01)) for k in range(FUNCTIONS)))
"""
ONE_DEEP_FUNCTION = """\
import jax
import jax.numpy as jnp
import jaxrun

LAYERS = 45


@jax.jit
def deep(x):
    for i in range(LAYERS):
        x = jnp.sin(x @ x.T * (1.0 / (i + 1)) + x)
    return x.sum()


jaxrun.record(value=float(deep(jnp.ones((64, 64)) * 0.01)))
"""


def figures(result) -> dict[str, float]:
    if not result.success:
        sys.exit(f"{result.script_name} failed: {result.error_class}: {result.error_message}")
    return {
        # Compiled (cold) or loaded from the cache (warm): the seconds to get the executables.
        "backend": sum(s.compile_time + s.cache_load_time for s in result.compiles.values()),
        "jit": result.jit_compile_time or 0.0,
        "hits": float(result.cache_hits or 0),
        "saved": result.compile_time_saved or 0.0,
        "wall": result.execution_time or 0.0,
    }


def measure(script: Path, pairs: int, root: Path) -> tuple[list[dict], list[dict]]:
    cold, warm = [], []
    for pair in range(pairs):
        cache = root / f"cache-{script.stem}-{pair}"
        for bucket, label in ((cold, "cold"), (warm, "warm")):
            result = jaxrun.execute_jax_script(
                script, "cpu", results_dir=root / f"r-{label}", compile_cache=cache, timeout=600
            )
            bucket.append(figures(result))
    return cold, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    pairs = parser.parse_args().pairs
    jaxrun.get_jax_device_info()
    print(f"jaxrun {jaxrun.__version__}, python {platform.python_version()}, "
          f"{len(os.sched_getaffinity(0))} usable cores, {pairs} cold/warm pairs per script, medians")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = (f"{'script':22} {'run':5} {'backend s':>10} {'jit s':>8} {'hits':>5} {'saved s':>8} "
              f"{'wall s':>7}   per pair backend s")
    rows = []
    with tempfile.TemporaryDirectory(prefix="jaxrun-cache-bench-") as tmp:
        root = Path(tmp)
        many, deep = root / "many_functions.py", root / "one_deep_function.py"
        many.write_text(MANY_FUNCTIONS)
        deep.write_text(ONE_DEEP_FUNCTION)
        surrogate = REPO_ROOT / "examples" / "workloads" / "surrogate_training.py"
        for script in (many, deep, surrogate):
            cold, warm = measure(script, pairs, root)
            rows.append((script.stem, cold, warm))

    print(header)
    print("-" * len(header))
    verdicts = []
    for name, cold, warm in rows:
        med = {}
        for label, runs in (("cold", cold), ("warm", warm)):
            m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            med[label] = m
            per_pair = " ".join(f"{r['backend']:.3f}" for r in runs)
            print(f"{name:22} {label:5} {m['backend']:10.3f} {m['jit']:8.3f} {m['hits']:5.0f} "
                  f"{m['saved']:8.2f} {m['wall']:7.2f}   {per_pair}")
        ratio = med["cold"]["backend"] / med["warm"]["backend"] if med["warm"]["backend"] else float("inf")
        ratios = [c["backend"] / w["backend"] for c, w in zip(cold, warm) if w["backend"]]
        print(f"{name:22} ratio cold/warm backend: {ratio:.1f}x (per pair: "
              f"{', '.join(f'{r:.1f}x' for r in ratios)})")
        verdicts.append((name, ratio))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, ratio in verdicts:
        print(f"{name}: warm run >= {GOAL:.0f}x fewer backend-compile seconds: "
              f"{'PASS' if ratio >= GOAL else 'FAIL'} ({ratio:.1f}x)"
              + ("  <- the issue's goal" if name == "many_functions" else ""))


if __name__ == "__main__":
    main()
