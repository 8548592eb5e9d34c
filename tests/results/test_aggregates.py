"""The seed's aggregate fields, defined per script and summarised honestly (crafted samples, so
every expected figure is exact)."""

from __future__ import annotations

import math

import pytest

from jaxrun.judge.benchmark_runs import (
    benchmarking_section,
    script_benchmark,
    warm_summary,
)
from jaxrun.results.batch_summary import performance_summary
from jaxrun.results.models import RunSample, ScriptResult, WarmCall


def _result(name: str, walls: list[float], warmups: list[float] = ()) -> ScriptResult:  # type: ignore[assignment]
    base = ScriptResult(script_name=name, script_path=f"/{name}.py", success=True, device_requested="cpu",
                        device_used="cpu", execution_time=walls[-1], started_at="t", finished_at="t")
    samples = [RunSample(index=i + 1, warmup=False, success=True, wall_time=w) for i, w in enumerate(walls)]
    warm = [RunSample(index=i + 1, warmup=True, success=True, wall_time=w) for i, w in enumerate(warmups)]
    bench = script_benchmark(base, samples, warm, len(walls), len(warm), None)
    return base.model_copy(update={"benchmark": bench})


def test_the_spread_of_a_batch_is_not_the_difference_between_its_scripts() -> None:
    fast = _result("fast", [0.099, 0.100, 0.101])  # 1% CV
    slow = _result("slow", [9.9, 10.0, 10.1])  # 1% CV
    section = benchmarking_section([fast.benchmark, slow.benchmark], 3, 0, ["cpu"])  # type: ignore[list-item]
    assert section.mean_execution_time == pytest.approx(0.100 + 10.0)  # one pass over both scripts
    assert section.std_execution_time == pytest.approx(math.sqrt(0.001 ** 2 + 0.1 ** 2))  # not 5.2 s
    assert section.performance_stability == "stable"


def test_the_total_time_counts_every_run() -> None:
    bench = _result("b", [1.0, 1.5, 2.0], warmups=[3.0])
    once = ScriptResult(script_name="o", script_path="/o.py", success=True, device_requested="cpu",
                        execution_time=0.5, started_at="t", finished_at="t")
    summary = performance_summary([bench, once])
    assert summary.total_execution_time == pytest.approx(1.0 + 1.5 + 2.0 + 3.0 + 0.5)  # not 2.0 + 0.5


def test_warm_mode_warns_when_steady_calls_compile() -> None:
    calls = [WarmCall(index=1, seconds=0.5, compile_time=0.4), WarmCall(index=2, seconds=0.01),
             WarmCall(index=3, seconds=0.3, compile_time=0.25), WarmCall(index=4, seconds=0.01)]
    summary = warm_summary("main", calls)
    assert summary.warnings == [
        "1 of 3 steady calls of main() compiled (0.25 s of JIT work): they are not steady; "
        "look for arguments that change shape or dtype between calls"
    ]
    assert warm_summary("main", [calls[0], calls[1], calls[3]]).warnings == []
