"""What reading XLA's analyses of every program costs (issue 25: at most 5 % more compile time).

Runs the repository's examples with ``jaxrun run`` twice per round, with the analyses (the
default) and with ``--no-xla-analysis``, interleaved, the persistent compilation cache off (every
program compiled). Per script and in total it reports, medians over the rounds:

* JIT time: trace + lower + compile of every program (``jit_compile_time``), plus with the
  analyses on, the seconds jaxrun spent reading them (``analysis_time``, outside compile_time but
  inside the compile phase's wall time): what the analyses add to a script's compile phase;
* the analyses' own seconds as a share of that run's JIT time (the same run: no noise between
  two runs in it);
* body time, with and without.

    python benchmarks/bench_xla_analysis.py [--rounds 3] [PATH ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(paths: list[str], results: Path, analyse: bool) -> dict[str, dict[str, float]]:
    command = [sys.executable, "-m", "jaxrun", "run", *paths, "--no-history", "--no-compile-cache", "--no-config",
               "--results-dir", str(results), "-q"]
    if not analyse:
        command.append("--no-xla-analysis")
    subprocess.run(command, cwd=ROOT, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    figures = {}
    for path in sorted((results / "script_results").glob("*_result.json")):
        result = json.loads(path.read_text())
        if not result["success"]:
            continue
        compiles = result["compiles"].values()
        figures[result["script_name"]] = {
            "jit": float(result["jit_compile_time"] or 0.0),
            "analysis": sum(float(c.get("analysis_time") or 0.0) for c in compiles),
            "body": float(result["body_time"] or 0.0),
            "programs": len(compiles),
            "with_all_facts": sum(1 for c in compiles if c.get("cost") and c.get("memory") and c.get("fingerprint")),
            "built": sum(1 for c in compiles if c["count"] or c["cache_hits"]),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["examples"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    on: list[dict[str, dict[str, float]]] = []
    off: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            on.append(run(args.paths, Path(tmp) / f"on{round_}", True))
            off.append(run(args.paths, Path(tmp) / f"off{round_}", False))
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    scripts = sorted(set.intersection(*(set(r) for r in on + off)))
    med = statistics.median
    print(f"{'script':48} {'programs':>9} {'jit off s':>9} {'jit on s':>9} {'ratio':>6} {'analysis':>9} {'share':>6} "
          f"{'body off':>8} {'body on':>8}")
    totals = {"off": [0.0] * args.rounds, "on": [0.0] * args.rounds, "analysis": [0.0] * args.rounds,
              "jit_on": [0.0] * args.rounds}
    for name in scripts:
        jit_off = [r[name]["jit"] for r in off]
        jit_on = [r[name]["jit"] + r[name]["analysis"] for r in on]
        analysis = [r[name]["analysis"] for r in on]
        share = [r[name]["analysis"] / r[name]["jit"] for r in on if r[name]["jit"]]
        for i in range(args.rounds):
            totals["off"][i] += jit_off[i]
            totals["on"][i] += jit_on[i]
            totals["analysis"][i] += analysis[i]
            totals["jit_on"][i] += on[i][name]["jit"]
        facts = f"{int(on[-1][name]['with_all_facts'])}/{int(on[-1][name]['built'])}"
        print(f"{name[-48:]:48} {facts:>9} {med(jit_off):9.3f} {med(jit_on):9.3f} {med(jit_on) / med(jit_off):6.3f} "
              f"{med(analysis) * 1000:7.1f}ms {med(share) * 100 if share else 0:5.1f}% "
              f"{med(r[name]['body'] for r in off):8.3f} {med(r[name]['body'] for r in on):8.3f}")
    shares = [a / j for a, j in zip(totals["analysis"], totals["jit_on"]) if j]
    print(f"\nall scripts: JIT time {med(totals['off']):.3f} s without the analyses, {med(totals['on']):.3f} s with "
          f"(x{med(totals['on']) / med(totals['off']):.3f}, two runs apart); the analyses' own time is "
          f"{med(shares) * 100:.2f} % of the JIT time of the runs that read them (median of {args.rounds} rounds)")
    print("programs: those with cost, memory and fingerprint / those with an executable (built or loaded)")


if __name__ == "__main__":
    main()
