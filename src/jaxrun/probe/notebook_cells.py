"""A Jupyter notebook (``.ipynb``) as a program: its code cells, numbered, and the IPython lines
in them (magics, shell escapes) found and, where IPython cannot run them, set aside.

Shared by both sides of the process boundary: discovery (which notebooks use JAX) and the
settings (``metadata.jaxrun``) in the parent, the cells' execution in the probe
(probe/notebook.py). Standard library only: the probe also runs under another interpreter
(``--python``), where nbformat may be missing; nbformat 4's JSON is simple enough to read with
``json``.

A cell's number is the code cell's position among the code cells, from 1: what Jupyter shows
as ``In [N]`` after "Restart & Run All". Its code is compiled with the file name
``<notebook path>:cell N`` (:func:`cell_filename`), so tracebacks and jaxrun's "where it
failed" name the notebook, the cell and the line within it.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

SUFFIX = ".ipynb"
_CELL_MARK = ":cell "

# Cell magics whose body is Python: without IPython the body runs once as plain code (what
# `%%time` / `%%capture` add is lost, the computation is not). Any other cell magic (`%%bash`,
# `%%writefile`, `%%html`) is not Python: without IPython its whole cell is skipped.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
# An IPython line: a line magic or shell escape, bare or assigned (`x = !ls`, `t = %timeit -o f()`).
_IPYTHON_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:[%!]|[\w.,\[\] \t]+=[ \t]*[%!](?!=))")
_CELL_MAGIC = re.compile(r"^[ \t]*%%(?P<name>\w+)")
# A package install: never run by jaxrun, with or without IPython (README, "Notebooks").
_INSTALL = re.compile(r"^[ \t]*[%!][ \t]*(?:python3?[ \t]+-m[ \t]+)?(?:pip3?|conda|mamba|micromamba|uv)\b")


class NotebookError(ValueError):
    """The file is not a notebook jaxrun can read; the message is one line naming it."""


class CodeCell(NamedTuple):
    number: int  # 1-based among the code cells: In [number] after Restart & Run All
    position: int  # index in the notebook's "cells" list (0-based), for writing outputs back
    source: str


class Skipped(NamedTuple):
    cell: int
    line: int  # 1-based within the cell
    text: str


def cell_filename(path: str, number: int) -> str:
    """The file name a cell's code is compiled with: ``/x/train.ipynb:cell 3``."""
    return f"{path}{_CELL_MARK}{number}"


def split_cell_filename(filename: str) -> tuple[str, int] | None:
    """``(notebook path, cell number)`` of a :func:`cell_filename`, else None."""
    path, mark, number = filename.rpartition(_CELL_MARK)
    if mark and path.endswith(SUFFIX) and number.isdigit():
        return path, int(number)
    return None


def _source(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return value if isinstance(value, str) else ""


def parse(data: bytes | str, name: str) -> dict[str, Any]:
    """The notebook's JSON; :class:`NotebookError` (one line, naming ``name``) when it is not
    an nbformat 4 notebook."""
    try:
        notebook = json.loads(data)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name}: not a valid notebook: not JSON at line {exc.lineno} column {exc.colno} "
                            "(open it in Jupyter and save it again)") from None
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise NotebookError(f"{name}: not a valid notebook: {type(exc).__name__}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        version = notebook.get("nbformat") if isinstance(notebook, dict) else None
        hint = (f"nbformat {version}: convert it with `jupyter nbconvert --to notebook --nbformat 4`"
                if isinstance(version, int) and version < 4 else "no list of cells")
        raise NotebookError(f"{name}: not a valid notebook: {hint}")
    return notebook


def read(path: str) -> dict[str, Any]:
    """The notebook at ``path`` (:func:`parse`); OSError when it cannot be read."""
    with open(path, "rb") as handle:
        return parse(handle.read(), path)


def code_cells(notebook: dict[str, Any]) -> list[CodeCell]:
    cells, number = [], 0
    for position, cell in enumerate(notebook["cells"]):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            number += 1
            cells.append(CodeCell(number, position, _source(cell.get("source"))))
    return cells


def is_install(line: str) -> bool:
    return _INSTALL.match(line) is not None


def has_ipython_lines(source: str) -> bool:
    return any(_IPYTHON_LINE.match(line) for line in source.splitlines())


def plain_python(cell: CodeCell, keep: Any = None) -> tuple[str, list[Skipped]]:
    """The cell as plain Python, with the same line numbers, and the IPython lines set aside:
    each becomes ``pass`` at its indentation (so a block around it still parses). A cell magic
    whose body is Python (:data:`PYTHON_CELL_MAGICS`) keeps its body; another one's whole cell
    is set aside. ``keep(line)``: lines left as they are (IPython will run them)."""
    lines = cell.source.splitlines()
    skipped: list[Skipped] = []
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        magic = _CELL_MAGIC.match(lines[first])
        if magic and not (keep and keep(lines[first])):
            skipped.append(Skipped(cell.number, first + 1, lines[first].strip()))
            if magic["name"] not in PYTHON_CELL_MAGICS:
                return "\n" * len(lines), skipped
            lines[first] = ""
    for i, line in enumerate(lines):
        match = _IPYTHON_LINE.match(line)
        if match and not (keep and keep(line)):
            skipped.append(Skipped(cell.number, i + 1, line.strip()))
            lines[i] = match["indent"] + "pass"
    return "\n".join(lines) + "\n", skipped


def code_text(notebook: dict[str, Any]) -> str:
    """Every code cell as plain Python, in order: what discovery's import check reads."""
    return "\n".join(plain_python(cell)[0] for cell in code_cells(notebook))


def settings(notebook: dict[str, Any]) -> dict[str, Any]:
    """The notebook's ``metadata.jaxrun`` table (per-script settings), {} when absent."""
    metadata = notebook.get("metadata")
    table = metadata.get("jaxrun") if isinstance(metadata, dict) else None
    return table if isinstance(table, dict) else {}


def first_code_line(source: str) -> str:
    """The cell's first line that is not blank (cut at 80 characters): how a cell is named."""
    line = next((line.strip() for line in source.splitlines() if line.strip()), "")
    return line if len(line) <= 80 else line[:79] + "…"
