"""``--markdown FILE`` and ``$GITHUB_STEP_SUMMARY``: the run summary as Markdown tables, failures and
regressions first, then every script. End to end through the real CLI; the regression row is
checked on a crafted result (a real history regression takes many runs; tests/interfaces/test_cli_analysis.py
has that story)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import table_rows, write

from jaxrun.outputs.markdown import render_markdown
from jaxrun.present.view import view_batch
from jaxrun.results.models import (
    BatchMetadata,
    BatchResult,
    PerformanceSummary,
    PhaseComparison,
    RegressionCheck,
    ScriptComparison,
)

GOOD = """\
import jax
import jax.numpy as jnp
print(float(jax.jit(lambda x: x.sum())(jnp.arange(3.0))))
"""
FAILS = """\
import jax
raise ValueError("bad | input")
"""


@pytest.mark.slow
def test_markdown_file_and_github_step_summary(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "a_good.py", GOOD)
    write(folder, "b_fails.py", FAILS)
    write(folder, "c_good.py", GOOD)
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step output\n")
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    env.pop("JAX_PLATFORMS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "run", str(folder), "--device", "cpu", "--results-dir",
         str(tmp_path / "r"), "--markdown", str(tmp_path / "report.md"), "--no-compile-cache"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 1, proc.stderr  # one script failed
    text = (tmp_path / "report.md").read_text()
    # The heading says the exit status and why, as the terminal's last line does.
    assert text.startswith("## jaxrun: 2/3 scripts succeeded — exit 1: 1 script failed (b_fails.py)\n")
    attention = table_rows(text, "Failures and regressions")
    assert [(r[0], r[1], r[2]) for r in attention] == [("b_fails.py", "script_error", "cpu")]
    assert attention[0][-1] == "ValueError: bad | input at b_fails.py:2"  # the pipe survives, escaped
    every = table_rows(text, "Every script")
    assert [(r[0], r[1]) for r in every] == [("a_good.py", "ok"), ("b_fails.py", "script_error"), ("c_good.py", "ok")]
    assert all(len(r) == 12 for r in every)
    assert every[0][3] != "-" and float(every[0][3]) > 0  # a measured time, not a placeholder
    # The step summary keeps what earlier steps wrote and gets the same report appended.
    assert summary.read_text() == "earlier step output\n" + text + "\n"


@pytest.mark.slow
def test_without_markdown_nothing_is_written_to_the_step_summary(tmp_path: Path) -> None:
    write(tmp_path / "s", "a_good.py", GOOD)
    summary = tmp_path / "step_summary.md"
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "run", str(tmp_path / "s"), "--device", "cpu", "--results-dir",
         str(tmp_path / "r"), "--no-compile-cache"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert not summary.exists()


def _result(name: str, *, success: bool = True, regression: bool = False) -> dict:
    bench = None
    if regression:
        run = PhaseComparison(metric="run_time", base_n=10, new_n=5, base_median=1.0, new_median=1.3, ratio=1.3,
                              p_value=0.001, verdict="slower")
        comparison = ScriptComparison(script_name=name, device="cpu", verdict="slower", gate=["run_time"],
                                      slower=["run_time"], phases={"run_time": run})
        bench = dict(script_name=name, script_path=f"/x/{name}.py", device_requested="cpu", device_used="cpu",
                     benchmark_runs=5, warmup_runs=0, runs_completed=5,
                     history_check=RegressionCheck(script_path=f"/x/{name}.py", device="cpu", host="h",
                                                   gate=["run_time"], newest_run_id=3, previous_runs=2,
                                                   comparison=comparison, regression=True))
    return dict(script_name=name, script_path=f"/x/{name}.py", success=success,
                error_class=None if success else "timeout", error_message=None if success else "stopped",
                device_requested="cpu", device_used="cpu", execution_time=1.5, started_at="t", finished_at="t",
                benchmark=bench)


def test_regressions_are_listed_first_with_their_ratio() -> None:
    meta = BatchMetadata(jaxrun_version="0", device_requested="cpu", device_used="cpu", jax_version=None,
                         execution_timestamp="t", scripts_found=3, scripts_executed=3, scripts_successful=2,
                         scripts_failed=1, search_paths=["/x"], results_dir="/r", host="h", python_version="3",
                         complete=True)
    batch = BatchResult.model_validate(dict(
        metadata=meta, device_info=None, performance_summary=PerformanceSummary(),
        script_results=[_result("fine"), _result("slow", regression=True), _result("late", success=False)],
    ))
    text = render_markdown(view_batch(batch))
    attention = table_rows(text, "Failures and regressions")
    assert [(r[0], r[1]) for r in attention] == [("slow.py", "ok"), ("late.py", "timeout")]
    assert attention[0][-2] == "slower than 2 earlier runs: run_time x1.300 p=0.001"  # the verdict column
    assert attention[1][-1] == "stopped"  # the details: what went wrong
    assert [r[0] for r in table_rows(text, "Every script")] == ["fine.py", "slow.py", "late.py"]
