"""How fast does ``find_jax_scripts`` walk a large tree?

Builds a synthetic project in a temporary folder — 20,000 ``.py`` files in nested folders, ~5 %
importing JAX, some large non-JAX modules, files that only mention jax in a comment, a venv and a
``__pycache__`` that must be skipped — then times ``find_jax_scripts`` (median of 5 warm runs,
``time.perf_counter``) and reports files/s. Run::

    PYTHONPATH=src python benchmarks/bench_discovery.py [--files N] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jaxrun.discover.scripts import find_jax_scripts

JAX_HEADERS = [
    "import jax\nimport jax.numpy as jnp\n",
    "from jax import numpy as jnp, random\n",
    "import optax\nimport jax\n",
    "from flax import linen as nn\n",
    "import equinox as eqx\n",
    "def main():\n    import jax\n    return jax.devices()\n",
]
PLAIN_BODY = "import os\nimport math\n\n\ndef f{i}(x):\n    return math.sqrt(x) + {i}\n"
MENTION_BODY = "# a jax-free helper: we could use jax here one day\nVALUE = {i}\n"


def build_tree(root: Path, n_files: int, seed: int = 0) -> tuple[int, int]:
    """Write the synthetic tree; return (number of .py files written, expected JAX scripts)."""
    rng = random.Random(seed)
    large = "\n".join(f"def fn_{k}(a, b):\n    return a * {k} + b  # numeric helper\n"
                      for k in range(4000))  # ~190 kB of plain Python
    expected = 0
    for i in range(n_files):
        depth = rng.randint(0, 4)
        folder = root.joinpath(*(f"pkg{rng.randint(0, 9)}" for _ in range(depth)))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"mod_{i}.py"
        roll = rng.random()
        if roll < 0.05:
            text = rng.choice(JAX_HEADERS) + PLAIN_BODY.format(i=i)
            expected += 1
        elif roll < 0.07:
            text = MENTION_BODY.format(i=i)
        elif roll < 0.075:
            text = large
        else:
            text = PLAIN_BODY.format(i=i) * rng.randint(1, 20)
        path.write_text(text)
    # folders that must be skipped
    for skipped in ("venv/lib/python3.11/site-packages/jaxlike", "pkg1/__pycache__", ".git/x"):
        folder = root / skipped
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(50):
            (folder / f"skip_{k}.py").write_text("import jax\n")
    (root / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return n_files, expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="jaxrun_bench_discovery_") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        n_files, expected = build_tree(root, args.files)
        build_s = time.perf_counter() - t0
        total_bytes = sum(p.stat().st_size for p in root.rglob("*.py"))

        t0 = time.perf_counter()
        found = find_jax_scripts(root)  # first (page-cache warming) run, reported separately
        first_s = time.perf_counter() - t0
        assert len(found) == expected, (len(found), expected)

        timings = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            result = find_jax_scripts(root)
            timings.append(time.perf_counter() - t0)
            assert result == found
        median = statistics.median(timings)

        print(f"machine     : {platform.processor() or platform.machine()}, "
              f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {sys.platform}")
        print(f"tree        : {n_files} .py files ({total_bytes / 1e6:.1f} MB) + 150 in skipped "
              f"folders, built in {build_s:.1f} s")
        print(f"found       : {len(found)} JAX scripts (expected {expected})")
        print(f"first run   : {first_s * 1e3:.1f} ms")
        print(f"median of {args.repeats} : {median * 1e3:.1f} ms "
              f"(min {min(timings) * 1e3:.1f}, max {max(timings) * 1e3:.1f})")
        print(f"throughput  : {n_files / median:,.0f} files/s, "
              f"{total_bytes / median / 1e6:,.0f} MB/s")
        print(f"jax imported: {'jax' in sys.modules}")


if __name__ == "__main__":
    main()
