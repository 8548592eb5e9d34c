"""One script's row of the view of a run: what every surface shows of it, computed once.

A surface (the terminal table, the progress lines, Markdown, the HTML report, MCP replies) only
lays these values out; it never reads a :class:`~jaxrun.results.models.ScriptResult` to decide what a
figure or a verdict is.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Optional, Sequence

import msgspec
import msgspec.structs

from jaxrun.core.defaults import TOO_FEW
from jaxrun.core.formatting import fmt_seconds, one_line, plural
from jaxrun.core.validate import device_label
from jaxrun.discover.script_labels import (  # noqa: F401 - the views' names for them
    label_from_name,
    relative_path,
    script_label,
    with_device,
    with_point,
)
from jaxrun.probe.notebook_cells import split_cell_filename

if TYPE_CHECKING:
    from jaxrun.results.models import (
        CellTiming,
        RegressionCheck,
        ScriptComparison,
        ScriptResult,
        WarmSummary,
    )

GOOD, BAD, WARN, PLAIN = "good", "bad", "warn", ""

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)


# A struct, its fields in slots: the view of a batch holds one a script (its peak RSS a result has a budget)
class ScriptView(msgspec.Struct, frozen=True):
    """What every surface says of one script (one job: a script on one device)."""

    name: str  # the batch-unique <name> of its files (with @device on a batch of several devices)
    label: str  # what a reader sees: the path relative to the folder given, with "/" (+ " @gpu")
    path: str
    status: str  # ok | failed | xfailed | xpassed
    status_text: str  # "ok", "timeout", "xfail (script_error)", "XPASS"
    level: str  # good | bad | warn: how to colour it
    kept: bool  # kept from an earlier run by --resume, not run again
    device: str  # where it ran ("-": nowhere)
    device_requested: str
    device_text: str  # "cpu", "cpu (fallback from gpu)"
    fallback_reason: Optional[str]
    time: Optional[float]  # seconds, the whole process: the median when benchmarked
    body: Optional[float]
    import_: Optional[float]
    jit: Optional[float]
    run: Optional[float]
    memory: Optional[float]  # MiB, peak RSS of the process tree
    timing: Optional[str]  # "median of 5 counted runs"; None: one run
    compiles: Optional[int]  # XLA compilations (cache loads not included)
    cache_loads: Optional[int]  # executables loaded from the persistent cache
    compiles_text: str  # "3", "3 cached", "1+2 cached", "-"
    verdict: Optional[str]  # the performance verdict (history, or the baseline when one is given)
    verdict_short: Optional[str]  # in a table cell: "slower x1.28", "no change", "first run"
    verdict_level: str
    regression: bool  # judged slower (by the history, or against the baseline)
    error_class: Optional[str]
    error: Optional[str]  # one line: "ValueError: boom (+1 more line)"
    error_full: Optional[str]
    location: Optional[str]  # where it failed, "model.py:12" (relative to the folder given)
    log: Optional[str]  # the stderr log of a failed script
    hint: Optional[str]
    expected_failure: Optional[str]  # why it is marked xfail
    warnings: tuple[str, ...] = ()  # a tuple: none is the one empty tuple, not a list per script

    def outcome_text(self) -> str:
        """The one-line outcome the progress lines print when it ends."""
        where = f" at {self.location}" if self.location else ""
        if self.status == "failed":
            return f"{self.error_class}: {self.error or ''}{where}"
        if self.status == "xfailed":
            return f"xfail: {self.error_class}: {self.error or ''}{where} (expected: {self.expected_failure})"
        figure = fmt_seconds(self.time) + (f" ({self.timing})" if self.timing else "")
        expected = f" (marked xfail: {self.expected_failure})" if self.status == "xpassed" else ""
        return f"{self.status_text} {self.device_text}, {figure}{expected}" + (f"; {self.verdict}" if self.verdict else "")


def error_location(result: "ScriptResult", search_paths: Sequence[str]) -> Optional[str]:
    """``model.py:12``: the innermost frame of the traceback in the script's own file (else in any
    file of the folders searched, else the innermost frame)."""
    if not result.traceback:
        return None
    frames = [(m["file"], m["line"]) for m in _FRAME.finditer(result.traceback)]
    if not frames:
        return None
    roots = [r.rstrip(os.sep) + os.sep for r in search_paths]

    def own(filename: str) -> bool:  # the script's file, or one of its cells (a notebook's "<path>:cell N")
        cell = split_cell_filename(filename)
        return (cell[0] if cell is not None else filename) == result.script_path

    chosen = (next((f for f in reversed(frames) if own(f[0])), None)
              or next((f for f in reversed(frames) if any(f[0].startswith(r) for r in roots)), None)
              or frames[-1])
    cell = split_cell_filename(chosen[0])
    if cell is not None:  # "train.ipynb:cell 3, line 2"
        return f"{relative_path(cell[0], search_paths)}:cell {cell[1]}, line {chosen[1]}"
    return f"{relative_path(chosen[0], search_paths)}:{chosen[1]}"


def compiles_text(compiles: Optional[int], loads: Optional[int]) -> str:
    """Compilations and cache loads in one cell: a program loaded from the persistent cache was
    not compiled, yet it is not "0 compiles" either."""
    if compiles is None:
        return "-"
    if not loads:
        return str(compiles)
    return f"{loads} cached" if compiles == 0 else f"{compiles}+{loads} cached"


def cell_outcome(cell: "CellTiming") -> str:
    """A notebook cell's outcome as every surface writes it: ``ok``, ``error at line 2``, ``not
    run`` (the run never reached it), ..."""
    return cell.outcome + (f" at line {cell.error_line}" if cell.error_line is not None else "")


def cells_ran(cells: "Sequence[CellTiming]") -> str:
    """How many of a notebook's code cells ran: ``3 cells``, ``2 of 3 cells ran (1 not run)``."""
    skipped = sum(cell.outcome == "not run" for cell in cells)
    if not skipped:
        return plural(len(cells), "cell")
    return f"{len(cells) - skipped} of {plural(len(cells), 'cell')} ran ({skipped} not run)"


def history_verdict(check: "RegressionCheck | None") -> tuple[Optional[str], str, bool]:
    """(text, level, regression) of the history's judgement of a benchmarked run: the verdict
    against N earlier runs with the figures that decided it, or why there is none ("not judged:
    1 earlier run, needs 3")."""
    if check is None:
        return None, PLAIN, False
    c = check.comparison
    if c is None:
        if check.reason:
            return check.reason, PLAIN, False
        if check.other_numerics:  # a check written before `reason` existed
            return f"not judged: {plural(check.other_numerics, 'earlier run')} with other numerics", PLAIN, False
        return ("first run in the history" if not check.previous_runs else "not judged"), PLAIN, False
    from jaxrun.judge.verdicts import describe_gate, runs_needed

    verb = "than" if c.verdict in ("slower", "faster") else "against"
    text = f"{c.verdict} {verb} {plural(check.previous_runs, 'earlier run')}"
    detail = describe_gate(c)
    if c.verdict == TOO_FEW:
        detail = runs_needed(c) or detail
    return text + (f": {detail}" if detail else ""), _level(c.verdict), bool(check.regression)


def baseline_verdict(comparison: "ScriptComparison") -> tuple[str, str, bool]:
    """(text, level, regression) of a script against a baseline run (``--baseline``)."""
    from jaxrun.judge.verdicts import describe_gate, runs_needed

    verb = "than" if comparison.verdict in ("slower", "faster") else "against"
    detail = describe_gate(comparison)
    if comparison.verdict == TOO_FEW:
        detail = runs_needed(comparison) or detail
    return (f"{comparison.verdict} {verb} the baseline" + (f": {detail}" if detail else ""),
            _level(comparison.verdict), comparison.verdict == "slower")


def short_verdict(verdict: Optional[str], comparison: "ScriptComparison | None") -> Optional[str]:
    """A verdict in a table cell: the word, and the gate's ratio that decided it."""
    if verdict is None:
        return None
    if comparison is None or not verdict.startswith(comparison.verdict):
        return verdict.split(":")[0].removesuffix(" in the history")
    word = {"no significant change": "no change", TOO_FEW: "too few runs"}.get(comparison.verdict, comparison.verdict)
    decided = [m for m in comparison.gate if m in comparison.slower + comparison.faster]
    ratios = [comparison.phases[m].ratio for m in decided if comparison.phases.get(m) and comparison.phases[m].ratio]
    return word + (f" x{ratios[0]:.2f}" if ratios else "")


def _level(verdict: str) -> str:
    return {"slower": BAD, "faster": GOOD, TOO_FEW: WARN}.get(verdict, PLAIN)


def _word(text: Optional[str]) -> Optional[str]:
    return None if text is None else sys.intern(text)


def on_several_devices(view: ScriptView) -> ScriptView:
    """``view`` of a script the batch ran on several devices: its label says which
    (:func:`script_view` with ``several_devices``)."""
    return msgspec.structs.replace(view, label=with_device(view.path, view.device_requested))


def _status(result: "ScriptResult") -> tuple[str, str, str]:
    if result.outcome == "xfailed":
        return "xfailed", f"xfail ({result.error_class})", WARN
    if result.outcome == "xpassed":
        return "xpassed", "XPASS", WARN
    if result.success:
        return "ok", "ok", GOOD
    return "failed", str(result.error_class or "failed"), BAD


def script_view(
    result: "ScriptResult",
    search_paths: Sequence[str] = (),
    *,
    several_devices: bool = False,
    name: Optional[str] = None,
    kept: bool = False,
    comparison: "ScriptComparison | None" = None,
) -> ScriptView:
    """The view of one script's result. ``several_devices``: the batch ran this script on more
    than one device (the label then says which); ``comparison``: its judgement against a baseline,
    which then replaces the history's."""
    status, status_text, level = _status(result)
    device = device_label(result.device_used, result.device_index) or "-"  # gpu:1 when one was chosen
    device_text = device
    if result.fallback_reason:
        device_text += f" (fallback from {result.device_requested})"
    path = with_point(relative_path(result.script_path, search_paths), result.params)
    label = with_device(path, result.device_requested) if several_devices else path  # script_label's
    if comparison is not None:
        verdict, verdict_level, regression = baseline_verdict(comparison)
        against = comparison
    else:
        check = result.benchmark.history_check if result.benchmark is not None else None
        verdict, verdict_level, regression = history_verdict(check)
        against = check.comparison if check is not None else None
    failed = status in ("failed", "xfailed")
    # The texts of a small vocabulary are one object for every view of a batch (the view of a
    # batch of 10,000 holds 10,000 of these).
    return ScriptView(
        name=name or result.script_name, label=label, path=path,
        status=status, status_text=_word(status_text), level=level, kept=kept,
        device=_word(device), device_requested=_word(result.device_requested), device_text=_word(device_text),
        fallback_reason=result.fallback_reason,
        time=result.execution_time, body=result.body_time, import_=result.import_time,
        jit=result.jit_compile_time, run=result.run_time, memory=result.memory_peak,
        timing=_word(result.timing),
        compiles=result.compile_count, cache_loads=result.cache_hits,
        compiles_text=compiles_text(result.compile_count, result.cache_hits),
        verdict=verdict, verdict_short=short_verdict(verdict, against), verdict_level=verdict_level, regression=regression,
        error_class=_word(result.error_class) if failed else None,
        error=one_line(result.error_message) if failed else None,
        error_full=result.error_message if failed else None,
        location=error_location(result, search_paths) if failed else None,
        log=result.stderr_log if failed else None,
        hint=result.hint if failed else None,
        expected_failure=result.xfail,
        warnings=tuple(result.warnings),
    )


def steady_state_text(warm: "WarmSummary") -> str:
    """``flat from call 2``, ``warmup from call 7``, ``no steady state``, ``unknown (few calls)``."""
    kind = warm.steady_state
    if kind is None:
        return "-"
    if kind == "none":
        return "no steady state"
    if kind == "unknown":
        return "unknown (few calls)"
    return f"{kind} from call {warm.steady_from}"
