"""core/held_interrupt.py: a Ctrl-C that comes while code that would drop it runs is raised once
that code is done: inside the import system (whose callbacks drop a KeyboardInterrupt), sent again
by the program's handler; inside an ``interrupt_held`` block (msgspec's C code, which clears it),
raised as the block ends. Real signals, each case in a child process of its own (its main thread
handles SIGINT); and the ``jaxrun`` program stopped by SIGINT as its first script starts, again and
again."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import child_env, jaxrun_command, write

SWALLOWED = r"""
import os, signal, sys, time
from jaxrun.core.held_interrupt import interrupt_held

def clears_what_is_raised():  # as C code that calls Python and clears its error does
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs here: KeyboardInterrupt, normally
    except BaseException:
        pass

held = sys.argv[1] == "held"
try:
    if held:
        with interrupt_held():
            clears_what_is_raised()
    else:
        clears_what_is_raised()
    time.sleep(0.2)
    print("went on")
except KeyboardInterrupt:
    print("interrupted")
"""


def _run(how: str) -> str:
    done = subprocess.run([sys.executable, "-c", SWALLOWED, how], capture_output=True, text=True, timeout=60,
                          env=child_env())
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_ctrl_c_cleared_inside_the_block_is_raised_after_it() -> None:
    assert _run("held") == "interrupted"
    assert _run("plain") == "went on"  # what happened to a batch stopped while its models were prepared


def test_without_a_ctrl_c_the_block_changes_nothing() -> None:
    code = ("import signal\nfrom jaxrun.core.held_interrupt import interrupt_held\nbefore = signal.getsignal(signal.SIGINT)\n"
            "with interrupt_held():\n    pass\nprint(signal.getsignal(signal.SIGINT) is before)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env())
    assert done.stdout.strip() == "True", done.stderr


# A module whose import is interrupted, and which drops the KeyboardInterrupt as the import
# system's callbacks do.
DROPS = """
import os, signal, time
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)
except BaseException:
    pass
"""
IMPORTS = r"""
import sys, time
from jaxrun.core import held_interrupt
if sys.argv[2] == "installed":
    held_interrupt.install()
sys.path.insert(0, sys.argv[1])
try:
    import drops_it
    time.sleep(0.3)  # the signal sent again arrives here
    print("went on")
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize("handler,seen", [("installed", "interrupted"), ("python's", "went on")])
def test_a_ctrl_c_inside_an_import_is_raised_after_it(tmp_path: Path, handler: str, seen: str) -> None:
    (tmp_path / "drops_it.py").write_text(DROPS)
    done = subprocess.run([sys.executable, "-c", IMPORTS, str(tmp_path), handler], capture_output=True, text=True,
                          timeout=60, env=child_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == seen, done.stderr


# The script notes when its first line ran; the batch is stopped right then, as a user's Ctrl-C
# or the benchmarks' SIGINT may stop it, while jaxrun imports what it put off until then.
FIRST_LINE = ("import os, time\nif not os.path.exists(os.environ['STAMP_FILE']):\n"
              "    open(os.environ['STAMP_FILE'], 'w').write(repr(time.time()))\nif False:\n    import jax\n")


@pytest.mark.slow
def test_jaxrun_stopped_as_its_first_script_starts_always_stops(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    for i in range(40):
        write(folder, f"s{i:02d}.py", FIRST_LINE)
    stamp = tmp_path / "stamp"
    for attempt in range(8):
        stamp.unlink(missing_ok=True)
        proc = subprocess.Popen([*jaxrun_command("run", folder, "--no-history", "--no-config", "-q", "--results-dir",
                                                 tmp_path / f"r{attempt}")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=child_env({"STAMP_FILE": str(stamp)}),
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while not (stamp.exists() and stamp.read_text()) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.001)
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"attempt {attempt}: jaxrun went on after SIGINT")
        assert proc.returncode == 130, (attempt, stderr)
        assert "interrupted" in stderr.splitlines()[-1], (attempt, stderr)
