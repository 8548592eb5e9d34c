"""Tests for jaxrun.batch (run_jax_scripts) and the results folder (docs/ARCHITECTURE.md).

The batch runs in this process (it never imports jax); every script runs for real in its own
probe process on the CPU. Scripts are tiny crafted JAX scripts written to tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from helpers import load, write
from jsonschema import Draft202012Validator

import jaxrun
from jaxrun.errors import InvalidDeviceError, JAXExecutionError, UsageError
from jaxrun.results import result_files
from jaxrun.results.batch_summary import performance_metrics, performance_summary
from jaxrun.results.models import SCHEMA_VERSION, BatchResult, ScriptResult

GOOD = """\
import os
import jax
import jax.numpy as jnp
import jaxrun

add = jax.jit(lambda x, y: x + y)
value = float(add(jnp.float32(1.5), jnp.float32(2.0)).block_until_ready())
print("sum", value)
with open(os.path.join(os.environ["JAXRUN_OUTPUT_DIR"], "sum.txt"), "w") as f:
    f.write(str(value))
jaxrun.record(sum=value)
"""

FAIL = """\
import jax
raise ValueError("deliberate failure in the middle of the batch")
"""

# (file name in the results folder, name of its schema in result_files.SCHEMAS)
TOP_LEVEL_FILES = {
    result_files.EXECUTION_RESULTS: "execution_results",
    result_files.PERFORMANCE_METRICS: "performance_metrics",
    result_files.DEVICE_INFO: "device_info",
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("device-cache")


@pytest.fixture
def isolated_cache(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JAXRUN_CACHE_DIR", str(cache_dir))
    return cache_dir


@pytest.fixture(scope="module")
def schemas(cache_dir: Path) -> dict:
    """The JSON Schemas exactly as `jaxrun schema` prints them."""
    env = dict(os.environ, JAXRUN_CACHE_DIR=str(cache_dir))
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "schema"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def mixed_batch(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path):
    """good a/model.py, failing b_fail.py, good c/model.py — run once for the tests below."""
    root = tmp_path_factory.mktemp("mixed")
    scripts = root / "scripts"
    write(scripts, "a/model.py", GOOD)
    write(scripts, "b_fail.py", FAIL)
    write(scripts, "c/model.py", GOOD)
    write(scripts, "notes.py", "print('not a JAX script')\n")
    out = root / "results"
    events: list[tuple] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAXRUN_CACHE_DIR", str(cache_dir))
        batch = jaxrun.run_jax_scripts(
            scripts,
            True,
            device="cpu",
            results_dir=out,
            return_detailed_results=True,
            on_start=lambda i, n, name: events.append(("start", i, n, name)),
            on_result=lambda i, n, r: events.append(("result", i, n, r.script_name, r.success)),
        )
    return batch, out, events


# --------------------------------------------------------------------------- one batch, many facts


def test_a_failure_never_stops_the_batch(mixed_batch) -> None:
    batch, _, events = mixed_batch
    assert isinstance(batch, BatchResult)
    assert batch.success is False
    names = [r.script_name for r in batch.script_results]
    assert names == ["a__model", "b_fail", "c__model"]
    assert [r.success for r in batch.script_results] == [True, False, True]
    failed = batch.script_results[1]
    assert failed.error_class == "script_error"
    assert "deliberate failure" in (failed.error_message or "")
    assert failed.exit_code == 1
    # The callbacks saw every script in order, the failure included.
    assert events == [
        ("start", 1, 3, "a__model"), ("result", 1, 3, "a__model", True),
        ("start", 2, 3, "b_fail"), ("result", 2, 3, "b_fail", False),
        ("start", 3, 3, "c__model"), ("result", 3, 3, "c__model", True),
    ]


def test_every_result_file_of_design_section_4_exists(mixed_batch) -> None:
    _, out, _ = mixed_batch
    for name in (*TOP_LEVEL_FILES, result_files.EXECUTION_LOG):
        assert (out / name).is_file(), name
    for name in ("a__model", "b_fail", "c__model"):
        assert (out / "script_results" / f"{name}_result.json").is_file()
        assert (out / "logs" / f"{name}.stdout.log").is_file()
        assert (out / "logs" / f"{name}.stderr.log").is_file()
    assert sorted(p.name for p in (out / "script_results").iterdir()) == [
        "a__model_result.json", "b_fail_result.json", "c__model_result.json",
    ]
    # Not benchmarking, so no benchmark file.
    assert not (out / result_files.BENCHMARK_RESULTS).exists()


def test_two_model_py_get_distinct_names_logs_and_outputs(mixed_batch) -> None:
    batch, out, _ = mixed_batch
    first, _, second = batch.script_results
    assert first.script_path.endswith(os.path.join("a", "model.py"))
    assert second.script_path.endswith(os.path.join("c", "model.py"))
    assert first.stdout_log != second.stdout_log
    assert Path(first.stdout_log).read_text().strip() == "sum 3.5"
    assert Path(second.stdout_log).read_text().strip() == "sum 3.5"
    # Each script wrote its own JAXRUN_OUTPUT_DIR, under outputs/<name>/.
    assert (out / "outputs" / "a__model" / "sum.txt").read_text() == "3.5"
    assert (out / "outputs" / "c__model" / "sum.txt").read_text() == "3.5"
    assert first.output_files == ["sum.txt"] and second.output_files == ["sum.txt"]
    assert first.results == {"sum": 3.5}
    # The failure's traceback went to its own stderr log.
    assert "deliberate failure" in (out / "logs" / "b_fail.stderr.log").read_text()


def test_execution_results_have_the_seed_shape(mixed_batch) -> None:
    _, out, _ = mixed_batch
    doc = load(out / result_files.EXECUTION_RESULTS)
    for section in ("metadata", "device_info", "performance_summary", "script_results", "benchmarking"):
        assert section in doc, section
    meta = doc["metadata"]
    assert meta["framework"] == "jax"
    assert meta["device_requested"] == "cpu"
    assert meta["device_used"] == "cpu"
    assert meta["jax_version"] == doc["device_info"]["jax_version"]
    assert meta["jax_version"] == load(out / result_files.DEVICE_INFO)["jax_version"]
    datetime.fromisoformat(meta["execution_timestamp"])
    assert datetime.fromisoformat(meta["finished_timestamp"]) >= datetime.fromisoformat(
        meta["execution_timestamp"]
    )
    assert (meta["scripts_found"], meta["scripts_executed"]) == (3, 3)
    assert (meta["scripts_successful"], meta["scripts_failed"]) == (2, 1)
    assert meta["complete"] is True
    assert meta["results_dir"] == str(out.resolve())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["benchmarking"]["enabled"] is False
    summary = doc["performance_summary"]
    assert summary["success_rate"] == pytest.approx(2 / 3)
    assert summary["error_classes"] == {"script_error": 1}
    assert summary["total_execution_time"] == pytest.approx(
        sum(r["execution_time"] for r in doc["script_results"])
    )
    for result in doc["script_results"]:
        # Unknown is null: no device memory or utilisation on CPU.
        assert result["device_memory_peak"] is None and result["device_memory_reason"]
        assert result["device_utilization"] is None and result["device_utilization_reason"]
    # The per-script file is the same record as the entry in the batch file.
    for result in doc["script_results"]:
        own = load(out / "script_results" / f"{result['script_name']}_result.json")
        assert own == result


def test_performance_metrics_cover_every_script(mixed_batch) -> None:
    _, out, _ = mixed_batch
    metrics = load(out / result_files.PERFORMANCE_METRICS)
    assert set(metrics["scripts"]) == {"a__model", "b_fail", "c__model"}
    assert metrics["scripts"]["b_fail"]["success"] is False
    assert metrics["scripts"]["a__model"]["compile_count"] >= 1
    assert metrics["aggregate"]["success_rate"] == pytest.approx(2 / 3)


def test_every_result_file_validates_against_its_printed_schema(mixed_batch, schemas) -> None:
    _, out, _ = mixed_batch
    assert set(schemas) == set(result_files.SCHEMAS)
    for file_name, schema_name in TOP_LEVEL_FILES.items():
        Draft202012Validator(schemas[schema_name]).validate(load(out / file_name))
    files = sorted((out / "script_results").glob("*_result.json"))
    assert len(files) == 3
    for path in files:
        Draft202012Validator(schemas["script_result"]).validate(load(path))
    # The schema is strict: a file with a misspelt field does not pass.
    bad = load(files[0])
    bad["sucess"] = bad.pop("success")
    assert list(Draft202012Validator(schemas["script_result"]).iter_errors(bad))


def test_execution_log_is_timestamped_and_names_every_script(mixed_batch) -> None:
    _, out, _ = mixed_batch
    lines = (out / result_files.EXECUTION_LOG).read_text().splitlines()
    assert lines, "empty log"
    for line in lines:
        datetime.fromisoformat(line.split(" ", 1)[0])
    text = "\n".join(lines)
    for label in ("a/model.py", "b_fail.py", "c/model.py"):  # the one label every surface gives a script
        assert f"] {label} on cpu: " in text, label
    assert "FAILED script_error" in text
    assert lines[-1].endswith("done: 2/3 succeeded")


def test_no_temporary_files_are_left_behind(mixed_batch) -> None:
    _, out, _ = mixed_batch
    leftovers = [p for p in out.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")]
    # The lock files stay (removing one could let two runs lock two files); they are no longer held:
    # the batch's, and its scripts' (a later run waits on it for a killed run's scripts); and the
    # manifest of what jaxrun wrote there (results/ownership.py).
    assert sorted(p.name for p in leftovers) == [".jaxrun.lock", ".jaxrun.manifest", ".jaxrun.scripts.lock"]


def test_results_support_mapping_access(mixed_batch) -> None:
    batch, _, _ = mixed_batch
    r = batch.script_results[0]
    assert r["success"] is True
    assert r["script_name"] == "a__model"
    assert r["device_used"] == "cpu"
    assert "success" in r and "nope" not in r
    assert r.get("nope", "default") == "default"
    with pytest.raises(KeyError):
        r["nope"]
    assert batch["metadata"]["scripts_executed"] == 3
    assert [s["success"] for s in batch["script_results"]] == [True, False, True]
    assert "script_name" in list(r.keys())


# --------------------------------------------------------------------------- behaviour of a run


@pytest.mark.slow
def test_bool_return_is_false_when_a_script_fails(tmp_path: Path, isolated_cache: Path) -> None:
    write(tmp_path / "s", "a_good.py", GOOD)
    write(tmp_path / "s", "b_fail.py", FAIL)
    out = tmp_path / "r"
    assert jaxrun.run_jax_scripts(tmp_path / "s", device="cpu", results_dir=out) is False
    doc = load(out / result_files.EXECUTION_RESULTS)
    assert [r["success"] for r in doc["script_results"]] == [True, False]
    assert doc["metadata"]["complete"] is True


@pytest.mark.slow
def test_bool_return_is_true_when_all_succeed(tmp_path: Path, isolated_cache: Path) -> None:
    script = write(tmp_path, "only.py", GOOD)
    out = tmp_path / "r"
    # A single .py file is a valid path too; its name is its stem.
    assert jaxrun.run_jax_scripts(script, device="auto", results_dir=out) is True
    assert (out / "script_results" / "only_result.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("fsync_seconds", [0.0, 0.5], ids=["disk", "busy_disk"])
def test_results_are_written_after_each_script(tmp_path: Path, isolated_cache: Path, monkeypatch,
                                               fsync_seconds: float) -> None:
    # A busy disk: every fsync waits while the journal writes out other processes' data (45 ms on
    # an idle test machine, more under load), an os.fsync that sleeps first standing in for it, as
    # no disk here can be made reliably slow. The batch files' first version is then written late,
    # just before the first result: that result must still be in them before the next script reads
    # them (outputs/batch_files.py), and no rewrite but the last may wait for the disk.
    synced: list[str] = []
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        synced.append(result_files.temporary_of(name) or name)
        time.sleep(fsync_seconds)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    out = (tmp_path / "results").resolve()
    write(tmp_path / "s", "a_first.py", """\
        import jax
        print("first says hi")
    """)
    # The second script checks, from inside the batch, what the first one left on disk.
    write(tmp_path / "s", "b_check.py", """\
        import json, os, pathlib
        import jax
        out = pathlib.Path(os.environ["CHECK_RESULTS_DIR"])
        first = out / "script_results" / "a_first_result.json"
        assert first.is_file(), "the first script's result file is missing"
        assert json.loads(first.read_text())["success"] is True
        batch = json.loads((out / "jax_execution_results.json").read_text())
        assert batch["metadata"]["scripts_executed"] == 1, batch["metadata"]
        assert batch["metadata"]["complete"] is False, batch["metadata"]
        assert [r["script_name"] for r in batch["script_results"]] == ["a_first"]
        metrics = json.loads((out / "jax_performance_metrics.json").read_text())
        assert list(metrics["scripts"]) == ["a_first"]
        assert (out / "logs" / "a_first.stdout.log").read_text().strip() == "first says hi"
    """)
    batch = jaxrun.run_jax_scripts(
        tmp_path / "s", device="cpu", results_dir=out, return_detailed_results=True,
        env={"CHECK_RESULTS_DIR": str(out)},
    )
    check = batch["script_results"][1]
    assert check["script_name"] == "b_check"
    assert check["success"], f"{check['error_class']}: {check['error_message']}\n{check['traceback']}"
    final = load(out / result_files.EXECUTION_RESULTS)
    assert final["metadata"]["scripts_executed"] == 2
    assert final["metadata"]["complete"] is True
    # The last version of each batch file is made durable, and only it.
    assert synced.count(result_files.EXECUTION_RESULTS) == 1 and synced.count(result_files.PERFORMANCE_METRICS) == 1


@pytest.mark.slow
def test_a_result_that_came_too_soon_for_a_rewrite_is_written_without_waiting_for_the_next(
        tmp_path: Path, isolated_cache: Path, monkeypatch) -> None:
    # Two scripts end together (--jobs 2, a shared deadline): the second result comes within the
    # spacing of the rewrites (made 200 times a rewrite's cost here, as a large batch's are), and
    # the third script, which runs on, must not keep it out of the batch files until it ends.
    from jaxrun.outputs import batch_files

    monkeypatch.setattr(batch_files, "MAX_WRITE_SHARE", 0.005)
    deadline = time.time() + 4
    for name in ("a", "b"):
        write(tmp_path / "s", f"{name}.py", f"import time\nif False:\n    import jax\ntime.sleep(max(0, {deadline} - time.time()))\n")
    write(tmp_path / "s", "c.py", """\
        import json, os, pathlib, time
        import jaxrun
        if False:
            import jax
        batch = pathlib.Path(os.environ["CHECK_RESULTS_DIR"]) / "jax_execution_results.json"
        started = time.monotonic()
        while time.monotonic() - started < 30:
            listed = sorted(r["script_name"] for r in json.loads(batch.read_text())["script_results"])
            if len(listed) == 2:
                break
            time.sleep(0.05)
        jaxrun.record(listed=listed, waited=time.monotonic() - started)
    """)
    batch = jaxrun.run_jax_scripts(tmp_path / "s", device="cpu", jobs=2, results_dir=tmp_path / "r", history=False,
                                   env={"CHECK_RESULTS_DIR": str(tmp_path / "r")}, return_detailed_results=True)
    (check,) = [r for r in batch["script_results"] if r["script_name"] == "c"]
    assert check["success"], check["traceback"]
    assert check["results"]["listed"] == ["a", "b"], check["results"]


@pytest.mark.slow
def test_rerun_replaces_the_previous_runs_files(tmp_path: Path, isolated_cache: Path) -> None:
    scripts, out = tmp_path / "s", tmp_path / "r"
    write(scripts, "keep.py", GOOD)
    gone = write(scripts, "gone.py", GOOD)
    assert jaxrun.run_jax_scripts(scripts, device="cpu", results_dir=out) is True
    assert (out / "script_results" / "gone_result.json").is_file()
    assert (out / "outputs" / "gone" / "sum.txt").is_file()

    gone.unlink()
    assert jaxrun.run_jax_scripts(scripts, device="cpu", results_dir=out) is True
    assert sorted(p.name for p in (out / "script_results").iterdir()) == ["keep_result.json"]
    assert sorted(p.name for p in (out / "logs").iterdir()) == ["keep.stderr.log", "keep.stdout.log"]
    assert sorted(p.name for p in (out / "outputs").iterdir()) == ["keep"]
    doc = load(out / result_files.EXECUTION_RESULTS)
    assert [r["script_name"] for r in doc["script_results"]] == ["keep"]
    assert list(load(out / result_files.PERFORMANCE_METRICS)["scripts"]) == ["keep"]
    # The run log describes this run only.
    log = (out / result_files.EXECUTION_LOG).read_text()
    assert "gone" not in log and log.count("jaxrun 0.") == 1


def test_no_jax_scripts_is_a_usage_error(tmp_path: Path, isolated_cache: Path) -> None:
    write(tmp_path / "s", "plain.py", "print('no jax here')\n")
    out = tmp_path / "r"
    with pytest.raises(UsageError, match="no JAX scripts found") as caught:
        jaxrun.run_jax_scripts(tmp_path / "s", results_dir=out)
    assert isinstance(caught.value, JAXExecutionError)
    assert str(tmp_path / "s") in str(caught.value)
    assert not out.exists()  # nothing was written for a batch that never started


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"device": "xpu"}, InvalidDeviceError, "auto, cpu, gpu, tpu"),
        ({"timeout": 0}, UsageError, "timeout must be a number of seconds > 0, or none for no limit"),
        ({"jobs": 0}, UsageError, "jobs must be >= 1"),
        ({"backend": "kubernetes"}, UsageError, "unknown backend 'kubernetes': choose one of local, ray, slurm"),
        ({"ray_address": "127.0.0.1:6379"}, UsageError, "ray_address needs the ray backend \\(backend='ray'\\)"),
        ({"host_devices": 0}, UsageError, "host_devices must be"),
        ({"gpus_per_job": 0}, UsageError, "gpus_per_job must be >= 1"),
        ({"retries": -1}, UsageError, "retries must be a whole number"),
        ({"benchmark_runs": -1}, UsageError, "benchmark_runs must be a whole number"),
        ({"warmup_runs": 2}, UsageError, "warmup_runs=2 needs benchmark_runs > 0"),
        ({"device": "cpu,xpu"}, InvalidDeviceError, "unknown device 'xpu'"),
        ({"benchmark_runs": 2, "history": "/dev/null/h.sqlite"}, UsageError, "history"),
    ],
)
def test_bad_options_raise_before_anything_runs(tmp_path: Path, options, error, message) -> None:
    write(tmp_path / "s", "a.py", GOOD)
    out = tmp_path / "r"
    with pytest.raises(error, match=message):
        jaxrun.run_jax_scripts(tmp_path / "s", results_dir=out, **options)
    assert not out.exists()


def test_results_dir_that_is_a_file_is_a_usage_error(tmp_path: Path, isolated_cache: Path) -> None:
    write(tmp_path / "s", "a.py", GOOD)
    blocker = tmp_path / "r"
    blocker.write_text("not a folder")
    with pytest.raises(UsageError, match="cannot write the results folder"):
        jaxrun.run_jax_scripts(tmp_path / "s", results_dir=blocker)
    assert blocker.read_text() == "not a folder"


# --------------------------------------------------------------------------- batch figures


def _result(name: str, success: bool, **fields) -> ScriptResult:
    return ScriptResult(
        script_name=name, script_path=f"/x/{name}.py", success=success, device_requested="cpu",
        started_at="2024-01-01T00:00:00+00:00", finished_at="2024-01-01T00:00:01+00:00",
        error_class=None if success else "script_error", **fields,
    )


def test_summary_of_no_results_is_all_unknown() -> None:
    summary = performance_summary([])
    assert summary.total_execution_time is None and summary.success_rate is None
    assert summary.peak_device_memory_mb is None


def test_summary_keeps_unknown_as_null_never_zero() -> None:
    results = [
        _result("fast", True, execution_time=1.0, memory_peak=100.0, compile_count=2, jit_compile_time=0.5),
        _result("slow", True, execution_time=3.0, memory_peak=300.0, compile_count=1, jit_compile_time=0.25),
        _result("never_ran", False),  # device_unavailable-like: nothing was measured
    ]
    summary = performance_summary(results)
    assert summary.total_execution_time == 4.0
    assert summary.median_execution_time == 2.0
    assert summary.fastest_script == "fast" and summary.slowest_script == "slow"
    assert summary.peak_memory_mb == 300.0
    assert summary.total_compile_count == 3
    assert summary.total_jit_compile_time == 0.75
    assert summary.peak_device_memory_mb is None  # nothing measured it: null, not 0
    assert summary.success_rate == pytest.approx(2 / 3)
    assert summary.error_classes == {"script_error": 1}
    metrics = performance_metrics(results)
    assert metrics.scripts["never_ran"].execution_time is None
    assert metrics.aggregate == summary


@pytest.mark.slow
def test_a_script_deleted_during_the_batch_is_a_result(tmp_path: Path, isolated_cache: Path) -> None:
    src = tmp_path / "s"
    write(src, "a_deleter.py", """
        import os
        import jax
        os.remove(os.path.join(os.path.dirname(os.path.abspath(__file__)), "b_victim.py"))
    """)
    write(src, "b_victim.py", GOOD)
    batch = jaxrun.run_jax_scripts(src, results_dir=tmp_path / "r", return_detailed_results=True, compile_cache=False)
    by_name = {r.script_name: r for r in batch.script_results}
    assert by_name["a_deleter"].success
    victim = by_name["b_victim"]
    assert not victim.success and victim.error_class == "script_error"
    assert "no longer exists" in victim.error_message
    assert (tmp_path / "r" / "script_results" / "b_victim_result.json").is_file()
    assert batch.metadata.complete
