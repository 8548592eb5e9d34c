"""What the run's view decides once, every surface says: the ranking of the scripts by time (the
results file's slowest/fastest script and the terminal's ``slowest:`` line), failed scripts and
scripts kept by --resume included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import html_rows, jaxrun, load, tables, write, write_notebook

NO_JAX = "if False:\n    import jax\n"


def _slowest_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("slowest: "))


def _ranked(line: str) -> list[str]:
    """The labels the ``slowest:`` line names, in its order."""
    return re.findall(r"(?:slowest: |, )(\S+) \d+\.\d\d s", line)


@pytest.mark.slow
def test_slowest_and_fastest_are_one_ranking_with_failed_and_kept_scripts(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src, "quick.py", NO_JAX + "print('quick')\n")
    # A second apart: a script's start varies by tenths of a second on a loaded machine (quick.py,
    # run again alone by --resume, once took 0.62 s where mid.py's kept 0.4 s sleep took less).
    write(src, "mid.py", NO_JAX + "import time\ntime.sleep(1.0)\n")
    write(src, "fails.py", NO_JAX + "import time\ntime.sleep(2.0)\nraise ValueError('boom')\n")
    write(src, "slow.py", NO_JAX + "import time\ntime.sleep(60)\n")  # stopped by the time limit: the slowest
    results = tmp_path / "r"
    done = jaxrun("run", src, "--results-dir", results, "--no-history", "--timeout", "4", "-q")
    assert done.returncode == 1, done.stderr
    summary = load(results / "jax_execution_results.json")["performance_summary"]
    # A failed script (a timeout) is where the batch's time went: the file names it as the terminal does.
    assert summary["slowest_script"] == "slow" and summary["fastest_script"] == "quick"
    line = _slowest_line(done.stdout)
    assert line.startswith("slowest: slow.py ") and "(timeout)" in line and "and 1 more" in line, line
    assert _ranked(line) == ["slow.py", "fails.py", "mid.py"]

    # quick.py changes: --resume runs it again and keeps the three others, which stay in the ranking.
    write(src, "quick.py", NO_JAX + "print('quick, changed')\n")
    again = jaxrun("run", src, "--results-dir", results, "--no-history", "--timeout", "4", "-q", "--resume")
    assert again.returncode == 1, again.stderr
    batch = load(results / "jax_execution_results.json")
    assert sum(r["kept"] for r in batch["script_results"]) == 3
    line = _slowest_line(again.stdout)
    assert _ranked(line) == ["slow.py", "fails.py", "mid.py"], line
    assert "slow.py" in line and "(timeout, kept)" in line and "mid.py" in line and "(kept)" in line
    by_time = sorted(batch["script_results"], key=lambda r: -r["execution_time"])
    summary = batch["performance_summary"]
    assert summary["slowest_script"] == by_time[0]["script_name"] == "slow"
    assert summary["fastest_script"] == by_time[-1]["script_name"]
    # The table's times are the line's.
    for label in _ranked(line):
        row = next(row for row in again.stdout.splitlines() if row.startswith(label + " "))
        time_cell = re.search(rf"{re.escape(label)} (\d+\.\d\d) s", line).group(1)  # type: ignore[union-attr]
        assert f" {time_cell} " in row, (row, line)


# --------------------------------------------------------------------------- one label everywhere

LEAKS = """\
# jaxrun: entry="main" warm_calls=4
import jax.numpy as jnp
kept = []
def main():
    kept.append(jnp.zeros((250,), jnp.float32))  # 1,000 bytes a call, never let go: a leak warning
    return jnp.ones(3) * 2
"""


@pytest.mark.slow
def test_every_surface_names_a_script_in_a_subfolder_and_a_notebook_alike(tmp_path: Path) -> None:
    """sub/sleep1.py, sub/leaks.py and nb.ipynb read the same on the terminal, in Markdown, the HTML
    report, the CSV and JSON exports, JUnit, compare's exports, the history, the warm table and its
    leak warning: the path under the folder given, a notebook keeping its .ipynb."""
    import csv
    import io
    import xml.etree.ElementTree as ET


    src, out, history = tmp_path / "src", tmp_path / "r", tmp_path / "h.sqlite"
    write(src, "sub/sleep1.py", NO_JAX + "import time\ntime.sleep(0.05)\n")
    write(src, "sub/leaks.py", LEAKS)
    write_notebook(src, "nb.ipynb", ["if False:\n    import jax\nx = 1", "print(x + 1)"])
    labels = {"sub/sleep1.py", "sub/leaks.py", "nb.ipynb"}
    done = jaxrun("run", src, "--results-dir", out, "--history", history, "--device", "cpu", "--benchmark-runs", 2,
                  "--export-csv", tmp_path / "x.csv", "--export-json", tmp_path / "x.json",
                  "--junit-xml", tmp_path / "j.xml", "--markdown", tmp_path / "m.md", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    terminal = {line.split()[0] for line in done.stdout.splitlines()[2:] if line.split()[:1] and
                line.split()[0] in labels | {"sub/sleep1", "sub__sleep1", "nb", "sub/leaks", "sub__leaks"}}
    assert terminal == labels, done.stdout
    markdown = {row[0] for row in tables((tmp_path / "m.md").read_text())["Every script"][1:]}
    assert markdown == labels
    assert jaxrun("report", out, "-o", tmp_path / "r.html").returncode == 0
    assert set(html_rows(tmp_path / "r.html")) == labels
    assert {row["script"] for row in csv.DictReader(io.StringIO((tmp_path / "x.csv").read_text()))} == labels
    assert {row["command"] for row in load(tmp_path / "x.json")["results"]} == labels
    assert {case.get("name") for case in ET.parse(tmp_path / "j.xml").iter("testcase")} == labels
    # Compare's exports of the run against itself.
    compared = jaxrun("compare", out, out, "--export-csv", tmp_path / "c.csv", "--export-json", tmp_path / "c.json")
    assert compared.returncode == 0, compared.stderr
    assert {row["script"] for row in csv.DictReader(io.StringIO((tmp_path / "c.csv").read_text()))} == labels
    assert {s["script"] for s in load(tmp_path / "c.json")["samples"]["new"]} == labels
    # The history of the benchmarked scripts.
    shown = jaxrun("history", "--history", history)
    assert shown.returncode == 0, shown.stderr
    table = shown.stdout[:shown.stdout.index(": run_time per run")]
    assert {line.split()[0] for line in table.splitlines() if line.split()[:1] and line.split()[0] in
            labels | {"sub__sleep1", "nb", "sub__leaks"}} == labels, shown.stdout
    assert all(f"{label}: run_time per run" in shown.stdout for label in labels), shown.stdout
    # Warm mode's table and its leak warning.
    warm = done.stdout[done.stdout.index("warm mode:"):]
    assert any(line.startswith("sub/leaks.py ") for line in warm.splitlines()), warm
    assert "warning: sub/leaks.py: live array bytes grew" in done.stderr, done.stderr


@pytest.mark.slow
def test_exports_hold_what_was_measured_of_a_failed_script_as_the_table_and_junit_do(tmp_path: Path) -> None:
    import csv
    import io
    import xml.etree.ElementTree as ET

    src = tmp_path / "src"
    write(src, "ok.py", NO_JAX + "print(1)\n")
    write(src, "raises.py", NO_JAX + "import time\ntime.sleep(0.3)\nraise ValueError('boom')\n")
    write(src, "slow.py", NO_JAX + "import time\ntime.sleep(60)\n")
    write(src, "exits.py", NO_JAX + "import os\nos._exit(3)\n")
    done = jaxrun("run", src, "--results-dir", tmp_path / "r", "--no-history", "--timeout", "2", "-q",
                  "--export-csv", tmp_path / "x.csv", "--export-json", tmp_path / "x.json", "--junit-xml",
                  tmp_path / "j.xml")
    assert done.returncode == 1, done.stderr
    results = {r["script_name"]: r for r in load(tmp_path / "r" / "jax_execution_results.json")["script_results"]}
    table = {line.split()[0]: line for line in done.stdout.splitlines() if line.split()[:1]
             and line.split()[0].endswith(".py")}
    exported = {row["command"]: row for row in load(tmp_path / "x.json")["results"]}
    rows = {row["script"]: row for row in csv.DictReader(io.StringIO((tmp_path / "x.csv").read_text()))}
    junit = {case.get("name"): case for case in ET.parse(tmp_path / "j.xml").iter("testcase")}
    assert set(exported) == set(rows) == set(junit) == {"ok.py", "raises.py", "slow.py", "exits.py"}
    for label, row in exported.items():
        result = results[row["name"]]
        wall = result["execution_time"]
        assert wall is not None, label  # every one of them ran: its process was timed
        assert row["success"] is result["success"] and row["runs"] == 1 and row["times"] == [wall], (label, row)
        assert row["median"] == row["mean"] == row["min"] == row["max"] == wall and row["stddev"] is None
        assert row["samples"]["import_time"] == ([] if result["import_time"] is None else [result["import_time"]])
        assert float(rows[label]["median"]) == wall and rows[label]["runs"] == "1"
        assert f" {wall:.2f} " in table[label]  # the table's time s
        assert junit[label].get("time") == f"{wall:.3f}"
    assert exported["slow.py"]["error_class"] == "timeout" and exported["slow.py"]["median"] >= 2
