"""N tiny scripts over a local two-node Ray cluster (issue 24, item 9), beside the same scripts
under a local ``--jobs 2``; used by ``python benchmarks/run.py --only-ray --scripts N``.

The cluster is started as users start one: ``ray start --head`` and ``ray start --address`` (a
worker node), one CPU each, ``--block`` so that stopping the command stops what it started, in a
private ``--temp-dir`` (Ray's address file there, not in the shared /tmp/ray). Token
authentication is Ray's default choice: with a ``~/.ray/auth_token`` the head asks for it, the
worker node is started with ``RAY_AUTH_MODE=token`` (``ray start --address`` sends no token
otherwise), and jaxrun sends it without being told (its environment has no ``RAY_AUTH_MODE``). :func:`two_node_cluster` stops every process it started,
whatever happens (the ``ray start`` commands, then any of their descendants still alive).
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

# Run in a child: the benchmark's own process never joins the cluster. Prints {node id: is head}
# for the nodes alive.
_NODES = """
import json, sys
from jaxrun.executors.ray import _use_a_token_if_there_is_one
_use_a_token_if_there_is_one()
import ray
ray.init(address=sys.argv[1], log_to_driver=False, include_dashboard=False, logging_level="ERROR")
print(json.dumps({n["NodeID"]: "node:__internal_head__" in n["Resources"] for n in ray.nodes() if n["Alive"]}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nodes(address: str, env: dict[str, str]) -> dict[str, bool]:
    out = subprocess.run([sys.executable, "-c", _NODES, address], capture_output=True, text=True, env=env, timeout=120,
                         check=False)
    if out.returncode != 0:
        return {}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each ``ray start --block`` (the worker node first), which stops the processes it
    started; then SIGKILL any of their descendants still alive (only ours: found from our pids)."""
    import psutil

    family: list[psutil.Process] = []
    for proc in procs:
        try:
            family += psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    _, alive = psutil.wait_procs(family, timeout=10)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=10)


@contextlib.contextmanager
def two_node_cluster(env: dict[str, str]) -> Iterator[tuple[str, dict[str, bool]]]:
    """A head and a worker node (one CPU each) on this machine: their address and {node id: is head}."""
    temp_dir = tempfile.mkdtemp(prefix="rb", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    common = ["--num-cpus", "1", "--block", "--disable-usage-stats"]
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts", "start"]
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen([*ray_cli, "--head", "--port", str(port), "--include-dashboard", "false",
                                       "--temp-dir", temp_dir, *common], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        import ray  # only for the node's IP as Ray sees it; the cluster is never joined here

        address = f"{ray.util.get_node_ip_address()}:{port}"
        nodes = _wait_for(lambda: _nodes(address, env), 1, procs)
        # `ray start --head` turns token authentication on when the user has a token, but
        # `ray start --address` sends it only when told to (RAY_AUTH_MODE=token).
        has_token = bool(env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH")
                         or (Path.home() / ".ray" / "auth_token").is_file())
        worker_env = {**env, "RAY_AUTH_MODE": "token"} if has_token and "RAY_AUTH_MODE" not in env else env
        procs.append(subprocess.Popen([*ray_cli, "--address", address, *common], env=worker_env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        nodes = _wait_for(lambda: _nodes(address, env), 2, procs)
        yield address, nodes
    finally:
        _stop(procs)
        import shutil

        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_for(read: Callable[[], dict[str, bool]], count: int, procs: list[subprocess.Popen]) -> dict[str, bool]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"`ray start` exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        nodes = read()
        if len(nodes) >= count:
            return nodes
        time.sleep(1)
    raise RuntimeError(f"the Ray cluster did not reach {count} node(s) in 120 s")


def completeness(results: Path, n: int) -> dict:
    """What the run left: every script once, successful, in one attempt; and who ran how many."""
    doc = json.loads((results / "jax_execution_results.json").read_text())
    rows = doc["script_results"]
    names = collections.Counter(r["script_name"] for r in rows)
    files = sum(1 for _ in (results / "script_results").glob("*_result.json"))
    return {
        "results": len(rows),
        "distinct": len(names),
        "twice": sum(1 for c in names.values() if c > 1),
        "successful": sum(1 for r in rows if r["success"]),
        "one_attempt": sum(1 for r in rows if len(r["attempts"]) == 1),
        "files": files,
        "complete": doc["metadata"].get("complete"),
        "by_node": collections.Counter(r.get("ray_node_id") for r in rows),
        "ok": len(rows) == n == len(names) == files and all(r["success"] and len(r["attempts"]) == 1 for r in rows),
    }


def describe(c: dict, n: int) -> str:
    if c["ok"]:
        return f"all {n} successful, each once, 1 attempt"
    return (f"{c['results']} results ({c['distinct']} distinct, {c['twice']} twice), {c['successful']} successful, "
            f"{c['one_attempt']} in 1 attempt, {c['files']} result files, complete={c['complete']}")
