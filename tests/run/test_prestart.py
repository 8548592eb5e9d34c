"""Prestarted interpreters (--prestart; run/process/prestart.py, probe/fork_server.py): a forked script's
process is what an exec'd probe would be (each fact read by the script itself, compared with the
same script exec'd), falls back to exec saying why, keeps every ending path and figure, and neither
the server nor its children outlive jaxrun. Real processes, real JAX, no wall-clock budget."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import jaxrun, jaxrun_command, load
from helpers import write as write_file


def write(folder: Path, name: str, text: str) -> Path:
    """A script the batch finds (it names jax, which it need not import)."""
    return write_file(folder, name, text if not name.endswith(".py") or "import jax" in text
                      else text + "\nif False:\n    import jax\n")

# Everything a script can see of how its process was made, written to identity.json beside it.
IDENTITY = r'''
import atexit, json, os, random, resource, signal, sys, threading
here = os.path.dirname(os.path.abspath(__file__))
# Each thread's cgroups (v1 places threads one by one): the probe's lifeline watcher and one the
# script starts, beside the main thread, must all be in the run's groups.
go_on = threading.Event()
started = threading.Thread(target=go_on.wait)
started.start()
views = {open(f"/proc/self/task/{tid}/cgroup").read() for tid in os.listdir("/proc/self/task")}
go_on.set()
started.join()
own = dict(line.split(":", 2)[1:] for line in open("/proc/self/cgroup").read().splitlines())
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    fds[fd] = "pipe" if target.startswith("pipe:") else os.path.basename(target)  # each run's folders differ
facts = {
    "session_is_own": os.getsid(0) == os.getpid() == os.getpgrp(),
    "cwd": os.getcwd(), "argv": sys.argv, "path0": sys.path[0],
    "env": {k: v for k, v in os.environ.items() if k not in ("JAXRUN_EVENTS_FILE", "JAXRUN_OUTPUT_DIR")},
    "umask": int([l for l in open("/proc/self/status") if l.startswith("Umask:")][0].split()[1], 8),
    "signals": {str(int(s)): str(signal.getsignal(s)) for s in signal.valid_signals()
                if s not in (signal.SIGKILL, signal.SIGSTOP)},
    "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")},
    "affinity": sorted(os.sched_getaffinity(0)),
    "fds": sorted(fds.values()),
    "modules": sorted(sys.modules),
    "atexit": atexit._ncallbacks(),
    "random": random.random(),
    "flags": str(sys.flags),
    "orig_argv": sys.orig_argv[1:3],
    "threads": threading.active_count() + 1,  # the probe's lifeline watcher, a thread threading does not list
    "cgroup_views": len(views),
    "in_a_group_of_its_own": own.get("pids", "/") != "/" or own.get("", "/") != "/",
}
name = os.path.basename(__file__)[:-3]
with open(os.path.join(here, f"{name}.identity.json"), "w") as out:
    json.dump(facts, out)
'''


def _run(folder: Path, results: Path, mode: str, *extra: str, env: dict | None = None):  # type: ignore[no-untyped-def]
    return jaxrun("run", folder, "--results-dir", results, "--no-history", "--prestart", mode, *extra, env=env)


def _result(results: Path, name: str) -> dict:
    return load(results / "script_results" / f"{name}_result.json")


def test_a_forked_process_is_what_an_exec_d_probe_would_be(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "ident.py", IDENTITY)
    facts = {}
    for mode in ("none", "probe"):
        done = _run(folder, tmp_path / mode, mode, "--jobs", "1", "--", "--an-arg", "x y")
        assert done.returncode == 0, done.stderr
        assert _result(tmp_path / mode, "ident")["start_mode"] == {"none": "exec", "probe": "fork"}[mode]
        facts[mode] = json.loads((folder / "ident.identity.json").read_text())
    exec_d, forked = facts["none"], facts["probe"]
    assert forked["session_is_own"] and exec_d["session_is_own"]
    # Every thread in the run's groups (where jaxrun can make them: as root here), however it started.
    assert forked["cgroup_views"] == 1, forked["cgroup_views"]
    assert forked["in_a_group_of_its_own"] == (os.geteuid() == 0 and not os.environ.get("JAXRUN_NO_CGROUP"))
    for key in ("cwd", "argv", "path0", "env", "umask", "signals", "blocked", "rlimits", "affinity", "fds",
                "atexit", "flags", "orig_argv", "cgroup_views", "in_a_group_of_its_own"):
        assert forked[key] == exec_d[key], key
    assert list(forked["env"]) == list(exec_d["env"])  # in the same order, too
    assert forked["argv"] == [str(folder / "ident.py"), "--an-arg", "x y"]
    # Not one module of the server's own (socket, select, its prestart module) is left for the script.
    assert set(forked["modules"]) == set(exec_d["modules"]), set(forked["modules"]) ^ set(exec_d["modules"])
    assert "jaxrun.probe.fork_server" not in forked["modules"]


def test_forked_scripts_get_fresh_random_generators_and_none_of_the_servers_exit_handlers(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    for name in ("one", "two"):
        write(folder, f"{name}.py", "import random, sys\nimport numpy\n"
              "print(random.random(), numpy.random.random())\n")
    done = _run(folder, tmp_path / "r", "jax", "--jobs", "1")
    assert done.returncode == 0, done.stderr
    printed = [(tmp_path / "r" / "logs" / f"{n}.stdout.log").read_text().split() for n in ("one", "two")]
    assert {_result(tmp_path / "r", n)["start_mode"] for n in ("one", "two")} == {"fork+jax"}
    assert printed[0][0] != printed[1][0] and printed[0][1] != printed[1][1]


def test_exit_codes_signals_exceptions_and_timeouts_under_fork(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "exits.py", "import sys\nsys.exit(3)\n")
    write(folder, "raises.py", "raise ValueError('no')\n")
    write(folder, "killed.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    write(folder, "hangs.py", "import time\ntime.sleep(60)\n")
    write(folder, "hard_exit.py", "import os\nos._exit(5)\n")
    done = _run(folder, tmp_path / "r", "probe", "--timeout", "2")
    assert done.returncode != 0
    results = {n: _result(tmp_path / "r", n) for n in ("exits", "raises", "killed", "hangs", "hard_exit")}
    assert {r["start_mode"] for r in results.values()} == {"fork"}
    assert results["exits"]["exit_code"] == 3
    assert results["raises"]["exit_code"] == 1 and results["raises"]["exception_type"] == "ValueError"
    assert results["killed"]["signal"] == signal.SIGKILL
    assert results["hangs"]["error_class"] == "timeout"
    assert results["hard_exit"]["exit_code"] == 5
    for result in results.values():
        assert result["execution_time"] > 0 and result["cpu_time"] > 0


def test_a_script_forks_children_and_their_cpu_counts(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "spawns.py", "import subprocess, sys\n"
          "subprocess.run([sys.executable, '-c', 'x = sum(i * i for i in range(3_000_000))'], check=True)\n")
    done = _run(folder, tmp_path / "r", "probe")
    assert done.returncode == 0, done.stderr
    result = _result(tmp_path / "r", "spawns")
    assert result["start_mode"] == "fork" and result["leftover_processes"] == 0
    assert result["cpu_time"] > 0.05  # the child's loop is the script's CPU


@pytest.mark.parametrize("asked_x64", [False, True])
def test_jax_config_follows_the_scripts_environment_both_ways(tmp_path: Path, asked_x64: bool) -> None:
    folder = tmp_path / "s"
    write(folder, "reads.py", "import jax\nprint(jax.config.jax_enable_x64, jax.devices()[0].platform)\n")
    extra = ("--x64",) if asked_x64 else ()
    done = _run(folder, tmp_path / "r", "jax", *extra)
    assert done.returncode == 0, done.stderr
    result = _result(tmp_path / "r", "reads")
    printed = (tmp_path / "r" / "logs" / "reads.stdout.log").read_text().split()
    assert printed == [str(asked_x64), "cpu"]
    # The server imports jax with the first script's environment: the x64 one too, and forks it.
    assert result["start_mode"] == "fork+jax"
    assert result["prestart_import_time"] > 0


def test_a_script_that_sets_jax_variables_itself_is_exec_d_and_gets_them(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "a_plain.py", "import jax\nprint(jax.config.jax_enable_x64, jax.config.jax_platforms)\n")
    write(folder, "b_sets.py", "import os\nos.environ['JAX_ENABLE_X64'] = '1'\nos.environ['JAX_PLATFORMS'] = 'cpu'\n"
          "import jax\nprint(jax.config.jax_enable_x64, jax.config.jax_platforms)\n")
    done = _run(folder, tmp_path / "r", "jax", "--jobs", "1")
    assert done.returncode == 0, done.stderr
    plain, sets = _result(tmp_path / "r", "a_plain"), _result(tmp_path / "r", "b_sets")
    assert plain["start_mode"] == "fork+jax" and plain["prestart_reason"] is None
    assert sets["start_mode"] == "exec" and "JAX_ENABLE_X64" in sets["prestart_reason"]
    assert (tmp_path / "r" / "logs" / "b_sets.stdout.log").read_text().split() == ["True", "cpu"]
    assert (tmp_path / "r" / "logs" / "a_plain.stdout.log").read_text().split()[0] == "False"
    log = (tmp_path / "r" / "jax_execution_log.txt").read_text()
    assert log.count("JAX_ENABLE_X64 itself") <= 1  # said once at most, in every result


def test_jax_variables_of_the_environment_and_env_fall_back_to_exec(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "reads.py", "import jax\nprint(jax.config.jax_enable_x64)\n")
    done = _run(folder, tmp_path / "r", "jax", "--env", "JAX_ENABLE_X64=1")
    assert done.returncode == 0, done.stderr
    result = _result(tmp_path / "r", "reads")
    assert result["start_mode"] == "exec" and "--env sets JAX_ENABLE_X64" in result["prestart_reason"]
    assert (tmp_path / "r" / "logs" / "reads.stdout.log").read_text().split() == ["True"]


def test_auto_execs_benchmark_runs_and_forks_a_plain_batch(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "tiny.py", "print(1)\n")
    done = jaxrun("run", folder, "--results-dir", tmp_path / "plain", "--no-history")
    assert done.returncode == 0, done.stderr
    assert _result(tmp_path / "plain", "tiny")["start_mode"] == "fork"
    done = jaxrun("run", folder, "--results-dir", tmp_path / "bench", "--no-history", "--benchmark-runs", "2")
    assert done.returncode == 0, done.stderr
    bench = _result(tmp_path / "bench", "tiny")
    assert bench["start_mode"] == "exec" and "benchmark runs" in bench["prestart_reason"]
    # Asked for, a benchmark's runs are forked all the same.
    done = jaxrun("run", folder, "--results-dir", tmp_path / "asked", "--no-history", "--benchmark-runs", "2",
                  env={"JAXRUN_PRESTART": "probe"})
    assert done.returncode == 0, done.stderr
    assert _result(tmp_path / "asked", "tiny")["start_mode"] == "fork"


def test_openblas_recreates_its_pool_in_a_forked_child(tmp_path: Path) -> None:
    """OpenBLAS's workers, started by `import numpy` in the server, are the one kind of thread the
    server forks with: OpenBLAS stops them before the fork and a child's matmul starts them again."""
    folder = tmp_path / "s"
    write(folder, "blas.py", "import os, numpy\n"
          "before = len(os.listdir('/proc/self/task'))\n"
          "a = numpy.ones((400, 400)); a @ a\n"
          "print(before, len(os.listdir('/proc/self/task')), os.cpu_count())\n")
    for mode in ("none", "jax"):
        done = _run(folder, tmp_path / mode, mode)
        assert done.returncode == 0, done.stderr
    exec_d = [int(n) for n in (tmp_path / "none" / "logs" / "blas.stdout.log").read_text().split()]
    forked = [int(n) for n in (tmp_path / "jax" / "logs" / "blas.stdout.log").read_text().split()]
    assert _result(tmp_path / "jax", "blas")["start_mode"] == "fork+jax"
    # After a matmul, the forked child runs as many threads as the exec'd one: OpenBLAS's whole pool.
    assert forked[1] == exec_d[1], (forked, exec_d)
    if (os.cpu_count() or 1) > 1:
        assert forked[1] > forked[0]  # its pool was started again in the child


def test_memory_of_a_forked_script_is_its_own_peak(tmp_path: Path) -> None:
    """memory_peak under fork is at least the script's process's own VmHWM (which counts the pages
    it maps of the server's) and about what the same script uses exec'd."""
    folder = tmp_path / "s"
    write(folder, "big.py", "import os\nblock = bytearray(200 * 2**20)\nblock[::4096] = b'x' * len(block[::4096])\n"
          "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
          "print(int(hwm) / 1024)\n")
    peaks = {}
    for mode in ("none", "probe"):
        done = _run(folder, tmp_path / mode, mode)
        assert done.returncode == 0, done.stderr
        own = float((tmp_path / mode / "logs" / "big.stdout.log").read_text())
        peaks[mode] = _result(tmp_path / mode, "big")["memory_peak"]
        assert peaks[mode] >= own - 1, (mode, peaks[mode], own)
        assert own >= 200
    assert abs(peaks["probe"] - peaks["none"]) < 40, peaks


def _servers(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "--prestart-server" in (proc.info["cmdline"] or ()) and proc.environ().get("PRESTART_TOKEN") == token:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("how", ["sigkill", "ctrl_c"])
def test_nothing_outlives_jaxrun(tmp_path: Path, how: str) -> None:
    folder = tmp_path / "s"
    marker = tmp_path / "started"
    write(folder, "sleeps.py", f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(120)\n")
    token = str(tmp_path)
    env = {**os.environ, "PRESTART_TOKEN": token, "JAXRUN_PRESTART": "probe"}
    proc = subprocess.Popen(jaxrun_command("run", folder, "--results-dir", tmp_path / "r", "--no-history"),
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists()
        # A forked child shows the server's command line too (no exec): the server is jaxrun's child.
        servers = [p for p in _servers(token) if p.ppid() == proc.pid]
        assert len(servers) == 1
        children = servers[0].children()
        assert children  # the script's process, forked by the server
        proc.send_signal(signal.SIGKILL if how == "sigkill" else signal.SIGINT)
        proc.wait(timeout=30)
        gone, alive = psutil.wait_procs([*servers, *children], timeout=15)
        assert not alive, alive
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _launched_with_site(tmp_path: Path, site_code: str, flag: str, runs: int) -> list:
    """``runs`` launches of a tiny script through a probe server whose environment holds a
    ``sitecustomize`` (``site_code``) and sets ``flag`` (the scripts' environment does not): the
    launches' outcomes; the n-th writes out{n}.log."""
    from jaxrun.config.options import RunOptions
    from jaxrun.run.batch_pool import BatchPool
    from jaxrun.run.process.environment import probe_command
    from jaxrun.run.process.prestart import StartPlan
    from jaxrun.run.process.process_watch import Limits, launch
    from jaxrun.run.process.spare import spare_environment

    script = write(tmp_path / "s", "tiny.py", "print(1)\n")
    pool = BatchPool()
    site = write(tmp_path / "site", "sitecustomize.py", site_code)
    env = spare_environment()
    env["PYTHONPATH"] = os.pathsep.join([str(site.parent), env.get("PYTHONPATH", "")])
    pool.prestart.open("probe", {**env, flag: "1"})
    try:
        outcomes = []
        for n in range(runs):
            events = tmp_path / f"events{n}.jsonl"
            command = probe_command(script, events, RunOptions.build("api"))
            outcomes.append(launch(command, cwd=script.parent, env={**env, "JAXRUN_EVENTS_FILE": str(events)},
                                   stdout_log=tmp_path / f"out{n}.log", stderr_log=tmp_path / f"err{n}.log",
                                   events_path=events, limits=Limits(timeout=60, log_cap=2**20), pool=pool,
                                   start=StartPlan("probe")))
    finally:
        pool.close()
    return outcomes


def test_a_thread_the_server_does_not_know_means_exec_and_says_why(tmp_path: Path) -> None:
    # A server whose environment starts a thread of its own at start-up (sitecustomize).
    outcomes = _launched_with_site(tmp_path, "import os, threading, time\n"
                                   "if os.environ.get('START_A_THREAD'):\n"
                                   "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n",
                                   "START_A_THREAD", 2)
    for outcome in outcomes:
        assert outcome.start_mode == "exec" and outcome.exit_code == 0
        assert "not known to be fork-safe" in outcome.prestart_reason
    assert (tmp_path / "out1.log").read_text().strip() == "1"


def test_a_server_that_ends_as_it_starts_means_exec_and_says_what_it_said(tmp_path: Path) -> None:
    # The server's interpreter (alone: its environment says so) ends at start-up, saying why.
    (outcome,) = _launched_with_site(tmp_path, "import os, sys\n"
                                     "if os.environ.get('END_THE_SERVER'):\n"
                                     "    sys.stderr.write('the site says no\\n')\n    sys.stderr.flush()\n"
                                     "    os._exit(3)\n", "END_THE_SERVER", 1)
    assert outcome.start_mode == "exec" and outcome.exit_code == 0
    assert outcome.prestart_reason == "the prestarted process ended (status 3): the site says no"
    assert (tmp_path / "out0.log").read_text().strip() == "1"


def test_the_prestart_option_is_checked(tmp_path: Path) -> None:
    write(tmp_path / "s", "tiny.py", "print(1)\n")
    done = jaxrun("run", tmp_path / "s", "--prestart", "fast", "--no-history")
    assert done.returncode == 2
    assert "prestart must be one of auto, none, probe, jax" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_that_does_not_answer_is_not_waited_for_and_its_late_fork_is_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch waits a bounded time for the prestarted interpreter (a stopped or swamped one): then
    the script is exec'd, saying why, and what the server forks after that, which nobody watches,
    is stopped at once."""
    from jaxrun.config.options import RunOptions
    from jaxrun.run.batch_pool import BatchPool
    from jaxrun.run.process import prestart
    from jaxrun.run.process.environment import probe_command
    from jaxrun.run.process.prestart import StartPlan
    from jaxrun.run.process.process_watch import Limits, launch
    from jaxrun.run.process.spare import spare_environment

    monkeypatch.setattr(prestart, "ANSWER_SECONDS", 2.0)
    script = write(tmp_path / "s", "late.py", "import time\nopen('ran', 'a').write('x')\ntime.sleep(30)\n")
    pool = BatchPool()
    env = spare_environment()
    pool.prestart.open("probe", env)
    server = pool.prestart.server("probe", env)
    assert server is not None and server.ready.wait(60)
    events = tmp_path / "events.jsonl"
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        outcome = launch(probe_command(script, events, RunOptions.build("api", timeout=5)), cwd=script.parent,
                         env={**env, "JAXRUN_EVENTS_FILE": str(events)}, stdout_log=tmp_path / "out.log",
                         stderr_log=tmp_path / "err.log", events_path=events,
                         limits=Limits(timeout=5, log_cap=2**20), pool=pool, start=StartPlan("probe"))
        assert outcome.start_mode == "exec"
        assert outcome.prestart_reason == "the prestarted process did not answer within 2 s"
        children_before = {p.pid for p in psutil.Process(server.proc.pid).children()}
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    # The request it reads now is forked for nobody: stopped at once (unstopped, it would sleep 30 s).
    time.sleep(3)
    alive = [p for p in psutil.Process(server.proc.pid).children() if p.pid not in children_before]
    pool.close()
    assert not alive
