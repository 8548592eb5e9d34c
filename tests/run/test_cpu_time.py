"""cpu_time counts every process of a script's run, waited for or not, held against an outside
reading in both directions: each process measures its own CPU with ``time.process_time()`` and
writes it to a file, and jaxrun's figure must lie within 5 % of their sum (plus a small allowance
for what the probe does after the script's last line: its END event, the interpreter's exit).
Run with the run's cgroup (its own count) and without one (``JAXRUN_NO_CGROUP=1``: rusage and
sampling), through the API (a new process the parent moves into the group) and through the CLI
(a spare that waited in a group of its own). Real subprocesses, no wall-clock budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import jaxrun as jaxrun_cli
from helpers import assert_started_as_asked, started_as, write

import jaxrun
from jaxrun.run.process import cgroups

# The probe's own CPU after the script's last reading (END event, interpreter exit): 15-40 ms
# measured here; a figure 2x too high or too low is off by far more than this.
AFTER_THE_SCRIPT = 0.08
TOLERANCE = 0.05


def _cgroups_count_cpu(source: str | None = None) -> bool:
    """Whether jaxrun can make a cgroup here that counts CPU (in ``source``, when given)."""
    group = cgroups.create()
    if group is None:
        return False
    try:
        return group.cpu_source is not None and source in (None, group.cpu_source)
    finally:
        group.remove()


def _only_the_unified_hierarchy(monkeypatch: pytest.MonkeyPatch) -> None:
    """jaxrun sees no v1 hierarchy, as on a cgroup v2 machine (the v2 one here is real)."""
    real = cgroups._own_dir
    monkeypatch.setattr(cgroups, "_own_dir", lambda controller: real(controller) if controller == "" else None)


def _v2_counts_cpu() -> bool:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _only_the_unified_hierarchy(monkeypatch)
        return _cgroups_count_cpu("cpu.stat usage_usec")


needs_cgroup = pytest.mark.skipif(not _cgroups_count_cpu(), reason="jaxrun cannot make a cgroup that counts CPU here")
needs_v2 = pytest.mark.skipif(not _v2_counts_cpu(), reason="jaxrun cannot make a cgroup v2 group here")
# (how jaxrun runs it, with the run's cgroup): the cgroup variants skip where none can be made.
WAYS = [pytest.param("api", True, marks=needs_cgroup, id="api-cgroup"),
        pytest.param("cli", True, marks=needs_cgroup, id="cli-spare-cgroup"),
        pytest.param("api", False, id="api-no-cgroup"),
        pytest.param("api-v2", True, marks=needs_v2, id="api-cgroup-v2")]


def run(script: Path, results: Path, how: str, cgroup: bool, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The script's result (as its result file has it) after jaxrun ran it."""
    if not cgroup:
        monkeypatch.setenv(cgroups.DISABLE_ENV, "1")
    if how == "api-v2":
        _only_the_unified_hierarchy(monkeypatch)
    if how.startswith("api"):
        result = jaxrun.execute_jax_script(script, "cpu", results_dir=results, compile_cache=False)
        plain = json.loads(result.model_dump_json())
        assert_started_as_asked(plain["start_mode"], plain["prestart_reason"])
        return plain
    done = jaxrun_cli("run", script, "--device", "cpu", "--no-compile-cache", "--no-history", "--no-config",
                      "--results-dir", results)
    assert done.returncode == 0, done.stderr
    [result] = json.loads((results / "jax_execution_results.json").read_text())["script_results"]
    assert_started_as_asked(result["start_mode"], result["prestart_reason"])
    return result


# Every figure keeps its meaning however the script's process started (run/process/prestart.py):
# each test runs exec'd and forked from the prestarted interpreter.
@pytest.fixture(autouse=True, params=["none", "probe"])
def start_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("JAXRUN_PRESTART", request.param)
    return started_as(request.param)


def own_readings(folder: Path) -> dict[str, float]:
    """Each process's own process_time, as it wrote it (dot files are markers, not readings)."""
    return {path.name: float(path.read_text()) for path in folder.iterdir() if not path.name.startswith(".")}


def assert_counts(result: dict, readings: dict[str, float]) -> None:
    outside = sum(readings.values())
    measured = result["cpu_time"]
    assert result["success"], result["error_message"]
    assert (1 - TOLERANCE) * outside <= measured <= (1 + TOLERANCE) * outside + AFTER_THE_SCRIPT, (measured, readings)


def assert_method(result: dict, cgroup: bool, how: str = "api") -> None:
    if cgroup:
        assert result["cgroup"] is not None and result["cpu_method"].startswith("the run's cgroup's count")
        sources = ["cpu.stat usage_usec"] if how == "api-v2" else ["cpuacct.usage", "cpu.stat usage_usec"]
        assert any(f"({source}:" in result["cpu_method"] for source in sources), result["cpu_method"]
    else:
        assert result["cgroup"] is None and result["cpu_method"].startswith("rusage of the script's process")


# The case: a child burns a second of CPU and ends; its parent, the script, never waits for
# it, sleeps past its end and exits (init reaps the child).
UNWAITED_CHILD = """\
import os, time
if False:
    import jax
READINGS = {readings!r}
if os.fork() == 0:
    end = time.process_time() + 1.0
    while time.process_time() < end:
        pass
    open(os.path.join(READINGS, "child"), "w").write(repr(time.process_time()))
    os._exit(0)
deadline = time.monotonic() + 120  # a CPU second can take several seconds on a loaded machine
while not os.path.exists(os.path.join(READINGS, "child")) and time.monotonic() < deadline:
    time.sleep(0.02)
time.sleep(0.3)  # the child has ended: a zombie nobody waits for
open(os.path.join(READINGS, "script"), "w").write(repr(time.process_time()))
"""


@pytest.mark.slow
@pytest.mark.parametrize("how,cgroup", WAYS)
def test_a_child_nobody_waits_for_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
                                        cgroup: bool) -> None:
    readings = tmp_path / "readings"
    readings.mkdir()
    script = write(tmp_path / "s", "unwaited.py", UNWAITED_CHILD.format(readings=str(readings)))
    result = run(script, tmp_path / "r", how, cgroup, monkeypatch)
    found = own_readings(readings)
    assert found["child"] >= 1.0
    assert_counts(result, found)  # was 0.11 s: the child's second was lost
    assert_method(result, cgroup, how)
    # The CLI's spare joined its group before the job (exec); a forked process joins its own.
    assert result["prestarted"] == (how == "cli" and result["start_mode"] == "exec")


# A child the script waits for: its CPU reaches the script's rusage and, with a cgroup, the group's
# count too; counted once.
WAITED_CHILD = """\
import os, time
if False:
    import jax
READINGS = {readings!r}
pid = os.fork()
if pid == 0:
    end = time.process_time() + 1.0
    while time.process_time() < end:
        pass
    open(os.path.join(READINGS, "child"), "w").write(repr(time.process_time()))
    os._exit(0)
os.waitpid(pid, 0)
open(os.path.join(READINGS, "script"), "w").write(repr(time.process_time()))
"""


@pytest.mark.parametrize("how,cgroup", [WAYS[0], WAYS[2]])
def test_a_child_the_script_waits_for_counts_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
                                                  cgroup: bool) -> None:
    readings = tmp_path / "readings"
    readings.mkdir()
    script = write(tmp_path / "s", "waited.py", WAITED_CHILD.format(readings=str(readings)))
    result = run(script, tmp_path / "r", how, cgroup, monkeypatch)
    assert_counts(result, own_readings(readings))
    assert_method(result, cgroup)


# A daemon: double fork and setsid, re-parented away from the script's tree; it burns CPU until the
# script ends and jaxrun stops it (its SIGTERM handler writes its reading). The script waits for
# the first fork, as daemonising code does, until the daemon has burnt a CPU second.
DAEMON = """\
import os, signal, time
if False:
    import jax
READINGS = {readings!r}

def stopped(signum, frame):
    open(os.path.join(READINGS, "daemon"), "w").write(repr(time.process_time()))
    os._exit(0)

first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, stopped)
        while True:
            if time.process_time() >= 1.0 and not os.path.exists(os.path.join(READINGS, ".burnt")):
                open(os.path.join(READINGS, ".burnt"), "w").close()
    os._exit(0)
os.waitpid(first, 0)
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(READINGS, ".burnt")) and time.monotonic() < deadline:
    time.sleep(0.02)
open(os.path.join(READINGS, "script"), "w").write(repr(time.process_time()))
"""


@pytest.mark.slow
@pytest.mark.parametrize("how,cgroup", [WAYS[0], WAYS[2]])
def test_a_daemon_that_left_the_tree_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
                                            cgroup: bool) -> None:
    readings = tmp_path / "readings"
    readings.mkdir()
    script = write(tmp_path / "s", "daemon.py", DAEMON.format(readings=str(readings)))
    result = run(script, tmp_path / "r", how, cgroup, monkeypatch)
    assert result["leftover_processes"] == 1  # jaxrun stopped it, which had it write its reading
    found = own_readings(readings)
    assert found["daemon"] >= 1.0
    # Without a cgroup the daemon's time is sampled: what it burns between jaxrun's last sample and
    # its end (a few ms) is missing, within the tolerance.
    assert_counts(result, found)
    assert_method(result, cgroup)


# The probe reaps the children the script left unwaited only after the script's own exit handlers:
# one that waits for its child at exit still gets the child's status.
WAITS_AT_EXIT = """\
import atexit, os, time
if False:
    import jax
READINGS = {readings!r}
pid = os.fork()
if pid == 0:
    os._exit(7)
time.sleep(0.3)

def collect():
    _, status = os.waitpid(pid, 0)
    open(os.path.join(READINGS, "status"), "w").write(str(os.waitstatus_to_exitcode(status)))

atexit.register(collect)
"""


def test_a_script_that_waits_for_its_child_at_exit_still_gets_its_status(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    readings = tmp_path / "readings"
    readings.mkdir()
    script = write(tmp_path / "s", "at_exit.py", WAITS_AT_EXIT.format(readings=str(readings)))
    result = run(script, tmp_path / "r", "api", False, monkeypatch)
    assert result["success"], result["error_message"]
    assert (readings / "status").read_text() == "7"


def test_a_run_that_never_launched_has_no_cpu_time(tmp_path: Path) -> None:
    absent = next(p for p in ("tpu", "gpu") if not jaxrun.get_jax_device_info().platforms[p].available)
    never = jaxrun.execute_jax_script(write(tmp_path, "g.py", "x = 1\n"), absent, results_dir=tmp_path / "r",
                                      compile_cache=False, fallback=False)
    assert never.error_class == "device_unavailable"
    assert never.cpu_time is None and never.cpu_method is None  # unknown, not 0
