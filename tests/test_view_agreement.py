"""What the run's view decides once, every surface says: the ranking of the scripts by time (the
results file's slowest/fastest script and the terminal's ``slowest:`` line), failed scripts and
scripts kept by --resume included."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import jaxrun, load, write

NO_JAX = "if False:\n    import jax\n"


def _slowest_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("slowest: "))


def _ranked(line: str) -> list[str]:
    """The labels the ``slowest:`` line names, in its order."""
    return re.findall(r"(?:slowest: |, )(\S+) \d+\.\d\d s", line)


def test_slowest_and_fastest_are_one_ranking_with_failed_and_kept_scripts(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src, "quick.py", NO_JAX + "print('quick')\n")
    write(src, "mid.py", NO_JAX + "import time\ntime.sleep(0.4)\n")
    write(src, "fails.py", NO_JAX + "import time\ntime.sleep(0.8)\nraise ValueError('boom')\n")
    write(src, "slow.py", NO_JAX + "import time\ntime.sleep(60)\n")  # stopped by the time limit: the slowest
    results = tmp_path / "r"
    done = jaxrun("run", src, "--results-dir", results, "--no-history", "--timeout", "2.5", "-q")
    assert done.returncode == 1, done.stderr
    summary = load(results / "jax_execution_results.json")["performance_summary"]
    # A failed script (a timeout) is where the batch's time went: the file names it as the terminal does.
    assert summary["slowest_script"] == "slow" and summary["fastest_script"] == "quick"
    line = _slowest_line(done.stdout)
    assert line.startswith("slowest: slow.py ") and "(timeout)" in line and "and 1 more" in line, line
    assert _ranked(line) == ["slow.py", "fails.py", "mid.py"]

    # quick.py changes: --resume runs it again and keeps the three others, which stay in the ranking.
    write(src, "quick.py", NO_JAX + "print('quick, changed')\n")
    again = jaxrun("run", src, "--results-dir", results, "--no-history", "--timeout", "2.5", "-q", "--resume")
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
