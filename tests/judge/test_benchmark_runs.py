"""Process benchmarking, warm mode and cross-device runs through the Python API.

Real processes and real JAX on CPU: tiny crafted scripts in tmp_path, each a few hundred ms.
Nothing is written to the repository: results go to tmp_path and the batch API runs with
``history=False`` (``execute_jax_script`` never touches the history).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from helpers import jaxrun as run_cli
from helpers import load, write
from jsonschema import Draft202012Validator

import jaxrun
from jaxrun import execute_jax_script, run_jax_scripts
from jaxrun.errors import UsageError
from jaxrun.results.models import SAMPLE_METRICS

SLEEPER = """\
import time

import jax.numpy as jnp

jnp.ones(2).block_until_ready()
time.sleep(0.2)
"""

# Succeeds the first time, fails every later time: a marker next to the script remembers.
FAILS_ON_SECOND_RUN = """\
from pathlib import Path

import jax.numpy as jnp

jnp.ones(2).block_until_ready()
marker = Path(__file__).with_name("ran_once.marker")
if marker.exists():
    raise RuntimeError("second run fails on purpose")
marker.write_text("ran")
"""

# main() calls a jitted function: the first call compiles it, later calls only run it. The
# __main__ block would leave a marker and fail, so any sign of it means warm mode ran it.
WARM = """\
from pathlib import Path

import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.tanh(x @ x.T).sum(axis=0)


X = jnp.linspace(0.0, 1.0, 128 * 128).reshape(128, 128)


def main():
    return step(X)


if __name__ == "__main__":
    Path(__file__).with_name("main_block_ran.marker").write_text("the __main__ block ran")
    raise SystemExit("the __main__ block must not run in warm mode")
"""

NO_MAIN = """\
import jax.numpy as jnp

total = float(jnp.ones(2).sum())
"""


@pytest.fixture(autouse=True)
def _no_platform_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)


# --- process benchmark ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sleeper_benchmark(tmp_path_factory: pytest.TempPathFactory, jaxrun_cache_dir: Path):
    # Module-scoped fixtures run outside the autouse monkeypatch: set the environment here too.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAXRUN_CACHE_DIR", str(jaxrun_cache_dir))
        mp.delenv("JAX_PLATFORMS", raising=False)
        root = tmp_path_factory.mktemp("sleeper")
        script = write(root / "scripts", "sleeper.py", SLEEPER)
        result = execute_jax_script(
            script, "cpu", benchmark_runs=3, warmup_runs=1, results_dir=root / "results", timeout=120
        )
    return result, root / "results"


@pytest.mark.slow
def test_counted_runs_keep_all_five_raw_metrics(sleeper_benchmark) -> None:
    result, _ = sleeper_benchmark
    assert result.success, result.error_message
    bench = result.benchmark
    assert bench is not None
    assert (bench.benchmark_runs, bench.warmup_runs, bench.runs_completed) == (3, 1, 3)
    assert [s.index for s in bench.samples] == [1, 2, 3]
    for sample in bench.samples:
        assert sample.success and not sample.warmup
        for metric in SAMPLE_METRICS:
            # A figure this machine cannot measure (energy: no GPU, no RAPL here) is null, and the
            # result says why; every other one is measured.
            unmeasured = getattr(result, f"{metric}_reason", None)
            assert (getattr(sample, metric) is None) == (unmeasured is not None), (metric, sample, unmeasured)
        assert sample.memory_peak > 0
        assert sample.wall_time >= sample.body_time > 0.2  # the body sleeps 0.2 s; the process is more
        assert sample.compile_time > 0  # jnp.ones compiles
        assert sample.import_time > 0  # the script imports jax
        # The script's own work: body minus imports minus the wall time of compilation, which holds
        # JAX's phases and jaxrun's reading of XLA's analyses (a run's compiles[].analysis_time,
        # which a sample does not keep: tests/probe/test_phases.py bounds it on a run's result);
        # the body sleeps 0.2 s.
        compile_wall = sample.body_time - sample.import_time - sample.run_time
        assert compile_wall >= -1e-6 and sample.run_time >= 0.2
    # Each run is its own process: the samples differ (a copied sample would be identical).
    assert len({s.wall_time for s in bench.samples}) == 3


@pytest.mark.slow
def test_warmup_runs_are_recorded_but_not_counted(sleeper_benchmark) -> None:
    result, _ = sleeper_benchmark
    bench = result.benchmark
    assert len(bench.warmups) == 1
    (warmup,) = bench.warmups
    assert warmup.warmup is True and warmup.success and warmup.wall_time is not None
    assert all(not s.warmup for s in bench.samples)
    assert bench.statistics["wall_time"].n == 3  # the warm-up is not among them


@pytest.mark.slow
def test_statistics_per_metric_have_median_and_ci(sleeper_benchmark) -> None:
    result, _ = sleeper_benchmark
    bench = result.benchmark
    assert set(bench.statistics) == set(SAMPLE_METRICS)
    for metric, stats in bench.statistics.items():
        if getattr(result, f"{metric}_reason", None) is not None:  # not measurable here: no statistics of nothing
            assert (stats.n, stats.median, stats.ci_low) == (0, None, None), metric
            continue
        values = sorted(getattr(s, metric) for s in bench.samples)
        assert stats.n == 3, metric
        assert stats.median == pytest.approx(values[1]), metric
        assert stats.ci_low is not None and stats.ci_high is not None, metric
        assert stats.ci_low <= stats.median <= stats.ci_high, metric
    wall = [s.wall_time for s in bench.samples]
    assert bench.mean_execution_time == pytest.approx(sum(wall) / 3)
    assert bench.std_execution_time == pytest.approx(bench.statistics["wall_time"].std)
    assert bench.performance_stability in ("stable", "noisy")
    assert any("too few" in w for w in bench.statistics["wall_time"].warnings)  # 3 samples: honest CI


@pytest.mark.slow
def test_the_headline_figures_of_a_benchmarked_script_are_the_medians(sleeper_benchmark) -> None:
    """Issue 23: execution_time (the summary table's time, the report's wall) was the last run's
    where the benchmark table printed the median; every surface reads these fields."""
    result, results_dir = sleeper_benchmark
    samples = result.benchmark.samples
    assert result.timing == "median of 3 counted runs"
    pairs = {"execution_time": "wall_time", "body_time": "body_time", "import_time": "import_time",
             "jit_compile_time": "compile_time", "run_time": "run_time", "memory_peak": "memory_peak",
             "cpu_time": "cpu_time"}
    for field, metric in pairs.items():
        values = sorted(getattr(s, metric) for s in samples)
        assert getattr(result, field) == pytest.approx(values[1]), field
    assert result.execution_time == pytest.approx(result.benchmark.statistics["wall_time"].median)
    saved = load(results_dir / "script_results" / "sleeper_result.json")
    assert saved["execution_time"] == pytest.approx(result.execution_time) and saved["timing"] == result.timing


@pytest.mark.slow
def test_benchmark_is_persisted_in_the_script_result_file(sleeper_benchmark) -> None:
    result, results_dir = sleeper_benchmark
    saved = load(results_dir / "script_results" / "sleeper_result.json")
    assert saved["benchmark"]["runs_completed"] == 3
    assert [s["wall_time"] for s in saved["benchmark"]["samples"]] == [s.wall_time for s in result.benchmark.samples]
    assert len(saved["benchmark"]["warmups"]) == 1


@pytest.mark.slow
def test_a_run_that_fails_stops_the_benchmark(tmp_path: Path) -> None:
    script = write(tmp_path / "scripts", "flaky.py", FAILS_ON_SECOND_RUN)
    result = execute_jax_script(script, "cpu", benchmark_runs=3, results_dir=tmp_path / "results", timeout=120)
    assert result.success is False
    assert result.error_class == "script_error"
    assert "second run fails on purpose" in result.error_message
    bench = result.benchmark
    # Run 1 succeeded, run 2 failed, run 3 was never started (it would fail the same way).
    assert [(s.index, s.success) for s in bench.samples] == [(1, True), (2, False)]
    assert bench.samples[1].error_class == "script_error"
    assert bench.runs_completed == 1
    assert bench.statistics["wall_time"].n == 1
    assert any("only 1 of 3 runs succeeded" in w and "script_error" in w for w in bench.warnings), bench.warnings


# --- warm mode -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_warm_mode_reports_first_call_and_steady_state_apart(tmp_path: Path) -> None:
    script = write(tmp_path / "scripts", "warm.py", WARM)
    result = execute_jax_script(script, "cpu", entry="main", warm_calls=6, results_dir=tmp_path / "results")
    assert result.success, result.error_message
    warm = result.warm
    assert warm is not None and warm.entry == "main"
    assert [c.index for c in warm.calls] == [1, 2, 3, 4, 5, 6]
    first, *rest = warm.calls
    assert first.compile_time > 0  # step() is traced, lowered and compiled by the first call
    assert [c.compile_time for c in rest] == [0.0] * 5  # later calls hit the jit cache
    assert warm.first_call == first.seconds
    assert warm.steady is not None and warm.steady.n == 5
    assert warm.steady.median == pytest.approx(sorted(c.seconds for c in rest)[2])
    assert warm.first_call > warm.steady.median
    assert warm.compile_first_call_overhead_ratio == pytest.approx(warm.first_call / warm.steady.median)
    assert warm.compile_first_call_overhead_ratio > 1
    # The name says what the ratio is; nothing calls it a speed-up.
    assert not any("speedup" in field for field in type(warm).model_fields)


@pytest.mark.slow
def test_warm_mode_never_runs_the_main_block(tmp_path: Path) -> None:
    script = write(tmp_path / "scripts", "warm.py", WARM)
    result = execute_jax_script(script, "cpu", entry="main", warm_calls=2, results_dir=tmp_path / "results")
    assert result.success, result.error_message
    assert result.exit_code == 0
    assert not (script.parent / "main_block_ran.marker").exists()
    # Without warm mode the same script does run it: the marker test above can fail.
    plain = execute_jax_script(script, "cpu", results_dir=tmp_path / "plain")
    assert plain.success is False and (script.parent / "main_block_ran.marker").exists()


@pytest.mark.slow
def test_warm_mode_without_main_is_a_usage_error_naming_the_script_and_main(tmp_path: Path) -> None:
    """Read from the script's syntax before it runs: one line, no result written."""
    script = write(tmp_path / "scripts", "nomain.py", NO_MAIN)
    with pytest.raises(UsageError, match=r"nomain\.py: entry calls the script's main\(\) repeatedly.*defines no main\(\)"):
        execute_jax_script(script, "cpu", entry="main", warm_calls=3, results_dir=tmp_path / "results")
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_warm_mode_with_benchmark_runs_pools_the_calls_of_every_run(tmp_path: Path) -> None:
    script = write(tmp_path / "scripts", "warm.py", WARM)
    result = execute_jax_script(
        script, "cpu", entry="main", warm_calls=3, benchmark_runs=2, results_dir=tmp_path / "results"
    )
    assert result.success, result.error_message
    warm = result.benchmark.warm
    assert warm is not None
    assert [(c.run, c.index) for c in warm.calls] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    firsts = [c for c in warm.calls if c.index == 1]
    assert all(c.compile_time > 0 for c in firsts)  # every process compiles again
    assert warm.first_call == pytest.approx(statistics.median(c.seconds for c in firsts))
    assert warm.steady.n == 4
    # The result's own .warm tells the same story as the benchmark's.
    assert result.warm == warm
    assert result.benchmark.mode == "warm:mainx3"  # kept apart from ordinary runs in the history


@pytest.mark.parametrize("calls", [0, 1, True])
def test_warm_calls_below_two_are_refused_before_running(tmp_path: Path, calls) -> None:
    from jaxrun.errors import UsageError

    script = write(tmp_path / "scripts", "warm.py", WARM)
    with pytest.raises(UsageError, match="warm_calls"):
        execute_jax_script(script, "cpu", entry="main", warm_calls=calls, results_dir=tmp_path / "results")
    assert not (tmp_path / "results").exists()


# --- cross-device ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_device_batch(tmp_path_factory: pytest.TempPathFactory, jaxrun_cache_dir: Path):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAXRUN_CACHE_DIR", str(jaxrun_cache_dir))
        mp.delenv("JAX_PLATFORMS", raising=False)
        root = tmp_path_factory.mktemp("devices")
        write(root / "scripts", "tiny.py", NO_MAIN)
        out = root / "results"
        batch = run_jax_scripts(
            root / "scripts", device="cpu,gpu", benchmark_runs=2, results_dir=out, history=False,
            return_detailed_results=True, timeout=120,
        )
    return batch, out


@pytest.mark.slow
def test_each_script_runs_on_each_device_with_its_own_files(two_device_batch) -> None:
    batch, out = two_device_batch
    assert batch.success
    legs = {r.device_requested: r for r in batch.script_results}
    assert set(legs) == {"cpu", "gpu"}
    assert legs["cpu"].device_used == "cpu" and legs["cpu"].fallback_reason is None
    if jaxrun.get_jax_device_info().platforms["gpu"].available:
        # A GPU JAX can use is here: the gpu leg runs on it.
        assert legs["gpu"].device_used == "gpu" and legs["gpu"].fallback_reason is None
    else:
        # No GPU here: the gpu leg falls back to CPU and says so.
        assert legs["gpu"].device_used == "cpu"
        assert legs["gpu"].fallback_reason and "gpu" in legs["gpu"].fallback_reason
    for device in ("cpu", "gpu"):
        saved = load(out / "script_results" / f"tiny@{device}_result.json")
        assert saved["device_requested"] == device
        assert saved["benchmark"]["runs_completed"] == 2
    assert not (out / "script_results" / "tiny_result.json").exists()


@pytest.mark.slow
def test_device_comparison_says_a_fallback_is_not_a_real_comparison(two_device_batch) -> None:
    batch, out = two_device_batch
    (row,) = batch.benchmarking.device_comparison
    platforms = jaxrun.get_jax_device_info().platforms
    if platforms["gpu"].available:
        # A GPU JAX can use is here: cpu against a gpu that ran is a real comparison...
        assert (row.script_name, row.baseline_device, row.device, row.device_used) == ("tiny", "cpu", "gpu", "gpu")
        assert row.real_comparison is True and row.note is None
        assert row.speedup is not None and row.speedup > 0
        assert row.ci_low is not None and row.ci_low <= row.ci_high
        assert load(out / "jax_benchmark_results.json")["device_comparison"] == [row.model_dump(mode="json")]
        # ...and the fallback this test is about comes from a device that is absent: the TPU.
        if platforms["tpu"].available:
            pytest.skip("both a GPU and a TPU are usable here: no absent device to fall back from")
        fallback = run_jax_scripts(
            out.parent / "scripts", device="cpu,tpu", benchmark_runs=2, results_dir=out.parent / "results_tpu",
            history=False, return_detailed_results=True, timeout=120,
        )
        (row,) = fallback.benchmarking.device_comparison
        assert (row.script_name, row.baseline_device, row.device, row.device_used) == ("tiny", "cpu", "tpu", "cpu")
        assert row.real_comparison is False
        assert row.note and "not a real comparison" in row.note
        return
    assert (row.script_name, row.baseline_device, row.device, row.device_used) == ("tiny", "cpu", "gpu", "cpu")
    assert row.real_comparison is False
    assert row.note and "not a real comparison" in row.note
    assert row.speedup is not None and row.speedup > 0
    assert row.ci_low is not None and row.ci_low <= row.ci_high
    saved = load(out / "jax_benchmark_results.json")["device_comparison"]
    assert saved == [row.model_dump(mode="json")]


@pytest.mark.slow
def test_benchmark_results_file_validates_against_the_printed_schema(two_device_batch) -> None:
    _, out = two_device_batch
    proc = run_cli("schema", "benchmark_results", timeout=120)
    assert proc.returncode == 0, proc.stderr
    document = load(out / "jax_benchmark_results.json")
    Draft202012Validator(json.loads(proc.stdout)).validate(document)
    assert document["enabled"] is True
    assert (document["benchmark_runs"], document["warmup_runs"], document["runs_completed"]) == (2, 0, 4)
    assert len(document["benchmarks"]) == 2
    for bench in document["benchmarks"]:
        assert len(bench["samples"]) == 2
        assert set(bench["statistics"]) == set(SAMPLE_METRICS)


@pytest.mark.slow
def test_execution_results_have_the_seed_benchmarking_section(two_device_batch) -> None:
    _, out = two_device_batch
    section = load(out / "jax_execution_results.json")["benchmarking"]
    assert section["enabled"] is True
    assert section["runs_completed"] == 4
    per_script = [[s["wall_time"] for s in b["samples"]] for b in section["benchmarks"]]
    assert [len(walls) for walls in per_script] == [2, 2]
    # One pass over the scripts: the sum of their means; its spread from each script's own spread
    # (pooling the samples of different scripts would count their difference as noise).
    assert section["mean_execution_time"] == pytest.approx(sum(sum(w) / 2 for w in per_script))
    variances = [sum((x - sum(w) / 2) ** 2 for x in w) / 1 for w in per_script]
    assert section["std_execution_time"] == pytest.approx(math.sqrt(sum(variances)))
    assert section["performance_stability"] in ("stable", "noisy")
    # The section and the benchmark file are one and the same data.
    bench_file = load(out / "jax_benchmark_results.json")
    for key in ("runs_completed", "mean_execution_time", "std_execution_time", "performance_stability", "benchmarks"):
        assert section[key] == bench_file[key], key


def test_no_benchmark_leaves_the_section_disabled(tmp_path: Path) -> None:
    write(tmp_path / "scripts", "tiny.py", NO_MAIN)
    out = tmp_path / "results"
    batch = run_jax_scripts(tmp_path / "scripts", device="cpu", results_dir=out, history=False,
                            return_detailed_results=True)
    assert batch.success
    section = load(out / "jax_execution_results.json")["benchmarking"]
    assert section["enabled"] is False and section["runs_completed"] == 0
    assert section["mean_execution_time"] is None  # unknown is null, never 0
    assert not (out / "jax_benchmark_results.json").exists()


def test_each_sample_figure_is_read_from_one_result_field_everywhere() -> None:
    """A run's sample, a benchmarked result's medians and compare's reading of a plain run all go
    through models.RESULT_FIELDS: each figure lands in its own field (every value below is
    distinct), and a name that is no sample figure is an error, never another figure's value."""
    from jaxrun.judge.benchmark_runs import sample_from_result
    from jaxrun.judge.compare import single_value
    from jaxrun.results.models import (
        RESULT_FIELDS,
        SAMPLE_METRICS,
        RunSample,
        ScriptResult,
    )
    from jaxrun.run.execute import benchmark_medians

    assert set(SAMPLE_METRICS) <= set(RESULT_FIELDS)
    assert set(RESULT_FIELDS) <= set(RunSample.model_fields) and set(RESULT_FIELDS.values()) <= set(ScriptResult.model_fields)
    values = {field: float(k + 1) for k, field in enumerate(RESULT_FIELDS.values())}
    result = ScriptResult(script_name="s", script_path="/s.py", success=True, device_requested="cpu",
                          device_used="cpu", started_at="t", finished_at="t", **values)
    sample = sample_from_result(result, 0, warmup=False)
    for metric, field in RESULT_FIELDS.items():
        assert getattr(sample, metric) == values[field], metric
        if metric in SAMPLE_METRICS:
            assert single_value(result, metric) == values[field], metric
    # The medians of three runs, each field from its own figure.
    samples = [sample_from_result(result.model_copy(update={f: v * (1 + i) for f, v in values.items()}), i, False)
               for i in range(3)]
    medians = benchmark_medians(result, samples)
    assert {f: medians[f] for f in values} == {f: v * 2 for f, v in values.items()}
    with pytest.raises(KeyError):
        single_value(result, "peak_memory_mb")  # not a sample figure's name: no silent memory_peak
