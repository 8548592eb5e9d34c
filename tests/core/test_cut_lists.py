"""A list that is cut says how many it left out ("a, b, c and 3 more"), wherever jaxrun prints or
writes one: every cut goes through formatting.listed (or left_out, for rows counted, not held)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import jaxrun, write
from hypothesis import given
from hypothesis import strategies as st

from jaxrun.core.formatting import listed

SRC = Path(__file__).resolve().parents[2] / "src" / "jaxrun"

# Slices joined into text that are no list of things shown to a reader: a path's leading folders,
# a notebook cell's code, two fixed file names.
NOT_SHOWN = {("discover/scripts.py", "parts"), ("probe/notebook.py", "lines"), ("run/process/cgroups.py", "CPU_USAGE_FILES")}
# Texts an f-string shortens on purpose (a commit's hash, as git does; a description quoted in a
# message; a flag without its leading dashes; a heading's first letter lowered).
TEXTS = {"commit", "description", "spelled", "heading"}


def _sliced(node: ast.AST) -> str | None:
    """The name of what ``node`` slices (``names`` of ``names[:5]``), or None when it slices nothing."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        value = node.value
        while isinstance(value, (ast.Subscript, ast.Attribute)):
            value = value.value if isinstance(value, ast.Subscript) else value
            if isinstance(value, ast.Attribute):
                return value.attr
        return value.id if isinstance(value, ast.Name) else ast.unparse(value)
    return None


def _cuts(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each slice joined into text (``", ".join(names[:5])``, also through a
    comprehension or a starred list) and each slice written into an f-string (``{names[:5]}``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" and node.args:
            arg = node.args[0]
            parts = [arg]
            if isinstance(arg, (ast.GeneratorExp, ast.ListComp)):
                parts = [g.iter for g in arg.generators]
            elif isinstance(arg, ast.List):
                parts = [e.value if isinstance(e, ast.Starred) else e for e in arg.elts]
            found += [(node.lineno, name) for part in parts if (name := _sliced(part)) is not None]
        elif isinstance(node, ast.FormattedValue) and (name := _sliced(node.value)) is not None:
            found.append((node.lineno, name))
    return found


@given(st.lists(st.text(alphabet="abc", min_size=1, max_size=3), max_size=30), st.integers(1, 12),
       st.integers(0, 12))
def test_listed_shows_at_most_the_limit_and_counts_every_other_item(items: list[str], limit: int, last: int) -> None:
    text = listed(items, limit, " | ", last=last)
    if len(items) <= limit:
        assert text == " | ".join(items)
        return
    counted = re.search(r"(\d+) more", text)
    assert counted is not None, text
    shown = [part for part in re.split(r" \| | and \d+ more|\(\d+ more\)", text) if part]
    assert len(shown) == limit and int(counted.group(1)) == len(items) - limit


def test_no_list_is_cut_outside_the_helper() -> None:
    """Every join of a slice, and every slice written into an f-string, in the package: none but
    the few that are not a list shown to a reader."""
    silent = []
    for path in SRC.rglob("*.py"):
        if path.name == "formatting.py":
            continue
        where = path.relative_to(SRC).as_posix()
        for line, name in _cuts(ast.parse(path.read_text(encoding="utf-8"))):
            if (where, name) not in NOT_SHOWN and name not in TEXTS:
                silent.append(f"{where}:{line}: {name}")
    assert not silent, silent


@pytest.mark.slow
def test_compare_names_every_script_of_two_runs_with_nothing_in_common(tmp_path: Path) -> None:
    """`jaxrun compare` of two runs without a script in common: the first five of each side, by
    the name the summary gives them, and how many more."""
    for side, names in (("a", ["fails", "nb_fail", "recompile", "scan_prog", "sleep1", "train_optax", "zz_last"]),
                        ("b", ["other"])):
        for name in names:
            write(tmp_path / f"src_{side}", f"sub/{name}.py", "if False:\n    import jax\n")
        done = jaxrun("run", tmp_path / f"src_{side}", "--results-dir", tmp_path / side, "--no-history", "-q")
        assert done.returncode == 0, done.stderr
    done = jaxrun("compare", tmp_path / "a", tmp_path / "b")
    assert done.returncode == 2
    assert ("BASE has sub/fails.py, sub/nb_fail.py, sub/recompile.py, sub/scan_prog.py, sub/sleep1.py and 2 more; "
            "NEW has sub/other.py") in done.stderr, done.stderr


@pytest.mark.slow
def test_the_report_counts_the_programs_and_log_lines_it_leaves_out(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("plotly")
    from jaxrun.present.reports import html_page
    from jaxrun.present.view import read_batch

    write(tmp_path / "s", "three.py", """\
        import jax, jax.numpy as jnp
        import sys
        for n in (1, 2, 3):  # three programs
            jax.jit(lambda x, n=n: x * n)(jnp.ones(n)).block_until_ready()
        for i in range(50):
            print(f"line {i}", file=sys.stderr)
        raise SystemExit(1)
        """)
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--device", "cpu", "-q")
    assert done.returncode == 1, done.stderr
    monkeypatch.setattr(html_page, "_PROGRAM_ROWS", 1)
    page = html_page.render_report(read_batch(tmp_path / "r"))
    programs = page[page.index('<table id="programs"'):]
    built = len(re.findall(r"<tr><td", programs[:programs.index("</table>")]))
    assert built == 1
    more = int(re.search(r"The first 1 programs and (\d+) more", programs).group(1))  # type: ignore[union-attr]
    assert more >= 2  # three of the script's own, and whatever jnp.ones compiled
    # 50 lines in its stderr log (SystemExit prints nothing): the first 20 counted, the last 30 shown.
    assert f"(20 earlier lines: the whole log is the file)\nline {50 - html_page._LOG_TAIL_LINES}\n" in page
