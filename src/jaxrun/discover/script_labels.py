"""The one name a reader sees for a script (its path under the folder given), on every surface:
what the batch's plan gives each job on the way to the first script, without the views' own
modules (present/view/script_rows.py re-exports these)."""

from __future__ import annotations

import os
from pathlib import PurePath
from typing import Any, Mapping, Optional, Sequence

from jaxrun.core.formatting import readable
from jaxrun.probe.sweep_point import point_text


def relative_path(script_path: str, search_paths: Sequence[str]) -> str:
    """The script's path relative to the folder it was found in, with "/" (a file given on the
    command line: its own name); the path as recorded when no search path holds it."""
    best: Optional[str] = None
    for root in search_paths:
        if script_path == root:
            candidate = os.path.basename(script_path)
        else:
            prefix = root.rstrip(os.sep) + os.sep
            if not script_path.startswith(prefix):
                continue
            candidate = script_path[len(prefix):]
        if best is None or len(candidate) < len(best):
            best = candidate
    return readable((best if best is not None else script_path).replace(os.sep, "/"))



def script_label(script_path: str, search_paths: Sequence[str], device: Optional[str] = None,
                 params: "Optional[Mapping[str, Any]]" = None) -> str:
    """The one name a reader sees for a script on every surface (the terminal, Markdown, HTML,
    exports, JUnit, compare, history, MCP): its path under the folder given, with "/" and its
    suffix (``sub/model.py``, ``train.ipynb``), a sweep's point (``train.py[batch=64]``), `` @gpu``
    when the batch ran it on several devices. ``<name>`` (``sub__model``) names its files, never
    the script to a reader."""
    return with_device(with_point(relative_path(script_path, search_paths), params), device)


def with_point(path: str, params: "Optional[Mapping[str, Any]]") -> str:
    """``train.py[batch=64,devices=2]``: the script at ``path`` run at one point of a sweep."""
    return f"{path}[{point_text(params)}]" if params else path


def point_name(name: str, params: "Optional[Mapping[str, Any]]") -> str:
    """The ``<name>`` of a sweep's point (``train[batch=64]``): its files' name, and the name
    ``jaxrun compare`` pairs it by. A value's "/" (a python path) is written as the rest of a
    ``<name>`` writes one, ``__``."""
    return f"{name}[{point_text(params).replace('/', '__')}]" if params else name


def with_device(path: str, device: Optional[str]) -> str:
    """The label of the script at ``path`` (:func:`relative_path`'s) run on ``device`` by a
    batch that ran it on several (:func:`script_label`)."""
    return path + (f" @{device}" if device else "")


def label_from_name(script_path: str, name: str) -> str:
    """:func:`script_label` of a script known only by its path and ``<name>`` (the history keeps
    no search folder): its path under the folder whose naming gives ``<name>`` (``sub__model`` of
    ``/w/proj/sub/model.py``: ``sub/model.py``); the file's own name when none does (a name made
    unique with ``_2``)."""
    from jaxrun.discover.scripts import script_display_name

    path = PurePath(script_path)
    base, bracket, point = name.partition("[")
    # A sweep's point (train[batch=64]): the script's label with the point as its name wrote it.
    suffix = f"[{point}" if bracket and name.endswith("]") else ""
    if not suffix:
        base = name
    for root in path.parents:
        if script_display_name(path, root) == base:
            return script_label(script_path, [str(root)]) + suffix
    return path.name + suffix
