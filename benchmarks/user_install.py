"""jaxrun as a user has it, for benchmarks/run.py: a virtual environment of its own (``python -m
venv``), jaxrun's dependencies as pip installs them, and jaxrun itself installed from a checkout
with ``pip install`` (never ``-e``), so its bytecode is what pip writes and nothing imports it from
the source tree.

The environment with the dependencies is kept between runs under
``~/.cache/jaxrun-bench/venv-<hash>`` (the hash of the checkout's ``[project] dependencies`` and ``examples`` extra, the
build backend and this Python): jax, jaxlib and the rest are installed once; jaxrun is reinstalled
into it on every run with ``pip install --no-deps --force-reinstall CHECKOUT``. ``fresh=True``
builds the environment anew (newer releases of the dependencies, as a new user would get them).

:func:`user_env` is the environment the measured commands run in: this process's, less what a
development machine sets and a user's shell does not have (``PYTHONPATH`` to a source tree,
``PYTHONDONTWRITEBYTECODE``, jaxrun's own ``JAXRUN_*`` settings), with the environment activated
as ``source bin/activate`` does.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxrun-bench"
EXTRA = "examples"
_READY = "jaxrun-bench-ready.json"  # written last: an environment without it is rebuilt
# Variables of this development machine that change how Python or jaxrun start and that a user's
# shell does not set.
_NOT_A_USERS = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONNOUSERSITE",
                "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX", "VIRTUAL_ENV")


@dataclass(frozen=True)
class Install:
    venv: Path
    python: Path  # the environment's python: the `python` of every side-by-side row
    jaxrun: Path  # the console script pip wrote
    checkout: Path
    revision: str  # the checkout's commit, "+ changes" when its tree differs from it
    dependencies: list[str]
    created: str  # when the environment's dependencies were installed
    versions: str  # Python, jax, jaxlib and jaxrun's other dependencies in the environment
    seconds: float  # this run's reinstall of jaxrun
    package_dir: Path  # where `import jaxrun` finds it

    def describe(self) -> str:
        return (f"jaxrun from `{self.checkout}` ({self.revision}) installed with `pip install --no-deps "
                f"--force-reinstall` (not editable; bytecode as pip writes it) into a virtual environment of its "
                f"dependencies and its `{EXTRA}` extra as pip installed them on {self.created} (`{self.venv}`); `python` is that "
                f"environment's python")


def _project(checkout: Path) -> dict:
    text = (checkout / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)


def _dependencies(checkout: Path) -> tuple[list[str], list[str]]:
    """The checkout's runtime dependencies with its ``examples`` extra (what the benchmark's
    workloads from examples/ import: optax), and its build requirements."""
    project = _project(checkout)
    extras = project["project"].get("optional-dependencies", {}).get(EXTRA, [])
    return ([*project["project"].get("dependencies", []), *extras],
            list(project.get("build-system", {}).get("requires", [])))


def revision(checkout: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "not a git checkout"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "src", "pyproject.toml")
    return f"{commit} + uncommitted changes" if changed else commit


def user_env(venv: Path | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in _NOT_A_USERS and not k.startswith("JAXRUN_")}
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return env


def _pip(python: Path, *args: str) -> None:
    command = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]
    proc = subprocess.run(command, env=user_env(), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stdout}{proc.stderr}")


def _versions(python: Path, dependencies: list[str]) -> str:
    import re

    names = ["jax", "jaxlib"] + [n for n in (re.split(r"[\s<>=!~;\[]", d, 1)[0] for d in dependencies)
                                 if n not in ("jax", "jaxlib")]
    code = ("import json, platform, sys\nfrom importlib.metadata import version\n"
            "def v(n):\n    try:\n        return version(n)\n    except Exception:\n        return '-'\n"
            f"print(json.dumps([platform.python_version(), [(n, v(n)) for n in {names!r} + ['jaxrun']]]))")
    out = subprocess.run([str(python), "-c", code], env=user_env(), capture_output=True, text=True, check=True).stdout
    py, pairs = json.loads(out)
    return f"Python {py}, " + ", ".join(f"{n} {v}" for n, v in pairs)


def install(checkout: Path, *, fresh: bool = False, log=print) -> Install:  # type: ignore[no-untyped-def]
    """The environment for ``checkout`` (made, or reused), with ``checkout`` installed into it now."""
    checkout = checkout.resolve()
    dependencies, build = _dependencies(checkout)
    key = hashlib.sha256(json.dumps([sorted(dependencies), sorted(build), sys.version, sys.executable]).encode()).hexdigest()[:12]
    venv = CACHE / f"venv-{key}"
    python = venv / "bin" / "python"
    ready = venv / _READY
    if fresh or not ready.is_file():
        shutil.rmtree(venv, ignore_errors=True)
        log(f"making {venv}: python -m venv, then pip install of jaxrun's dependencies ...")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], env=user_env(), check=True)
        _pip(python, "install", *dependencies, *build)  # build: hatchling, so that a reinstall needs no download
        ready.write_text(json.dumps({"dependencies": dependencies, "build": build,
                                     "created": time.strftime("%Y-%m-%d")}), encoding="utf-8")
    created = json.loads(ready.read_text(encoding="utf-8"))["created"]
    started = time.perf_counter()
    # A non-editable install: pip builds a wheel of the checkout (its build backend in an isolated
    # environment, as for any user) and compiles the bytecode of every module it installs.
    _pip(python, "install", "--no-deps", "--force-reinstall", str(checkout))
    seconds = time.perf_counter() - started
    where = subprocess.run([str(python), "-c", "import jaxrun, os; print(os.path.dirname(jaxrun.__file__))"],
                           env=user_env(), cwd=str(venv), capture_output=True, text=True, check=True).stdout.strip()
    package_dir = Path(where)
    if venv.resolve() not in package_dir.resolve().parents:
        sys.exit(f"jaxrun is imported from {package_dir}, not from the environment {venv}")
    missing = [p for p in package_dir.rglob("*.py") if not any(
        (p.parent / "__pycache__").glob(f"{p.stem}.*.pyc"))]
    if missing:
        sys.exit(f"pip left {len(missing)} of jaxrun's modules without bytecode, e.g. {missing[0]}")
    return Install(venv=venv, python=python, jaxrun=venv / "bin" / "jaxrun", checkout=checkout,
                   revision=revision(checkout), dependencies=dependencies, created=created,
                   versions=_versions(python, dependencies), seconds=seconds, package_dir=package_dir)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Install a checkout of jaxrun as a user has it; print where.")
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--fresh-venv", action="store_true")
    args = parser.parse_args()
    done = install(args.checkout, fresh=args.fresh_venv)
    print(done.describe())
    print(done.versions)
    print(f"reinstall of jaxrun: {done.seconds:.1f} s; python: {done.python}")
