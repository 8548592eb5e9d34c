"""`--export-json`, `--export-csv`, `--export-markdown` of `jaxrun run` and `jaxrun compare`: the raw
samples in the JSON are the benchmark's own, the CSV and Markdown hold one row per script (and
phase, for a comparison)."""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

import pytest
from helpers import jaxrun, load, markdown_tables, write

SLEEPS = "if False:\n    import jax\nimport time\ntime.sleep({seconds})\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two benchmarked batches, the second sleeping twice as long, with their exports."""
    folder = tmp_path_factory.mktemp("exports")
    _run(folder, "base", 0.1)
    _run(folder, "new", 0.2)
    return folder


def _run(tmp_path: Path, label: str, seconds: float) -> Path:
    write(tmp_path / label, "a_short.py", SLEEPS.format(seconds=seconds))
    write(tmp_path / label, "b_shorter.py", SLEEPS.format(seconds=seconds / 2))
    out = tmp_path / f"{label}_results"
    done = jaxrun("run", tmp_path / label, "--results-dir", out, "--no-history", "--benchmark-runs", 3,
                   "--export-json", tmp_path / f"{label}.json", "--export-csv", tmp_path / f"{label}.csv",
                   "--export-markdown", tmp_path / f"{label}.md")
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.slow  # the module's two benchmarked batches (the runs fixture): ~3 s on an idle 2-core machine
def test_run_exports_hold_every_raw_sample_and_one_row_per_script(runs: Path) -> None:
    tmp_path, out = runs, runs / "base_results"
    exported = load(tmp_path / "base.json")
    benchmarks = {b["script_name"]: b for b in load(out / "jax_benchmark_results.json")["benchmarks"]}
    assert [r["command"] for r in exported["results"]] == ["a_short.py", "b_shorter.py"]  # as the summary names them
    assert [r["name"] for r in exported["results"]] == ["a_short", "b_shorter"]  # their files' <name>
    for row in exported["results"]:
        walls = [s["wall_time"] for s in benchmarks[row["name"]]["samples"]]
        assert row["times"] == walls and row["runs"] == 3 and row["benchmarked"] is True
        assert row["mean"] == statistics.fmean(walls) and row["median"] == statistics.median(walls)
        assert row["min"] == min(walls) and row["max"] == max(walls)
        assert row["samples"]["run_time"] == [s["run_time"] for s in benchmarks[row["name"]]["samples"]]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "base.csv").read_text())))
    assert [r["script"] for r in rows] == ["a_short.py", "b_shorter.py"]
    assert float(rows[0]["median"]) == exported["results"][0]["median"]
    assert float(rows[0]["median_run_time"]) == statistics.median(exported["results"][0]["samples"]["run_time"])
    markdown = (tmp_path / "base.md").read_text()
    assert "| a_short.py | ok |" in markdown and "| b_shorter.py | ok |" in markdown


@pytest.mark.slow  # the runs fixture, as above
def test_compare_exports_the_report_with_both_sides_samples(runs: Path, tmp_path: Path) -> None:
    base, new = runs / "base_results", runs / "new_results"
    done = jaxrun("compare", base, new, "--metric", "run_time", "--json", "--export-json", tmp_path / "c.json",
                   "--export-csv", tmp_path / "c.csv", "--export-markdown", tmp_path / "c.md")
    assert done.returncode == 0, done.stderr
    exported = load(tmp_path / "c.json")
    assert exported["comparison"] == json.loads(done.stdout)
    new_samples = {s["name"]: s["samples"] for s in exported["samples"]["new"]}
    assert sorted(s["script"] for s in exported["samples"]["new"]) == ["a_short.py", "b_shorter.py"]
    bench = {b["script_name"]: b for b in load(new / "jax_benchmark_results.json")["benchmarks"]}
    assert new_samples["a_short"]["run_time"] == [s["run_time"] for s in bench["a_short"]["samples"]]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "c.csv").read_text())))
    phases = exported["comparison"]["scripts"][0]["phases"]
    assert len(rows) == 2 * len(phases)
    gate = [r for r in rows if r["gate"] == "True"]
    assert [(r["script"], r["metric"]) for r in gate] == [("a_short.py", "run_time"), ("b_shorter.py", "run_time")]
    assert all(float(r["ratio"]) > 1.5 for r in gate)  # twice the sleep
    (table,) = markdown_tables((tmp_path / "c.md").read_text())
    gate_rows = [r for r in table[1:] if r[2] == "run *"]
    assert [(r[0].split(" → ")[0], r[1]) for r in gate_rows] == [("a_short.py", "cpu"), ("b_shorter.py", "cpu")]  # not "auto"; named as the summary names them
    assert all(r[3].endswith(" ms") and r[4].endswith(" ms") for r in gate_rows)  # 0.1 s and 0.2 s sleeps


def test_an_export_path_that_cannot_be_written_is_refused_before_running(tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", SLEEPS.format(seconds=0))
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history",
                   "--export-json", tmp_path / "missing" / "x.json")
    assert done.returncode == 2 and "cannot write the export" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "script_results").exists()


def test_comparison_markdown_has_readable_headers_and_figures_with_units() -> None:
    from jaxrun.outputs.exports import comparison_markdown
    from jaxrun.results.models import (
        ComparisonReport,
        PhaseComparison,
        ScriptComparison,
    )

    def phase(metric, base, new, ratio, verdict, p=0.004, low=None, high=None, note=None):
        return PhaseComparison(metric=metric, base_n=5, new_n=5, base_median=base, new_median=new, ratio=ratio,
                               ratio_ci_low=low, ratio_ci_high=high, p_value=p, verdict=verdict, note=note)

    report = ComparisonReport(
        base="runs/base", new="runs/new", metrics=["wall_time", "run_time", "memory_peak"],
        gate=["run_time", "compile_time"], alpha=0.01, min_effect=0.05,
        scripts=[
            ScriptComparison(script_name="sub__model", device="cpu", verdict="slower", gate=["run_time"],
                             slower=["run_time"], phases={
                                 "wall_time": phase("wall_time", 1.234, 1.5, 1.2156, "no significant change", p=0.2),
                                 "run_time": phase("run_time", 0.0123, 0.0246, 2.0, "slower", low=1.91, high=2.1),
                                 "memory_peak": phase("memory_peak", 512.25, 600.0, 1.1713, "not comparable",
                                                      p=None, note="memory | bytes"),
                             }),
        ],
        only_in_new=["extra"], regressions=["sub__model"], geometric_mean_ratio={"run_time": 2.0},
    )
    text = comparison_markdown(report)
    (table,) = markdown_tables(text)
    header, body = table[0], table[1:]
    assert header == ["Script", "Device", "Phase", "Base median", "New median", "Ratio (new/base)",
                      "95% CI of ratio", "p", "Runs (base/new)", "Could see", "Verdict"]
    # "Could see" is the paired test's (jaxrun ab); two independent samples say none: "-".
    assert body == [
        ["sub__model → slower", "cpu", "wall", "1.23 s", "1.5 s", "1.216", "-", "0.2", "5/5", "-",
         "no significant change"],
        ["sub__model → slower", "cpu", "run *", "12.3 ms", "24.6 ms", "2.000", "1.910 – 2.100", "0.004", "5/5", "-",
         "slower"],
        ["sub__model → slower", "cpu", "memory", "512.2 MiB", "600 MiB", "1.171", "-", "-", "5/5", "-",
         "not comparable (memory | bytes)"],
    ]
    assert "wall_time" not in text and "base_median" not in text  # no raw field names
    assert "Slower: sub__model; faster: none" in text.replace("\\", "")
    assert "Only in NEW: extra." in text and "Geometric mean of the ratios (NEW/BASE): run 2.000." in text
