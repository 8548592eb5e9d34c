"""Judging NEW against BASE pair by pair (``jaxrun ab``): a pure module (numpy + scipy), no I/O.

``jaxrun ab`` runs each script on both sides alternately (B N, N B, B N, ...), so drift of the
machine (a background job, thermal throttling, a noisy neighbour) hits both runs of a pair alike.
Two independent samples (``jaxrun compare``, :func:`jaxrun.judge.stats.verdict`) mix that drift into
their spread and lose a steady 10% change in it; the per-pair ratios cancel it. Choices, and why:

* each pair gives ``d = log(new / base)`` (lower is better, memory too); a pair with a side
  missing (None, NaN) or one side 0 or below has no ratio and is left out, with a note; a pair
  with 0 on both sides (no compiles on either) is an equal pair, ``d = 0``;
* the estimate is ``exp(median of d)``, the median pair's ratio: robust to a pair that a burst hit
  on one side only (a mean of the logs follows it), and a median, like compare's ratio of medians;
* its 95% CI is the distribution-free CI of the median of ``d`` from order statistics
  (:func:`jaxrun.judge.stats.median_ci`): exact, deterministic, no assumption on the shape of ``d``;
  with fewer than 6 pairs it is [min, max], which covers less than 95%;
* the p-value is the two-sided Wilcoxon signed-rank test of ``d`` (zeros dropped, Wilcoxon's
  way, ties given mid-ranks), exact: counted over every one of the 2^n sign patterns by dynamic
  programming over doubled ranks (scipy's exact method assumes no ties, and above 13 pairs with
  ties scipy uses its normal approximation; tied ratios are common for memory in MiB); beyond
  ``EXACT_MAX_PAIRS`` pairs scipy's normal approximation. All differences 0: p = 1;
* the smallest two-sided p the exact test can give with n pairs is 2 / 2^n (every pair the same
  way), so below :func:`pairs_needed` pairs (6 at alpha 0.05, 8 at 0.01) the verdict is "too few
  runs to judge", never "no significant change".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from jaxrun.config.options import VerdictOptions
from jaxrun.core.formatting import plural
from jaxrun.judge import stats
from jaxrun.judge.stats import min_signed_rank_p as min_p_value
from jaxrun.judge.stats import pairs_needed
from jaxrun.judge.verdicts import gated_comparison, metrics_for
from jaxrun.results.comparisons import TOO_FEW
from jaxrun.results.models import PhaseComparison, ScriptComparison

EXACT_MAX_PAIRS = 1000
# The test signed_rank_p computes, as the help of the commands that judge with it names it
# (interfaces/cli/flags.py: judged_by).
TEST_NAME = "Wilcoxon signed-rank test"


def signed_rank_p(differences: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value of ``differences`` (zeros dropped, ties mid-ranked);
    1.0 when every difference is 0, None when there are none."""
    from scipy.stats import rankdata, wilcoxon

    d = np.asarray(differences, dtype=float)
    if d.size == 0:
        return None
    d = d[d != 0]
    n = d.size
    if n == 0:
        return 1.0  # every pair equal: no evidence of any difference
    if n > EXACT_MAX_PAIRS:
        return float(wilcoxon(d, zero_method="wilcox", method="asymptotic").pvalue)
    doubled = np.rint(2 * rankdata(np.abs(d))).astype(np.int64)  # mid-ranks made integral
    top = int(doubled.sum())
    # prob[s]: the probability, under random signs, that the positive ranks sum (doubled) to s.
    prob = np.zeros(top + 1)
    prob[0] = 1.0
    for rank in doubled:
        shifted = np.zeros_like(prob)
        shifted[rank:] = prob[: top + 1 - rank]
        prob = 0.5 * (prob + shifted)
    centre = top / 2
    observed = abs(int(doubled[d > 0].sum()) - centre)
    sums = np.arange(top + 1)
    return float(min(1.0, prob[np.abs(sums - centre) >= observed - 1e-9].sum()))


# The power the detectable change is worked out for, and the signed-rank test's efficiency relative
# to the t-test on normal data (3 / pi). The exact test is discrete, so at few pairs it finds that
# change less often: 0.67 of the time at 8 pairs, 0.77 at 10-20, 0.82 at 40 (normal log ratios,
# 400 draws each).
POWER = 0.8
_EFFICIENCY = 3 / math.pi


def detectable_change(differences: Sequence[float], alpha: float, min_effect: float) -> float | None:
    """The smallest relative change that pairs with these log ratios' spread find most of the time
    at ``alpha``: a shift of (t(1 - alpha / 2) + t(POWER)) sd / sqrt(n * 3 / pi) of the logs (t with
    n - 1 degrees of freedom, the sd from their median absolute deviation, robust to a pair a burst
    hit), never below ``min_effect`` (a smaller change is never called one); None when no outcome
    of the test with this many pairs reaches ``alpha``."""
    from scipy.stats import t

    d = np.asarray(differences, dtype=float)
    n = d.size
    if n < 2 or min_p_value(n) >= alpha:
        return None
    spread = 1.4826 * float(np.median(np.abs(d - np.median(d))))
    shift = (float(t.ppf(1 - alpha / 2, n - 1)) + float(t.ppf(POWER, n - 1))) * spread / math.sqrt(n * _EFFICIENCY)
    return max(math.exp(shift) - 1.0, min_effect)


def _pairs(base: Sequence[float | None], new: Sequence[float | None]) -> tuple[list[float], list[float], int]:
    """The pairs with a ratio (``base``, ``new`` figures) and how many were left out."""
    kept_base, kept_new, dropped = [], [], 0
    for b, n in zip(base, new):
        measured = b is not None and n is not None and math.isfinite(b) and math.isfinite(n)
        if not measured or ((b <= 0 or n <= 0) and not (b == 0 and n == 0)):  # type: ignore[operator]
            dropped += 1
        else:
            kept_base.append(float(b))
            kept_new.append(float(n))
    return kept_base, kept_new, dropped


def judge_paired_phase(
    metric: str, base: Sequence[float | None], new: Sequence[float | None], *, alpha: float, min_effect: float,
) -> PhaseComparison:
    """One metric judged pair by pair: ``base[i]`` and ``new[i]`` are pair i's figures (lower is
    better). "slower" needs p < alpha and a ratio >= 1 + min_effect, "faster" p < alpha and a ratio
    <= 1 - min_effect; "too few runs to judge" when no outcome of the test with this many pairs
    could reach p < alpha; "not comparable" with fewer than 2 pairs; else "no significant change".
    """
    if len(base) != len(new):
        raise ValueError(f"{metric}: {plural(len(base), 'base figure')} against {plural(len(new), 'new one')}; "
                         "pair i is base[i] and new[i], give as many of each")
    a, b, dropped = _pairs(base, new)
    n = len(a)
    notes: list[str] = []
    if dropped:
        notes.append(f"{dropped} of {plural(len(base), 'pair')} left out (a side not measured, or 0 on one side only)")
    d = np.array([0.0 if x == y else math.log(y / x) for x, y in zip(a, b)])
    ratio = low = high = p = None
    if n:
        ratio = float(math.exp(np.median(d)))
    if n >= 2:
        ci_low, ci_high, _ = stats.median_ci(d)
        low, high = float(math.exp(ci_low)), float(math.exp(ci_high))  # type: ignore[arg-type]
        p = signed_rank_p(d)
    if n < 2:
        verdict = "not comparable"
        notes.append(f"{n} pair{'s' if n != 1 else ''} with a ratio: a test needs at least 2")
    elif min_p_value(n) >= alpha:
        verdict = TOO_FEW
        notes.append(f"with {plural(n, 'pair')} no test can reach p < {alpha:g}: at least {pairs_needed(alpha)} pairs")
    elif p is not None and p < alpha and ratio is not None and ratio >= 1 + min_effect:
        verdict = "slower"
    elif p is not None and p < alpha and ratio is not None and ratio <= 1 - min_effect:
        verdict = "faster"
    else:
        verdict = "no significant change"
    if n and max(a) == 0 and max(b) == 0:
        notes.append(f"{metric} is 0 in every pair on both sides")
    return PhaseComparison(
        metric=metric, base_n=n, new_n=n,
        base_median=float(np.median(a)) if a else None, new_median=float(np.median(b)) if b else None,
        ratio=ratio, ratio_ci_low=low, ratio_ci_high=high, p_value=p, verdict=verdict,  # type: ignore[arg-type]
        note="; ".join(notes) or None, pairs=n, detectable=detectable_change(d, alpha, min_effect),
    )


def judge_paired_script(
    name: str, device: str | None, base: Mapping[str, Sequence[float | None]],
    new: Mapping[str, Sequence[float | None]], options: VerdictOptions | None = None, *, scripts: int = 1,
) -> ScriptComparison:
    """Judge every phase of one script pair by pair (``base[m][i]``, ``new[m][i]``: pair i's
    figures of metric m; a metric on one side only is unmeasured on the other) and gate them as
    :func:`jaxrun.judge.verdicts.judge_script` does: run and compile time by default (wall time when
    neither was measured on both sides), a named metric alone. ``scripts``: how many are judged at
    once (corrected together, verdicts.corrected): each phase's detectable change is worked out at
    the bar its gate phases then face, alpha over the scripts and the gate's phases."""
    options = options if options is not None else VerdictOptions()
    judged, _ = metrics_for(options.metric)
    phases = {}
    for m in judged:
        if m not in base and m not in new:
            continue
        a = list(base.get(m, ()))
        b = list(new.get(m, ()))
        a = a if m in base else [None] * len(b)
        b = b if m in new else [None] * len(a)
        phases[m] = judge_paired_phase(m, a, b, alpha=options.alpha, min_effect=options.min_effect)
    judged_script = gated_comparison(name, device, phases, options.metric)
    family = scripts * len(judged_script.gate) if scripts > 1 and options.correction != "none" else 1
    if family > 1:  # what each phase could have seen at the bar of many scripts at once
        for m in judged_script.phases:
            a, b, _ = _pairs(list(base.get(m, ())), list(new.get(m, ()))) if m in base and m in new else ([], [], 0)
            d = [0.0 if x == y else math.log(y / x) for x, y in zip(a, b)]
            judged_script.phases[m] = judged_script.phases[m].model_copy(update={
                "detectable": detectable_change(d, options.alpha / family, options.min_effect)})
    return judged_script
