"""The probe's command line, defined once for both sides of the process boundary.

The parent builds it (``ProbeArguments(...).command()``, run/process/environment.py) and the child reads
it back (``ProbeArguments.parse(argv)``, probe/__main__.py) through this one definition: a flag is
a field, named like it (``warm_calls`` -> ``--warm-calls``), typed by its default. A new setting
that reaches the probe is a field here and the line that fills it in run/process/environment.py.
A plain class, not a dataclass or a ``NamedTuple``: ``dataclasses`` imports ``inspect`` (~15 ms) and
``typing`` is ~10 ms of CPU in a fresh interpreter, and this module is on the way to every script's
first line, in jaxrun (run/process/spare.py) and in the probe.
"""

from __future__ import annotations

import sys

MODULE = "jaxrun.probe"
# How jaxrun starts a probe: ``python -c``, not ``python -m jaxrun.probe`` (which runs the same
# main(), for a probe started by hand): ``-m`` imports runpy, and with it importlib.util,
# contextlib, collections and functools, ~5 ms of CPU in every script's process.
ENTRY = "from jaxrun.probe.__main__ import run; run()"
SPARE = "--spare"  # a probe started before its job is known (run/process/spare.py); the job comes on stdin
# The per-batch prestarted interpreter that forks the scripts' probes (probe/fork_server.py); its mode follows.
PRESTART_SERVER = "--prestart-server"


class ProbeUsageError(SystemExit):
    """The probe's command line is not one the parent builds (a bug, or a hand-made command)."""


class ProbeArguments:
    """The fields, in order, each with its type and default (none: required); made with keywords."""

    events: str  # the private channel's file (probe/channel.py)
    script_argv: tuple[str, ...]  # the script and its own arguments, after ``--``
    entry: str | None = None  # warm mode: the function called ``warm_calls`` times
    warm_calls: int = 1
    profile: str | None = None  # --profile: where the jax.profiler trace goes
    xla_analysis: int = 1  # 0: --no-xla-analysis (probe/xla_facts.py is not asked)
    cell_outputs: int = 0  # 1: --save-notebooks (a notebook's cells send what they printed)

    _fields: tuple[str, ...]  # the fields above, in order (set below the class)
    _field_defaults: dict[str, object]

    def __init__(self, **values: object) -> None:
        unknown = set(values) - set(self._fields)
        missing = [name for name in self._fields if name not in values and name not in self._field_defaults]
        if unknown or missing:
            raise TypeError(f"ProbeArguments: no field {', '.join(sorted(unknown))}" if unknown
                            else f"ProbeArguments: {', '.join(missing)} missing")
        for name in self._fields:
            setattr(self, name, values[name] if name in values else self._field_defaults[name])

    def __repr__(self) -> str:
        return f"ProbeArguments({', '.join(f'{name}={getattr(self, name)!r}' for name in self._fields)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProbeArguments) and all(getattr(self, n) == getattr(other, n) for n in self._fields)

    def flags(self) -> list[str]:
        """``--name value`` for every field set away from its default (``events`` always)."""
        out: list[str] = []
        defaults = self._field_defaults
        for name in _flag_names():
            value = getattr(self, name)
            if name not in defaults or value != defaults[name]:
                out += [_flag(name), str(value)]
        return [*out, "--", *self.script_argv]

    def command(self, python: str | None = None) -> list[str]:
        """The whole command line: ``python -c ENTRY --events FILE ... -- script [args]``."""
        return [*interpreter(python), *self.flags()]

    @classmethod
    def parse(cls, argv: list[str]) -> "ProbeArguments":
        """The arguments :meth:`flags` wrote; :class:`ProbeUsageError` (its usage line) otherwise."""
        try:
            split = argv.index("--")
        except ValueError:
            raise ProbeUsageError(usage()) from None
        options, script_argv = argv[:split], tuple(argv[split + 1:])
        by_flag = {_flag(name): name for name in _flag_names()}
        given = dict(zip(options[::2], options[1::2]))
        required = {_flag(name) for name in _flag_names() if name not in cls._field_defaults}
        if not script_argv or len(options) % 2 or required - set(given) or set(given) - set(by_flag):
            raise ProbeUsageError(usage())
        values: dict[str, object] = {}
        for flag, text in given.items():
            name = by_flag[flag]
            try:
                values[name] = int(text) if isinstance(cls._field_defaults.get(name), int) else text
            except ValueError:
                raise ProbeUsageError(f"{flag} takes a whole number, got {text!r}\n{usage()}") from None
        return cls(script_argv=script_argv, **values)  # type: ignore[arg-type]


ProbeArguments._fields = tuple(name for name in ProbeArguments.__annotations__ if not name.startswith("_"))
ProbeArguments._field_defaults = {name: ProbeArguments.__dict__[name] for name in ProbeArguments._fields
                                  if name in ProbeArguments.__dict__}


def interpreter(python: str | None = None) -> list[str]:
    """What starts a probe, before its arguments (a spare's too: run/process/spare.py)."""
    return [python or sys.executable, "-c", ENTRY]


def _flag_names() -> list[str]:
    return [name for name in ProbeArguments._fields if name != "script_argv"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def usage() -> str:
    defaults = ProbeArguments._field_defaults
    names = " ".join(f"[{_flag(name)} {name.upper()}]" if name in defaults else f"{_flag(name)} {name.upper()}"
                     for name in _flag_names())
    return f"usage: python -m {MODULE} {names} -- SCRIPT [ARGS...]"
