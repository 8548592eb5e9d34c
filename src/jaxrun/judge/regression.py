"""The history's regression check: the newest run of a script judged phase by phase
(judge/verdicts.py) against the counted, successful samples of up to ``window`` (5) earlier runs of
the same script path on the same device, host, mode and numerics. It is a regression when the
verdict of its gate (run and compile time by default) is "slower". With fewer than
``MIN_HISTORY_RUNS`` (3) such earlier runs it is not judged ("not judged: 1 earlier run, needs
3"), never a regression."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from jaxrun.config.options import VerdictOptions, verdict_options
from jaxrun.core.defaults import HISTORY_WINDOW, MIN_HISTORY_RUNS
from jaxrun.core.formatting import plural
from jaxrun.errors import UsageError
from jaxrun.results.comparisons import JUDGED_VERDICTS, TOO_FEW
from jaxrun.results.models import HistoryRun, RegressionCheck, RunSample


class RunHistory(Protocol):
    """What the check reads of a history: judge/history.py's ``HistoryStore`` is one (and calls
    :func:`check_regression` with itself)."""

    def get(self, run_id: int) -> HistoryRun: ...

    def earlier_comparable(self, run: HistoryRun, window: int, numerics: str, machine: str = "same") -> list[int]: ...

    def samples_of(self, run_ids: Sequence[int]) -> list[RunSample]: ...


def check_regression(
    store: RunHistory, run_id: int, options: VerdictOptions | None = None, *, window: int = HISTORY_WINDOW,
    min_runs: int = MIN_HISTORY_RUNS, **given: Any,
) -> RegressionCheck:
    """Compare run ``run_id`` with up to ``window`` earlier comparable runs (same script path,
    device used, host and mode, and the same numerics unless ``allow_mismatch``) that have
    counted successful samples; pooled, they are the baseline. Every phase is judged; the
    regression is the verdict of the gate (run and compile time, or ``metric``), as in
    :func:`jaxrun.judge.verdicts.judge_script`. Earlier runs left out for their numerics are
    counted in ``other_numerics`` and said in ``note``.

    With fewer than ``min_runs`` earlier comparable runs nothing is compared: ``judged`` is
    false, ``reason`` says so ("not judged: 1 earlier run, needs 3") and ``regression`` is
    false. A comparison that reaches no verdict (too few runs to judge, not comparable) is not
    judged either."""
    for name, value in (("window", window), ("min_runs", min_runs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{name} must be a whole number >= 1, got {value!r}")
    if window < min_runs:
        raise UsageError(f"window ({window}) must be at least min_runs ({min_runs}): no check could be judged")
    from jaxrun.judge.benchmark_runs import metric_values
    from jaxrun.judge.verdicts import judge_script, metrics_for, too_few_note

    options = verdict_options(options, given)
    allow_mismatch = options.allow_mismatch
    judged, gate = metrics_for(options.metric)
    run = store.get(run_id)
    previous = store.earlier_comparable(run, window, "any" if allow_mismatch else "same")
    other = 0 if allow_mismatch else len(store.earlier_comparable(run, window, "other"))
    check = RegressionCheck(
        script_path=run.script_path, device=run.device_used, host=run.host, gate=list(gate),
        newest_run_id=run_id, previous_runs=len(previous), min_previous_runs=min_runs, regression=False,
        other_numerics=other, judged=False,
    )
    if other:
        were = "is" if other == 1 else "are"
        check.note = (f"{plural(other, 'earlier run')} started with other numerics and {were} not in the baseline "
                      "(--allow-mismatch to pool them)")
    elsewhere = store.earlier_comparable(run, window, "any", machine="other")
    if elsewhere:
        check.other_machines = len(elsewhere)
        said = _machine_differences(store.get(elsewhere[0]), run)
        were = "was" if len(elsewhere) == 1 else "were"
        check.note = "; ".join(filter(None, [check.note, (
            f"{plural(len(elsewhere), 'earlier run')} {were} measured on another machine ({said}) and "
            f"{'is' if len(elsewhere) == 1 else 'are'} not in the baseline")]))
    if len(previous) < min_runs:
        found = plural(len(previous), "earlier run") if previous else "no earlier run"
        check.reason = f"not judged: {found}, needs {min_runs}"
        if other:
            check.reason += f" ({other} more with other numerics)"
        if not previous and other:
            check.note = (f"not judged: the {plural(other, 'earlier run')} started with other numerics "
                          "(x64, matmul precision, debug or XLA flags); --allow-mismatch to judge against them")
        return check
    ids = sorted(previous)
    base_samples = store.samples_of(ids)
    base = {m: metric_values(base_samples, m) for m in judged}
    new = {m: metric_values(run.samples, m) for m in judged}
    comparison = judge_script(run.script_name, run.device_used, base, new, options)
    notes = [f"baseline: {plural(len(base_samples), 'sample')} from runs {ids}"]
    if not any(new.values()):
        notes.append("the newest run has no successful counted sample")
    comparison.note = "; ".join(notes + ([comparison.note] if comparison.note else []))
    check.gate, check.comparison = comparison.gate, comparison
    check.regression = comparison.verdict == "slower"
    check.judged = comparison.verdict in JUDGED_VERDICTS
    if not check.judged:
        check.reason = f"not judged: {comparison.verdict}"
        detail = too_few_note(comparison) if comparison.verdict == TOO_FEW else None
        if detail:
            check.reason += f" ({detail})"
    return check


def _machine_differences(earlier: HistoryRun, run: HistoryRun) -> str:
    """What differs between the machine of ``run`` and that of ``earlier`` (the newest other one)."""
    if earlier.machine is None or run.machine is None:
        return "its fingerprint differs"
    return ", ".join(run.machine.differences(earlier.machine)) or "its fingerprint differs"
