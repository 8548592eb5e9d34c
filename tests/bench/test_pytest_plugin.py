"""The pytest plugin, run on a sample test suite in a real pytest subprocess (pytester)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from jaxrun.bench.records import Measurement, PytestBenchmarks

pytest_plugins = ["pytester"]

# The sample suite: SAMPLE_SLEEP (seconds) slows `work` down through a host callback, to play a
# regression between two runs.
WORK_MODULE = '''
import os
import time

import jax
import jax.numpy as jnp

SLEEP = float(os.environ.get("SAMPLE_SLEEP", "0"))


def work(x):
    if SLEEP:
        x = jax.pure_callback(lambda v: (time.sleep(SLEEP), v)[1], jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return jnp.tanh(x) @ x
'''
SUITE = WORK_MODULE + '''

def test_work(jax_benchmark):
    m = jax_benchmark(work, jnp.ones((64, 64)), min_time=0.1, peaks=False)
    assert m.steady.median > 0 and m.name == "work"


def test_roofline(jax_benchmark):
    x = jnp.ones((128, 128))
    m = jax_benchmark(jnp.matmul, x, x, min_time=0.05)
    assert m.flops == 2 * 128**3 and m.fraction_of_peak_flops is not None


def test_two_in_one(jax_benchmark):
    jax_benchmark(jnp.sin, jnp.ones(8), min_time=0.02, peaks=False)
    jax_benchmark(jnp.cos, jnp.ones(8), min_time=0.02, peaks=False)
    assert len(jax_benchmark.measurements) == 2


def test_without_benchmark():
    assert True
'''

WORK = "test_suite.py::test_work"


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "jaxrun.pytest_plugin", "-p", "no:cacheprovider", *args)


def test_plugin_module_imports_neither_jax_nor_pydantic() -> None:
    code = "import sys, jaxrun.pytest_plugin; print('jax' in sys.modules, 'pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.slow
def test_fixture_writes_json_and_compares_with_a_baseline(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    base_json = suite.path / "base.json"
    result = _run(suite, "--jax-benchmark-json", str(base_json), "--junitxml", "junit.xml")
    result.assert_outcomes(passed=4)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*jax benchmarks*", f"{WORK}: median * ms [[]*], compile *", "*written to*base.json*"])

    report = PytestBenchmarks.model_validate(json.loads(base_json.read_text()))
    assert set(report.benchmarks) == {
        WORK,
        "test_suite.py::test_roofline",
        "test_suite.py::test_two_in_one",
        "test_suite.py::test_two_in_one::cos",
    }
    work = report.benchmarks[WORK]
    assert isinstance(work, Measurement) and work.name == "work"
    assert len(work.samples) == work.steady.n >= 5  # raw samples kept, for later comparisons
    assert work.compile_time > 0 and work.flops is not None
    roof = report.benchmarks["test_suite.py::test_roofline"]
    assert roof.fraction_of_peak_flops is not None and roof.bound in ("compute", "memory")
    assert report.baseline is None and report.comparisons == []

    # The measurement also rides on the test's user_properties, into junit XML.
    props = ET.parse(suite.path / "junit.xml").getroot().iter("property")
    assert any(p.get("name") == "jax_benchmark" and "'steady'" in p.get("value", "") for p in props)

    # Same code: no regression, whatever the noise (the exit status stays 0 with the flag).
    same = _run(suite, "--jax-benchmark-compare", str(base_json), "--jax-benchmark-fail-on-regression",
                "-k", "test_work")
    same.assert_outcomes(passed=1, deselected=3)
    assert same.ret == 0 or "SLOWER" in same.stdout.str()  # a 5% effect at p<0.01 on a busy box is rare but real
    same.stdout.fnmatch_lines([f"*: {WORK} *"])

    # `work` made slower (2 ms host sleep per call): verdict slower, and the session fails.
    monkeypatch.setenv("SAMPLE_SLEEP", "0.002")
    new_json = suite.path / "new.json"
    slow = _run(suite, "--jax-benchmark-compare", str(base_json), "--jax-benchmark-json", str(new_json),
                "--jax-benchmark-fail-on-regression", "-k", "test_work")
    slow.assert_outcomes(passed=1, deselected=3)
    assert slow.ret == 1
    slow.stdout.fnmatch_lines([f"SLOWER: {WORK} run_time x* p=*", "*slower than the baseline: failing the session*"])
    new = PytestBenchmarks.model_validate(json.loads(new_json.read_text()))
    (comparison,) = new.comparisons
    assert comparison.script_name == WORK and comparison.verdict == "slower"
    assert comparison.gate == ["run_time", "compile_time"] and "run_time" in comparison.slower
    run = comparison.phase("run_time")
    assert run.ratio > 1.05 and run.p_value < 0.01
    assert run.base_n == len(work.samples)
    # One compile per side: its ratio is shown, never tested.
    compile_phase = comparison.phase("compile_time")
    assert compile_phase.verdict == "not comparable" and (compile_phase.base_n, compile_phase.new_n) == (1, 1)
    assert compile_phase.new_median == pytest.approx(new.benchmarks[WORK].trace_time + new.benchmarks[WORK].lower_time
                                                     + new.benchmarks[WORK].compile_time)

    # Without --jax-benchmark-fail-on-regression the verdict is reported and the session passes.
    reported = _run(suite, "--jax-benchmark-compare", str(base_json), "-k", "test_work")
    assert reported.ret == 0
    reported.stdout.fnmatch_lines([f"SLOWER: {WORK} *"])


@pytest.mark.slow
def test_tests_missing_from_the_baseline_are_not_comparable(suite: pytest.Pytester) -> None:
    baseline = suite.path / "empty.json"
    baseline.write_text(json.dumps({"generated_at": "x", "host": "h", "jaxrun_version": "0", "benchmarks": {}}))
    result = _run(suite, "--jax-benchmark-compare", str(baseline), "-k", "test_two_in_one")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["NOT COMPARABLE: test_suite.py::test_two_in_one (not in the baseline)"])


@pytest.mark.slow
def test_bad_options_are_usage_errors(suite: pytest.Pytester) -> None:
    missing = _run(suite, "--jax-benchmark-compare", "nowhere.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*baseline file 'nowhere.json' does not exist*"])
    alpha = _run(suite, "--jax-benchmark-alpha", "2")
    assert alpha.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.slow
def test_a_damaged_baseline_is_named_with_what_is_wrong_in_one_line(suite: pytest.Pytester) -> None:
    baseline = suite.path / "base.json"
    baseline.write_text(json.dumps({"host": "h", "jaxrun_version": "0", "benchmarks": {}}))
    result = _run(suite, "--jax-benchmark-compare", str(baseline), "-k", "test_two_in_one")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    text = "\n".join(result.outlines + result.errlines)
    assert "validation error" not in text, text
    assert f"baseline {str(baseline)!r} is damaged: does not match PytestBenchmarks: generated_at: Field required" \
        in text, text
    baseline.write_text('{"generated_at": "x", "host"')
    result = _run(suite, "--jax-benchmark-compare", str(baseline), "-k", "test_two_in_one")
    text = "\n".join(result.outlines + result.errlines)
    assert "is damaged: not valid JSON at line 1 column 29 (expecting ':' delimiter; the file ends there" in text, text


@pytest.mark.slow
def test_no_file_and_no_summary_without_benchmarks(suite: pytest.Pytester) -> None:
    out = suite.path / "out.json"
    result = _run(suite, "--jax-benchmark-json", str(out), "-k", "test_without_benchmark")
    assert result.ret == 0
    assert not out.exists()
    assert "jax benchmarks" not in result.stdout.str()


FAST = '''
import jax.numpy as jnp


def test_fast(jax_benchmark):
    jax_benchmark(jnp.sin, jnp.ones(8), peaks=False)
'''


def _fast_benchmark(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Measurement]:
    pytester.makepyfile(test_fast=FAST)
    out = pytester.path / "fast.json"
    result = _run(pytester, "--jax-benchmark-json", str(out), *args)
    result.assert_outcomes(passed=1)
    return result, PytestBenchmarks.model_validate(json.loads(out.read_text())).benchmarks["test_fast.py::test_fast"]


@pytest.mark.slow
def test_a_sub_millisecond_benchmark_is_sampled_within_the_time_budget(pytester: pytest.Pytester) -> None:
    # By default: about 1 s of samples, at least 10 of them, so no "too few samples" warning.
    result, m = _fast_benchmark(pytester)
    assert m.time_budget == 1.0
    assert 10 <= m.num_samples == len(m.samples) == m.steady.n <= 200
    assert m.inner_loops > 1  # each sample is many calls of the sub-millisecond function
    assert not any("too few" in w for w in m.steady.warnings + m.warnings)
    assert "too few" not in result.stdout.str()
    result.stdout.fnmatch_lines([f"test_fast.py::test_fast: median * ms [[]*], compile *, {m.num_samples} samples x "
                                 f"{m.inner_loops} calls in * s"])
    # Each sample is calibrated to last >= 1 ms, so a 0.05 s budget holds at most 50 of them.
    _, short = _fast_benchmark(pytester, "--jax-benchmark-time-budget", "0.05")
    assert short.time_budget == 0.05 and 10 <= short.num_samples <= 50
    assert not any("too few" in w for w in short.steady.warnings + short.warnings)


@pytest.mark.slow
def test_the_time_budget_comes_from_the_ini_file_and_the_command_line_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\njax_benchmark_time_budget = 0.05\n")
    _, from_ini = _fast_benchmark(pytester)
    assert from_ini.time_budget == 0.05 and 10 <= from_ini.num_samples <= 50
    # The option's older name, --jax-benchmark-min-time, still works.
    _, from_flag = _fast_benchmark(pytester, "--jax-benchmark-min-time", "0.02")
    assert from_flag.time_budget == 0.02 and 10 <= from_flag.num_samples <= 20


@pytest.mark.slow
def test_a_bad_time_budget_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fast=FAST)
    flag = _run(pytester, "--jax-benchmark-time-budget", "0")
    assert flag.ret == pytest.ExitCode.USAGE_ERROR
    flag.stderr.fnmatch_lines(["*--jax-benchmark-time-budget must be a number of seconds > 0, like 0.5, got 0.0*"])
    pytester.makeini("[pytest]\njax_benchmark_time_budget = soon\n")
    ini = _run(pytester)
    assert ini.ret == pytest.ExitCode.USAGE_ERROR
    ini.stderr.fnmatch_lines(["*ini value jax_benchmark_time_budget must be a number of seconds > 0*got 'soon'*"])


THREE_SAMPLES = WORK_MODULE + '''

def test_three(jax_benchmark):
    jax_benchmark(work, jnp.ones((32, 32)), samples=3, peaks=False)
'''


@pytest.mark.slow
def test_three_samples_a_side_are_too_few_to_judge_and_not_a_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """3 vs 3 steady-state samples can never reach p < 0.01 (at best 0.1): even a much slower
    function is "too few runs to judge" (it was once printed as "no significant change"), shown
    with how many samples are needed, and the session passes with --jax-benchmark-fail-on-regression."""
    pytester.makepyfile(test_three=THREE_SAMPLES)
    base_json, new_json = pytester.path / "base.json", pytester.path / "new.json"
    _run(pytester, "--jax-benchmark-json", str(base_json)).assert_outcomes(passed=1)
    monkeypatch.setenv("SAMPLE_SLEEP", "0.02")
    result = _run(pytester, "--jax-benchmark-compare", str(base_json), "--jax-benchmark-json", str(new_json),
                  "--jax-benchmark-fail-on-regression")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "TOO FEW RUNS TO JUDGE: test_three.py::test_three run_time x* p=0.1* (*no test can reach p < 0.01: at least 5 runs each)",
        "1 benchmark with too few samples to judge against the baseline (not a regression)*",
    ])
    assert "NO SIGNIFICANT CHANGE" not in result.stdout.str()
    (comparison,) = PytestBenchmarks.model_validate(json.loads(new_json.read_text())).comparisons
    run = comparison.phase("run_time")
    assert (run.base_n, run.new_n) == (3, 3) and run.ratio > 2
    assert comparison.verdict == run.verdict == "too few runs to judge" and comparison.slower == []


ROOFLINE_SUITE = '''
import jax
import jax.numpy as jnp
import pytest


@pytest.mark.parametrize("n, dtype", [(256, "float32"), (1024, "float32"), (512, "bfloat16")])
def test_matmul(jax_benchmark, n, dtype):
    x = jnp.ones((n, n), dtype)
    jax_benchmark(jnp.matmul, x, x, time_budget=0.1)


def test_in_cache(jax_benchmark):  # 16 KiB, a thousand times over: bytes that never leave the caches
    loop = lambda v: jax.lax.fori_loop(0, 1000, lambda i, w: w * 1.0001 + 0.5, v)
    jax_benchmark(loop, jnp.ones(4096), time_budget=0.1)
'''


@pytest.mark.slow
def test_no_reported_fraction_of_peak_exceeds_one(pytester: pytest.Pytester) -> None:
    """``pytest --jax-benchmark-compare base.json`` on real functions: every fraction of a peak in
    the file and on the terminal is at most 1 (100%), and each says what its peak is."""
    pytester.makepyfile(test_speed=ROOFLINE_SUITE)
    base, new = pytester.path / "base.json", pytester.path / "new.json"
    _run(pytester, "--jax-benchmark-json", str(base)).assert_outcomes(passed=4)
    result = _run(pytester, "--jax-benchmark-compare", str(base), "--jax-benchmark-json", str(new))
    result.assert_outcomes(passed=4)
    measured = [m for path in (base, new) for m in PytestBenchmarks.model_validate_json(path.read_text()).benchmarks.values()]
    fractions = [(m.fraction_of_peak_flops, m.fraction_of_peak_bandwidth) for m in measured]
    assert all(0 < f <= 1 for pair in fractions for f in pair), fractions
    assert all(m.peak_flops_source and m.peak_bandwidth_source for m in measured)
    shown = [line for line in result.outlines if "of peak FLOP/s" in line]
    assert len(shown) == 4, result.outlines
    for line in shown:
        percent = float(line.split("% of peak FLOP/s")[0].rsplit(", ", 1)[1])
        assert 0 < percent <= 100 and "(peak: " in line, line
