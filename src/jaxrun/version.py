"""jaxrun's own version, from one source: the metadata of the installed distribution
(``importlib.metadata``), when that distribution holds the code that runs.

Code that no installed distribution holds (a source checkout on ``PYTHONPATH``, or a checkout
beside an install of another one) does not borrow the installed version: it is the version its
checkout declares with ``+source`` (PEP 440's local label: not a released build), or ``unknown``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "jaxrun"
_PACKAGE = Path(__file__).resolve().parent
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
    import importlib.metadata as metadata

    # An install puts its metadata beside the package: one folder read finds it. An editable
    # install keeps it elsewhere, found by the full search.
    for path in ([str(_PACKAGE.parent)], None):
        for dist in metadata.distributions(name=DISTRIBUTION, **({"path": path} if path else {})):
            if _holds_this_code(dist):
                return dist.version
    return None


def _holds_this_code(dist: object) -> bool:
    """Whether ``dist`` (an ``importlib.metadata.Distribution``) installed the package that runs:
    its files hold this ``__init__.py``, or it is an editable install of the folder that holds it."""
    try:
        located = Path(dist.locate_file(f"{DISTRIBUTION}/__init__.py")).resolve()  # type: ignore[attr-defined]
        if located == _PACKAGE / "__init__.py":
            return True
        direct = json.loads(dist.read_text("direct_url.json") or "{}")  # type: ignore[attr-defined]
    except (OSError, ValueError, TypeError):
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
