"""The HTML report's layout as a reader sees it in a 1400 px wide headless Chromium (helpers.chrome):
the page never scrolls sideways, its tables fit it, no figure ("196 ms") is split over two lines,
and the comparison plot's verdict labels stand clear of the bars and their CI whiskers (jaxrun ab's
report: `jaxrun report` of its folder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import chrome, jaxrun, open_page, read_page, write

pytest.importorskip("plotly")

# Programs with long names, a deep folder: the widest a row of the programs table gets, short of
# names no window holds.
WIDE = """\
import jax, jax.numpy as jnp

def normalise_the_observations_of_every_environment_in_the_batch(x):
    return (x - x.mean()) / (x.std() + 1e-6)

def accumulate_the_discounted_returns_over_the_whole_episode(x):
    return jnp.cumsum(x[::-1])[::-1] * 0.99

for n in (8, 16):
    jax.jit(normalise_the_observations_of_every_environment_in_the_batch)(jnp.arange(n, dtype=jnp.float32))
    jax.jit(accumulate_the_discounted_returns_over_the_whole_episode)(jnp.ones(n))
"""
SLEEPS = "if False:\n    import jax\nimport time\ntime.sleep({seconds})\n"

# Per element of the page: whether it fits, and which figure cells (every td not marked text)
# show their text on more than one line.
_MEASURE = """
var page = document.documentElement;
var out = {viewport: page.clientWidth, scroll: page.scrollWidth, tables: {}};
document.querySelectorAll('table').forEach(function (table, i) {
  var box = table.getBoundingClientRect();
  var split = [];
  table.querySelectorAll('td:not(.text)').forEach(function (cell) {
    var range = document.createRange();
    range.selectNodeContents(cell);
    var tops = new Set(Array.from(range.getClientRects()).map(function (r) { return Math.round(r.top); }));
    if (tops.size > 1) { split.push(cell.textContent); }
  });
  out.tables[table.id || table.className || ('table ' + i)] = {right: box.right, cells: table.querySelectorAll('td').length, split: split};
});
return JSON.stringify(out);
"""


def _measure(page: Path) -> dict:  # type: ignore[type-arg]
    measured, _ = read_page(page, "table#programs tbody tr", _MEASURE)  # 1400 px wide
    return json.loads(measured)


@pytest.mark.slow
def test_at_1400_px_the_tables_fit_the_page_and_no_figure_is_split(tmp_path: Path) -> None:
    write(tmp_path / "s" / "a_folder_of_environments" / "with_a_second_level", "rollouts_of_the_batch.py", WIDE)
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--device", "cpu",
                  "--report", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = _measure(tmp_path / "r" / "report.html")
    assert seen["scroll"] <= seen["viewport"], seen  # the page never scrolls sideways
    tables = seen["tables"]
    assert {"scripts", "programs"} <= set(tables) and tables["programs"]["cells"] >= 24, tables
    for name, table in tables.items():
        assert table["right"] <= seen["viewport"], (name, table)  # within the page, no scroll box needed
        assert table["split"] == [], (name, table["split"])  # "196 ms", never "196" over "ms"


@pytest.mark.slow
def test_the_ab_reports_verdict_labels_stand_clear_of_the_bars_and_their_cis(tmp_path: Path) -> None:
    for name, new in (("slow.py", 0.08), ("same.py", 0.05)):
        write(tmp_path / "A", name, SLEEPS.format(seconds=0.05))
        write(tmp_path / "B", name, SLEEPS.format(seconds=new))
    done = jaxrun("ab", tmp_path / "A", tmp_path / "B", "--pairs", "6", "--warmup-pairs", "0", "--alpha", "0.05",
                  "--results-dir", tmp_path / "r", "-q", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert jaxrun("report", tmp_path / "r", "-o", tmp_path / "r.html").returncode == 0
    driver = chrome()
    try:
        open_page(driver, tmp_path / "r.html", "#figure-comparison .main-svg")
        shapes = json.loads(driver.execute_script("""
            function rects(selector) {
              return Array.from(document.querySelectorAll('#figure-comparison ' + selector)).map(function (e) {
                var r = e.getBoundingClientRect();
                return {text: e.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom};
              }).filter(function (r) { return r.right > r.left && r.bottom > r.top; });  // drawn, not empty
            }
            return JSON.stringify({labels: rects('g.barlayer text, g.scatterlayer text').filter(function (r) { return r.text; }),
                                   bars: rects('g.barlayer g.point path'), whiskers: rects('g.errorbar path')});
        """))
    finally:
        driver.quit()
    labels, bars, whiskers = shapes["labels"], shapes["bars"], shapes["whiskers"]
    assert len(bars) == 2 and len(labels) == 2 and len(whiskers) == 2, shapes  # a bar, its CI and its verdict per script
    assert {label["text"] for label in labels} <= {"slower", "faster", "no significant change", "too few runs to judge"}

    def overlap(a: dict, b: dict) -> bool:  # type: ignore[type-arg]
        return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]

    for label in labels:
        for shape in bars + whiskers:
            assert not overlap(label, shape), (label, shape)
    # ... and each label stands over its own bar, not between two.
    for label in labels:
        middle = (label["left"] + label["right"]) / 2
        assert any(bar["left"] <= middle <= bar["right"] for bar in bars), (label, bars)
