"""Where the probe's milliseconds go inside the script's own process: its CPU time and wall time,
per piece, against ``python script.py``.

Two scripts: one that never imports jax (TINY, the 1,000-script sweep's) and a trivial JAX one
(JAX_SCRIPT: jit of a small matmul). Four readings:

  * side by side, interleaved, whole process: ``python script.py`` against the probe started as
    each checkout's jaxrun starts it (its ``ProbeArguments(...).command()``, with a lifeline pipe
    and the scripts' lock as run/process/environment.py gives them), this checkout's and, with
    ``--against OTHER/src``, another's: wall time and the process's CPU (utime + stime, ``wait4``);
  * per piece: the probe run by a driver that stamps ``time.process_time()`` (every thread's CPU)
    and ``time.time()`` around each of its steps (the probe's own functions wrapped by name, so a
    renamed one is reported missing, never guessed): interpreter start, the probe's imports, the
    set-up before the body, the script's body (its events, the JAX listeners, the import hook's
    statements), the end of the run (drain, device facts, compile cache, compile environment),
    the interpreter's exit (what ``wait4`` says after the driver's last stamp);
  * ``python -X importtime``: the modules the probe imports that ``python script.py`` does not;
  * ``--profile``: the probe under cProfile on the JAX script, jaxrun's Python time per module
    (``tottime``) and its entry points (``cumtime``); cProfile slows Python code down, so these are
    upper bounds, read as shares.

    python benchmarks/bench_probe_cost.py [--runs 15] [--against OTHER/src] [--python VENV/bin/python]
                                          [--only 'no jax'] [--profile]

``--python``: the interpreter of the scripts and the probes; a fresh venv's has no .pth file of
this machine's (whose site imports typing and more in every process, python's own included).

The checkouts' bytecode is compiled first (as pip's install would have it): a development machine
with PYTHONDONTWRITEBYTECODE would otherwise measure the compiling of jaxrun's modules.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

TINY = "if False:\n    import jax\nprint(1)\n"
JAX_SCRIPT = ("import jax\nimport jax.numpy as jnp\n\nx = jnp.ones((64, 64), jnp.float32)\n"
              "print(float(jax.jit(lambda a: a @ a)(x).sum()))\n")
SCRIPTS = {"no jax": TINY, "jit matmul": JAX_SCRIPT}

# The probe's functions timed by the driver: (module under jaxrun.probe, attribute, piece). A
# function another calls through a module global or a class attribute can be wrapped in place.
TIMED = [
    ("ending", "Body.begin", "begin"),
    ("ending", "Body.end", "end"),
    ("drain", "drain", "end: drain"),
    ("ending", "device_facts", "end: device facts"),
    ("ending", "compile_cache_facts", "end: compile cache facts"),
    ("ending", "compile_environment", "end: compile environment"),
    ("ending", "_own_peak_rss_kb", "end: memory readings"),
    ("ending", "_cpu_seconds", "end: memory readings"),
    ("jax_hooks", "attach_listeners", "body: JAX listeners attached"),
    ("jax_hooks", "_send_program_facts", "body: XLA's analyses of each executable"),
    ("channel", "EventWriter.send", "events written"),
]

# Runs in the script's process in place of ``python -m jaxrun.probe``: stamps around each piece.
DRIVER = r'''
import time, os, sys
if os.environ.pop("BENCH_AS_MODULE", None):
    import runpy  # what `python -m` imports before the module's first line
_marks = {"start": (time.process_time(), time.time())}
_pieces, _counts, _missing = {}, {}, []
def _add(piece, cpu, wall):
    c, w = _pieces.get(piece, (0.0, 0.0))
    _pieces[piece] = (c + cpu, w + wall)
    _counts[piece] = _counts.get(piece, 0) + 1
if len(sys.argv) > 1 and sys.argv[1] == "--bare":
    script = sys.argv[2]
    sys.argv = sys.argv[2:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    _marks["imports"] = (time.process_time(), time.time())
    _marks["setup"] = _marks["imports"]
    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec")
    exec(code, {"__name__": "__main__", "__file__": script, "__builtins__": __builtins__})
    _marks["returned"] = (time.process_time(), time.time())
    _code = 0
else:
    # Nothing imported here that the probe would not import itself: what it costs would be counted.
    __import__("jaxrun.probe.__main__")
    main = sys.modules["jaxrun.probe.__main__"]
    _marks["imports"] = (time.process_time(), time.time())
    _timed = [line.split("|") for line in os.environ.pop("BENCH_TIMED").splitlines()]
    def _wrap(piece, real, first=None):
        def timed(*args, **kwargs):
            if first is not None and first not in _marks:
                _marks[first] = (time.process_time(), time.time())
            c, w = time.process_time(), time.time()
            try:
                return real(*args, **kwargs)
            finally:
                _add(piece, time.process_time() - c, time.time() - w)
        return timed
    for module_name, attribute, piece in _timed:
        try:
            __import__("jaxrun.probe." + module_name)
            module = sys.modules["jaxrun.probe." + module_name]
        except ImportError:
            _missing.append(module_name + "." + attribute)
            continue
        owner_name, _, name = attribute.rpartition(".")
        owner = getattr(module, owner_name) if owner_name else module
        real = getattr(owner, name, None)
        if real is None:
            _missing.append(module_name + "." + attribute)
            continue
        setattr(owner, name, _wrap(piece, real, "setup" if attribute == "Body.begin" else None))
    _code = main.main(sys.argv[1:])
    _marks["returned"] = (time.process_time(), time.time())
with open(os.environ.pop("BENCH_PIECES"), "w") as f:  # repr: json's import would be counted in the exit
    f.write(repr({"marks": _marks, "pieces": _pieces, "counts": _counts, "missing": _missing}))
sys.exit(_code)
'''


def probe_command(src: Path, python: str, events: Path, script: Path) -> list[str]:
    """The command the checkout ``src`` starts its probe with (its probe/arguments.py builds it)."""
    code = ("import json, sys; from jaxrun.probe.arguments import ProbeArguments; print(json.dumps("
            "ProbeArguments(events=sys.argv[1], script_argv=(sys.argv[2],)).command(sys.argv[3])))")
    out = subprocess.run([python, "-c", code, str(events), str(script), python], env=_env(src), capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXRUN_")}
    env.update(PYTHONPATH=str(src), JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1", JAX_TRANSFER_GUARD="log")
    return env


def _probe_env(src: Path, work: Path, events: Path) -> dict[str, str]:
    return {**_env(src), "JAXRUN_EVENTS_FILE": str(events), "JAXRUN_SCRIPTS_LOCK": str(work / ".jaxrun.scripts.lock")}


def _probe_args(events: Path, script: Path) -> list[str]:
    return ["--events", str(events), "--", str(script)]


PYTHON = sys.executable  # --python


def whole(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """``(wall, cpu, started)``: the process from fork to reaping, with a lifeline pipe open as
    jaxrun gives one; its CPU is its utime + stime (wait4)."""
    read, write = os.pipe()
    try:
        started = time.time()
        begun = time.perf_counter()
        proc = subprocess.Popen(command, env={**env, "JAXRUN_LIFELINE_FD": str(read)}, pass_fds=(read,),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - begun
        proc.returncode = 0  # reaped here
    finally:
        os.close(read)
        os.close(write)
    return wall, usage.ru_utime + usage.ru_stime, started


def side_by_side(sides: dict[str, Path], scripts: dict[str, Path], work: Path, runs: int) -> None:
    print(f"whole process, interleaved, median of {runs} (load average {_load()} before):")
    print(f"  {'script':12s} {'run by':24s} {'CPU ms':>8s} {'wall ms':>8s} {'CPU over python':>16s}")
    for kind, script in scripts.items():
        figures: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
        names = ["python", *sides]
        for round_ in range(runs):
            for name in (names if round_ % 2 == 0 else names[::-1]):
                events = work / "events.jsonl"
                events.unlink(missing_ok=True)
                if name == "python":
                    wall, cpu, _ = whole([PYTHON, str(script)], _env(SRC))
                else:
                    wall, cpu, _ = whole(probe_command(sides[name], PYTHON, events, script),
                                         _probe_env(sides[name], work, events))
                figures[name][0].append(wall)
                figures[name][1].append(cpu)
        bare = statistics.median(figures["python"][1])
        for name in names:
            wall, cpu = (statistics.median(v) for v in figures[name])
            over = "" if name == "python" else f"+{(cpu - bare) * 1000:.1f}"
            print(f"  {kind:12s} {name:24s} {cpu * 1000:8.1f} {wall * 1000:8.1f} {over:>16s}")
    print(f"  (load average {_load()} after)")


PIECES = [
    ("interpreter start, to the first line", "start"),
    ("the probe's imports", "imports"),
    ("set-up before the body (lifeline, lock, arguments, cgroups, channel, START, import hook)", "setup"),
    ("body begin (exit wrappers, import timer, BODY)", "begin"),
    ("the script's body", "body"),
    ("  of which: JAX listeners attached", "body: JAX listeners attached"),
    ("  of which: XLA's analyses of each executable", "body: XLA's analyses of each executable"),
    ("the end of the run (Body.end)", "end"),
    ("  of which: drain", "end: drain"),
    ("  of which: device facts", "end: device facts"),
    ("  of which: compile cache facts", "end: compile cache facts"),
    ("  of which: compile environment", "end: compile environment"),
    ("  of which: CPU and memory readings", "end: memory readings"),
    ("events written (in the pieces above)", "events written"),
    ("the interpreter's exit, to the reaping", "exit"),
    ("whole process (wait4)", "total"),
]


def _one_pieces(command: list[str], env: dict[str, str], out: Path) -> dict[str, tuple[float, float]]:
    wall, cpu, started = whole(command, env)
    data = ast.literal_eval(out.read_text())
    marks, pieces = data["marks"], data["pieces"]
    if data["missing"]:
        raise SystemExit(f"the driver found no {', '.join(data['missing'])}: update TIMED")
    got: dict[str, tuple[float, float]] = {
        "start": (marks["start"][0], marks["start"][1] - started),
        "imports": (marks["imports"][0] - marks["start"][0], marks["imports"][1] - marks["start"][1]),
        "setup": (marks["setup"][0] - marks["imports"][0], marks["setup"][1] - marks["imports"][1]),
        "exit": (cpu - marks["returned"][0], wall - (marks["returned"][1] - started)),
        "total": (cpu, wall),
        "events written": (0.0, 0.0),
    }
    for name, (c, w) in pieces.items():
        got[name] = (c, w)
    begin, end = got.get("begin", (0.0, 0.0)), got.get("end", (0.0, 0.0))
    got["body"] = (marks["returned"][0] - marks["setup"][0] - begin[0] - end[0],
                   marks["returned"][1] - marks["setup"][1] - begin[1] - end[1])
    got["#events"] = (float(data["counts"].get("events written", 0)), 0.0)
    return got


def per_piece(sides: dict[str, Path], scripts: dict[str, Path], work: Path, runs: int) -> None:
    out = work / "pieces.json"
    timed = "\n".join("|".join(t) for t in TIMED)
    for kind, script in scripts.items():
        readings: dict[str, list[dict[str, tuple[float, float]]]] = defaultdict(list)
        names = ["python", *sides]
        events = work / "events.jsonl"
        as_module = {name: "-m" in probe_command(src, PYTHON, events, script) for name, src in sides.items()}
        for round_ in range(runs):
            for name in (names if round_ % 2 == 0 else names[::-1]):
                events.unlink(missing_ok=True)
                if name == "python":
                    command, env = [PYTHON, "-c", DRIVER, "--bare", str(script)], _env(SRC)
                else:
                    command = [PYTHON, "-c", DRIVER, *_probe_args(events, script)]
                    env = _probe_env(sides[name], work, events)
                    if as_module[name]:
                        env["BENCH_AS_MODULE"] = "1"
                readings[name].append(_one_pieces(command, {**env, "BENCH_PIECES": str(out), "BENCH_TIMED": timed}, out))
        print(f"\nper piece, {kind!r} script, medians of {runs} (CPU ms / wall ms; load average {_load()}):")
        print(f"  {'piece':88s}" + "".join(f"{name:>22s}" for name in names))
        for label, key in PIECES:
            cells = []
            for name in names:
                values = [r[key] for r in readings[name] if key in r]
                if not values:
                    cells.append(f"{'-':>22s}")
                    continue
                cpu = statistics.median(v[0] for v in values) * 1000
                wall = statistics.median(v[1] for v in values) * 1000
                cells.append(f"{cpu:10.1f} / {wall:8.1f}  ")
            print(f"  {label:88s}" + "".join(cells))
        counts = "  ".join(f"{name}: {statistics.median(r['#events'][0] for r in readings[name]):.0f}"
                           for name in sides)
        print(f"  events written: {counts}")


_IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def _imports(command: list[str], env: dict[str, str]) -> dict[str, int]:
    text = subprocess.run([command[0], "-X", "importtime", *command[1:]], env=env, capture_output=True,
                          text=True, check=False).stderr
    return {m.group(4): int(m.group(1)) for m in map(_IMPORTTIME.match, text.splitlines()) if m}


def import_times(sides: dict[str, Path], script: Path, work: Path, runs: int) -> None:
    """The modules each probe imports that ``python script.py`` does not, self time (µs) median."""
    events = work / "events.jsonl"
    bare = set(_imports([PYTHON, str(script)], _env(SRC)))
    print(f"\nmodules the probe imports that `python script.py` does not ('no jax' script; -X importtime, "
          f"self µs, median of {runs}):")
    for name, src in sides.items():
        per_module: dict[str, list[int]] = defaultdict(list)
        for _ in range(runs):
            events.unlink(missing_ok=True)
            for module, micros in _imports(probe_command(src, PYTHON, events, script),
                                           _probe_env(src, work, events)).items():
                if module not in bare:
                    per_module[module].append(micros)
        medians = {m: statistics.median(v) for m, v in per_module.items()}
        listed = ", ".join(f"{m} {us:.0f}" for m, us in sorted(medians.items(), key=lambda kv: -kv[1]))
        print(f"  {name}: {len(medians)} modules, {sum(medians.values()) / 1000:.1f} ms: {listed}")


# The probe's entry points whose cumulative time cProfile shows (module suffix, function name).
ENTRY_POINTS = [("probe/__main__.py", "main"), ("probe/drain.py", "drain"), ("probe/jax_hooks.py", "attach_listeners"),
                ("probe/jax_hooks.py", "watch_jax_import"), ("probe/programs.py", "_install"),
                ("probe/programs.py", "explain"), ("probe/ending.py", "end")]
# (The import hook's cumulative time holds the script's own imports: its own cost is its tottime.)


def profile(script: Path, work: Path) -> None:
    events = work / "events.jsonl"
    events.unlink(missing_ok=True)
    stats_file = work / "probe.prof"
    subprocess.run([PYTHON, "-m", "cProfile", "-o", str(stats_file), "-m", "jaxrun.probe",
                    *_probe_args(events, script)], env=_probe_env(SRC, work, events),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    stats = pstats.Stats(str(stats_file))
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
    print("\njaxrun's own Python time in the JAX script's process, per module (cProfile tottime, ms):")
    for module, seconds in sorted(own.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {module:32s} {seconds * 1000:7.1f}")
    print(f"  {'all of jaxrun':32s} {sum(own.values()) * 1000:7.1f}")
    print("\nentry points with what they call (cProfile cumtime, ms):")
    for (module, function), seconds in sorted(cumulative.items(), key=lambda kv: -kv[1]):
        print(f"  {module}:{function:12s} {seconds * 1000:7.1f}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="Interleaved rounds of each reading.")
    parser.add_argument("--against", type=Path, help="Another checkout's src folder, its probe measured beside this one's.")
    parser.add_argument("--only", choices=sorted(SCRIPTS), help="One of the two scripts only.")
    parser.add_argument("--profile", action="store_true", help="Also the cProfile shares (the JAX script).")
    parser.add_argument("--python", default=sys.executable,
                        help="The interpreter of the scripts and the probes (a fresh venv's: as users have it).")
    args = parser.parse_args()
    global PYTHON
    PYTHON = args.python
    sides = {"probe (this checkout)": SRC}
    if args.against:
        sides["probe (--against)"] = args.against.resolve()
    for src in sides.values():
        compileall.compile_dir(str(src / "jaxrun"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="jaxrun-probe-cost-") as name:
        work = Path(name)
        scripts = {}
        for kind, text in SCRIPTS.items():
            if args.only in (None, kind):
                scripts[kind] = work / f"script_{len(scripts)}.py"
                scripts[kind].write_text(text)
        side_by_side(sides, scripts, work, args.runs)
        per_piece(sides, scripts, work, args.runs)
        if "no jax" in scripts:
            import_times(sides, scripts["no jax"], work, max(3, args.runs // 3))
        if args.profile and "jit matmul" in scripts:
            profile(scripts["jit matmul"], work)


if __name__ == "__main__":
    main()
