"""The probe's command line has one definition (jaxrun.probe.arguments): what the parent builds from
the run options is what the child reads back, and anything else is refused with the usage line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jaxrun.config.options import RunOptions
from jaxrun.probe.arguments import ProbeArguments, ProbeUsageError, interpreter
from jaxrun.run.process.environment import probe_command


@pytest.mark.parametrize("options, profile", [
    ({}, None),
    ({"args": ["--steps", "10", "--", "x y"]}, None),
    ({"entry": "main", "warm_calls": 5}, None),
    ({"entry": "main", "enable_profiling": True}, "/tmp/p"),
])
def test_the_childs_reading_of_the_parents_command_is_the_options(options, profile) -> None:
    run = RunOptions.build("api", **options)
    command = probe_command(Path("/s/train.py"), Path("/e/events.jsonl"), run, Path(profile) if profile else None)
    assert command[:3] == interpreter() == [sys.executable, "-c", "from jaxrun.probe.__main__ import run; run()"]
    read = ProbeArguments.parse(command[3:])
    assert read.events == "/e/events.jsonl"
    assert read.script_argv == ("/s/train.py", *(run.args or ()))  # a script's own "--" stays its own
    assert read.entry == run.entry
    assert read.warm_calls == (run.warm_calls if run.entry else 1)
    assert read.profile == profile


@pytest.mark.parametrize("argv", [
    [],
    ["--events", "e"],  # no script
    ["--", "s.py"],  # no channel
    ["--events", "e", "--entry", "--", "s.py"],  # a flag without its value
    ["--events", "e", "--nope", "1", "--", "s.py"],
    ["--events", "e", "--warm-calls", "two", "--", "s.py"],
])
def test_a_command_the_parent_never_builds_is_refused(argv) -> None:
    with pytest.raises(ProbeUsageError, match="usage: python -m jaxrun.probe --events EVENTS"):
        ProbeArguments.parse(argv)


@pytest.mark.parametrize("start", [interpreter(), [sys.executable, "-m", "jaxrun.probe"]], ids=["as jaxrun", "by hand"])
def test_the_probe_process_refuses_it_with_one_line_and_runs_nothing(tmp_path: Path, start: list[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text("open(__file__ + '.ran', 'w').close()\n")
    proc = subprocess.run([*start, "--events", str(tmp_path / "e"), "--warm-calls", "x",
                           "--", str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("--warm-calls takes a whole number, got 'x'\nusage: python -m jaxrun.probe")
    assert not (tmp_path / "s.py.ran").exists()
