"""Exports people paste elsewhere: ``--export-json`` / ``--export-csv`` of a run (``run``) and of a
comparison (``compare``); ``--export-markdown`` is the Markdown summary (sinks/markdown.py) for a
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

from .. import resultfiles
from ..compare import load_samples, script_samples
from ..models import SAMPLE_METRICS, SCHEMA_VERSION
from . import BaseSink

if TYPE_CHECKING:
    from ..models import BatchResult, ComparisonReport

_SUMMARY_METRICS = ("import_time", "compile_time", "run_time", "memory_peak")


def _stats(values: list[float]) -> dict[str, float | None]:
    return {
        "mean": statistics.fmean(values) if values else None,
        "stddev": statistics.stdev(values) if len(values) > 1 else None,
        "median": statistics.median(values) if values else None,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
    }


def run_export(batch: "BatchResult") -> dict[str, Any]:
    """Per script: its outcome, hyperfine's wall-time figures and every raw sample per metric."""
    samples = script_samples(batch, SAMPLE_METRICS)
    rows = []
    for result in batch.script_results:
        entry = samples.get((result.script_name, result.device_requested))
        per_metric = entry.samples if entry is not None else {m: [] for m in SAMPLE_METRICS}
        rows.append({
            "command": result.script_name, "script_path": result.script_path, "device": result.device_used,
            "success": result.success, "error_class": result.error_class,
            "benchmarked": bool(entry and entry.benchmarked), "runs": len(per_metric["wall_time"]),
            **_stats(per_metric["wall_time"]), "times": per_metric["wall_time"], "samples": per_metric,
        })
    return {"schema_version": SCHEMA_VERSION, "unit": {"time": "s", "memory_peak": "MB"},
            "results": rows}


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
    """The comparison as ``jaxrun compare --json`` prints it, with both sides' raw samples."""
    sides = {}
    for side, source in (("base", base), ("new", new)):
        per_metric = {metric: load_samples(source, metric) for metric in report.metrics}
        keys = sorted({key for values in per_metric.values() for key in values}, key=lambda k: (k[0], k[1] or ""))
        sides[side] = [{"script": name, "device": device, "samples": {m: per_metric[m].get((name, device), [])
                                                                      for m in report.metrics}}
                       for name, device in keys]
    return {"comparison": report.model_dump(mode="json"), "samples": sides}


def _comparison_rows(report: "ComparisonReport") -> Iterable[list[Any]]:
    for script in report.scripts:
        for metric, phase in script.phases.items():
            yield [script.script_name, script.device, metric, metric in script.gate, phase.base_n, phase.new_n,
                   phase.base_median, phase.new_median, phase.ratio, phase.ratio_ci_low, phase.ratio_ci_high,
                   phase.p_value, phase.verdict]


_COMPARISON_HEADER = ["script", "device", "metric", "gate", "base_n", "new_n", "base_median", "new_median",
                      "ratio", "ratio_ci_low", "ratio_ci_high", "p_value", "verdict"]


def comparison_csv(report: "ComparisonReport") -> str:
    """One row per script and phase."""
    return _csv(_COMPARISON_HEADER, _comparison_rows(report))


def comparison_markdown(report: "ComparisonReport") -> str:
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.3g}"
        return " ".join(str(value).replace("|", "\\|").split())

    lines = [f"## jaxrun compare: {report.base} -> {report.new}", "",
             f"Slower: {', '.join(report.regressions) or 'none'}; faster: {', '.join(report.improvements) or 'none'} "
             f"(Mann-Whitney U, alpha {report.alpha}, minimum effect {report.min_effect:.0%}).", "",
             "| " + " | ".join(_COMPARISON_HEADER) + " |", "|" + "|".join(["---"] * len(_COMPARISON_HEADER)) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in _comparison_rows(report)]
    return "\n".join(lines) + "\n"


def _csv(header: list[str], rows: Iterable[list[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])
    return buffer.getvalue()


def write_json(path: Path, data: dict[str, Any]) -> None:
    resultfiles.atomic_write_text(path, json.dumps(data, indent=2) + "\n")


class ExportSink(BaseSink):
    """``--export-json`` / ``--export-csv`` of ``jaxrun run``, written when the batch ends."""

    def __init__(self, json_path: Path | None, csv_path: Path | None) -> None:
        self.json_path, self.csv_path = json_path, csv_path

    def on_begin(self, jobs: object) -> None:
        # A path that cannot be written is found before the batch runs, not after.
        for path in (self.json_path, self.csv_path):
            if path is not None:
                resultfiles.writable_file(path, "export")

    def on_end(self, batch: "BatchResult") -> None:
        if self.json_path is not None:
            write_json(self.json_path, run_export(batch))
        if self.csv_path is not None:
            resultfiles.atomic_write_text(self.csv_path, run_csv(batch))
