"""Implicit host<->device transfers, counted from JAX's transfer guard in its logging mode.

With ``JAX_TRANSFER_GUARD=log`` JAX's C++ writes one absl line to the process's fd 2 per implicit
transfer (explicit ``jax.device_put`` / ``jax.device_get`` are not guarded)::

    W1124 06:05:00.907168   19672 guard_lib.cc:125] host-to-device transfer: aval=ShapedArray(float32[100]), dst_sharding=...

jaxrun sets the guard (``run/process/environment.py``) unless the user's environment sets one of its
variables; the stderr pump (``run/process/process_watch.py``) passes the script's stderr through a
:class:`GuardLog`, which counts those lines and, when the guard is jaxrun's, leaves them out of
the log (they are jaxrun's noise, not the script's output). A line JAX wrote from its C++
dispatch path names no array (``host-to-device transfer: `` and nothing after): it is counted, its
bytes are unknown. On CPU the arrays are host memory: JAX's guard sees no device-to-host copy, so
that direction is unknown there (null), never 0. Nothing is counted (all null, with the reason)
where the lines cannot be trusted to be all there and jaxrun's: ``TF_CPP_MIN_LOG_LEVEL`` of 2 or
more hides them, or the script set the guard itself (probe/jax_hooks.py tells the parent).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from jaxrun.core.formatting import plural

# The variable jaxrun sets, the per-direction ones that override it (jax/_src/config.py), and
# jaxrun's marker beside its own JAX_TRANSFER_GUARD=log: the lines are then left out of the log.
from jaxrun.probe.transfer_guard import (
    ENVIRON_CHANGED,
    GUARD_ENV,
    LOG_LEVEL_ENV,
    OWN_GUARD_ENV,
)
from jaxrun.probe.transfer_guard import (
    GUARD_DIRECTION_ENV as DIRECTION_ENV,
)

DIRECTIONS = tuple(DIRECTION_ENV)
MAX_EXAMPLES = 5
# A partial last line held back (it may be the start of a guard line) is let go past this.
_MAX_HELD = 1 << 20

_MARK = b" transfer: "
_GUARD = (rb"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\s\]]+:\d+\] "
          rb"(host-to-device|device-to-device|device-to-host) transfer: ?(.*)")
_LINE = re.compile(_GUARD, re.S)  # searched in a line: it may follow what the script left unfinished on it
_CANDIDATE = re.compile(rb"[IWEF](?=\d|\Z)")
# Any beginning of an absl line's header (a line cut between two reads); what follows "] " is
# checked against the three directions.
_HEADER_PREFIX = re.compile(
    rb"[IWEF](?:\d{1,4}(?: (?:[\d:.]+(?: +(?:\d+(?: (?:[^\s\]]+(?:\](?: (?P<rest>.*))?)?)?)?)?)?)?)?)?", re.S)
# The longest a guard line's start can be before its direction has fully come (absl's header
# with a file's base name, then "device-to-device transfer: ").
_HEADER_MAX = 512
_STARTS = (b"host-to-device transfer: ", b"device-to-host transfer: ", b"device-to-device transfer: ")
_AVAL = re.compile(r"aval=ShapedArray\((\w+)\[([^\]]*)\]")
_IFRT = re.compile(r"dtype=(\w+); shape=\[([^\]]*)\]")  # an ifrt array's description

# Bytes per element as the host holds the array (numpy / ml_dtypes: 4-bit and 2-bit types take a byte).
DTYPE_BYTES: dict[str, int] = {
    "bool": 1, "int2": 1, "uint2": 1, "int4": 1, "uint4": 1, "int8": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "float4_e2m1fn": 1, "float8_e3m4": 1, "float8_e4m3": 1, "float8_e4m3fn": 1, "float8_e4m3fnuz": 1,
    "float8_e4m3b11fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
    # ifrt / XLA primitive names
    "pred": 1, "s2": 1, "u2": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4,
    "s64": 8, "u64": 8, "bf16": 2, "f16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16,
}


def parse_line(line: bytes) -> tuple[str, int | None, str | None] | None:
    """``(direction, bytes, why_unknown)`` of one guard line (without its newline), or None when it
    is not one. ``bytes`` is None when the line names no array or an unknown dtype."""
    match = _LINE.fullmatch(line)
    if match is None:
        return None
    direction = match.group(1).decode().replace("-", "_")
    size, why = array_bytes(match.group(2).decode("utf-8", "replace"))
    return direction, size, why


def array_bytes(description: str) -> tuple[int | None, str | None]:
    """Bytes of the array a guard line describes (``aval=ShapedArray(float32[8,16])``), or
    ``(None, why)``."""
    match = _AVAL.search(description) or _IFRT.search(description)
    if match is None:
        return None, "JAX's C++ dispatch path names no array" if not description.strip() else f"an array description jaxrun cannot read ({description[:60]})"
    dtype, dims = match.group(1), match.group(2)
    itemsize = DTYPE_BYTES.get(dtype.lower())
    if itemsize is None:
        return None, f"dtype {dtype} of unknown size"
    count = 1
    for dim in (d.strip() for d in dims.split(",") if d.strip()):
        digits = re.match(r"\d+", dim)  # `8@x`: a named axis of the sharding
        if digits is None:
            return None, f"dimension {dim!r} of unknown size"
        count *= int(digits.group())
    return count * itemsize, None


class GuardLog:
    """Counts the guard lines of a stream read in chunks; ``strip``: leaves them out of what it
    passes on. Other output is passed on unchanged and in order. JAX writes each line whole, but
    after whatever the script left unfinished on its line (a progress bar's ``\\r``): that part
    is the script's and stays. A partial last line is held back (until the next chunk or the
    end) only from where it could be the start of a guard line."""

    __slots__ = ("strip", "counted", "counts", "bytes", "undescribed", "unknown", "examples", "_held")

    def __init__(self, strip: bool, counted: tuple[str, ...] = DIRECTIONS) -> None:
        self.strip = strip
        self.counted = counted  # the directions whose guard level is "log"
        self.counts = dict.fromkeys(DIRECTIONS, 0)
        self.bytes = dict.fromkeys(DIRECTIONS, 0)
        self.undescribed = dict.fromkeys(DIRECTIONS, 0)  # lines whose bytes are unknown
        self.unknown: list[str] = []  # why, the first few
        self.examples: list[str] = []
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        """What of ``chunk`` goes to the log."""
        data = self._held + chunk if self._held else chunk
        self._held = b""
        if _MARK not in data:  # no guard line in it (the usual case): at most a partial one at the end
            if not data.endswith(b"\n"):
                start = self._possible_start(data, data.rfind(b"\n") + 1, marked=False)
                if start is not None:
                    self._held, data = data[start:], data[:start]
            return data if self.strip else chunk
        lines = data.split(b"\n")
        last = lines.pop()  # b"" when data ends with a newline
        kept = []
        for line in lines:
            at = self._count(line)
            if at is None or not self.strip:
                kept.append(line + b"\n")
            elif at:
                kept.append(line[:at])  # the script's unfinished line, before JAX's
        if last:
            start = self._possible_start(last, 0, marked=_MARK in last)
            if start is not None:
                self._held, last = last[start:], last[:start]
            kept.append(last)
        return b"".join(kept) if self.strip else chunk

    def flush(self) -> bytes:
        """At the end of the stream: a held partial line (no newline: not a whole guard line)."""
        held, self._held = self._held, b""
        return held if self.strip else b""

    @staticmethod
    def _possible_start(data: bytes, begin: int, *, marked: bool) -> int | None:
        """Where, from ``begin`` on, the rest of ``data`` (a line without its end) could be the
        start of a guard line; None when nowhere. ``marked``: the rest holds " transfer: "."""
        if len(data) - begin > _MAX_HELD:
            return None
        whole = _LINE.search(data, begin) if marked else None  # a guard line whose end has not come yet
        if whole is not None:
            return whole.start()
        # Else only its header and direction can have come: the last bytes are enough to look at.
        for candidate in _CANDIDATE.finditer(data, max(begin, len(data) - _HEADER_MAX)):
            match = _HEADER_PREFIX.fullmatch(data, candidate.start())
            if match is None:
                continue
            rest = match.group("rest")
            if rest is None or any(start.startswith(rest) for start in _STARTS):
                return candidate.start()
        return None

    def _count(self, line: bytes) -> int | None:
        """Where the guard line in ``line`` starts, counted; None when it holds none."""
        match = _LINE.search(line)
        if match is None:
            return None
        direction = match.group(1).decode().replace("-", "_")
        size, why = array_bytes(match.group(2).decode("utf-8", "replace"))
        self.counts[direction] += 1
        if size is None:
            self.undescribed[direction] += 1
            if why is not None and why not in self.unknown and len(self.unknown) < MAX_EXAMPLES:
                self.unknown.append(why)
        else:
            self.bytes[direction] += size
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(line[match.start():].decode("utf-8", "replace"))
        return match.start()


def hides_warnings(env: Mapping[str, str]) -> bool:
    """``TF_CPP_MIN_LOG_LEVEL`` of 2 or more: XLA's C++ writes no warning, the guard's lines included."""
    try:
        return int(env.get(LOG_LEVEL_ENV, "0").strip() or 0) >= 2
    except ValueError:
        return False


def guard_env(env: dict[str, str]) -> None:
    """Turn JAX's guard to its logging mode in a script's environment ``env``, unless the user's
    variables set a level already (theirs stays, and transfers are counted only where it is "log")
    or hide the lines it would write (``TF_CPP_MIN_LOG_LEVEL``)."""
    if GUARD_ENV in env or any(name in env for name in DIRECTION_ENV.values()) or hides_warnings(env):
        return
    env[GUARD_ENV] = "log"
    env[OWN_GUARD_ENV] = "1"


def guard_log(env: Mapping[str, str]) -> GuardLog | None:
    """The filter for a script's stderr, from its environment: None when no direction logs."""
    levels = {d: (env.get(DIRECTION_ENV[d]) or env.get(GUARD_ENV) or "").strip().lower() for d in DIRECTIONS}
    counted = tuple(d for d in DIRECTIONS if levels[d] == "log")
    if not counted or hides_warnings(env):
        return None
    return GuardLog(strip=env.get(OWN_GUARD_ENV) == "1", counted=counted)


def guard_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The transfer-guard variables of a script's environment (jaxrun's marker and the log level included)."""
    return {name: env[name] for name in (GUARD_ENV, *DIRECTION_ENV.values(), OWN_GUARD_ENV, LOG_LEVEL_ENV)
            if name in env}


SCRIPT_SET_GUARD = "the script set jax_transfer_guard itself"


def transfer_stats(log: GuardLog | None, env: Mapping[str, str], *, jax_loaded: bool, platform: str | None,
                   script_set: str | None) -> Any:
    """The result's ``transfers``: None without JAX; else the figures of each counted direction
    (``TransferStats``), null with the reason where they are unknown."""
    from jaxrun.results.models import Transfers, TransferStats

    if not jax_loaded:
        return None
    if script_set is not None:
        if script_set.startswith(ENVIRON_CHANGED):
            return TransferStats(reason=f"the script changed its environment before importing jax ({script_set}): "
                                        "jaxrun cannot count its transfers")
        return TransferStats(reason=f"{SCRIPT_SET_GUARD} ({script_set}): its counts are not jaxrun's")
    if hides_warnings(env):
        return TransferStats(reason=f"{LOG_LEVEL_ENV}={env[LOG_LEVEL_ENV]} in the script's environment hides the "
                                    "lines JAX's transfer guard writes (warnings): jaxrun cannot count them")
    if log is None:
        user = " ".join(f"{name}={env[name]}" for name in (GUARD_ENV, *DIRECTION_ENV.values()) if name in env)
        return TransferStats(reason=f"the script's environment sets {user or 'no transfer guard'}: jaxrun counts "
                                    "implicit transfers only where the guard's level is 'log'")
    figures: dict[str, Any] = {}
    reasons: list[str] = []
    for direction in DIRECTIONS:
        words = direction.replace("_", "-")
        if direction not in log.counted:
            reasons.append(f"{words}: the guard's level in the script's environment is not 'log'")
            continue
        if direction == "device_to_host" and platform == "cpu":
            reasons.append("device-to-host: on CPU arrays are host memory, JAX's guard sees no copy to the host")
            continue
        count, missing = log.counts[direction], log.undescribed[direction]
        size = None if missing else log.bytes[direction]
        if missing:
            why = "; ".join(log.unknown) or "no array named"
            reasons.append(f"{words}: bytes unknown, {missing} of the {plural(count, 'transfer')} logged without the "
                           f"array's size ({why}); at least {log.bytes[direction]} bytes in the others")
        figures[direction] = Transfers(count=count, bytes=size)
    return TransferStats(**figures, examples=list(log.examples), reason="; ".join(reasons) or None)
