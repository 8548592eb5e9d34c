"""The probe's process ends as ``python script.py`` ends (probe/exiting.py): what the script left
behind is finalized, flushed and joined as the interpreter's exit does it, while a script that left
nothing to finalize ends without the interpreter's teardown. Each case runs in a real interpreter,
beside the same code under plain ``python`` (the ground truth); then through jaxrun, exec'd and forked."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import assert_started_as_asked, child_env, started_as, write

import jaxrun

# Each case: the code, and whether its exit needs the interpreter's teardown. The code writes what
# its exit does into files of the working folder and to its output, as a user's script would. The
# probe's end (HARNESS) tells apart the two ways out by os._exit, which only the way without the
# teardown calls.
CASES = {
    "plain": ("print(1)\nimport json\nx = [json.dumps({'a': 1})]\n", False),
    "closed file": ("with open('f.txt', 'w') as f:\n    f.write('written')\n", False),
    "finished generator": ("def g():\n    yield 1\nit = g()\nlist(it)\n", False),
    "bookkeeping weak references": ("import weakref\nclass A: pass\nkept = weakref.WeakValueDictionary()\n"
                                    "a = A()\nkept[1] = a\nseen = weakref.WeakSet([a])\n", False),
    "exit handler": ("import atexit\natexit.register(lambda: open('atexit.txt', 'a').write('once\\n'))\n", False),
    "output without a newline": ("import sys\nsys.stdout.write('no newline')\nsys.stderr.write('err')\n", False),
    "daemon thread": ("import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
                      False),
    "unclosed file": ("f = open('f.txt', 'w')\nf.write('buffered')\n", True),
    "replaced stdout": ("import io, sys\nsys.stdout = io.TextIOWrapper(open('out.txt', 'wb'))\nprint('late')\n", True),
    # (A finalizer that runs in the teardown finds the module's names cleared: its own it keeps.)
    "suspended generator": ("def g(open=open):\n    try:\n        yield 1\n    finally:\n"
                            "        open('gen.txt', 'w').write('closed')\nit = g()\nnext(it)\n", True),
    "finalizer": ("class Noisy:\n    def __del__(self):\n        print('finalized')\nkeep = Noisy()\n", True),
    # (Whether python's teardown calls it depends on the order it frees things in: only the way out
    # is compared.)
    "weak reference callback": ("import weakref\nclass A: pass\na = A()\n"
                                "r = weakref.ref(a, lambda _, open=open: open('ref.txt', 'w').write('called'))\n", True),
    "thread to join": ("import threading, time\n"
                       "def late():\n    time.sleep(0.3)\n    open('thread.txt', 'w').write('joined')\n"
                       "threading.Thread(target=late).start()\n", True),
    "extension module": ("import _csv\n", True),
    "exit status past 255": ("import sys\nsys.exit(300)\n", True),
    # Kept alive by a cycle: only the teardown's collections free these (an extension module keeps
    # the teardown).
    "unclosed file in a cycle": ("import _csv\nclass Log: pass\nlog = Log()\nlog.me = log\n"
                                 "log.f = open('f.txt', 'w')\nlog.f.write('cyclic')\n", True),
    "finalizer in a cycle": ("import _csv\nclass Noisy:\n    def __del__(self, open=open):\n"
                             "        open('del.txt', 'w').write('finalized')\nkeep = Noisy()\nkeep.me = keep\n", True),
    "jax, and an unclosed file in a cycle": ("import jax.numpy as jnp\nclass Log: pass\nlog = Log()\nlog.me = log\n"
                                             "log.f = open('f.txt', 'w')\nlog.f.write(str(jnp.ones(3).sum()))\n", True),
    "a library's finalizer in a cycle": ("import _csv, subprocess, sys\n"
                                         "p = subprocess.Popen([sys.executable, '-c', 'pass'])\np.wait()\np.me = p\n",
                                         True),
}
# Of the cases that keep the teardown, those whose objects are set aside from its collections
# (gc.freeze: every open file flushed, no finalizer of the script's own code left to a collection).
SPARED = {"unclosed file", "replaced stdout", "extension module", "exit status past 255", "unclosed file in a cycle",
          "jax, and an unclosed file in a cycle", "a library's finalizer in a cycle"}

# The probe's end, in an interpreter of its own: start() as the body begins, the case, then the
# probe's exit; what _needs_teardown decided goes to a file (after the case's exit handlers).
HARNESS = """\
import os, sys
from jaxrun.probe import exiting
exiting.start()
import gc
freeze = gc.freeze
def marked_freeze():
    os.close(os.open("spared", os.O_CREAT | os.O_WRONLY))
    freeze()
gc.freeze = marked_freeze
main = type(sys)("__main__")  # the case runs as python runs a script: the module __main__
sys.modules["__main__"] = main
code = 0
try:
    exec(compile(open("case.py").read(), os.path.abspath("case.py"), "exec"), main.__dict__)
except SystemExit as exc:
    code = exc.code
fast_exit = os._exit
def without_teardown(status):
    os.close(os.open("without_teardown", os.O_CREAT | os.O_WRONLY))
    fast_exit(status)
os._exit = without_teardown
exiting.leave(code)
"""


def effects(folder: Path, done: subprocess.CompletedProcess) -> dict[str, object]:
    """What a process left: its status, its output, and the files it wrote."""
    files = {p.name: p.read_text() for p in sorted(folder.iterdir())
             if p.name not in ("case.py", "harness.py", "without_teardown", "spared")}
    return {"status": done.returncode, "stdout": done.stdout, "stderr": done.stderr, "files": files}


def run_case(folder: Path, code: str, *command: str) -> dict[str, object]:
    folder.mkdir(parents=True)
    write(folder, "case.py", code)
    write(folder, "harness.py", HARNESS)
    done = subprocess.run([sys.executable, *command], cwd=folder, capture_output=True, text=True, timeout=60,
                          env=child_env())
    return effects(folder, done)


def same_but_folder(seen: dict[str, object], truth: dict[str, object], seen_in: Path, truth_in: Path) -> bool:
    """The same effects, but for the folder each ran in and the addresses of objects."""
    def plain(effects: dict[str, object], folder: Path) -> str:
        return re.sub(r"0x[0-9a-f]+", "ADDRESS", json.dumps(effects).replace(str(folder), "FOLDER"))

    return plain(seen, seen_in) == plain(truth, truth_in)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_probes_exit_does_what_pythons_does(tmp_path: Path, name: str) -> None:
    code, needs_teardown = CASES[name]
    python = run_case(tmp_path / "python", code, "case.py")
    probe = run_case(tmp_path / "probe", code, "harness.py")
    if name != "weak reference callback":
        assert same_but_folder(probe, python, tmp_path / "probe", tmp_path / "python"), (probe, python)
    assert (tmp_path / "probe" / "without_teardown").exists() != needs_teardown
    assert (tmp_path / "probe" / "spared").exists() == (name in SPARED)


def test_a_process_the_script_forked_exits_through_the_teardown(tmp_path: Path) -> None:
    code = ("import os\npid = os.fork()\nif pid:\n    os.waitpid(pid, 0)\n"
            "else:\n    f = open('child.txt', 'w')\n    f.write('from the child')\n")
    python = run_case(tmp_path / "python", code, "case.py")
    probe = run_case(tmp_path / "probe", code, "harness.py")
    assert probe == python and python["files"] == {"child.txt": "from the child"}


# Through jaxrun (each script runs in its own folder): exec'd, and forked from the prestarted interpreter.
# (Not the suspended generator: the probe's copy of the script's namespace, kept for the drain, is
# let go as the probe's main() returns, so its finalizer runs before the exit, where python's runs
# in the teardown, with the module's names already cleared.)
THROUGH_JAXRUN = ("unclosed file", "output without a newline", "exit handler", "finalizer", "plain",
                  "finalizer in a cycle", "jax, and an unclosed file in a cycle")


@pytest.mark.parametrize("prestart", ["none", "probe"])
def test_a_scripts_exit_through_jaxrun_is_pythons(tmp_path: Path, prestart: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXRUN_PRESTART", prestart)
    for name in THROUGH_JAXRUN:
        folder = tmp_path / name.replace(" ", "_")
        python = run_case(folder / "python", CASES[name][0], "case.py")
        (folder / "jaxrun").mkdir()
        script = write(folder / "jaxrun", "case.py", CASES[name][0])
        result = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "results" / folder.name)
        assert_started_as_asked(result.start_mode, result.prestart_reason)
        assert result.start_mode == started_as(prestart)
        files = {p.name: p.read_text() for p in (folder / "jaxrun").iterdir() if p.name != "case.py"}
        seen = {"status": result.exit_code, "stdout": Path(result.stdout_log).read_text(),
                "stderr": Path(result.stderr_log).read_text(), "files": files}
        assert seen == python, (name, json.dumps(seen), json.dumps(python))

