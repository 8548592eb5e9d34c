"""A Jupyter notebook (``.ipynb``) as a script: its code cells, numbered, and the IPython lines
in them (magics, shell escapes) found and, where IPython cannot run them, set aside.

Shared by both sides of the process boundary: discovery (which notebooks use JAX) and the
settings (``metadata.jaxrun``) in the parent, the cells' execution in the probe
(probe/notebook.py). Standard library only: the probe also runs under another interpreter
(``--python``), where nbformat may be missing; nbformat 4's JSON is simple enough to read with
``json``, and a large notebook's with probe/notebook_json.py, which builds only what jaxrun uses.

A cell's number is the code cell's position among the code cells, from 1: what Jupyter shows
as ``In [N]`` after "Restart & Run All". Its code is compiled with the file name
``<notebook path>:cell N`` (:func:`cell_filename`), so tracebacks and jaxrun's "where it
failed" name the notebook, the cell and the line within it.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, NamedTuple

SUFFIX = ".ipynb"
#: A notebook of at most this many bytes is read whole with ``json`` (:func:`load`); a larger one
#: by notebook_json's reader, which builds only what jaxrun uses (``json`` builds all: ~3 to 6
#: times the file in memory; the reader is ~20 times slower on a small notebook's many short values).
WHOLE_LIMIT = 4 << 20
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


def no_warm_mode(name: str, entry: str, origin: str | None = None) -> str:
    """Why notebook ``name`` cannot run in warm mode (``entry``, set at ``origin``): one line."""
    where = f", set by {origin}" if origin else ""
    return (f"{name}: warm mode calls {entry}(){where}, a function of a .py script, and a notebook has none: "
            "run it without warm mode, leave notebooks out (--exclude '*.ipynb'), or move its code into a .py script")


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


def _not_json(name: str, line: int, column: int, detail: str | None = None) -> NotebookError:
    return NotebookError(f"{name}: not a valid notebook: not JSON at line {line} column {column}"
                         + (f" ({detail})" if detail else "") + " (open it in Jupyter and save it again)")


def _checked(notebook: Any, name: str) -> dict[str, Any]:
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        version = notebook.get("nbformat") if isinstance(notebook, dict) else None
        hint = (f"nbformat {version}: convert it with `jupyter nbconvert --to notebook --nbformat 4`"
                if isinstance(version, int) and version < 4 else "no list of cells")
        raise NotebookError(f"{name}: not a valid notebook: {hint}")
    return notebook


def parse(data: bytes | str, name: str) -> dict[str, Any]:
    """The notebook's whole JSON; :class:`NotebookError` (one line, naming ``name``) when it is not
    an nbformat 4 notebook."""
    try:
        notebook = json.loads(data)
    except json.JSONDecodeError as exc:
        raise _not_json(name, exc.lineno, exc.colno) from None
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise NotebookError(f"{name}: not a valid notebook: {type(exc).__name__}") from None
    return _checked(notebook, name)


class NotebookTooLarge(NotebookError):
    """The notebook holds more bytes than the reader was allowed (``size``, ``limit``)."""

    def __init__(self, name: str, size: int | None, limit: int) -> None:
        super().__init__(f"{name}: more than {limit} bytes")
        self.size, self.limit = size, limit


class Notebook(NamedTuple):
    data: dict[str, Any]  # what jaxrun uses of it: cells (code cells with their source), metadata.jaxrun, nbformat
    code_cut: bool  # code_limit reached: code cells past it have no source here


def load(path: str, *, name: str | None = None, size_limit: int | None = None,
         code_limit: int | None = None) -> Notebook:
    """What jaxrun uses of the notebook at ``path`` (:func:`code_cells` and :func:`settings`
    read it), in bounded memory: a file of up to :data:`WHOLE_LIMIT` bytes is read whole with
    ``json`` (every byte checked), a larger one with notebook_json's reader, which decodes only
    the code cells' source and ``metadata.jaxrun`` and checks the rest's structure (its outputs
    are never built). ``size_limit``: a larger file is :class:`NotebookTooLarge`;
    ``code_limit``: code cells' source kept, at most (bytes of JSON). OSError when it cannot be
    read; :class:`NotebookError` (naming it ``name``, else ``path``) when it is not a notebook."""
    from jaxrun.probe import notebook_json

    name = path if name is None else name
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size_limit is not None and size > size_limit:
            raise NotebookTooLarge(name, size, size_limit)
        rest = [handle.read(WHOLE_LIMIT + 1)] if size <= WHOLE_LIMIT else []
        if rest and len(rest[0]) <= WHOLE_LIMIT:
            return _bounded(parse(rest[0], name), code_limit)

        def read(n: int) -> bytes:
            return rest.pop() if rest else handle.read(n)

        try:
            notebook = notebook_json.read_notebook(read, size_limit=size_limit, code_limit=code_limit)
        except notebook_json.TooLarge as exc:
            raise NotebookTooLarge(name, None, exc.limit) from None
        except notebook_json.JsonError as exc:
            handle.seek(0)
            raise _not_json(name, *notebook_json.position(exc.offset, handle.read), exc.what) from None
    return Notebook(_checked(notebook.data, name), notebook.code_cut)


def _bounded(notebook: dict[str, Any], code_limit: int | None) -> Notebook:
    """A whole notebook as :func:`load` gives it: code past ``code_limit`` left out, as the reader does."""
    if code_limit is None:
        return Notebook(notebook, False)
    kept, cut = 0, False
    cells = []
    for cell in notebook["cells"]:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            size = len(json.dumps(cell.get("source", "")))
            if cut or kept + size > code_limit:
                cut = True
                cell = {key: value for key, value in cell.items() if key != "source"}
            kept += size
        cells.append(cell)
    return Notebook({**notebook, "cells": cells}, cut)


def read(path: str) -> dict[str, Any]:
    """What jaxrun uses of the notebook at ``path`` (:func:`load`, unbounded: the probe runs it)."""
    return load(path).data


def read_whole(path: str) -> dict[str, Any]:
    """The notebook at ``path``, all of it (its outputs too: for the executed copy)."""
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
