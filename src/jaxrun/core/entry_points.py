"""What other packages add to jaxrun through entry points (``jaxrun.backends``, ``jaxrun.outputs``),
as pytest's ``pytest11`` and asv's plugins do: each entry point names one declaration object.

Reading entry points with ``importlib.metadata`` costs 35-50 ms of CPU in a small environment
(its import, then every distribution's metadata), on every batch. What it found is kept in
jaxrun's cache folder, keyed by the folders of ``sys.path`` and their modification times (an
install or uninstall adds or removes a ``.dist-info`` folder there, which changes its folder's
time), so that a batch reads it again only after the environment changed."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TypeVar

from jaxrun.core.paths import cache_dir

T = TypeVar("T")
CACHE_FILE = "entry_points.json"


def installed(group: str, kind: type[T]) -> tuple[dict[str, T], dict[str, str]]:
    """The declarations of ``group``'s entry points, by name, and for each one that could not be
    loaded (its import failed, or it names something that is not a ``kind``) why, in a few words.
    A name is the declaration's own ``name`` when it has one."""
    found: dict[str, T] = {}
    problems: dict[str, str] = {}
    points = named(group)
    if points:  # importlib.metadata's own loader, imported only when a package declared something
        from importlib.metadata import EntryPoint
    for name, value in points.items():
        try:
            loaded: Any = EntryPoint(name, value, group).load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin is said, not raised from deep inside it
            problems[name] = f"{value} could not be loaded: {type(exc).__name__}: {exc}".splitlines()[0]
            continue
        if not isinstance(loaded, kind):
            problems[name] = f"{value} is a {type(loaded).__name__}, not a jaxrun {kind.__name__}"
            continue
        found[getattr(loaded, "name", name)] = loaded
    return found, problems


def named(group: str) -> dict[str, str]:
    """``group``'s entry points, name -> ``module:attribute``, from the cache while the environment
    has not changed since it was read."""
    key = _environment()
    path = cache_dir() / CACHE_FILE
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("environment") == key and group in cached.get("groups", {}):
            return dict(cached["groups"][group])
    except (OSError, ValueError, AttributeError, TypeError):
        cached = {}
    from importlib.metadata import entry_points

    points = {point.name: point.value for point in entry_points(group=group)}
    groups = cached.get("groups", {}) if isinstance(cached, dict) and cached.get("environment") == key else {}
    _save(path, {"environment": key, "groups": {**groups, group: points}})
    return points


def _environment() -> list[list[object]]:
    """Each folder of sys.path with its modification time: what an install changes."""
    seen: list[list[object]] = []
    for entry in sys.path:
        if not entry:  # the working folder, whose time every file written there changes: no install
            seen.append([entry, None])
            continue
        try:
            seen.append([entry, os.stat(entry).st_mtime_ns])
        except OSError:
            seen.append([entry, None])
    return seen


def _save(path: Any, content: dict[str, Any]) -> None:
    """Written whole or not at all; a cache folder jaxrun cannot write costs only the next read."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(content), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        try:
            temporary.unlink()  # its own half-written file (a full disk): never left behind
        except OSError:
            pass
