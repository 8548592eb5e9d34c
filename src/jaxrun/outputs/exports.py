"""Exports people paste elsewhere: ``--export-json`` / ``--export-csv`` of a run (``run``) and of a
comparison (``compare``); ``--export-markdown`` is the Markdown summary (outputs/markdown.py) for a
run and :func:`comparison_markdown` for a comparison.

The JSON keeps every raw sample, as hyperfine's does (and with its names for the wall-time
figures: ``command``, ``mean``, ``stddev``, ``median``, ``min``, ``max``, ``times``); a plain run
is one sample. Unknown figures are null in JSON and empty in CSV.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from jaxrun.core.formatting import fmt_share, fmt_p, fmt_ratio, fmt_ratio_ci
from jaxrun.judge.compare import (
    labelled_samples,
    program_sections,
    script_samples,
    single_value,
)
from jaxrun.judge.verdicts import correction_text
from jaxrun.plan.sink import BaseSink
from jaxrun.results import result_files
from jaxrun.results.benchmark_result import resolve_metric
from jaxrun.results.figures import PHASES, SCRIPT_FIGURES, format_metric, metric_label
from jaxrun.results.models import SAMPLE_METRICS, SCHEMA_VERSION

if TYPE_CHECKING:
    from jaxrun.outputs.declarations import OutputContext
    from jaxrun.results.models import BatchResult, ComparisonReport, ScriptResult

# The CSV's medians: every judged phase but the wall time, which has its own columns.
_SUMMARY_METRICS = tuple(m for m in PHASES if m != "wall_time")


def _stats(values: list[float]) -> dict[str, float | None]:
    return {
        "mean": statistics.fmean(values) if values else None,
        "stddev": statistics.stdev(values) if len(values) > 1 else None,
        "median": statistics.median(values) if values else None,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
    }


def _measured(result: "ScriptResult") -> dict[str, list[float]]:
    """One run's figures as the run's table shows them, a failed run's too (what was measured
    of it: a timeout's 10 s are 10 s); unknown ones left out."""
    figures = {m: single_value(result, m) for m in SAMPLE_METRICS}
    return {m: [] if value is None else [float(value)] for m, value in figures.items()}


def run_export(batch: "BatchResult") -> dict[str, Any]:
    """Per script, named as every surface names it (``command``: the view's label): its outcome,
    hyperfine's wall-time figures and every raw sample per metric. A benchmark's samples are its
    counted runs that succeeded; any other script (a failed one too) is the one run the table
    shows."""
    from jaxrun.present.view.batch_view import view_batch

    samples = script_samples(batch, SAMPLE_METRICS)
    rows = []
    for result, shown in zip(batch.script_results, view_batch(batch).scripts):
        entry = samples.get((result.script_name, result.device_requested))
        benchmarked = bool(entry is not None and entry.benchmarked and entry.samples["wall_time"])
        per_metric = entry.samples if benchmarked else _measured(result)  # type: ignore[union-attr]
        rows.append({
            "command": shown.label, "name": result.script_name, "script_path": result.script_path,
            "device": result.device_used, "success": result.success, "error_class": result.error_class,
            "benchmarked": benchmarked, "runs": len(per_metric["wall_time"]),
            **_stats(per_metric["wall_time"]), "times": per_metric["wall_time"], "samples": per_metric,
        })
    units = {f.name: f.unit for f in SCRIPT_FIGURES if f.sampled and f.kind != "seconds"}
    return {"schema_version": SCHEMA_VERSION, "unit": {"time": "s", **units}, "results": rows}


def run_csv(batch: "BatchResult") -> str:
    """One row per script: wall-time figures of its samples, then the medians of its phases."""
    header = ["script", "device", "success", "error_class", "runs", "mean", "stddev", "median", "min", "max",
              *(f"median_{m}" for m in _SUMMARY_METRICS)]
    rows = []
    for row in run_export(batch)["results"]:
        medians = [statistics.median(row["samples"][m]) if row["samples"][m] else None for m in _SUMMARY_METRICS]
        rows.append([row["command"], row["device"], row["success"], row["error_class"], row["runs"],
                     *(row[k] for k in ("mean", "stddev", "median", "min", "max")), *medians])
    return _csv(header, rows)


def comparison_export(report: "ComparisonReport", base: Path, new: Path) -> dict[str, Any]:
    """The comparison as ``jaxrun compare --json`` prints it, with both sides' raw samples, each
    script named as the comparison names it (``script``; ``name``: its <name>)."""
    sides = {}
    for side, source in (("base", base), ("new", new)):
        found = sorted(labelled_samples(source, tuple(resolve_metric(m) for m in report.metrics)),
                       key=lambda item: (item[0], item[1][1] or ""))
        sides[side] = [{"script": label, "name": name, "device": device, "samples": samples}
                       for label, (name, device), samples in found]
    return {"comparison": report.model_dump(mode="json"), "samples": sides}


def _comparison_rows(report: "ComparisonReport") -> Iterable[list[Any]]:
    for script in report.scripts:
        for metric, phase in script.phases.items():
            yield [script.path or script.script_name, script.device, metric, metric in script.gate, phase.base_n, phase.new_n,
                   phase.base_median, phase.new_median, phase.ratio, phase.ratio_ci_low, phase.ratio_ci_high,
                   phase.p_value, phase.verdict]


_COMPARISON_HEADER = ["script", "device", "metric", "gate", "base_n", "new_n", "base_median", "new_median",
                      "ratio", "ratio_ci_low", "ratio_ci_high", "p_value", "verdict"]


def comparison_csv(report: "ComparisonReport") -> str:
    """One row per script and phase."""
    return _csv(_COMPARISON_HEADER, _comparison_rows(report))


_MARKDOWN_HEADER = ["Script", "Device", "Phase", "Base median", "New median", "Ratio (new/base)",
                    "95% CI of ratio", "p", "Runs (base/new)", "Could see", "Verdict"]
_MARKDOWN_ALIGN = ["---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---"]


def _md(text: object) -> str:
    """Text for one table cell: Markdown's punctuation escaped (a script named ``__init__`` stays
    itself, a ``|`` cannot end the cell), on one line."""
    return "".join("\\" + c if c in "\\`*_[]<>|" else c for c in " ".join(str(text).split()))


def comparison_markdown(report: "ComparisonReport") -> str:
    """The comparison as ``jaxrun compare`` prints it: one row per script and phase, medians with
    their units (s/ms/µs, MiB), the ratio NEW / BASE with its CI, the p-value, the runs and the
    verdict; the gate's phases marked *, and notes in rows of their own, as in the terminal."""
    gate = " + ".join(report.gate)
    # jaxrun ab judges pair by pair (jaxrun.judge.paired): its test and its ratio are not compare's.
    how = "duet pairs (both runs at once, on two halves of the machine)" if report.duet else "alternating pairs"
    command, test, ratios = (("ab", f"{report.pairs} {how}, Wilcoxon signed-rank",
                              "the median of the per-pair ratios NEW / BASE") if report.paired else
                             ("compare", "Mann-Whitney U", "NEW / BASE medians"))
    lines = [f"## jaxrun {command}: {_md(report.base)} -> {_md(report.new)}", "",
             f"Slower: {_md(', '.join(report.shown(report.regressions)) or 'none')}; "
             f"faster: {_md(', '.join(report.shown(report.improvements)) or 'none')} "
             f"({test}, alpha {report.alpha:g}, minimum effect {report.min_effect:.0%}, "
             f"{correction_text(report.correction, len(report.scripts))}; 'could see': the smallest change the pairs "
             "could have found). "
             f"Ratios are {ratios}; \\* marks the phases that decide a script's verdict "
             f"(by default {_md(gate)}).", "",
             "| " + " | ".join(_MARKDOWN_HEADER) + " |", "|" + "|".join(_MARKDOWN_ALIGN) + "|"]

    def row(cells: list[str]) -> str:
        return "| " + " | ".join(_md(c) for c in cells) + " |"

    for c in report.scripts:
        # As the terminal's table: a note several phases share is said once, in a row of its own.
        notes = [p.note for p in c.phases.values() if p.note]
        shared = list(dict.fromkeys(n for n in notes if notes.count(n) > 1))
        note = "; ".join(([c.note] if c.note else []) + shared)
        name = (c.path or c.script_name) + (f" → {c.verdict}" if c.verdict != "no significant change" else "")
        for metric, phase in c.phases.items():
            own = phase.note if phase.note and phase.note not in shared else None
            lines.append(row([
                name, c.device or "-", metric_label(metric, metric in c.gate),
                format_metric(metric, phase.base_median), format_metric(metric, phase.new_median),
                fmt_ratio(phase.ratio), fmt_ratio_ci(phase.ratio_ci_low, phase.ratio_ci_high),
                fmt_p(phase.p_value), f"{phase.base_n}/{phase.new_n}", fmt_share(phase.detectable),
                phase.verdict + (f" ({own})" if own else ""),
            ]))
        if note:
            lines.append(row([name, c.device or "-", "note", "", "", "", "", "", "", "", note]))
    if report.machine_mismatch:
        lines += ["", f"BASE and NEW ran on different machines, compared anyway (--allow-mismatch): "
                      f"{_md('; '.join(report.machine_mismatch))}."]
    for heading, programs in program_sections(report):  # each program under the heading true of it
        lines += ["", f"{heading}:", "", *(f"- {_md(line)}" for line in programs)]
    for side, names in (("Only in BASE", report.only_in_base), ("Only in NEW", report.only_in_new)):
        if names:
            lines += ["", f"{side}: {_md(', '.join(names))}."]
    means = [f"{metric_label(m)} {fmt_ratio(r)}" for m, r in report.geometric_mean_ratio.items() if r is not None]
    if means:
        lines += ["", f"Geometric mean of the ratios (NEW/BASE): {_md(', '.join(means))}."]
    return "\n".join(lines) + "\n"


def _csv(header: list[str], rows: Iterable[list[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])
    return buffer.getvalue()


def write_json(path: Path, data: dict[str, Any]) -> None:
    result_files.atomic_write_text(path, json.dumps(data, indent=2) + "\n")


class ExportSink(BaseSink):
    """``--export-json`` / ``--export-csv`` of ``jaxrun run``, written when the batch ends."""

    def __init__(self, json_path: Path | None, csv_path: Path | None) -> None:
        self.json_path, self.csv_path = json_path, csv_path

    def on_end(self, batch: "BatchResult") -> None:
        if self.json_path is not None:
            write_json(self.json_path, run_export(batch))
        if self.csv_path is not None:
            result_files.atomic_write_text(self.csv_path, run_csv(batch))


def for_batch(context: "OutputContext") -> ExportSink:
    return ExportSink(context.options.export_json, context.options.export_csv)
