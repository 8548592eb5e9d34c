"""``--python PATH`` (RunOptions.python): the scripts, the probe and the device facts run under
another interpreter, a second virtual environment with its own jax/jaxlib.

Two environments are made once and kept in the tests' base temporary folder (across sessions: a
pip install is ~20 s): a bare one (``python -m venv``, nothing installed: no jax, no pydantic) and
one with another jax release from PyPI (``OTHER_JAX``). Nothing of this environment may reach
them: jaxrun's probe is imported there through a folder holding only a link to the jaxrun package
(jaxrun/core/interpreters.py).

Where PyPI cannot be reached (or with ``JR_TESTS_STAND_IN_JAX=1``) the other release is a
stand-in: a ``--system-site-packages`` environment (so this environment's jax, seen from another
interpreter path) whose ``.pth`` hook makes jax and jaxlib report ``STAND_IN_VERSION``; the
tests then check that version instead.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import jaxrun as run_cli
from helpers import load, write

import jaxrun
from jaxrun.config.options import RunOptions
from jaxrun.core.interpreters import jaxrun_only_folder
from jaxrun.discover.devices import get_jax_device_info
from jaxrun.errors import UsageError
from jaxrun.probe.arguments import interpreter

OWN_JAX = importlib.metadata.version("jax")
OTHER_JAX = "0.10.1" if OWN_JAX != "0.10.1" else "0.10.2"

SCRIPT = """\
import jax
import jax.numpy as jnp
import jaxrun

double = jax.jit(lambda x: x * 2)
print(double(jnp.arange(3.0)))
jaxrun.record(jax_seen=jax.__version__)
"""


def _venv_root() -> Path:
    # The tests' base temporary folder (tests/conftest.py gives each worker a TMPDIR of its own).
    base = os.environ.get("JR_TESTS_BASE_TMP") or tempfile.gettempdir()
    root = Path(base) / f"jaxrun-test-venvs-{sys.version_info[0]}{sys.version_info[1]}"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _make_venv(name: str, packages: tuple[str, ...]) -> tuple[Path | None, str]:
    """``root/name/bin/python`` with ``packages`` installed, made once (a lock for parallel
    workers, a mark once complete); ``(None, why)`` where pip could not install them."""
    root = _venv_root()
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            status = done.read_text()
            return (folder / "bin" / "python", "") if status == "ok" else (None, status)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True, capture_output=True,
                       timeout=300)
        if packages:
            pip = subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "install", "-q", *packages],
                                 capture_output=True, text=True, timeout=600)
            if pip.returncode != 0:
                why = f"pip install {' '.join(packages)} failed: {pip.stderr.strip().splitlines()[-1:]}"
                done.write_text(why)
                return None, why
        done.write_text("ok")
        return folder / "bin" / "python", ""


@pytest.fixture(scope="session")
def bare_python() -> Path:
    """A virtual environment with nothing installed: no jax, no pydantic, no jaxrun."""
    python, why = _make_venv("bare", ())
    assert python is not None, why
    return python


# Where PyPI cannot be reached (or with JR_TESTS_STAND_IN_JAX=1): a stand-in for another release,
# a virtual environment that sees this one's packages (--system-site-packages) and whose own
# site-packages holds a .pth hook that makes jax and jaxlib report STAND_IN_VERSION once imported
# (the probe's own watch of `import jax` finds jax itself: the hook patches jax.version).
# Above the real one: jax refuses a jaxlib newer than itself (jax/_src/lib: check_jaxlib_version).
STAND_IN_VERSION = "99.0.0+stand.in"
_STAND_IN_HOOK = f"""
import sys

VERSION = {STAND_IN_VERSION!r}


class _StandIn:
    # jax.__version__ is jax.version's; jaxlib's own version module is left alone (jax checks it).
    def find_spec(self, name, path=None, target=None):
        if name not in ("jax.version", "jaxlib"):
            return None
        for finder in sys.meta_path:
            spec = None if finder is self or not hasattr(finder, "find_spec") else finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    module.__version__ = VERSION

                spec.loader.exec_module = exec_module
                return spec
        return None


sys.meta_path.insert(0, _StandIn())
"""


def _stand_in_venv() -> Path:
    root = _venv_root()
    folder, done = root / "jax-stand-in", root / "jax-stand-in.done"
    with open(root / "jax-stand-in.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", "--system-site-packages", str(folder)],
                           check=True, capture_output=True, timeout=300)
            [site] = (folder / "lib").glob("python3*/site-packages")
            (site / "_jaxrun_stand_in.py").write_text(_STAND_IN_HOOK)
            (site / "_jaxrun_stand_in.pth").write_text("import _jaxrun_stand_in\n")
            done.write_text("ok")
    return folder / "bin" / "python"


@pytest.fixture(scope="session")
def other_jax() -> tuple[Path, str]:
    """A virtual environment with another jax/jaxlib release than this one's, and that release:
    OTHER_JAX from PyPI, or the stand-in's version where it cannot be installed."""
    python, why = (None, "asked for") if os.environ.get("JR_TESTS_STAND_IN_JAX") else _make_venv(
        f"jax-{OTHER_JAX}", (f"jax=={OTHER_JAX}", f"jaxlib=={OTHER_JAX}"))
    if python is None:
        print(f"jax {OTHER_JAX} not installed ({why}): a stand-in environment reports {STAND_IN_VERSION}")
        return _stand_in_venv(), STAND_IN_VERSION
    return python, OTHER_JAX


# ------------------------------------------------------------------------------ the option itself


def test_a_bad_interpreter_is_one_usage_line(tmp_path: Path) -> None:
    """A missing path, a folder, a file that is not executable, an executable that is no Python
    and a Python older than jaxrun supports: exit 2, one line naming it and what to do."""
    write(tmp_path / "s", "a.py", "print('hi')\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    not_python = tmp_path / "not-python"
    not_python.write_text("#!/bin/sh\necho hello\n")
    old = tmp_path / "python3.8"
    old.write_text("#!/bin/sh\necho 3 8\n")
    for path in (not_python, old):
        path.chmod(0o755)
    cases = {
        tmp_path / "nope" / "python": "no such interpreter",
        tmp_path: "is not an executable file",
        plain: "is not an executable file",
        not_python: "does not run as a Python interpreter",
        old: "is Python 3.8; jaxrun's probe needs Python >= 3.10",
    }
    for path, words in cases.items():
        done = run_cli("run", tmp_path / "s", "--python", path, "--results-dir", tmp_path / "r", "--no-history",
                       "--no-config")
        assert done.returncode == 2, (path, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and str(path) in lines[0], (path, done.stderr)
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "r" / "jax_execution_results.json").exists()


def test_the_option_is_declared_once_and_reaches_every_surface(tmp_path: Path, bare_python: Path) -> None:
    """One field: the API keyword, the JAXRUN_PYTHON variable and `jaxrun config` know it; a
    virtual environment's bin/python is kept as given (a link, resolved it would lose its
    environment); None is jaxrun's own interpreter."""
    import inspect

    assert RunOptions.build().python is None
    assert RunOptions.build(python=str(bare_python)).python == str(bare_python)
    assert os.path.islink(bare_python)  # what a venv makes; the option keeps the link
    for function in (jaxrun.execute_jax_script, jaxrun.run_jax_scripts):
        assert inspect.signature(function).parameters["python"].default is None
    with pytest.raises(UsageError, match="no such interpreter"):
        RunOptions.build(python=str(tmp_path / "missing"))
    shown = run_cli("config", env={"JAXRUN_PYTHON": str(bare_python)})
    assert shown.returncode == 0, shown.stderr
    assert any("python" in line and str(bare_python) in line and "JAXRUN_PYTHON" in line
               for line in shown.stdout.splitlines()), shown.stdout


def test_the_config_file_path_is_relative_to_it_and_a_bare_name_is_on_path(tmp_path: Path, bare_python: Path) -> None:
    """`python = "env/bin/python"` in jaxrun.toml is that file's folder's env; a bare name is a
    command looked up on PATH, as a shell runs it."""
    project = tmp_path / "project"
    (project / "env" / "bin").mkdir(parents=True)
    os.symlink(bare_python, project / "env" / "bin" / "python")
    (project / "jaxrun.toml").write_text('python = "env/bin/python"\n')
    write(project, "a.py", "import jax\n")
    shown = run_cli("config", project / "a.py", "--json")
    assert shown.returncode == 0, shown.stderr
    assert str(project / "env" / "bin" / "python") in shown.stdout, shown.stdout
    named = RunOptions.build(python=os.path.basename(sys.executable))
    assert named.python is not None and os.path.isabs(named.python)


# ------------------------------------------------------------------ an environment without jax


def test_the_probe_imports_only_the_standard_library_there(bare_python: Path) -> None:
    """Under a bare environment, with the folder that holds only jaxrun first on PYTHONPATH, every
    probe module and jaxrun.record import and work without any third-party package."""
    folder = jaxrun_only_folder()
    assert os.listdir(folder) == ["jaxrun"] and os.path.islink(os.path.join(folder, "jaxrun"))
    code = """
import sys, pkgutil, importlib
before = set(sys.modules)
import jaxrun.probe
names = [m.name for m in pkgutil.iter_modules(jaxrun.probe.__path__, 'jaxrun.probe.')]
for name in names:
    importlib.import_module(name)
import jaxrun
jaxrun.record(a=1)  # a no-op outside a run
foreign = {m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names) - {'jaxrun'}
print(len(names), sorted(foreign))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(bare_python), "-c", code], env={**env, "PYTHONPATH": folder}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    count, foreign = done.stdout.split(" ", 1)
    assert int(count) > 10 and foreign.strip() == "[]", done.stdout


def test_without_jax_a_script_fails_with_its_import_error(tmp_path: Path, bare_python: Path) -> None:
    """The device facts (read by a child of that interpreter) say jax is missing there; a script
    that imports jax fails as import_error, its hint naming the environment to install into; a
    script without jax runs; the result says which interpreter ran it."""
    info = get_jax_device_info(python=str(bare_python))
    assert not info.jax_available and info.python_executable == str(bare_python)
    assert "No module named 'jax'" in (info.error or "") and str(bare_python) in (info.error or "")
    shown = run_cli("devices", "--python", bare_python)
    assert shown.returncode == 1 and "JAX is not usable" in shown.stdout, shown.stdout + shown.stderr

    uses_jax = write(tmp_path / "s", "uses_jax.py", SCRIPT)
    plain = write(tmp_path / "s", "plain.py", "import sys\nprint(sys.executable)\n")  # named: not discovered
    done = run_cli("run", uses_jax, plain, "--python", bare_python, "--results-dir", tmp_path / "r", "--no-history",
                   "--no-config", "--no-compile-cache")
    assert done.returncode == 1, done.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    rows = {r["script_name"]: r for r in doc["script_results"]}
    failed, plain = rows["uses_jax"], rows["plain"]
    assert failed["error_class"] == "import_error" and "No module named 'jax'" in failed["error_message"]
    assert str(bare_python) in failed["hint"]
    assert plain["success"] and plain["python"] == str(bare_python)
    assert (tmp_path / "r" / "logs" / "plain.stdout.log").read_text().strip() == str(bare_python)
    assert failed["command"][0] == str(bare_python) and not failed["prestarted"]
    assert doc["metadata"]["python"] == str(bare_python) and doc["metadata"]["jax_version"] is None


# --------------------------------------------------------------- an environment with another jax


@pytest.mark.slow
def test_a_script_runs_under_another_jax(tmp_path: Path, other_jax: tuple[Path, str]) -> None:
    """`jaxrun run --python VENV/bin/python`: the script imports that environment's jax (the
    version it records, the probe's compile_environment, the batch's metadata), its compilations
    are recorded, and the device facts are that interpreter's, cached apart from jaxrun's own."""
    python, version = str(other_jax[0]), other_jax[1]
    info = get_jax_device_info(python=python)
    assert info.jax_available and info.jax_version == version and info.python_executable == python
    assert info.platforms["cpu"].available
    assert get_jax_device_info().jax_version == OWN_JAX  # jaxrun's own, cached under another key
    assert get_jax_device_info(python=python) is info  # cached per interpreter

    write(tmp_path / "s", "double.py", SCRIPT)
    done = run_cli("run", tmp_path / "s", "--python", python, "--results-dir", tmp_path / "r", "--no-history",
                   "--no-config", "--no-compile-cache", "--json")
    assert done.returncode == 0, done.stderr
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    [row] = doc["script_results"]
    assert row["success"] and row["python"] == python and row["device_used"] == "cpu"
    assert row["results"]["jax_seen"] == version
    assert row["compile_environment"]["jax_version"] == version
    assert row["compile_environment"]["jaxlib_version"] == version
    assert row["compile_count"] >= 1 and row["compiles"]
    assert row["command"][:3] == interpreter(python)  # the probe, started under the other interpreter
    assert doc["metadata"]["jax_version"] == version and doc["metadata"]["python"] == python
    assert json.loads(done.stdout)  # the --json output parses


@pytest.mark.slow
def test_the_api_and_a_batch_of_both_interpreters(tmp_path: Path, other_jax: tuple[Path, str]) -> None:
    """execute_jax_script(python=...) records the other jax; without it, the same script runs
    under jaxrun's own (python null, its own jax)."""
    script = write(tmp_path, "double.py", SCRIPT)
    python, version = str(other_jax[0]), other_jax[1]
    other = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "a", compile_cache=False, python=python)
    own = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "b", compile_cache=False)
    assert other.success and own.success, (other.error_message, own.error_message)
    assert other.python == python and own.python is None
    assert other.compile_environment.jax_version == version
    assert own.compile_environment.jax_version == OWN_JAX


def test_the_facts_cache_key_follows_the_environments_installs(tmp_path: Path) -> None:
    """The device facts of another interpreter are cached under its path and what an install
    into its environment changes (its site-packages' entries), never under jaxrun's own key."""
    from jaxrun.discover.devices import _cache_key

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True, timeout=120)
    python = str(tmp_path / "env" / "bin" / "python")
    before = _cache_key(python)
    assert before == _cache_key(python) != _cache_key()
    [site] = {os.path.realpath(p) for p in (tmp_path / "env").glob("lib*/python3*/site-packages")}
    os.utime(site, ns=(1, 1))  # an install changes the folder's entries, and so its mtime
    assert _cache_key(python) != before


@pytest.mark.slow
def test_ab_of_two_environments_compares_each_programs_compile_time(tmp_path: Path, other_jax: tuple[Path, str]) -> None:
    """`jaxrun ab DIR --base-python OTHER --new-python OWN`: one script under two jax
    releases, in alternating pairs; each side records its jax version, and each program compiled on
    both sides has its trace, lower and compile time on both, with the ratio."""
    python, version = str(other_jax[0]), other_jax[1]
    write(tmp_path / "s", "double.py", SCRIPT)
    done = run_cli("ab", tmp_path / "s", "--base-python", python, "--new-python", sys.executable, "--pairs", "3",
                   "--warmup-pairs", "0", "--results-dir", tmp_path / "r", "--no-config")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r" / "ab_comparison.json").read_text())
    assert report["paired"] and report["sides"]["BASE"]["jax_version"] == version
    assert report["sides"]["NEW"]["jax_version"] == OWN_JAX and report["sides"]["BASE"]["python"] == python
    [program] = [p for p in report["scripts"][0]["programs"] if p["program"] == "jit(<lambda>)"]
    assert program["base_count"] == program["new_count"] == 1 and program["base_compile_time"] > 0
    assert program["compile_ratio"] == pytest.approx(program["new_compile_time"] / program["base_compile_time"])
    assert program["base_trace_time"] is not None and program["new_lower_time"] is not None
    # The terminal's line for it, when its compile time moved or the script's time changed (else the
    # JSON alone keeps it): both sides' phases, and the ratio.
    row = report["scripts"][0]
    changed = "slower" in (row["verdict"], row["phases"]["run_time"]["verdict"]) or \
        "faster" in (row["verdict"], row["phases"]["run_time"]["verdict"])
    lines = [line for line in done.stdout.splitlines() if "double.py: jit(<lambda>) compile" in line]
    assert len(lines) == (1 if program["moved"] or changed else 0), (program["moved"], changed, done.stdout)
    for line in lines:
        assert "trace" in line and "lower" in line and "count 1 -> 1" in line and " (x" in line
