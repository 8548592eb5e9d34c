"""Every code example of the seed documents (their README and AGENTS) that uses the
executor, run as written; only the import line says `jaxrun` instead of `src.execute.jax.jax_runner`
/ `execute.jax`. Each test holds one example (verbatim apart from that line) and asserts what the
documents say it returns or prints. This machine has no GPU: `device="gpu"` falls back to CPU, as
the documents promise ("Device fallbacks (GPU -> CPU) when hardware unavailable").

Examples that do not involve the executor (`jax.devices()`, `jax.config.update(...)`, a
`@partial(jit, ...)` method fragment, environment dicts) are plain JAX and are not repeated here.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from helpers import jaxrun, write

POMDP = """\
import jax
import jax.numpy as jnp

# A two-state belief update, jitted: what a rendered POMDP solver does at its core.
A = jnp.array([[0.85, 0.15], [0.15, 0.85]])
belief = jnp.array([0.5, 0.5])
update = jax.jit(lambda b, o: (A[o] * b) / jnp.sum(A[o] * b))
for o in [0, 0, 1, 0]:
    belief = update(belief, o)
assert abs(float(belief.sum()) - 1.0) < 1e-6
print("belief", belief)
"""
GENERAL = "import jax.numpy as jnp\nprint(float(jnp.arange(10.0).sum()))\n"
BROKEN = "import jax.numpy as jnp\nraise ValueError('the rendered model is inconsistent')\n"


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The documents' layout, in a fresh working folder (their paths are relative)."""
    for rel, text in (("output/11_render_output/jax/pomdp_solver.py", POMDP),
                      ("output/11_render_output/jax/general_model.py", GENERAL),
                      ("jax_simulation.py", POMDP)):
        write(tmp_path, rel, text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def broken(pipeline: Path) -> Path:
    return write(pipeline, "output/11_render_output/jax/pomdp_broken.py", BROKEN)


# --- 000 README -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_readme_command_line_interface(pipeline: Path) -> None:
    # python src/execute/jax/jax_runner.py --output-dir output/ --verbose   (and --device gpu, --recursive)
    for flags in (["--verbose"], ["--device", "gpu"], ["--recursive", "--verbose"]):
        proc = jaxrun("--output-dir", "output/", *flags, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "2/2 succeeded" in proc.stdout  # pomdp_solver and general_model (jax_simulation.py is outside)


@pytest.mark.slow
def test_readme_python_api(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import is_jax_available, run_jax_scripts

    # Check JAX availability
    if is_jax_available():
        # Run JAX scripts
        success = run_jax_scripts(
            pipeline_output_dir="output/",
            recursive_search=True,
            verbose=True,
            device="gpu"
        )
        print(f"Execution successful: {success}")
    else:
        print("JAX not available")
    assert capsys.readouterr().out.splitlines()[-1] == "Execution successful: True"


@pytest.mark.slow
def test_readme_individual_script_execution(pipeline: Path) -> None:
    from jaxrun import execute_jax_script

    # Execute single JAX script
    script_path = Path("output/11_render_output/jax/pomdp_solver.py")
    success = execute_jax_script(script_path, verbose=True, device="cpu")
    assert success and success.success is True


@pytest.mark.slow
def test_readme_performance_logging(pipeline: Path, caplog: pytest.LogCaptureFixture) -> None:
    from jaxrun import execute_jax_script

    logging.basicConfig(level=logging.INFO)
    # Performance metrics are automatically logged
    # Look for messages like:
    # "Script executed successfully: pomdp_solver.py (2.3s, 512MiB)"
    with caplog.at_level(logging.INFO, logger="jaxrun"):
        execute_jax_script(Path("output/11_render_output/jax/pomdp_solver.py"), verbose=True, device="cpu")
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Script executed successfully")]
    name, figures = line.removeprefix("Script executed successfully: ").split(" ", 1)
    seconds, memory = figures.strip("()").split(", ")
    assert name == "pomdp_solver.py" and seconds.endswith("s") and memory.endswith("MiB")
    assert float(seconds[:-1]) > 0 and int(memory[:-3]) > 10


@pytest.mark.slow
def test_readme_step_12_integration(pipeline: Path) -> None:
    from jaxrun import run_jax_scripts

    def execute_jax_step(pipeline_output_dir, verbose=False):
        """Execute JAX scripts as part of pipeline step 12."""
        return run_jax_scripts(
            pipeline_output_dir=pipeline_output_dir,
            recursive_search=True,
            verbose=verbose
        )

    assert execute_jax_step("output/") is True


@pytest.mark.slow
def test_readme_error_handling(pipeline: Path) -> None:
    from jaxrun import execute_jax_script, is_jax_available

    script_path = Path("output/11_render_output/jax/pomdp_solver.py")
    # Check installation
    assert is_jax_available() is True  # Returns False if JAX not installed
    # Use CPU fallback
    assert execute_jax_script(script_path, device="cpu")


@pytest.mark.slow
def test_readme_performance_metrics_file(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import run_jax_scripts

    run_jax_scripts("output/", results_dir="output/execution_results/jax")
    # Performance metrics are saved as JSON (jaxrun names the file jax_performance_metrics.json)
    with open("output/execution_results/jax/jax_performance_metrics.json") as f:
        metrics = json.load(f)
        print(f"Average execution time: {metrics['avg_execution_time']}s")
        print(f"Memory usage: {metrics['peak_memory_mb']}MB")
    average, memory = capsys.readouterr().out.splitlines()[-2:]
    assert float(average.split(": ")[1].rstrip("s")) == pytest.approx(metrics["aggregate"]["average_execution_time"])
    assert float(memory.split(": ")[1].rstrip("MB")) == max(m["memory_peak"] for m in metrics["scripts"].values())


@pytest.mark.slow
def test_readme_complete_pipeline_execution(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import run_jax_scripts

    # Execute all JAX scripts in pipeline
    success = run_jax_scripts(
        pipeline_output_dir="output/",
        recursive_search=True,
        verbose=True,
        device="gpu"  # Use GPU if available
    )

    if success:
        print("All JAX scripts executed successfully")
    else:
        print("Some JAX scripts failed - check logs")
    assert capsys.readouterr().out.splitlines()[-1] == "All JAX scripts executed successfully"


@pytest.mark.slow
def test_readme_custom_execution(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import execute_jax_script, find_jax_scripts

    # Find specific scripts
    scripts = find_jax_scripts("output/11_render_output/jax/", recursive=False)

    # Execute with custom options
    for script in scripts:
        if "pomdp" in script.name:
            success = execute_jax_script(script, verbose=True, device="gpu")
            print(f"{script.name}: {'Success' if success else 'Failed'}")
    lines = capsys.readouterr().out.splitlines()
    assert "pomdp_solver.py: Success" in lines and "pomdp_broken.py: Failed" in lines


# --- 001 AGENTS -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_agents_run_jax_scripts_reference(pipeline: Path) -> None:
    from jaxrun import run_jax_scripts

    success = run_jax_scripts(
        pipeline_output_dir=Path("output/11_render_output"),
        recursive_search=True,
        device="gpu",
        verbose=True,
        timeout=600
    )
    assert success is True


@pytest.mark.slow
def test_agents_basic_execution(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import run_jax_scripts

    # Execute all JAX scripts in pipeline output
    success = run_jax_scripts(
        pipeline_output_dir="output/11_render_output",
        recursive_search=True,
        device="auto",  # Auto-select best available device
        verbose=True
    )

    if success:
        print("All JAX scripts executed successfully")
    else:
        print("Some JAX scripts failed - check execution logs")
    assert capsys.readouterr().out.splitlines()[-1] == "Some JAX scripts failed - check execution logs"


def test_agents_execute_specific_script_with_monitoring(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import execute_jax_script

    # Execute specific JAX script with detailed monitoring
    script_path = "output/11_render_output/jax/pomdp_solver.py"
    results = execute_jax_script(
        script_path=script_path,
        device="gpu",
        enable_profiling=True,
        timeout_seconds=600
    )

    print(f"Execution time: {results['execution_time']:.2f}s")
    print(f"Peak memory: {results['peak_memory_mb']:.1f}MB")
    print(f"Success: {results['success']}")
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "Success: True" and out[-2] == f"Peak memory: {results.memory_peak:.1f}MB"
    assert results["device_used"] == "cpu" and results["fallback_reason"]  # no GPU here
    assert results["performance_metrics"]["execution_time"] == results["execution_time"]


def test_agents_device_detection_and_selection(capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import get_jax_device_info, is_jax_available

    # Get available device information
    device_info = get_jax_device_info()
    print("Available devices:")
    for device in device_info['available_devices']:
        print(f"  - {device['name']}: {device['memory_gb']:.1f}GB")

    # Check specific device availability
    gpu_available = is_jax_available("gpu")
    tpu_available = is_jax_available("tpu")

    print(f"GPU available: {gpu_available}")
    print(f"TPU available: {tpu_available}")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Available devices:" and out[1].startswith("  - ") and out[1].endswith("GB")
    assert out[-2:] == ["GPU available: False", "TPU available: False"]  # this machine: CPU only
    import psutil

    assert device_info["available_devices"][0]["memory_gb"] == pytest.approx(psutil.virtual_memory().total / 1024**3)


@pytest.mark.slow
def test_agents_performance_benchmarking(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import execute_jax_script

    # Execute with detailed performance benchmarking
    results = execute_jax_script(
        script_path="jax_simulation.py",
        device="gpu",
        enable_profiling=True,
        benchmark_runs=5
    )

    print("Performance Results:")
    print(f"Mean execution time: {results['benchmark']['mean_time']:.3f}s")
    print(f"Std deviation: {results['benchmark']['std_time']:.3f}s")
    print(f"Memory efficiency: {results['benchmark']['memory_efficiency']:.2f}")
    out = capsys.readouterr().out.splitlines()[-4:]
    bench = results.benchmark
    assert bench.runs_completed == 5
    assert out[1] == f"Mean execution time: {bench.mean_execution_time:.3f}s"
    assert out[2] == f"Std deviation: {bench.std_execution_time:.3f}s"
    assert 0 < bench.memory_efficiency < 1


@pytest.mark.slow
def test_agents_script_discovery_and_batch_execution(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from jaxrun import execute_jax_script, find_jax_scripts

    # Find all JAX scripts in directory
    scripts = find_jax_scripts("output/11_render_output/jax/", recursive=True)
    print(f"Found {len(scripts)} JAX scripts")

    # Execute scripts in parallel (if supported)
    for script_path in scripts:
        results = execute_jax_script(script_path, device="auto", verbose=False)
        status = "✓" if results['success'] else "✗"
        print(f"{status} {script_path}: {results['execution_time']:.2f}s")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Found 2 JAX scripts" and all(line.startswith("✓ ") for line in out[1:3])


def test_agents_error_examples(pipeline: Path) -> None:
    from jaxrun import JAXExecutionError, execute_jax_script

    logger = logging.getLogger("seed")
    script_path = "output/11_render_output/jax/pomdp_solver.py"
    try:
        results = execute_jax_script(script_path, device="gpu")
    except JAXExecutionError as e:
        logger.error(f"JAX execution failed: {e}")
        # Attempt recovery with CPU fallback
        results = execute_jax_script(script_path, device="cpu")
    assert results["success"] and results["device_used"] == "cpu"


def test_agents_debug_mode(pipeline: Path) -> None:
    from jaxrun import execute_jax_script

    script_path = "output/11_render_output/jax/pomdp_solver.py"
    # Enable debug output for JAX execution
    results = execute_jax_script(
        script_path,
        device="gpu",
        debug=True,
        verbose=True,
        enable_jax_debug=True
    )
    assert results["success"]
    # debug: JAX logs each compilation to the script's stderr; enable_jax_debug: NaN and Inf checks on.
    assert "Finished XLA compilation of jit(" in Path(results["stderr_log"]).read_text()


@pytest.mark.slow
def test_agents_mcp_tool_endpoint(pipeline: Path) -> None:
    from jaxrun import run_jax_scripts

    def run_jax_scripts_tool(pipeline_output_dir: str, device: str = "auto") -> dict:
        """Execute JAX simulation scripts with performance monitoring"""
        return run_jax_scripts(pipeline_output_dir, device=device, return_detailed_results=True)

    batch = run_jax_scripts_tool("output/")
    data = batch.to_dict()  # plain JSON-able data, as an MCP tool returns it
    assert json.loads(json.dumps(data)) == data
    assert data["metadata"]["framework"] == "jax" and data["metadata"]["scripts_successful"] == 2
    assert batch["performance_summary"]["peak_memory_usage"] == data["performance_summary"]["peak_memory_mb"]


@pytest.mark.slow
def test_agents_results_data_structure(pipeline: Path) -> None:
    """The seed's `execution_results` dict: every key it shows is in jax_execution_results.json."""
    from jaxrun import run_jax_scripts

    run_jax_scripts("output/", results_dir="results", benchmark_runs=2)
    doc = json.loads(Path("results/jax_execution_results.json").read_text())
    assert {"framework", "device_used", "jax_version", "execution_timestamp", "scripts_executed",
            "scripts_successful"} <= set(doc["metadata"])
    assert {"name", "memory_gb", "compute_capability", "driver_version"} <= set(doc["device_info"])
    assert doc["device_info"]["name"] and doc["device_info"]["memory_gb"] > 0
    assert doc["device_info"]["compute_capability"] is None and doc["device_info"]["driver_version"] is None  # CPU
    assert {"total_execution_time", "average_memory_usage", "peak_memory_usage",
            "device_utilization"} <= set(doc["performance_summary"])
    assert doc["performance_summary"]["device_utilization"] is None  # not measurable on CPU: null, not 0
    for result in doc["script_results"]:
        assert {"script_name", "success", "execution_time", "memory_peak", "jit_compile_time", "results"} <= set(result)
    assert {"runs_completed", "mean_execution_time", "std_execution_time",
            "performance_stability"} <= set(doc["benchmarking"])


@pytest.mark.slow
def test_seed_aliases_reach_the_script(tmp_path: Path) -> None:
    """enable_jax_debug turns on both of JAX's checks; debug turns on its compile log."""
    from jaxrun import execute_jax_script

    script = write(tmp_path, "flags.py", "import jax, jaxrun\n"
                   "jaxrun.record(nans=jax.config.jax_debug_nans, infs=jax.config.jax_debug_infs,\n"
                   "              log=jax.config.jax_log_compiles)\n")
    assert execute_jax_script(script, device="cpu", enable_jax_debug=True).results == {
        "nans": True, "infs": True, "log": False}
    assert execute_jax_script(script, device="cpu", debug=True).results == {"nans": False, "infs": False, "log": True}
    from jaxrun import UsageError

    with pytest.raises(UsageError, match="timeout_seconds=5 and timeout=10 disagree"):
        execute_jax_script(script, timeout_seconds=5, timeout=10)
