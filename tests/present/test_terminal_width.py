"""The summary on a real terminal (a pty of 80 and of 120 columns): no line wider than the terminal,
no header or word broken, long names shortened in the middle (their start and end kept), each
script named by its path relative to the folder given, with "/"."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from helpers import read_terminal, write

LONG = "gnn_pipeline/output/11_render_output/tiger_pomdp/jax/Tiger POMDP_jax.py"
QUICK = "if False:\n    import jax\nprint('done')\n"
FAILS = "if False:\n    import jax\nraise ValueError('boom')\n"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"  # captures (git-ignored)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("width") / "scripts"
    write(root, LONG, QUICK)
    write(root, "general_model.py", QUICK)
    write(root, "fails.py", FAILS)
    write(root, "asks_gpu.py", "# jaxrun: device='gpu'\n" + QUICK)  # falls back to the CPU
    return root


def _summary_on_a_terminal(folder: Path, columns: int) -> str:
    """`jaxrun run` with its stdout on a pty ``columns`` wide (stderr, the progress, on a pipe)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", NO_COLOR="1")  # a real terminal's size ("dumb" is 80 to rich)
    proc = subprocess.Popen([sys.executable, "-m", "jaxrun", "run", str(folder), "--results-dir",
                             str(folder.parent / f"r{columns}"), "--no-history"],
                            stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    output = read_terminal(master)
    assert proc.wait(timeout=300) == 1  # fails.py
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output).replace("\r\n", "\n")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"summary_{columns}_columns.txt").write_text(text)
    return text


def _table(text: str) -> tuple[list[str], list[list[str]], list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("jaxrun results"))
    header = re.split(r"\s{2,}", lines[start + 1].strip())
    assert set(lines[start + 2].strip()) == {"─"}
    rows = []
    for line in lines[start + 3:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != len(header):  # the lines under the table
            break
        rows.append(cells)
    return header, rows, lines[start:start + 3 + len(rows)]


@pytest.mark.parametrize("columns", [80, 120])
def test_the_summary_fits_the_terminal_without_a_broken_word(folder: Path, columns: int) -> None:
    text = _summary_on_a_terminal(folder, columns)
    header, rows, table = _table(text)
    # The table fits; the lines under it are one line per event however long (greppable), the
    # terminal wraps them.
    assert max(len(line) for line in table) <= columns, text
    # Whole headers, in order, the most needed ones always there.
    known = ["script", "status", "device", "time s", "body s", "import s", "jit s", "run s", "compiles", "RSS MiB"]
    assert header == [h for h in known if h in header] and {"script", "status", "device", "time s"} <= set(header), header
    assert len(rows) == 4, text
    by_name = {r[0]: dict(zip(header, r)) for r in rows}
    assert by_name["general_model.py"]["status"] == "ok"  # a short name is never shortened
    assert by_name["fails.py"]["status"] == "script_error"
    (long_name,) = [n for n in by_name if n.startswith("gnn_")]
    if long_name != LONG:  # shortened in the middle: its start and its end kept
        start, end = long_name.split("…")
        assert LONG.startswith(start) and LONG.endswith(end) and len(start) >= 8 and len(end) >= 8, long_name
    assert len(long_name) >= 20  # not shortened past reading
    gpu = by_name["asks_gpu.py"]["device"]
    assert gpu in ("cpu (fallback from gpu)", "cpu (fallback)"), gpu
    # Under the table, the fallback's reason and the failure's place, one line each, not cut.
    assert re.search(r"^fallback: asks_gpu\.py: ran on cpu instead of gpu: .+", text, re.MULTILINE), text
    assert "failed: fails.py: script_error: ValueError: boom at fails.py:3" in text
    # The columns that gave way to the width are named under the table, never dropped without a word.
    gone = [h for h in known if h not in header]
    if gone:
        said = " ".join(text[text.index("left out for the terminal's width: "):].split())
        assert said.startswith(f"left out for the terminal's width: {', '.join(gone)} (every figure: "), said
    else:
        assert "left out for the terminal's width" not in text


@pytest.mark.parametrize("columns", [40, 80, 120, 200])
def test_the_summary_printed_a_few_rows_at_a_time_is_the_same_lines(columns: int) -> None:
    """interfaces/cli/tables.summary_tables (what `jaxrun run` prints: the whole table is never held at
    once): the lines of summary_table, colours included, each column as wide as in the whole table."""
    import io

    from rich.console import Console

    from jaxrun.interfaces.cli.tables import FixedRows, summary_table, summary_tables
    from jaxrun.present.view import view_batch
    from jaxrun.results.models import (
        BatchMetadata,
        BatchResult,
        PerformanceSummary,
        ScriptResult,
    )

    results = []
    for i in range(53):
        name = f"s{i:02d}" + "_long_name" * (i % 7 == 3) * 6
        failed = i % 5 == 2
        results.append(ScriptResult(
            script_name=name, script_path=f"/x/{name}.py", success=not failed, device_requested="gpu" if i % 9 == 4 else "cpu",
            device_used="cpu", fallback_reason="no GPU" if i % 9 == 4 else None, started_at="t", finished_at="t",
            execution_time=None if i % 11 == 0 else 0.1 * i * i, memory_peak=14.0 + i, compile_count=i % 4 or None,
            error_class="script_error" if failed else None, error_message="boom" if failed else None,
            outcome="failed" if failed else "passed"))
    meta = BatchMetadata(jaxrun_version="0", device_requested="cpu", device_used="cpu", execution_timestamp="t", jax_version=None,
                         scripts_found=53, scripts_executed=53, scripts_successful=43, scripts_failed=10,
                         search_paths=["/x"], results_dir="/r", host="h", python_version="3.11", complete=True)
    view = view_batch(BatchResult(metadata=meta, device_info=None, performance_summary=PerformanceSummary(),
                                script_results=results))
    for terminal in (False, True):
        def printed(tables) -> str:  # type: ignore[no-untyped-def]
            console = Console(file=io.StringIO(), width=columns, force_terminal=terminal, highlight=False,
                              color_system="truecolor" if terminal else None)
            for table in tables:
                console.print(table)
            return console.file.getvalue()  # type: ignore[attr-defined]

        whole = printed([summary_table(view, columns)])
        chunks = list(summary_tables(view, columns, rows=10))
        assert printed(chunks) == whole
        # After the first, the rows are made by jaxrun, not laid out by rich (the last, where it
        # names the columns given up under it, is rich's); a table rich squeezes (40 columns) is
        # printed whole.
        assert len(chunks) == (1 if columns == 40 else 6)
        assert all(isinstance(chunk, FixedRows) for chunk in chunks[1:])
        assert all(chunk._plain() for chunk in chunks[1:-1])
        lines = re.sub(r"\x1b\[[0-9;]*m", "", whole).splitlines()
        # The title, the header, its rule, a row a script; then, when columns gave way to the
        # width, the line that names them (once, under the last row).
        said = next((i for i, line in enumerate(lines) if line.startswith("left out for the terminal's width: ")), None)
        assert (said or len(lines)) == 3 + 53, whole
        header = lines[1].split()
        if said is None:
            assert {"body", "import", "run", "compiles"} <= set(header), whole
        else:
            named = " ".join(lines[said:]).split(": ", 1)[1].split(" (every figure")[0].split(", ")
            assert named and all(name.split()[0] not in header for name in named), whole



def test_a_tables_natural_width_is_the_width_rich_renders() -> None:
    """interfaces/cli/tables.natural_width (what fitting the summary to the terminal works out
    instead of rendering): the widest line rich prints for the same table, unconstrained, for
    tables of every shape the CLI makes (numbers right, names left, wide characters, empty cells,
    a title longer than the table), and None where it cannot say."""
    import io
    import random

    from rich.console import Console
    from rich.text import Text

    from jaxrun.interfaces.cli.tables import _table, natural_width

    def rendered(table) -> int:  # type: ignore[no-untyped-def]
        console = Console(width=100_000, file=io.StringIO(), color_system=None)
        with console.capture() as capture:
            console.print(table)
        return max(len(line.rstrip()) for line in capture.get().splitlines())

    words = ["", "ok", "failed", "0.25", "1,234.5", "naïve_名前.py", "a" * 40, "x y z", "-"]
    generator = random.Random(7)
    for case in range(60):
        columns = generator.randint(1, 8)
        title = "jaxrun results" + (" (a title longer than any table here, said in full)" if case % 5 == 0 else "")
        table = _table(title, [(generator.choice(["script", "RSS MiB", "s", "jit s"]),
                                generator.choice(["left", "right"])) for _ in range(columns)], no_wrap=True)
        for _ in range(generator.randint(0, 6)):
            table.add_row(*(Text(generator.choice(words), style=generator.choice(["", "red"])) for _ in range(columns)))
        assert natural_width(table) == rendered(table), case
    multi_line = _table("t", [("a", "left")])
    multi_line.add_row(Text("one\ntwo"))
    assert natural_width(multi_line) is None
