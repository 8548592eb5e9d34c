"""How the ``jaxrun`` program ends (interfaces/entry.py ``command``): without the interpreter's
teardown, yet with everything a normal exit gives: its status, every line it wrote (flushed), the
exit handlers run, and a thread Python would wait for waited for. Real subprocesses."""

from __future__ import annotations

import subprocess
import sys

from helpers import child_env

EXITS = r"""
import atexit, os, sys, threading, time
from jaxrun.interfaces.entry import command
atexit.register(lambda: print("exit handler ran", flush=False))
# What Python calls as it waits for threads, before the exit handlers: only its own exit does.
threading._register_atexit(lambda: print("Python's own exit"))
sys.stdout.write("written, not flushed: ")
if sys.argv[1] == "thread":
    def late():
        time.sleep(0.3)
        print("the thread's last line")
    threading.Thread(target=late).start()
command(["--version"])
print("never reached")
"""


def _run(how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", EXITS, how], capture_output=True, text=True, timeout=120,
                          env=child_env())


def test_the_program_ends_with_its_output_flushed_and_its_exit_handlers_run() -> None:
    done = _run("plain")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("written, not flushed: jaxrun"), lines
    assert lines[-1] == "exit handler ran", lines
    assert "never reached" not in done.stdout and "Python's own exit" not in done.stdout
    assert done.stderr == ""


def test_a_thread_python_would_wait_for_is_waited_for() -> None:
    done = _run("thread")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # Python's own exit waits for the thread, then runs the exit handlers.
    assert set(lines[-3:-1]) == {"the thread's last line", "Python's own exit"}, lines
    assert lines[-1] == "exit handler ran", lines


def test_the_status_is_the_commands() -> None:
    done = subprocess.run([sys.executable, "-m", "jaxrun", "run", "--no-such-option"], capture_output=True,
                          text=True, timeout=120, env=child_env())
    assert done.returncode == 2 and "no such option" in done.stderr, (done.returncode, done.stderr)
