"""Tests for the `jaxrun` command: real subprocesses (`python -m jaxrun` and the console script).

Exit codes (README, "CLI"): 0 all succeeded · 1 a script failed · 2 bad usage or input · 130 interrupted.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import psutil
import pytest
from helpers import RunResult, jaxrun_command, load, write
from jsonschema import Draft202012Validator

import jaxrun
from jaxrun.__main__ import translate_output_dir_form
from jaxrun.results.models import DeviceInfo
from jaxrun.results.result_files import SCHEMAS

REPO_ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
import jax
import jax.numpy as jnp

add = jax.jit(lambda x, y: x + y)
print("sum", float(add(jnp.float32(1.0), jnp.float32(2.0))))
"""
FAIL = """\
import jax
raise RuntimeError("this script fails on purpose")
"""
FIXED_FIELDS = (
    "script_name script_path success error_class error_message hint exit_code signal "
    "device_requested device_used fallback_reason attempts execution_time body_time cpu_time "
    "memory_peak device_memory_peak device_utilization jit_compile_time compile_count compiles "
    "cache_hits output_files results stdout_log stderr_log started_at finished_at"
).split()


@pytest.fixture(scope="module")
def cli(jaxrun_cli, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    # A device-facts cache of this module's own: `devices --refresh` rewrites it.
    return jaxrun_cli.but(env={"JAXRUN_CACHE_DIR": str(tmp_path_factory.mktemp("device-cache"))})


@pytest.fixture(scope="module")
def schemas(cli) -> dict:
    proc = cli.run("schema")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_one_line_usage_error(proc: RunResult, *needles: str) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    # One line; click's own errors (a bad flag value) add where the help is: "try 'jaxrun run --help'".
    assert len(lines) == 1 or (len(lines) == 2 and re.fullmatch(r"try 'jaxrun [a-z ]+ --help'", lines[1])), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- bad usage: exit 2


def test_missing_path_is_one_line_and_exit_2(cli, tmp_path: Path) -> None:
    line = assert_one_line_usage_error(
        cli.run("run", tmp_path / "MISSING", "--results-dir", tmp_path / "r"), "MISSING"
    )
    assert line.startswith("jaxrun: error:")
    assert not (tmp_path / "r").exists()


def test_unknown_device_lists_the_valid_ones(cli, tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", GOOD)
    assert_one_line_usage_error(
        cli.run("run", tmp_path / "s", "--device", "xpu", "--results-dir", tmp_path / "r"),
        "'xpu'", "auto, cpu, gpu, tpu",
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["notes.txt", "README.md", "script"])
def test_a_file_that_is_not_a_python_script_is_refused_before_anything_is_written(
        cli, tmp_path: Path, name: str) -> None:
    # Run as Python it would fail as the script's NameError or syntax error, over the last results.
    (tmp_path / name).write_text("import jax\nSee the notes.\n")
    done = cli.run("run", tmp_path / name, cwd=tmp_path)
    assert_one_line_usage_error(done, "not a Python script", name, "a .py file")
    assert not (tmp_path / "jaxrun_results").exists()


def test_folder_without_jax_scripts_is_exit_2(cli, tmp_path: Path) -> None:
    write(tmp_path / "s", "plain.py", "print('hello')\n")
    assert_one_line_usage_error(
        cli.run("run", tmp_path / "s", "--results-dir", tmp_path / "r"), "no JAX scripts found"
    )


@pytest.mark.parametrize(
    "options, needle",
    [
        (["--timeout", "0"], "timeout must be a number of seconds > 0, or none for no limit"),
        (["--retries", "-1"], "retries must be a whole number"),
        (["--jobs", "0"], "jobs must be >= 1"),
        (["--backend", "kubernetes"], "choose one of local, ray, slurm"),
        (["--host-devices", "0"], "host_devices must be"),
        (["--warmup-runs", "1"], "--warmup-runs 1 needs --benchmark-runs > 0"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(cli, tmp_path: Path, options, needle) -> None:
    write(tmp_path / "s", "a.py", GOOD)
    assert_one_line_usage_error(
        cli.run("run", tmp_path / "s", "--results-dir", tmp_path / "r", *options), needle
    )
    assert not (tmp_path / "r").exists()


def test_results_dir_that_is_a_file_is_exit_2(cli, tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", GOOD)
    (tmp_path / "r").write_text("in the way")
    assert_one_line_usage_error(
        cli.run("run", tmp_path / "s", "--results-dir", tmp_path / "r"), "cannot write the results folder"
    )


# --------------------------------------------------------------------------- run


@pytest.mark.slow
def test_console_script_success_batch_prints_summary_and_exits_0(cli, tmp_path: Path) -> None:
    console = Path(sys.executable).parent / "jaxrun"
    if not console.exists():
        console = Path(shutil.which("jaxrun") or "jaxrun")
    write(tmp_path / "s", "first.py", GOOD)
    write(tmp_path / "s", "sub/second.py", GOOD)
    proc = subprocess.run(
        [str(console), "run", str(tmp_path / "s"), "--results-dir", str(tmp_path / "r"), "--device", "cpu"],
        capture_output=True, text=True, env=cli.environ(), timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "jaxrun results" in proc.stdout
    # Each script as the folder given holds it: its relative path, with "/".
    for name in ("first.py", "sub/second.py"):
        assert name in proc.stdout
    assert "2/2 succeeded" in proc.stdout
    assert str((tmp_path / "r").resolve()) in proc.stdout
    # Progress goes to stderr, the table to stdout.
    assert "[1/2] first.py" in proc.stderr and "[2/2] sub/second.py" in proc.stderr
    assert "jaxrun results" not in proc.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert doc["metadata"]["scripts_successful"] == 2


@pytest.mark.slow
def test_a_failing_script_makes_exit_1(cli, tmp_path: Path) -> None:
    write(tmp_path / "s", "a_good.py", GOOD)
    write(tmp_path / "s", "b_bad.py", FAIL)
    proc = cli.run("run", tmp_path / "s", "--results-dir", tmp_path / "r")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout
    assert "script_error" in proc.stdout
    assert "1/2 succeeded" in proc.stdout
    assert "this script fails on purpose" in proc.stderr  # the one-line reason in the progress
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert [r["success"] for r in doc["script_results"]] == [True, False]
    assert doc["metadata"]["complete"] is True


@pytest.mark.slow
def test_include_and_exclude_are_passed_through(cli, tmp_path: Path) -> None:
    for rel in ("alpha.py", "beta.py", "sub/gamma.py", "other.py"):
        write(tmp_path / "s", rel, GOOD)
    proc = cli.run(
        "run", tmp_path / "s", "--results-dir", tmp_path / "r",
        "--include", "*a.py", "--exclude", "beta.py",
    )
    assert proc.returncode == 0, proc.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert [r["script_name"] for r in doc["script_results"]] == ["alpha", "sub__gamma"]


@pytest.mark.slow
def test_no_recursive_only_runs_the_top_folder(cli, tmp_path: Path) -> None:
    write(tmp_path / "s", "top.py", GOOD)
    write(tmp_path / "s", "sub/deep.py", GOOD)
    proc = cli.run("run", tmp_path / "s", "--no-recursive", "--results-dir", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert [r["script_name"] for r in doc["script_results"]] == ["top"]


@pytest.mark.slow
def test_seed_form_runs_the_folder_with_gpu_falling_back_to_cpu(cli, tmp_path: Path) -> None:
    write(tmp_path / "pipeline", "a/model.py", GOOD)
    write(tmp_path / "pipeline", "b/model.py", GOOD)
    work = tmp_path / "work"
    work.mkdir()
    proc = cli.run(
        "--output-dir", tmp_path / "pipeline", "--device", "gpu", "--recursive", "--verbose", cwd=work
    )
    assert proc.returncode == 0, proc.stderr
    assert "[jaxrun]" in proc.stderr  # --verbose logs each step
    out = work / "jaxrun_results"  # the default results folder, relative to the working dir
    doc = load(out / "jax_execution_results.json")
    assert doc["metadata"]["device_requested"] == "gpu"
    assert [r["script_name"] for r in doc["script_results"]] == ["a__model", "b__model"]
    if jaxrun.get_jax_device_info().platforms["gpu"].available:
        # A GPU JAX can use is here: the scripts run on it, in one attempt, and nothing falls back.
        assert doc["metadata"]["device_used"] == "gpu"
        for result in doc["script_results"]:
            assert result["success"] is True
            assert result["device_requested"] == "gpu" and result["device_used"] == "gpu"
            assert result["fallback_reason"] is None
            assert [(a["device"], a["error_class"]) for a in result["attempts"]] == [("gpu", None)]
        assert "fallback from" not in proc.stdout
        return
    assert doc["metadata"]["device_used"] == "cpu"
    for result in doc["script_results"]:
        assert result["success"] is True
        assert result["device_requested"] == "gpu"
        assert result["device_used"] == "cpu"
        assert "gpu" in result["fallback_reason"]
        assert [a["device"] for a in result["attempts"]] == ["gpu", "cpu"]
        assert result["attempts"][0]["error_class"] == "device_unavailable"
    assert "fallback from gpu" in proc.stdout


def test_seed_form_translation() -> None:
    assert translate_output_dir_form(["--output-dir", "D", "--device", "gpu", "--recursive"]) == [
        "run", "D", "--device", "gpu", "--recursive",
    ]
    assert translate_output_dir_form(["--verbose", "--output-dir=D"]) == ["run", "D", "--verbose"]
    # Subcommands, and a dangling option (left for the CLI to report), are untouched.
    assert translate_output_dir_form(["run", "X", "--output-dir", "D"]) == ["run", "X", "--output-dir", "D"]
    assert translate_output_dir_form(["--output-dir"]) == ["--output-dir"]
    assert translate_output_dir_form([]) == []


BROKEN_PROBE = """\
import os, sys
if "jaxrun.probe.devices_child" in sys.orig_argv:
    os._exit(3)  # the device-facts child dies at once, as with a broken JAX install
"""


@pytest.mark.slow
def test_a_broken_device_probe_does_not_stop_the_batch(cli, tmp_path: Path) -> None:
    # A sitecustomize on PYTHONPATH kills only the device-facts child; the scripts still run.
    write(tmp_path / "site", "sitecustomize.py", BROKEN_PROBE)
    write(tmp_path / "s", "a.py", GOOD)
    out = tmp_path / "r"
    out.mkdir()
    (out / ".jaxrun.manifest").write_text("")  # a results folder of an earlier run (results/ownership.py)
    (out / "jax_device_info.json").write_text('{"from": "an earlier run"}')
    proc = cli.run(
        "run", tmp_path / "s", "--results-dir", out,
        env={"PYTHONPATH": str(tmp_path / "site"), "JAXRUN_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "device facts unavailable" in proc.stderr and "status 3" in proc.stderr
    doc = load(out / "jax_execution_results.json")
    assert doc["device_info"] is None
    assert doc["script_results"][0]["success"] is True
    assert doc["script_results"][0]["device_used"] == "cpu"
    # No device facts this run, and the earlier run's file must not pass for this one's.
    assert not (out / "jax_device_info.json").exists()

    devices = cli.run(
        "devices", env={"PYTHONPATH": str(tmp_path / "site"), "JAXRUN_CACHE_DIR": str(tmp_path / "cache")}
    )
    assert devices.returncode == 1
    assert devices.stderr.strip().splitlines() == ["jaxrun: the device probe exited with status 3: no output"]


# --------------------------------------------------------------------------- interrupt


SLEEPER = """\
import os, pathlib, time
import jax
pathlib.Path(os.environ["SLEEPER_PID_FILE"]).write_text(str(os.getpid()))
time.sleep(30)
"""


@pytest.mark.slow
def test_ctrl_c_stops_the_script_keeps_partial_results_and_exits_130(cli, tmp_path: Path) -> None:
    write(tmp_path / "s", "a_quick.py", GOOD)
    write(tmp_path / "s", "b_sleeper.py", SLEEPER)
    write(tmp_path / "s", "c_never.py", GOOD)
    pid_file, out = tmp_path / "sleeper.pid", tmp_path / "r"
    proc = subprocess.Popen(
        jaxrun_command("run", tmp_path / "s", "--results-dir", out, interruptible=True),
        env=cli.environ({"SLEEPER_PID_FILE": str(pid_file)}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sleeping script never started"
            time.sleep(0.05)
        sleeper = psutil.Process(int(pid_file.read_text()))
        assert sleeper.is_running()
        assert (out / "logs" / "b_sleeper.stdout.log").exists()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (stdout, stderr)
    assert "interrupted" in stderr and "Traceback" not in stderr
    # The script's process is gone, reaped too (is_running() is True for a zombie, and checks the
    # creation time, so a recycled pid does not count).
    assert not sleeper.is_running()
    doc = load(out / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is False
    assert doc["metadata"]["finished_timestamp"] is None
    # Every script of the batch is listed: the one that never ran is interrupted too (--resume runs it).
    assert [r["script_name"] for r in doc["script_results"]] == ["a_quick", "b_sleeper", "c_never"]
    assert doc["script_results"][0]["success"] is True
    assert doc["script_results"][1]["error_class"] == "interrupted"
    assert doc["script_results"][2]["error_class"] == "interrupted"
    assert doc["script_results"][2]["execution_time"] is None  # it never ran
    assert load(out / "script_results" / "b_sleeper_result.json")["error_class"] == "interrupted"
    assert load(out / "script_results" / "c_never_result.json")["error_message"] == "not run: the batch was interrupted first"
    assert "interrupted" in (out / "jax_execution_log.txt").read_text()


# --------------------------------------------------------------------------- schema / devices / check


@pytest.mark.slow
def test_schema_prints_every_schema_as_valid_json_schema(schemas) -> None:
    assert set(schemas) == set(SCHEMAS)
    for name, schema in schemas.items():
        Draft202012Validator.check_schema(schema)
        assert "schema_version" in schema["properties"], name
    # The field names fixed for tools and tests (docs/ARCHITECTURE.md, "Results folder").
    assert set(FIXED_FIELDS) <= set(schemas["script_result"]["properties"])


@pytest.mark.slow
def test_schema_of_one_model(cli, schemas) -> None:
    proc = cli.run("schema", "device_info")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == schemas["device_info"]


def test_unknown_schema_lists_the_valid_names(cli) -> None:
    assert_one_line_usage_error(cli.run("schema", "nope"), "'nope'", *SCHEMAS)


def test_devices_json_is_valid_device_info(cli, schemas) -> None:
    proc = cli.run("devices", "--json")
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    Draft202012Validator(schemas["device_info"]).validate(facts)
    info = DeviceInfo.model_validate(facts)
    assert info.jax_available is True
    assert info.jax_version == metadata.version("jax")
    cpu, gpu = info.platforms["cpu"], info.platforms["gpu"]
    assert cpu.available and cpu.backend == "cpu" and len(cpu.devices) >= 1
    assert all(d.platform == "cpu" for d in cpu.devices)
    # Whether a GPU is here comes from the facts the test session probed on its own (the API).
    if jaxrun.get_jax_device_info().platforms["gpu"].available:
        assert gpu.available is True and gpu.backend in ("cuda", "rocm") and len(gpu.devices) >= 1
        assert all(d.platform == "gpu" for d in gpu.devices)
        assert gpu.error is None
        assert info.default_backend == "gpu"  # JAX's own default prefers the accelerator
        return
    assert gpu.available is False and gpu.devices == []
    assert gpu.error  # unavailable, with the reason
    assert info.default_backend == "cpu"


def test_devices_table(cli) -> None:
    proc = cli.run("devices")
    assert proc.returncode == 0, proc.stderr
    assert f"jax {metadata.version('jax')}" in proc.stdout
    rows = {line.split()[1]: line for line in proc.stdout.splitlines() if line.split()[1:2] in (["cpu"], ["gpu"], ["tpu"])}
    assert set(rows) == {"cpu", "gpu", "tpu"}
    assert " yes " in rows["cpu"]
    if jaxrun.get_jax_device_info().platforms["gpu"].available:
        assert " yes " in rows["gpu"] and " yes " not in rows["tpu"]
    else:
        assert " yes " not in rows["gpu"] and " yes " not in rows["tpu"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("libtpu") is not None, reason="libtpu is installed here")
def test_a_missing_libtpu_is_not_installed_without_xla_internal_text(cli) -> None:
    """JAX tries tpu on every machine; without libtpu XLA says "INTERNAL: Failed to open
    libtpu.so: ...". jaxrun says the platform is not installed and why, in a few words."""
    check = cli.run("check")
    devices = cli.run("devices", "--refresh")
    as_json = cli.run("devices", "--json")
    for proc in (check, devices, as_json):
        assert proc.returncode == 0, proc.stderr
        assert "INTERNAL" not in proc.stdout and "libtpu.so" not in proc.stdout, proc.stdout
    reason = "libtpu is not installed (pip install 'jax[tpu]' on a TPU machine)"
    tpu_line = next(line for line in check.stdout.splitlines() if "platform tpu" in line)
    assert f"not installed: {reason}" in tpu_line, tpu_line
    tpu_row = next(line for line in devices.stdout.splitlines() if line.split()[1:2] == ["tpu"])
    assert "not installed" in tpu_row and reason in tpu_row, tpu_row
    tpu = json.loads(as_json.stdout)["platforms"]["tpu"]
    assert (tpu["available"], tpu["installed"], tpu["error"]) == (False, False, reason)


def test_check_reports_jax_libraries_and_nvml(cli) -> None:
    proc = cli.run("check")
    assert proc.returncode == 0, proc.stderr
    for item in ("jax", "jaxlib", "platform cpu", "optax", "flax", "equinox", "NVML"):
        assert item in proc.stdout, item
    assert metadata.version("optax") in proc.stdout
    nvml_line = next(line for line in proc.stdout.splitlines() if "NVML" in line)
    if not jaxrun.get_jax_device_info().platforms["gpu"].available:
        assert "not usable" in nvml_line  # no NVIDIA GPU on the test machine
    else:
        # With a GPU, NVML is usable only where the NVIDIA driver's library and nvidia-ml-py (the
        # optional `gpu` extra) are both installed: either way the line says which, and what.
        assert re.search(r"usable, driver \S+, [1-9]\d* GPU\(s\)|not usable: \S", nvml_line), nvml_line


# --------------------------------------------------------------------------- the bundled examples


@pytest.mark.slow
def test_bundled_examples_run_and_every_result_file_validates(cli, schemas, tmp_path: Path) -> None:
    out = tmp_path / "results"
    # Two at a time, each on its own core: the suite's longest test, halved.
    proc = cli.run("run", REPO_ROOT / "examples", "--results-dir", out, "--jobs", 2, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = {
        "jax_execution_results.json": "execution_results",
        "jax_performance_metrics.json": "performance_metrics",
        "jax_device_info.json": "device_info",
    }
    for file_name, schema_name in files.items():
        Draft202012Validator(schemas[schema_name]).validate(load(out / file_name))
    assert (out / "jax_execution_log.txt").read_text().strip()
    doc = load(out / "jax_execution_results.json")
    names = [r["script_name"] for r in doc["script_results"]]
    assert len(names) >= 3 and doc["metadata"]["complete"] is True
    for name in names:
        result_file = out / "script_results" / f"{name}_result.json"
        Draft202012Validator(schemas["script_result"]).validate(load(result_file))
        assert (out / "logs" / f"{name}.stdout.log").is_file()
        assert (out / "logs" / f"{name}.stderr.log").is_file()
    # No --device: auto, which takes a GPU when JAX can use one, else the CPU.
    auto = "gpu" if jaxrun.get_jax_device_info().platforms["gpu"].available else "cpu"
    for result in doc["script_results"]:
        assert result["success"] is True and result["device_used"] == auto
        assert result["compile_count"] >= 1  # real JAX scripts compile
        assert result["results"], f"{result['script_name']} recorded nothing with jaxrun.record"
