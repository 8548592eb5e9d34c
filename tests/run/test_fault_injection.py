"""Fault injection: one hostile script (or folder) per failure mode, run by the real `jaxrun run`.

Each case asserts three things: how the failure is classified, that no process the script started
survives jaxrun (every process the cases start carries the case's folder in its command line), and
that every result file jaxrun wrote validates against its model.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import FORK_BOMB, jaxrun, survivors, write

from jaxrun.results import result_files
from jaxrun.run.process import cgroups

CASE_TIMEOUT = 120
# What makes a file a JAX script for discovery, without the 0.5 s of importing JAX: these faults are
# about processes, and the cases that need JAX (a NaN, the memory limit) import it for real.
NO_JAX = "if False:\n    import jax\n"


@dataclass
class Case:
    script: str
    error_class: str | None  # None: the script succeeds
    flags: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    message: str = ""  # a part of error_message, or of the one warning a success must carry
    file_name: str = "case.py"


DAEMON = """\
import os, subprocess, sys, time
if False:
    import jax
# A daemon: its own session, detached from the script; {env} environment.
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", __file__], env={env},
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
print("exiting 0 with a daemon behind")
"""

CASES = {
    "non_utf8_output": Case(
        "import sys\n" + NO_JAX + "sys.stdout.buffer.write(b'out \\xff\\xfe\\x80 bytes\\n')\n"
        "sys.stderr.buffer.write(b'err \\xc3\\x28\\n')\nraise ValueError('bad bytes: \\udcff and \\ud800')\n",
        "script_error", message="ValueError: bad bytes"),
    "os_exit": Case("import os\n" + NO_JAX + "print('before', flush=True)\nos._exit(3)\n",
                    "script_error", message="exited with status 3: the script called os._exit(3)"),
    "sys_exit_zero_early": Case("import sys\n" + NO_JAX + "print('done early')\nsys.exit(0)\nraise RuntimeError('never')\n",
                                None),
    "sys_exit_nonzero": Case("import sys\n" + NO_JAX + "sys.exit(4)\n", "script_error",
                             message="the script called sys.exit(4)"),
    "setsid_daemon": Case(DAEMON.format(env="dict(os.environ)"), None,
                          message="left 1 process running"),
    "killed_by_signal": Case("import os, signal\n" + NO_JAX + "os.kill(os.getpid(), signal.SIGSEGV)\n", "crashed",
                             message="SIGSEGV"),
    # (A child that ignores SIGTERM as well: tests/run/test_execute.py, which waits out the kill grace.)
    "timeout_with_a_child": Case(
        "import subprocess, sys, time\n" + NO_JAX +
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', __file__])\ntime.sleep(300)\n",
        "timeout", flags=("--timeout", "2"), message="time limit"),
    # Sampled every 0.05 s: stopped a level or two past the limit.
    # A level every 0.1 s: the sampler (every 0.05 s) stops it a level or two past the limit even when
    # two test workers share the cores (at 0.03 s a loaded run once reached 448 processes).
    "fork_bomb": Case(FORK_BOMB, "script_error", flags=("--max-processes", "20"),
                      message="--max-processes 20"),
    "fork_bomb_without_cgroups": Case(FORK_BOMB, "script_error", flags=("--max-processes", "20"),
                                      env={cgroups.DISABLE_ENV: "1"}, message="--max-processes 20"),
    # JAX's threads are not processes: a jitted program with 40 threads of its own runs at --max-processes 1.
    "threads_are_not_processes": Case(
        "import threading, time\nimport jax, jax.numpy as jnp\nprint(jax.jit(lambda x: x * 2)(jnp.ones(3)))\n"
        "workers = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range(40)]\n"
        "[w.start() for w in workers]\n[w.join() for w in workers]\n", None, flags=("--max-processes", "1")),
    "memory_limit": Case(
        "import time\nimport numpy as np\nimport jax\nblocks = []\n"
        "for _ in range(60):\n    blocks.append(np.ones(25 * 2**20 // 8))\n    time.sleep(0.02)\n",
        "out_of_memory", flags=("--memory-limit", "300MiB"), message="memory limit of 300 MiB"),
    "flood_of_output": Case(
        "import sys\n" + NO_JAX + "line = b'x' * 1023 + b'\\n'\nfor _ in range(20 * 1024):\n    sys.stdout.buffer.write(line)\n",
        None, env={"JAXRUN_LOG_CAP_BYTES": str(2**20)}),
    "nan": Case("import jax.numpy as jnp\nprint(jnp.log(-1.0) + 1)\n", "numerical_instability",
                flags=("--debug-nans",)),
    "unicode_spaces_long_name": Case(NO_JAX + "print('ok')\n", None,
                                     file_name="dir with spaces/ünïcødé 模型 " + "x" * 180 + ".py"),
    "name_at_the_file_name_limit": Case(NO_JAX + "print('ok')\n", None, file_name="模" + "y" * 249 + ".py"),
}


def _can_make_cgroups(**limits: int) -> bool:
    group = cgroups.create(**limits)
    if group is None:
        return False
    group.remove()
    return True


def assert_valid_results(results: Path) -> dict:
    """Every JSON file of the results folder validates against its model; return the batch file."""
    models = {
        result_files.EXECUTION_RESULTS: "execution_results", result_files.PERFORMANCE_METRICS: "performance_metrics",
        result_files.DEVICE_INFO: "device_info", result_files.BENCHMARK_RESULTS: "benchmark_results",
    }
    files = sorted(results.rglob("*.json"))
    assert files, f"no result files in {results}"
    for path in files:
        name = "script_result" if path.parent.name == "script_results" else models.get(path.name)
        assert name is not None, f"unexpected JSON file {path}"
        model = result_files.schema_model(name)
        model.model_validate_json(path.read_bytes())  # raises on any invalid file
    return json.loads((results / result_files.EXECUTION_RESULTS).read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_fault(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    folder = tmp_path / name
    write(folder, case.file_name, case.script)
    results = tmp_path / "results"
    done = jaxrun("run", folder, "--results-dir", results, "--device", "cpu", "--no-history", *case.flags,
                  env=case.env, timeout=CASE_TIMEOUT)
    assert done.returncode == (0 if case.error_class is None else 1), done.stderr
    time.sleep(0.1)  # a process killed by jaxrun is reaped by init a moment later
    assert survivors(str(folder)) == []
    batch = assert_valid_results(results)
    [result] = batch["script_results"]
    assert result["error_class"] == case.error_class, result["error_message"]
    if case.error_class is not None:
        assert case.message in result["error_message"]
        assert len(result["attempts"]) == 1  # none of these is transient on CPU
    elif case.message:
        assert [w for w in result["warnings"] if case.message in w], result["warnings"]
    _case_specific(name, result, results)


def _case_specific(name: str, result: dict, results: Path) -> None:
    if name == "non_utf8_output":
        # The bytes are kept as written; what the result says is valid text.
        assert b"out \xff\xfe\x80 bytes" in Path(result["stdout_log"]).read_bytes()
        assert b"err \xc3\x28" in Path(result["stderr_log"]).read_bytes()
    elif name == "sys_exit_zero_early":
        assert Path(result["stdout_log"]).read_text() == "done early\n"
    elif name in ("fork_bomb", "fork_bomb_without_cgroups"):
        # Stopped a level or two past the limit, before the 511 processes the bomb would make.
        assert 20 < result["peak_processes"] < 300, result["peak_processes"]
    elif name == "flood_of_output":
        log = Path(result["stdout_log"])
        assert result["stdout_truncated"] is True
        assert 2**20 <= log.stat().st_size < 2**20 + 200
        assert log.read_bytes().endswith(b"more bytes were discarded]\n")
    elif name == "memory_limit":
        assert result["memory_peak"] is None or result["memory_peak"] < 1500
    elif name == "unicode_spaces_long_name":
        assert result["script_name"].startswith("dir with spaces__ünïcødé 模型 ")
        assert (results / "script_results" / f"{result_files.file_stem(result['script_name'])}_result.json").exists()
    elif name == "name_at_the_file_name_limit":
        # The name is kept whole; its files get a shortened, still unique, stem.
        assert result["script_name"] == "模" + "y" * 249
        [path] = (results / "script_results").iterdir()
        assert path.name == result_files.file_stem(result["script_name"]) + "_result.json"
        assert len(path.name.encode()) <= 255 and "~" in path.name


@pytest.mark.skipif(not _can_make_cgroups(), reason="jaxrun cannot create cgroups on this machine")
def test_a_daemon_that_clears_its_environment_is_found_by_the_cgroup(tmp_path: Path) -> None:
    """No process group, no marker variable: only the cgroup still knows the daemon."""
    folder = tmp_path / "envless"
    write(folder, "envless.py", DAEMON.format(env="{}"))
    results = tmp_path / "results"
    done = jaxrun("run", folder, "--results-dir", results, "--device", "cpu", "--no-history", timeout=CASE_TIMEOUT)
    assert done.returncode == 0, done.stderr
    time.sleep(0.1)
    assert survivors(str(folder)) == []
    [result] = assert_valid_results(results)["script_results"]
    assert result["leftover_processes"] == 1 and result["cgroup"] is not None and result["kernel_limits"] == []


READ_OWN_LIMITS = """\
import threading, time
import jaxrun

groups = dict(line.split(":", 2)[1:] for line in open("/proc/self/cgroup").read().splitlines())
memory, pids = groups["memory"].strip(), groups["pids"].strip()
def read(path):
    return int(open(path).read().strip())
# One process, so within --max-processes, asking for more threads than the kernel's backstop allows.
started = []
try:
    for _ in range(500):
        started.append(threading.Thread(target=time.sleep, args=(2,)))
        started[-1].start()
except RuntimeError:  # "can't start new thread": the kernel refused it
    started.pop()
jaxrun.record(memory_limit=read(f"/sys/fs/cgroup/memory{memory}/memory.limit_in_bytes"),
              pids_max=read(f"/sys/fs/cgroup/pids{pids}/pids.max"), threads_started=len(started))
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/sys/fs/cgroup/memory").is_dir() or not _can_make_cgroups(memory_limit=2**30),
                    reason="needs cgroup v1 memory and pids hierarchies that jaxrun may write to")
def test_the_kernel_holds_the_limits_the_script_runs_under(tmp_path: Path) -> None:
    """The script reads its own cgroup's limits: the kernel, not only jaxrun's sampling, holds them."""
    folder = tmp_path / "limits"
    write(folder, "limits.py", NO_JAX + READ_OWN_LIMITS)
    results = tmp_path / "results"
    done = jaxrun("run", folder, "--results-dir", results, "--device", "cpu", "--no-history",
                      "--memory-limit", "700MiB", "--max-processes", "3", timeout=CASE_TIMEOUT)
    assert done.returncode == 0, done.stderr
    [result] = assert_valid_results(results)["script_results"]
    backstop = 3 * cgroups.tasks_per_process()
    recorded = result["results"]
    assert recorded["memory_limit"] == 700 * 2**20 and recorded["pids_max"] == backstop
    assert recorded["threads_started"] < backstop  # the kernel refused the rest
    assert result["kernel_limits"] == ["memory", "processes"]


def test_a_script_whose_name_is_not_utf8_is_run_and_reported(tmp_path: Path) -> None:
    folder = tmp_path / "bytes"
    folder.mkdir()
    (folder / os.fsdecode(b"model_\xff.py")).write_text(NO_JAX + "print('ok')\n")
    results = tmp_path / "results"
    done = jaxrun("run", folder, "--results-dir", results, "--device", "cpu", "--no-history", timeout=CASE_TIMEOUT)
    assert done.returncode == 0, done.stderr
    [result] = assert_valid_results(results)["script_results"]
    assert result["success"] and result["script_name"] == "model_\\xff"


# --------------------------------------------------------------------------- permissions

# Root reads and writes anything: these cases run jaxrun without the capabilities that let it.
_UNPRIVILEGED = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search")
needs_setpriv = pytest.mark.skipif(
    shutil.which("setpriv") is None or os.geteuid() != 0,
    reason="needs root and setpriv (util-linux) to run jaxrun without the right to bypass file permissions",
)


@pytest.fixture
def shared_tmp() -> Path:
    """A folder outside pytest's private (0700) tree."""
    folder = Path(tempfile.mkdtemp(prefix="jaxrun-fault-"))
    folder.chmod(0o755)
    yield folder
    for path in folder.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)


@needs_setpriv
def test_unreadable_files_and_folders_are_reported_not_fatal(shared_tmp: Path) -> None:
    folder = shared_tmp / "scripts"
    write(folder, "fine.py", NO_JAX + "print('ok')\n")
    write(folder, "locked.py", "import jax\n").chmod(0o000)
    write(folder, "closed/inner.py", "import jax\n")
    (folder / "closed").chmod(0o000)
    (folder / "loop").symlink_to(folder, target_is_directory=True)  # and a symlink loop
    results = shared_tmp / "results"
    done = jaxrun("run", folder, "--results-dir", results, "--device", "cpu", "--no-history", prefix=_UNPRIVILEGED, timeout=CASE_TIMEOUT)
    assert done.returncode == 0, done.stderr
    batch = assert_valid_results(results)
    assert [r["script_name"] for r in batch["script_results"]] == ["fine"]
    unreadable = batch["metadata"]["unreadable_paths"]
    assert unreadable == [f"{folder / 'closed'}/: Permission denied", f"{folder / 'locked.py'}: Permission denied"]
    assert f"skipped {folder / 'locked.py'}: Permission denied (could not be read)" in done.stderr
    assert "Traceback" not in done.stderr


@needs_setpriv
def test_a_read_only_results_folder_is_one_clear_error(shared_tmp: Path) -> None:
    write(shared_tmp / "scripts", "fine.py", "import jax\n")
    results = shared_tmp / "results"
    results.mkdir()
    results.chmod(0o555)
    done = jaxrun("run", shared_tmp / "scripts", "--results-dir", results, "--no-history", prefix=_UNPRIVILEGED, timeout=CASE_TIMEOUT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"jaxrun: error: cannot write the results folder {str(results)!r}: [Errno 13] Permission denied; "
        "pass a folder you can write to --results-dir"
    ]
    assert list(results.iterdir()) == []


def test_a_results_folder_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    write(tmp_path / "scripts", "fine.py", "import jax\n")
    (tmp_path / "results").write_text("precious")
    done = jaxrun("run", tmp_path / "scripts", "--results-dir", tmp_path / "results", "--no-history", timeout=CASE_TIMEOUT)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "it is a file" in done.stderr
    assert (tmp_path / "results").read_text() == "precious"
