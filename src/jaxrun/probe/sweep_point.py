"""A sweep's point as its script sees it (``jaxrun run --param batch=32,64``): the parameters of
the run, how the parent passes them (``JAXRUN_PARAMS``, one JSON object, and ``JAXRUN_PARAM_<NAME>``
per parameter, its text) and how the script reads them back (:func:`params`, ``jaxrun.params``).

Also the one text of a point (``batch=64,devices=2``) that names its job on every surface and in
every file: the parent's plan and views and the child's reader share this module, which imports
nothing (the child imports it only when the script calls ``jaxrun.params()``).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Any, Mapping

PARAMS_ENV = "JAXRUN_PARAMS"
PARAM_ENV_PREFIX = "JAXRUN_PARAM_"


def value_text(value: "Any") -> str:
    """One value as a reader and a shell see it: ``64``, ``0.001``, ``true``, ``cpu``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def point_text(point: "Mapping[str, Any]") -> str:
    """``batch=64,devices=2``: the point's parameters in the sweep's order."""
    return ",".join(f"{name}={value_text(value)}" for name, value in point.items())


def point_env(point: "Mapping[str, Any]") -> "dict[str, str]":
    """The variables that pass ``point`` to the script's process."""
    import json

    env = {PARAMS_ENV: json.dumps(dict(point), separators=(",", ":"))}
    env.update({PARAM_ENV_PREFIX + name.upper(): value_text(value) for name, value in point.items()})
    return env


def params(**defaults: "Any") -> "dict[str, Any]":
    """The parameters of this run of the script: ``defaults`` with what the sweep's point sets over
    them (``jaxrun run train.py --param batch=32,64``: ``jaxrun.params(batch=8)`` is
    ``{"batch": 32}`` in the first point's run, ``{"batch": 64}`` in the second's, and
    ``{"batch": 8}`` outside a sweep or outside jaxrun). Values keep their types: numbers, booleans,
    strings as the sweep gave them."""
    text = os.environ.get(PARAMS_ENV)
    if not text:
        return dict(defaults)
    import json

    given = json.loads(text)
    if not isinstance(given, dict):
        raise ValueError(f"{PARAMS_ENV} must hold a JSON object of parameters, got a JSON {type(given).__name__}")
    return {**defaults, **given}
