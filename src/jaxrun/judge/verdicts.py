"""Judging NEW against BASE phase by phase, and the gate that turns phases into one verdict.

A run's wall time mixes the script's own work with importing jax and with noise of the machine; a
30% slower loop can hide in it. So every phase is judged on its own (ratio of medians with a CI,
exact rank test, minimum effect: :func:`jaxrun.judge.stats.verdict`), and a script's verdict looks only at
its *gate*: by default the phases that are the code's own, ``run_time`` and ``compile_time``. A
gate phase measured on one side only (files from before phases existed) is left out of the gate,
and when none is left the gate is ``wall_time``, with a note. Samples too few for the test ever to
reach p < alpha (3 vs 3: p >= 0.1) are "too few runs to judge", never "no significant change".
``jaxrun compare``, the history's regression check and the pytest plugin all judge through
:func:`judge_script`; ``jaxrun ab`` judges pair by pair (:mod:`jaxrun.judge.paired`) through the same gate,
:func:`gated_comparison`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jaxrun.config.options import VerdictOptions
from jaxrun.core.formatting import plural
from jaxrun.judge import stats
from jaxrun.results.benchmark_result import resolve_metric
from jaxrun.results.figures import DEFAULT_GATE, PHASES  # noqa: F401 - declared with each figure
from jaxrun.results.models import PhaseComparison, ScriptComparison

FALLBACK_GATE: tuple[str, ...] = ("wall_time",)

ONE_RUN_NOTE = "only one sample per side; run with --benchmark-runs"


def metrics_for(metric: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(judged, gate)`` for ``--metric`` (None: every phase, gated on the code's own phases).

    A chosen metric is judged with the phases (``body_time`` is judged only when chosen) and is
    the whole gate. Raises UsageError for an unknown name.
    """
    if metric is None:
        return PHASES, DEFAULT_GATE
    name = resolve_metric(metric)
    return (PHASES if name in PHASES else (*PHASES, name)), (name,)


def judge_phase(
    metric: str, base: Sequence[float], new: Sequence[float], *, alpha: float, min_effect: float,
    repeated: bool = True,
) -> PhaseComparison:
    """One metric's verdict, with a note that says why there is no test when there is none.

    ``repeated``: whether either side meant to repeat runs (a benchmark); a plain single run on
    both sides gets the advice to benchmark instead of a sample count.
    """
    a, b = list(base), list(new)
    notes: list[str] = []
    verdict, ratio, low, high, p = stats.verdict(a, b, alpha=alpha, min_effect=min_effect)
    if not a or not b:
        side = " and ".join(s for s, x in (("base", a), ("new", b)) if not x)
        notes.append(f"no {metric} of a successful run on the {side} side")
    elif len(a) < 2 or len(b) < 2:
        notes.append(f"{len(a)} vs {plural(len(b), 'sample')}: a test needs at least 2 per side" if repeated else ONE_RUN_NOTE)
    elif ratio is None:  # the base median is 0
        p = stats.mann_whitney_p(a, b)
        if max(a) == 0 and max(b) == 0:
            verdict = "no significant change"
            notes.append(f"{metric} is 0 in every run on both sides")
        else:
            notes.append(f"the base median {metric} is 0, so there is no ratio")
    elif verdict == stats.TOO_FEW:
        notes.append(f"with {len(a)} and {plural(len(b), 'sample')} no test can reach p < {alpha:g}: "
                     f"at least {stats.runs_needed(alpha)} runs each")
    return PhaseComparison(
        metric=metric, base_n=len(a), new_n=len(b),
        base_median=float(np.median(a)) if a else None, new_median=float(np.median(b)) if b else None,
        ratio=ratio, ratio_ci_low=low, ratio_ci_high=high, p_value=p, verdict=verdict,  # type: ignore[arg-type]
        note="; ".join(notes) or None,
    )


def _gate_verdict(phases: Sequence[PhaseComparison]) -> str:
    """slower, else faster, else not comparable when no gate phase was tested, else too few runs
    to judge when a gate phase had samples too few for any test to be significant, else no
    significant change (every tested gate phase could have shown a change, and none did)."""
    verdicts = [p.verdict for p in phases]
    if "slower" in verdicts:
        return "slower"
    if "faster" in verdicts:
        return "faster"
    if all(v == "not comparable" for v in verdicts):  # none tested, or no gate phase at all
        return "not comparable"
    if stats.TOO_FEW in verdicts:
        return stats.TOO_FEW
    return "no significant change"


def judge_script(
    name: str, device: str | None, base: Mapping[str, Sequence[float]], new: Mapping[str, Sequence[float]],
    options: VerdictOptions | None = None, *, repeated: bool = True,
) -> ScriptComparison:
    """Judge every phase of one script (``base`` / ``new``: samples per metric name) and gate them.

    ``options.metric`` None gates on run and compile time (those measured on both sides; wall time
    when neither is); a named metric is the whole gate. Metrics absent from both mappings are skipped.
    """
    options = options if options is not None else VerdictOptions()
    alpha, min_effect = options.alpha, options.min_effect
    judged, _ = metrics_for(options.metric)
    phases = {
        m: judge_phase(m, base.get(m, ()), new.get(m, ()), alpha=alpha, min_effect=min_effect, repeated=repeated)
        for m in judged if m in base or m in new
    }
    return gated_comparison(name, device, phases, options.metric)


def gated_comparison(
    name: str, device: str | None, phases: dict[str, PhaseComparison], metric: str | None,
) -> ScriptComparison:
    """One script's phases (judged by :func:`judge_phase` or, pair by pair, by
    :func:`jaxrun.judge.paired.judge_paired_phase`) made one verdict by the gate of ``metric``
    (:func:`metrics_for`): None gates on run and compile time, those measured on both sides
    (wall time, with a note, when neither is); a named metric is the whole gate."""
    _, gate = metrics_for(metric)
    notes = []
    if metric is None:
        measured = [m for m in gate if m in phases and phases[m].base_n and phases[m].new_n]
        if not measured and "wall_time" in phases:
            missing = " and ".join(gate)
            notes.append(f"{missing} not measured on both sides: judged on wall_time")
            measured = list(FALLBACK_GATE)
        gate = tuple(measured) or gate
    gated = [phases[m] for m in gate if m in phases]
    return ScriptComparison(
        script_name=name, device=device, verdict=_gate_verdict(gated),  # type: ignore[arg-type]
        gate=list(gate),
        slower=[m for m, p in phases.items() if p.verdict == "slower"],
        faster=[m for m, p in phases.items() if p.verdict == "faster"],
        phases=phases, note="; ".join(notes) or None,
    )


def too_few_note(comparison: ScriptComparison) -> str | None:
    """The note of the first gate phase judged "too few runs to judge" ("with 3 and 3 samples no
    test can reach p < 0.05: at least 4 runs each"), or None."""
    for m in comparison.gate:
        phase = comparison.phases.get(m)
        if phase is not None and phase.verdict == stats.TOO_FEW and phase.note:
            return phase.note
    return None


def runs_needed(comparison: ScriptComparison) -> str | None:
    """The part of :func:`too_few_note` that says what to do: ``at least 4 runs each``."""
    note = too_few_note(comparison)
    return note[note.find("at least"):] if note and "at least" in note else None


def describe_gate(comparison: ScriptComparison) -> str:
    """``run_time x1.284 [1.21, 1.33] p=0.00058`` for each gate phase judged slower or faster, or
    for the whole gate when none was: the one line the history, Markdown and pytest print."""
    chosen = [m for m in comparison.gate if m in comparison.slower + comparison.faster] or comparison.gate
    parts = []
    for m in chosen:
        phase = comparison.phases.get(m)
        if phase is None:
            continue
        text = m if phase.ratio is None else f"{m} x{phase.ratio:.3f}"
        if phase.ratio_ci_low is not None and phase.ratio_ci_high is not None:
            text += f" [{phase.ratio_ci_low:.3f}, {phase.ratio_ci_high:.3f}]"
        if phase.p_value is not None:
            text += f" p={phase.p_value:.2g}"
        parts.append(text)
    return ", ".join(parts)


def _decisive_p(comparison: ScriptComparison) -> tuple[float, int] | None:
    """The p-value that decided a script's verdict (the smallest of its changed gate phases', else
    of its gate's tested phases') and how many gate phases were tested (None: none was)."""
    gated = [comparison.phases[m] for m in comparison.gate if m in comparison.phases]
    changed = [p.p_value for p in gated if p.verdict in ("slower", "faster") and p.p_value is not None]
    tested = [p.p_value for p in gated if p.p_value is not None]
    return (min(changed or tested), len(tested)) if tested else None


def adjusted_p_values(p_values: Sequence[float], method: str) -> list[float]:
    """``p_values`` corrected for being tested together, in their order: Holm's step-down (each
    p_(k) times the tests left, kept non-decreasing) or Benjamini-Hochberg's step-up (each p_(k)
    times m / k, kept non-increasing from the top); ``none``: as given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    if method == "holm":
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p_values[i]))
            adjusted[i] = running
    elif method == "bh":
        running = 1.0
        for rank in range(m - 1, -1, -1):
            i = order[rank]
            running = min(running, min(1.0, m / (rank + 1) * p_values[i]))
            adjusted[i] = running
    else:
        adjusted = [float(p) for p in p_values]
    return adjusted


CORRECTION_NAMES = {"holm": "Holm's", "bh": "Benjamini-Hochberg's"}


def correction_text(method: str, scripts: int) -> str:
    """How a comparison's p-values were corrected, as its title says it."""
    if method == "none" or scripts < 2:
        return "no correction for many scripts" if method == "none" else "one script: nothing to correct"
    return f"p corrected for {plural(scripts, 'script')} ({CORRECTION_NAMES[method]})"


def corrected(scripts: Sequence[ScriptComparison], alpha: float, method: str) -> list[ScriptComparison]:
    """Each script's verdict once the p-values of all of them are corrected for being judged at
    once (``method``: holm, bh or none). A script's p-value is its decisive one times the gate
    phases it tested (a script is slower when any of them is: Bonferroni within it), then the
    scripts' are corrected together. One script alone is as it was judged. A script whose verdict
    does not hold once corrected keeps its figures, its changed phases become "no significant
    change" with a note saying why, and its verdict is gated again."""
    decisive = {i: found for i, s in enumerate(scripts) if (found := _decisive_p(s)) is not None}
    if len(decisive) < 2 or method == "none":
        return [s.model_copy(update={"p_adjusted": decisive[i][0]}) if i in decisive else s
                for i, s in enumerate(scripts)]
    family = {i: min(1.0, p * phases) for i, (p, phases) in decisive.items()}
    adjusted = dict(zip(family, adjusted_p_values(list(family.values()), method)))
    out = []
    for i, script in enumerate(scripts):
        if i not in adjusted:
            out.append(script)
            continue
        p_adjusted = adjusted[i]
        if p_adjusted < alpha or script.verdict not in ("slower", "faster"):
            out.append(script.model_copy(update={"p_adjusted": p_adjusted}))
            continue
        own, phases_tested = decisive[i]
        times = f" x{phases_tested} gate phases" if phases_tested > 1 else ""
        said = (f"not significant once corrected for {plural(len(decisive), 'script')} judged at once "
                f"({CORRECTION_NAMES[method]}: p {own:.2g}{times} -> {p_adjusted:.2g}, not below {alpha:g})")
        # Pairs too few for any outcome to pass the corrected bar: too few to judge, not "no change".
        family = phases_tested * len(decisive)
        pairs = min((p.pairs for m, p in script.phases.items() if m in script.gate and p.pairs), default=None)
        withdrawn = "no significant change"
        if pairs is not None and stats.min_signed_rank_p(pairs) * family >= alpha:
            withdrawn = stats.TOO_FEW
            said += f"; {plural(pairs, 'pair')} can never pass it: at least {stats.pairs_needed(alpha / family)} pairs"
        phases = {m: (p.model_copy(update={"verdict": withdrawn}) if p.verdict in ("slower", "faster") else p)
                  for m, p in script.phases.items()}
        gated = [phases[m] for m in script.gate if m in phases]
        out.append(script.model_copy(update={
            "verdict": _gate_verdict(gated), "p_adjusted": p_adjusted, "phases": phases,
            "slower": [m for m, p in phases.items() if p.verdict == "slower"],
            "faster": [m for m, p in phases.items() if p.verdict == "faster"],
            "note": "; ".join(n for n in (script.note, said) if n)}))
    return out
