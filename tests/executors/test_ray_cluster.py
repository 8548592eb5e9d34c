"""The Ray backend across nodes, as users run it.

A real two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``: a head and one worker
node, one CPU each, each node its own raylet), not a mock. The scripts are tiny (they name jax so
that discovery takes them, and never import it); each writes a marker named after its node's
raylet (``RAY_RAYLET_PID``, which Ray sets in every worker of a node) so a test can tell where it
runs. The tests run in file order: the last but one removes the worker node.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import RunResult, jaxrun, load, write
from helpers import run_batch as batch

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.slow


def sleeper(markers: Path, seconds: float) -> str:
    """A script that marks where it runs (its node's raylet pid, its own pid), then sleeps."""
    return (
        "if False:\n    import jax\n"
        "import os, time, pathlib\n"
        f"pathlib.Path({str(markers)!r}, pathlib.Path(__file__).stem + '.' + os.environ.get('RAY_RAYLET_PID', 'none')"
        " + '.' + str(os.getpid())).touch()\n"
        f"time.sleep({seconds})\n"
        "print(1)\n"
    )


def raylet_pid(node) -> str:
    return str(node.all_processes["raylet"][0].process.pid)


@pytest.fixture(scope="module")
def cluster():
    made = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = made.add_node(num_cpus=1)
    made.wait_for_nodes()
    ray.init(address=made.address, log_to_driver=False)
    made.worker = worker
    yield made
    ray.shutdown()
    made.shutdown()


def test_each_result_records_the_node_that_ran_it(cluster, tmp_path: Path) -> None:
    # Two scripts at once on two one-CPU nodes: one on each.
    markers = tmp_path / "markers"
    markers.mkdir()
    write(tmp_path / "s", "a.py", sleeper(markers, 1.5))
    write(tmp_path / "s", "b.py", sleeper(markers, 1.5))
    result = batch(tmp_path / "s", tmp_path / "r", backend="ray", jobs=2)
    assert result.success, [(r.script_name, r.error_message) for r in result.script_results]
    ids = {r.ray_node_id for r in result.script_results}
    assert ids == {cluster.head_node.node_id, cluster.worker.node_id}
    assert {r.node for r in result.script_results} == {socket.gethostname()}
    by_raylet = {raylet_pid(cluster.head_node): cluster.head_node.node_id,
                 raylet_pid(cluster.worker): cluster.worker.node_id}
    for r in result.script_results:
        (marker,) = markers.glob(f"{r.script_name}.*")
        assert by_raylet[marker.name.split(".")[1]] == r.ray_node_id
        assert r.warnings == [] and len(r.attempts) == 1
    # In the files too; a local run records neither.
    saved = load(tmp_path / "r" / "script_results" / "a_result.json")
    assert saved["ray_node_id"] in ids and saved["node"] == socket.gethostname()
    local = batch(tmp_path / "s", tmp_path / "local")
    assert [(r.node, r.ray_node_id) for r in local.script_results] == [(None, None), (None, None)]


# Kills the Ray worker running it (its parent), so that Ray's driver gets "(raylet) A worker died
# or was killed ..." messages to print; does nothing outside a Ray worker.
KILLS_ITS_WORKER = """\
if False:
    import jax
import os, signal
import psutil

parent = " ".join(psutil.Process(os.getppid()).cmdline())
if "ray::" in parent or "default_worker" in parent:
    os.kill(os.getppid(), signal.SIGKILL)
raise SystemExit("not running under a Ray worker")
"""


def test_cli_output_has_no_ray_log_lines(cluster, tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", "if False:\n    import jax\nprint('from the script')\n")
    write(tmp_path / "s", "b_kills_its_worker.py", KILLS_ITS_WORKER)
    env = dict(os.environ)
    env.pop("JAX_PLATFORMS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "run", str(tmp_path / "s"), "--backend", "ray",
         "--ray-address", cluster.address, "--results-dir", str(tmp_path / "r"),
         "--device", "cpu", "--no-compile-cache", "--no-history"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)  # b_kills_its_worker: crashed
    assert "Traceback" not in proc.stderr
    for line in (proc.stdout + proc.stderr).splitlines():
        assert not line.lstrip().startswith(("(raylet", "(pid=", "(run_on_worker")), line
        assert " INFO worker.py" not in line and "-- Connecting to existing Ray cluster" not in line, line
        assert "from the script" not in line, line  # the script's output is in its log, not echoed
        assert "A worker died" not in line and "(raylet)" not in line, line
    assert "from the script" in (tmp_path / "r" / "logs" / "a.stdout.log").read_text()
    assert load(tmp_path / "r" / "script_results" / "b_kills_its_worker_result.json")["error_class"] == "crashed"


# Appends a line to a file each time it runs, then kills the Ray worker running it (its parent).
COUNTS_THEN_KILLS_ITS_WORKER = """\
if False:
    import jax
import os, signal
import psutil

with open({runs!r}, "a") as f:
    f.write(f"{{os.getpid()}} {{os.environ.get('RAY_RAYLET_PID', 'none')}}\\n")
parent = " ".join(psutil.Process(os.getppid()).cmdline())
if "ray::" in parent or "default_worker" in parent:
    os.kill(os.getppid(), signal.SIGKILL)
raise SystemExit("not running under a Ray worker")
"""


def test_a_script_that_kills_its_worker_runs_once_and_is_crashed(cluster, tmp_path: Path) -> None:
    """Nothing is run twice but a task lost with its node: a worker killed by its own script on a
    cluster whose nodes are all alive is one ``crashed`` result, not three runs."""
    runs = tmp_path / "runs.txt"
    write(tmp_path / "s", "a_kills_its_worker.py", COUNTS_THEN_KILLS_ITS_WORKER.format(runs=str(runs)))
    write(tmp_path / "s", "b.py", "if False:\n    import jax\nprint(1)\n")
    result = batch(tmp_path / "s", tmp_path / "r", backend="ray", jobs=2, timeout=120)
    killer, good = result.script_results
    assert good.success and len(good.attempts) == 1
    assert len(runs.read_text().splitlines()) == 1, runs.read_text()  # run exactly once
    assert not killer.success and killer.error_class == "crashed"
    assert "the Ray worker running this script died while the script ran" in killer.error_message
    assert "WorkerCrashedError" in killer.error_message and "still alive" in killer.error_message
    assert "not run again" in killer.error_message
    assert [(a.number, a.error_class) for a in killer.attempts] == [(1, "crashed")]
    assert killer.warnings == []
    assert result.metadata.complete is True
    saved = load(tmp_path / "r" / "script_results" / "a_kills_its_worker_result.json")
    assert saved["error_class"] == "crashed" and len(saved["attempts"]) == 1
    # Both nodes still there for the tests after this one.
    assert {n["NodeID"] for n in ray.nodes() if n["Alive"]} == {cluster.head_node.node_id, cluster.worker.node_id}


def test_a_node_lost_mid_batch_runs_its_script_again_on_another_node(cluster, tmp_path: Path) -> None:
    """Runs last but one: it removes the worker node while that node runs a script."""
    markers = tmp_path / "markers"
    markers.mkdir()
    write(tmp_path / "s", "a.py", sleeper(markers, 4))
    write(tmp_path / "s", "b.py", sleeper(markers, 4))
    worker = cluster.worker
    victim: list[str] = []

    def remove_the_worker_node_mid_run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            on_worker = [m for m in markers.iterdir() if m.name.split(".")[1] == raylet_pid(worker)]
            if on_worker and len(list(markers.iterdir())) >= 2:  # both running, one on each node
                victim.append(on_worker[0].name.split(".")[0])
                cluster.remove_node(worker)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=remove_the_worker_node_mid_run)
    killer.start()
    result = batch(tmp_path / "s", tmp_path / "r", backend="ray", jobs=2, timeout=120)
    killer.join()
    assert victim, "the worker node never ran a script"
    assert result.success, [(r.script_name, r.error_message) for r in result.script_results]
    assert result.metadata.complete is True
    lost = next(r for r in result.script_results if r.script_name == victim[0])
    other = next(r for r in result.script_results if r.script_name != victim[0])
    assert other.ray_node_id == cluster.head_node.node_id and len(other.attempts) == 1
    # Run again on the node still alive, after a first attempt lost with its node.
    assert lost.ray_node_id == cluster.head_node.node_id
    assert [(a.number, a.success, a.error_class) for a in lost.attempts] == [(1, False, "crashed"), (2, True, None)]
    assert "NodeDiedError" in lost.attempts[0].error_message
    assert any("run again after its Ray node" in w and worker.node_id in w for w in lost.warnings), lost.warnings
    assert len(list(markers.glob(f"{victim[0]}.*"))) == 2
    saved = load(tmp_path / "r" / "script_results" / f"{victim[0]}_result.json")
    assert saved["success"] is True and len(saved["attempts"]) == 2


def test_a_node_dead_before_the_batch_does_not_make_a_killed_worker_run_again(cluster, tmp_path: Path) -> None:
    """After the worker node's removal (the test above): a node that died before the batch is not a
    node lost under its task, so a script killing its worker still runs once; a node that died
    after a task was handed to Ray is (what makes a lost worker run again)."""
    from jaxrun.executors.ray import _NodeWatch

    dead = {n["NodeID"] for n in ray.nodes() if not n["Alive"]}
    assert cluster.worker.node_id in dead
    runs = tmp_path / "runs.txt"
    write(tmp_path / "s", "a_kills_its_worker.py", COUNTS_THEN_KILLS_ITS_WORKER.format(runs=str(runs)))
    result = batch(tmp_path / "s", tmp_path / "r", backend="ray", jobs=1, timeout=120)
    (killer,) = result.script_results
    assert len(runs.read_text().splitlines()) == 1, runs.read_text()
    assert killer.error_class == "crashed" and "not run again" in killer.error_message
    assert len(killer.attempts) == 1
    # What _result_of asks when a worker is lost: the nodes dead now that were alive (not known
    # dead) when the task was handed to Ray.
    watch = _NodeWatch(ray)
    assert watch.died_since(watch.dead) == frozenset()
    assert cluster.worker.node_id in watch.died_since(frozenset(dead - {cluster.worker.node_id}))


# --------------------------------------------------------------------------- token authentication


@pytest.fixture
def cluster_with_token(tmp_path: Path):
    """A head started as users start it, ``ray start --head``, with Ray's token authentication
    (``RAY_AUTH_MODE=token``, the token in its ~/.ray/auth_token; a private HOME)."""
    import secrets

    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    token = secrets.token_hex(32)
    (home / ".ray" / "auth_token").write_text(token)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), RAY_AUTH_MODE="token")
    head = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--port", str(port), "--num-cpus", "1",
         "--include-dashboard", "false", "--block", "--disable-usage-stats"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        address = f"{ray.util.get_node_ip_address()}:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex((address.split(":")[0], port)) == 0:
                    break
            assert head.poll() is None, head.stderr.read() if head.stderr else ""
            time.sleep(0.2)
        yield address, home, token
    finally:
        head.terminate()  # `ray start --block` stops the processes it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()


def run_cli(address: str, folder: Path, results: Path, env: dict[str, str]) -> RunResult:
    """``jaxrun run`` on the cluster at ``address``, without the user's Ray settings (RAY_*) or
    JAX_PLATFORMS, with ``env`` added."""
    return jaxrun("run", folder, "--backend", "ray", "--ray-address", address, "--results-dir", results,
                  "--device", "cpu", "--no-compile-cache", "--no-history", env=env, without=("RAY_*", "JAX_PLATFORMS"),
                  timeout=300)


def test_jaxrun_reaches_a_cluster_with_token_authentication(cluster_with_token, tmp_path: Path) -> None:
    """Ray's driver sends no token to an address it is given unless RAY_AUTH_MODE=token; jaxrun
    sends the user's token (their ~/.ray/auth_token, or RAY_AUTH_TOKEN) as ``ray start`` does."""
    address, home, token = cluster_with_token
    write(tmp_path / "s", "a.py", "if False:\n    import jax\nprint(1)\n")
    # The token in the user's ~/.ray/auth_token, RAY_AUTH_MODE unset.
    proc = run_cli(address, tmp_path / "s", tmp_path / "r1", {"HOME": str(home)})
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Token authentication" not in proc.stderr
    # The token in Ray's own variable.
    empty_home = tmp_path / "empty_home"
    empty_home.mkdir()
    proc = run_cli(address, tmp_path / "s", tmp_path / "r2", {"HOME": str(empty_home), "RAY_AUTH_TOKEN": token})
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert load(tmp_path / "r2" / "script_results" / "a_result.json")["success"] is True
