"""The suite's last lines name the real components (Chromium, GNU time, Slurm, an extra's Python
package) whose tests it skipped because this machine lacks them, and how to install them
(tests/conftest.py: pytest_terminal_summary), so a run of the README's test command that skipped
the browser tests says so instead of passing in silence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SKIPPING = '''
import pytest
from helpers import chrome

def test_reads_the_report_in_a_browser():
    chrome()

def test_reads_gnu_times_figure():
    pytest.skip("GNU time is not installed at /usr/bin/time (apt-get install time)")

def test_needs_an_extra():
    pytest.importorskip("no_such_module_of_an_extra")

def test_needs_a_gpu():
    pytest.skip("needs a GPU: GPU slots are only built when JAX sees GPUs")

def test_runs():
    pass
'''


def _pytest(folder: Path, *args: str) -> str:
    """A pytest session of the tests' own conftest over ``folder``, on a PATH holding only Python
    (no chromium, no chromedriver there)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(Path(sys.executable).resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this session's
    env = {**env, "PATH": str(bin_dir), "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent / "src")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                           "--basetemp", str(folder / "tmp"), *args, str(folder / "test_demo.py")],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_last_lines_say_what_was_not_found_and_how_to_install_it(tmp_path: Path) -> None:
    (tmp_path / "test_demo.py").write_text(SKIPPING)
    lines = [line for line in _pytest(tmp_path).splitlines() if line.startswith("not found here:")]
    assert lines == [
        "not found here: Chromium and chromedriver (1 skipped), GNU time (1 skipped), Python's no_such_module_of_an_extra"
        " (1 skipped); install with: as root, apt-get install chromium chromium-driver time (.ci/run does) and"
        ' python3 -m pip install -e ".[dev]"; 1 more skipped for what this machine is (no GPU, not root, ...):'
        " pytest -rs says why"]


def test_nothing_is_said_when_nothing_is_missing(tmp_path: Path) -> None:
    (tmp_path / "test_demo.py").write_text("import pytest\n\ndef test_runs():\n    pass\n\n"
                                           "def test_gpu():\n    pytest.skip('needs a GPU')\n")
    assert "not found here" not in _pytest(tmp_path)
