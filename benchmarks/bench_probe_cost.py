"""Where the probe's milliseconds go inside the script's own process (issue 22: the import hook,
the monitoring listeners, the cache-miss explanations, the drain).

Two readings of one trivial JAX script (the one benchmarks/run.py times):
  * side by side, interleaved: ``python script.py`` against the probe running it as jaxrun does
    (``python -m jaxrun.probe ...``, the command run/environment.py builds), whole process wall;
  * the probe under cProfile: the Python time spent in each of jaxrun's probe modules (their own
    lines, ``tottime``, summed per module) and in the probe's entry points with what they call
    (``cumtime``). cProfile slows Python code down, so these are upper bounds, read as shares.

    python benchmarks/bench_probe_cost.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from jaxrun.options import RunOptions  # noqa: E402
from jaxrun.run.environment import probe_command  # noqa: E402

TRIVIAL = "import jax.numpy as jnp\nprint(float(jnp.ones(8).sum()))\n"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(HERE.parent / "src"), os.environ.get("PYTHONPATH")) if p)}
# The probe's entry points whose cumulative time is shown (module suffix, function name).
ENTRY_POINTS = [("probe/__main__.py", "main"), ("probe/drain.py", "drain"), ("probe/jax_hooks.py", "attach_listeners"),
                ("probe/jax_hooks.py", "watch_jax_import"), ("probe/programs.py", "_install"),
                ("probe/programs.py", "explain")]
# (The import hook's cumulative time holds the script's own imports: its own cost is its tottime.)


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jaxrun-probe-cost-") as name:
        tmp = Path(name)
        script = tmp / "trivial.py"
        script.write_text(TRIVIAL)
        events = tmp / "events.jsonl"
        command = probe_command(script, events, RunOptions.build("api", compile_cache=False))
        env = {**ENV, "JAXRUN_EVENTS_FILE": str(events), "JAX_PLATFORMS": "cpu"}
        bare, probed = [], []
        for _ in range(args.runs):
            bare.append(timed([sys.executable, str(script)], env))
            events.unlink(missing_ok=True)
            probed.append(timed(command, env))
        b, p = statistics.median(bare), statistics.median(probed)
        print(f"whole process, median of {args.runs}: python {b * 1000:.0f} ms, probe {p * 1000:.0f} ms "
              f"(+{(p - b) * 1000:.0f} ms)")

        profile = tmp / "probe.prof"
        events.unlink(missing_ok=True)
        subprocess.run([command[0], "-m", "cProfile", "-o", str(profile), *command[1:]], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        stats = pstats.Stats(str(profile))
        own: dict[str, float] = defaultdict(float)
        cumulative: dict[tuple[str, str], float] = {}
        for (filename, _line, function), (_cc, _nc, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            if f"{os.sep}jaxrun{os.sep}" not in filename:
                continue
            module = filename.split(f"{os.sep}jaxrun{os.sep}", 1)[1]
            own[module] += tottime
            for suffix, name_ in ENTRY_POINTS:
                if module == suffix and function == name_:
                    cumulative[(suffix, name_)] = max(cumulative.get((suffix, name_), 0.0), cumtime)
        print("\njaxrun's own Python time in the script's process, per module (cProfile tottime, ms):")
        for module, seconds in sorted(own.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {module:32s} {seconds * 1000:7.1f}")
        print(f"  {'all of jaxrun':32s} {sum(own.values()) * 1000:7.1f}")
        print("\nentry points with what they call (cProfile cumtime, ms):")
        for (module, function), seconds in sorted(cumulative.items(), key=lambda kv: -kv[1]):
            print(f"  {module}:{function:12s} {seconds * 1000:7.1f}")


if __name__ == "__main__":
    main()
