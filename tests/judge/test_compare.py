"""compare_results on real result files (written with result_files.write_model) and on real runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    crafted_batch,
    crafted_bench_results,
    crafted_benchmark,
    crafted_script_result,
    noisy_times,
    run_batch,
    with_programs,
    write,
    write_results_dir,
)

from jaxrun import execute_jax_script
from jaxrun.errors import UsageError
from jaxrun.judge.compare import compare_results, load_samples, parse_effect
from jaxrun.judge.verdicts import DEFAULT_GATE, PHASES
from jaxrun.results import result_files
from jaxrun.results.models import (
    METRIC_ALIASES,
    SAMPLE_METRICS,
    BenchmarkResults,
    ComparisonReport,
    RegressionCheck,
    RunSample,
    ScriptBenchmark,
    ScriptComparison,
)


@pytest.fixture
def base_dir(tmp_path: Path) -> Path:
    model = crafted_bench_results(
        crafted_benchmark("pomdp_solver", noisy_times(1), warmups=[1.8]),
        crafted_benchmark("general_model", noisy_times(2, scale=2.0)),
        crafted_benchmark("arc_grid_env", noisy_times(3, n=12, scale=0.5)),
    )
    return write_results_dir(tmp_path / "base", model)


# --- the two "done when" cases ---------------------------------------------------------------


def test_a_results_dir_compared_with_itself_shows_no_change(base_dir: Path) -> None:
    report = compare_results(base_dir, base_dir)
    assert isinstance(report, ComparisonReport)
    assert [s.script_name for s in report.scripts] == ["pomdp_solver", "general_model", "arc_grid_env"]
    assert report.metrics == list(PHASES) and report.gate == ["run_time", "compile_time"]
    for row in report.scripts:
        assert row.verdict == "no significant change" and row.gate == list(DEFAULT_GATE)
        assert list(row.phases) == list(PHASES) and row.slower == row.faster == []
        for metric, phase in row.phases.items():
            assert phase.metric == metric and phase.verdict == "no significant change"
            assert phase.p_value == pytest.approx(1.0)
            assert phase.ratio == 1.0 and phase.ratio_ci_low <= 1.0 <= phase.ratio_ci_high
            assert phase.note is None
        assert row.device == "cpu" and row.note is None
    assert report.regressions == [] and report.improvements == []
    assert report.only_in_base == [] and report.only_in_new == []
    assert report.geometric_mean_ratio == {m: pytest.approx(1.0) for m in PHASES}
    assert report.base == report.new == str(base_dir)


def test_thirty_percent_slower_is_a_significant_regression(tmp_path: Path, base_dir: Path) -> None:
    new = write_results_dir(tmp_path / "new", crafted_bench_results(
        crafted_benchmark("pomdp_solver", noisy_times(11, scale=1.3), warmups=[2.2]),
        crafted_benchmark("general_model", noisy_times(12, scale=2.0)),
        crafted_benchmark("arc_grid_env", noisy_times(13, n=12, scale=0.5)),
    ))
    report = compare_results(base_dir, new)
    rows = {r.script_name: r for r in report.scripts}
    slow = rows["pomdp_solver"]
    assert slow.verdict == "slower"
    # Every time phase grew by 30% or more; memory (100 MiB + 10 MiB per second) only by ~3%.
    assert slow.slower == ["wall_time", "import_time", "compile_time", "run_time"]
    assert slow.phase("memory_peak").verdict == "no significant change"
    wall = slow.phase("wall_time")
    assert wall.p_value < 0.01 and wall.ratio == pytest.approx(1.3, rel=0.02)
    assert wall.ratio_ci_low <= 1.3 <= wall.ratio_ci_high and wall.ratio_ci_low > 1.05
    assert (wall.base_n, wall.new_n) == (10, 10)  # the warm-up is not a sample
    run = slow.phase("run_time")  # 0.9 * wall - 0.05: (0.9 * 1.3 - 0.05) / 0.85 = 1.318
    assert run.p_value < 0.01 and run.ratio == pytest.approx(1.318, rel=0.02)
    for name in ("general_model", "arc_grid_env"):
        assert rows[name].verdict == "no significant change" and rows[name].slower == []
        assert abs(rows[name].phase("wall_time").ratio - 1) < 0.05
    assert report.regressions == ["pomdp_solver"] and report.improvements == []
    walls = [r.phase("wall_time").ratio for r in report.scripts]
    assert report.geometric_mean_ratio["wall_time"] == pytest.approx(np.prod(walls) ** (1 / 3))
    assert 1.05 < report.geometric_mean_ratio["wall_time"] < 1.15
    # The other way round it is an improvement.
    back = compare_results(new, base_dir)
    assert back.improvements == ["pomdp_solver"] and back.regressions == []
    assert {r.script_name: r.verdict for r in back.scripts}["pomdp_solver"] == "faster"


def test_min_effect_and_alpha_are_applied(tmp_path: Path, base_dir: Path) -> None:
    new = write_results_dir(tmp_path / "new", crafted_bench_results(crafted_benchmark("pomdp_solver", noisy_times(11, scale=1.03))))
    assert compare_results(base_dir, new).scripts[0].verdict == "no significant change"
    assert compare_results(base_dir, new, min_effect=0.02).scripts[0].verdict == "slower"
    # An alpha no 10-vs-10 test can beat: too few runs to judge (not "no significant change").
    assert compare_results(base_dir, new, min_effect=0.02, alpha=1e-9).scripts[0].verdict == "too few runs to judge"


@pytest.mark.slow
def test_real_runs_of_a_script_made_much_slower(tmp_path: Path) -> None:
    """Real processes through execute_jax_script: a 0.20 s script against the same one at 1.00 s.

    Why this cannot flake. With 5 runs a side, the two-sided exact Mann-Whitney U test reaches
    p < 0.01 only with complete separation (every new run slower than every base run): that gives
    p = 2/C(10,5) = 2/252 = 0.0079, while a single inverted pair already gives 4/252 = 0.016. The
    scripts import nothing, so a run is the sleep plus ~0.06-0.17 s of process start-up, whose
    run-to-run spread measured at most ~0.1 s on this 2-core box with 3 busy loops beside it. To
    invert one pair, a base run's start-up would have to exceed a new run's by the full 0.8 s
    difference of the sleeps (sleep never returns early), ~8x the worst spread seen. The former
    0.20 vs 0.26 s (a 0.06 s margin, less than that spread) failed 3 runs in 11.
    """
    versions = {}
    for label, seconds in (("v1", 0.20), ("v2", 1.00)):
        folder = tmp_path / label
        folder.mkdir()
        (folder / "sleeper.py").write_text(f"import time\n\ntime.sleep({seconds})\n")
        versions[label] = folder / "sleeper.py"

    def benchmark(label: str) -> BenchmarkResults:
        runs = [
            execute_jax_script(versions[label], device="cpu", results_dir=tmp_path / f"res_{label}", timeout=60)
            for _ in range(6)
        ]
        assert all(r.success for r in runs), [r.error_message for r in runs]
        samples = [
            RunSample(
                index=i, warmup=i == 0, success=r.success, wall_time=r.execution_time, body_time=r.body_time,
                compile_time=r.jit_compile_time or 0.0,
                run_time=r.body_time - (r.jit_compile_time or 0.0), memory_peak=r.memory_peak,
            )
            for i, r in enumerate(runs)
        ]
        return crafted_bench_results(ScriptBenchmark(
            script_name="sleeper", script_path=str(versions[label]), device_requested="cpu",
            device_used=runs[-1].device_used, benchmark_runs=5, warmup_runs=1, runs_completed=5,
            warmups=samples[:1], samples=samples[1:],
        ))

    base = write_results_dir(tmp_path / "base", benchmark("v1"))
    new = write_results_dir(tmp_path / "new", benchmark("v2"))

    report = compare_results(base, new)
    (row,) = report.scripts
    assert row.verdict == "slower" and row.gate == ["run_time", "compile_time"], row
    run = row.phase("run_time")
    assert (run.base_n, run.new_n) == (5, 5)
    assert run.verdict == "slower" and run.p_value < 0.01
    # No bound on the ratio that start-up times could move: it is the ratio of the medians, and
    # with complete separation its bootstrap CI lies above min(new) / max(base), far above 1.05.
    assert run.ratio == pytest.approx(run.new_median / run.base_median)
    assert run.ratio_ci_low > 1.05
    # Nothing is compiled: 0 s in every run, no change, and the run phase alone decides.
    assert row.phase("compile_time").verdict == "no significant change"
    assert report.regressions == ["sleeper"]
    body = compare_results(base, new, metric="body_time").scripts[0]
    assert body.verdict == "slower"
    # body_time is the script's own time: it holds the whole sleep (a lower bound, as a sleep is
    # never shorter than asked) and leaves out the process start-up that wall_time holds.
    for folder, seconds in ((base, 0.20), (new, 1.00)):
        walls = load_samples(folder)[("sleeper", "cpu")]
        bodies = load_samples(folder, "body_time")[("sleeper", "cpu")]
        assert len(walls) == len(bodies) == 5
        assert all(wall > body >= seconds for wall, body in zip(walls, bodies)), (walls, bodies)
    assert compare_results(base, base).scripts[0].verdict == "no significant change"


# --- inputs ---------------------------------------------------------------------------------------


def test_json_files_work_as_well_as_folders(tmp_path: Path, base_dir: Path) -> None:
    base_file = base_dir / result_files.BENCHMARK_RESULTS
    copy = tmp_path / "elsewhere" / "saved_run.json"
    copy.parent.mkdir()
    copy.write_text(base_file.read_text())
    report = compare_results(str(base_file), copy)
    assert all(r.verdict == "no significant change" for r in report.scripts) and len(report.scripts) == 3
    assert report.base == str(base_file)
    # Models in memory are accepted too.
    loaded = result_files.read_model(base_file, BenchmarkResults)
    assert [r.verdict for r in compare_results(loaded, base_dir).scripts] == ["no significant change"] * 3


def test_load_samples_keeps_only_counted_successful_runs(tmp_path: Path) -> None:
    folder = write_results_dir(tmp_path / "r", crafted_bench_results(
        crafted_benchmark("a", [1.0, 1.1, 1.2], warmups=[5.0, 4.0], failed=2),
        crafted_benchmark("a", [0.5, 0.6], device="gpu"),
    ))
    samples = load_samples(folder)
    assert samples == {("a", "cpu"): [1.0, 1.1, 1.2], ("a", "gpu"): [0.5, 0.6]}
    assert load_samples(folder, "memory_peak")[("a", "cpu")] == pytest.approx([110.0, 111.0, 112.0])
    assert load_samples(folder, "compile_time")[("a", "gpu")] == pytest.approx([0.05, 0.06])
    assert load_samples(folder, "steady_time")[("a", "cpu")] == pytest.approx([0.85, 0.94, 1.03])


def test_a_results_folder_prefers_the_benchmark_file(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    write_results_dir(folder, crafted_bench_results(crafted_benchmark("a", [1.0, 1.1, 1.2])))
    write_results_dir(folder, crafted_batch([crafted_script_result("a", 9.0)]))
    assert load_samples(folder) == {("a", "cpu"): [1.0, 1.1, 1.2]}


def test_batch_results_without_benchmarks_are_not_comparable(tmp_path: Path) -> None:
    base = write_results_dir(tmp_path / "base", crafted_batch([crafted_script_result("a", 1.0), crafted_script_result("b", 2.0)]))
    new = write_results_dir(tmp_path / "new", crafted_batch([crafted_script_result("a", 1.3), crafted_script_result("b", 2.0)]))
    assert load_samples(base) == {("a", "cpu"): [1.0], ("b", "cpu"): [2.0]}
    assert load_samples(base, "body_time")[("a", "cpu")] == pytest.approx([0.95])
    assert load_samples(base, "compile_time")[("a", "cpu")] == pytest.approx([0.1])
    assert load_samples(base, "steady_time")[("a", "cpu")] == pytest.approx([0.85])
    assert load_samples(base, "memory_peak")[("a", "cpu")] == [120.0]
    report = compare_results(base, new)
    for row in report.scripts:
        assert row.verdict == "not comparable"
        for metric, phase in row.phases.items():
            assert phase.p_value is None and phase.verdict == "not comparable"
            if metric == "import_time":  # not in these results
                assert (phase.base_n, phase.new_n) == (0, 0) and "no import_time of a successful run" in phase.note
                continue
            assert (phase.base_n, phase.new_n) == (1, 1)
            assert "one sample per side" in phase.note and "--benchmark-runs" in phase.note
    assert report.scripts[0].phase("wall_time").ratio == pytest.approx(1.3)  # still shown, just not judged
    assert report.regressions == []


def test_a_batch_result_uses_its_benchmarking_section(tmp_path: Path) -> None:
    benchmarked = crafted_batch(
        [crafted_script_result("a", 1.0), crafted_script_result("broken", None, success=False)],
        benchmarks=[crafted_benchmark("a", noisy_times(1))],
    )
    path = tmp_path / "run.json"
    result_files.write_model(path, benchmarked)
    samples = load_samples(path)
    assert samples[("a", "cpu")] == pytest.approx(noisy_times(1))
    assert samples[("broken", "cpu")] == []
    report = compare_results(path, path)
    rows = {r.script_name: r for r in report.scripts}
    assert rows["a"].verdict == "no significant change"
    broken = rows["broken"]
    assert broken.verdict == "not comparable" and broken.gate == ["wall_time"]
    assert "run_time and compile_time not measured on both sides: judged on wall_time" in broken.note
    assert "no wall_time of a successful run on the base and new side" in broken.phase("wall_time").note


def test_scripts_on_one_side_only_are_listed(tmp_path: Path) -> None:
    base = write_results_dir(tmp_path / "base", crafted_bench_results(crafted_benchmark("kept", noisy_times(1)), crafted_benchmark("removed", noisy_times(2))))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(crafted_benchmark("kept", noisy_times(3)), crafted_benchmark("added", noisy_times(4))))
    report = compare_results(base, new)
    assert [r.script_name for r in report.scripts] == ["kept"]
    assert report.only_in_base == ["removed"] and report.only_in_new == ["added"]


def test_two_runs_without_a_script_in_common_are_refused_with_both_sides_named(tmp_path: Path) -> None:
    base = write_results_dir(tmp_path / "base", crafted_bench_results(crafted_benchmark("old_model", noisy_times(1))))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(crafted_benchmark("new_model", noisy_times(2))))
    with pytest.raises(UsageError, match=r"nothing to compare: .*BASE has old_model; NEW has new_model"):
        compare_results(base, new)


def test_a_script_that_now_fails_is_not_comparable(tmp_path: Path, base_dir: Path) -> None:
    new = write_results_dir(tmp_path / "new", crafted_bench_results(crafted_benchmark("pomdp_solver", [], failed=5)))
    (row,) = compare_results(base_dir, new).scripts
    assert row.verdict == "not comparable"
    wall = row.phase("wall_time")
    assert wall.new_n == 0 and wall.new_median is None
    assert "no wall_time of a successful run on the new side" in wall.note


def test_cross_device_runs_are_compared_per_device(tmp_path: Path) -> None:
    base = write_results_dir(tmp_path / "base", crafted_bench_results(
        crafted_benchmark("m", noisy_times(1), device="cpu"), crafted_benchmark("m", noisy_times(2, scale=0.2), device="gpu")))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(
        crafted_benchmark("m", noisy_times(3), device="cpu"), crafted_benchmark("m", noisy_times(4, scale=0.3), device="gpu")))
    report = compare_results(base, new)
    verdicts = {(r.script_name, r.device): r.verdict for r in report.scripts}
    assert verdicts == {("m", "cpu"): "no significant change", ("m", "gpu"): "slower"}
    assert report.regressions == ["m [gpu]"]


def test_a_different_requested_device_still_pairs_the_script(tmp_path: Path) -> None:
    base = write_results_dir(tmp_path / "base", crafted_bench_results(crafted_benchmark("m", noisy_times(1), device="auto")))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(crafted_benchmark("m", noisy_times(2), device="cpu")))
    report = compare_results(base, new)
    (row,) = report.scripts
    assert row.verdict == "no significant change" and "auto in base, cpu in new" in row.note
    assert report.only_in_base == report.only_in_new == []


def test_the_device_shown_is_the_one_the_scripts_ran_on(tmp_path: Path) -> None:
    base = write_results_dir(tmp_path / "base", crafted_bench_results(crafted_benchmark("m", noisy_times(1), device="auto", used="cpu")))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(crafted_benchmark("m", noisy_times(2), device="auto", used="cpu")))
    (row,) = compare_results(base, new).scripts
    assert row.device == "cpu"  # not "auto", which was only asked for


def test_too_few_runs_for_the_test_are_explained(tmp_path: Path) -> None:
    base = write_results_dir(tmp_path / "base", crafted_bench_results(crafted_benchmark("m", [1.0, 1.01, 0.99])))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(crafted_benchmark("m", [1.5, 1.51, 1.49])))
    (row,) = compare_results(base, new).scripts
    assert row.verdict == "too few runs to judge" and row.phase("wall_time").ratio == pytest.approx(1.5)
    assert "no test can reach p < 0.01" in row.phase("run_time").note
    assert "at least 5 runs each" in row.phase("run_time").note  # 2 / comb(10, 5) < 0.01


def test_three_runs_against_three_are_too_few_never_no_change(tmp_path: Path) -> None:
    """Issue 23: 'run_time x2.751 [2.717, 2.780] p=0.1' was printed as 'no significant change'."""
    base = write_results_dir(tmp_path / "base", crafted_bench_results(crafted_benchmark("m", [1.0, 1.01, 0.99])))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(crafted_benchmark("m", [2.751, 2.717, 2.780])))
    report = compare_results(base, new, alpha=0.05)
    (row,) = report.scripts
    run = row.phase("run_time")
    assert row.phase("wall_time").ratio == pytest.approx(2.751) and run.ratio > 2.7 and run.p_value == pytest.approx(0.1)
    assert run.verdict == "too few runs to judge" and "at least 4 runs each" in run.note
    assert row.verdict == "too few runs to judge" and row.slower == [] and row.faster == []
    assert report.regressions == [] and report.improvements == []
    assert all(p.verdict == "too few runs to judge" for p in row.phases.values())
    # One run more each and the same slow-down is judged.
    base4 = write_results_dir(tmp_path / "base4", crafted_bench_results(crafted_benchmark("m", [1.0, 1.01, 0.99, 1.02])))
    new4 = write_results_dir(tmp_path / "new4", crafted_bench_results(crafted_benchmark("m", [2.751, 2.717, 2.780, 2.73])))
    assert compare_results(base4, new4, alpha=0.05).scripts[0].verdict == "slower"


def test_a_gate_phase_with_too_few_runs_makes_the_gate_too_few() -> None:
    from jaxrun.config.options import VerdictOptions
    from jaxrun.judge.verdicts import judge_script

    options = VerdictOptions(alpha=0.05)
    same = noisy_times(1, n=10)
    base = {"run_time": same, "compile_time": [0.5, 0.51, 0.49]}
    new = {"run_time": list(reversed(same)), "compile_time": [0.5, 0.52, 0.48]}
    row = judge_script("m", "cpu", base, new, options)
    assert row.phase("run_time").verdict == "no significant change"
    assert row.phase("compile_time").verdict == "too few runs to judge"
    assert row.verdict == "too few runs to judge"
    # A slower gate phase still decides, whatever the other one.
    slower = judge_script("m", "cpu", base, {**new, "run_time": [1.3 * x for x in same]}, options)
    assert slower.verdict == "slower" and slower.slower == ["run_time"]
    # A gate phase with one sample a side is untested (not comparable): the other decides.
    single = judge_script("m", "cpu", {**base, "compile_time": [0.5]}, {**new, "compile_time": [0.5]}, options)
    assert single.phase("compile_time").verdict == "not comparable" and single.verdict == "no significant change"


def test_zero_compile_time_on_both_sides_is_no_change(tmp_path: Path) -> None:
    bench = crafted_benchmark("plain", [1.0, 1.1, 1.2, 1.0, 1.1])
    for s in bench.samples:
        s.compile_time = 0.0
    folder = write_results_dir(tmp_path / "r", crafted_bench_results(bench))
    (row,) = compare_results(folder, folder, metric="compile_time").scripts
    compile_phase = row.phase("compile_time")
    assert row.verdict == "no significant change" and row.gate == ["compile_time"]
    assert compile_phase.ratio is None and "0 in every run" in compile_phase.note


@pytest.mark.parametrize("metric", SAMPLE_METRICS)
def test_every_metric_can_be_compared(base_dir: Path, metric: str) -> None:
    report = compare_results(base_dir, base_dir, metric=metric)
    assert report.gate == [metric] and metric in report.metrics
    assert {r.verdict for r in report.scripts} == {"no significant change"}
    assert all(r.gate == [metric] and metric in r.phases for r in report.scripts)


def test_the_report_round_trips_through_json(base_dir: Path) -> None:
    report = compare_results(base_dir, base_dir)
    assert ComparisonReport.model_validate_json(report.model_dump_json()) == report
    assert json.loads(report.model_dump_json())["scripts"][0]["verdict"] == "no significant change"


# --- bad input ------------------------------------------------------------------------------------


def test_a_missing_path_is_a_usage_error(tmp_path: Path, base_dir: Path) -> None:
    with pytest.raises(UsageError, match="does not exist.*jax_benchmark_results.json"):
        compare_results(base_dir, tmp_path / "nope")


def test_a_folder_without_results_is_a_usage_error(tmp_path: Path, base_dir: Path) -> None:
    with pytest.raises(UsageError, match="not a jaxrun results folder.*jax_execution_results.json"):
        compare_results(tmp_path / "base", tmp_path)  # tmp_path holds only the base folder


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json {", "not valid JSON"),
        ("[1, 2, 3]", "not a jaxrun results file"),
        ('{"jax_available": true}', "not a jaxrun results file"),
        ('{"benchmarks": [{"script_name": "x"}]}', "does not match"),
    ],
)
def test_a_file_that_is_not_a_results_file_is_a_usage_error(
    tmp_path: Path, base_dir: Path, content: str, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(UsageError, match=message) as info:
        compare_results(bad, base_dir)
    assert "bad.json" in str(info.value)


def test_a_binary_file_is_a_usage_error(tmp_path: Path, base_dir: Path) -> None:
    bad = tmp_path / "blob.bin"
    bad.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(UsageError, match="blob.bin"):
        compare_results(base_dir, bad)


def test_an_unknown_metric_lists_the_valid_ones(base_dir: Path) -> None:
    with pytest.raises(UsageError, match="'speed'.*wall_time, body_time, import_time, compile_time, run_time, memory_peak"):
        compare_results(base_dir, base_dir, metric="speed")
    with pytest.raises(UsageError, match="wall_time"):
        load_samples(base_dir, "execution_time")


@pytest.mark.parametrize("options", [{"alpha": 0}, {"alpha": 1}, {"alpha": -0.5}, {"min_effect": -0.05},
                                     {"min_effect": float("nan")}])
def test_bad_alpha_or_min_effect_is_a_usage_error(base_dir: Path, options: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        compare_results(base_dir, base_dir, **options)


@pytest.mark.parametrize("text, value", [("5%", 0.05), ("5 %", 0.05), ("0.05", 0.05), ("12.5%", 0.125),
                                         (" 0 ", 0.0), ("0%", 0.0)])
def test_parse_effect(text: str, value: float) -> None:
    assert parse_effect(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "-5%", "5%%", "5", "five percent", "0.05.1"])
def test_parse_effect_rejects_garbage(text: str) -> None:
    with pytest.raises(UsageError, match=repr(text).replace(".", r"\.").replace("%", "%")):
        parse_effect(text)


def test_an_empty_benchmark_file_falls_back_to_the_execution_results(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    write_results_dir(folder, crafted_bench_results())
    write_results_dir(folder, crafted_batch([crafted_script_result("a", 1.0)]))
    assert load_samples(folder) == {("a", "cpu"): [1.0]}


# --- the gate ---------------------------------------------------------------------------------------


def _phased(name: str, seed: int, *, imports: float = 0.5, run: float = 1.0, n: int = 8) -> ScriptBenchmark:
    """Benchmark samples whose import and run phases are set apart (wall = import + run + noise)."""
    rng = np.random.default_rng(seed)
    samples = []
    for i in range(n):
        imp, own = imports * rng.normal(1, 0.01), run * rng.normal(1, 0.01)
        samples.append(RunSample(index=i, warmup=False, success=True, wall_time=0.1 + imp + 0.2 + own, body_time=imp + 0.2 + own,
                                 import_time=imp, compile_time=0.2 * rng.normal(1, 0.01), run_time=own,
                                 memory_peak=100.0))
    return ScriptBenchmark(script_name=name, script_path=f"/suite/{name}.py", device_requested="cpu",
                           device_used="cpu", benchmark_runs=n, warmup_runs=0, runs_completed=n, samples=samples)


def test_slower_imports_are_judged_but_do_not_gate(tmp_path: Path) -> None:
    """A heavier import (a new dependency, a slower file system) is not the code's regression."""
    base = write_results_dir(tmp_path / "base", crafted_bench_results(_phased("m", 1)))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(_phased("m", 2, imports=1.0)))
    report = compare_results(base, new)
    (row,) = report.scripts
    assert row.verdict == "no significant change" and report.regressions == []
    assert row.slower == ["wall_time", "import_time"]
    assert row.phase("import_time").ratio == pytest.approx(2.0, rel=0.03)
    # Asked for, the import phase is the gate.
    assert compare_results(base, new, metric="import_time").regressions == ["m"]


def test_a_slower_run_phase_hidden_in_a_noisy_wall_is_caught(tmp_path: Path) -> None:
    """10% more work under an import that varies by 30%: the wall time cannot tell, run_time can."""
    def noisy(name: str, seed: int, run: float) -> ScriptBenchmark:
        bench = _phased(name, seed, run=run)
        rng = np.random.default_rng(seed + 100)
        for sample in bench.samples:
            extra = rng.uniform(0, 0.6)
            sample.import_time += extra
            sample.wall_time += extra
            sample.body_time += extra
        return bench

    base = write_results_dir(tmp_path / "base", crafted_bench_results(noisy("m", 1, run=0.3)))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(noisy("m", 2, run=0.33)))
    (row,) = compare_results(base, new).scripts
    assert row.verdict == "slower" and "run_time" in row.slower
    assert row.phase("run_time").ratio == pytest.approx(1.1, rel=0.02)
    assert row.phase("wall_time").verdict == "no significant change"


def test_files_without_phases_are_judged_on_wall_time(tmp_path: Path) -> None:
    """Samples recorded before phases existed have only the wall time: it becomes the gate."""
    def walls_only(seed: int, scale: float) -> ScriptBenchmark:
        bench = crafted_benchmark("old", noisy_times(seed, scale=scale))
        for sample in bench.samples:
            sample.import_time = sample.compile_time = sample.run_time = sample.body_time = None
        return bench

    base = write_results_dir(tmp_path / "base", crafted_bench_results(walls_only(1, 1.0)))
    new = write_results_dir(tmp_path / "new", crafted_bench_results(walls_only(2, 1.3)))
    (row,) = compare_results(base, new).scripts
    assert row.gate == ["wall_time"] and row.verdict == "slower"
    assert row.note == "run_time and compile_time not measured on both sides: judged on wall_time"


def test_comparisons_written_before_phases_still_read() -> None:
    """A pytest baseline or results file from the one-metric days: its entry becomes one phase."""
    old = {"script_name": "t", "device": "cpu", "metric": "steady_time", "base_n": 5, "new_n": 5,
           "base_median": 1.0, "new_median": 1.3, "ratio": 1.3, "ratio_ci_low": 1.2, "ratio_ci_high": 1.4,
           "p_value": 0.008, "verdict": "slower", "note": None}
    row = ScriptComparison.model_validate(old)
    assert row.verdict == "slower" and row.gate == ["run_time"] and row.slower == ["run_time"]
    assert row.phase("steady_time").ratio == 1.3 and METRIC_ALIASES["steady_time"] == "run_time"
    check = RegressionCheck.model_validate({"script_path": "/t.py", "device": "cpu", "host": "h", "metric": "wall_time",
                                            "newest_run_id": 2, "previous_runs": 1, "regression": True,
                                            "comparison": {**old, "metric": "wall_time"}})
    assert check.gate == ["wall_time"] and check.comparison.phase("wall_time").p_value == 0.008


# --- same program or a changed one ----------------------------------------------


def test_a_program_whose_compile_time_moved_says_whether_it_changed(tmp_path: Path) -> None:
    from jaxrun.judge.compare import program_lines
    from jaxrun.outputs.exports import comparison_markdown

    same = dict(count=1, fingerprint="f", input_fingerprint="i")
    base = crafted_batch([with_programs("m", **{"jit(a)": dict(same, compile_time=0.10),
                                          "jit(b)": dict(same, compile_time=0.10),
                                          "jit(c)": dict(same, compile_time=0.10),
                                          "jit(d)": dict(same, compile_time=0.10),
                                          "jit(e)": dict(same, compile_time=0.10),
                                          "jit(gone)": dict(same, compile_time=0.10)})])
    new = crafted_batch([with_programs("m", **{"jit(a)": dict(same, compile_time=0.30),  # same program, slower
                                         "jit(b)": dict(same, compile_time=0.30, input_fingerprint="i2",
                                                        fingerprint="f2"),
                                         "jit(c)": dict(same, compile_time=0.30, fingerprint="f2"),
                                         "jit(d)": dict(count=1, compile_time=0.30),  # no fingerprint
                                         "jit(e)": dict(same, compile_time=0.105),  # did not move
                                         "jit(new)": dict(same, compile_time=0.5)})])
    report = compare_results(write_results_dir(tmp_path / "b", base), write_results_dir(tmp_path / "n", new))
    (row,) = report.scripts
    assert {p.program: p.change for p in row.programs} == {
        "jit(a)": "same program", "jit(b)": "the program changed",
        "jit(c)": "XLA's output changed (same input: compiler or flags)", "jit(d)": None}
    (a,) = [p for p in row.programs if p.program == "jit(a)"]
    assert (a.base_compile_time, a.new_compile_time, a.moved) == (0.10, 0.30, True)
    lines = program_lines(report)
    assert "m.py: jit(b) compiled in 0.100 s -> compiled in 0.300 s: the program changed" in lines
    assert "m.py: jit(d) compiled in 0.100 s -> compiled in 0.300 s: unknown whether it is the same program (a run kept no " \
           "fingerprint of it)" in lines
    assert "jit(b) compiled in 0.100 s -\\> compiled in 0.300 s: the program changed" in comparison_markdown(report)
    assert ComparisonReport.model_validate_json(report.model_dump_json()) == report


def test_nothing_said_of_programs_when_nothing_moved(tmp_path: Path, base_dir: Path) -> None:
    from jaxrun.judge.compare import program_lines

    same = dict(count=1, compile_time=0.10, fingerprint="f", input_fingerprint="i")
    model = crafted_batch([with_programs("m", **{"jit(a)": same})])
    report = compare_results(write_results_dir(tmp_path / "b", model), write_results_dir(tmp_path / "n", model))
    assert report.scripts[0].programs == [] and program_lines(report) == []
    assert compare_results(base_dir, base_dir).scripts[0].programs == []  # a benchmark file alone: nothing kept


def test_a_benchmarked_script_takes_its_programs_from_the_batch_file(tmp_path: Path) -> None:
    def folder(path: Path, seed: int, compile_time: float, fingerprint: str) -> Path:
        bench = crafted_benchmark("m", noisy_times(seed))
        result = with_programs("m", **{"jit(a)": dict(count=1, compile_time=compile_time, fingerprint=fingerprint,
                                                       input_fingerprint=fingerprint)})
        write_results_dir(path, crafted_bench_results(bench))
        return write_results_dir(path, crafted_batch([result], [bench]))

    report = compare_results(folder(tmp_path / "b", 1, 0.1, "x"), folder(tmp_path / "n", 2, 0.5, "y"))
    assert [(p.program, p.change) for p in report.scripts[0].programs] == [("jit(a)", "the program changed")]


def test_runs_of_two_machines_are_compared_only_when_asked_and_the_facts_that_differ_are_named(tmp_path: Path) -> None:
    from jaxrun.results.machine import Machine

    def batch(machine: Machine | None, seed: int) -> Path:
        made = crafted_batch([crafted_script_result("a", 1.0)], benchmarks=[crafted_benchmark("a", noisy_times(seed))])
        made = made.model_copy(update={"metadata": made.metadata.model_copy(update={"machine": machine})})
        path = tmp_path / f"run{seed}.json"
        result_files.write_model(path, made)
        return path

    here = Machine(cpu_model="AMD EPYC", cpus=2, memory_gib=23.5)
    there = Machine(cpu_model="Intel Xeon", cpus=64, memory_gib=23.5, gpus=["NVIDIA H100"], gpu_driver="550.54")
    with pytest.raises(UsageError, match=r"BASE and NEW ran on different machines \(cpu_model: 'Intel Xeon' vs "
                                         r"'AMD EPYC'; cpus: 64 vs 2; gpus: \['NVIDIA H100'\] vs \[\]; gpu_driver: "
                                         r"'550.54' vs None; NEW's first\).*--allow-mismatch"):
        compare_results(batch(here, 1), batch(there, 2))
    report = compare_results(batch(here, 1), batch(there, 2), allow_mismatch=True)
    assert report.machine_mismatch[:2] == ["cpu_model: 'Intel Xeon' vs 'AMD EPYC'", "cpus: 64 vs 2"]
    assert compare_results(batch(here, 1), batch(here, 3)).machine_mismatch == []  # one machine
    assert compare_results(batch(None, 1), batch(there, 2)).machine_mismatch == []  # unknown: an older file
    # The command line says the same: tests/interfaces/test_cli_analysis.py.


def test_a_finished_batch_records_the_machine_it_ran_on(tmp_path: Path) -> None:
    from jaxrun.results.machine import this_machine

    write(tmp_path / "s", "a.py", "if False:\n    import jax\nprint(1)\n")
    batch = run_batch(tmp_path / "s", tmp_path / "r")
    machine = batch.metadata.machine
    assert machine is not None and machine == this_machine(batch.device_info).model_copy(update={"xla_flags": []})
    written = json.loads((tmp_path / "r" / "jax_execution_results.json").read_text())
    assert written["metadata"]["machine"]["cpus"] == machine.cpus and machine.cpu_model
