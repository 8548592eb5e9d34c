"""A large folder's plan is made while its first scripts run (plan/batch_plan.py): the first script
starts before the last file is read, every script runs once, in batch order, and what the plan
finds late (the total, a bad '# jaxrun:' comment) reaches every surface.

The in-process tests use run_batch's ``run_job`` seam to stand in for running a script (what
is tested is the plan and the executors, and thousands of real processes would take minutes);
the last test runs real scripts through the command line."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from helpers import jaxrun

from jaxrun.batch.pipeline import run_batch
from jaxrun.config.options import BatchOptions
from jaxrun.errors import UsageError
from jaxrun.plan import batch_plan as plan_module
from jaxrun.results import result_files
from jaxrun.results.models import BatchResult, ScriptResult
from jaxrun.results.provenance import script_identity
from jaxrun.plan.sink import BaseSink

N = 1500
GATE = 400  # the plan waits at this script until the first job has run


def folder(root: Path, bad: int | None = None) -> Path:
    for i in range(N):
        header = "# jaxrun: timeout=fast\n" if i == bad else ""
        (root / "s").mkdir(exist_ok=True)
        (root / "s" / f"s{i:04d}.py").write_text(f"{header}import jax\n")
    return root / "s"


class Seen(BaseSink):
    def __init__(self) -> None:
        self.totals: list[int | None] = []

    def on_start(self, job, total):  # type: ignore[no-untyped-def]
        self.totals.append(total)


def gated(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[str]]:
    """The plan stops at script GATE until the first job has run; the jobs run (stand-in) are listed."""
    first_ran = threading.Event()
    ran: list[str] = []
    real = plan_module.plan_script

    def slow(options, script, name):  # type: ignore[no-untyped-def]
        if name == f"s{GATE:04d}":
            assert first_ran.wait(30), "the first script did not run before the plan's end"
        return real(options, script, name)

    monkeypatch.setattr(plan_module, "plan_script", slow)
    return first_ran, ran


def instant(first_ran: threading.Event, ran: list[str]):  # type: ignore[no-untyped-def]
    lock = threading.Lock()

    def run_job(job, options, **_):  # type: ignore[no-untyped-def]
        with lock:
            ran.append(job.name)
        first_ran.set()
        # What --resume matches an earlier result by: the script's content and the run options.
        return ScriptResult(script_name=job.name, script_path=str(job.script), success=True, outcome="passed",
                            device_requested=job.device, device_used="cpu", execution_time=0.01,
                            started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:01Z",
                            content_hash=script_identity(job.script)[1], options_key=options.key)

    return run_job


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_the_first_script_runs_before_the_plan_has_read_the_folder_and_each_runs_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    first_ran, ran = gated(monkeypatch)
    seen = Seen()
    options = BatchOptions.build("api", paths=[folder(tmp_path)], results_dir=tmp_path / "r", history=False,
                                 device="cpu", jobs=jobs)
    batch = run_batch(options, run_job=instant(first_ran, ran), sinks=[seen])

    names = [f"s{i:04d}" for i in range(N)]
    assert sorted(ran) == names  # each once
    if jobs == 1:
        assert ran == names  # in batch order
    assert seen.totals[0] is None and seen.totals[-1] == N  # the total is said once it is known
    assert batch.metadata.complete and batch.metadata.scripts_found == N
    assert [r.script_name for r in batch.script_results] == names
    on_disk = result_files.read_model(tmp_path / "r" / result_files.EXECUTION_RESULTS, BatchResult)
    assert on_disk.metadata.scripts_found == N and len(on_disk.script_results) == N
    log = (tmp_path / "r" / result_files.EXECUTION_LOG).read_text().splitlines()
    assert "scripts found as they run" in log[0]
    found = next(i for i, line in enumerate(log) if f"found {N} scripts" in line)
    assert any("[1/?] start" in line for line in log[:found])  # the first script started before


@pytest.mark.slow
def test_a_bad_comment_found_late_stops_the_batch_in_one_line_and_resume_runs_the_rest_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = GATE + 100
    first_ran, ran = gated(monkeypatch)
    scripts = folder(tmp_path, bad=bad)
    options = BatchOptions.build("api", paths=[scripts], results_dir=tmp_path / "r", history=False, device="cpu")
    with pytest.raises(UsageError) as stopped:
        run_batch(options, run_job=instant(first_ran, ran))
    message = str(stopped.value)
    assert f"s{bad:04d}.py:1" in message and "timeout" in message and "--resume" in message
    assert "\n" not in message
    assert ran and len(ran) == len(set(ran))
    on_disk = result_files.read_model(tmp_path / "r" / result_files.EXECUTION_RESULTS, BatchResult)
    assert not on_disk.metadata.complete
    kept = {r.script_name for r in on_disk.script_results if r.error_class != "interrupted"}
    assert kept == set(ran)  # what ran is in the files; the rest is marked not run
    assert all("not run" in (r.error_message or "") for r in on_disk.script_results if r.error_class == "interrupted")

    (scripts / f"s{bad:04d}.py").write_text("# jaxrun: timeout=60\nimport jax\n")
    again: list[str] = []
    resume = BatchOptions.build("api", paths=[scripts], results_dir=tmp_path / "r", history=False, device="cpu",
                                resume=True)
    resumed = run_batch(resume, run_job=instant(threading.Event(), again))
    assert resumed.metadata.complete and len(resumed.script_results) == N
    assert sorted(ran + again) == [f"s{i:04d}" for i in range(N)]  # nothing run twice, nothing left out


TINY = """\
if False:
    import jax
import os
with open(os.environ["RUNS_FILE"], "a") as f:
    f.write(os.path.basename(__file__) + "\\n")
"""


@pytest.mark.slow
def test_a_folder_larger_than_the_plan_ahead_runs_every_script_once_from_the_command_line(tmp_path: Path) -> None:
    count = plan_module.PLAN_AHEAD_JOBS * 2 + 7
    (tmp_path / "s").mkdir()
    for i in range(count):
        (tmp_path / "s" / f"t{i:03d}.py").write_text(TINY)
    runs = tmp_path / "runs.txt"
    proc = jaxrun("run", tmp_path / "s", "--jobs", "2", "--no-history", "--no-config", "--results-dir", tmp_path / "r",
                  "--json", timeout=600, env={"RUNS_FILE": str(runs)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(runs.read_text().split()) == [f"t{i:03d}.py" for i in range(count)]
    starts = [line for line in proc.stderr.splitlines() if line.startswith("[") and line.endswith("...")]
    assert len(starts) == count
    assert starts[-1].startswith(f"[{count}/{count}]")
    batch = json.loads(proc.stdout)
    assert batch["metadata"]["scripts_found"] == count and batch["metadata"]["complete"]
