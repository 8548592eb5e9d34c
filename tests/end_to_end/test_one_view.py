"""One view of a run: a rich results folder read through every surface a user reads it
by (the terminal's summary, the Markdown GitHub renders, the HTML report, the MCP reply, the
result file) states the same figures and verdicts for every script, and the same exit reason.

The folder holds what makes surfaces disagree: a benchmarked script whose later runs load their
executables from the compilation cache, a failure with a multi-line message, a GPU request that
falls back to the CPU, an expected failure (xfail), a skipped script, scripts kept by --resume,
two devices (every label says which), and a baseline run for the report's verdicts.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import anyio
import pytest
from helpers import (
    html_rows,
    jaxrun,
    load,
    mcp_call,
    mcp_session,
    table_rows,
    tables,
    write,
)

pytest.importorskip("plotly")
mcp = pytest.importorskip("mcp")

# One rich run (two devices, a baseline, every surface) feeds every test here: ~45 s.
pytestmark = pytest.mark.slow

STEADY = """\
# jaxrun: benchmark_runs=3 warmup_runs=0
import jax
import jax.numpy as jnp
import numpy as np

# Exactly two programs: numpy inputs and float() of the results compile nothing else.
f = jax.jit(lambda x: jnp.tanh(x @ x).sum())
g = jax.jit(lambda x: (x * 2.0).max())
print(float(f(np.ones((32, 32), np.float32))), float(g(np.ones(8, np.float32))))
"""
FAILS = """\
if False:
    import jax
def step():
    raise ValueError("diverged at step 3\\nloss was nan")
step()
"""
FALLBACK = "# jaxrun: device='gpu'\nimport jax\nprint(jax.numpy.ones(2).sum())\n"
EXPECTED = "# jaxrun: xfail='known bug'\nif False:\n    import jax\nraise RuntimeError('still broken')\n"
SKIPPED = "# jaxrun: skip='needs a TPU'\nimport jax\nprint('never')\n"

COLUMNS = ("script", "status", "device", "time s", "compiles", "verdict")


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("view")
    scripts = root / "scripts"
    write(scripts, "bench/steady.py", STEADY)
    write(scripts, "fails.py", FAILS)
    write(scripts, "fallback.py", FALLBACK)
    write(scripts, "expected.py", EXPECTED)
    write(scripts, "skipped.py", SKIPPED)
    write(scripts, "jaxrun.toml", 'device = "cpu,gpu"\n')  # two devices; fallback.py asks for its own
    history = root / "history.sqlite"

    def run(out: str, *more: object):  # type: ignore[no-untyped-def]
        done = jaxrun("run", scripts, "--results-dir", root / out, "--history", history, *more, timeout=600)
        assert done.returncode == 1, done.stdout + done.stderr  # fails.py fails on both devices
        return done

    run("base")
    run("new")
    # A change to the benchmarked script: --resume runs it again and keeps every other result.
    write(scripts, "bench/steady.py", STEADY + "# changed\n")
    terminal = run("new", "--resume", "--markdown", root / "new.md")
    assert jaxrun("report", root / "new", "-o", root / "report.html").returncode == 0
    done = jaxrun("report", root / "new", "-o", root / "against.html", "--baseline", root / "base")
    assert done.returncode == 0, done.stderr
    compared = jaxrun("compare", root / "base", root / "new", "--json")
    assert compared.returncode == 0, compared.stderr

    replies: dict = {}

    async def body(session) -> None:  # type: ignore[no-untyped-def]
        replies["monitor"] = await mcp_call(session, "execute.monitor_jax_performance", {"results_dir": "new"})

    anyio.run(mcp_session, root, body)
    return {"root": root, "terminal": terminal, "batch": load(root / "new" / "jax_execution_results.json"),
            "mcp": replies["monitor"]["structuredContent"], "compare": json.loads(compared.stdout)}


def terminal_rows(stdout: str) -> dict[str, dict[str, str]]:
    """The summary table as a reader sees it: the row of each script, by header."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("jaxrun results"))
    header = re.split(r"\s{2,}", lines[start + 1].strip())
    assert set(COLUMNS) <= set(header), header
    rows = {}
    for line in lines[start + 3:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != len(header):
            break
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def markdown_rows(path: Path) -> dict[str, dict[str, str]]:
    text = path.read_text(encoding="utf-8")
    header = tables(text)["Every script"][0]
    return {row[0]: dict(zip(header, row)) for row in table_rows(text, "Every script")}


LABELS = {"bench/steady.py @cpu", "bench/steady.py @gpu", "fails.py @cpu", "fails.py @gpu",
          "fallback.py", "expected.py @cpu", "expected.py @gpu"}  # @device: only a script run on two


def labelled(root: Path, results: list[dict]) -> dict[str, dict]:
    """The result file's scripts by the label a reader sees: the path under the folder given, and
    the device asked for when the script ran on more than one."""
    paths = [Path(r["script_path"]).relative_to(root / "scripts").as_posix() for r in results]
    return {p + (f" @{r['device_requested']}" if paths.count(p) > 1 else ""): r for p, r in zip(paths, results)}


def test_every_surface_states_the_same_figures_and_verdicts(rich: dict) -> None:
    root = rich["root"]
    terminal = terminal_rows(rich["terminal"].stdout)
    markdown = markdown_rows(root / "new.md")
    html = html_rows(root / "report.html")
    mcp_rows = {s["path"]: s for s in rich["mcp"]["scripts"]}
    results = labelled(root, rich["batch"]["script_results"])
    assert set(terminal) == set(markdown) == set(html) == set(mcp_rows) == set(results) == LABELS
    for label, result in results.items():
        t, m, h, reply = terminal[label], markdown[label], html[label], mcp_rows[label]
        time = "-" if result["execution_time"] is None else f"{result['execution_time']:.2f}"
        assert t["time s"] == m["time s"] == h["time s"], label  # a median marked alike in a mixed run
        assert t["time s"].removesuffix(" *") == time and t["time s"].endswith(" *") == bool(result["timing"]), label
        assert reply["execution_time"] == result["execution_time"] and reply["timing"] == result["timing"], label
        assert t["status"] == m["status"] == h["status"], label
        assert t["device"] == m["device"] == h["device"], label
        assert reply["device_used"] == result["device_used"] and reply["fallback_reason"] == result["fallback_reason"]
        assert t["compiles"] == m["compiles"] == h["compiles"], label
        assert m["verdict"] == h["verdict"] == (reply["verdict"] or "-"), label
        # The terminal's cell is the short form of the same verdict: its first word agrees.
        assert m["verdict"].split()[0].startswith(t["verdict"].split()[0]) or t["verdict"] == m["verdict"], label


def test_the_figures_are_what_happened(rich: dict) -> None:
    """Each surface's shared figures checked against what the folder's ground truth says."""
    terminal = terminal_rows(rich["terminal"].stdout)
    results = labelled(rich["root"], rich["batch"]["script_results"])
    steady = results["bench/steady.py @cpu"]
    walls = [s["wall_time"] for s in steady["benchmark"]["samples"]]
    assert len(walls) == 3 and steady["timing"] == "median of 3 counted runs"
    assert terminal["bench/steady.py @cpu"]["time s"] == f"{statistics.median(walls):.2f} *"  # the median, not the last
    # Runs 2 and 3 loaded both programs from the cache the first run wrote: "2 cached", never "0".
    assert steady["compile_count"] == 0 and steady["cache_hits"] == 2
    assert terminal["bench/steady.py @cpu"]["compiles"] == "2 cached"
    assert terminal["fallback.py"]["device"] == "cpu (fallback from gpu)"
    assert terminal["fails.py @cpu"]["status"] == "script_error (kept)"  # kept by --resume
    assert terminal["expected.py @cpu"]["status"] == "xfail (script_error) (kept)"
    assert terminal["bench/steady.py @cpu"]["status"] == "ok"  # ran again: its content changed
    stdout = rich["terminal"].stdout
    assert "failed: fails.py @cpu: script_error: ValueError: diverged at step 3 (+1 more line) at fails.py:4" in stdout
    assert f"  log: {rich['root'] / 'new' / 'logs' / 'fails@cpu.stderr.log'}" in stdout
    assert "fallback: fallback.py: ran on cpu instead of gpu: " in stdout
    assert "skipped: skipped.py: needs a TPU" in stdout


def test_the_exit_reason_is_the_same_everywhere(rich: dict) -> None:
    root = rich["root"]
    last = rich["terminal"].stdout.strip().splitlines()[-1]
    reason = "exit 1: 2 scripts failed (fails.py @cpu, fails.py @gpu)"
    assert last.endswith(reason) and last.startswith("3/7 succeeded, 2 failed as expected (xfail), 5 kept from the "
                                                     "earlier run, 1 skipped; results in "), last
    assert rich["mcp"]["summary"] == last and rich["mcp"]["exit_status"] == 1
    heading = (root / "new.md").read_text().splitlines()[0]
    assert heading == f"## jaxrun: 3/7 scripts succeeded — {reason}"
    assert f"<p class='heading'>3/7 scripts succeeded — {reason}</p>" in (root / "report.html").read_text()


def test_the_report_against_a_baseline_states_compare_s_verdicts(rich: dict) -> None:
    """The report's verdict column against a baseline is `jaxrun compare`'s verdict of each script."""
    html = html_rows(rich["root"] / "against.html")
    verdicts = {(c["script_name"], c["device"]): c["verdict"] for c in rich["compare"]["scripts"]}
    results = {label: (r["script_name"], r["device_used"])
               for label, r in labelled(rich["root"], rich["batch"]["script_results"]).items()}
    # compare names the scripts as the run's summary does (its JSON's "path"), not by file stem.
    paths = [c["path"] for c in rich["compare"]["scripts"]]
    assert paths and set(paths) <= LABELS and "bench/steady.py @cpu" in paths, paths
    judged = 0
    for label, key in results.items():
        if key in verdicts:
            judged += 1
            assert html[label]["verdict"].startswith(verdicts[key]), (label, html[label]["verdict"], verdicts[key])
    assert judged >= 2
