"""A sweep of 3 batch sizes x 2 device counts read through every surface: the terminal, the
Markdown GitHub renders, the HTML report, the MCP reply and the result files name the same six
points, and the sweep's table says the same cells in the terminal, Markdown and the report."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from helpers import html_rows, html_table, jaxrun, load, mcp_call, mcp_session, tables, write

pytest.importorskip("plotly")
pytest.importorskip("mcp")
pytestmark = pytest.mark.slow  # six JAX runs, a report and an MCP server: ~25 s

SCRIPT = """\
import jax, jax.numpy as jnp
import jaxrun
p = jaxrun.params(batch=4)
x = jnp.ones((p["batch"], 16))
jax.jit(lambda a: (a @ a.T).sum())(x).block_until_ready()
jaxrun.record(devices_seen=jax.device_count(), samples=p["batch"] * 100)
"""
LABELS = [f"train.py[batch={b},devices={d}]" for b in (8, 16, 32) for d in (1, 2)]


def _terminal_table(text: str, title: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    header = re.split(r"\s{2,}", lines[start + 1].strip())
    rows = [header]
    for line in lines[start + 3:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != len(header):
            break
        rows.append(cells)
    return rows


def test_six_points_are_named_alike_and_the_sweep_table_says_the_same_on_every_surface(tmp_path: Path) -> None:
    write(tmp_path, "train.py", SCRIPT)
    done = jaxrun("run", "train.py", "--param", "batch=8,16,32", "--param", "devices=1,2", "--results-dir", "out",
                  "--no-history", "--markdown", "out.md", "--report", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    results = load(tmp_path / "out" / "jax_execution_results.json")["script_results"]
    assert [r["script_name"] for r in results] == [label.replace(".py", "", 1) for label in LABELS]
    assert all(r["results"]["devices_seen"] == r["params"]["devices"] for r in results)

    replies: dict = {}

    async def body(session) -> None:  # type: ignore[no-untyped-def]
        replies["monitor"] = await mcp_call(session, "execute.monitor_jax_performance", {"results_dir": "out"})

    anyio.run(mcp_session, tmp_path, body)
    mcp_paths = [s["path"] for s in replies["monitor"]["structuredContent"]["scripts"]]
    md = tables((tmp_path / "out.md").read_text(encoding="utf-8"))
    assert [row[0] for row in md["Every script"][1:]] == LABELS
    assert list(html_rows(tmp_path / "out" / "report.html")) == LABELS
    assert mcp_paths == LABELS
    assert [row[0] for row in _terminal_table(done.stdout, "jaxrun results")[1:]] == LABELS
    # The sweep's own table: the same cells in the terminal, in Markdown and in the report.
    terminal = _terminal_table(done.stdout, "sweep: train.py")
    markdown = md["Sweep: `train.py`"]
    report = html_table(tmp_path / "out" / "report.html", "sweep-table-1")
    assert terminal == markdown == report, (terminal, markdown, report)
    assert [row[:2] for row in terminal[1:]] == [[str(b), str(d)] for b in (8, 16, 32) for d in (1, 2)]
    samples = terminal[0].index("samples")
    assert [row[samples] for row in terminal[1:]] == ["800", "800", "1.6 k", "1.6 k", "3.2 k", "3.2 k"]
