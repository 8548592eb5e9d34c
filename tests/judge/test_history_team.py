"""One PostgreSQL history for a team, tried as a team would: a batch whose server goes away in its
middle loses no result and, after ``--resume``, no history row, each written once; two batches at
once, one of them through ``--backend slurm``, write every run of both, each once, and ``jaxrun
history``, ``--changes`` and the page over commits show each once. No password in any file jaxrun
wrote, nor in what it printed. Real servers: tests/postgres_cluster.py and tests/slurm_cluster.py."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import (
    child_env,
    git_commit,
    git_in,
    jaxrun,
    jaxrun_command,
    load,
    read_page,
    write,
)

from jaxrun.judge.history import HistoryStore

pytest.importorskip("psycopg")

pytestmark = pytest.mark.slow

PASSWORD = "s3cret-Pa55word"  # tests/postgres_cluster.py's: what no file jaxrun writes may hold

# b stops the server at its first run (jaxrun's history connection dies with it) and says so in a
# file; the test starts the server again from outside the batch (a server started by a script would
# end with it: jaxrun leaves no process of a script behind), and c waits until it has.
STOPS = """\
if False:
    import jax  # found by discovery, never imported
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import postgres_cluster
said = Path({said!r})
if not said.exists():
    postgres_cluster.PostgresCluster.load(Path({state!r})).stop("immediate")
    said.write_text("stopped")
"""
WAITS = """\
if False:
    import jax
import time
from pathlib import Path
deadline = time.monotonic() + 120
while Path({said!r}).read_text() != "started" and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def _held_password(*folders: Path) -> list[str]:
    found = subprocess.run(["grep", "-rl", PASSWORD, *map(str, folders)], capture_output=True, text=True)
    return found.stdout.splitlines()


def test_a_server_lost_mid_batch_loses_nothing_and_resume_writes_each_missing_run_once(tmp_path: Path) -> None:
    import postgres_cluster

    with postgres_cluster.private() as cluster:
        url = cluster.database("team")
        tests = str(Path(__file__).resolve().parents[1])
        said = tmp_path / "server.txt"
        write(tmp_path / "s", "a_before.py", "if False:\n    import jax\nx = sum(range(1000))\n")
        write(tmp_path / "s", "b_stops_the_server.py", STOPS.format(tests=tests, state=str(cluster.state_dir),
                                                                   said=str(said)))
        write(tmp_path / "s", "c_after_it_is_back.py", WAITS.format(said=str(said)))

        def start_again() -> None:
            deadline = time.monotonic() + 240
            while not said.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            cluster.start()
            said.write_text("started")

        restarter = threading.Thread(target=start_again, daemon=True)
        restarter.start()
        args = ("run", tmp_path / "s", "--benchmark-runs", "2", "--warmup-runs", "0", "--jobs", "1",
                "--history", url, "--results-dir", tmp_path / "r")
        first = jaxrun(*args, cwd=tmp_path, timeout=300)
        restarter.join(timeout=60)
        assert first.returncode == 0 and said.read_text() == "started", first.stdout + first.stderr
        batch = load(tmp_path / "r" / "jax_execution_results.json")
        bench = {r["script_name"]: r["benchmark"] for r in batch["script_results"]}
        # Every result is in the files; the run measured while the server was away is not in the
        # history, and the batch says so in one line; the one after it came back is.
        assert all(b["runs_completed"] == 2 and len(b["run_key"]) == 32 for b in bench.values())
        assert bench["b_stops_the_server"]["history_run_id"] is None
        assert bench["a_before"]["history_run_id"] is not None
        assert bench["c_after_it_is_back"]["history_run_id"] is not None
        meta = batch["metadata"]
        assert meta["history_unwritten"] == 1 and meta["history_problem"].startswith("postgresql://jaxrun:***@")
        (note,) = [line for line in first.stdout.splitlines() if "not written to it" in line]
        assert "1 benchmarked script not written to it; run the batch again with --resume" in note, note
        with HistoryStore(url) as store:
            assert sorted(r.script_name for r in store.runs()) == ["a_before", "c_after_it_is_back"]

        # --resume reuses every result and writes the missing run, under the key and at the time
        # it was measured; a second --resume writes nothing more.
        for _ in range(2):
            resumed = jaxrun(*args, "--resume", cwd=tmp_path, timeout=300)
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            assert "not written to it" not in resumed.stdout
        with HistoryStore(url) as store:
            runs = store.runs()
        assert sorted(r.script_name for r in runs) == ["a_before", "b_stops_the_server", "c_after_it_is_back"]
        assert {r.run_key for r in runs} == {b["run_key"] for b in bench.values()}
        (late,) = [r for r in runs if r.script_name == "b_stops_the_server"]
        (b_result,) = [r for r in batch["script_results"] if r["script_name"] == "b_stops_the_server"]
        assert late.recorded_at == b_result["finished_at"] and len(late.samples) == 2
        again = load(tmp_path / "r" / "jax_execution_results.json")
        assert all(r["benchmark"]["history_run_id"] in {run.id for run in runs} for r in again["script_results"])
        assert _held_password(tmp_path / "r") == []
        assert PASSWORD not in first.stdout + first.stderr + resumed.stdout + resumed.stderr


def test_two_batches_at_once_one_on_slurm_write_one_history_each_run_once(
        tmp_path: Path, postgres, slurm) -> None:  # type: ignore[no-untyped-def]
    url = postgres.database("two_at_once")
    repo = tmp_path / "repo"
    repo.mkdir()
    git_in(repo, "init", "-q")
    git_commit(repo, "scripts", {name: "if False:\n    import jax\nimport time\ntime.sleep(0.02)\n" for name in ("a.py", "b.py", "c.py")})
    started = []
    for backend in ("local", "slurm"):
        command = jaxrun_command("run", repo, "--backend", backend, "--benchmark-runs", "3", "--warmup-runs", "0",
                                 "--jobs", "1", "--history", url, "--results-dir", tmp_path / f"r-{backend}")
        started.append(subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=child_env({**slurm.env, "JAXRUN_HISTORY": None},
                                                                 without=("JAX_PLATFORMS",))))
    said = []
    for process in started:
        out, err = process.communicate(timeout=600)
        said.append(out + err)
        assert process.returncode == 0, out + err
    ids = {}
    for backend in ("local", "slurm"):
        batch = load(tmp_path / f"r-{backend}" / "jax_execution_results.json")
        ids[backend] = {r["script_name"]: r["benchmark"]["history_run_id"] for r in batch["script_results"]}
        assert sorted(ids[backend]) == ["a", "b", "c"] and None not in ids[backend].values()
    written = set(ids["local"].values()) | set(ids["slurm"].values())
    assert len(written) == 6

    # jaxrun history: six runs, each once, three samples each.
    shown = jaxrun("history", "--history", url, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    with HistoryStore(url) as store:
        runs = store.runs()
    assert sorted(r.id for r in runs) == sorted(written)
    assert all(len(r.samples) == 3 for r in runs) and len({r.run_key for r in runs}) == 6
    # --changes: each script's series holds its two runs, one of each batch.
    changes = jaxrun("history", "--history", url, "--changes", "--metric", "wall_time", "--json", cwd=tmp_path)
    assert changes.returncode == 0, changes.stderr
    series = json.loads(changes.stdout)["series"]
    assert sorted((s["script_name"], s["runs"]) for s in series) == [("a", 2), ("b", 2), ("c", 2)], series
    # The page over commits lists each run once, in its script's table.
    page = tmp_path / "page.html"
    drawn = jaxrun("report", "--history", url, "--metric", "wall_time", "-o", page, cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    listed, _ = read_page(page, "#runs-1", "return Array.from(document.querySelectorAll(\"table[id^='runs-'] tbody tr\"))"
                                          ".map(r => r.cells[1].innerText.trim());")
    assert sorted(int(run_id) for run_id in listed) == sorted(written)
    assert _held_password(tmp_path / "r-local", tmp_path / "r-slurm", page) == []
    assert all(PASSWORD not in text for text in [*said, shown.stdout, changes.stdout, drawn.stdout + drawn.stderr])
