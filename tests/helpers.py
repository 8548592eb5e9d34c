"""Helpers shared by the test modules: the one way to run the CLI (``jaxrun``, and the ``jaxrun_cli``
fixture in conftest.py built on it), the one child environment (``child_env``), crafted scripts in
tmp folders, result files, and readers of what jaxrun writes (Markdown and HTML tables, MCP calls).
A test module imports from here, never from another test module."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from jaxrun.results import result_files
from jaxrun.results.figures import SCRIPT_FIGURES
from jaxrun.results.models import (
    BatchMetadata,
    BatchResult,
    BenchmarkingSection,
    BenchmarkResults,
    HistoryRun,
    PerformanceSummary,
    RunSample,
    ScriptBenchmark,
    ScriptResult,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
SRC = REPO_ROOT / "src"


# --- the environment of a process a test starts ----------------------------------------------------

def child_env(env: Mapping[str, str | None] | None = None, *, without: Iterable[str] = ()) -> dict[str, str]:
    """The environment for a process a test starts: this process's own, with this checkout's src
    first on PYTHONPATH (the child must run the code under test, whichever way jaxrun was
    installed), less the variables named in ``without`` (a name ending in ``*`` is a prefix: the
    user's settings a test must not inherit, such as JAX_PLATFORMS or RAY_*), plus ``env`` (a value
    of None removes the variable)."""
    gone = tuple(without)
    names = {n for n in gone if not n.endswith("*")}
    prefixes = tuple(n[:-1] for n in gone if n.endswith("*"))
    result = {k: v for k, v in os.environ.items() if k not in names and not (prefixes and k.startswith(prefixes))}
    paths = [p for p in result.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SRC)]
    result["PYTHONPATH"] = os.pathsep.join([str(SRC), *paths])
    for name, value in (env or {}).items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = str(value)
    return result


# --- running the CLI -------------------------------------------------------------------------------

@dataclass
class RunResult:
    """What a finished ``python -m jaxrun`` left: its status and its output, as text."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        """The lines of its stdout."""
        return self.stdout.splitlines()

    @property
    def errlines(self) -> list[str]:
        """The lines of its stderr."""
        return self.stderr.splitlines()


def jaxrun_command(*args: object, interruptible: bool = False) -> list[str]:
    """The command line of ``python -m jaxrun ARGS`` (``interruptible``: one that Ctrl-C can stop,
    for a process started in the background with ``subprocess.Popen``)."""
    if interruptible:
        return [sys.executable, "-c", _SIGINT_SHIM, *map(str, args)]
    return [sys.executable, "-m", "jaxrun", *map(str, args)]


def jaxrun(*args: object, cwd: Path | str | None = None, env: Mapping[str, str | None] | None = None,
           without: Iterable[str] = (), prefix: tuple[str, ...] = (), timeout: float = 300,
           preexec_fn: Callable[[], None] | None = None) -> RunResult:
    """``python -m jaxrun ARGS`` run to completion in a real subprocess, its output captured as text:
    in ``cwd``, in ``child_env(env, without=without)``, under the command ``prefix`` (e.g. to run it as
    another user); past ``timeout`` seconds the process is killed and ``TimeoutExpired`` raised."""
    command = [*prefix, *jaxrun_command(*args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=child_env(env, without=without), preexec_fn=preexec_fn)
    return RunResult(command, done.returncode, done.stdout, done.stderr)


class JaxrunCli:
    """``python -m jaxrun`` as a test runs it (the ``jaxrun_cli`` fixture): ``run(*args, ...)`` is
    ``helpers.jaxrun`` with this object's defaults (the session's device-facts cache, a working
    folder, more variables, variables left out) under the arguments given to the call."""

    def __init__(self, *, cwd: Path | None = None, env: Mapping[str, str | None] | None = None,
                 without: Iterable[str] = ()) -> None:
        self.cwd, self.env, self.without = cwd, dict(env or {}), tuple(without)

    def run(self, *args: object, cwd: Path | str | None = None, env: Mapping[str, str | None] | None = None,
            timeout: float = 300, prefix: tuple[str, ...] = (),
            preexec_fn: Callable[[], None] | None = None) -> RunResult:
        return jaxrun(*args, cwd=cwd if cwd is not None else self.cwd, env={**self.env, **(env or {})},
                      without=self.without, prefix=prefix, timeout=timeout, preexec_fn=preexec_fn)

    def environ(self, env: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """The environment ``run`` gives the CLI (for a test that starts it another way, e.g. in the
        background or on a terminal)."""
        return child_env({**self.env, **(env or {})}, without=self.without)

    def but(self, *, cwd: Path | None = None, env: Mapping[str, str | None] | None = None,
            without: Iterable[str] | None = None) -> JaxrunCli:
        """The same, in another folder, with more variables, or leaving out other variables."""
        return JaxrunCli(cwd=cwd if cwd is not None else self.cwd, env={**self.env, **(env or {})},
                         without=self.without if without is None else without)


def write(root: Path, rel: str, text: str) -> Path:
    """Write a dedented script at ``root/rel`` (folders created) and return its path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


class Stamps:
    """The seconds a script lived between two points, as the script itself saw them: the ground truth
    of a phase under any load. A nominal ``time.sleep(1.0)`` is no such truth on a busy machine (the
    sleeper wakes late, a fork waits for a core), so a bound on ``1.0 * 1.05`` fails there while the
    figure is right. ``stamps.line`` is a statement for the script (it needs ``time`` imported) that
    appends ``perf_counter()`` (one clock with the probe's) to a file; ``stamps.span()`` is the time
    between the first and the last stamp.

    The time is taken before the file is touched, and the file is in memory (/dev/shm, where there
    is one): a file on disk is created and grown through the file system's journal, which on a busy
    machine waits for other processes' data. Such a wait before a first stamp or after a last one
    is in the script's phase but not in the span (47 ms once, in a loaded run of the suite)."""

    def __init__(self, path: Path) -> None:
        memory = Path("/dev/shm")
        if memory.is_dir() and os.access(memory, os.W_OK):
            held = tempfile.NamedTemporaryFile(dir=memory, prefix=f"jaxrun-test-{path.name}-", delete=False)
            held.close()
            path = Path(held.name)
            weakref.finalize(self, path.unlink, missing_ok=True)
        self.path = path
        self.line = f"(lambda t: open({str(path)!r}, 'a').write(f'{{t}}\\n'))(time.perf_counter())"

    def values(self) -> list[float]:
        """Every stamp, in order."""
        return [float(v) for v in self.path.read_text().split()]

    def span(self) -> float:
        stamps = self.values()
        assert len(stamps) >= 2, f"the script stamped {len(stamps)} time(s)"
        return stamps[-1] - stamps[0]

    def holds(self, figure: float | None, *, at_least: float) -> float:
        """Checks that ``figure`` is the span (it holds the span, plus at most 2 % and 20 ms for
        what surrounds the stamps), that the span is the nominal ``at_least`` or more, and returns
        the span. Fails for a figure 2x too high or too low."""
        span = self.span()
        assert span >= at_least, (span, at_least)
        assert figure is not None and span - 1e-4 <= figure <= span * 1.02 + 0.02, (figure, span)
        return span


# Every process forks two children, 8 levels deep (pausing 0.1 s at each): 511 processes unless a
# limit (--max-processes) holds it. A JAX script to discovery, that never imports jax.
FORK_BOMB = """\
import os, time
if False:
    import jax
depth = 0
while depth < 8:
    time.sleep(0.1)
    forked = 0
    for _ in range(2):
        try:
            if os.fork() == 0:
                depth, forked = depth + 1, -1
                break
            forked += 1
        except OSError as exc:
            print("fork refused:", exc, flush=True)
    if forked != -1:
        break
time.sleep(60)
"""


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def load_module(path: Path, module_name: str) -> ModuleType:
    """Import a script (an example program) as a module, by its file path."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_batch(folder: Path, results: Path, **options) -> BatchResult:
    """``run_jax_scripts`` on CPU with no history and no compile cache unless a test asks for them."""
    import jaxrun

    options.setdefault("device", "cpu")
    options.setdefault("history", False)
    options.setdefault("compile_cache", False)
    result = jaxrun.run_jax_scripts(folder, results_dir=results, return_detailed_results=True, **options)
    assert isinstance(result, BatchResult)
    return result


# A Ctrl-C must reach Python's handler even if the tests run with SIGINT ignored (as background jobs
# of a non-interactive shell do): this shim restores the default and execs jaxrun, rather than a
# preexec_fn, which forks a process that may already hold JAX's threads.
_SIGINT_SHIM = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'jaxrun', *sys.argv[1:]])"
)


def start_batch(tmp_path: Path, running: str, *extra: str) -> tuple[subprocess.Popen, list[str]]:
    """`jaxrun run tmp_path/s` in the background, returned once script ``running`` has started."""
    command = jaxrun_command("run", tmp_path / "s", "--device", "cpu", "--results-dir", tmp_path / "r",
                             "--no-history", *extra, interruptible=True)
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "r" / "logs" / f"{running}.stdout.log"
    deadline = time.monotonic() + 120
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc, command


RECORDS = "import time, sys\nimport jax, jaxrun\ntime.sleep({seconds})\njaxrun.record(value={value})\n"


def interrupt_and_resume(tmp_path: Path, sig: int, *extra: str) -> None:
    """Stop a batch of three while its second script runs, then `--resume` it: the folder must end
    as one uninterrupted run leaves it (``extra``: more flags, such as a backend)."""
    for name, seconds, value in (("a_first", 0.2, 1), ("b_slow", 30, 2), ("c_last", 0.2, 3)):
        write(tmp_path / "s", f"{name}.py", RECORDS.format(seconds=seconds, value=value))
    proc, command = start_batch(tmp_path, "b_slow", *extra)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 130, proc.communicate()
    first = load(tmp_path / "r" / "script_results" / "a_first_result.json")
    assert first["success"]
    # b_slow can finish now: the resumed run keeps a_first and runs the other two.
    write(tmp_path / "s", "b_slow.py", RECORDS.format(seconds=0.2, value=2))
    resumed = subprocess.run([*command, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    rows = {r["script_name"]: r for r in doc["script_results"]}
    assert list(rows) == ["a_first", "b_slow", "c_last"] and doc["metadata"]["complete"]
    assert all(r["success"] for r in rows.values()) and [r["results"]["value"] for r in rows.values()] == [1, 2, 3]
    assert rows["a_first"]["started_at"] == first["started_at"]  # kept, not run again
    # What the resumed run printed: the kept script said to be kept, the two that ran as 1 and 2 of 2.
    lines = [line for line in resumed.stderr.splitlines() if "a_first" in line or line.startswith("[")]
    assert "  a_first.py: kept from the earlier run (ok " in "\n".join(lines), resumed.stderr
    assert [line.split()[0] for line in lines if line.startswith("[")] == ["[1/2]", "[2/2]"], resumed.stderr
    assert rows["b_slow"]["started_at"] > first["finished_at"]
    # The same files as one uninterrupted run: one result, one pair of logs per script.
    assert sorted(p.name for p in (tmp_path / "r" / "script_results").iterdir()) == [
        "a_first_result.json", "b_slow_result.json", "c_last_result.json"]
    assert sorted(p.name for p in (tmp_path / "r" / "logs").iterdir()) == sorted(
        f"{n}.{s}.log" for n in rows for s in ("stdout", "stderr"))
    # Changed content is run again.
    write(tmp_path / "s", "a_first.py", RECORDS.format(seconds=0.2, value=10))
    again = subprocess.run([*command, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert [r["results"]["value"] for r in doc["script_results"]] == [10, 2, 3]


def survivors(token: str) -> list[str]:
    """Live processes (not zombies) whose command line names ``token``, this test's own excluded."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and token in " ".join(proc.info["cmdline"] or ()) \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid}: {' '.join(proc.info['cmdline'])}")
        except psutil.Error:
            continue
    return found


def read_terminal(master: int) -> str:
    """Everything a child wrote to the pseudo-terminal ``master`` until it closed it (closed here)."""
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def write_notebook(root: Path, rel: str, cells: list[str], metadata: dict | None = None) -> Path:
    """Write an nbformat 4 notebook at ``root/rel``: each string a code cell (dedented), or a
    markdown cell when it starts with ``"md:"``."""
    def cell(i: int, text: str) -> dict:
        if text.startswith("md:"):
            return {"cell_type": "markdown", "id": f"cell-{i}", "metadata": {}, "source": text[3:]}
        return {"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "execution_count": None, "outputs": [],
                "source": textwrap.dedent(text).strip("\n").splitlines(keepends=True)}

    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata or {},
                "cells": [cell(i, text) for i, text in enumerate(cells)]}
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1))
    return path


# --- a real browser (Chromium) for the HTML pages ---------------------------------------------

def chrome():  # type: ignore[no-untyped-def]
    webdriver = pytest.importorskip("selenium.webdriver")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if browser is None or driver_path is None:
        pytest.skip("needs Chromium and its driver (Debian: apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,2400"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver_path), options=options)


def open_page(driver, page: Path, ready: str) -> None:  # type: ignore[no-untyped-def]
    """Loads the page and waits until `ready` (a CSS selector) is in it. Under load, chromedriver's
    get() has returned while a first query still saw no table (CI: thead th empty, tbody rows found
    a moment later), so every test waits for what it reads instead of trusting get()."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 60).until(lambda d: d.execute_script(
        "return document.readyState === 'complete' && document.URL === arguments[0] "
        "&& document.querySelectorAll(arguments[1]).length > 0", page.as_uri(), ready))


def read_page(page: Path, ready: str, script: str) -> tuple[Any, list[dict[str, Any]]]:
    """What ``script`` returns on ``page`` in headless Chromium once ``ready`` (a CSS selector) is
    in it, and the page's SEVERE console errors: a test then checks what a reader of it sees."""
    driver = chrome()
    try:
        open_page(driver, page, ready)
        value = driver.execute_script(script)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()
    return value, errors


# --- git repositories of a test's own --------------------------------------------------------------

def git_in(repo: Path, *args: str) -> str:
    """``git -C repo ARGS``'s output (a failure fails the test)."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def git_commit(repo: Path, message: str, files: dict[str, str]) -> str:
    """``files`` (name -> text) written and committed in ``repo``; the commit's hash."""
    for name, text in files.items():
        write(repo, name, text)
    git_in(repo, "add", "-A")
    git_in(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return git_in(repo, "rev-parse", "HEAD")


# --- a history's runs ---------------------------------------------------------------------------------

def make_run(
    walls: list[float],
    *,
    path: str = "/proj/examples/model.py",
    name: str = "examples/model.py",
    device: str | None = "cpu",
    host: str = "hostA",
    at: str = "2025-01-01T00:00:00+00:00",
    commit: str | None = "abc123",
) -> HistoryRun:
    """A benchmarked run as the history stores it: one warm-up, then a counted sample of each wall time."""
    samples = [RunSample(index=0, warmup=True, success=True, wall_time=2.0, body_time=1.5)]
    samples += [
        RunSample(index=i, warmup=False, success=True, wall_time=w, body_time=w * 0.8, compile_time=0.1,
                  run_time=w * 0.8 - 0.1, memory_peak=123.0)
        for i, w in enumerate(walls)
    ]
    return HistoryRun(
        recorded_at=at, script_name=name, script_path=path, content_hash="h" * 64, git_commit=commit,
        git_dirty=False if commit else None, host=host, device_requested="auto", device_used=device,
        jax_version="0.4.35", jaxlib_version="0.4.35", jaxrun_version="0.1.0", samples=samples,
    )


# --- reading what jaxrun wrote: Markdown and HTML tables ------------------------------------------

def tables(text: str) -> dict[str, list[list[str]]]:
    """Every table as a GFM parser reads it (markdown-it-py with tables, as GitHub renders them):
    the heading above it -> its rows (the header row first), each a list of cell texts. A table
    whose rows do not match its header is no table for the parser, and is missing here."""
    from markdown_it import MarkdownIt

    found: dict[str, list[list[str]]] = {}
    heading, rows, cells, in_heading, cell = "", [], [], False, False
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type == "heading_open":
            in_heading = True
        elif token.type == "inline" and in_heading:
            heading, in_heading = token.content, False
        elif token.type in ("th_open", "td_open"):
            cell = True
        elif token.type == "inline" and cell:
            cells.append("".join(child.content for child in token.children or ()).strip())
            cell = False
        elif token.type in ("th_close", "td_close") and cell:  # an empty cell has no inline token
            cells.append("")
            cell = False
        elif token.type == "tr_close":
            rows.append(cells)
            cells = []
        elif token.type == "table_close":
            found[heading] = rows
            rows = []
    return found


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The body rows of the table under ``heading`` (e.g. "Every script"), as a GFM parser reads
    them; each row has as many cells as the header, or the parser would have seen no table."""
    rows = tables(text)[heading]
    header, body = rows[0], rows[1:]
    assert header[:3] == ["script", "status", "device"] and all(len(r) == len(header) for r in body), rows
    return body


class _ScriptsTable(HTMLParser):
    """The cells of the report's table#scripts (or another table's, by its id), as the page shows them."""

    def __init__(self, table_id: str = "scripts") -> None:
        super().__init__()
        self.table_id = table_id
        self.inside, self.header, self.rows, self.cell = False, [], [], None  # type: ignore[var-annotated]

    def handle_starttag(self, tag: str, attrs: list) -> None:  # type: ignore[type-arg]
        if tag == "table":
            self.inside = dict(attrs).get("id") == self.table_id
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = ""

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell)
            self.cell = None


def html_table(path: Path, table_id: str) -> list[list[str]]:
    """Every row of the report's table ``table_id`` (the header row first), each a list of cell texts."""
    parsed = _ScriptsTable(table_id)
    parsed.feed(path.read_text(encoding="utf-8"))
    return [[cell.strip() for cell in row] for row in parsed.rows if row]


def html_rows(path: Path) -> dict[str, dict[str, str]]:
    parsed = _ScriptsTable()
    parsed.feed(path.read_text(encoding="utf-8"))
    header, *body = [r for r in parsed.rows if r]
    return {row[0]: dict(zip(header, row)) for row in body}


# --- the MCP server, through the MCP SDK's client ---------------------------------------------------

def mcp_server_parameters(root: Path):  # type: ignore[no-untyped-def]
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "jaxrun", "mcp", "--root", str(root)],
                                 env=child_env(), cwd=str(root))


async def mcp_session(root: Path, body, errlog=sys.stderr) -> None:  # type: ignore[no-untyped-def]
    """`jaxrun mcp --root ROOT` as a real server process, driven by the MCP SDK's own stdio client:
    ``body(session)`` runs once the session is initialized."""
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async with stdio_client(mcp_server_parameters(root), errlog=errlog) as (read, write_stream):
        async with ClientSession(read, write_stream) as session:
            await session.initialize()
            await body(session)


def mcp_plain(model) -> dict:  # type: ignore[no-untyped-def]
    """An SDK object as the protocol spells it (camelCase), whatever the SDK version's field names."""
    return model.model_dump(by_alias=True, mode="json")


async def mcp_call(session, name: str, arguments: dict, **kwargs) -> dict:  # type: ignore[no-untyped-def]
    return mcp_plain(await session.call_tool(name, arguments, **kwargs))


# --- a sink that remembers --------------------------------------------------------------------------

class Recorder:
    """A sink that keeps the scripts started and the results, by job index."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.results: dict = {}

    def on_start(self, job, total: int) -> None:
        self.started.append(job.file_name)

    def on_result(self, job, result):
        self.results[job.index] = result
        return result


# --- crafted result files (for compare, exports and the views) ---------------------------------------

NOW = datetime(2024, 5, 1, tzinfo=timezone.utc).isoformat()


def noisy_times(seed: int, n: int = 10, scale: float = 1.0) -> list[float]:
    return list(scale * np.random.default_rng(seed).normal(1.0, 0.01, n))


def crafted_sample(index: int, wall: float | None, *, warmup: bool = False, success: bool = True) -> RunSample:
    if wall is None:
        return RunSample(index=index, warmup=warmup, success=success)
    compile_time = 0.1 * wall
    body = wall - 0.05
    figures = dict(
        wall_time=wall, body_time=body, import_time=0.05 * wall, compile_time=compile_time,
        steady_time=body - compile_time,  # the old name of run_time, still read
        memory_peak=100.0 + 10 * wall, live_array_bytes=4096.0,
    )
    # A sampled figure declared since (results/figures.py) gets a value of its kind, so that adding
    # one edits no test helper: a share of the wall for seconds, a fixed size or count otherwise.
    for figure in SCRIPT_FIGURES:
        if figure.sampled and figure.name not in figures and not set(figure.aliases) & set(figures):
            figures[figure.name] = 0.01 * wall if figure.kind == "seconds" else _CRAFTED_BY_KIND[figure.kind]
    return RunSample.model_validate(dict(index=index, warmup=warmup, success=success,  # as a file is read
                                         error_class=None if success else "script_error", **figures))


_CRAFTED_BY_KIND = {"mib": 50.0, "bytes": 1024.0, "count": 1.0, "ratio": 0.5, "joules": 120.0, "watts": 250.0}


def crafted_benchmark(
    name: str,
    walls: list[float],
    *,
    device: str = "cpu",
    used: str | None = None,  # where it ran (default: the device asked for)
    warmups: list[float] = (),  # type: ignore[assignment]
    failed: int = 0,
) -> ScriptBenchmark:
    warm = [crafted_sample(i, w, warmup=True) for i, w in enumerate(warmups)]
    counted = [crafted_sample(len(warm) + i, w) for i, w in enumerate(walls)]
    counted += [crafted_sample(len(warm) + len(walls) + i, None, success=False) for i in range(failed)]
    return ScriptBenchmark(
        script_name=name, script_path=f"/suite/{name}.py", device_requested=device, device_used=used or device,
        benchmark_runs=len(counted), warmup_runs=len(warm), runs_completed=len(walls),
        samples=counted, warmups=warm, mean_execution_time=float(np.mean(walls)) if walls else None,
    )


def crafted_bench_results(*benchmarks: ScriptBenchmark) -> BenchmarkResults:
    return BenchmarkResults(
        generated_at=NOW, host="testhost", jaxrun_version="0.1.0", jax_version="0.4.30", enabled=True,
        benchmark_runs=max((b.benchmark_runs for b in benchmarks), default=0), benchmarks=list(benchmarks),
    )


def crafted_script_result(name: str, wall: float | None, *, success: bool = True, device: str = "cpu") -> ScriptResult:
    return ScriptResult(
        script_name=name, script_path=f"/suite/{name}.py", success=success,
        error_class=None if success else "script_error", device_requested=device,
        device_used=device, execution_time=wall, body_time=None if wall is None else wall - 0.05,
        jit_compile_time=None if wall is None else 0.1 * wall, memory_peak=120.0,
        started_at=NOW, finished_at=NOW,
    )


def crafted_batch(results: list[ScriptResult], benchmarks: list[ScriptBenchmark] = ()) -> BatchResult:  # type: ignore[assignment]
    ok = sum(r.success for r in results)
    return BatchResult(
        metadata=BatchMetadata(
            jaxrun_version="0.1.0", device_requested="cpu", device_used="cpu", jax_version="0.4.30",
            execution_timestamp=NOW, scripts_found=len(results), scripts_executed=len(results),
            scripts_successful=ok, scripts_failed=len(results) - ok, search_paths=["/suite"],
            results_dir="/results", host="testhost", python_version="3.11", complete=True,
        ),
        device_info=None,
        performance_summary=PerformanceSummary(),
        script_results=results,
        benchmarking=BenchmarkingSection(enabled=bool(benchmarks), benchmarks=list(benchmarks)),
    )


def write_results_dir(path: Path, model: BenchmarkResults | BatchResult) -> Path:
    name = result_files.BENCHMARK_RESULTS if isinstance(model, BenchmarkResults) else result_files.EXECUTION_RESULTS
    result_files.write_model(path / name, model)
    return path


def with_programs(name: str, **programs: dict) -> ScriptResult:
    from jaxrun.results.models import CompileStats

    return crafted_script_result(name, 1.0).model_copy(
        update={"compiles": {p: CompileStats(**stats) for p, stats in programs.items()}})


def started_as(prestart: str) -> str:
    """The ``start_mode`` a run under ``--prestart prestart`` records (exec for ``none``)."""
    from jaxrun.run.process.prestart import START_MODES

    return START_MODES.get(prestart, "exec")


def assert_started_as_asked(start_mode: str | None, prestart_reason: str | None) -> None:
    """A run's process started as JAXRUN_PRESTART asks (not checked when it is unset); without a
    cgroup (JAXRUN_NO_CGROUP=1) a fork could not find every process the script leaves, so it is
    an exec that says so."""
    asked = os.environ.get("JAXRUN_PRESTART")
    if asked is None:
        return
    if asked != "none" and os.environ.get("JAXRUN_NO_CGROUP") == "1":
        assert start_mode == "exec" and "no cgroup" in (prestart_reason or ""), (start_mode, prestart_reason)
        return
    assert start_mode == started_as(asked), (start_mode, prestart_reason)


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every table as a GFM parser reads it (markdown-it-py, as GitHub renders): rows of cell texts,
    the header row first."""
    from markdown_it import MarkdownIt

    found: list[list[list[str]]] = []
    rows: list[list[str]] = []
    cells: list[str] = []
    cell = False
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type in ("th_open", "td_open"):
            cell = True
        elif token.type == "inline" and cell:
            cells.append("".join(child.content for child in token.children or ()).strip())
            cell = False
        elif token.type in ("th_close", "td_close") and cell:
            cells.append("")
            cell = False
        elif token.type == "tr_close":
            rows, cells = rows + [cells], []
        elif token.type == "table_close":
            found, rows = found + [rows], []
    return found
