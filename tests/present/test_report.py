"""`jaxrun report`: one self-contained HTML file, opened in a real headless Chromium."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import chrome, jaxrun, open_page, read_page, write

pytest.importorskip("plotly")

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"  # screenshots (git-ignored)

GOOD = """\
import jax, jax.numpy as jnp

f = jax.jit(lambda x: (x * x).sum())
for n in (3, 4):  # a second shape: a recompilation with a reason
    print(f(jnp.ones(n)))
"""
FAILS = "if False:\n    import jax\nimport sys\nprint('about to fail', file=sys.stderr)\nraise RuntimeError('on purpose')\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A benchmarked run of two scripts (one fails) and its report against an earlier run."""
    root = tmp_path_factory.mktemp("report")
    write(root / "s", "a_good.py", GOOD)
    write(root / "s", "b_fails.py", FAILS)
    for label in ("base", "new"):
        done = jaxrun("run", root / "s", "--results-dir", root / label, "--no-history", "--device", "cpu",
                       "--benchmark-runs", 2, "--markdown", root / f"{label}.md", *(["--report"] if label == "new" else []))
        assert done.returncode == 1, done.stderr
        (root / f"{label}.out").write_text(done.stdout)
    out = root / "with_baseline.html"
    done = jaxrun("report", root / "new", "-o", out, "--baseline", root / "base")
    assert done.returncode == 0, done.stderr
    return root, out


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[str] = []
        self.remote: list[str] = []
        self.sections: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "tr" and values.get("data-script"):
            self.rows.append(values["data-script"] or "")
        if tag in ("script", "link", "img") and (values.get("src") or values.get("href") or "").startswith("http"):
            self.remote.append(values.get("src") or values.get("href") or "")
        if tag == "section" and values.get("id"):
            self.sections.append(values["id"] or "")


@pytest.mark.slow
def test_the_report_is_one_self_contained_file(report: tuple[Path, Path]) -> None:
    root, out = report
    assert (root / "new" / "report.html").is_file()  # written by run --report
    text = out.read_text(encoding="utf-8")
    parsed = _Collect()
    parsed.feed(text)
    assert parsed.rows == ["a_good", "b_fails"]
    assert parsed.remote == []  # nothing loaded from the network
    assert parsed.sections == ["plot-time", "plot-memory", "plot-benchmarks", "plot-comparison"]
    assert text.count("Plotly.newPlot") == 4
    assert "<code>jit(&lt;lambda&gt;)</code>: traced 2 times" in text  # the retraced program
    assert "argument x changed f32[3] -&gt; f32[4]" in text  # and JAX's reason
    assert "RuntimeError: on purpose" in text and "about to fail" in text  # the failure and its log tail


def test_report_of_a_folder_without_results_is_one_clear_error(tmp_path: Path) -> None:
    done = jaxrun("report", tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "no jaxrun results" in done.stderr


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium_without_console_errors(report: tuple[Path, Path]) -> None:
    _, out = report
    driver = chrome()
    try:
        open_page(driver, out, "table#scripts tbody tr")
        rows = driver.find_elements("css selector", "table#scripts tbody tr")
        assert [r.get_attribute("data-script") for r in rows] == ["a_good", "b_fails"]
        # plotly drew every figure (an SVG per plot)
        assert len(driver.find_elements("css selector", "div.js-plotly-plot .main-svg")) >= 4
        def order() -> list[str]:
            return [r.get_attribute("data-script") for r in driver.find_elements("css selector", "table#scripts tbody tr")]

        # Wall time: the failing script (no JAX) is the quicker one.
        header = driver.find_elements("css selector", "table#scripts th")[3]
        header.click()
        assert order() == ["b_fails", "a_good"]  # ascending
        header.click()
        assert order() == ["a_good", "b_fails"]  # descending
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        assert driver.save_screenshot(str(ARTIFACTS / "report.png"))
    finally:
        driver.quit()


@pytest.mark.slow
def test_what_the_scripts_table_says_of_its_figures_is_true_of_every_row(report: tuple[Path, Path]) -> None:
    """A benchmarked run where a script fails: only the rows whose figures are medians say so (the
    failed row is the run that failed, not a median of counted runs), in the report as a reader
    sees it in Chromium, in the Markdown summary and on the terminal."""
    import json

    root, _ = report
    page = root / "new" / "report.html"
    driver = chrome()
    try:
        open_page(driver, page, "table#scripts tbody tr")
        caption = driver.find_element("css selector", "table#scripts caption").text
        header = [th.text for th in driver.find_elements("css selector", "table#scripts thead th")]
        rows = {tr.get_attribute("data-script"): [td.text for td in tr.find_elements("css selector", "td")]
                for tr in driver.find_elements("css selector", "table#scripts tbody tr")}
    finally:
        driver.quit()
    timings = {name: json.loads((root / "new" / "script_results" / f"{name}_result.json").read_text())["timing"]
               for name in rows}
    assert timings == {"a_good": "median of 2 counted runs", "b_fails": None}
    time_cell = header.index("time s")
    for name, cells in rows.items():  # a median is marked, one run's figure is not
        assert cells[time_cell].endswith(" *") is (timings[name] is not None), (name, cells[time_cell])
    # What the caption says covers each kind of row there is, and no more.
    assert caption == "* median of 2 counted runs; unmarked: one run's figures (a failed script's: the run that failed)"
    markdown = (root / "new.md").read_text()
    assert caption in markdown.splitlines() and "times: median" not in markdown
    assert [line for line in markdown.splitlines() if line.startswith("| a_good.py ")][0].split(" | ")[3].endswith("*")
    assert [line for line in markdown.splitlines() if line.startswith("| b_fails.py ")][-1].split(" | ")[3][-1].isdigit()
    terminal = " ".join((root / "new.out").read_text().split())
    assert caption in terminal and "times: median" not in terminal


@pytest.mark.slow
def test_the_programs_table_shows_what_xla_knows_of_each_program(report: tuple[Path, Path]) -> None:
    _, out = report
    driver = chrome()
    try:
        open_page(driver, out, "table#programs thead th")
        head = [th.text for th in driver.find_elements("css selector", "table#programs thead th")]
        rows = [[td.text for td in tr.find_elements("css selector", "td")]
                for tr in driver.find_elements("css selector", "table#programs tbody tr")]
        transfers = [[td.text for td in tr.find_elements("css selector", "td")]
                     for tr in driver.find_elements("css selector", "table#transfers tbody tr")]
        # The second sortable table on the page sorts by its own clicked column (FLOPs: 0, 0, 7).
        driver.find_elements("css selector", "table#programs thead th")[head.index("FLOPs")].click()
        flops = [tr.find_elements("css selector", "td")[head.index("FLOPs")].text
                 for tr in driver.find_elements("css selector", "table#programs tbody tr")]
    finally:
        driver.quit()
    cell = dict(zip(head, next(r for r in rows if r[:2] == ["a_good.py", "jit(<lambda>)"])))
    # (x * x).sum() of f32[4], the last executable built: 4 multiplies, then 3 adds to sum them
    assert cell["FLOPs"] == "7" and cell["compiled for"] == "cpu"
    assert flops == sorted(flops, key=float) and "7" in flops and len(flops) == len(rows)
    # Shapes 3 and 4: two executables, compiled or loaded from the persistent cache.
    assert cell["built"] in ("2 compiled, 2 variants", "1 compiled, 1 loaded, 2 variants", "2 loaded, 2 variants")
    assert len(cell["fingerprint"]) == 12 and cell["device memory"].endswith("B")
    # One row a script that used JAX; on CPU the guard sees no copy to the host: unknown, not 0.
    [(script, _, to_host, _, live, note)] = transfers
    assert script == "a_good.py" and to_host == "-" and live.endswith("B") and "CPU" in note


@pytest.mark.slow
def test_the_api_asks_for_the_report_as_the_cli_and_a_config_file_do(tmp_path: Path) -> None:
    """The report is one of the batch's outputs (a sink, asked for by the `report` option): the API
    gets it as `jaxrun run --report` does, the same file `jaxrun report` writes of that folder."""
    from jaxrun import run_jax_scripts

    write(tmp_path / "s", "a_good.py", "import jax.numpy as jnp\nprint(float(jnp.ones(3).sum()))\n")
    write(tmp_path / "s", "b_fails.py", "import jax\nraise RuntimeError('on purpose')\n")
    batch = run_jax_scripts(tmp_path / "s", results_dir=tmp_path / "r", history=False, report=True,
                            return_detailed_results=True)
    assert [r.success for r in batch.script_results] == [True, False]
    written = tmp_path / "r" / "report.html"
    parsed = _Collect()
    parsed.feed(written.read_text(encoding="utf-8"))
    assert parsed.rows == ["a_good", "b_fails"] and parsed.remote == []
    # What `jaxrun report` makes of the folder is that file, figure for figure.
    again = tmp_path / "again.html"
    done = jaxrun("report", tmp_path / "r", "--output", again)
    assert done.returncode == 0, done.stderr
    assert again.read_text(encoding="utf-8") == written.read_text(encoding="utf-8")
    # Not asked for: none written.
    run_jax_scripts(tmp_path / "s", results_dir=tmp_path / "r2", history=False)
    assert not (tmp_path / "r2" / "report.html").exists()


@pytest.mark.slow
def test_the_energy_plot_draws_each_scripts_counters_and_is_absent_without_them(tmp_path: Path) -> None:
    """The report's energy: each script's GPU and host joules as bars, the results' own values.
    No counter can be read on this machine (no NVIDIA GPU, no RAPL), so the results of a real run
    are given the figures a GPU machine records (recorded values) before the report reads them."""
    import json

    write(tmp_path / "s", "a.py", "if False:\n    import jax\nprint(1)\n")
    write(tmp_path / "s", "b.py", "if False:\n    import jax\nprint(2)\n")
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history")
    assert done.returncode == 0, done.stderr
    plain = tmp_path / "plain.html"
    assert jaxrun("report", tmp_path / "r", "-o", plain).returncode == 0
    assert "figure-energy" not in plain.read_text()  # no counter: no plot of nothing (the results say why)

    path = tmp_path / "r" / "jax_execution_results.json"
    batch = json.loads(path.read_text())
    recorded = {"a": (412.5, None, "the RAPL counters are not readable"), "b": (1930.0, 88.25, None)}
    for result in batch["script_results"]:
        device, host, reason = recorded[result["script_name"]]
        result.update(device_energy=device, device_power=device / 3.0, device_energy_reason=None,
                      host_energy=host, host_energy_reason=reason)
    path.write_text(json.dumps(batch))
    page = tmp_path / "energy.html"
    assert jaxrun("report", tmp_path / "r", "-o", page).returncode == 0
    bars, _ = read_page(page, "#figure-energy .main-svg",
                        "const f = document.getElementById('figure-energy');"
                        "return {bars: f.data.map(t => [t.name, Array.from(t.x), Array.from(t.y)]), axis: f.layout.yaxis.title.text};")
    assert bars["axis"] == "joules"
    assert bars["bars"] == [["GPU energy", ["a.py", "b.py"], [412.5, 1930.0]], ["host energy", ["a.py", "b.py"], [None, 88.25]]]
