"""Where jaxrun keeps things of its own: its cache folder (device facts, the persistent compilation
cache, the checkouts of ``jaxrun ab``), the history database, and how a child imports this very
jaxrun."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from jaxrun.core.defaults import HISTORY_ENV
from jaxrun.errors import UsageError

# The folder holding the jaxrun package (src/ in a checkout, site-packages when installed).
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def make_jaxrun_importable(env: dict[str, str]) -> dict[str, str]:
    """``env`` (changed in place, and returned) for a child that must import this very jaxrun: its
    PYTHONPATH as it is wherever jaxrun is importable without it (installed, or installed editable:
    found through site-packages), so that scripts see the sys.path and PYTHONPATH of
    `python script.py`; with jaxrun's folder first only for a source tree run as it is."""
    existing = env.get("PYTHONPATH", "")
    if _PACKAGE_PARENT not in existing.split(os.pathsep) and _PACKAGE_PARENT not in _site_paths():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, existing) if p)
    return env


def _site_paths() -> set[str]:
    """The folders of sys.path that any interpreter of this Python gets from site (the standard
    library, site-packages, .pth files), not from PYTHONPATH or the running script's folder."""
    from_env = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    return {p for p in sys.path[1:] if p and os.path.abspath(p) not in from_env}


def cache_dir() -> Path:
    """jaxrun's cache folder: ``$JAXRUN_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxrun`` or ``~/.cache/jaxrun``."""
    root = os.environ.get("JAXRUN_CACHE_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jaxrun"


# Under cache_dir(): the temporary checkouts of jaxrun ab / bisect (ab/checkouts.py), live work
# rather than a cache, so `jaxrun cache clear --all` leaves them to jaxrun ab.
AB_CHECKOUTS_DIR = "ab-checkouts"


def compile_cache_dir(value: str | os.PathLike[str] | bool | None) -> Path | None:
    """The persistent compilation cache folder: on by default (None/True), off with False."""
    if value is False:
        return None
    if value is None or value is True:
        return cache_dir() / "xla_compilation_cache"
    return Path(value).expanduser().resolve()


# A history on a PostgreSQL server is named by a URL (judge/history_db.py), never a path.
HISTORY_URL_SCHEMES = ("postgresql://", "postgres://")


def is_history_url(value: object) -> bool:
    return isinstance(value, str) and value.strip().startswith(HISTORY_URL_SCHEMES)


def default_history_path(cwd: str | os.PathLike[str] | None = None) -> Path | str:
    """``$JAXRUN_HISTORY`` if set (a path relative to ``cwd``, or a PostgreSQL URL), else
    ``<cwd>/.jaxrun/history.sqlite``."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    env = os.environ.get(HISTORY_ENV, "").strip()
    if is_history_url(env):
        return env
    if env:
        path = Path(env).expanduser()
        return path if path.is_absolute() else base / path
    return base / ".jaxrun" / "history.sqlite"


def history_path(history: str | os.PathLike[str] | bool | None) -> Path | str | None:
    """The database a ``history`` option names: a path, or a PostgreSQL URL (as given); None or
    True for the default; False for none."""
    if history is False:
        return None
    if history is None or history is True:
        return default_history_path()
    if is_history_url(history):
        return str(history).strip()
    if not isinstance(history, (str, os.PathLike)):
        raise UsageError(f"history must be a database path, a postgresql:// URL, True or False, got {history!r}")
    return Path(history).expanduser()
