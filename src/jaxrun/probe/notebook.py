"""Run a notebook's code cells in order, in one ``__main__`` namespace, as one script body.

The probe (probe/__main__.py) calls :func:`run_notebook` where it would call ``runpy.run_path``
for a ``.py`` script: the body's measurement (phases, compiles, memory, the drain, the END event
and every way out) is the same, the cells are its lines. Each cell is timed (a CELL event at its
start and one at its end: a cell that never ended, the process stopped in it, still has its
start) and compiled with the file name ``<notebook>:cell N`` so a traceback names the cell and
its line (the cell's own source is put in ``linecache`` for the traceback's source lines).

IPython lines (``%magic``, ``%%cell magic``, ``!shell``): when IPython is importable here, the
cells holding them are turned into Python by IPython's own input transformer and run with a real
``InteractiveShell`` whose namespace is the notebook's (made once, before the first cell: its
import is in the body's import time, in no cell's time); otherwise each such line is skipped
(``pass``) and one warning lists them. Package installs (``!pip install``, ``%pip``, ``%conda``)
are never run, with or without IPython: a runner that measures an environment must not change
it, silently and over the network, while measuring it (one warning lists them).
A cell may ``await`` at its top level (Jupyter's kernel allows it): such cells run on one event
loop kept for the notebook. A cell's last expression is evaluated and its value dropped, as in a
script (no display);
``display()`` is IPython's when importable, else ``print``.

``--save-notebooks`` (``capture``): what each cell's Python code writes to ``sys.stdout`` /
``sys.stderr`` is also kept (the streams still get everything, so the logs are whole) and sent
with the cell's end, for the parent to write the executed copy (outputs/notebook_outputs.py).
"""

from __future__ import annotations

import ast
import builtins
import linecache
import sys
import threading
import time
import types
from importlib.util import find_spec
from typing import Any

from jaxrun.probe import events
from jaxrun.probe.channel import EventWriter
from jaxrun.probe.ending import Body
from jaxrun.probe.notebook_cells import (
    CodeCell,
    Skipped,
    cell_filename,
    code_cells,
    first_code_line,
    has_ipython_lines,
    is_install,
    plain_python,
    read,
)

CO_COROUTINE = 0x80  # inspect.CO_COROUTINE (importing inspect costs ~6 ms in every notebook's process)
_loop: Any = None  # the event loop of the cells that await (_run_awaiting)

# What one cell's captured output may hold (characters); the logs keep all of it.
OUTPUT_CAP = 100_000


class _Capture:
    """A stream that writes through to the real one and keeps a copy for the current cell."""

    def __init__(self, stream: Any, name: str, outputs: list[list[str]]) -> None:
        self._stream, self._name, self.outputs = stream, name, outputs

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        kept = sum(len(t) for _, t in self.outputs)
        if isinstance(text, str) and text and kept < OUTPUT_CAP:
            text = text[:OUTPUT_CAP - kept]
            if self.outputs and self.outputs[-1][0] == self._name:
                self.outputs[-1][1] += text
            else:
                self.outputs.append([self._name, text])
        return written

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, buffer, ...
        return getattr(self._stream, name)


def _warn(writer: EventWriter, what: str, skipped: list[Skipped]) -> None:
    if skipped:
        lines = "; ".join(f"cell {s.cell} line {s.line}: {s.text}" for s in skipped)
        message = f"notebook: {what}: {lines}"
        writer.send(events.ProbeWarning(type=events.PROBE_WARNING, message=message))
        print(f"jaxrun: {message}", file=sys.stderr)


def ipython_here() -> bool:
    return find_spec("IPython") is not None


def _prepare(writer: EventWriter, cells: list[CodeCell], namespace: dict[str, Any]) -> list[str]:
    """Each cell's code as Python with its line numbers kept; the IPython shell made when a cell
    needs it; one warning for the lines set aside."""
    ipython = any(has_ipython_lines(cell.source) for cell in cells) and ipython_here()
    installs: list[Skipped] = []
    others: list[Skipped] = []
    codes: list[str] = []
    manager = None
    for cell in cells:
        if not has_ipython_lines(cell.source):
            codes.append(cell.source)
            continue
        if ipython:
            code, skipped = plain_python(cell, keep=lambda line: not is_install(line))
            if manager is None:
                from IPython.core.inputtransformer2 import TransformerManager

                manager = TransformerManager()
            # IPython drops a cell's leading blank lines: put them back so line numbers hold.
            lines = code.splitlines(keepends=True)
            lead = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
            code = "\n" * lead + manager.transform_cell("".join(lines[lead:]))
        else:
            code, skipped = plain_python(cell)
        installs += [s for s in skipped if is_install(s.text)]
        others += [s for s in skipped if not is_install(s.text)]
        codes.append(code)
    _warn(writer, "package installs not run (jaxrun never installs packages: install them in the "
                  "environment first)", installs)
    _warn(writer, "IPython lines skipped (IPython is not importable by this interpreter)", others)
    # Code that calls get_ipython() itself (get_ipython().run_line_magic(...)) needs the shell too.
    if manager is not None or (ipython_here() and any("get_ipython" in cell.source for cell in cells)):
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        config = Config()
        config.HistoryManager.enabled = False  # no SQLite history file written in ~/.ipython
        InteractiveShell.instance(config=config, user_module=sys.modules["__main__"])
    elif "display" not in namespace:
        namespace["display"] = _display
    return codes


def _display(*objects: Any, **options: Any) -> None:
    """``display()`` without a shell: IPython's (it prints), imported on the first call only (IPython
    takes ~0.6 s to import: no notebook pays it unless it displays), else ``print``."""
    try:
        from IPython.display import display
    except ImportError:
        print(*objects)
        return
    display(*objects, **options)


def _error_line(exc: BaseException, filename: str) -> int | None:
    """The line of the cell (compiled as ``filename``) where ``exc`` was raised from: its
    innermost frame in the cell, or a syntax error's line."""
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return exc.lineno
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _run_awaiting(coroutine: Any) -> None:
    """A cell with a top-level ``await`` (Jupyter's kernel runs those on its event loop): run on
    one loop kept for the whole notebook, so what a cell binds to it (a task, a queue, a client)
    works in the next cell too. asyncio is imported only for such a notebook."""
    import asyncio

    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()
        asyncio.set_event_loop(_loop)
    _loop.run_until_complete(coroutine)


class _Running:
    """The cell running now. Its end is sent once: by the cell (it returned, raised, called
    ``sys.exit``), or, for a way out that never returns to it (``os._exit``, ``os.abort``, a
    signal the script sends itself, from any thread), by the body's end (probe/ending.py), with
    the seconds up to then and what it printed so far."""

    def __init__(self, writer: EventWriter, outputs: list[list[str]] | None) -> None:
        self.writer, self.outputs = writer, outputs
        self._lock = threading.Lock()
        self._cell: tuple[int, float] | None = None  # (number, perf_counter at its start)

    def start(self, cell: CodeCell) -> float:
        started = time.perf_counter()
        self.writer.send(events.Cell(type=events.CELL, index=cell.number, at=started,
                                     source=first_code_line(cell.source)))
        self._cell = (cell.number, started)
        return started

    def end(self, now: float, outcome: str, line: int | None = None) -> None:
        with self._lock:
            running, self._cell = self._cell, None
        if running is None:
            return
        number, started = running
        end = events.Cell(type=events.CELL, index=number, at=started, s=now - started, outcome=outcome)
        if line is not None:
            end["error_line"] = line
        if self.outputs is not None:
            end["outputs"] = [list(o) for o in self.outputs]
            self.outputs.clear()
        self.writer.send(end)

    def exited(self, now: float) -> None:
        """The body ended while a cell ran: the process is ending in it."""
        self.end(now, "exit")


def _run_cell(running: _Running, path: str, cell: CodeCell, code: str, namespace: dict[str, Any]) -> None:
    filename = cell_filename(path, cell.number)
    linecache.cache[filename] = (len(cell.source), None, cell.source.splitlines(keepends=True), filename)
    running.start(cell)
    outcome, line = "ok", None
    try:
        compiled = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if compiled.co_flags & CO_COROUTINE:
            _run_awaiting(eval(compiled, namespace))
        else:
            exec(compiled, namespace)
    except SystemExit:
        outcome = "exit"
        raise
    except BaseException as exc:
        outcome, line = "error", _error_line(exc, filename)
        raise
    finally:
        running.end(time.perf_counter(), outcome, line)


def run_notebook(writer: EventWriter, path: str, capture: bool = False, body: Body | None = None) -> dict[str, Any]:
    """Run the notebook at ``path``; its namespace (kept by the caller for the drain). Raises what
    a cell raised (SystemExit included), or ``notebook_cells.NotebookError`` (one line).
    ``body``: the script's body, whose end ends a cell still running (``os._exit`` in a cell)."""
    cells = code_cells(read(path))
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = module  # as runpy does: pickling and `import __main__` see the notebook
    streams = (sys.stdout, sys.stderr)
    outputs: list[list[str]] | None = [] if capture else None
    running = _Running(writer, outputs)
    if body is not None:
        body.on_end(running.exited)
    # Every code cell first: one the run never reaches is shown "not run", not left out.
    writer.send(events.Notebook(type=events.NOTEBOOK, cells=[first_code_line(cell.source) for cell in cells]))
    try:
        codes = _prepare(writer, cells, namespace)
        if outputs is not None:
            sys.stdout = _Capture(streams[0], "stdout", outputs)
            sys.stderr = _Capture(streams[1], "stderr", outputs)
        for cell, code in zip(cells, codes):
            _run_cell(running, path, cell, code, namespace)
    finally:
        if outputs is not None:
            sys.stdout, sys.stderr = streams
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    return namespace
