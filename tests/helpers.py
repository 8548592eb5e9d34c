"""Small helpers shared by the test modules (crafted scripts in tmp folders, result files)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

from jaxrun.results.models import BatchResult


def write(root: Path, rel: str, text: str) -> Path:
    """Write a dedented script at ``root/rel`` (folders created) and return its path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


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


def jaxrun_command_with_sigint(*args: str) -> list[str]:
    """``python -m jaxrun ARGS`` that Ctrl-C (SIGINT) can interrupt."""
    return [sys.executable, "-c", _SIGINT_SHIM, *args]


def start_batch(tmp_path: Path, running: str, *extra: str) -> tuple[subprocess.Popen, list[str]]:
    """`jaxrun run tmp_path/s` in the background, returned once script ``running`` has started."""
    command = jaxrun_command_with_sigint("run", str(tmp_path / "s"), "--device", "cpu",
                                         "--results-dir", str(tmp_path / "r"), "--no-history", *extra)
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


def jaxrun(*args: object, env: dict[str, str] | None = None, prefix: tuple[str, ...] = (),
           timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m jaxrun ARGS`` to completion (``prefix``: a command to run it under, ``env``: more
    variables), its output captured as text."""
    return subprocess.run([*prefix, sys.executable, "-m", "jaxrun", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


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
