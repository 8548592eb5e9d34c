"""Paired verdicts (jaxrun.judge.paired, for ``jaxrun ab``): crafted figures, no processes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import rankdata, wilcoxon

from jaxrun.config.options import VerdictOptions
from jaxrun.judge import stats
from jaxrun.judge.paired import (
    judge_paired_phase,
    judge_paired_script,
    min_p_value,
    pairs_needed,
    signed_rank_p,
)
from jaxrun.judge.verdicts import judge_script

ALPHA, EFFECT = 0.05, 0.05


def drifting(pairs: int, slowdown: float, *, seed: int = 0, noise: float = 0.02) -> tuple[list[float], list[float]]:
    """Pair i's figures: a drift common to both sides of the pair (1 -> 2, the machine slowing
    down), the change on the new side, and per-run noise on each side."""
    rng = np.random.default_rng(seed)
    drift = np.linspace(1.0, 2.0, pairs)
    base = drift * np.exp(rng.normal(0, noise, pairs))
    new = drift * slowdown * np.exp(rng.normal(0, noise, pairs))
    return [float(x) for x in base], [float(x) for x in new]


def judge(base, new, metric="run_time", **kw):
    return judge_paired_phase(metric, base, new, alpha=kw.get("alpha", ALPHA), min_effect=kw.get("min_effect", EFFECT))


def test_pairing_finds_a_slowdown_that_drift_hides_from_two_samples() -> None:
    base, new = drifting(10, 1.10)
    phase = judge(base, new)
    assert phase.verdict == "slower"
    assert phase.pairs == 10 and phase.base_n == phase.new_n == 10
    assert phase.ratio is not None and 1.07 < phase.ratio < 1.13
    assert phase.ratio_ci_low is not None and phase.ratio_ci_high is not None
    assert 1.0 < phase.ratio_ci_low <= phase.ratio <= phase.ratio_ci_high
    assert phase.p_value == pytest.approx(2 / 2 ** 10)  # every pair slower
    assert phase.base_median == pytest.approx(float(np.median(base)))
    assert phase.new_median == pytest.approx(float(np.median(new)))
    # The same figures as two independent samples (jaxrun compare's test): the drift drowns it.
    assert stats.verdict(base, new, alpha=ALPHA, min_effect=EFFECT)[0] == "no significant change"


def test_a_speed_up_under_drift_is_faster() -> None:
    base, new = drifting(10, 0.85, seed=3)
    assert judge(base, new).verdict == "faster"


@pytest.mark.parametrize("seed", range(5))
def test_a_against_a_with_drift_is_no_change(seed: int) -> None:
    base, new = drifting(12, 1.0, seed=seed)
    phase = judge(base, new)
    assert phase.verdict == "no significant change"
    assert phase.ratio is not None and abs(phase.ratio - 1) < 0.03


def test_a_small_significant_change_below_min_effect_is_no_change() -> None:
    base, new = drifting(12, 1.02, noise=0.002)
    phase = judge(base, new)
    assert phase.p_value is not None and phase.p_value < ALPHA
    assert phase.verdict == "no significant change"


def test_too_few_pairs() -> None:
    base, new = drifting(3, 1.5)
    phase = judge(base, new)
    assert phase.verdict == "too few runs to judge"
    assert phase.note == "with 3 pairs no test can reach p < 0.05: at least 6 pairs"
    assert phase.p_value == pytest.approx(0.25)
    assert pairs_needed(0.05) == 6 and pairs_needed(0.01) == 8
    assert min_p_value(6) == pytest.approx(0.03125) and min_p_value(5) == pytest.approx(0.0625)
    five = judge(*drifting(5, 1.5))
    assert five.verdict == "too few runs to judge"
    assert judge(*drifting(6, 1.5)).verdict == "slower"
    with pytest.raises(ValueError, match="alpha"):
        pairs_needed(0)


def test_one_pair_and_none() -> None:
    single = judge([1.0], [1.2])
    assert single.verdict == "not comparable" and single.p_value is None
    assert single.ratio == pytest.approx(1.2) and single.ratio_ci_low is None
    assert single.note == "1 pair with a ratio: a test needs at least 2"
    empty = judge([], [])
    assert empty.verdict == "not comparable" and empty.ratio is None and empty.base_median is None
    assert empty.pairs == 0


def test_missing_and_zero_sides_are_left_out() -> None:
    base, new = drifting(8, 1.10)
    phase = judge(base + [None, 1.0, 0.0, float("nan")], new + [1.0, None, 1.0, 1.0])
    assert phase.pairs == 8 and phase.verdict == "slower"
    assert phase.note == "4 of 12 pairs left out (a side not measured, or 0 on one side only)"
    with pytest.raises(ValueError, match="run_time: 2 base figures against 1 new"):
        judge([1.0, 1.0], [1.0])


def test_zero_on_both_sides_is_an_equal_pair() -> None:
    phase = judge([0.0] * 8, [0.0] * 8, metric="compile_time")
    assert phase.verdict == "no significant change" and phase.p_value == 1.0 and phase.ratio == 1.0
    assert phase.note == "compile_time is 0 in every pair on both sides"


def test_memory_with_ties() -> None:
    # Peak memory in MiB: most pairs equal, the rest 20% larger on the new side.
    base = [100.0] * 10
    new = [100.0, 100.0, 120.0, 120.0, 120.0, 120.0, 120.0, 120.0, 120.0, 120.0]
    phase = judge(base, new, metric="memory_peak")
    assert phase.ratio == pytest.approx(1.2)
    assert phase.p_value == pytest.approx(2 / 2 ** 8)  # two zeros dropped, 8 tied ranks all positive
    assert phase.verdict == "slower"
    same = judge(base, list(base), metric="memory_peak")
    assert same.verdict == "no significant change" and same.p_value == 1.0


def _brute_force_p(d: np.ndarray) -> float:
    d = d[d != 0]
    ranks = rankdata(np.abs(d))
    centre = ranks.sum() / 2
    observed = abs(ranks[d > 0].sum() - centre)
    hits = sum(abs(ranks[np.array(signs, bool)].sum() - centre) >= observed - 1e-9
               for signs in itertools.product([0, 1], repeat=d.size))
    return hits / 2 ** d.size


def test_signed_rank_p_is_exact() -> None:
    rng = np.random.default_rng(7)
    for n in (2, 5, 9, 20, 40):
        d = rng.normal(0.05, 0.1, n)
        assert signed_rank_p(d) == pytest.approx(wilcoxon(d, method="exact").pvalue)
    tied = np.array([0.1, 0.1, 0.2, -0.1, 0.3, 0.3, 0.4, 0.2, 0.0, -0.2, 0.1])
    assert signed_rank_p(tied) == pytest.approx(_brute_force_p(tied))
    assert signed_rank_p([0.0, 0.0]) == 1.0 and signed_rank_p([]) is None


def test_the_paired_gate_follows_judge_script() -> None:
    base_run, new_run = drifting(10, 1.10)
    same_b, same_n = drifting(10, 1.0, seed=4)
    base = {"run_time": base_run, "compile_time": same_b, "wall_time": same_b, "memory_peak": [50.0] * 10}
    new = {"run_time": new_run, "compile_time": same_n, "wall_time": same_n, "memory_peak": [50.0] * 10}
    row = judge_paired_script("m", "cpu", base, new)
    assert row.verdict == "slower" and row.gate == ["run_time", "compile_time"]
    assert row.slower == ["run_time"] and set(row.phases) == {"wall_time", "compile_time", "run_time", "memory_peak"}
    assert all(p.pairs == 10 for p in row.phases.values())
    # A named metric is the whole gate.
    alone = judge_paired_script("m", "cpu", base, new, VerdictOptions(metric="wall_time"))
    assert alone.gate == ["wall_time"] and alone.verdict == "no significant change"
    assert alone.slower == ["run_time"]
    # Neither gate phase on both sides: wall_time, with judge_script's note.
    old = {"wall_time": base_run}
    fallback = judge_paired_script("m", "cpu", old, {"wall_time": new_run})
    unpaired = judge_script("m", "cpu", old, {"wall_time": new_run})
    assert fallback.gate == unpaired.gate == ["wall_time"] and fallback.note == unpaired.note
    assert fallback.verdict == "slower"
    # A gate phase on one side only is left out of the gate, as judge_script does.
    one_side = judge_paired_script("m", "cpu", {"run_time": base_run, "compile_time": same_b}, {"run_time": new_run})
    assert one_side.gate == ["run_time"] and one_side.phases["compile_time"].verdict == "not comparable"
    # Too few pairs in the gate: the script is too few runs to judge.
    few = judge_paired_script("m", "cpu", {"run_time": base_run[:3]}, {"run_time": new_run[:3]})
    assert few.verdict == "too few runs to judge"


def test_the_description_of_the_fields() -> None:
    from jaxrun.results.models import PhaseComparison

    fields = PhaseComparison.model_fields
    assert "Wilcoxon" in (fields["p_value"].description or "")
    assert "paired" in (fields["ratio"].description or "")
    assert fields["pairs"].default is None
    assert math.isclose(min_p_value(1), 1.0)
