"""Figures declared once (jaxrun.results.figures): what is made from a declaration, and the two
figures added through it, each checked against a value the test controls: a program's FLOPs per
byte (a matmul of n x n f32: 2n^3 FLOPs over 3 n^2 x 4 bytes = n/6), and a script's live array
bytes as a sample metric (an array of known size kept alive) in the benchmark, the history and
``jaxrun compare``."""

from __future__ import annotations

import json
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import jaxrun, load, write

from jaxrun.judge import history, history_schema
from jaxrun.judge.verdicts import DEFAULT_GATE, PHASES
from jaxrun.results import figures, program_figures
from jaxrun.results.models import (
    RESULT_FIELDS,
    SAMPLE_METRICS,
    CompileStats,
    RunSample,
    ScriptResult,
)

N = 64
MATMUL = f"""import jax, jax.numpy as jnp
a = jnp.ones(({N}, {N}), jnp.float32)
matmul = jax.jit(lambda x, y: x @ y)
matmul(a, a).block_until_ready()
del a
"""
KEPT = 1_000_000  # f32 elements the sampled-figure script keeps alive: 4 bytes each


def _keeps(elements: int) -> str:
    return f"import jax.numpy as jnp\nkept = jnp.zeros({elements}, jnp.float32)\n"


# --- made from the declarations ---------------------------------------------------------------


def test_the_tables_of_names_are_made_from_the_declarations() -> None:
    sampled = [f for f in figures.SCRIPT_FIGURES if f.sampled]
    assert SAMPLE_METRICS == tuple(f.name for f in sampled)
    assert RESULT_FIELDS == {f.name: f.field for f in figures.SCRIPT_FIGURES}
    assert set(RESULT_FIELDS.values()) <= set(ScriptResult.model_fields)
    # RunSample: the run's identity, then one field per figure, in declaration order.
    assert list(RunSample.model_fields) == ["index", "warmup", "success", "error_class", "setup_padding",
                                            *(f.name for f in figures.SCRIPT_FIGURES)]
    assert PHASES == ("wall_time", "import_time", "compile_time", "run_time", "memory_peak")
    assert DEFAULT_GATE == ("run_time", "compile_time")
    # An older name is still read, into the figure that replaced it.
    assert RunSample.model_validate({"index": 1, "warmup": False, "success": True, "steady_time": 0.5}).run_time == 0.5
    assert RunSample.__name__ == "RunSample" and RunSample.__module__ == "jaxrun.results.run_samples"


def test_the_run_sample_schema_keeps_every_older_field_as_it_was() -> None:
    schema = RunSample.model_json_schema()
    props = schema["properties"]
    assert schema["title"] == "RunSample" and schema["additionalProperties"] is False
    for name, described in (("wall_time", "Seconds, whole process"), ("memory_peak", "MiB (2^20 bytes), peak RSS "
                            "of the process tree"), ("cpu_time", "Seconds of CPU (user+sys) of the process tree")):
        assert props[name] == {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None,
                               "description": described}


def test_each_figure_is_written_with_its_unit() -> None:
    assert figures.format_metric("memory_peak", 512.23) == "512.2 MiB"
    assert figures.format_metric("run_time", 0.0123) == "12.3 ms"
    assert figures.format_metric("live_array_bytes", 4_000_000) == "3.81 MiB"
    assert figures.format_metric("steady_time", 2.0) == "2 s"  # an older name: its figure's unit
    assert figures.format_metric("live_array_bytes", None) == "-"
    assert [figures.metric_label(m) for m in ("wall_time", "memory_peak", "live_array_bytes")] == [
        "wall", "memory", "live arrays"]


def test_a_program_figure_is_null_not_zero_when_unknown() -> None:
    stats = CompileStats(count=1, compile_time=0.25)
    cells = dict(zip([f.name for f in program_figures.PROGRAM_FIGURES], (f.cell(stats) for f in program_figures.PROGRAM_FIGURES)))
    assert cells["jit"] == (0.25, "250 ms")
    assert cells["intensity"] == (None, "-") and cells["flops"] == (None, "-")
    assert cells["compile_share"] == (None, "-")  # no script result: no body to be a share of


# --- recipe 1: a per-program figure -------------------------------------------------------------


class _Programs(HTMLParser):
    """The report's table#programs: its headers, and each row's (shown text, data-value) cells."""

    def __init__(self) -> None:
        super().__init__()
        self.head: list[str] = []
        self.rows: list[list[tuple[str, str]]] = []
        self._inside = False
        self._cell: str | None = None
        self._value = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._inside = dict(attrs).get("id") == "programs"
        elif self._inside and tag == "tr":
            self.rows.append([])
        elif self._inside and tag in ("th", "td"):
            self._cell, self._value = "", dict(attrs).get("data-value") or ""

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._inside = False
        elif self._cell is not None and tag == "th":
            self.head.append(self._cell)
            self._cell = None
        elif self._cell is not None and tag == "td":
            self.rows[-1].append((self._cell, self._value))
            self._cell = None


def test_a_program_figure_is_a_column_of_the_report_and_of_run_v(tmp_path: Path) -> None:
    write(tmp_path / "s", "mm.py", MATMUL)
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--device", "cpu",
                  "--report", "-v", env={"COLUMNS": "320"})
    assert done.returncode == 0, done.stderr
    result = load(tmp_path / "r" / "script_results" / "mm_result.json")
    program = result["compiles"]["jit(<lambda>)"]
    # XLA's own counts of the last executable: 2n^3 FLOPs, reading two n x n f32 and writing one.
    assert program["cost"]["flops"] == 2 * N**3 and program["cost"]["bytes_accessed"] == 3 * N * N * 4
    parsed = _Programs()
    parsed.feed((tmp_path / "r" / "report.html").read_text(encoding="utf-8"))
    assert parsed.head[3:3 + len(program_figures.PROGRAM_FIGURES)] == [f.label for f in program_figures.PROGRAM_FIGURES]
    cells = dict(zip(parsed.head, next(row for row in parsed.rows if row and row[1][0] == "jit(<lambda>)")))
    assert float(cells["FLOP/byte"][1]) == pytest.approx(N / 6, rel=1e-12) and cells["FLOP/byte"][0] == "10.7"
    # The program's JIT work as a share of the script's body, both as the result file has them.
    jit = program["trace_time"] + program["lower_time"] + program["compile_time"] + program["cache_load_time"]
    share = float(cells["JIT share"][1])
    assert share == pytest.approx(jit / result["body_time"], rel=1e-12) and 0 < share < 1
    assert cells["JIT share"][0] == f"{share:.1%}"
    shares = [float(row[parsed.head.index("JIT share")][1]) for row in parsed.rows if row]
    assert sum(shares) <= 1  # every program's JIT work happened inside the body
    # `jaxrun run -v` has the same columns, with the same text.
    line = next(line for line in done.stdout.splitlines() if "jit(<lambda>)" in line)
    assert "FLOP/byte" in done.stdout and "JIT share" in done.stdout
    assert " 10.7 " in line and f" {share:.1%} " in line, line


# --- recipe 2: a per-script sampled figure ------------------------------------------------------


@pytest.mark.slow
def test_a_sampled_figure_is_benchmarked_kept_in_the_history_and_compared(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    script = write(tmp_path / "s", "keeps.py", _keeps(KEPT))
    for label, elements in (("r1", KEPT), ("r2", 2 * KEPT)):
        script.write_text(_keeps(elements))
        done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / label, "--history", db, "--device", "cpu",
                      "--benchmark-runs", 4, "--warmup-runs", 0)
        assert done.returncode == 0, done.stderr
        result = load(tmp_path / label / "script_results" / "keeps_result.json")
        # The array kept alive, to the byte, in every counted run and as the run's median.
        assert result["live_array_bytes"] == 4 * elements and isinstance(result["live_array_bytes"], int)
        bench = result["benchmark"]
        assert [s["live_array_bytes"] for s in bench["samples"]] == [4 * elements] * 4
        assert bench["statistics"]["live_array_bytes"]["median"] == 4 * elements
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT run_id, live_array_bytes FROM samples ORDER BY rowid").fetchall()
    assert [v for _, v in stored] == [4.0 * KEPT] * 4 + [8.0 * KEPT] * 4
    shown = jaxrun("history", tmp_path / "s" / "keeps.py", "--history", db, "--metric", "live_array_bytes",
                   env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert "3.81 MiB" in shown.stdout and "7.63 MiB" in shown.stdout, shown.stdout
    # NEW keeps twice the bytes of BASE in each of 4 runs: 4 vs 4 samples apart, p = 2/70 < 0.05.
    compared = jaxrun("compare", tmp_path / "r1", tmp_path / "r2", "--metric", "live_array_bytes", "--alpha", "0.05",
                      "--json")
    report = json.loads(compared.stdout)
    (row,) = report["scripts"]
    phase = row["phases"]["live_array_bytes"]
    assert (phase["base_median"], phase["new_median"], phase["ratio"]) == (4 * KEPT, 8 * KEPT, 2.0)
    assert phase["verdict"] == "slower" and row["gate"] == ["live_array_bytes"] and compared.returncode == 0
    table = jaxrun("compare", tmp_path / "r1", tmp_path / "r2", "--metric", "live_array_bytes", env={"COLUMNS": "200"})
    line = next(line for line in table.stdout.splitlines() if "live arrays *" in line)
    assert "3.81 MiB" in line and "7.63 MiB" in line and "2.000" in line, table.stdout


def test_a_database_from_before_a_figure_opens_with_its_column_added(tmp_path: Path) -> None:
    """A history written before live_array_bytes was a sample metric: its runs read back with
    the figure unknown (null, never 0), and new runs keep it."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in history_schema.MIGRATIONS:
        migration(conn)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(history_schema.SCHEMA_VERSION),))
    assert "live_array_bytes" not in {r[1] for r in conn.execute("PRAGMA table_info(samples)")}
    conn.execute("INSERT INTO runs (recorded_at, script_name, script_path, content_hash, host, device_requested, "
                 "jaxrun_version) VALUES ('2026-01-01T00:00:00Z', 'a', '/a.py', 'h', 'host', 'cpu', '0')")
    conn.execute("INSERT INTO samples (run_id, idx, warmup, success, wall_time, run_time) VALUES (1, 1, 0, 1, 2.0, 1.5)")
    conn.close()
    with history.HistoryStore(path) as store:
        (sample,) = store.get(1).samples
        assert (sample.wall_time, sample.run_time, sample.live_array_bytes) == (2.0, 1.5, None)
    with sqlite3.connect(path) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(samples)")]
    assert set(SAMPLE_METRICS) <= set(columns) and columns.count("live_array_bytes") == 1
