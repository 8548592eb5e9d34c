"""The report's sweep section (present/reports/sweep_section.py), read as its reader sees it: in
headless Chromium, the table's cells and the plotted data of a real sweep of a JAX script. The
ground truth is what the run wrote: each point's result file, and the sweep view every surface
shares (present/view/sweep_view.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import chrome, load, open_page, write

from jaxrun.present.reports.sweep_section import x_parameter
from jaxrun.present.view.batch_view import read_batch
from jaxrun.present.view.sweep_view import sweep_views

pytest.importorskip("plotly")

# Reads its point with jaxrun.params(); a point of the second sweep fails (its gap in the plot).
SCRIPT = """\
import jax, jax.numpy as jnp
import jaxrun

p = jaxrun.params(mode="a")
if p["batch"] == 16 and p["mode"] == "b":
    raise RuntimeError("this point fails on purpose")
f = jax.jit(lambda x: (x @ x.T).sum())
print(f(jnp.ones((p["batch"], 64))), jax.device_count())
"""

# What the page holds of the sweep section: its heading, the table's cells, the figure's lines.
READ = """
const section = document.getElementById('sweep-1');
const figure = document.getElementById('figure-sweep-1');
return {
  heading: section.querySelector('h2').textContent,
  header: Array.from(section.querySelectorAll('table thead th')).map(th => th.textContent),
  rows: Array.from(section.querySelectorAll('table tbody tr')).map(tr => Array.from(tr.cells).map(td => td.textContent)),
  notes: Array.from(section.querySelectorAll('p.note')).map(p => p.textContent),
  lines: figure ? figure.data.map(t => ({name: t.name, x: t.x, y: t.y, plus: t.error_y.array,
                                         minus: t.error_y.arrayminus, bars: t.error_y.visible})) : null,
  xaxis: figure ? {type: figure.layout.xaxis.type, tickvals: figure.layout.xaxis.tickvals,
                   ticktext: figure.layout.xaxis.ticktext} : null,
  ytitle: figure ? figure.layout.yaxis.title.text : null,
  menu: figure ? figure.layout.updatemenus[0].buttons.map(b => b.label) : null,
};
"""


def _sweep(jaxrun_cli, root: Path, *params: str, runs: int = 0) -> Path:
    write(root, "s.py", SCRIPT)
    args = [a for p in params for a in ("--param", p)]
    done = jaxrun_cli.run("run", root / "s.py", *args, "--report", "--results-dir", root / "r", "--no-history",
                          *(["--benchmark-runs", runs] if runs else []), cwd=root, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return root / "r"


def _read(page: Path, click: str | None = None) -> dict:
    """The section as Chromium shows it; with ``click``, after picking that figure in the dropdown."""
    driver = chrome()
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        open_page(driver, page, "#sweep-1 table tbody tr")
        if driver.find_elements("css selector", "#figure-sweep-1"):
            open_page(driver, page, "#figure-sweep-1 .main-svg")
        read = driver.execute_script(READ)
        if click is not None:  # the reader opens the dropdown and picks a figure
            driver.find_element("css selector", "#figure-sweep-1 .updatemenu-header-group").click()
            buttons = driver.find_elements("css selector", "#figure-sweep-1 .updatemenu-dropdown-button")
            [button] = [b for b in buttons if b.get_attribute("textContent") == click]
            button.click()
            WebDriverWait(driver, 30).until(lambda d: d.execute_script(READ)["ytitle"] != read["ytitle"])
            read["after"] = driver.execute_script(READ)
        read["errors"] = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        return read
    finally:
        driver.quit()


@pytest.mark.slow  # six JAX runs and a browser: ~15 s
def test_a_sweep_over_batch_and_devices_is_a_table_and_a_plot_against_batch(tmp_path: Path, jaxrun_cli) -> None:
    results = _sweep(jaxrun_cli, tmp_path, "batch=8,16,32", "devices=1,2")
    files = {name: load(results / "script_results" / f"s[{name}]_result.json")
             for name in (f"batch={b},devices={d}" for b in (8, 16, 32) for d in (1, 2))}
    assert all(r["success"] and r["device_count"] == r["params"]["devices"] for r in files.values())
    [view] = sweep_views(read_batch(results))
    page = _read(results / "report.html", click="RSS")
    assert page["errors"] == []
    assert page["heading"] == "Sweep: s.py"
    # The table: a row per point, its parameters and the very cells the terminal writes.
    assert page["header"] == [c.label for c in view.columns]
    assert page["header"][:3] == ["batch", "devices", "status"] and "time" in page["header"]
    assert [row[:3] for row in page["rows"]] == [[str(b), str(d), "ok"] for b in (8, 16, 32) for d in (1, 2)]
    assert page["rows"] == [[p.text(c) for c in view.columns] for p in view.points]
    assert page["notes"] == view.notes
    # The plot: batch on a log2 axis labelled 8, 16, 32; a line per device count; y = each point's time.
    assert x_parameter(view) == "batch"  # the script's own parameter before jaxrun's devices
    assert page["xaxis"] == {"type": "log", "tickvals": [8, 16, 32], "ticktext": ["8", "16", "32"]}
    assert [line["name"] for line in page["lines"]] == ["devices=1", "devices=2"]
    assert page["menu"][:3] == ["time", "compile", "RSS"] and "FLOPs" in page["menu"]
    assert page["ytitle"] == "time (s)"
    for line in page["lines"]:
        devices = line["name"].removeprefix("devices=")
        points = [files[f"batch={b},devices={devices}"] for b in (8, 16, 32)]
        assert line["x"] == [8, 16, 32]
        assert line["y"] == [r["execution_time"] for r in points]
        assert line["bars"] is False  # one run per point: no CI to draw
    # Picking RSS in the dropdown plots each point's peak memory instead.
    after = page["after"]
    assert after["ytitle"] == "RSS (MiB (2^20 bytes))"
    for line in after["lines"]:
        devices = line["name"].removeprefix("devices=")
        assert line["y"] == [files[f"batch={b},devices={devices}"]["memory_peak"] for b in (8, 16, 32)]


@pytest.mark.slow  # a sweep run and its report read in headless Chromium: ~3.8 s on an idle 2-core machine
def test_a_sweep_of_no_numeric_parameter_is_a_table_that_says_why_there_is_no_plot(tmp_path: Path,
                                                                                   jaxrun_cli) -> None:
    results = _sweep(jaxrun_cli, tmp_path, "batch=8", "mode=a,c")
    page = _read(results / "report.html")
    assert page["errors"] == [] and page["lines"] is None
    assert [row[:3] for row in page["rows"]] == [["8", "a", "ok"], ["8", "c", "ok"]]
    assert page["notes"][-1].startswith("No plot: no parameter (batch, mode) takes only numbers, more than one of "
                                        "them, so none can be an x axis")


@pytest.mark.slow
def test_a_benchmarked_sweep_has_ci_bars_and_a_failed_point_is_a_gap(tmp_path: Path, jaxrun_cli) -> None:
    results = _sweep(jaxrun_cli, tmp_path, "batch=8,16,32", "mode=a,b", runs=3)
    page = _read(results / "report.html", click="compile")
    assert page["errors"] == []
    assert [row[2] for row in page["rows"]] == ["ok", "ok", "ok", "script_error", "ok", "ok"]
    assert [line["name"] for line in page["lines"]] == ["mode=a", "mode=b"]
    for line in page["lines"]:
        mode = line["name"].removeprefix("mode=")
        points = [load(results / "script_results" / f"s[batch={b},mode={mode}]_result.json") for b in (8, 16, 32)]
        assert line["bars"] is True and line["x"] == [8, 16, 32]
        for r, y, plus, minus in zip(points, line["y"], line["plus"], line["minus"]):
            if not r["success"]:  # left out of the line: null, never 0
                assert (r["params"], y, plus, minus) == ({"batch": 16, "mode": "b"}, None, None, None)
                continue
            wall = r["benchmark"]["statistics"]["wall_time"]
            assert y == r["execution_time"] == wall["median"]
            assert math.isclose(y + plus, wall["ci_high"]) and math.isclose(y - minus, wall["ci_low"])
    # The compile figure has its own bars and the failed point still is a gap.
    after = page["after"]
    assert after["ytitle"] == "compile (s)"
    assert after["lines"][1]["y"][1] is None and all(v is not None for v in after["lines"][0]["y"])
