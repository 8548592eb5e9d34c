"""jaxrun's own version, from one source: the metadata of the installed distribution
(``importlib.metadata``), when that distribution holds the code that runs.

Code that no installed distribution holds (a source checkout on ``PYTHONPATH``, or a checkout
beside an install of another one) does not borrow the installed version: it is the version its
checkout declares with ``+source`` (PEP 440's local label: not a released build), or ``unknown``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "jaxrun"
_PACKAGE = Path(__file__).resolve().parents[1]
_CHECKOUT = _PACKAGE.parents[1]  # the src layout: <checkout>/src/jaxrun


@functools.cache
def version() -> str:
    """``0.1.0`` for an install; ``0.1.0+source`` for a checkout that is not installed; else ``unknown``."""
    installed = _installed_version()
    if installed is not None:
        return installed
    declared = _declared_version()
    return f"{declared}+source" if declared else "unknown"


def describe() -> str:
    """What ``jaxrun --version`` says: the version, and for code that is not an install, where it is."""
    if _installed_version() is not None:
        return version()
    if _declared_version():
        return f"{version()} (the source checkout at {_CHECKOUT}, not installed)"
    return f"unknown (not installed: {_PACKAGE})"


@functools.cache
def _installed_version() -> str | None:
    # Read from the dist-info folders themselves first: importing importlib.metadata alone costs
    # ~15 ms, on the way to every `jaxrun` command's first output. An install puts its dist-info
    # beside the package; an editable one in a site-packages folder on sys.path.
    for folder in dict.fromkeys([str(_PACKAGE.parent), *(p for p in sys.path if p.endswith("-packages"))]):
        for info in _dist_infos(folder):
            if _records_this_package(info) or _editable_here(_read(info / "direct_url.json")):
                return _metadata_version(info)
    import importlib.metadata as metadata  # what the scan cannot see (an egg, a zip)

    for path in ([str(_PACKAGE.parent)], None):
        for dist in metadata.distributions(name=DISTRIBUTION, **({"path": path} if path else {})):
            if _holds_this_code(dist):
                return dist.version
    return None


def _dist_infos(folder: str) -> list[Path]:
    """The ``jaxrun-<version>.dist-info`` folders in ``folder``."""
    try:
        with os.scandir(folder) as entries:
            return [Path(e.path) for e in entries
                    if e.name.startswith(f"{DISTRIBUTION}-") and e.name.endswith(".dist-info") and e.is_dir()]
    except OSError:
        return []


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _records_this_package(info: Path) -> bool:
    """Whether the install that wrote ``info`` wrote this package's ``__init__.py`` (its RECORD)."""
    if info.parent.resolve() != _PACKAGE.parent:
        return False
    return any(line.split(",", 1)[0] == f"{DISTRIBUTION}/__init__.py" for line in _read(info / "RECORD").splitlines())


def _metadata_version(info: Path) -> str | None:
    for line in _read(info / "METADATA").splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
        if not line:
            break  # the headers end at the first empty line
    return None


def _holds_this_code(dist: object) -> bool:
    """Whether ``dist`` (an ``importlib.metadata.Distribution``) installed the package that runs:
    its files hold this ``__init__.py``, or it is an editable install of the folder that holds it."""
    try:
        located = Path(dist.locate_file(f"{DISTRIBUTION}/__init__.py")).resolve()  # type: ignore[attr-defined]
        if located == _PACKAGE / "__init__.py":
            return True
        return _editable_here(dist.read_text("direct_url.json") or "")  # type: ignore[attr-defined]
    except (OSError, TypeError):
        return False


def _editable_here(direct_url: str) -> bool:
    """Whether ``direct_url.json``'s text says an editable install of the folder that holds this code."""
    try:
        direct = json.loads(direct_url or "{}")
    except ValueError:
        return False
    url = direct.get("url", "") if isinstance(direct, dict) else ""
    editable = isinstance(direct, dict) and (direct.get("dir_info") or {}).get("editable", False)
    if not editable or not url.startswith("file:"):
        return False
    project = Path(unquote(urlparse(url).path)).resolve()
    return _PACKAGE.is_relative_to(project)


@functools.cache
def _declared_version() -> str | None:
    """The version the checkout's ``pyproject.toml`` declares for jaxrun, or None."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            return None
    try:
        project = tomllib.loads((_CHECKOUT / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, ValueError):
        return None
    if project.get("name") != DISTRIBUTION or not isinstance(project.get("version"), str):
        return None
    return project["version"]


def __getattr__(name: str) -> str:
    """``__version__``, :func:`version`, read when it is first asked for: every layer takes it from
    here (``from jaxrun.core.version import __version__``), none from the root package above them."""
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
