"""Host memory and CPU time that are the script's own, held against outside readings in both
directions: nothing inherited from the launcher, shared pages counted once, descendants that left
the tree still counted. Real subprocesses; the outside reading is the kernel's own peak RSS
(``VmHWM`` in /proc/PID/status) of the same processes, read by this test while they sleep. The unit
is MiB (2^20 bytes), as every label says: a known allocation reads as its size, and GNU time's
maxrss of the process a real program ran in agrees."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from helpers import jaxrun as run_cli
from helpers import assert_started_as_asked, started_as, write

import jaxrun

MiB = 1024 * 1024


def vm_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def run_and_read_outside(script: Path, results: Path, pid_files: list[Path]) -> tuple[object, dict[str, int]]:
    """Run ``script`` through jaxrun in a thread-free way (a CLI subprocess) and, while the script's
    processes sleep, read their VmHWM from outside. Each process writes its pid to a file when its
    memory is in place."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxrun", "run", str(script), "--device", "cpu", "--no-compile-cache",
         "--results-dir", str(results)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    readings: dict[str, int] = {}
    deadline = time.monotonic() + 120
    while len(readings) < len(pid_files) and time.monotonic() < deadline:
        for pid_file in pid_files:
            if pid_file.name not in readings and pid_file.exists() and pid_file.read_text().strip():
                time.sleep(0.2)  # the process writes its pid once its memory is in place
                readings[pid_file.name] = vm_kb(int(pid_file.read_text()), "VmHWM") * 1024
        time.sleep(0.05)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    (result_file,) = (results / "script_results").glob("*_result.json")
    result = json.loads(result_file.read_text())
    assert_started_as_asked(result["start_mode"], result["prestart_reason"])
    return result, readings


# Every figure keeps its meaning however the script's process started (run/process/prestart.py):
# each test runs exec'd and forked from the prestarted interpreter.
@pytest.fixture(autouse=True, params=["none", "probe"])
def start_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("JAXRUN_PRESTART", request.param)
    return started_as(request.param)


TRIVIAL = """\
import os, sys, time
def never_called():
    import jax
open(sys.argv[1] if len(sys.argv) > 1 else {pid_file!r}, "w").write(str(os.getpid()))
time.sleep(1.0)
"""


def test_a_trivial_script_is_measured_as_its_own_peak(tmp_path: Path) -> None:
    pid_file = tmp_path / "main.pid"
    script = write(tmp_path / "s", "trivial.py", TRIVIAL.format(pid_file=str(pid_file)))
    result, outside = run_and_read_outside(script, tmp_path / "r", [pid_file])
    own = outside["main.pid"]
    # Both directions: no launcher memory inherited (the old floor was 53 MiB), no unit slip.
    assert 0.85 * own <= result["memory_peak"] * MiB <= 1.15 * own, (result["memory_peak"], own / MiB)
    assert result["memory_peak"] < 40
    assert "VmHWM" in result["memory_method"]


FORKS_A_SLEEPING_CHILD = """\
import os, time
block = bytearray(400 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
pid = os.fork()
if pid == 0:
    time.sleep(1.5)  # shares the 400 MiB with its parent (copy-on-write)
    os._exit(0)
open({pid_file!r}, "w").write(str(os.getpid()))
os.waitpid(pid, 0)
"""


@pytest.mark.slow
def test_pages_shared_with_a_forked_child_count_once(tmp_path: Path) -> None:
    pid_file = tmp_path / "parent.pid"
    script = write(tmp_path / "s", "forks.py", FORKS_A_SLEEPING_CHILD.format(pid_file=str(pid_file)))
    result, outside = run_and_read_outside(script, tmp_path / "r", [pid_file])
    parent = outside["parent.pid"]
    assert parent > 400 * MiB
    # The child adds only its own pages (a few MiB), not a second copy of the 400 MiB.
    assert parent <= result["memory_peak"] * MiB <= 1.2 * parent, (result["memory_peak"], parent / MiB)


DOUBLE_FORK = """\
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # the grandchild: re-parented away from the script's tree
        block = bytearray(400 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        end = time.process_time() + 1.0
        while time.process_time() < end:  # 1 s of CPU nobody in the tree will wait for
            pass
        open({pid_file!r}, "w").write(str(os.getpid()))
        time.sleep(3.0)
        os._exit(0)
    os._exit(0)
# Until the grandchild has its memory and CPU second (on a loaded machine a CPU second can take
# several seconds of wall time), then long enough to be read from outside.
deadline = time.monotonic() + 60
while not os.path.exists({pid_file!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(1.5)
"""


@pytest.mark.slow
def test_a_double_forked_grandchild_counts_for_memory_and_cpu(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = write(tmp_path / "s", "double_fork.py", DOUBLE_FORK.format(pid_file=str(pid_file)))
    result, outside = run_and_read_outside(script, tmp_path / "r", [pid_file])
    grandchild = outside["grandchild.pid"]
    assert grandchild > 400 * MiB
    # At least the grandchild's memory; at most it plus one more small Python process or two.
    assert grandchild <= result["memory_peak"] * MiB <= grandchild + 120 * MiB, (result["memory_peak"], grandchild / MiB)
    assert result["cpu_time"] >= 1.0  # the grandchild's busy second (the script itself mostly sleeps)
    assert not psutil.pid_exists(int(pid_file.read_text())) or psutil.Process(
        int(pid_file.read_text())).status() == psutil.STATUS_ZOMBIE  # stopped when the script ended


@pytest.mark.slow
def test_a_launcher_holding_800_mb_lends_none_of_it(tmp_path: Path) -> None:
    """The kernel's ru_maxrss survives fork+exec; jaxrun must not report the caller's memory."""
    script = write(tmp_path, "tiny.py", "import time\ntime.sleep(0.2)\n")
    launcher = textwrap.dedent(f"""
        import json, jaxrun
        held = bytearray(800 * 1024 * 1024)
        for i in range(0, len(held), 4096):
            held[i] = 1
        result = jaxrun.execute_jax_script({str(script)!r}, "cpu", results_dir={str(tmp_path / "r")!r},
                                           compile_cache=False)
        print(json.dumps(result.memory_peak))
    """)
    proc = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    peak = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 3 < peak < 40, peak  # a bare Python: about 10-15 MiB, not 800 MiB


def test_the_method_is_recorded_and_a_run_that_never_launched_has_no_memory(tmp_path: Path) -> None:
    result = jaxrun.execute_jax_script(write(tmp_path, "t.py", "x = 1\n"), "cpu", results_dir=tmp_path / "r",
                                       compile_cache=False)
    assert result.memory_method and "USS" in result.memory_method and result.memory_peak > 0
    absent = next(p for p in ("tpu", "gpu") if not jaxrun.get_jax_device_info().platforms[p].available)
    never = jaxrun.execute_jax_script(write(tmp_path, "g.py", "x = 1\n"), absent, results_dir=tmp_path / "r2",
                                      compile_cache=False, fallback=False)
    assert never.error_class == "device_unavailable" and never.execution_time is None
    assert never.memory_peak is None and never.memory_method is None  # unknown, not 0


HOLDS = """\
if False:
    import jax
import time
import numpy as np

block = {allocation}
time.sleep(0.3)
"""


@pytest.mark.slow
def test_memory_peak_is_in_mib_a_known_allocation_reads_as_its_size(tmp_path: Path) -> None:
    """Ground truth for the unit: a script that allocates and touches 256 MiB (2^28 bytes) peaks
    256 higher than the same script without it, so memory_peak is in MiB. In MB (10^6 bytes) the
    same bytes would read 268, and 256 MB (256e6 bytes) would read 244 MiB: neither is within 2 %
    of 256, so the check tells the two units apart."""
    folder = tmp_path / "s"
    write(folder, "holds.py", HOLDS.format(allocation="np.ones(256 * 2**20 // 8)  # every page written"))
    write(folder, "empty.py", HOLDS.format(allocation="None"))
    done = run_cli("run", folder, "--device", "cpu", "--no-compile-cache", "--no-history", "--results-dir",
                  tmp_path / "r", timeout=300)
    assert done.returncode == 0, done.stderr
    peaks = {p.name.removesuffix("_result.json"): json.loads(p.read_text())["memory_peak"]
             for p in (tmp_path / "r" / "script_results").glob("*_result.json")}
    grown = peaks["holds"] - peaks["empty"]
    assert abs(grown - 256) <= 0.02 * 256, (grown, peaks)  # MiB: within 2 %
    assert abs(grown - 256e6 / 2**20) > 0.02 * 244 and abs(grown - 2**28 / 1e6) > 0.02 * 268, peaks


def _gnu_time() -> str | None:
    """``/usr/bin/time`` when it is GNU time (``-f %M``: the largest RSS, KiB), else None."""
    try:
        version = subprocess.run(["/usr/bin/time", "--version"], capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return "/usr/bin/time" if "GNU" in version.stdout + version.stderr else None


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gnn_rendered_simulators" / "jax" / "pomdp_solver.py"


@pytest.mark.slow
@pytest.mark.skipif(_gnu_time() is None, reason="GNU time is not installed at /usr/bin/time (apt-get install time)")
def test_memory_peak_of_a_real_program_matches_gnu_times_maxrss_in_mib(tmp_path: Path) -> None:
    """A real JAX program, measured twice in the same run: jaxrun's memory_peak, and GNU time's
    maxrss (KiB) of the very process the script ran in (``--python`` names an interpreter that is
    GNU time running this one). They agree within 2.5 % read as MiB, and not read as MB. The same
    process, not a second run: this program's own peak varies by up to 8 % from run to run."""
    times = tmp_path / "times.txt"
    wrapper = tmp_path / "bin" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/time -a -o "{times}" -f "%M %C" "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    done = run_cli("run", EXAMPLE, "--device", "cpu", "--no-compile-cache", "--no-history", "--results-dir",
                  tmp_path / "r", "--python", wrapper, timeout=300)
    assert done.returncode == 0, done.stderr
    (result_file,) = (tmp_path / "r" / "script_results").glob("*_result.json")
    peak = json.loads(result_file.read_text())["memory_peak"]
    # Each process started through the wrapper appends a line; the script's is the probe's.
    (maxrss_kib,) = [int(line.split()[0]) for line in times.read_text().splitlines()
                     if "jaxrun.probe" in line and EXAMPLE.name in line]
    in_mib, in_mb = maxrss_kib / 1024, maxrss_kib * 1024 / 1e6
    assert abs(peak - in_mib) <= 0.025 * in_mib, (peak, in_mib)
    assert abs(peak - in_mb) > 0.025 * in_mb, (peak, in_mb)
