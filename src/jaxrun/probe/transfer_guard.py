"""The probe's side of counting implicit transfers (run/process/transfers.py counts the lines): jaxrun runs
the script with ``JAX_TRANSFER_GUARD=log``; the parent must know when the script changed the guard
itself (then the count is not jaxrun's), so this tells it once, by a TRANSFER_GUARD event.

The variables are defined here, for both sides of the process boundary.
"""

from __future__ import annotations

import os

from jaxrun.probe import events

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Any, Callable

    from jaxrun.probe.channel import EventWriter

# JAX's transfer-guard variables (jax/_src/config.py), and the one jaxrun sets beside its own
# JAX_TRANSFER_GUARD=log (run/process/transfers.py).
GUARD_ENV = "JAX_TRANSFER_GUARD"
GUARD_DIRECTION_ENV = {
    "host_to_device": "JAX_TRANSFER_GUARD_HOST_TO_DEVICE",
    "device_to_host": "JAX_TRANSFER_GUARD_DEVICE_TO_HOST",
    "device_to_device": "JAX_TRANSFER_GUARD_DEVICE_TO_DEVICE",
}
OWN_GUARD_ENV = "JAXRUN_TRANSFER_GUARD"
LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"  # 2 or more: XLA writes no warnings, the guard's lines among them
ENVIRON_CHANGED = "os.environ:"
_GUARD_CONTEXTS = ("transfer_guard", "transfer_guard_host_to_device", "transfer_guard_device_to_host",
                   "transfer_guard_device_to_device")


def watch_transfer_guard(writer: EventWriter) -> None:
    """Tell the parent (once) when the script sets JAX's transfer guard itself: by
    ``jax.config.update`` (programs.py's wrapper) or the ``jax.transfer_guard*`` context managers.
    Its setting still applies exactly as it would without jaxrun ("disallow" raises)."""
    import jax

    from jaxrun.probe import programs

    told = []

    def tell(setting: str) -> None:
        if not told:
            told.append(setting)
            writer.send(events.TransferGuard(type=events.TRANSFER_GUARD, setting=setting))

    def on_config(name: str, value: Any) -> None:
        if name.startswith("jax_transfer_guard"):
            tell(f"jax.config.update({name!r}, {value!r})")

    programs.watch_config(on_config)
    if os.environ.get(OWN_GUARD_ENV) == "1":  # jaxrun's guard: did the script change it before importing jax?
        found = {name: os.environ.get(name) for name in (GUARD_ENV, *GUARD_DIRECTION_ENV.values(), LOG_LEVEL_ENV)}
        expected = {GUARD_ENV: "log", **dict.fromkeys(GUARD_DIRECTION_ENV.values()), LOG_LEVEL_ENV: found[LOG_LEVEL_ENV]}
        level = (found[LOG_LEVEL_ENV] or "").strip()
        if found != expected or (level.isdigit() and int(level) >= 2):
            tell(" ".join([ENVIRON_CHANGED, *(f"{k}={v}" for k, v in found.items() if v is not None)]))
        else:
            # JAX has read it: the processes the script starts from now on run as they would
            # without jaxrun (no guard lines in output the script may capture from them).
            os.environ.pop(GUARD_ENV, None)
            os.environ.pop(OWN_GUARD_ENV, None)

    for name in _GUARD_CONTEXTS:
        manager = getattr(jax, name, None)
        if callable(manager):
            setattr(jax, name, _Notifying(name, manager, tell))


class _Notifying:
    """``jax.transfer_guard*`` as they are (a function, a config ``State`` with its ``.value``),
    calling ``tell`` first when used as a context manager."""

    def __init__(self, name: str, inner: Any, tell: Callable[[str], None]) -> None:
        self._name, self._inner, self._tell = name, inner, tell
        self.__doc__ = getattr(inner, "__doc__", None)
        self.__wrapped__ = inner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._tell(f"jax.{self._name}({', '.join(repr(a) for a in args)})")
        return self._inner(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return repr(self._inner)
