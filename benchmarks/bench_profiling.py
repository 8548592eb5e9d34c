"""What ``--profile`` costs: wall time, body time and peak memory of the same scripts with and
without profiling, interleaved, and the size of what the profiler writes.

    python benchmarks/bench_profiling.py [--rounds 5]

Both sides run with the persistent compilation cache off, so both compile cold.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import jaxrun

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = {
    "pomdp_solver": REPO / "examples" / "gnn_rendered_simulators" / "jax" / "pomdp_solver.py",
    "surrogate_training": REPO / "examples" / "workloads" / "surrogate_training.py",
    "shapes_40": None,  # written below: one function recompiled for 40 shapes
}
SHAPES = """\
import jax, jax.numpy as jnp

@jax.jit
def f(x):
    return jnp.sin(x) * 2.0 + x

for n in range(1, 41):
    f(jnp.ones(n)).block_until_ready()
"""


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="jaxrun-bench-profiling-") as tmp:
        root = Path(tmp)
        (root / "shapes_40.py").write_text(SHAPES)
        scripts = {name: path or root / f"{name}.py" for name, path in SCRIPTS.items()}
        seen: dict[tuple[str, bool], list] = {}
        sizes: dict[str, int] = {}
        for i in range(rounds):
            for name, script in scripts.items():
                for profile in (False, True):
                    out = root / f"r-{name}-{profile}-{i}"
                    result = jaxrun.execute_jax_script(script, "cpu", results_dir=out, compile_cache=False,
                                                       enable_profiling=profile, timeout=600)
                    assert result.success, (name, result.error_message)
                    seen.setdefault((name, profile), []).append(result)
                    if profile:
                        sizes[name] = folder_size(out / "jax_profiling")
    print(f"{rounds} interleaved rounds per script, cpu, compile cache off, medians")
    print(f"{'script':20} {'wall s':>8} {'prof s':>8} {'ratio':>6} {'body s':>8} {'prof s':>8} "
          f"{'mem MiB':>7} {'prof MiB':>8} {'written MB':>11}")
    for name in scripts:
        plain, prof = seen[(name, False)], seen[(name, True)]

        def med(rs: list, field: str) -> float:
            return statistics.median(getattr(r, field) for r in rs)

        print(f"{name:20} {med(plain, 'execution_time'):8.3f} {med(prof, 'execution_time'):8.3f} "
              f"{med(prof, 'execution_time') / med(plain, 'execution_time'):6.3f} {med(plain, 'body_time'):8.3f} "
              f"{med(prof, 'body_time'):8.3f} {med(plain, 'memory_peak'):7.0f} {med(prof, 'memory_peak'):8.0f} "
              f"{sizes[name] / 1e6:11.2f}")


if __name__ == "__main__":
    main()
