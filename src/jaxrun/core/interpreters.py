"""Another Python interpreter for the scripts (``--python PATH``): checked once, and made able to
import jaxrun's probe without this environment's packages.

A script run under another interpreter (a second virtual environment with another jax/jaxlib)
must see that environment's packages only. jaxrun's probe must still be importable there, so the
child's ``PYTHONPATH`` gets a folder of jaxrun's cache holding nothing but a symbolic link named
``jaxrun`` to this jaxrun package (:func:`importable_by`): never the folder jaxrun is installed in,
which is this environment's site-packages and would bring its jax along. What the child imports
of jaxrun (the probe, :func:`jaxrun.record`, the device facts' child) is standard library only.

The parent's own interpreter is ``None`` everywhere (the option's default): nothing changes then.
Imported on the way to every script's first line (run/process/environment.py): only what is cheap at the top.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jaxrun.core.paths import cache_dir
from jaxrun.errors import UsageError

# pyproject.toml's requires-python
MINIMUM_PYTHON = (3, 10)
# The jaxrun package's own folder (a checkout's src/jaxrun, or site-packages/jaxrun).
PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
_VERSION_TIMEOUT = 30.0
_checked: dict[tuple[str, int, int], tuple[int, int]] = {}


def validate_python(value: object) -> str | None:
    """The ``python`` option: None (jaxrun's own interpreter), or the absolute path of an
    executable file that runs a Python jaxrun supports (a bare name like ``python3.12`` is looked
    up on ``PATH``; a relative path in a config file is relative to its folder). Symbolic links are kept as given: a
    virtual environment's ``bin/python`` is a link to its base interpreter, and only through the
    link does it find its own packages."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise UsageError(f"python must be the path of a Python interpreter (like .venv/bin/python), got {value!r}")
    text = str(value).strip()
    # A bare name (python3.12) is a command on PATH, as a shell would run it.
    found = shutil.which(text) if os.sep not in text else None
    path = os.path.abspath(os.path.expanduser(found or text))
    if not os.path.exists(path):
        raise UsageError(f"python: no such interpreter {path!r}; pass the path of a Python executable, "
                         "like other-env/bin/python")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise UsageError(f"python: {path!r} is not an executable file; pass the path of a Python executable, "
                         "like other-env/bin/python")
    version = python_version(path)
    if version < MINIMUM_PYTHON:
        need = ".".join(map(str, MINIMUM_PYTHON))
        raise UsageError(f"python: {path!r} is Python {'.'.join(map(str, version))}; jaxrun's probe needs Python "
                         f">= {need}: pass an interpreter of Python {need} or later")
    return path


def python_version(path: str) -> tuple[int, int]:
    """``(major, minor)`` of the interpreter at ``path``, asked once per file (path, mtime, size)."""
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key in _checked:
        return _checked[key]
    try:
        proc = subprocess.run(
            [path, "-I", "-S", "-c", "import sys; print(*sys.version_info[:2])"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=_VERSION_TIMEOUT,
        )
        major, minor = (int(part) for part in proc.stdout.decode().split())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        raise UsageError(f"python: {path!r} does not run as a Python interpreter (it must print its version "
                         "for `-c 'import sys; print(*sys.version_info[:2])'`); pass the path of a Python executable, "
                         "like other-env/bin/python") from None
    _checked[key] = (major, minor)
    return major, minor


def is_other(python: str | None) -> bool:
    """Whether ``python`` is another interpreter than the one jaxrun runs in."""
    return python is not None and python != sys.executable


def importable_by(env: dict[str, str], python: str) -> dict[str, str]:
    """``env`` (changed in place, and returned) for a child of ``python`` that must import this
    jaxrun and nothing else of this environment: the folder holding only the link to jaxrun's
    package first on its ``PYTHONPATH``."""
    existing = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (jaxrun_only_folder(), existing) if p)
    return env


def jaxrun_only_folder() -> str:
    """A folder holding only ``jaxrun``, a link to this jaxrun package, made once per package
    folder in jaxrun's cache (or the temporary folder where the cache cannot be written)."""
    import hashlib

    name = "only-jaxrun-" + hashlib.sha256(PACKAGE_DIR.encode()).hexdigest()[:16]
    for parent in (cache_dir(), Path(tempfile.gettempdir()) / f"jaxrun-{os.getuid()}"):
        folder = parent / name
        link = folder / "jaxrun"
        try:
            if os.path.islink(link) and os.readlink(link) == PACKAGE_DIR:
                return str(folder)
            parent.mkdir(parents=True, exist_ok=True)
            made = tempfile.mkdtemp(prefix=".only-jaxrun-", dir=parent)
            os.symlink(PACKAGE_DIR, os.path.join(made, "jaxrun"))
            try:
                os.rename(made, folder)  # atomic; another process may have made it first
            except OSError:
                shutil.rmtree(made, ignore_errors=True)
                if not (os.path.islink(link) and os.readlink(link) == PACKAGE_DIR):
                    shutil.rmtree(folder, ignore_errors=True)  # a stale one: made again next time
                    continue
            return str(folder)
        except OSError:
            continue
    raise UsageError(f"cannot make jaxrun importable by another interpreter: neither {cache_dir()} nor the "
                     "temporary folder can be written; set JAXRUN_CACHE_DIR to a writable folder")


def installed_marks(python: str) -> str:
    """What changes when the environment of ``python`` changes, read without running it: the
    interpreter file, and each ``site-packages`` (or ``dist-packages``) folder of its prefix (a package added, removed or
    upgraded changes the folder's entries) with its jax and jaxlib version files."""
    import glob

    parts = [python]
    try:
        st = os.stat(python)
        parts.append(f"{st.st_mtime_ns}:{st.st_size}")
    except OSError:
        parts.append("missing")
    prefix = os.path.dirname(os.path.dirname(python))
    sites = [site for kind in ("site-packages", "dist-packages")  # dist-packages: Debian's system Python
             for site in glob.glob(os.path.join(prefix, "lib*", "python3*", kind))]
    for site in sorted(sites):
        for item in (site, os.path.join(site, "jax", "version.py"), os.path.join(site, "jaxlib", "version.py")):
            try:
                parts.append(f"{item}:{os.stat(item).st_mtime_ns}")
            except OSError:
                parts.append(f"{item}:-")
    return "\n".join(parts)
