"""What other packages add to jaxrun through entry points (``jaxrun.backends``, ``jaxrun.outputs``),
as pytest's ``pytest11`` and asv's plugins do: each entry point names one declaration object.
Looking them up reads every installed distribution's metadata (tens of ms), so a caller does it
only when a built-in answer is not enough, or while a script runs."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def installed(group: str, kind: type[T]) -> tuple[dict[str, T], dict[str, str]]:
    """The declarations of ``group``'s entry points, by name, and for each one that could not be
    loaded (its import failed, or it names something that is not a ``kind``) why, in a few words.
    A name is the declaration's own ``name`` when it has one."""
    from importlib.metadata import entry_points

    found: dict[str, T] = {}
    problems: dict[str, str] = {}
    for point in entry_points(group=group):
        try:
            loaded: Any = point.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin is said, not raised from deep inside it
            problems[point.name] = f"{point.value} could not be loaded: {type(exc).__name__}: {exc}".splitlines()[0]
            continue
        if not isinstance(loaded, kind):
            problems[point.name] = f"{point.value} is a {type(loaded).__name__}, not a jaxrun {kind.__name__}"
            continue
        found[getattr(loaded, "name", point.name)] = loaded
    return found, problems
