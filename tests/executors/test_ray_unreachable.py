"""A Ray cluster that cannot be reached, or stops answering: every wait on it ends within
``--ray-connect-timeout`` seconds in one line (exit 2 before anything runs, or a result that says
so), and Ray's own lines stay out of jaxrun's output.

Real Ray against real addresses: a port where nothing listens, a listener that accepts and never
answers (what a firewall or another service looks like to Ray's client, which retries for ~13
minutes), a host that does not exist, and a real cluster whose GCS is stopped (SIGSTOP) while a
script runs. Each CLI run is given a short timeout; its ``subprocess`` limit is that timeout plus
the interpreter's and Ray's start-up, so a wait that is not bounded fails the test."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import RunResult, child_env, jaxrun, jaxrun_command, load, write

ray = pytest.importorskip("ray")

QUICK = "if False:\n    import jax\nprint('quick')\n"
TIMEOUT = 3  # --ray-connect-timeout in these tests, seconds
START_UP = 45  # the interpreter, jaxrun's imports and Ray's, on a loaded machine
RAY_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d .*\] \S+\.(h|cc):\d+:|Failed to connect to GCS|\(raylet\)|INFO worker\.py")


# The user's Ray settings (RAY_ADDRESS and the like) and JAX_PLATFORMS stay out of the CLI's way.
WITHOUT = ("RAY_*", "JAX_PLATFORMS")


def _env() -> dict[str, str]:
    return child_env(without=WITHOUT)


def _run(folder: Path, results: Path, address: str, *extra: str, limit: float = TIMEOUT + START_UP) -> RunResult:
    return jaxrun("run", folder, "--backend", "ray", "--ray-address", address, "--ray-connect-timeout", TIMEOUT,
                  "--results-dir", results, "--device", "cpu", "--no-compile-cache", "--no-history", *extra,
                  without=WITHOUT, timeout=limit)


def _earlier_run(results: Path) -> Path:
    """A results folder as an earlier batch left it (its manifest claims its script): it must be
    left as it was."""
    write(results, ".jaxrun.manifest", '{"script": "old"}\n')
    write(results, "script_results/old_result.json", '{"kept": true}')
    return write(results, "jax_execution_log.txt", "the earlier run's log\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("address", ["127.0.0.1:1", "localhost:{free}", "ray://127.0.0.1:{free}",
                                     "no-such-host.invalid:6379"])
def test_an_address_nobody_answers_at_is_one_line_before_anything_changes(tmp_path: Path, address: str) -> None:
    write(tmp_path / "s", "a.py", QUICK)
    results = tmp_path / "r"
    log = _earlier_run(results)
    address = address.format(free=_free_port())
    proc = _run(tmp_path / "s", results, address)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"jaxrun: error: cannot reach the Ray cluster at {address}: "), lines
    why = "no host named 'no-such-host.invalid'" if "invalid" in address else "(connection refused)"
    assert why in lines[0], lines
    assert proc.stdout == ""
    assert log.read_text() == "the earlier run's log\n"  # nothing in the folder changed
    assert load(results / "script_results" / "old_result.json") == {"kept": True}


@pytest.mark.slow
def test_a_listener_that_never_answers_ends_within_the_timeout_without_rays_lines(tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", QUICK)
    results = tmp_path / "r"
    log = _earlier_run(results)
    with socket.socket() as silent:  # accepts connections (the kernel does) and never says a word
        silent.bind(("0.0.0.0", 0))
        silent.listen(64)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        proc = _run(tmp_path / "s", results, address)
        took = time.monotonic() - started
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.strip().splitlines() == [
        f"jaxrun: error: the Ray cluster at {address} did not answer within {TIMEOUT} s (--ray-connect-timeout): "
        "check the address (`ray status` on the cluster's head node shows it) and that the cluster is running, "
        "or wait longer with --ray-connect-timeout SECONDS"], proc.stderr
    assert took >= TIMEOUT  # it did wait for the cluster, as long as it was told
    assert log.read_text() == "the earlier run's log\n"


@pytest.mark.slow
@pytest.mark.parametrize("given", ["0", "-1", "nan", "inf", "soon"])
def test_the_timeout_is_a_number_of_seconds_above_zero_wherever_it_is_given(tmp_path: Path, given: str) -> None:
    write(tmp_path / "s", "a.py", QUICK)
    for how in ("flag", "env", "config"):
        args = [sys.executable, "-m", "jaxrun", "run", str(tmp_path / "s"), "--backend", "ray",
                "--results-dir", str(tmp_path / "r"), "--no-history"]
        env = _env()
        if how == "flag":
            args += ["--ray-connect-timeout", given]
        elif how == "env":
            env["JAXRUN_RAY_CONNECT_TIMEOUT"] = given
        else:
            (tmp_path / "s" / "jaxrun.toml").write_text(f'ray_connect_timeout = "{given}"\n')
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
        (tmp_path / "s" / "jaxrun.toml").unlink(missing_ok=True)
        assert proc.returncode == 2, (how, proc.stdout, proc.stderr)
        first, *rest = proc.stderr.strip().splitlines()
        assert rest in ([], ["try 'jaxrun run --help'"]) and "Traceback" not in proc.stderr, (how, proc.stderr)
        assert "ray_connect_timeout" in first or "--ray-connect-timeout" in first, (how, proc.stderr)
        assert not (tmp_path / "r").exists(), how


SLEEPER = """\
if False:
    import jax
import pathlib, time
pathlib.Path({marker!r}).touch()
time.sleep(600)
"""


@pytest.mark.slow
def test_a_cluster_that_stops_answering_mid_batch_ends_the_batch_within_the_timeout(tmp_path: Path) -> None:
    """The GCS of a real cluster stopped (SIGSTOP) while a script runs: no script finishes and the
    cluster does not answer, so the running script and the one still waiting each get a result
    that says so, and jaxrun ends instead of waiting for a cluster that is gone."""
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    marker = tmp_path / "started"
    write(tmp_path / "s", "a_sleeps.py", SLEEPER.format(marker=str(marker)))
    write(tmp_path / "s", "b_waits.py", QUICK)
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    gcs = cluster.head_node.all_processes["gcs_server"][0].process
    address = cluster.address
    jaxrun = None
    try:
        jaxrun = subprocess.Popen(
            jaxrun_command("run", tmp_path / "s", "--backend", "ray", "--ray-address", address,
                           "--ray-connect-timeout", TIMEOUT, "--results-dir", tmp_path / "r",
                           "--device", "cpu", "--no-compile-cache", "--no-history"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline and jaxrun.poll() is None:
            time.sleep(0.1)
        assert marker.exists(), jaxrun.communicate(timeout=60)
        gcs.send_signal(signal.SIGSTOP)
        try:
            # Silence for TIMEOUT, the question unanswered for TIMEOUT, the cancel and the disconnection
            # each TIMEOUT at most: well under a minute.
            out, err = jaxrun.communicate(timeout=6 * TIMEOUT + 30)
        finally:
            gcs.send_signal(signal.SIGCONT)
    finally:
        if jaxrun is not None and jaxrun.poll() is None:
            jaxrun.kill()
            jaxrun.communicate()
        cluster.shutdown()
    assert jaxrun.returncode == 1, (out, err)
    assert not any(RAY_LINE.search(line) for line in (out + err).splitlines()), err
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is True
    gone = f"the Ray cluster at {address} stopped answering: no script finished and it did not answer " \
           f"within {TIMEOUT} s (--ray-connect-timeout)"
    by_name = {r["script_name"]: r for r in doc["script_results"]}
    assert by_name["a_sleeps"]["error_class"] == "crashed"
    assert by_name["a_sleeps"]["error_message"] == f"{gone}; what the script did is unknown"
    assert by_name["b_waits"]["error_message"] == f"not run: {gone}"
    # The running script's worker may still run it: its files are not recorded as final (its claim
    # stands, so what it writes next is still jaxrun's); the one never handed out is recorded.
    manifest = [json.loads(line) for line in (tmp_path / "r" / ".jaxrun.manifest").read_text().splitlines()]
    assert {c["done"] for c in manifest if "done" in c} == {"b_waits"}, manifest
