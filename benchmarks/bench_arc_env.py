"""Throughput of the ARC-like grid environment (examples/workloads/arc_grid_env.py), in env-steps/s.

For each action kind (bbox, point, mask) and batch size, one jitted call runs ``--steps`` steps of
``B`` envs under the random policy (``vmap`` over envs of a ``lax.scan`` over time, auto-reset
on), timed with ``jaxrun.bench.measure``: compiled first, then >= ``--repeats`` samples of
blocked calls. env-steps/s = B x steps / seconds per call; the table gives the median over the
samples and the slowest / fastest sample. The target is >= 1,000,000 env-steps/s at batch 1024
with bbox actions (the exit status is 1 when it is missed).

    python benchmarks/bench_arc_env.py [--steps 128] [--repeats 7] [--kinds bbox,point,mask]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import os
import platform
import sys
from pathlib import Path

ENV_PATH = Path(__file__).resolve().parents[1] / "examples" / "workloads" / "arc_grid_env.py"
SIZES = (1, 16, 64, 256, 1024, 4096)
TARGET_BATCH, TARGET_RATE = 1024, 1_000_000


def load_env():
    spec = importlib.util.spec_from_file_location("arc_grid_env", ENV_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=128, help="steps per rollout call")
    parser.add_argument("--repeats", type=int, default=7, help="minimum timed samples per row")
    parser.add_argument("--min-time", type=float, default=0.3, help="minimum seconds of samples per row")
    parser.add_argument("--kinds", default="bbox,point,mask")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = parser.parse_args()

    import jax

    from jaxrun import bench

    env = load_env()
    kinds = [k for k in args.kinds.split(",") if k]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for kind in kinds:
        if kind not in env.ACTION_KINDS:
            parser.error(f"unknown action kind {kind!r}; valid: {', '.join(env.ACTION_KINDS)}")

    print(f"ARC-like env throughput — {datetime.date.today()}, {cpu_model()}, "
          f"{os.cpu_count()} CPUs, jax {jax.__version__} on {jax.devices()[0].platform}")
    print(f"{args.steps} steps per call, random policy, auto-reset (max_steps {env.MAX_STEPS}); "
          f">= {args.repeats} samples and {args.min_time} s per row")
    print(f"{'actions':>7} {'batch':>6} {'median env-steps/s':>19} {'min':>12} {'max':>12} "
          f"{'s/call':>9} {'compile s':>9}")
    results: dict[tuple[str, int], float] = {}
    for kind in kinds:
        run = functools.partial(env.rollout, num_steps=args.steps, kind=kind)
        for size in sizes:
            states, keys = env.make_batch(size)
            m = bench.measure(run, states, keys, min_time=args.min_time,
                              min_samples=args.repeats, peaks=False, name=f"{kind}[{size}]")
            steps = size * args.steps
            rate = steps / m.steady.median
            results[(kind, size)] = rate
            print(f"{kind:>7} {size:>6} {rate:>19,.0f} {steps / m.steady.max:>12,.0f} "
                  f"{steps / m.steady.min:>12,.0f} {m.steady.median:>9.5f} {m.compile_time:>9.2f}",
                  flush=True)

    target = results.get(("bbox", TARGET_BATCH))
    if target is None:
        print(f"target not measured (needs bbox at batch {TARGET_BATCH})")
        return 0
    met = target >= TARGET_RATE
    print(f"bbox at batch {TARGET_BATCH}: {target:,.0f} env-steps/s — target >= {TARGET_RATE:,} "
          f"{'met' if met else 'NOT met'} ({target / TARGET_RATE:.2f}x)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
