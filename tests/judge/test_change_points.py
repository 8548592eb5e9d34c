"""Change points (judge/change_points.py): the cut is E-divisive's by its definition, the test is
scipy's, known steps are found where they are with their size, and noise, a slow run or a burst
of them are no change. benchmarks/bench_changes.py measures precision and recall at scale."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from jaxrun.judge import change_points as cp
from jaxrun.judge.change_points import change_points


def _q_hat(part: np.ndarray, cut: int) -> float:
    """Matteson and James's Q-hat (exponent 1) of ``part`` cut at ``cut``, written as defined."""
    x, y = part[:cut], part[cut:]
    n1, n2 = len(x), len(y)
    between = sum(abs(a - b) for a in x for b in y) * 2 / (n1 * n2)
    within_x = sum(abs(a - b) for a, b in itertools.combinations(x, 2)) / (n1 * (n1 - 1) / 2)
    within_y = sum(abs(a - b) for a, b in itertools.combinations(y, 2)) / (n2 * (n2 - 1) / 2)
    return n1 * n2 / (n1 + n2) * (between - within_x - within_y)


@pytest.mark.parametrize("seed", range(12))
def test_the_cut_is_where_the_energy_statistic_is_largest(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 40))
    part = rng.normal(size=n) + (np.arange(n) >= rng.integers(1, n))
    cuts = range(3, n - 3 + 1)
    best = max(cuts, key=lambda c: (round(_q_hat(part, c), 9), -c))
    assert cp._best_cut(part, 3) == best


def test_the_test_is_students_and_the_interval_welchs() -> None:
    rng = np.random.default_rng(1)
    left, right = rng.normal(100, 2, 40), rng.normal(103, 3, 25)
    assert cp._p_value(left, right) == pytest.approx(stats.ttest_ind(left, right, equal_var=True).pvalue, rel=1e-9)
    series = np.concatenate([left, right])
    found = cp._described(series, (0, 40, 65), 0.95, 3)
    welch = stats.ttest_ind(right, left, equal_var=False).confidence_interval(0.95)
    assert found.change_low == pytest.approx(welch.low / left.mean(), rel=1e-9)
    assert found.change_high == pytest.approx(welch.high / left.mean(), rel=1e-9)
    assert found.change == pytest.approx(right.mean() / left.mean() - 1)


def test_a_step_is_found_where_it_is_with_its_size() -> None:
    rng = np.random.default_rng(7)
    series = np.concatenate([rng.normal(100, 1, 60), rng.normal(115, 1.15, 40)])  # 15 % slower from point 60
    (found,) = change_points(series)
    assert found.index == 60 and (found.points_before, found.points_after) == (60, 40)
    assert found.change_low < 0.15 < found.change_high and found.change == pytest.approx(0.15, abs=0.01)
    assert found.before == pytest.approx(series[:60].mean()) and found.after == pytest.approx(series[60:].mean())
    # Student's t-test of the two sides, times the 95 cuts of 100 points that leave 3 on each side.
    assert found.p_value == pytest.approx(stats.ttest_ind(series[:60], series[60:]).pvalue * 95, rel=1e-9)
    assert found.p_value < 1e-30


def test_three_steps_and_a_step_back_are_each_found() -> None:
    rng = np.random.default_rng(3)
    levels = [(100, 50), (110, 40), (95, 60), (100, 50)]
    series = np.concatenate([rng.normal(level, level * 0.01, n) for level, n in levels])
    assert [c.index for c in change_points(series)] == [50, 90, 150]


@pytest.mark.parametrize("seed", range(20))
def test_noise_and_single_slow_runs_are_no_change(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    series = rng.normal(100, 2, 200)
    assert change_points(series) == []
    spiky = series.copy()
    spiky[rng.choice(200, size=4, replace=False)] *= 1.5  # four runs 50 % slower, apart
    assert [c for c in change_points(spiky) if min(c.points_before, c.points_after) > 10] == []


def test_a_slow_run_is_never_a_segment_of_its_own() -> None:
    series = np.full(60, 100.0) + np.tile([0.1, -0.1], 30)
    series[30] = 300.0
    assert change_points(series) == []
    assert all(min(c.points_before, c.points_after) >= 3 for c in change_points(np.r_[series, np.full(5, 200.0)]))


def test_the_same_series_gives_the_same_answer() -> None:
    rng = np.random.default_rng(11)
    series = list(np.concatenate([rng.normal(50, 1, 300), rng.normal(52.5, 1, 300), rng.normal(50, 1, 400)]))
    first = change_points(series)
    assert len(first) == 2 and abs(first[0].index - 300) <= 2 and abs(first[1].index - 600) <= 2
    assert change_points(series) == first and change_points(tuple(series)) == first


def test_short_and_bad_series() -> None:
    assert change_points([]) == [] and change_points([1.0, 2.0, 3.0, 4.0, 5.0]) == []
    assert change_points([1.0] * 20) == []  # no variance, no change
    with pytest.raises(ValueError, match="finite numbers"):
        change_points([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError, match="window"):
        change_points([1.0] * 20, window=4, min_segment=3)


def test_the_noise_is_the_points_spread_and_a_step_does_not_count() -> None:
    rng = np.random.default_rng(7)
    flat = rng.normal(2.0, 2.0 * 0.03, 400)  # 3 % noise around 2 s
    stepped = flat.copy()
    stepped[200:] *= 1.5  # one step of 50 %: one successive difference of 400
    assert abs(cp.noise(flat) - 0.03) < 0.004
    assert abs(cp.noise(stepped) - cp.noise(flat) * np.median(flat) / np.median(stepped)) < 0.004
    assert cp.noise([1.0, 1.0]) is None and cp.noise([0.0, 0.0, 0.0]) is None


def test_the_smallest_step_is_found_about_four_times_in_five() -> None:
    """At the size it names, a step in the middle is found in 70-97 % of series (its promise is
    "about 4 times in 5"); at half that size in less than half of them."""
    rng = np.random.default_rng(3)
    for points in (12, 30):
        step = cp.smallest_step(points, 0.02)
        found = {}
        for size in (step, step / 2):
            hits = 0
            for _ in range(150):
                x = rng.normal(1.0, 0.02, points)
                x[points // 2:] *= 1 + size
                hits += any(abs(c.index - points // 2) <= 1 for c in change_points(x))
            found[size] = hits / 150
        assert 0.7 <= found[step] <= 0.97 and found[step / 2] < 0.5, (points, step, found)
    assert cp.smallest_step(5, 0.02) is None and cp.smallest_step(12, None) is None
    assert cp.smallest_step(12, 0.02) > cp.smallest_step(30, 0.02) > cp.smallest_step(30, 0.01)
