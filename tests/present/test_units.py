"""Units say what they hold. Every memory figure jaxrun reports is in MiB (2^20 bytes: the ground
truth is in tests/run/test_memory.py), and every surface that shows one says MiB, never MB: the
terminal's tables, the run log's seed line, Markdown as a GFM parser reads it, the HTML report
(columns, cards, the plot's axis), the exports' unit, the JSON Schemas of the result files and of
the MCP tools' replies. A size the user types means what its unit says (kB/MB/GB decimal,
KiB/MiB/GiB and a bare K/M/G binary), for every option that takes one, and a size a message
prints is in binary units, named. Real subprocesses throughout."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import jaxrun, mcp_plain, mcp_session, tables, write

from jaxrun.config.option_spec import flag_of
from jaxrun.config.options import RunOptions
from jaxrun.core.validate import SIZE_UNITS_HELP

MB_WORD = re.compile(r"\bMB\b")
# Every memory figure of the result files and the MCP replies, by its (kept) field name.
MEMORY_FIELD = re.compile(r"memory_peak$|_mb$|memory_usage$|^device_peaks$")

HOLDS = """\
if False:
    import jax
import numpy as np
block = np.ones(20 * 2**20 // 8)
print("ok")
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of one script that holds 20 MiB, each with every output the run writes."""
    pytest.importorskip("plotly")
    root = tmp_path_factory.mktemp("units")
    write(root / "s", "holds.py", HOLDS)
    for side in ("r1", "r2"):
        done = jaxrun("run", root / "s", "--device", "cpu", "--no-history", "--no-compile-cache", "--results-dir",
                      root / side, "--markdown", root / f"{side}.md", "--export-json", root / f"{side}.json", "--report",
                      "-v", env={"COLUMNS": "200"})
        assert done.returncode == 0, done.stderr
        (root / f"{side}.out").write_text(done.stdout + done.stderr)
    return root


def _peak(runs: Path) -> float:
    (result,) = (runs / "r1" / "script_results").glob("*_result.json")
    return json.loads(result.read_text())["memory_peak"]


def test_the_terminal_and_the_run_log_say_mib(runs: Path) -> None:
    out = (runs / "r1.out").read_text()
    header = next(line for line in out.splitlines() if line.startswith("script "))
    assert header.split()[-1] == "MiB" and "RSS MiB" in header, header
    assert not MB_WORD.search(out), out
    # The seed's line, on the logger and in the run log: the peak, rounded, in MiB.
    log = (runs / "r1" / "jax_execution_log.txt").read_text()
    (memory,) = re.findall(r"Script executed successfully: holds\.py \([\d.]+s, (\d+)MiB\)", log)
    assert int(memory) == round(_peak(runs)) and f", {memory}MiB)" in out
    assert not MB_WORD.search(log)


def test_markdown_and_the_exports_say_mib(runs: Path) -> None:
    text = (runs / "r1.md").read_text()
    header = tables(text)["Every script"][0]
    assert "peak RSS MiB" in header, header
    assert not MB_WORD.search(text)
    assert json.loads((runs / "r1.json").read_text())["unit"] == {"time": "s", "memory_peak": "MiB", "live_array_bytes": "B",
                                                                     "device_energy": "J", "host_energy": "J"}


def test_a_comparison_says_mib_in_the_terminal_and_in_markdown(runs: Path) -> None:
    done = jaxrun("compare", runs / "r1", runs / "r2", "--export-markdown", runs / "compare.md", env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    memory = next(line for line in done.stdout.splitlines() if " memory " in line)
    assert re.search(r"[\d.]+ MiB +[\d.]+ MiB", memory), memory
    rows = next(rows for heading, rows in tables((runs / "compare.md").read_text()).items() if "compare" in heading)
    (row,) = [r for r in rows if r[2] == "memory"]
    assert row[3].endswith(" MiB") and row[4].endswith(" MiB"), row
    assert not MB_WORD.search(done.stdout + (runs / "compare.md").read_text())


class _Visible(HTMLParser):
    """The text a reader sees (scripts and styles left out), and the table#scripts' header."""

    def __init__(self) -> None:
        super().__init__()
        self.text, self.header, self._hidden, self._th = [], [], 0, None  # type: ignore[var-annotated]

    def handle_starttag(self, tag: str, attrs: list) -> None:  # type: ignore[type-arg]
        self._hidden += tag in ("script", "style")
        self._th = "" if tag == "th" else self._th

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in ("script", "style")
        if tag == "th" and self._th is not None:
            self.header.append(self._th)
            self._th = None

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.text.append(data)
            if self._th is not None:
                self._th += data


def test_the_html_report_says_mib_in_its_cards_columns_and_plot(runs: Path) -> None:
    html = (runs / "r1" / "report.html").read_text()
    page = _Visible()
    page.feed(html)
    visible = " ".join(page.text)
    assert "peak MiB" in page.header and re.search(r"\d+ MiB\s*largest peak", visible), (page.header, visible[:500])
    assert not MB_WORD.search(visible)
    # The memory plot, as plotly is given it: its bars' names and its axis.
    decoder = json.JSONDecoder()
    at = html.index('"figure-memory",') + len('"figure-memory",')
    data, end = decoder.raw_decode(html, at + len(html[at:]) - len(html[at:].lstrip()))
    rest = html[end:].lstrip().removeprefix(",").lstrip()
    layout, _ = decoder.raw_decode(rest)
    assert [bar["name"] for bar in data] == ["host peak (MiB)"] and data[0]["y"] == [_peak(runs)]
    assert layout["yaxis"]["title"]["text"] == "MiB (2^20 bytes)"


def _described(schema: object, path: str = "") -> list[tuple[str, str, str]]:
    """(path, property name, description) of every property of a JSON Schema, nested ones too."""
    found: list[tuple[str, str, str]] = []
    if isinstance(schema, dict):
        for name, prop in (schema.get("properties") or {}).items():
            if isinstance(prop, dict):
                found.append((f"{path}.{name}", name, prop.get("description", "")))
        for key, value in schema.items():
            found += _described(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found += _described(value, f"{path}[{i}]")
    return found


def _say_mib(properties: list[tuple[str, str, str]], memory_field: re.Pattern = MEMORY_FIELD) -> None:
    memory = [(path, d) for path, name, d in properties if memory_field.search(name)]
    assert memory
    assert [path for path, d in memory if "MiB (2^20 bytes)" not in d and "MiB, 2^20 bytes" not in d] == []
    assert [(path, d) for path, _, d in properties if MB_WORD.search(d)] == []


def test_the_result_files_json_schemas_say_mib_for_every_memory_figure() -> None:
    done = jaxrun("schema")
    assert done.returncode == 0, done.stderr
    schemas = json.loads(done.stdout)
    properties = _described(schemas)
    _say_mib(properties)
    # The fields named for MB keep their names (the seed's), and say the unit they hold.
    names = {name for _, name, _ in properties}
    assert {"memory_peak", "peak_memory_mb", "peak_device_memory_mb", "host_peak_mb", "device_memory_peak"} <= names
    # Models' own descriptions (a statistics block: its figures are in its metric's unit) too.
    descriptions = [v for _, v in _walk(schemas) if isinstance(v, str)]
    assert not [d for d in descriptions if MB_WORD.search(d)]


def _walk(value: object, key: str = "") -> list[tuple[str, object]]:
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _walk(v, k)]
    if isinstance(value, list):
        return [pair for v in value for pair in _walk(v, key)]
    return [(key, value)] if key == "description" else []


@pytest.mark.slow
def test_the_mcp_tools_replies_say_mib(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio

    schemas: list[dict] = []

    async def body(session) -> None:  # type: ignore[no-untyped-def]
        schemas.extend(mcp_plain(t).get("outputSchema") or {} for t in (await session.list_tools()).tools)

    anyio.run(mcp_session, tmp_path, body)
    # The benchmark tool's medians hold seconds and, for memory_peak, MiB.
    _say_mib(_described(schemas), re.compile(MEMORY_FIELD.pattern + "|^median$"))
    assert not [d for _, d in _walk(schemas) if isinstance(d, str) and MB_WORD.search(d)]


# --- sizes the user types ------------------------------------------------------------------------

SIZE_OPTIONS = [name for name, field in RunOptions.fields.items()
                if (flag := flag_of(field)) is not None and flag.metavar == "SIZE"]


def test_the_size_options_are_the_ones_expected() -> None:
    assert set(SIZE_OPTIONS) == {"compile_cache_max_size", "memory_limit"}


@pytest.mark.slow
@pytest.mark.parametrize("name", SIZE_OPTIONS)
def test_each_size_option_reads_its_unit_as_it_says_and_its_help_says_how(tmp_path: Path, name: str) -> None:
    flag = "--" + name.replace("_", "-")
    write(tmp_path, "s.py", "if False:\n    import jax\n")
    expected = {"3GB": 3 * 10**9, "3gb": 3 * 10**9, "3GiB": 3 * 2**30, "3G": 3 * 2**30, "3g": 3 * 2**30,
                "1.5MB": 1_500_000, "1.5MiB": 3 * 2**19, "2048kB": 2_048_000, "2048KiB": 2**21, "2048K": 2**21,
                "1TB": 10**12, "1TiB": 2**40, "4000000": 4_000_000}
    for typed, size in expected.items():
        done = jaxrun("config", tmp_path, flag, typed, "--no-config", "--json")
        assert done.returncode == 0, (typed, done.stderr)
        assert json.loads(done.stdout)["settings"][name]["value"] == size, typed
    # The same from a config file and from the environment.
    write(tmp_path, "jaxrun.toml", f'{name} = "2GB"\n')
    assert json.loads(jaxrun("config", tmp_path, "--json").stdout)["settings"][name]["value"] == 2 * 10**9
    variable = f"JAXRUN_{name.upper()}"
    shown = jaxrun("config", tmp_path, "--no-config", "--json", env={variable: "2GiB"})
    assert json.loads(shown.stdout)["settings"][name]["value"] == 2 * 2**30, shown.stderr
    help_text = " ".join(jaxrun("run", "--help").stdout.split())
    own = re.search(re.escape(flag) + r" SIZE (.*?)(?= --[a-z])", help_text)
    assert own and SIZE_UNITS_HELP in own.group(1), help_text


def test_a_size_below_its_floor_is_said_in_binary_units_before_anything_runs(tmp_path: Path) -> None:
    script = write(tmp_path / "s", "never.py", "if False:\n    import jax\nopen('ran', 'w').write('1')\n")
    done = jaxrun("run", script, "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r",
                  "--memory-limit", "0.5MB")
    assert done.returncode == 2 and not (tmp_path / "r").exists() and not (script.parent / "ran").exists()
    (line,) = done.stderr.strip().splitlines()
    assert line == "jaxrun: error: memory_limit must be at least 1 MiB, got '0.5MB' (488 KiB)", line
    done = jaxrun("run", script, "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r",
                  "--memory-limit", "4 parsecs")
    assert done.returncode == 2 and SIZE_UNITS_HELP in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_log_cap_takes_a_size_and_a_bad_one_is_refused_before_anything_runs(tmp_path: Path) -> None:
    script = write(tmp_path / "s", "chatty.py", "if False:\n    import jax\nprint('x' * 5000)\n")
    done = jaxrun("run", script, "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r",
                  env={"JAXRUN_LOG_CAP_BYTES": "1kB"})
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "r" / "logs" / "chatty.stdout.log").read_text()
    assert log.startswith("x" * 1000 + "\n[jaxrun: log truncated at 1000 bytes;"), log[:1100]
    bad = jaxrun("run", script, "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r2",
                 env={"JAXRUN_LOG_CAP_BYTES": "lots"})
    assert bad.returncode == 2 and not (tmp_path / "r2").exists()
    assert bad.stderr.startswith("jaxrun: error: JAXRUN_LOG_CAP_BYTES must be a size like ")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_messages_and_cache_info_print_sizes_in_binary_units(tmp_path: Path) -> None:
    done = jaxrun("cache", "info", "--compile-cache", tmp_path / "none")
    assert done.returncode == 0, done.stderr
    assert "0 B of at most 4 GiB" in done.stdout and not re.search(r"\b[MG]B\b", done.stdout), done.stdout
    from jaxrun.core.formatting import fmt_bytes
    from jaxrun.results.figures import format_metric as fmt_metric

    # Never an exponent, never a unit without its i.
    assert [fmt_bytes(1023 * 2**20), fmt_bytes(1040 * 2**20, 4), fmt_bytes(300 * 2**20)] == [
        "1023 MiB", "1.016 GiB", "300 MiB"]
    assert fmt_metric("memory_peak", 12345.6) == "12346 MiB" and fmt_metric("memory_peak", 512.23) == "512.2 MiB"


def test_a_script_over_its_memory_limit_is_said_in_mib(tmp_path: Path) -> None:
    script = write(tmp_path / "s", "grows.py", "if False:\n    import jax\nimport time\nimport numpy as np\n"
                   "blocks = []\nfor _ in range(40):\n    blocks.append(np.ones(25 * 2**20 // 8))\n    time.sleep(0.05)\n")
    done = jaxrun("run", script, "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r",
                  "--memory-limit", "200MiB", env={"JAXRUN_NO_CGROUP": "1"})
    assert done.returncode == 1, done.stderr
    (result_file,) = (tmp_path / "r" / "script_results").glob("*_result.json")
    result = json.loads(result_file.read_text())
    assert result["error_class"] == "out_of_memory"
    said = re.fullmatch(r"stopped at ([\d.]+) MiB: over the memory limit of 200 MiB", result["error_message"])
    assert said and 200 < float(said.group(1)) < 400 and abs(float(said.group(1)) - result["memory_peak"]) < 1, \
        result["error_message"]
    assert not MB_WORD.search(done.stdout + done.stderr)
