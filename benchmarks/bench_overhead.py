"""What jaxrun adds to running a script, and how exactly it measures the script body.

Runs, interleaved so that machine noise hits both sides alike:
  * ``python script.py`` directly (subprocess, wall time measured here), and
  * ``jaxrun.execute_jax_script(script)`` (its ``execution_time``, and wall time of the call),
for an empty script and a script that imports jax and jit-compiles one function. Then checks the
precision of ``body_time`` on a script whose body sleeps 1.5 s.

    python benchmarks/bench_overhead.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jaxrun

SCRIPTS = {
    "empty": "pass\n",
    "jax_jit": "import jax, jax.numpy as jnp\nprint(jax.jit(lambda x: x * 2)(jnp.ones(3)))\n",
}
SLEEP = "import time\ntime.sleep(1.5)\n"


def plain_run(script: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(script)], check=True, capture_output=True, cwd=script.parent)
    return time.perf_counter() - started


def jaxrun_run(script: Path, results: Path) -> tuple[float, float]:
    started = time.perf_counter()
    # No persistent compile cache: plain `python` compiles cold, so jaxrun must too.
    result = jaxrun.execute_jax_script(script, "cpu", results_dir=results, compile_cache=False)
    call = time.perf_counter() - started
    assert result.success, result.error_message
    return call, float(result.execution_time)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    jaxrun.get_jax_device_info()  # the device probe is cached; keep it out of the figures
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"python {sys.version.split()[0]}, {runs} interleaved runs each, medians")
        print(f"{'script':10} {'plain s':>9} {'jaxrun call s':>14} {'jaxrun exec s':>14} {'overhead s':>11} {'ratio':>6}")
        for name, source in SCRIPTS.items():
            script = root / f"{name}.py"
            script.write_text(source)
            plain, call, execution = [], [], []
            for _ in range(runs):
                plain.append(plain_run(script))
                c, e = jaxrun_run(script, root / "res")
                call.append(c)
                execution.append(e)
            p, c, e = statistics.median(plain), statistics.median(call), statistics.median(execution)
            print(f"{name:10} {p:9.3f} {c:14.3f} {e:14.3f} {c - p:11.3f} {c / p:6.2f}")
        script = root / "sleep.py"
        script.write_text(SLEEP)
        bodies = [jaxrun.execute_jax_script(script, "cpu", results_dir=root / "res").body_time for _ in range(runs)]
        errors = [abs(b - 1.5) / 1.5 for b in bodies]
        print(f"body_time of time.sleep(1.5): median {statistics.median(bodies):.4f} s, "
              f"max relative error {max(errors) * 100:.3f}% over {runs} runs")


if __name__ == "__main__":
    main()
