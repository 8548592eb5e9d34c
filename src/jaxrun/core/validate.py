"""The validation of what a user types, in one place so that the CLI, the API, config files and
``JAXRUN_*`` variables agree: devices (``gpu:1``), time limits, sizes (``4GB``, ``512MiB``),
precisions, run counts, effects (``5%``); each mistake is one UsageError naming the setting."""

from __future__ import annotations

import math
import os
import re

from jaxrun.core.defaults import DEFAULT_LOG_CAP_BYTES, VALID_DEVICES, MiB
from jaxrun.core.formatting import fmt_bytes, shorten_middle
from jaxrun.errors import InvalidDeviceError, UsageError

# A device is a platform, or one device of it: "gpu:1" (JAX's id on the platform, as jax.devices()
# numbers them; "auto" takes no index). README, "Choosing a device".
DEVICE_FORMS = "auto, cpu, gpu, tpu, or one device of a platform: cpu:N, gpu:N, tpu:N (N = 0, 1, ...)"


def validate_device(device: str) -> str:
    """Return the normalised device name (``"gpu"``, ``"gpu:1"``) or raise a message that lists
    the valid forms."""
    name = str(device).strip().lower()
    platform, sep, index = name.partition(":")
    if platform not in VALID_DEVICES or (sep and (platform == "auto" or not _device_id(index))):
        raise InvalidDeviceError(f"unknown device {shown_value(device)}: choose one of {DEVICE_FORMS}")
    return f"{platform}:{int(index.lstrip('0') or '0')}" if sep else name


def _device_id(index: str) -> bool:
    """Whether ``index`` is a device id JAX can have: digits, below 2^31 (XLA's ids are int32)."""
    digits = index.lstrip("0") or "0"
    return index.isascii() and index.isdigit() and len(digits) <= 10 and int(digits) < 2**31


def split_device(device: str) -> tuple[str, int | None]:
    """``"gpu:1"`` -> ``("gpu", 1)``; ``"gpu"`` -> ``("gpu", None)`` (any device of the platform)."""
    platform, _, index = validate_device(device).partition(":")
    return platform, int(index) if index else None


def device_label(platform: str | None, index: int | None) -> str | None:
    """How every surface writes a device: ``gpu:1`` for one chosen device, else the platform."""
    return platform if platform is None or index is None else f"{platform}:{index}"


# How every surface says "no time limit": --timeout none, JAXRUN_TIMEOUT=none, timeout = "none"
# in a config file or a '# jaxrun:' comment; None through the API.
NO_TIMEOUT = "none"


def validate_timeout(timeout: object) -> float | None:
    """Seconds (> 0), or None for no limit (None, ``"none"``, infinity)."""
    if timeout is None or (isinstance(timeout, str) and timeout.strip().lower() == NO_TIMEOUT):
        return None
    try:
        value = float(timeout)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(timeout, bool) or math.isnan(value) or value <= 0:
        raise UsageError(f"timeout must be a number of seconds > 0, or {NO_TIMEOUT} for no limit, got {timeout!r}")
    return None if math.isinf(value) else value


# A size means what its unit says: decimal SI units (kB, MB, GB, TB) are powers of 1000, binary
# ones (KiB, MiB, GiB, TiB) powers of 1024, as memory_peak's MiB. A bare K/M/G/T is binary, as
# docker and ulimit read it. Case does not matter ("4gb" is 4GB).
_SIZE_UNITS = {"": 1, "b": 1,
               **{f"{p}b": 1000 ** n for n, p in enumerate("kmgt", 1)},
               **{f"{p}ib": 1024 ** n for n, p in enumerate("kmgt", 1)},
               **{p: 1024 ** n for n, p in enumerate("kmgt", 1)}}


SIZE_UNITS_HELP = ("kB, MB, GB, TB: powers of 1000; KiB, MiB, GiB, TiB and a bare K, M, G, T: powers of 1024 "
                   "(1GB = 10^9 bytes, 1GiB = 1G = 2^30 bytes); a plain number: bytes")


def parse_size(value: object, name: str, minimum: int) -> int:
    """``"4GB"`` (4 * 10^9), ``"4GiB"`` / ``"4G"`` (4 * 2^30), ``"512MiB"``, or a number of bytes -> bytes."""
    text = str(value).strip().lower().replace(" ", "")
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number):]
    try:
        size = float(number) * _SIZE_UNITS[unit]
    except (ValueError, KeyError):
        size = math.nan
    if not math.isfinite(size):
        raise UsageError(f"{name} must be a size like 4GiB, 512MiB or 8GB, got {shown_value(value)}: "
                         f"{SIZE_UNITS_HELP}")
    if size < minimum:
        got = f" ({fmt_bytes(size)})" if size >= 0 and unit not in ("", "b") else ""
        raise UsageError(f"{name} must be at least {fmt_bytes(minimum)}, got {shown_value(value)}{got}")
    return int(size)


def validate_memory_limit(value: object) -> int | None:
    """A host memory limit: None, or a size of at least 1 MiB."""
    return None if value is None else parse_size(value, "memory_limit", MiB)


# jax_default_matmul_precision's values (jax/_src/config.py): the legacy names, then the dot
# algorithm presets, spelt as JAX spells them.
MATMUL_PRECISIONS: tuple[str, ...] = (
    "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
    "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY", "ANY_F8_ANY_F8_ANY_FAST_ACCUM",
    "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16", "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6",
    "BF16_BF16_F32_X9", "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64",
)


def validate_matmul_precision(value: object) -> str | None:
    """None, or one of JAX's matmul precisions (any case) in JAX's spelling."""
    if value is None:
        return None
    by_case = {p.casefold(): p for p in MATMUL_PRECISIONS}
    name = by_case.get(str(value).strip().casefold())
    if name is None:
        raise UsageError(f"matmul_precision {value!r} is not one of JAX's: {', '.join(MATMUL_PRECISIONS)}")
    return name


def validate_non_negative(name: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UsageError(f"{name} must be a whole number >= 0, got {shown_value(value)}")
    return value


# Process runs of one script (--benchmark-runs, --warmup-runs): each is a process start and a
# sample kept in the results, so a count past this is a typo (or 2**63), not a benchmark.
MAX_RUNS = 10_000


def validate_runs(name: str, value: int) -> int:
    """A count of process runs: a whole number from 0 to :data:`MAX_RUNS`."""
    if validate_non_negative(name, value) > MAX_RUNS:
        raise UsageError(f"{name} must be at most {MAX_RUNS:,} process runs of each script, got {shown_value(value)}")
    return value


def shown_value(value: object, width: int = 80) -> str:
    """``value`` as a message quotes it: its repr, cut in the middle past ``width`` characters (a
    10 MB string is not echoed back) and a whole number too long to print said by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"a whole number of {value.bit_length():,} bits"
    return shorten_middle(repr(value), width)


def log_cap_bytes() -> int:
    """Per-stream log cap; ``JAXRUN_LOG_CAP_BYTES`` (bytes, or a size such as 200MiB) overrides the
    50 MiB default."""
    raw = os.environ.get("JAXRUN_LOG_CAP_BYTES")
    return DEFAULT_LOG_CAP_BYTES if raw is None else parse_size(raw, "JAXRUN_LOG_CAP_BYTES", 1)


def validate_optional_positive(name: str, value: object, note: str = "") -> int | None:
    """None, or a whole number >= 1 (``note`` says what counts)."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(f"{name} must be a whole number >= 1{note}, got {value!r}")
    return value


_EFFECT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%?)\s*$")


def parse_effect(text: str) -> float:
    """``"5%"``, ``"5 %"`` or ``"0.05"`` → 0.05 (the CLI's ``--min-effect``)."""
    match = _EFFECT.match(str(text))
    if not match:
        raise UsageError(f"invalid minimum effect {text!r}: write a percentage like '5%' or a fraction like '0.05'")
    value = float(match.group(1))
    if match.group(2):
        return value / 100
    if value >= 1:
        raise UsageError(
            f"minimum effect {text!r} is ambiguous: write '{match.group(1)}%' for a percentage "
            "or a fraction below 1 like '0.05'"
        )
    return value


def validate_since(value: str, name: str = "--since") -> str:
    """A date or time (ISO 8601: ``2026-11-01``, ``2026-11-01T12:00``, with or without a zone) as
    the history compares its runs' times: a date as it is, a time in UTC (without a zone: UTC),
    ``2026-11-01T11:00:00+00:00``. A :class:`UsageError` naming ``name`` for anything else."""
    from datetime import date, datetime, timezone

    text = value.strip() if isinstance(value, str) else value
    try:
        if isinstance(text, str) and len(text) == 10:
            return date.fromisoformat(text).isoformat()
        moment = datetime.fromisoformat(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{name} {shown_value(value)} is not a date or time: give one as 2026-11-01 or "
                         "2026-11-01T12:00 (ISO 8601; UTC unless it says its zone)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat()
