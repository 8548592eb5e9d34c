"""``--backend slurm`` against a real Slurm: the single-node cluster of tests/slurm_cluster.py (the
session fixture ``slurm``: its own slurmctld, slurmd and munged; nothing is mocked). Each test runs
the ``jaxrun`` command in a subprocess whose Slurm commands reach that cluster (SLURM_CONF).

Every script here writes a line to a marks file when it starts and one when it ends, so that a
test can tell how often each ran.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import interrupt_and_resume, jaxrun_command, load, write

pytest.importorskip("submitit")

pytestmark = pytest.mark.slow

MARKED = """\
import os, sys, time
import jax
marks = {marks!r}
name = os.path.basename(sys.argv[0])
with open(marks, "a") as f:
    f.write(f"start {{name}}\\n")
time.sleep({seconds})
import jaxrun
jaxrun.record(value={value})
with open(marks, "a") as f:
    f.write(f"end {{name}}\\n")
"""


def marked(folder: Path, name: str, marks: Path, seconds: float = 0.0, value: int = 1) -> Path:
    return write(folder, name, MARKED.format(marks=str(marks), seconds=seconds, value=value))


def marks_of(marks: Path) -> list[str]:
    return marks.read_text().splitlines() if marks.exists() else []


@pytest.fixture
def on_slurm(slurm, monkeypatch: pytest.MonkeyPatch, jaxrun_cli):  # type: ignore[no-untyped-def]
    """The ``jaxrun`` command with Slurm's commands reaching the test cluster (also for processes a
    test starts itself: the variables are this process's too)."""
    for name, value in slurm.env.items():
        monkeypatch.setenv(name, value)
    return jaxrun_cli.but(env=slurm.env)


def jaxrun_tasks(results: Path, settle: float = 30.0) -> list[str]:
    """The tasks of the arrays a batch into ``results`` submitted (its slurm/tasks.jsonl names them)
    in the test cluster's queue (``on_slurm`` set SLURM_CONF here; other tests' arrays may share
    it), waited for ``settle`` seconds at most to leave it (a task whose result jaxrun read may still
    be RUNNING for a moment, its Python ending, then COMPLETING)."""
    record = (results / "slurm" / "tasks.jsonl").read_text().splitlines()
    names = {json.loads(line)["name"] for line in record if '"tasks"' in line}
    assert names, record
    deadline = time.monotonic() + settle
    while True:
        done = subprocess.run(["squeue", "--noheader", "--array", "--format", "%i|%j|%T"], capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        tasks = [line for line in done.stdout.splitlines() if line.split("|")[1:2] and line.split("|")[1] in names]
        if not tasks or time.monotonic() > deadline:
            return tasks
        time.sleep(0.5)


def test_a_folder_runs_as_one_job_array_each_script_once(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    marks = tmp_path / "marks"
    for k in range(4):
        marked(tmp_path / "s", f"m{k}.py", marks, seconds=0.5, value=k)
    done = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--jobs", "2", "--results-dir", tmp_path / "r",
                        "--no-history", "--markdown", tmp_path / "summary.md", cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    rows = {r["script_name"]: r for r in doc["script_results"]}
    assert sorted(rows) == ["m0", "m1", "m2", "m3"] and doc["metadata"]["complete"]
    assert [rows[f"m{k}"]["results"]["value"] for k in range(4)] == [0, 1, 2, 3]
    # Each script once: one start and one end each.
    assert sorted(marks_of(marks)) == sorted(f"{w} m{k}.py" for k in range(4) for w in ("start", "end"))
    # One array: its four tasks, each recorded with the node and its wait in the queue.
    ids = [rows[f"m{k}"]["slurm_job_id"] for k in range(4)]
    arrays = {i.partition("_")[0] for i in ids}
    assert len(arrays) == 1 and sorted(i.partition("_")[2] for i in ids) == ["0", "1", "2", "3"], ids
    assert all(r["node"] == socket.gethostname() for r in rows.values())
    assert all(r["queue_wait"] is not None and 0 <= r["queue_wait"] < 120 for r in rows.values())
    # --jobs 2: the array ran two at a time, so the last two waited behind the first two's 0.5 s sleeps.
    waits = sorted(r["queue_wait"] for r in rows.values())
    assert waits[2] >= waits[0] + 0.5, waits
    # The terminal and the Markdown summary say the same of the array and its queue.
    note = (f"Slurm: 4 tasks in 1 job array ({ids[0].partition('_')[0]}); waited in the queue "
            f"{(waits[1] + waits[2]) / 2:.1f} s (median), {waits[3]:.1f} s at most")
    assert f"note: {note}" in " ".join(done.stdout.split()), done.stdout
    assert f"- note: {note}" in (tmp_path / "summary.md").read_text()
    # Each script's own files, as a local run writes them; the per-script file is the batch's row.
    for name, row in rows.items():
        assert load(tmp_path / "r" / "script_results" / f"{name}_result.json") == row
        assert Path(row["stdout_log"]).is_file() and Path(row["stderr_log"]).is_file()
    # The record --resume reads: the array's name and scripts before sbatch, its id after, each task reported.
    record = [json.loads(line) for line in (tmp_path / "r" / "slurm" / "tasks.jsonl").read_text().splitlines()]
    array = arrays.pop()
    assert record[0]["tasks"] == [[f"m{k}", "auto", rows[f"m{k}"]["options_key"]] for k in range(4)]
    assert record[1] == {"name": record[0]["name"], "array": array}
    assert sorted(r["reported"] for r in record[2:]) == [f"{array}_{k}" for k in range(4)]


def test_same_results_as_a_local_run(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    """The same scripts, locally and on Slurm: the same classes, values and result files."""
    write(tmp_path / "s", "good.py", "import jax, jaxrun\njaxrun.record(value=float(jax.numpy.arange(4.0).sum()))\n")
    write(tmp_path / "s", "fails.py", "import jax\nraise RuntimeError('on purpose')\n")
    write(tmp_path / "s", "exits.py", "import jax\nraise SystemExit(3)\n")
    runs = {}
    for backend in ("local", "slurm"):
        done = on_slurm.run("run", tmp_path / "s", "--backend", backend, "--results-dir", tmp_path / backend,
                            "--no-history", cwd=tmp_path, timeout=240)
        assert done.returncode == 1, done.stdout + done.stderr
        runs[backend] = {r["script_name"]: r for r in load(tmp_path / backend / "jax_execution_results.json")
                         ["script_results"]}
    for name in ("good", "fails", "exits"):
        local, remote = runs["local"][name], runs["slurm"][name]
        assert (remote["success"], remote["error_class"], remote["exit_code"], remote["results"]) == \
            (local["success"], local["error_class"], local["exit_code"], local["results"]), name
        assert local["slurm_job_id"] is None and local["queue_wait"] is None
        assert remote["slurm_job_id"] and remote["queue_wait"] is not None
    assert sorted(p.name for p in (tmp_path / "local" / "logs").iterdir()) == \
        sorted(p.name for p in (tmp_path / "slurm" / "logs").iterdir())


def test_a_task_slurm_stops_at_its_time_limit_is_a_timeout_with_slurms_reason(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    marks = tmp_path / "marks"
    marked(tmp_path / "s", "slow.py", marks, seconds=300)
    started = time.monotonic()
    done = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--timeout", "none", "--slurm-option",
                        "time=0:05", "--results-dir", tmp_path / "r", "--no-history", cwd=tmp_path, timeout=280)
    assert done.returncode == 1, done.stdout + done.stderr
    assert time.monotonic() - started < 240  # Slurm stopped it, long before its 300 s
    row = load(tmp_path / "r" / "script_results" / "slow_result.json")
    assert row["error_class"] == "timeout" and not row["success"]
    assert "Slurm stopped the task at its time limit (JobState=TIMEOUT, Reason=TimeLimit" in row["error_message"]
    assert row["attempts"][-1]["error_class"] == "timeout"
    assert marks_of(marks) == ["start slow.py"]  # it ran, and never reached its end
    assert "slow.py: timeout: Slurm stopped the task at its time limit" in done.stderr


def test_ctrl_c_cancels_the_array_and_resume_runs_the_rest(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    interrupt_and_resume(tmp_path, signal.SIGINT, "--backend", "slurm")
    assert jaxrun_tasks(tmp_path / "r") == []


def test_ctrl_c_stops_the_running_script_and_leaves_no_task(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    marks = tmp_path / "marks"
    marked(tmp_path / "s", "a_runs.py", marks, seconds=120)
    marked(tmp_path / "s", "b_waits.py", marks, seconds=0)
    command = jaxrun_command("run", tmp_path / "s", "--backend", "slurm", "--jobs", "1", "--results-dir",
                             tmp_path / "r", "--no-history", interruptible=True)
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=on_slurm.environ())
    deadline = time.monotonic() + 120
    while marks_of(marks) != ["start a_runs.py"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marks_of(marks) == ["start a_runs.py"], proc.communicate(timeout=60)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, out + err
    assert jaxrun_tasks(tmp_path / "r") == []  # the array is cancelled: nothing runs or waits
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is False
    rows = {r["script_name"]: r for r in doc["script_results"]}
    assert rows["a_runs"]["error_class"] == "interrupted"
    assert "jaxrun cancelled its Slurm task (scancel)" in rows["a_runs"]["error_message"]
    assert rows["a_runs"]["execution_time"] is not None, rows["a_runs"]  # what the script did before it was stopped
    assert rows["b_waits"]["error_class"] == "interrupted" and "the script did not run" in rows["b_waits"]["error_message"]
    assert marks_of(marks) == ["start a_runs.py"]  # b_waits never ran; a_runs never ended


def test_kill_9_then_resume_reattaches_to_the_running_array(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    marks = tmp_path / "marks"
    for k in range(3):
        marked(tmp_path / "s", f"m{k}.py", marks, seconds=4, value=k)
    args = ("run", tmp_path / "s", "--backend", "slurm", "--jobs", "1", "--results-dir", tmp_path / "r", "--no-history")
    proc = subprocess.Popen(jaxrun_command(*args), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=on_slurm.environ())
    deadline = time.monotonic() + 120
    while "start m1.py" not in marks_of(marks) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.kill()  # SIGKILL: jaxrun leaves no word; the array runs on
    proc.wait(timeout=30)
    assert "start m1.py" in marks_of(marks) and "end m2.py" not in marks_of(marks)
    # A run without --resume would mix its files with the array's: refused, naming the array.
    refused = on_slurm.run(*args, cwd=tmp_path, timeout=120)
    assert refused.returncode == 2 and "still runs scripts into" in refused.stderr and "--resume" in refused.stderr, \
        refused.stderr
    resumed = on_slurm.run(*args, "--resume", cwd=tmp_path, timeout=240)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # Nothing ran twice: one start and one end per script.
    assert sorted(marks_of(marks)) == sorted(f"{w} m{k}.py" for k in range(3) for w in ("start", "end"))
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    rows = {r["script_name"]: r for r in doc["script_results"]}
    assert [rows[f"m{k}"]["results"]["value"] for k in range(3)] == [0, 1, 2] and doc["metadata"]["complete"]
    assert len({r["slurm_job_id"].partition("_")[0] for r in rows.values()}) == 1  # the first run's array
    assert sorted(p.name for p in (tmp_path / "r" / "logs").iterdir()) == sorted(
        f"m{k}.{s}.log" for k in range(3) for s in ("stdout", "stderr"))


def test_a_partition_that_does_not_exist_is_one_line_before_anything_runs(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    marks = tmp_path / "marks"
    marked(tmp_path / "s", "m.py", marks)
    done = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--slurm-partition", "nosuchpartition",
                        "--results-dir", tmp_path / "r", "--no-history", cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Slurm refuses the job array" in done.stderr
    assert "Invalid partition name specified" in done.stderr and "--slurm-partition" in done.stderr
    assert not marks.exists() and not (tmp_path / "r" / "slurm").exists()


def test_an_unreachable_controller_is_one_line_within_the_timeout(tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    """A slurm.conf naming a controller where nothing listens (this machine, a port just closed)."""
    if subprocess.run(["which", "sbatch"], capture_output=True).returncode != 0:
        pytest.skip("Slurm's commands are not installed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conf = tmp_path / "slurm.conf"
    host = socket.gethostname()
    conf.write_text(f"ClusterName=gone\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={port}\n"
                    f"NodeName={host} CPUs=1\nPartitionName=debug Nodes={host} Default=YES\n")
    marked(tmp_path / "s", "m.py", tmp_path / "marks")
    started = time.monotonic()
    done = jaxrun_cli.run("run", tmp_path / "s", "--backend", "slurm", "--slurm-timeout", "20", "--results-dir",
                          tmp_path / "r", "--no-history", cwd=tmp_path, env={"SLURM_CONF": str(conf)}, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert time.monotonic() - started < 60
    assert done.stderr.count("\n") == 1 and "the Slurm controller is not reachable" in done.stderr, done.stderr
    assert not (tmp_path / "marks").exists()


# Each process contributes its id + 1 to a psum over both processes' devices: 1 + 2 = 3. No address,
# no count: jax.distributed.initialize() finds them in Slurm's own variables.
PSUM = """\
import os
import jax
import jax.numpy as jnp
import jaxrun

jax.distributed.initialize()
me = jax.process_index()
total = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.array([me + 1.0]))
jaxrun.record(total=float(total[0]), process=me, processes=jax.process_count(),
              procid=os.environ["SLURM_PROCID"], jaxrun_id=os.environ["JAXRUN_PROCESS_ID"])
print("process", me, "total", float(total[0]))
jax.distributed.shutdown()
"""

GIVES_UP = """\
import jax
import jax.numpy as jnp

jax.distributed.initialize()
if jax.process_index() == 1:
    raise ValueError("process one gave up")
jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.array([1.0]))  # waits for process 1
"""


def test_a_two_process_job_runs_through_srun_as_one_result(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / "s", "psum.py", PSUM)
    write(tmp_path / "s", "gives_up.py", GIVES_UP)
    done = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--processes", "2", "--device", "cpu",
                        "--results-dir", tmp_path / "r", "--no-history", cwd=tmp_path, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {r["script_name"]: r for r in load(tmp_path / "r" / "jax_execution_results.json")["script_results"]}
    psum = rows["psum"]
    assert psum["success"], psum["error_message"]
    assert psum["results"] == {"total": 3.0, "process": 0, "processes": 2, "procid": "0", "jaxrun_id": "0"}
    assert psum["device_count"] == 2 and psum["slurm_job_id"] and psum["node"] == socket.gethostname()
    processes = psum["processes"]
    assert [p["process_id"] for p in processes] == [0, 1]
    assert processes[1]["results"] == {"total": 3.0, "process": 1, "processes": 2, "procid": "1", "jaxrun_id": "1"}
    assert "process 1 total 3.0" in Path(processes[1]["stdout_log"]).read_text()
    assert processes[1]["stdout_log"].endswith("logs/psum.p1.stdout.log")
    assert psum["execution_time"] >= max(p["execution_time"] for p in processes)
    assert psum["cpu_time"] == pytest.approx(sum(p["cpu_time"] for p in processes))
    # One of the two gives up: the job fails with its error, the other is stopped rather than left waiting.
    failed = rows["gives_up"]
    assert failed["error_class"] == "script_error"
    assert failed["error_message"].startswith("process 1 of 2: ValueError: process one gave up")
    assert failed["processes"][0]["stopped"] == "stopped by jaxrun: process 1 failed first"
    assert failed["execution_time"] < 120


def test_a_results_folder_the_node_cannot_see_is_said_so(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    """jaxrun writes into a folder mounted only in its own mount namespace (unshare -m), as a
    results folder on a login node's local disk is to a compute node: the task finds nothing there."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a folder only jaxrun sees")
    write(tmp_path / "s", "good.py", "import jax\nprint('ran')\n")
    results = tmp_path / "r"
    results.mkdir()
    command = " ".join(shlex.quote(str(a)) for a in jaxrun_command(
        "run", tmp_path / "s", "--backend", "slurm", "--results-dir", results, "--no-history"))
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           f"mount -t tmpfs jaxrun-only {shlex.quote(str(results))} && {command} "
                           f"&& cat {shlex.quote(str(results))}/script_results/good_result.json"
                           f" || cat {shlex.quote(str(results))}/script_results/good_result.json"],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path, env=on_slurm.environ())
    assert "crashed: the task ended (JobState=FAILED) without writing anything into" in done.stderr, done.stderr
    assert "cannot see or write the results folder" in done.stderr
    row = json.loads(done.stdout[done.stdout.index("{"):])
    assert row["error_class"] == "crashed" and row["hint"].startswith("pass a --results-dir that every node")
    assert list(results.iterdir()) == []  # outside jaxrun's namespace: the node saw only this empty folder


def test_a_task_slurm_kills_over_its_memory_is_out_of_memory_with_slurms_words(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    """The test cluster keeps --mem by sampling (no cgroups: jobacct_gather, OverMemoryKill): Slurm
    SIGKILLs the step and writes why into the task's log, which is what jaxrun reads."""
    marks = tmp_path / "marks"
    write(tmp_path / "s", "hog.py", f"""\
import time
import jax
with open({str(marks)!r}, "a") as f:
    f.write("start\\n")
block = bytearray(900 << 20)
block[::4096] = bytes(len(block) >> 12)  # touched: resident
time.sleep(60)
with open({str(marks)!r}, "a") as f:
    f.write("end\\n")
""")
    done = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--slurm-option", "mem=400M", "--results-dir",
                        tmp_path / "r", "--no-history", cwd=tmp_path, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    row = load(tmp_path / "r" / "script_results" / "hog_result.json")
    assert row["error_class"] == "out_of_memory", row["error_message"]
    assert "Slurm stopped the task: it used more memory than it was given (StepId=" in row["error_message"]
    assert "exceeded memory limit" in row["error_message"]
    assert marks_of(marks) == ["start"]


@pytest.fixture
def own_cluster(slurm, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A second private cluster for a test that takes its node down or configures it otherwise
    (``@pytest.mark.parametrize("own_cluster", [(LINE, ...)], indirect=True)``: more slurm.conf
    lines); the session's is shared by the other tests."""
    import slurm_cluster

    with slurm_cluster.private(Path(os.environ["JR_TESTS_BASE_TMP"]) / f"jr-slurm-n{os.getpid()}",
                               tuple(getattr(request, "param", ()))) as cluster:
        for name, value in cluster.env.items():
            monkeypatch.setenv(name, value)
        yield cluster


def test_a_task_lost_with_its_node_is_run_again_and_says_so(tmp_path: Path, own_cluster, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    marks = tmp_path / "marks"
    marked(tmp_path / "s", "long.py", marks, seconds=8, value=7)
    command = jaxrun_command("run", tmp_path / "s", "--backend", "slurm", "--results-dir", tmp_path / "r", "--no-history")
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=jaxrun_cli.environ(own_cluster.env))
    deadline = time.monotonic() + 120
    while marks_of(marks) != ["start long.py"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marks_of(marks) == ["start long.py"], proc.communicate(timeout=60)
    node = own_cluster.node
    own_cluster.run("scontrol", "update", f"nodename={node}", "state=down", "reason=jaxrun-test")
    # Slurm ends the task NODE_FAIL; once the node is back jaxrun's second submission runs it.
    deadline = time.monotonic() + 60
    while "NODE_FAIL" not in own_cluster.run("scontrol", "show", "job", "--oneliner", check=False).stdout:
        assert time.monotonic() < deadline, own_cluster.run("scontrol", "show", "job", "--oneliner").stdout
        time.sleep(0.5)
    # (ReturnToService=2 may bring the node back on its own first: then there is nothing to resume.)
    resumed = own_cluster.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
    assert resumed.returncode == 0 or own_cluster.node_state() not in ("down", "down*"), resumed.stderr
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, out + err
    row = load(tmp_path / "r" / "script_results" / "long_result.json")
    assert row["success"] and row["results"] == {"value": 7}
    lost, ran = row["attempts"]
    assert lost["error_class"] == "node_lost" and "JobState=NODE_FAIL" in lost["error_message"], lost
    assert ran["success"] and ran["number"] == 2
    assert any("run again after its Slurm node was lost or preempted 1 time:" in w for w in row["warnings"])
    assert marks_of(marks) == ["start long.py", "start long.py", "end long.py"]  # once lost, once to its end


def test_a_slurm_folder_jaxrun_did_not_write_is_refused_and_its_own_is_tidied(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / "s", "good.py", "import jax\n")
    theirs = tmp_path / "theirs"
    write(theirs / "slurm", "notes.txt", "mine\n")
    refused = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--results-dir", theirs, "--allow-other-files",
                           "--no-history", cwd=tmp_path, timeout=120)
    assert refused.returncode == 2 and "holds a 'slurm' that jaxrun did not write" in refused.stderr, refused.stderr
    assert (theirs / "slurm" / "notes.txt").read_text() == "mine\n" and sorted(os.listdir(theirs / "slurm")) == ["notes.txt"]
    # jaxrun's own slurm/ folder: a new batch replaces the files of the last one's tasks, and nothing else.
    arrays = []
    for _ in range(2):
        done = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--results-dir", tmp_path / "r", "--no-history",
                            cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
        arrays.append(load(tmp_path / "r" / "script_results" / "good_result.json")["slurm_job_id"])
    write(tmp_path / "r" / "slurm", "kept.txt", "a file of the user's in jaxrun's folder is not jaxrun's to delete\n")
    done = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--results-dir", tmp_path / "r", "--no-history",
                        cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    last = load(tmp_path / "r" / "script_results" / "good_result.json")["slurm_job_id"]
    left = sorted(os.listdir(tmp_path / "r" / "slurm"))
    links = [name for name in left if name.startswith(".submission_file_")]  # submitit's link to the .sh
    assert len(links) == 1 and os.readlink(tmp_path / "r" / "slurm" / links[0]).endswith(f"{last}_submission.sh")
    assert sorted(set(left) - set(links)) == sorted([
        "kept.txt", "tasks.jsonl", f"{last}_submission.sh", f"{last}_submitted.pkl", f"{last}_0_result.pkl",
        f"{last}_0_log.out", f"{last}_0_log.err"])
    assert last not in arrays


@pytest.mark.parametrize("own_cluster", [("MaxArraySize=3",)], indirect=True)
def test_more_scripts_than_an_array_may_hold_go_in_several_arrays(tmp_path: Path, own_cluster, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    marks = tmp_path / "marks"
    for k in range(5):
        marked(tmp_path / "s", f"m{k}.py", marks, value=k)
    done = jaxrun_cli.run("run", tmp_path / "s", "--backend", "slurm", "--jobs", "2", "--results-dir", tmp_path / "r",
                          "--no-history", cwd=tmp_path, env=own_cluster.env, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["script_name"]: r for r in load(tmp_path / "r" / "jax_execution_results.json")["script_results"]}
    assert [rows[f"m{k}"]["results"]["value"] for k in range(5)] == list(range(5))
    assert sorted(marks_of(marks)) == sorted(f"{w} m{k}.py" for k in range(5) for w in ("start", "end"))
    ids = [rows[f"m{k}"]["slurm_job_id"] for k in range(5)]
    arrays = [i.partition("_")[0] for i in ids]
    assert arrays[0] == arrays[1] == arrays[2] != arrays[3] == arrays[4], ids  # 3 + 2 (indices 0-2 at most)
    assert [i.partition("_")[2] for i in ids] == ["0", "1", "2", "0", "1"]


def test_setup_lines_run_on_the_node_before_each_task(tmp_path: Path, on_slurm) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / "s", "reads.py", "import os\nimport jax, jaxrun\njaxrun.record(said=os.environ.get('JR_SETUP_SAID'))\n")
    done = on_slurm.run("run", tmp_path / "s", "--backend", "slurm", "--slurm-setup", "export JR_SETUP_SAID=on-the-node",
                        "--slurm-setup", "test -d /", "--results-dir", tmp_path / "r", "--no-history", cwd=tmp_path,
                        timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert load(tmp_path / "r" / "script_results" / "reads_result.json")["results"] == {"said": "on-the-node"}
    (script,) = (tmp_path / "r" / "slurm").glob("*_submission.sh")
    assert "# setup\nexport JR_SETUP_SAID=on-the-node\ntest -d /\n" in script.read_text()
