"""jaxrun's optional dependencies (pyproject's extras), each with what needs it, and the one check
that a feature's packages can be imported, made before the feature's work starts (a batch that
would fail at its end for want of plotly never runs).

An extra that is not here is one whose absence changes no outcome: ``gpu`` / ``cuda12`` /
``cuda13`` (without nvidia-ml-py utilisation is null with its reason; JAX's CUDA build is the
scripts' own), ``examples`` (what the example scripts import) and ``dev``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import NamedTuple

from jaxrun.core.formatting import shorten_middle
from jaxrun.errors import UsageError


class Extra(NamedTuple):
    module: str  # what is imported
    extra: str  # pip install 'jaxrun[extra]'
    needed_by: str  # for the message: what asked for it


EXTRAS: dict[str, Extra] = {
    "report": Extra("plotly", "report", "the HTML report (--report, jaxrun report)"),
    "mcp": Extra("mcp", "mcp", "jaxrun mcp"),
    "postgres": Extra("psycopg", "postgres", "a history on PostgreSQL (--history postgresql://...)"),
}


def require(feature: "str | Extra") -> ModuleType:
    """The module ``feature`` needs (one of :data:`EXTRAS`, or a backend's own), imported; a UsageError naming the
    feature and the extra to install when it cannot be imported (missing, or broken: any error
    its import raises, said in the message)."""
    need = EXTRAS[feature] if isinstance(feature, str) else feature
    try:
        return importlib.import_module(need.module)
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything at import
        found = "is not installed" if isinstance(exc, ModuleNotFoundError) and exc.name == need.module else \
            f"cannot be imported ({type(exc).__name__}: {shorten_middle(' '.join(str(exc).split()), 200)})"
        raise UsageError(f"{need.needed_by} needs {need.module}, which {found}: "
                         f"pip install 'jaxrun[{need.extra}]'") from None
