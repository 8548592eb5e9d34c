"""Every budget of jaxrun's own speed (../shared/DESIGN.md §10), measured side by side with
`python` in one run, printed as a table and written to benchmarks/README.md with the machine, the
date, the versions and the install measured. Run from the checkout::

    python benchmarks/run.py [--runs 9] [--no-write] [--checkout PATH] [--fresh-venv]
    python benchmarks/run.py --only-sweep [--scripts 1000]     # the tiny-script sweep alone
    python benchmarks/run.py --only-batch                      # the trivial script and the 10-script folder
    python benchmarks/run.py --only-ray --scripts 10000        # over a local 2-node Ray (bench_ray_cluster)
    python benchmarks/run.py --only-slurm --scripts 1000       # one job array on a private Slurm (bench_slurm_cluster)

jaxrun is measured as a user has it (user_install.py): ``pip install CHECKOUT`` (not editable) into
a virtual environment of its dependencies as pip installs them, run by the console script pip
wrote, in the environment a user's shell has (no PYTHONPATH to a source tree); `python` on the
other side of each row is that environment's python. The scripts jit and run something, as a
user's do (a small matmul), except the tiny-script sweep's, which only print.

Each figure is a median of ``--runs`` interleaved measurements (a jaxrun run, then the plain
python it is compared with, and so on), so both sides see the same load on this shared machine;
each row says the load average when it was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import user_install  # noqa: E402

# Set by use() from the install measured: the environment's python, its `jaxrun` console script,
# and the environment a user's shell gives them.
PYTHON = sys.executable
JAXRUN = [PYTHON, "-m", "jaxrun"]
ENV = dict(os.environ)
# What a user's folder holds: a script that jits a small matmul and runs it.
JIT_BODY = ("import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef step(x, w):\n    return jnp.tanh(x @ w) + 1.0\n\n\n"
            "x = jnp.ones((256, 256))\nw = jnp.full((256, 256), 0.01)\nprint(float(step(x, w).sum()))\n")
# The script's first statement notes when it ran: jaxrun's start-up is the time to get there.
FIRST_LINE = "import time, os\nopen(os.environ['STAMP_FILE'], 'w').write(repr(time.time()))\n" + JIT_BODY
# ... and its last statement, when: what follows is the interpreter's teardown (and jaxrun's).
LAST_LINE = JIT_BODY + "import time, os\nopen(os.environ['STAMP_FILE'], 'w').write(repr(time.time()))\n"
# A batch's script, noting (appending to STAMP_LOG) when its first line ran, when jax was imported
# and when its last line ran: where each further script's time goes, under jaxrun and under python.
STAMPED = ("import os, time\n_log = open(os.environ['STAMP_LOG'], 'a')\n"
           "_log.write(f'{__file__} first {time.time()!r}\\n')\n"
           "import jax\nimport jax.numpy as jnp\n_log.write(f'{__file__} imported {time.time()!r}\\n')\n"
           + JIT_BODY.split("\n\n\n", 1)[1] + "_log.write(f'{__file__} last {time.time()!r}\\n')\n_log.close()\n")
MARKER = "<!-- benchmarks/run.py writes the section below; do not edit it by hand -->"


def use(install: user_install.Install) -> None:
    """Measure ``install`` from now on."""
    global PYTHON, JAXRUN, ENV
    PYTHON, JAXRUN, ENV = str(install.python), [str(install.jaxrun)], user_install.user_env(install.venv)


def in_venv(code: str) -> dict:
    """Run ``code`` in the measured environment's python (benchmarks/ on its path, jaxrun the
    installed one) and return the JSON object it printed last."""
    prelude = f"import sys, json; sys.path.insert(0, {str(HERE)!r})\n"
    out = subprocess.run([PYTHON, "-c", prelude + code], env=ENV, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the benchmark's child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@dataclass
class Row:
    budget: str
    measured: str
    limit: str
    ok: bool | None  # None: a figure without a budget
    how: str


def timed(command: list[str], **kw: object) -> float:
    """Seconds ``command`` took; a command that fails stops the benchmark (its time would be a
    failure's, not a run's)."""
    started = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=kw.pop("env", ENV), check=False, **kw)  # type: ignore[call-overload]
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {' '.join(command)}")
    return took


def median(values: list[float]) -> float:
    return statistics.median(values)


def help_time(runs: int) -> Row:
    samples, bare = [], []
    for _ in range(runs):
        samples.append(timed([*JAXRUN, "--help"]))
        bare.append(timed([PYTHON, "-c", "pass"]))
    m, b = median(samples), median(bare)
    return Row("`jaxrun --help`, over `python -c pass`", f"{(m - b) * 1000:+.0f} ms ({m * 1000:.0f} ms vs {b * 1000:.0f} ms)",
               "+100 ms", m - b <= 0.100, f"median of {runs}, interleaved")


def steps(trace: Path, begin: float, end: float, last: str) -> list[tuple[str, float]]:
    """The marks jaxrun wrote (jaxrun/core/startup_trace.py) between ``begin`` and ``end``, as the
    seconds each step took, named by the mark that ends it (``last``: the step after the last mark)."""
    marks = [(float(t), name.strip()) for t, name in (line.split(" ", 1) for line in trace.read_text().splitlines())]
    out, before = [], begin
    for t, name in marks:
        if begin <= t <= end:
            out.append((name, t - before))
            before = t
    out.append((last, end - before))
    return out


def breakdown(budget: str, runs: list[list[tuple[str, float]]]) -> Row:
    """One row: the median of each step over the runs (each step's label from the first run)."""
    labels = [label for label, _ in runs[0]]
    medians = [median([r[i][1] for r in runs if len(r) == len(labels)]) for i in range(len(labels))]
    text = "; ".join(f"{label} {m * 1000:.0f}" for label, m in zip(labels, medians))
    return Row(budget, text, "-", None, f"medians of {len(runs)} (jaxrun's marks: JAXRUN_STARTUP_TRACE)")


def library_floor(runs: int) -> Row:
    """What importing the libraries jaxrun's commands are built on costs, before jaxrun does anything
    (those of them the measured environment has)."""
    modules = [m for m in ("click", "pydantic.main", "msgspec") if subprocess.run(
        [PYTHON, "-c", f"import {m}"], env=ENV, capture_output=True, check=False).returncode == 0]
    command = [PYTHON, "-c", f"import {', '.join(modules)}"]
    samples, bare = [], []
    for _ in range(runs):
        samples.append(timed(command))
        bare.append(timed([PYTHON, "-c", "pass"]))
    m, b = median(samples), median(bare)
    return Row(f"floor: `python -c 'import {', '.join(modules)}'`", f"{m * 1000:.0f} ms (python -c pass: {b * 1000:.0f} ms)",
               "-", None, f"median of {runs}, interleaved: under every start-up figure above and below")


def interleaved(runs: int, measure: Callable[[list[str]], float], script: Path, results: Path) -> tuple[float, float]:
    """Medians of ``measure`` for `jaxrun run script` and `python script`, one after the other."""
    jaxrun, bare = [], []
    for _ in range(runs):
        jaxrun.append(measure([*JAXRUN, "run", str(script), "--no-history", "--no-config", "-q", "--no-compile-cache",
                               "--results-dir", str(results)]))
        bare.append(measure([PYTHON, str(script)]))
    return median(jaxrun), median(bare)


def stamped_run(command: list[str], stamp: Path, trace: Path) -> tuple[float, float, float]:
    """Run ``command`` with the script's stamp file and jaxrun's trace file (unix times): when it
    started, when it ended, and the stamp the script wrote."""
    trace.unlink(missing_ok=True)
    started = time.time()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env={**ENV, "STAMP_FILE": str(stamp), "JAXRUN_STARTUP_TRACE": str(trace)})
    return started, time.time(), float(stamp.read_text())


def stamped_spans(runs: int, tmp: Path, name: str, text: str, to_stamp: bool, last_step: str,
                  ) -> tuple[float, float, list[list[tuple[str, float]]]]:
    """Medians, jaxrun's and python's (interleaved), of the span from the command's start to the
    script's stamp (``to_stamp``) or from the stamp to the command's exit; and jaxrun's steps in it."""
    script = tmp / f"{name}.py"
    script.write_text(text)
    stamp, trace = tmp / f"stamp_{name}", tmp / f"trace_{name}"
    split: list[list[tuple[str, float]]] = []

    def run(command: list[str]) -> float:
        started, ended, stamped = stamped_run(command, stamp, trace)
        begin, end = (started, stamped) if to_stamp else (stamped, ended)
        if trace.exists():
            split.append(steps(trace, begin, end, last_step))
        return end - begin

    m, b = interleaved(runs, run, script, tmp / f"r_{name}")
    return m, b, split


def first_line_time(runs: int, tmp: Path) -> list[Row]:
    """From starting the command to the script's first statement, jaxrun and python; and where
    jaxrun's time went (its marks)."""
    m, b, split = stamped_spans(runs, tmp, "first_line", FIRST_LINE, True, "the script's first line runs")
    return [Row("`jaxrun run` start-up (to the script's first line)", f"{m * 1000:.0f} ms (python: {b * 1000:.0f} ms)",
                "100 ms", m <= 0.100, f"median of {runs}, interleaved"),
            breakdown("where the start-up goes (ms)", split)]


# A folder's scripts each note when they ran, once: the first one to run wins.
FIRST_OF_MANY = ("import time, os\nif not os.path.exists(os.environ['STAMP_FILE']):\n"
                 "    open(os.environ['STAMP_FILE'], 'w').write(repr(time.time()))\nif False:\n    import jax\n")


def first_line_at_scale(runs: int, tmp: Path, n: int = 10_000) -> Row:
    """From starting `jaxrun run DIR` to the first script's first statement, for a folder of n
    scripts and of one, interleaved; jaxrun is stopped (SIGINT) once the first script has run.
    What the plan of a large folder adds before its first script (plan/batch_plan.py streams it)."""
    folders = {}
    for count in (1, n):
        folder = tmp / f"first_of_{count}"
        folder.mkdir()
        for i in range(count):
            (folder / f"s{i:05d}.py").write_text(FIRST_OF_MANY)
        folders[count] = folder
    stamp = tmp / "stamp_first_of"

    def run(count: int) -> float:
        stamp.unlink(missing_ok=True)
        started = time.time()
        proc = subprocess.Popen([*JAXRUN, "run", str(folders[count]), "--no-history", "--no-config", "-q",
                                 "--results-dir", str(tmp / f"r_first_of_{count}")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**ENV, "STAMP_FILE": str(stamp)},
                                preexec_fn=_interruptible)
        try:
            while not (stamp.exists() and stamp.read_text()):
                if proc.poll() is not None:
                    raise RuntimeError(f"jaxrun ended (exit {proc.returncode}) before its first script ran")
                time.sleep(0.001)
            return float(stamp.read_text()) - started
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise RuntimeError("jaxrun went on after SIGINT") from None

    many, one = [], []
    for _ in range(runs):
        many.append(run(n))
        one.append(run(1))
    m, o = median(many), median(one)
    return Row(f"`jaxrun run` start-up with {n:,} scripts (to the first script's first line)",
               f"{m * 1000:.0f} ms (one script: {o * 1000:.0f} ms, {(m - o) * 1000:+.0f} ms)", "100 ms", m <= 0.100,
               f"median of {runs}, interleaved; jaxrun stopped once the first script ran")


def _interruptible() -> None:
    """In the child before exec: SIGINT as a terminal's Ctrl-C finds it, even where this benchmark
    was started with SIGINT ignored (a shell's background job), which Python would keep."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def teardown_time(runs: int, tmp: Path) -> list[Row]:
    """From the script's last statement to the command's exit: the interpreter's teardown (JAX's
    included) under python; that, the result, the files and the summary under jaxrun."""
    m, b, split = stamped_spans(runs, tmp, "last_line", LAST_LINE, False, "jaxrun's interpreter exits")
    return [Row("`jaxrun run` teardown (the script's last line to exit), over `python`",
                f"{(m - b) * 1000:+.0f} ms ({m * 1000:.0f} ms vs {b * 1000:.0f} ms)", "+50 ms", m - b <= 0.050,
                f"median of {runs}, interleaved, a trivial JAX script"),
            breakdown("where the teardown goes (ms)", split)]


def per_script_cost(runs: int, tmp: Path) -> Row:
    script = tmp / "trivial.py"
    script.write_text(JIT_BODY)
    m, b = interleaved(runs, timed, script, tmp / "r_trivial")
    return Row("`jaxrun run` on a trivial JAX script (a jitted 256x256 matmul), over `python`",
               f"{(m - b) * 1000:+.0f} ms ({m:.3f} s vs {b:.3f} s, x{m / b:.2f})", "+100 ms", m - b <= 0.100,
               f"median of {runs}, interleaved, no compile cache on either side")


def _stamps(log: Path) -> list[dict[str, float]]:
    """The stamps STAMPED scripts appended to ``log``, one dict a script, in the order they ran."""
    by: dict[str, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        name, what, when = line.rsplit(" ", 2)
        by.setdefault(name, {})[what] = float(when)
    return sorted(by.values(), key=lambda s: s["first"])


def marginal_cost(runs: int, tmp: Path, n: int = 10) -> list[Row]:
    """A folder of ``n`` scripts that each jit and run a small matmul (STAMPED), as a user's: `jaxrun
    run FOLDER` against a shell loop of `python` over the same files, and the folder's first script
    alone under each, interleaved. Two figures: what each further script adds, ((folder - one) /
    (n - 1), jaxrun's over python's: the budget), and the whole folder against the loop (what a
    user timing both sees: jaxrun's start-up spread over the scripts, plus each further script's
    cost). Where a further script's time goes, from the scripts' stamps and jaxrun's marks."""
    folder = tmp / "batch"
    folder.mkdir()
    for i in range(n):
        (folder / f"s{i}.py").write_text(STAMPED)
    first = sorted(folder.glob("*.py"))[0]
    log, trace = tmp / "batch_stamps", tmp / "batch_trace"
    env = {**ENV, "STAMP_LOG": str(log), "JAXRUN_STARTUP_TRACE": str(trace)}
    common = ["--no-history", "--no-config", "-q", "--no-compile-cache", "--results-dir", str(tmp / "r_batch")]
    loop = ["sh", "-c", 'for s in "$1"/*.py; do "$0" "$s"; done', PYTHON]
    samples: dict[str, list[float]] = {"many": [], "one": [], "loop": [], "bare_one": []}
    spans: dict[str, list[float]] = {}

    def run(key: str, command: list[str], side: str) -> None:
        log.unlink(missing_ok=True)
        trace.unlink(missing_ok=True)
        samples[key].append(timed(command, env=env))
        if key not in ("many", "loop"):
            return
        st = _stamps(log)
        further = st[1:]
        found = {f"{side} import jax": [s["imported"] - s["first"] for s in further],
                 f"{side} jit and run": [s["last"] - s["imported"] for s in further],
                 f"{side} last line to the next script's first": [b["first"] - a["last"] for a, b in zip(st, st[1:])]}
        if side == "jaxrun" and trace.exists():
            marks = [(float(t), name) for t, name in (line.split(" ", 1) for line in trace.read_text().splitlines())]
            reaped = [t for t, name in marks if name.startswith("the script's teardown")]
            handed = [t for t, name in marks if name.startswith("the job handed")]
            if len(reaped) == len(st) and len(handed) == len(st):
                found["jaxrun: its teardown, the process reaped"] = [reaped[i] - st[i]["last"] for i in range(len(st) - 1)]
                found["jaxrun: result and files, the next job handed over"] = [handed[i + 1] - reaped[i] for i in range(len(st) - 1)]
                found["jaxrun: the spare runs the script's first line"] = [st[i]["first"] - handed[i] for i in range(1, len(st))]
        for label, values in found.items():
            spans.setdefault(label, []).append(median(values))

    for _ in range(runs):
        run("many", [*JAXRUN, "run", str(folder), *common], "jaxrun")
        run("loop", [*loop, str(folder)], "python")
        run("one", [*JAXRUN, "run", str(first), *common], "jaxrun")
        run("bare_one", [PYTHON, str(first)], "python")
    m = {key: median(values) for key, values in samples.items()}
    ours, theirs = (m["many"] - m["one"]) / (n - 1), (m["loop"] - m["bare_one"]) / (n - 1)
    whole = (m["many"] - m["loop"]) / n
    how = f"median of {runs}, interleaved, no compile cache on either side; python: a shell `for` loop over the folder"
    split = "; ".join(f"{label} {median(values) * 1000:.0f}" for label, values in spans.items())
    return [Row(f"each further script in a folder of {n} (each jits a small matmul), over `python`",
                f"{(ours - theirs) * 1000:+.0f} ms ({ours * 1000:.0f} ms vs {theirs * 1000:.0f} ms a further script); "
                f"the whole folder against the loop: {whole * 1000:+.0f} ms a script ({m['many']:.2f} s vs "
                f"{m['loop']:.2f} s, x{m['many'] / m['loop']:.2f})",
                "+25 ms", ours - theirs <= 0.025,
                how + f"; a further script: (folder - its first script alone) / {n - 1}"),
            Row("where a further script of the folder goes (ms)", split, "-", None,
                f"medians of {runs} (the scripts' own stamps; jaxrun's marks: JAXRUN_STARTUP_TRACE)")]


# A small JAX script of a folder: its own function (a different program each), jitted and run.
SMALL_JAX = ("import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef step(x):\n    return jnp.tanh(x @ x.T) * {k} + x.sum()\n\n\n"
             "print(float(step(jnp.ones((128, 128))).sum()))\n")


def prestarted_jax_folder(runs: int, tmp: Path, n: int = 20) -> Row:
    """A folder of ``n`` small JAX scripts (each jits its own small program) under `jaxrun run
    --prestart jax` with a warm compile cache (a first run fills jaxrun's cache, untimed), against a
    shell loop of `python` over the same files, interleaved: what a user who runs the same folder
    again sees. jaxrun imports jax once, in the prestarted process, and loads each program from
    its cache; python imports jax and compiles in every script."""
    folder = tmp / "small_jax"
    folder.mkdir()
    for i in range(n):
        (folder / f"s{i:02d}.py").write_text(SMALL_JAX.format(k=i + 1))
    env = {**ENV, "JAXRUN_CACHE_DIR": str(tmp / "cache_prestart")}
    ours = [*JAXRUN, "run", str(folder), "--prestart", "jax", "--no-history", "--no-config", "-q",
            "--results-dir", str(tmp / "r_small_jax")]
    loop = ["sh", "-c", 'for s in "$1"/*.py; do "$0" "$s"; done >/dev/null', PYTHON, str(folder)]
    timed(ours, env=env)  # fills the cache
    mine, theirs = [], []
    for _ in range(runs):
        mine.append(timed(ours, env=env))
        theirs.append(timed(loop, env=env))
    m, b = median(mine), median(theirs)
    return Row(f"a folder of {n} small JAX scripts, `jaxrun run --prestart jax` (warm compile cache) against a "
               "shell loop of `python`", f"x{m / b:.2f} ({m:.2f} s vs {b:.2f} s)", "x0.5", m / b <= 0.5,
               f"median of {runs}, interleaved; each script jits its own program")


def result_writing(tmp: Path, rounds: int = 3) -> list[Row]:
    """10,000 results written by the real batch and its sinks (instant stand-in scripts, the plan
    made first so that what is timed is the writing), interleaved with what the file system alone
    takes for 10,000 atomic files of a result's size: on this machine's disk, and in memory
    (tmpfs, where there is one), which leaves jaxrun's own share. The disk's own figure moves
    several-fold from one minute to the next on a shared machine; the floor beside it shows how."""
    rows = []
    places = [("on disk", tmp)]
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        places.append(("in memory (tmpfs)", Path(tempfile.mkdtemp(prefix="jaxrun-bench-", dir=shm))))
    try:
        for where, root in places:
            figures = in_venv(
                f"import bench_result_writing, pathlib, statistics; t = pathlib.Path({str(root)!r}); out = []\n"
                f"for k in range(1, {rounds} + 1):\n"
                "    f = bench_result_writing.measure(10_000, t, plan_first=True, round=k)\n"
                "    f['floor'] = bench_result_writing.filesystem_floor(10_000, t, 1800, round=k)\n"
                "    out.append(f)\n"
                "print(json.dumps({key: statistics.median(f[key] for f in out) for key in out[0]}))")
            rows.append(Row(f"writing 10,000 results, {where}",
                            f"{figures['sinks']:.2f} s (the file system alone: {figures['floor']:.2f} s for 10,000 "
                            f"atomic files; jaxrun's share {figures['sinks'] - figures['floor']:+.2f} s; the plan, "
                            f"before: {figures['plan']:.2f} s)", "2 s", figures["sinks"] <= 2.0,
                            f"medians of {rounds}, each beside the file system's floor; real run_batch and sinks, "
                            "instant stand-in scripts"))
    finally:
        for where, root in places[1:]:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def discovery(tmp: Path) -> Row:
    figures = in_venv(f"import bench_discovery, pathlib, time, statistics; root = pathlib.Path({str(tmp / 'tree')!r})\n"
                      "from jaxrun.discover.scripts import find_jax_scripts\n"
                      "bench_discovery.build_tree(root, 10_000)\n"
                      "find_jax_scripts(root)  # the page cache warm, as for a second run\n"
                      "samples = []\nfor _ in range(5):\n    started = time.perf_counter()\n    find_jax_scripts(root)\n"
                      "    samples.append(time.perf_counter() - started)\n"
                      "print(json.dumps({'s': statistics.median(samples)}))")
    m = figures["s"]
    return Row("discovery of 10,000 files", f"{m * 1000:.0f} ms", "1 s", m <= 1.0, "median of 5")


_HUGE_CHILD = """
import json, sys, time
def peak_mb():  # VmHWM: ru_maxrss would carry the launching process's peak across exec
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
started = time.perf_counter()
from jaxrun.discover.scripts import find_jax_scripts
found = find_jax_scripts(sys.argv[1])
print(json.dumps({"s": time.perf_counter() - started, "found": len(found),
                  "rss_mb": peak_mb()}))
"""


def discovery_huge_file(runs: int, tmp: Path, megabytes: int = 50) -> Row:
    """A folder holding one 50 MiB ``.py`` (``import jax`` and a huge list literal, which is what
    makes ``ast`` take GBs): the whole discovery in a fresh process, its time and peak RSS
    (the interpreter's own ~10 MiB included)."""
    root = tmp / "huge"
    root.mkdir()
    line = b"1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,\n"
    with open(root / "table.py", "wb") as f:
        f.write(b"import jax.numpy as jnp\ndata = [\n")
        for _ in range(megabytes):
            f.write(line * ((1 << 20) // len(line)))
        f.write(b"]\n")
    s, r = _discovery_in_fresh_processes(root, runs)
    return Row(f"discovery of a folder with one {megabytes} MiB file", f"{s * 1000:.0f} ms, peak RSS {r:.0f} MiB",
               "1 s, 200 MiB", s <= 1.0 and r <= 200, f"median time of {runs}, largest RSS; a fresh process each")


def _discovery_in_fresh_processes(root: Path, runs: int) -> tuple[float, float]:
    """Discovery of ``root`` (one JAX file) in a fresh process ``runs`` times: the median seconds
    and the largest peak RSS (MiB)."""
    import json

    samples, rss = [], []
    for _ in range(runs):
        out = subprocess.run([PYTHON, "-c", _HUGE_CHILD, str(root)], capture_output=True, text=True,
                             env=ENV, check=True)
        figures = json.loads(out.stdout)
        assert figures["found"] == 1, figures
        samples.append(figures["s"])
        rss.append(figures["rss_mb"])
    return median(samples), max(rss)


def discovery_huge_notebook(runs: int, tmp: Path, megabytes: int = 200) -> Row:
    """A folder holding one notebook of real size: two code cells, each with a plot's PNG
    (base64) of ``megabytes / 2`` MB as its output, as Jupyter saves it. Discovery reads the code
    cells alone (probe/notebook_json.py): its time and peak RSS in a fresh process."""
    import base64
    import json

    root = tmp / "huge_notebook"
    root.mkdir()
    image = base64.b64encode(os.urandom(megabytes * 1_000_000 * 3 // 8)).decode()
    cells = [{"cell_type": "code", "execution_count": i + 1, "id": f"c{i}", "metadata": {},
              "outputs": [{"output_type": "display_data", "metadata": {}, "data": {"image/png": image}}],
              "source": source} for i, source in enumerate(["import jax.numpy as jnp\n", "jnp.ones(3)\n"])]
    (root / "plots.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                                  "nbformat_minor": 5}, indent=1))
    del image
    s, r = _discovery_in_fresh_processes(root, runs)
    return Row(f"discovery of a folder with one {megabytes} MB notebook", f"{s * 1000:.0f} ms, peak RSS {r:.0f} MiB",
               "1 s, 200 MiB", s <= 1.0 and r <= 200, f"median time of {runs}, largest RSS; a fresh process each")


def compile_cache(runs: int, tmp: Path) -> list[Row]:
    """A real multi-function program: plain python (no cache) against jaxrun with an empty cache
    (cold) and with the cache it filled (warm)."""
    script = ROOT / "examples" / "workloads" / "surrogate_training.py"
    cache = tmp / "cache"
    base = [*JAXRUN, "run", str(script), "--no-history", "--no-config", "-q", "--device", "cpu",
            "--results-dir", str(tmp / "r_cache"), "--compile-cache", str(cache)]
    timed(base)  # fills the cache
    bare, cold, warm = [], [], []
    for _ in range(runs):
        bare.append(timed([PYTHON, str(script)], cwd=script.parent))
        cold.append(timed([*base, "--cold-cache"]))
        warm.append(timed(base))
    b, c, w = median(bare), median(cold), median(warm)
    return [Row("persistent cache: surrogate_training.py, cold", f"{c:.2f} s vs python {b:.2f} s (x{b / c:.2f})", "-",
                None, f"median of {runs}, interleaved"),
            Row("persistent cache: surrogate_training.py, warm", f"{w:.2f} s vs python {b:.2f} s (x{b / w:.2f} faster)",
                "-", None, f"median of {runs}, interleaved")]


def cache_under_jobs(tmp: Path, jobs: int = 2) -> Row:
    """The compile cache kept under ``--jobs N``: the share of executables a ``--jobs N`` run loads
    from the persistent cache that a sequential run of the same scripts has just filled (jaxrun's
    default cache folder, new and empty: JAXRUN_CACHE_DIR). Anything that enters JAX's cache key
    and differs between the two modes (an XLA flag of the jobs' core shares, say) makes it fall."""
    import json

    folder = ROOT / "examples" / "gnn_rendered_simulators" / "jax"
    env = {**ENV, "JAXRUN_CACHE_DIR": str(tmp / "cache_jobs")}
    loaded = built = 0
    for mode, n in (("sequential", 1), ("jobs", jobs)):
        results = tmp / f"r_cache_{mode}"
        subprocess.run([*JAXRUN, "run", str(folder), "--no-history", "--no-config", "-q", "--device", "cpu",
                        "--jobs", str(n), "--results-dir", str(results)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        if mode == "jobs":
            for file in sorted((results / "script_results").glob("*_result.json")):
                programs = json.loads(file.read_text())["compiles"].values()
                hits = sum(p["cache_hits"] for p in programs)
                loaded, built = loaded + hits, built + hits + sum(p["count"] for p in programs)
    share = loaded / built if built else 0.0
    return Row(f"the compile cache kept under `--jobs {jobs}`", f"{share:.0%} of the executables loaded from the cache "
               f"({loaded} of {built})", ">= 90%", built > 0 and share >= 0.9,
               f"{folder.relative_to(ROOT)}: a sequential run, then `--jobs {jobs}`, one new default cache")


TINY = "if False:\n    import jax\nprint(1)\n"  # a "JAX script" (discovery finds it) that never imports jax


def watched(command: list[str], **kw: object) -> tuple[float, float, float, int]:
    """Run ``command``: its wall time, its own CPU seconds (not its children's), its children's
    CPU seconds and its peak RSS in KiB. The process is waited for without being reaped
    (``waitid(WNOWAIT)``), so its ``/proc/PID/stat`` still holds its own ``utime + stime``
    (fields 14-15; 16-17 are its reaped children's); its peak RSS is ``VmHWM``, polled while it
    runs (a zombie has no memory left to report). The children's CPU is this process's
    ``RUSAGE_CHILDREN`` growth less the command's own."""
    import resource

    tick = os.sysconf("SC_CLK_TCK")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=kw.pop("env", ENV), **kw)  # type: ignore[call-overload]
    peak = 0
    status = Path(f"/proc/{proc.pid}/status")
    while True:
        try:
            line = next((l for l in status.read_text().splitlines() if l.startswith("VmHWM")), None)
            if line:
                peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
            break
        time.sleep(0.02)
    wall = time.perf_counter() - started
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15 of stat(5))
    if proc.wait() != 0:
        raise RuntimeError(f"exit {proc.returncode}: {' '.join(command)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) - own
    return wall, own, children, peak


def tiny_sweep(runs: int, tmp: Path, n: int = 1000, jobs: int = 2) -> list[Row]:
    """``n`` tiny scripts (TINY) under ``jaxrun run DIR --jobs 2``, ``xargs -P2 -n1 python`` and a
    plain ``for`` loop, interleaved: the wall time and its ratio, jaxrun's own CPU a script (its
    process's own utime + stime, /proc, not its scripts'), the scripts' CPU a script under each,
    and jaxrun's peak RSS against a run of n/10 scripts (what each further result adds)."""
    small = max(2, n // 10)
    folders = {}
    for count in (n, small):
        folder = tmp / f"tiny_{count}"
        folder.mkdir()
        for i in range(count):
            (folder / f"s{i:05d}.py").write_text(TINY)
        folders[count] = folder
    listing = tmp / f"tiny_{n}.txt"
    listing.write_text("".join(f"{s}\n" for s in sorted(folders[n].glob("*.py"))))

    def jaxrun(count: int) -> list[str]:
        return [*JAXRUN, "run", str(folders[count]), "--jobs", str(jobs), "--no-history", "--no-config", "-q",
                "--results-dir", str(tmp / f"r_tiny_{count}")]

    xargs = ["sh", "-c", f'xargs -P{jobs} -n1 "$0" >/dev/null < "$1"', PYTHON, str(listing)]
    loop = ["sh", "-c", 'while read -r s; do "$0" "$s"; done >/dev/null < "$1"', PYTHON, str(listing)]
    ours, theirs, serial, own, script_cpu, bare_cpu, peaks, small_peaks = [], [], [], [], [], [], [], []
    for _ in range(runs):
        wall, cpu, children, peak = watched(jaxrun(n))
        ours.append(wall)
        own.append(cpu / n)
        script_cpu.append(children / n)
        peaks.append(peak)
        wall, _, children, _ = watched(xargs)
        theirs.append(wall)
        bare_cpu.append(children / n)
        serial.append(watched(loop)[0])
        small_peaks.append(watched(jaxrun(small))[3])
    m, x, s = median(ours), median(theirs), median(serial)
    growth = (median(peaks) - median(small_peaks)) / (n - small) * 1024  # bytes a result (VmHWM is in KiB)
    how = f"median of {runs}, interleaved, {n} scripts `{TINY!r}`"
    return [Row(f"{n} tiny scripts, `jaxrun run --jobs {jobs}` against `xargs -P{jobs} -n1 python`",
                f"x{m / x:.2f} ({m:.1f} s vs {x:.1f} s; a plain `for` loop: {s:.1f} s)", "x1.0", m / x <= 1.0, how),
            Row("jaxrun's own CPU a script", f"{median(own) * 1000:.1f} ms (the scripts' processes: "
                f"{median(script_cpu) * 1000:.1f} ms a script, under xargs {median(bare_cpu) * 1000:.1f} ms)",
                "10 ms", median(own) <= 0.010,
                "jaxrun's process's own utime+stime (/proc/PID/stat before it is reaped), not its children's"),
            Row(f"jaxrun's peak RSS, {n} against {small} scripts", f"{median(peaks) / 1024:.0f} MiB vs "
                f"{median(small_peaks) / 1024:.0f} MiB: {growth / 1000:+.1f} KB a result", "2 KB a result",
                growth <= 2000, f"VmHWM of jaxrun's process, medians of {runs}")]


def ray_cluster(tmp: Path, n: int, jobs: int = 2) -> list[Row]:
    """``n`` tiny scripts (TINY) with ``jaxrun run DIR --backend ray --jobs 2`` over a local
    two-node Ray cluster (bench_ray_cluster: two ``ray start``, one CPU each), then the same
    folder with a local ``--jobs 2``: one run each (a 10,000-script run takes a quarter of an
    hour). Every script must have one successful result in one attempt; the wall time, jaxrun's
    own CPU a script (its process's utime + stime; under Ray the scripts run in Ray's workers, not
    in jaxrun's children) and its peak RSS, and which node ran how many."""
    import bench_ray_cluster

    folder = tmp / f"ray_tiny_{n}"
    folder.mkdir()
    for i in range(n):
        (folder / f"s{i:05d}.py").write_text(TINY)
    common = ["--jobs", str(jobs), "--no-history", "--no-config", "-q"]
    with bench_ray_cluster.two_node_cluster(ENV) as (address, nodes):
        wall, own, _, peak = watched([*JAXRUN, "run", str(folder), "--backend", "ray", "--ray-address", address,
                                      *common, "--results-dir", str(tmp / "r_ray")])
    on_ray = bench_ray_cluster.completeness(tmp / "r_ray", n)
    l_wall, l_own, l_children, l_peak = watched([*JAXRUN, "run", str(folder), *common, "--results-dir", str(tmp / "r_local")])
    local = bench_ray_cluster.completeness(tmp / "r_local", n)
    where = "; ".join(f"{'head' if nodes.get(node) else 'worker' if node in nodes else node} {count}"
                      for node, count in sorted(on_ray["by_node"].items(), key=lambda kv: str(kv[0])))
    how = (f"one run each, {n} scripts `{TINY!r}`, a head and a worker node (`ray start --num-cpus 1`) on this "
           "machine; own CPU: jaxrun's process's utime+stime (/proc)")
    return [Row(f"{n} tiny scripts over a 2-node Ray, `--backend ray --jobs {jobs}`",
                f"{bench_ray_cluster.describe(on_ray, n)}; {wall:.1f} s ({wall / n * 1000:.0f} ms a script); by node: {where}; "
                f"local `--jobs {jobs}`: {bench_ray_cluster.describe(local, n)}, {l_wall:.1f} s (x{wall / l_wall:.2f} under Ray)",
                "every script once", on_ray["ok"] and local["ok"], how),
            Row(f"jaxrun's own CPU a script, {n} scripts over Ray", f"{own / n * 1000:.1f} ms (local `--jobs {jobs}`: "
                f"{l_own / n * 1000:.1f} ms; the local scripts' processes {l_children / n * 1000:.1f} ms a script); "
                f"peak RSS {peak / 1024:.0f} MiB (local {l_peak / 1024:.0f} MiB)", "10 ms", own / n <= 0.010, how)]


def slurm_cluster(tmp: Path, n: int, jobs: int = 2) -> list[Row]:
    """``n`` tiny scripts (TINY) with ``jaxrun run DIR --backend slurm --jobs 2``: one Slurm job
    array (``%2``) on a private single-node Slurm (bench_slurm_cluster: the test suite's cluster,
    its own daemons on this machine), then the same folder with a local ``--jobs 2``: one run each,
    as the Ray row. Every script must have one successful result in one attempt, from a task id of
    its own in one array; the wall time, jaxrun's own CPU a script (its process's utime + stime:
    the scripts run under slurmstepd, not as jaxrun's children), its peak RSS, and the queue waits
    the results record (submission to the task's start on the node)."""
    import bench_slurm_cluster

    folder = tmp / f"slurm_tiny_{n}"
    folder.mkdir()
    for i in range(n):
        (folder / f"s{i:05d}.py").write_text(TINY)
    common = ["--jobs", str(jobs), "--no-history", "--no-config", "-q"]
    with bench_slurm_cluster.private_cluster() as cluster:
        wall, own, _, peak = watched([*JAXRUN, "run", str(folder), "--backend", "slurm", *common,
                                      "--results-dir", str(tmp / "r_slurm")], env={**ENV, **cluster.env})
    on_slurm = bench_slurm_cluster.completeness(tmp / "r_slurm", n)
    l_wall, l_own, l_children, l_peak = watched([*JAXRUN, "run", str(folder), *common, "--results-dir", str(tmp / "r_local")])
    local = bench_slurm_cluster.completeness(tmp / "r_local", n)
    ok = on_slurm["ok"] and on_slurm["task_ids"] == n and on_slurm["arrays"] == 1 and local["ok"]
    where = "; ".join(f"{node} {count}" for node, count in sorted(on_slurm["by_node"].items(), key=lambda kv: str(kv[0])))
    how = (f"one run each, {n} scripts `{TINY!r}`, one node (`CPUs={cluster.cpus}`, the test suite's "
           "tests/slurm_cluster.py) on this machine; own CPU: jaxrun's process's utime+stime (/proc)")
    return [Row(f"{n} tiny scripts as one Slurm job array, `--backend slurm --jobs {jobs}`",
                f"{bench_slurm_cluster.describe(on_slurm, n)}; {bench_slurm_cluster.describe_slurm(on_slurm, n)}; "
                f"{wall:.1f} s ({wall / n * 1000:.0f} ms a script); by node: {where}; local `--jobs {jobs}`: "
                f"{bench_slurm_cluster.describe(local, n)}, {l_wall:.1f} s (x{wall / l_wall:.2f} under Slurm)",
                "every script once", ok, how),
            Row(f"jaxrun's own CPU a script, {n} scripts on Slurm", f"{own / n * 1000:.1f} ms (local `--jobs {jobs}`: "
                f"{l_own / n * 1000:.1f} ms; the local scripts' processes {l_children / n * 1000:.1f} ms a script); "
                f"peak RSS {peak / 1024:.0f} MiB (local {l_peak / 1024:.0f} MiB)", "10 ms", own / n <= 0.010, how)]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{platform.machine()}, {os.cpu_count()} cores ({cpu}), {memory / 2**30:.0f} GiB, "
            f"load average {load:.2f} at the start")


def table(rows: list[Row]) -> str:
    lines = ["| budget | measured | limit | | how |", "|---|---|---|---|---|"]
    for r in rows:
        verdict = "-" if r.ok is None else ("pass" if r.ok else "**FAIL**")
        lines.append(f"| {r.budget} | {r.measured} | {r.limit} | {verdict} | {r.how} |")
    return "\n".join(lines)


def write_readme(text: str) -> None:
    path = HERE / "README.md"
    old = path.read_text(encoding="utf-8") if path.exists() else "# jaxrun benchmarks\n"
    head = old.split(MARKER)[0].rstrip()
    path.write_text(f"{head}\n\n{MARKER}\n\n{text}\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--runs", type=int, default=7, help="Interleaved measurements per figure (medians).")
    parser.add_argument("--no-write", action="store_true", help="Print only; leave benchmarks/README.md alone.")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="The jaxrun tree to install and measure, as "
                        "it is (uncommitted changes included); default: this repository.")
    parser.add_argument("--fresh-venv", action="store_true", help="Build the environment of jaxrun's dependencies "
                        "anew (pip installs their newest releases), rather than reuse the cached one.")
    parser.add_argument("--scripts", type=int, default=1000, help="Tiny scripts in the --jobs 2 sweep (fewer: a quick run).")
    parser.add_argument("--only-sweep", action="store_true", help="Only the tiny-script sweep and the folder of "
                        "small JAX scripts under --prestart jax (implies --no-write).")
    parser.add_argument("--only-batch", action="store_true",
                        help="Only the trivial script and the 10-script folder (implies --no-write).")
    parser.add_argument("--only-scale", action="store_true",
                        help="Only the start-up with 10,000 scripts against one (implies --no-write).")
    parser.add_argument("--only-ray", action="store_true", help="Only --scripts tiny scripts over a local 2-node "
                        "Ray cluster against local --jobs 2, one run each (implies --no-write; this interpreter and "
                        "the checkout's src, not an install: the environment has no Ray).")
    parser.add_argument("--only-slurm", action="store_true", help="Only --scripts tiny scripts as one job array on a "
                        "private single-node Slurm against local --jobs 2, one run each (implies --no-write; this "
                        "interpreter and the checkout's src, not an install, as --only-ray).")
    args = parser.parse_args()
    began = time.perf_counter()
    if args.only_ray or args.only_slurm:
        _only_ray(args)
    install = user_install.install(args.checkout, fresh=args.fresh_venv)
    use(install)
    print(f"measuring {install.describe()}\n{install.versions}", flush=True)
    where = machine()
    with tempfile.TemporaryDirectory(prefix="jaxrun-bench-") as tmp_name:
        tmp = Path(tmp_name)
        # Once untimed: jaxrun's device facts are cached after a first run (a user's second run).
        warm = subprocess.run([*JAXRUN, "run", str(_script(tmp, "warm.py", JIT_BODY)), "--no-history", "--no-config",
                               "-q", "--results-dir", str(tmp / "r_warm")], env=ENV, capture_output=True, text=True)
        if warm.returncode != 0:
            sys.exit(f"the installed jaxrun failed on a one-script run:\n{warm.stdout}{warm.stderr}")
        sweep_runs, few = max(3, args.runs // 2), max(3, args.runs // 2)
        if args.only_sweep or args.only_scale or args.only_batch:
            print(table(measured(
                [lambda: tiny_sweep(sweep_runs, tmp, args.scripts), lambda: prestarted_jax_folder(few, tmp)]
                if args.only_sweep else
                [lambda: first_line_at_scale(args.runs, tmp)] if args.only_scale else
                [lambda: per_script_cost(args.runs, tmp), lambda: marginal_cost(args.runs, tmp)])))
            return
        rows = measured([
            lambda: help_time(args.runs), lambda: library_floor(args.runs), lambda: first_line_time(args.runs, tmp),
            lambda: first_line_at_scale(args.runs, tmp), lambda: teardown_time(args.runs, tmp),
            lambda: per_script_cost(args.runs, tmp), lambda: marginal_cost(args.runs, tmp),
            lambda: tiny_sweep(sweep_runs, tmp, args.scripts), lambda: prestarted_jax_folder(few, tmp),
            lambda: result_writing(tmp), lambda: discovery(tmp),
            lambda: discovery_huge_file(args.runs, tmp), lambda: discovery_huge_notebook(args.runs, tmp),
            lambda: compile_cache(few, tmp), lambda: cache_under_jobs(tmp)])
    minutes = (time.perf_counter() - began) / 60
    text = (f"## Budgets (`python benchmarks/run.py --runs {args.runs}`)\n\nMeasured {date.today()} on {where}, "
            f"{os.getloadavg()[0]:.2f} at the end ({minutes:.0f} minutes); {install.versions}.\n\n"
            f"Measured: {install.describe()}.\n\n{table(rows)}\n")
    print(text)
    if not args.no_write:
        write_readme(text)
        print(f"written to {HERE / 'README.md'}")
    if any(r.ok is False for r in rows):
        sys.exit(1)


def _script(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def measured(parts: list[Callable[[], Row | list[Row]]]) -> list[Row]:
    """The rows of each part, each with the load average when it was measured."""
    rows: list[Row] = []
    for part in parts:
        got = part()
        load = os.getloadavg()[0]
        for row in got if isinstance(got, list) else [got]:
            row.how = f"{row.how}; load {load:.1f}"
            rows.append(row)
            print(table([row]).splitlines()[-1], flush=True)
    return rows


def _only_ray(args: argparse.Namespace) -> None:
    """--only-ray, --only-slurm: this interpreter with the checkout's src first on its path (Ray is
    not in the measured environment; Slurm's row is measured as Ray's, so the two compare)."""
    global ENV
    src = str(args.checkout.resolve() / "src")
    sys.path.insert(0, src)
    ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    with tempfile.TemporaryDirectory(prefix="jaxrun-bench-") as tmp_name:
        rows = (slurm_cluster if args.only_slurm else ray_cluster)(Path(tmp_name), args.scripts)
    print(table(rows))
    sys.exit(1 if any(r.ok is False for r in rows) else 0)


if __name__ == "__main__":
    main()
