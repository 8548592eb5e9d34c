"""Nothing heavy on the way to the first script: `jaxrun run` hands the first script to its process
before it imports a validation library, the result models, the sinks that write results, the
terminal's tables or the history; those are imported while the script runs. Read from jaxrun's
own start-up trace (``JAXRUN_STARTUP_TRACE_MODULES``: the modules each step imported), then the
results are checked to be whole (what was put off was done, not dropped)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import jaxrun, write

from jaxrun.plan.sink import BaseSink, Later, Sinks

HAND_OVER = "the job handed to its process"
# What the parent must not have imported when the first script's process gets its job. (msgspec
# is on the way: the plan's and the options' records are its structs, which cost ~0.02 ms a class
# to define where a dataclass costs ~0.6 ms; the result models are not.)
HEAVY = ("jaxrun.results.models", "jaxrun.outputs.batch_files", "jaxrun.outputs.script_files",
         "jaxrun.run.reading.result", "jaxrun.results.batch_summary", "jaxrun.judge.history", "sqlite3", "rich", "psutil", "numpy", "scipy",
         "jax", "jaxrun.interfaces.cli.tables", "jaxrun.present.view.batch_view", "tomllib", "_hashlib")


def _modules_by_step(trace: Path) -> list[tuple[str, list[str]]]:
    """Each step in order, with the modules imported since the one before."""
    steps: list[tuple[str, list[str]]] = []
    for line in trace.read_text().splitlines():
        if line.startswith("+ "):
            steps[-1][1].append(line[2:])
        else:
            steps.append((line.split(" ", 1)[1], []))
    return steps


def _before_hand_over(steps: list[tuple[str, list[str]]]) -> set[str]:
    seen: set[str] = set()
    for step, modules in steps:
        seen.update(modules)
        if step == HAND_OVER:
            return seen
    raise AssertionError(f"no '{HAND_OVER}' mark in the trace: {[step for step, _ in steps]}")


def _heavy(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in HEAVY)


@pytest.mark.slow
@pytest.mark.parametrize("flags", [(), ("--jobs", "2"), ("--benchmark-runs", "2", "--no-history"),
                                   ("--markdown", "{tmp}/summary.md", "--export-json", "{tmp}/all.json")])
def test_the_first_script_gets_its_job_before_anything_heavy_is_imported(tmp_path: Path, flags: tuple[str, ...]) -> None:
    # Found as JAX scripts, run without importing jax (the parent's start-up is what is read here).
    write(tmp_path / "s", "a.py", "if False:\n    import jax\nprint('ran a')\n")
    write(tmp_path / "s", "b.py", "if False:\n    import jax\nimport sys\nprint('ran b', sys.argv[1:])\n")
    trace = tmp_path / "trace.txt"
    # The device facts are read by a child once, then cached: the run traced is one that finds them.
    assert jaxrun("devices").returncode == 0
    # --no-config: a config file above the temporary folder (a checkout holding it) is read with tomllib.
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-config", *(f.format(tmp=tmp_path) for f in flags),
                  env={"JAXRUN_STARTUP_TRACE": str(trace), "JAXRUN_STARTUP_TRACE_MODULES": "1",
                       "JAXRUN_HISTORY": str(tmp_path / "h.sqlite")})
    assert done.returncode == 0, done.stderr
    steps = _modules_by_step(trace)
    # What Python's own start imports here (site, a .pth file) is not jaxrun's doing.
    python_start = set(subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
                                      capture_output=True, text=True, check=True).stdout.split())
    early = _before_hand_over(steps) - python_start
    heavy = sorted(m for m in early if _heavy(m))
    assert not heavy, f"imported before the first script had its job: {heavy}"
    # What was put off was done while the scripts ran: the results are whole.
    imported = {m for _, modules in steps for m in modules}
    assert {"msgspec", "jaxrun.results.models", "jaxrun.outputs.batch_files"} <= imported
    # pydantic is the MCP SDK's alone: a run never imports it.
    assert not {m for m in imported if m.split(".")[0] in ("pydantic", "pydantic_core")}
    batch = json.loads((tmp_path / "r" / "jax_execution_results.json").read_text())
    assert batch["metadata"]["complete"] is True and batch["metadata"]["scripts_successful"] == 2
    assert batch["metadata"]["execution_timestamp"] <= min(r["started_at"] for r in batch["script_results"])
    assert [r["script_name"] for r in batch["script_results"]] == ["a", "b"]
    assert (tmp_path / "r" / "jax_device_info.json").is_file()
    for name in ("a", "b"):
        assert json.loads((tmp_path / "r" / "script_results" / f"{name}_result.json").read_text())["success"] is True
    log = (tmp_path / "r" / "jax_execution_log.txt").read_text()
    assert log.index("start a.py") < log.index("a.py on cpu: ok")
    if "--jobs" not in flags:  # one at a time: the first ends before the second starts
        assert log.index("a.py on cpu: ok") < log.index("start b.py")


def test_a_bad_flag_is_refused_in_one_line_without_the_heavy_modules(tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", "import jax\n")
    for bad, said in ((("--x64", "--timeout", "soon"), "timeout must be a number of seconds"),
                      (("--device", "xpu"), "unknown device 'xpu'")):
        done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", *bad)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
        assert not (tmp_path / "r").exists()


class _Told(BaseSink):
    def __init__(self, told: list[str]) -> None:
        self.told = told

    def on_begin(self, jobs: object) -> None:
        self.told.append("begin")

    def on_start(self, job: object, total: int | None) -> None:
        self.told.append(f"start {job}")

    def on_result(self, job: object, result: object) -> object:
        self.told.append(f"result {job}")
        return f"{result}+seen"

    def on_end(self, batch: object) -> None:
        self.told.append("end")


def test_a_later_sink_is_told_what_happened_before_it_was_made_in_order() -> None:
    told: list[str] = []
    made: list[int] = []

    def make() -> _Told:
        made.append(1)
        return _Told(told)

    later = Later(make)
    chain = Sinks([_Told(told), later])
    chain.on_begin(None)  # type: ignore[arg-type]
    chain.on_start("a", 2)  # type: ignore[arg-type]
    assert told == ["begin", "start a"] and not made  # the first sink only: the later one is not made yet
    later.build()
    assert told == ["begin", "start a", "begin", "start a"] and made == [1]
    later.build()
    assert made == [1]  # once
    assert chain.on_result("a", "r") == "r+seen+seen"  # type: ignore[arg-type]
    result_first = Later(lambda: _Told(told))
    told.clear()
    result_first.on_start("b", 1)  # type: ignore[arg-type]
    assert result_first.on_result("b", "r") == "r+seen"  # type: ignore[arg-type]  # a result makes it now
    assert told == ["start b", "result b"]


REAPED = "the script's teardown (JAX's too), its process reaped"


@pytest.mark.slow
def test_nothing_is_imported_between_the_scripts_end_and_the_summary(tmp_path: Path) -> None:
    # What turns an ended process into its result, writes the files and prints the summary is
    # imported while the script runs: after its last line, jaxrun only builds, writes and prints.
    script = write(tmp_path, "slow.py", "import time\ntime.sleep(2.0)\nif False:\n    import jax\n")
    trace = tmp_path / "trace.txt"
    assert jaxrun("devices").returncode == 0
    done = jaxrun("run", script, "--results-dir", tmp_path / "r", "--no-config", "--no-history",
                  env={"JAXRUN_STARTUP_TRACE": str(trace), "JAXRUN_STARTUP_TRACE_MODULES": "1"})
    assert done.returncode == 0, done.stderr
    assert "1/1 succeeded" in done.stdout
    steps = _modules_by_step(trace)
    names = [step for step, _ in steps]
    assert REAPED in names, names
    after = {m for step, modules in steps[names.index(REAPED) + 1:] for m in modules}
    late = sorted(m for m in after if m.startswith("jaxrun") or _heavy(m))
    assert not late, f"imported after the script ended: {late}"
