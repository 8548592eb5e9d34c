"""What naming programs and explaining recompiles cost a script that recompiles a lot.

One function jitted and called with N shapes (N recompiles), in a fresh process per measurement,
three ways interleaved: plain JAX, with jaxrun's compile-event listener (program names), and with
the listener plus JAX's cache-miss explanations (what ``jaxrun run`` does, capped at 100). Prints
the median wall time of the N calls and of their trace time.

    python benchmarks/bench_recompile_explain.py [--shapes 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, sys, time
import jax, jax.numpy as jnp
mode, shapes = sys.argv[1], int(sys.argv[2])
trace = [0.0]
if mode != "plain":
    from jaxrun.probe import programs
    programs.subscribe(lambda e: trace.__setitem__(0, trace[0] + (e.seconds if e.phase == "trace" else 0.0)))
    if mode == "explain":
        programs.explain_on()
f = jax.jit(lambda x: jnp.sin(x) * 2 + x)
xs = [jnp.ones(n) for n in range(1, shapes + 1)]
start = time.perf_counter()
for x in xs:
    f(x).block_until_ready()
print(json.dumps({"wall": time.perf_counter() - start, "trace": trace[0] if mode != "plain" else None}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    modes = ("plain", "listen", "explain")
    seen: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(args.rounds):
        for mode in modes:
            out = subprocess.run([sys.executable, "-c", CHILD, mode, str(args.shapes)], capture_output=True,
                                 text=True, check=True).stdout
            seen[mode].append(json.loads(out.strip().splitlines()[-1]))
    plain = statistics.median(r["wall"] for r in seen["plain"])
    print(f"{args.shapes} recompiles of one function, {args.rounds} interleaved rounds, medians")
    for mode in modes:
        wall = statistics.median(r["wall"] for r in seen[mode])
        traces = [r["trace"] for r in seen[mode] if r["trace"] is not None]
        trace = f"{statistics.median(traces):.3f} s" if traces else "-"
        print(f"{mode:8} wall {wall:7.3f} s  (x{wall / plain:.3f} of plain)  trace time {trace}")


if __name__ == "__main__":
    main()
