"""What `jaxrun run` prints: a live view in a terminal (checked under a real pty), plain lines
otherwise, `--quiet`, and `--json` (the results file on stdout, nothing else there)."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
from pathlib import Path

import pytest
from helpers import child_env, jaxrun, jaxrun_command, read_terminal, write
from rich.console import Console

from jaxrun.interfaces.cli.live import LiveProgress
from jaxrun.plan.job import Job

SLEEPS = "if False:\n    import jax\nimport time\ntime.sleep({seconds})\nprint('done')\n"
FAILS = "if False:\n    import jax\nraise ValueError('on purpose')\n"
HIDE_CURSOR = "\x1b[?25l"  # what rich's Live writes when it takes over the terminal


def _folder(tmp_path: Path) -> Path:
    write(tmp_path / "s", "a_sleeps.py", SLEEPS.format(seconds=1.0))
    write(tmp_path / "s", "b_fails.py", FAILS)
    return tmp_path / "s"


def _under_pty(*args: object, cwd: Path) -> tuple[int, str]:
    """Run `jaxrun ARGS` with its stdout and stderr on a pseudo-terminal; return status and output."""
    master, slave = pty.openpty()
    env = child_env({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
    proc = subprocess.Popen(jaxrun_command(*args), cwd=cwd, stdin=slave,
                            stdout=slave, stderr=slave, env=env)
    os.close(slave)
    output = read_terminal(master)
    return proc.wait(timeout=120), output


@pytest.mark.slow
def test_a_terminal_gets_the_live_view_then_the_summary(tmp_path: Path) -> None:
    status, output = _under_pty("run", _folder(tmp_path), "--results-dir", tmp_path / "r", "--no-history",
                                "--device", "cpu", cwd=tmp_path)
    assert status == 1, output
    assert HIDE_CURSOR in output  # the live view ran
    assert "a_sleeps" in output and "━" in output and "ETA" in output  # a running script, the bar
    assert "b_fails.py: script_error: ValueError: on purpose at b_fails.py:3" in output
    assert "jaxrun results" in output and "failed: b_fails.py: script_error: ValueError: on purpose at b_fails.py:3" in output
    assert "hint:" in output and f"log: {tmp_path / 'r' / 'logs' / 'b_fails.stderr.log'}" in output


def test_quiet_in_a_terminal_is_plain_lines(tmp_path: Path) -> None:
    status, output = _under_pty("run", _folder(tmp_path), "--results-dir", tmp_path / "r", "--no-history",
                                "--device", "cpu", "--quiet", cwd=tmp_path)
    assert status == 1
    assert HIDE_CURSOR not in output
    assert "[1/2] a_sleeps.py ..." in output and "  a_sleeps.py: ok cpu" in output


def test_not_a_terminal_gets_plain_lines_without_escape_codes(tmp_path: Path) -> None:
    done = jaxrun("run", _folder(tmp_path), "--results-dir", tmp_path / "r", "--no-history", "--device", "cpu",
                  timeout=120)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[:2] == ["[1/2] a_sleeps.py ...", lines[1]] and lines[1].startswith("  a_sleeps.py: ok cpu, ")
    assert "[2/2] b_fails.py ..." in lines and "  b_fails.py: script_error: ValueError: on purpose at b_fails.py:3" in lines
    assert "\x1b[" not in done.stdout + done.stderr
    assert "slowest: a_sleeps.py " in done.stdout


def test_json_prints_the_results_file_and_nothing_else_on_stdout(tmp_path: Path) -> None:
    results = tmp_path / "r"
    done = jaxrun("run", _folder(tmp_path), "--results-dir", results, "--no-history", "--device", "cpu", "--json",
                  timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stdout == (results / "jax_execution_results.json").read_text(encoding="utf-8")
    doc = json.loads(done.stdout)
    assert [(r["script_name"], r["success"]) for r in doc["script_results"]] == [("a_sleeps", True), ("b_fails", False)]
    assert "[1/2] a_sleeps.py ..." in done.stderr  # the progress went to stderr


def _job(index: int, expected: float | None) -> Job:
    return Job(index=index, script=Path(f"/s/{index}.py"), name=str(index), file_name=str(index), device="cpu",
               platform="cpu", results_dir=Path("/r"), expected_seconds=expected)


def test_the_eta_adds_up_the_history_and_is_unknown_without_it() -> None:
    console = Console(file=io.StringIO(), force_terminal=False)
    view = LiveProgress(console, slots=2)
    view._expected = {0: 30.0, 1: 50.0}  # noqa: SLF001 - set as on_begin would, without starting Live
    assert view._eta() == "40 s"  # 80 s of scripts on 2 slots
    view._expected[2] = None
    assert view._eta() == "-"  # a script with no history, and none finished yet to go by
    view._finished_seconds.append(10.0)
    assert view._eta() == "45 s"  # the unknown one counts as the mean of the finished: (30+50+10)/2


def test_verbose_says_each_fact_once_and_each_event_on_one_line(tmp_path: Path) -> None:
    """Issue 23: -v printed a failure four times (the attempt, the run log's result line, the seed's
    line, the progress line), and a multi-line message broke every one of them over lines."""
    write(tmp_path / "s", "multi.py", "if False:\n    import jax\nraise ValueError('first line\\nsecond line')\n")
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--device", "cpu", "-v",
                  timeout=120)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    mentions = [line for line in lines if "first line" in line]
    assert mentions == [
        "[jaxrun] Script failed: multi.py (script_error, " + mentions[0].split("(script_error, ")[1],
        "  multi.py: script_error: ValueError: first line (+1 more line) at multi.py:3",
    ], done.stderr
    assert mentions[0].endswith("): ValueError: first line (+1 more line)")
    assert not any(line.startswith("second line") for line in lines + done.stdout.splitlines())
    # The run log keeps every event, one line each, the full message in the result file.
    log = (tmp_path / "r" / "jax_execution_log.txt").read_text().splitlines()
    assert any("multi.py on cpu: FAILED script_error: ValueError: first line (+1 more line)" in line for line in log)
    assert not any(line.startswith("second line") for line in log)


def _job(tmp_path: Path, index: int, name: str) -> Job:
    return Job(index=index, script=tmp_path / f"{name}.py", name=name, file_name=name, device="cpu", platform="cpu",
               results_dir=tmp_path, label=f"{name}.py")


def _ended(name: str, seconds: float, success: bool = True):  # type: ignore[no-untyped-def]
    from jaxrun.results.models import ScriptResult

    return ScriptResult(script_name=name, script_path=f"/s/{name}.py", success=success, device_requested="cpu",
                        device_used="cpu", execution_time=seconds, started_at="t", finished_at="t",
                        error_class=None if success else "script_error", error_message=None if success else "boom")


def test_a_benchmarked_script_shows_its_run_and_an_eta_from_its_own_runs(tmp_path: Path) -> None:
    """Issue 23: the live view sat at '0/1 name 23.8 s', ETA '-', with no word of the runs."""
    console = Console(file=io.StringIO(), force_terminal=True, width=100, color_system="standard")
    view = LiveProgress(console, slots=1, runs=3)  # --warmup-runs 0 --benchmark-runs 3
    job = _job(tmp_path, 0, "bench")
    view._expected, view._runs_of = {0: None}, {0: 3}  # noqa: SLF001 - as on_begin would, without Live
    view.on_start(job, 1)
    assert view._eta() == "-"  # nothing to go by yet
    view.on_progress(job, _ended("bench", 2.0))  # its first run took 2 s: two more to go
    assert view._eta() == "4 s"
    with console.capture() as capture:
        console.print(view.__rich__())
    assert "bench.py" in capture.get() and "run 2/3" in capture.get()


def test_the_bar_is_green_until_a_script_fails(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=100, color_system="standard")
    view = LiveProgress(console, slots=1)
    view._expected = {0: None, 1: None, 2: None}  # noqa: SLF001
    view._progress.update(view._task, total=3)  # noqa: SLF001

    def bar() -> str:
        with console.capture() as capture:
            console.print(view.__rich__())
        return capture.get()

    view.on_result(_job(tmp_path, 0, "a"), _ended("a", 1.0))
    assert "\x1b[32m━" in bar() and "\x1b[31m━" not in bar()  # done and all well: green, never red
    view.on_result(_job(tmp_path, 1, "b"), _ended("b", 1.0, success=False))
    assert "\x1b[31m━" in bar()  # a failure turns it red


def test_verbose_lists_what_xla_knows_of_each_program(tmp_path: Path) -> None:
    write(tmp_path / "s", "mm.py", "import jax, jax.numpy as jnp\n\ndef matmul(x):\n    return x @ x\n\n"
          "jax.jit(matmul)(jnp.ones((256, 256))).block_until_ready()\n")
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--device", "cpu", "-v",
                  env={"COLUMNS": "200"}, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("script") and "FLOPs" in line)
    row = next(line for line in lines if "jit(matmul)" in line).split()
    assert header.split()[:7] == ["script", "program", "built", "JIT", "JIT", "share", "FLOPs"]
    fingerprint = __import__("json").loads((tmp_path / "r" / "script_results" / "mm_result.json").read_text())[
        "compiles"]["jit(matmul)"]["fingerprint"]
    # 2 x 256^3 FLOPs; inputs and output of 256 KiB each, no temporaries; the fingerprint's start
    assert "33.6 M" in " ".join(row) and "512 KiB" in " ".join(row) and fingerprint[:12] in row
