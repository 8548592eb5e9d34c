"""What an A/B verdict could have seen, and many scripts judged at once (judge/paired.py,
judge/verdicts.py): the detectable change is found about as often as it says at its size, and
Holm's correction keeps an A/A of 50 scripts at its stated false-alarm rate where judging each on
its own raises an alarm in most folders. Ground truth: log ratios drawn with a known shift."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jaxrun.config.options import VerdictOptions
from jaxrun.judge.paired import (
    detectable_change,
    judge_paired_phase,
    judge_paired_script,
)
from jaxrun.judge.verdicts import adjusted_p_values, corrected


def test_holm_and_benjamini_hochberg_are_their_definitions() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005 0.01 0.03 0.04 times 4 3 2 1, kept non-decreasing.
    assert adjusted_p_values(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted times 4/1 4/2 4/3 4/4, kept non-increasing from the top.
    assert adjusted_p_values(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjusted_p_values(p, "none") == p and adjusted_p_values([], "holm") == []
    assert adjusted_p_values([0.6, 0.7], "holm") == [1.0, 1.0]


def _pairs(rng: np.random.Generator, shift: float, n: int, spread: float = 0.05) -> tuple[list[float], list[float]]:
    base = [float(x) for x in rng.uniform(0.9, 1.1, n)]
    return base, [b * math.exp(rng.normal(shift, spread)) for b in base]


def test_the_detectable_change_is_found_about_as_often_as_it_says() -> None:
    rng = np.random.default_rng(11)
    for n in (12, 20, 40):
        sizes = [detectable_change(rng.normal(0, 0.05, n), 0.01, 0.0) for _ in range(200)]
        size = float(np.median(sizes))  # what such pairs say, typically
        found = {}
        for at in (size, size / 2):
            hits = 0
            for _ in range(200):
                base, new = _pairs(rng, math.log(1 + at), n)
                hits += judge_paired_phase("run_time", base, new, alpha=0.01, min_effect=0.0).verdict == "slower"
            found[at] = hits / 200
        assert 0.55 <= found[size] <= 0.95 and found[size / 2] < 0.45, (n, size, found)
    assert detectable_change([0.01] * 5, 0.01, 0.05) is None  # 5 pairs can never reach p < 0.01
    assert detectable_change([0.0] * 10, 0.01, 0.05) == 0.05  # no spread: the minimum effect is the floor
    phase = judge_paired_phase("run_time", [1.0] * 10, [1.0] * 10, alpha=0.01, min_effect=0.05)
    assert phase.detectable == 0.05 and phase.verdict == "no significant change"


def test_an_a_a_of_50_scripts_keeps_its_false_alarms_at_alpha_with_holms_correction() -> None:
    rng = np.random.default_rng(5)
    alarms = {"holm": 0, "bh": 0, "none": 0}
    folders = 100
    for _ in range(folders):
        scripts = []
        for i in range(50):
            base, new = _pairs(rng, 0.0, 12)
            compile_base, compile_new = _pairs(rng, 0.0, 12)
            scripts.append(judge_paired_script(f"s{i}", "cpu", {"run_time": base, "compile_time": compile_base},
                                               {"run_time": new, "compile_time": compile_new},
                                               VerdictOptions(alpha=0.05, min_effect=0.0)))
        for method in alarms:
            judged = corrected(scripts, 0.05, method)
            alarms[method] += any(s.verdict in ("slower", "faster") for s in judged)
    # Each script alone: two gate phases at 0.05, 50 scripts: nearly every folder has an alarm.
    assert alarms["none"] > 0.9 * folders
    # Holm: any alarm in at most alpha of the folders (5; 10 allows the binomial slack of 100
    # folders); BH (all null: the same bound).
    assert alarms["holm"] <= 0.10 * folders and alarms["bh"] <= 0.10 * folders, alarms


def test_a_real_change_survives_the_correction_and_the_note_says_what_did_not() -> None:
    rng = np.random.default_rng(9)
    scripts = []
    for i in range(20):
        base, new = _pairs(rng, math.log(1.3) if i == 0 else 0.0, 20, spread=0.02)
        scripts.append(judge_paired_script(f"s{i}", "cpu", {"run_time": base}, {"run_time": new},
                                           VerdictOptions(alpha=0.01, min_effect=0.05, metric="run_time")))
    judged = corrected(scripts, 0.01, "holm")
    own = scripts[0].phases["run_time"].p_value
    # The smallest of 20 p-values: Holm multiplies it by 20.
    assert judged[0].verdict == "slower" and judged[0].p_adjusted == pytest.approx(20 * own) and 20 * own < 0.01
    assert all(s.verdict != "slower" for s in judged[1:])
    # A change only significant on its own: kept with its figures, its verdict withdrawn, said why.
    weak = [s.model_copy(update={"phases": {"run_time": s.phases["run_time"].model_copy(
        update={"p_value": 0.004, "verdict": "slower"})}, "verdict": "slower", "slower": ["run_time"]})
        for s in scripts[:3]]
    (first, *_) = corrected(weak, 0.01, "holm")
    assert first.verdict == "no significant change" and first.slower == [] and first.p_adjusted == pytest.approx(0.012)
    assert first.phases["run_time"].p_value == 0.004 and first.phases["run_time"].verdict == "no significant change"
    assert "not significant once corrected for 3 scripts judged at once (Holm's: p 0.004 -> 0.012" in first.note
