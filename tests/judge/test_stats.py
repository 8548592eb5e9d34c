"""jaxrun.judge.stats against numpy / scipy reference values and independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from jaxrun.judge import stats

# Fixed, realistic timing samples (seconds): skewed, with ties and an odd / even length.
SKEWED = [0.512, 0.498, 0.503, 0.531, 0.501, 0.507, 0.499, 0.544, 0.505, 0.503, 0.518]
EVEN = [1.21, 1.18, 1.25, 1.19, 1.22, 1.20, 1.31, 1.17]


def _rng_lognormal(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(mean=0.0, sigma=0.3, size=n)


# --- describe -----------------------------------------------------------------------------------


@pytest.mark.parametrize("samples", [SKEWED, EVEN, list(_rng_lognormal(7, 25))])
def test_describe_matches_numpy_and_scipy(samples: list[float]) -> None:
    data = np.asarray(samples)
    s = stats.describe(samples)
    assert s.n == len(samples)
    assert s.mean == pytest.approx(np.mean(data))
    assert s.std == pytest.approx(np.std(data, ddof=1))
    assert s.std == pytest.approx(scipy.stats.tstd(data))
    assert s.median == pytest.approx(np.median(data))
    assert s.min == pytest.approx(data.min()) and s.max == pytest.approx(data.max())
    assert s.q1 == pytest.approx(np.percentile(data, 25))
    assert s.q3 == pytest.approx(np.percentile(data, 75))
    assert s.iqr == pytest.approx(scipy.stats.iqr(data))
    assert s.mad == pytest.approx(scipy.stats.median_abs_deviation(data, scale=1.0))
    assert s.cv == pytest.approx(scipy.stats.variation(data, ddof=1))
    assert s.ci_low <= s.median <= s.ci_high


def test_describe_hand_checked_values() -> None:
    s = stats.describe([1.0, 2.0, 3.0, 4.0, 10.0])
    assert (s.mean, s.median, s.q1, s.q3, s.iqr, s.mad) == (4.0, 3.0, 2.0, 4.0, 2.0, 1.0)
    assert s.std == pytest.approx(math.sqrt(12.5))


def test_describe_empty_and_single_sample() -> None:
    empty = stats.describe([])
    assert empty.n == 0 and empty.median is None and empty.warnings == ["no samples"]
    one = stats.describe([0.25])
    assert one.n == 1 and one.median == 0.25 and one.mean == 0.25
    assert one.std is None and one.cv is None  # unknown, never 0
    assert one.ci_low is None and one.ci_high is None and one.ci_coverage is None


# --- median CI ----------------------------------------------------------------------------------


def _coverage(n: int, j: int) -> float:
    """P(x_(j) <= median <= x_(n-j+1)) = sum_{i=j}^{n-j} C(n, i) / 2^n, computed exactly."""
    return sum(math.comb(n, i) for i in range(j, n - j + 1)) / 2**n


@pytest.mark.parametrize("n", [6, 8, 10, 11, 20, 30, 51])
def test_median_ci_uses_the_widest_order_statistics_reaching_95_percent(n: int) -> None:
    data = np.arange(1, n + 1, dtype=float)  # x_(k) == k, so the bounds are the ranks
    low, high, coverage = stats.median_ci(np.random.default_rng(n).permutation(data))
    j = int(low)
    assert high == n - j + 1
    assert coverage == pytest.approx(_coverage(n, j))
    assert coverage == pytest.approx(1 - 2 * scipy.stats.binom.cdf(j - 1, n, 0.5))
    assert coverage >= 0.95
    assert _coverage(n, j + 1) < 0.95  # the next narrower interval would not be enough


def test_median_ci_textbook_ranks() -> None:
    # Published tables for the distribution-free 95% CI of the median.
    assert stats.median_ci(np.arange(1.0, 21.0))[:2] == (6.0, 15.0)
    assert stats.median_ci(np.arange(1.0, 11.0))[:2] == (2.0, 9.0)


def test_median_ci_with_too_few_samples_gives_min_max_and_true_coverage() -> None:
    low, high, coverage = stats.median_ci([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (low, high) == (1.0, 5.0)
    assert coverage == pytest.approx(1 - 2 / 32)
    assert stats.median_ci([1.0]) == (None, None, None)


def test_median_ci_coverage_monte_carlo_lognormal() -> None:
    rng = np.random.default_rng(12345)
    true_median = 1.0  # median of lognormal(0, sigma) is exp(0)
    trials, hits = 2000, 0
    for _ in range(trials):
        low, high, _ = stats.median_ci(rng.lognormal(0.0, 0.5, size=20))
        hits += low <= true_median <= high
    assert hits / trials >= 0.93


# --- outliers -----------------------------------------------------------------------------------


def test_planted_outlier_is_flagged_both_ways() -> None:
    data = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 1.70, 0.99, 1.00]
    s = stats.describe(data)
    assert s.outliers_tukey == [7]
    assert s.outliers_modified_z == [7]
    assert any("outliers" in w and "run 8" in w for w in s.warnings)  # 1-based run numbers
    # Independent check of both rules on the same data.
    q1, q3 = np.percentile(data, [25, 75])
    assert [i for i, x in enumerate(data) if x > q3 + 1.5 * (q3 - q1) or x < q1 - 1.5 * (q3 - q1)] == [7]
    z = 0.6745 * (np.asarray(data) - np.median(data)) / scipy.stats.median_abs_deviation(data)
    assert list(np.flatnonzero(np.abs(z) > 3.5)) == [7]


def test_low_outlier_is_flagged_too() -> None:
    s = stats.describe([1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 0.40, 1.01])
    assert s.outliers_tukey == [6] and s.outliers_modified_z == [6]


NORMAL_QUANTILES = list(1.0 + 0.01 * scipy.stats.norm.ppf((np.arange(20) + 0.5) / 20))  # ideal N(1, 0.01)


@pytest.mark.parametrize("data", [list(np.linspace(1.0, 1.1, 20)), NORMAL_QUANTILES, [2.0] * 6])
def test_no_outliers_on_clean_data(data: list[float]) -> None:
    s = stats.describe(data)
    assert s.outliers_tukey == [] and s.outliers_modified_z == []
    assert not any("outliers" in w for w in s.warnings)


# --- warnings -----------------------------------------------------------------------------------


def _has(warnings: list[str], text: str) -> bool:
    return any(text in w for w in warnings)


STEADY = [1.000, 1.004, 0.998, 1.002, 1.001, 0.999, 1.003, 0.997, 1.000, 1.002]


def test_clean_samples_have_no_warnings() -> None:
    assert stats.describe(STEADY).warnings == []


def test_first_run_much_slower_warns_about_warmups() -> None:
    s = stats.describe([1.60, *STEADY[1:]])
    assert _has(s.warnings, "first run was much slower") and _has(s.warnings, "warm-up")
    # A first run inside the spread of the others, or a slow run later on, is not "first run slow".
    assert not _has(stats.describe([1.003, *STEADY[1:]]).warnings, "first run")
    assert not _has(stats.describe([*STEADY[1:], 1.60]).warnings, "first run")


def test_high_cv_warns_noisy_machine() -> None:
    noisy = [1.0, 1.12, 0.91, 1.08, 0.95, 1.15, 0.88, 1.05, 0.93, 1.10]
    assert np.std(noisy, ddof=1) / np.mean(noisy) > 0.05
    s = stats.describe(noisy)
    assert _has(s.warnings, "coefficient of variation") and _has(s.warnings, "noisy")
    just_below = [1.0, 1.04, 0.96, 1.03, 0.97, 1.02, 0.98, 1.0, 1.01, 0.99]
    assert np.std(just_below, ddof=1) / np.mean(just_below) < 0.05
    assert not _has(stats.describe(just_below).warnings, "coefficient of variation")


def test_sub_millisecond_median_warns() -> None:
    fast = [x * 4e-4 for x in STEADY]
    assert _has(stats.describe(fast).warnings, "below 1 ms")
    assert not _has(stats.describe([x * 2e-3 for x in STEADY]).warnings, "below 1 ms")
    # The timer warning is about seconds: a memory metric in MiB is not "below 1 ms".
    assert not _has(stats.describe(fast, unit="MiB").warnings, "below 1 ms")
    # 0 s means "none of it" (a script without JIT has compile_time 0), not a too-fast timer.
    assert not _has(stats.describe([0.0] * 6).warnings, "below 1 ms")


def test_too_few_samples_for_the_ci_warns() -> None:
    assert _has(stats.describe(STEADY[:5]).warnings, "too few")
    assert not _has(stats.describe(STEADY[:6]).warnings, "too few")  # 6 samples: [min, max] is 96.9%


# --- ratio of medians, Mann-Whitney, geometric mean ----------------------------------------------

BASE = list(np.random.default_rng(1).normal(1.0, 0.01, 20))
SLOWER = list(1.3 * np.random.default_rng(2).normal(1.0, 0.01, 20))


def test_ratio_of_medians_ci_is_deterministic_and_covers_the_true_ratio() -> None:
    first = stats.ratio_of_medians_ci(SLOWER, BASE, seed=0)
    assert first == stats.ratio_of_medians_ci(SLOWER, BASE, seed=0)
    ratio, low, high = first
    assert ratio == pytest.approx(np.median(SLOWER) / np.median(BASE))
    assert low < ratio < high
    assert low <= 1.3 <= high
    assert low > 1.2  # clearly separated from "no change"
    assert stats.ratio_of_medians_ci(SLOWER, BASE, seed=1) != first  # the seed is really used


def test_ratio_of_medians_ci_degenerate_inputs() -> None:
    assert stats.ratio_of_medians_ci([], BASE) == (None, None, None)
    assert stats.ratio_of_medians_ci(BASE, [0.0, 0.0]) == (None, None, None)
    assert stats.ratio_of_medians_ci([2.0], [1.0]) == (2.0, None, None)


@pytest.mark.parametrize(
    "a, b",
    [
        (BASE[:8], SLOWER[:8]),  # exact distribution (small, no ties)
        (BASE, SLOWER[:12]),  # unequal sizes
        ([1.0, 1.0, 1.1, 1.2, 1.2, 1.3], [1.1, 1.2, 1.2, 1.4, 1.5, 1.5, 1.6]),  # ties
        (BASE[:10], BASE[10:]),  # same distribution
    ],
)
def test_mann_whitney_p_equals_scipy(a: list[float], b: list[float]) -> None:
    if len(set(a) | set(b)) == len(a) + len(b):
        # Without ties scipy's exact method is the reference (its default switches to the normal
        # approximation above 8 a side; jaxrun stays exact for samples this small).
        expected = scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
    else:
        expected = _enumerated_p(a, b)  # with ties, scipy has no exact method: enumerate the splits
    assert stats.mann_whitney_p(a, b) == pytest.approx(expected)


def test_large_samples_use_the_normal_approximation() -> None:
    rng = np.random.default_rng(3)
    a, b = list(rng.normal(size=300)), list(rng.normal(0.2, 1.0, size=300))  # past EXACT_WORK_MAX
    expected = scipy.stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
    assert stats.mann_whitney_p(a, b) == pytest.approx(expected)


def test_the_exact_test_counts_its_real_work_and_takes_the_smaller_sample() -> None:
    """A run's 30 samples against a history's hundreds took the exact path at ~1 s a test (its
    bound counted n1 * N * (N + 1), not the table it fills N times), and `jaxrun history` of 40
    runs a minute. The exact p is the same whichever sample is counted; past the real budget the
    normal approximation is used, and agrees with the exact p there."""
    rng = np.random.default_rng(5)
    small = list(np.round(rng.normal(1.0, 0.1, size=9), 2))  # rounded: ties
    large = list(np.round(rng.normal(1.08, 0.1, size=23), 2))
    assert stats._exact_rank_sum_p(np.array(small), np.array(large)) == pytest.approx(
        stats._exact_rank_sum_p(np.array(large), np.array(small)))
    assert stats.exact_work(30, 800) > stats.EXACT_WORK_MAX >= stats.exact_work(40, 40)
    a, b = rng.normal(1.0, 0.1, size=30), rng.normal(1.04, 0.1, size=70)
    assert stats.exact_work(30, 70) > stats.EXACT_WORK_MAX  # just past it: approximated
    assert stats.mann_whitney_p(list(a), list(b)) == pytest.approx(stats._exact_rank_sum_p(a, b), rel=0.05, abs=0.002)


def test_mann_whitney_p_of_identical_constant_samples_is_one() -> None:
    assert stats.mann_whitney_p([0.5] * 5, [0.5] * 7) == 1.0
    assert stats.mann_whitney_p([], [1.0]) is None


def test_geometric_mean() -> None:
    assert stats.geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    assert stats.geometric_mean([1.3, 0.8, 1.05]) == pytest.approx(scipy.stats.gmean([1.3, 0.8, 1.05]))
    assert stats.geometric_mean([2.0, None, 0.0, 8.0]) == pytest.approx(4.0)  # type: ignore[list-item]
    assert stats.geometric_mean([]) is None


# --- verdict ------------------------------------------------------------------------------------


def test_verdict_slower() -> None:
    v, ratio, low, high, p = stats.verdict(BASE[:10], SLOWER[:10])
    assert v == "slower" and ratio == pytest.approx(1.3, rel=0.02) and low <= ratio <= high and p < 0.01


def test_verdict_faster() -> None:
    faster = [0.7 * x for x in SLOWER[:10]]
    v, ratio, _, _, p = stats.verdict(BASE[:10], faster)
    assert v == "faster" and ratio < 0.95 and p < 0.01


def test_verdict_no_change() -> None:
    v, ratio, _, _, p = stats.verdict(BASE, list(reversed(BASE)))
    assert v == "no significant change" and ratio == 1.0 and p == pytest.approx(1.0)
    same_distribution = list(np.random.default_rng(99).normal(1.0, 0.01, 20))
    v, _, _, _, p = stats.verdict(BASE, same_distribution)
    assert v == "no significant change" and p > 0.01


def test_verdict_not_comparable() -> None:
    assert stats.verdict([1.0], [1.3])[0] == "not comparable"
    assert stats.verdict([1.0], [1.3])[4] is None  # no test with one sample a side
    assert stats.verdict([], SLOWER)[0] == "not comparable"
    assert stats.verdict(BASE, [])[0] == "not comparable"


def test_verdict_unequal_sample_sizes() -> None:
    v, ratio, _, _, p = stats.verdict(BASE[:5], SLOWER[:12])
    assert v == "slower" and p < 0.01
    assert p == pytest.approx(scipy.stats.mannwhitneyu(BASE[:5], SLOWER[:12]).pvalue)
    assert stats.verdict(SLOWER[:12], BASE[:5])[0] == "faster"


def test_verdict_min_effect_threshold() -> None:
    base = list(np.random.default_rng(5).normal(1.0, 0.001, 15))
    slightly = list(1.02 * np.random.default_rng(6).normal(1.0, 0.001, 15))
    v, ratio, _, _, p = stats.verdict(base, slightly, min_effect=0.05)
    assert p < 0.01 and ratio == pytest.approx(1.02, abs=0.005)
    assert v == "no significant change"  # real, but below the 5% that matters
    assert stats.verdict(base, slightly, min_effect=0.01)[0] == "slower"
    assert stats.verdict(slightly, base, min_effect=0.01)[0] == "faster"


def test_verdict_needs_significance_not_just_a_big_ratio() -> None:
    # 3 vs 3 samples: even complete separation gives p = 0.1, so no verdict at alpha 0.01: too few
    # runs to judge, never "no significant change" (x2.751 [2.717, 2.780] p=0.1 was once printed so).
    v, ratio, _, _, p = stats.verdict([1.0, 1.01, 0.99], [1.5, 1.51, 1.49])
    assert ratio == pytest.approx(1.5) and p == pytest.approx(0.1)
    assert v == "too few runs to judge"
    v, ratio, low, high, p = stats.verdict([1.0, 1.01, 0.99], [2.751, 2.717, 2.780], alpha=0.05)
    assert v == "too few runs to judge" and ratio == pytest.approx(2.751) and p == pytest.approx(0.1)
    # Even identical sides: 3 vs 3 could not have shown a change, so none is claimed.
    assert stats.verdict([1.0, 1.01, 0.99], [1.0, 1.01, 0.99], alpha=0.05)[0] == "too few runs to judge"
    # 4 vs 4 can reach p = 0.029 < 0.05: judged.
    assert stats.verdict([1.0, 1.01, 0.99, 1.02], [2.7, 2.71, 2.72, 2.73], alpha=0.05)[0] == "slower"
    assert stats.verdict([1.0, 1.01, 0.99, 1.02], [1.01, 1.0, 0.99, 1.02], alpha=0.05)[0] == "no significant change"


def test_runs_needed_is_the_smallest_n_each_side_that_can_be_significant() -> None:
    from math import comb

    assert stats.min_p_value(3, 3) == pytest.approx(0.1) and stats.min_p_value(4, 4) == pytest.approx(2 / 70)
    assert stats.runs_needed(0.05) == 4 and stats.runs_needed(0.01) == 5 and stats.runs_needed(0.5) == 2
    for alpha in (0.2, 0.05, 0.01, 0.001):
        n = stats.runs_needed(alpha)
        assert 2 / comb(2 * n, n) < alpha <= 2 / comb(2 * n - 2, n - 1)


def test_outliers_need_five_samples():
    from jaxrun.judge.stats import describe

    # With 3 samples the fences come from 2-3 points: ordinary spread would be called an outlier.
    s = describe([1.0, 1.0, 1.5])
    assert s.outliers_tukey == [] and s.outliers_modified_z == []
    assert not any("outliers" in w for w in s.warnings)
    s5 = describe([1.0, 1.01, 0.99, 1.0, 1.5])
    assert 4 in s5.outliers_tukey


def _enumerated_p(a: list[float], b: list[float]) -> float:
    """The permutation p-value of the rank sum by brute force over every split (the ground truth)."""
    import itertools

    pooled = np.array(a + b, float)
    ranks = scipy.stats.rankdata(pooled)
    n1, centre = len(a), len(a) * (len(pooled) + 1) / 2
    observed = abs(ranks[:n1].sum() - centre)
    splits = list(itertools.combinations(range(len(pooled)), n1))
    hits = sum(abs(ranks[list(s)].sum() - centre) >= observed - 1e-9 for s in splits)
    return hits / len(splits)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1.0, 1.0, 1.0, 1.1, 1.1], [1.3, 1.3, 1.3, 1.4, 1.4]),  # tied, cleanly 30% slower
        ([1, 1, 2, 2, 3, 3], [2, 3, 3, 4, 4, 5]),  # ties across the samples
        ([5, 1, 3], [2, 2, 9, 1]),
        ([0.5] * 4 + [0.6], [0.5, 0.6, 0.6, 0.6, 0.7, 0.7]),
    ],
)
def test_mann_whitney_p_with_ties_is_the_exact_permutation_p(a: list[float], b: list[float]) -> None:
    assert stats.mann_whitney_p(a, b) == pytest.approx(_enumerated_p(list(map(float, a)), list(map(float, b))))


def test_a_clean_tied_regression_at_five_runs_a_side_is_significant() -> None:
    base, new = [1.0, 1.0, 1.0, 1.1, 1.1], [1.3, 1.3, 1.3, 1.4, 1.4]
    # scipy's default (normal approximation, tie-corrected) says p = 0.0097 here.
    assert stats.mann_whitney_p(base, new) == pytest.approx(2 / 252)  # complete separation, ties or not
    verdict, ratio, *_ = stats.verdict(base, new, alpha=0.01, min_effect=0.05)
    assert verdict == "slower" and ratio == pytest.approx(1.3)
