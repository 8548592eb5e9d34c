"""--profile: real runs, real jax.profiler traces read back with jax's own reader, profile files
checked against their JSON Schemas, and the host memory series against a known allocation."""

from __future__ import annotations

import glob
import gzip
import json
from pathlib import Path

import jax
import jsonschema
import pytest
from helpers import jaxrun as run_cli
from helpers import write

from jaxrun import execute_jax_script
from jaxrun.results import result_files

HOLDS_200MIB = """\
import time
import jax, jax.numpy as jnp
import numpy as np
import jaxrun

@jax.jit
def step(x):
    return jnp.tanh(x @ x.T).sum()

block = np.ones(200 * 1024 * 1024 // 8)  # 200 MiB held for half a second
time.sleep(0.5)
del block
value = float(step(jnp.arange(64.0).reshape(8, 8) / 64))
jaxrun.record(value=value)
"""
NO_JAX = "import time\ntime.sleep(0.2)\n\ndef _never():\n    import jax\n"


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("profiled")
    write(root / "s", "holds.py", HOLDS_200MIB)
    write(root / "s", "plain.py", NO_JAX)
    proc = run_cli("run", root / "s", "--device", "cpu", "--profile", "--no-history", "--no-compile-cache",
                  "--results-dir", root / "r", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (root / "stdout.txt").write_text(proc.stdout)
    return root / "r"


def _load(results: Path, name: str) -> dict:
    return json.loads((results / result_files.PROFILING_DIR / name).read_text())


def test_both_profile_files_match_their_schemas(profiled: Path) -> None:
    for name, key in ((result_files.MEMORY_PROFILE, "memory_profile"), (result_files.TIMING_PROFILE, "timing_profile")):
        document = _load(profiled, name)
        jsonschema.validate(document, result_files.schema_model(key).model_json_schema())
        assert set(document["scripts"]) == {"holds", "plain"}


def test_each_jax_script_has_a_trace_that_jax_can_read(profiled: Path) -> None:
    timing = _load(profiled, result_files.TIMING_PROFILE)["scripts"]
    trace_dir = Path(timing["holds"]["trace_dir"])
    assert trace_dir == profiled / result_files.PROFILING_DIR / result_files.TRACES_DIR / "holds"
    (xplane,) = glob.glob(str(trace_dir / "plugins" / "profile" / "*" / "*.xplane.pb"))
    data = jax.profiler.ProfileData.from_file(xplane)
    planes = [plane.name for plane in data.planes]
    assert "/host:CPU" in planes, planes
    (chrome_trace,) = glob.glob(str(trace_dir / "plugins" / "profile" / "*" / "*.trace.json.gz"))
    assert json.loads(gzip.decompress(Path(chrome_trace).read_bytes()))["traceEvents"]  # ui.perfetto.dev opens it
    memory = _load(profiled, result_files.MEMORY_PROFILE)["scripts"]["holds"]
    pprof = Path(memory["device_memory_profile"])
    assert pprof.parent == trace_dir and gzip.decompress(pprof.read_bytes())  # pprof: gzipped protobuf
    # A script that never imports jax has no trace, and says why.
    assert timing["plain"]["trace_dir"] is None and timing["plain"]["trace_reason"] == "the script never imported jax"
    assert not (profiled / result_files.PROFILING_DIR / result_files.TRACES_DIR / "plain").exists()


def test_the_run_says_where_the_trace_is_and_how_to_open_it(profiled: Path) -> None:
    stdout = (profiled.parent / "stdout.txt").read_text().splitlines()
    trace_dir = profiled / result_files.PROFILING_DIR / result_files.TRACES_DIR / "holds"
    (chrome_trace,) = glob.glob(str(trace_dir / "plugins" / "profile" / "*" / "*.trace.json.gz"))
    at = next(i for i, line in enumerate(stdout) if line.startswith("profile: "))
    where, how = stdout[at:at + 2]
    assert where == (f"profile: jax.profiler trace of holds in {trace_dir}, 1 without one (see trace_reason in "
                     f"timing_profile.json); memory and timing profiles in {profiled / result_files.PROFILING_DIR}")
    assert f"xprof --logdir {trace_dir} " in how and "tensorboard --logdir" in how, how
    assert how.endswith(f"or load {chrome_trace} in https://ui.perfetto.dev"), how


def test_the_host_memory_series_shows_the_known_allocation(profiled: Path) -> None:
    memory = _load(profiled, result_files.MEMORY_PROFILE)["scripts"]["holds"]
    result = json.loads(result_files.script_result_path(profiled, "holds").read_text())
    series = memory["host"]
    assert len(series) >= 5 and all(b[0] > a[0] for a, b in zip(series, series[1:]))  # time goes forward
    top = max(mb for _, mb in series)
    # 200 MiB held for 0.5 s at a 0.1 s sampling period is seen, and no sample exceeds the peak.
    assert 200 <= top <= result["memory_peak"] + 1e-3  # the series is rounded to 1 kB
    assert memory["host_peak_mb"] == result["memory_peak"]
    assert memory["device"] == {} and "cpu backend does not report memory statistics" in memory["device_reason"]


def test_the_timeline_holds_the_phases_and_every_compile(profiled: Path) -> None:
    timing = _load(profiled, result_files.TIMING_PROFILE)["scripts"]["holds"]
    result = json.loads(result_files.script_result_path(profiled, "holds").read_text())
    events = timing["events"]
    body = events[0]
    assert body["kind"] == "body" and body["start"] == 0 and body["end"] == pytest.approx(result["body_time"])
    assert all(0 <= e["start"] <= e["end"] <= body["end"] + 1e-6 for e in events)
    traces = [e for e in events if e["kind"] == "trace"]
    assert {e["program"] for e in traces} >= {"jit(step)"}
    # Every JIT phase of the result is on the timeline, with its duration.
    step = result["compiles"]["jit(step)"]
    seconds = sum(e["end"] - e["start"] for e in events if e["program"] == "jit(step)" and e["kind"] == "trace")
    assert seconds == pytest.approx(step["trace_time"], rel=1e-6)
    phases = sum(e["end"] - e["start"] for e in events if e["kind"] in ("trace", "lower", "compile", "cache_load"))
    assert phases == pytest.approx(result["jit_compile_time"], rel=1e-6)
    # A block of short statements (JAX's own imports inside its functions) holds its seconds.
    imports = sum(e["seconds"] if e["statements"] else e["end"] - e["start"] for e in events if e["kind"] == "import")
    assert imports == pytest.approx(result["import_time"], rel=1e-3)
    blocks = [e for e in events if e["kind"] == "import" and e["statements"]]
    assert all(e["statements"] > 1 and 0 < e["seconds"] <= e["end"] - e["start"] + 1e-9 for e in blocks)


def test_each_import_on_the_timeline_names_its_module(profiled: Path) -> None:
    events = _load(profiled, result_files.TIMING_PROFILE)["scripts"]["holds"]["events"]
    modules = [e["module"] for e in events if e["kind"] == "import"]
    assert modules and all(modules), [e for e in events if e["kind"] == "import" and not e["module"]][:5]
    # The script's own statements, in order (an interval in which other threads imported too, the
    # probe's device-memory sampler say, names them all: "jax, jax._src, jax.numpy").
    names = iter([name for m in modules for name in m.split(", ")])
    assert all(name in names for name in ("time", "jax", "jax.numpy", "numpy")), modules[:20]
    assert all(e["module"] is None for e in events if e["kind"] != "import")


def test_profiling_does_not_change_what_the_script_computes(tmp_path: Path, profiled: Path) -> None:
    script = write(tmp_path / "s", "holds.py", HOLDS_200MIB)
    plain = execute_jax_script(script, device="cpu", compile_cache=False)
    assert plain.success and plain.performance_metrics is None and plain.profile is None
    on_disk = json.loads(result_files.script_result_path(profiled, "holds").read_text())
    assert on_disk["results"]["value"] == plain.results["value"]
    assert "profile" not in on_disk  # the samples are in jax_profiling/, not in the result file


@pytest.mark.slow
def test_the_seed_api_returns_performance_metrics(tmp_path: Path) -> None:
    script = write(tmp_path / "s", "holds.py", HOLDS_200MIB)
    results = execute_jax_script(script_path=script, device="cpu", enable_profiling=True, timeout_seconds=600,
                                 results_dir=tmp_path / "r")
    metrics = results["performance_metrics"]
    assert results["success"] and metrics["memory_peak"] == results["peak_memory_mb"] > 200
    assert Path(metrics["memory_profile"]).is_file() and Path(metrics["timing_profile"]).is_file()
    assert Path(metrics["trace_dir"]).is_dir() and metrics["host_memory_samples"] >= 5
