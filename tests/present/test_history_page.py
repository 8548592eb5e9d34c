"""``jaxrun report --history``: the page of the history over commits, read in headless Chromium.
The history's runs are recorded with known medians (a 15 % step at a known commit, on one host;
no step on another), one change is kept as confirmed, and what the page draws and lists is checked
against the history's rows: the points plotted, their commits, the change line and its label,
the table of changes (the terminal's cells) and each series' table of runs."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
from helpers import jaxrun, make_run, read_page

from jaxrun.judge.history import HistoryStore
from jaxrun.present.view.changes_view import CHANGE_COLUMNS, change_cells
from jaxrun.results.figures import format_metric
from jaxrun.results.models import ChangeCheck

READ = """
const read = (id) => { const f = document.getElementById(id);
  return {names: f.data.map(t => t.name), y: f.data.map(t => Array.from(t.y)),
          ticks: Array.from(f.layout.xaxis.ticktext), lines: (f.layout.shapes || []).map(s => s.x0),
          labels: (f.layout.annotations || []).map(a => a.text), title: f.layout.title.text}; };
const cells = (table) => Array.from(table.rows).map(r => Array.from(r.cells).map(c => c.innerText.trim()));
return {series: [read('figure-series-1'), read('figure-series-2')],
        changes: cells(document.getElementById('changes')),
        runs: cells(document.getElementById('runs-1')),
        headings: Array.from(document.querySelectorAll('section h2')).map(h => h.textContent)};
"""


def _record(db: Path) -> None:
    rng = np.random.default_rng(1)
    with HistoryStore(db) as store:
        for i in range(12):  # c07 made it 15 % slower on hostA; hostB's runs never changed
            level = 1.15 if i >= 7 else 1.0
            store.record(make_run([float(w) for w in rng.normal(level, 0.01, 5)], commit=f"c{i:02d}", host="hostA",
                                  at=f"2026-11-{1 + i:02d}T00:00:00+00:00"))
        for i in range(8):
            store.record(make_run([float(w) for w in rng.normal(2.0, 0.02, 5)], commit=f"c{i:02d}", host="hostB",
                                  at=f"2026-11-{1 + i:02d}T12:00:00+00:00"))
        (change,) = store.changes(metric="wall_time")
        store.record_check(change, ChangeCheck(script_path=change.script_path, metric="wall_time", before_commit="c06",
                                               after_commit="c07", verdict="confirmed", ratio=1.149, ratio_ci_low=1.13,
                                               ratio_ci_high=1.17, p_value=0.0039, pairs=9, checked_at="2026-11-20"))


def test_the_page_draws_and_lists_the_historys_rows(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    _record(db)
    page = tmp_path / "page.html"
    done = jaxrun("report", "--history", db, "--metric", "wall_time", "-o", page)
    assert done.returncode == 0 and f"history page written to {page}" in done.stdout.replace("\n", ""), done.stderr
    with HistoryStore(db, create=False) as store:
        (change,) = store.changes(metric="wall_time")
        runs = {host: [r for r in store.runs() if r.host == host] for host in ("hostA", "hostB")}
    medians = {host: [statistics.median(s.wall_time for s in r.samples if not s.warmup) for r in rs]
               for host, rs in runs.items()}

    read, errors = read_page(page, "#figure-series-2 .main-svg", READ)
    assert errors == []
    first, second = read["series"]
    points = first["names"].index("each run's median")
    assert first["y"][points] == medians["hostA"] and second["y"][points] == medians["hostB"]
    assert first["ticks"] == [f"c{i:02d}" for i in range(12)] and second["ticks"] == [f"c{i:02d}" for i in range(8)]
    # The change line is between run 7 (c06) and run 8 (c07), labelled with its commit, size and check.
    assert first["lines"] == [7.5] and first["labels"] == [f"c07 +{change.change * 100:.1f} %, confirmed"]
    assert second["lines"] == [] and second["labels"] == []
    levels = first["y"][first["names"].index("level between changes")]
    assert levels == [float(np.mean(medians["hostA"][:7]))] * 7 + [float(np.mean(medians["hostA"][7:]))] * 5
    # The table of changes is the terminal's: the same columns and cells, the confirmation included.
    assert read["changes"] == [[name for name, _, _ in CHANGE_COLUMNS], change_cells(change)]
    assert read["changes"][1][-1].startswith("confirmed; after / before 1.149 (1.130 – 1.170), 9 pairs")
    # Each series' runs: their ids, commits and medians as the history holds them.
    assert [row[1] for row in read["runs"][1:]] == [str(r.id) for r in runs["hostA"]]
    assert [row[3] for row in read["runs"][1:]] == [f"c{i:02d}" for i in range(12)]
    assert [row[5] for row in read["runs"][1:]] == [format_metric("wall_time", m) for m in medians["hostA"]]
    assert read["headings"][0].startswith("where wall_time changed")


def test_the_page_of_a_history_without_changes_and_its_usage_errors(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    with HistoryStore(db) as store:
        for i in range(4):
            store.record(make_run([1.0, 1.01, 0.99], commit=f"c{i}", at=f"2026-11-0{1 + i}T00:00:00+00:00"))
    page = tmp_path / "page.html"
    assert jaxrun("report", "--history", db, "-o", page).returncode == 0
    text = page.read_text()
    assert "id='no-change'" in text and "no change in run_time" in text and "figure-series-1" in text
    for args, said in ((("--history", db, tmp_path), "leave RESULTS_DIR"), (("--since", "2026"), "--since goes with --history"),
                       ((), "give a results folder"), (("--history", tmp_path / "none.sqlite"), "no history database")):
        done = jaxrun("report", *args)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
