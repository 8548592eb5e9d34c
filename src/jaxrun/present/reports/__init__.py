"""Reports of a results folder: ``jaxrun report`` (and ``jaxrun run --report``) writes one
self-contained HTML file (present/reports/html_page.py)."""

from __future__ import annotations

from pathlib import Path

from jaxrun.core.extras import require
from jaxrun.errors import UsageError  # noqa: F401 - write_report's documented error
from jaxrun.present.view.batch_view import read_batch
from jaxrun.results import result_files

REPORT_FILE = "report.html"


AB_COMPARISON = "ab_comparison.json"  # jaxrun ab's folder (jaxrun/ab/ab_comparison.py): NEW's runs in new/


def _ab_folder(folder: Path):  # type: ignore[no-untyped-def]
    """A ``jaxrun ab`` folder's NEW side, its paired comparison and its BASE side; ``(None, None,
    None)`` for another folder."""
    if not (folder / AB_COMPARISON).is_file():
        return None, None, None
    from jaxrun.results.models import ComparisonReport

    return (read_batch(folder / "new"), result_files.read_model(folder / AB_COMPARISON, ComparisonReport),
            read_batch(folder / "base"))


def write_report(results_dir: Path, output: Path | None = None, baseline: Path | None = None) -> Path:
    """Write the HTML report of ``results_dir`` (against ``baseline``, another results folder or
    file, when given) to ``output`` (default ``results_dir/report.html``) and return its path."""
    from jaxrun.judge.compare import compare_results
    from jaxrun.present.reports.html_page import render_report

    require("report")  # the report's figures: before the run is read

    if output is not None:  # found before the run is read, never after (result_files.check_output_file)
        result_files.check_output_file(output, "the report (--output)")
    batch, comparison, base = _ab_folder(Path(results_dir)) if baseline is None else (None, None, None)
    if batch is None:
        batch = read_batch(Path(results_dir))
        comparison = compare_results(baseline, results_dir) if baseline is not None else None
    target = Path(output) if output is not None else Path(results_dir) / REPORT_FILE
    try:
        result_files.atomic_write_text(target, render_report(batch, comparison, base))
    except OSError as exc:
        raise UsageError(f"cannot write the report {str(target)!r}: {exc.strerror or exc}") from None
    return target
