"""A script's own settings, in a header comment::

    # jaxrun: timeout=900 device=cpu args="--steps 100"
    # jaxrun: xfail="diverges in float32" env="XLA_FLAGS=--xla_cpu_enable_fast_math=false"

Words are split like a shell; each is ``key=value`` (a bare ``key`` means true, or, for
``skip`` and ``xfail``, no reason given). Values are TOML scalars when they parse as one
(``900``, ``true``, ``1.5``), else text; ``args`` is split like a shell, ``env`` is
``KEY=VALUE`` words. Only the first lines of the file are read (``HEADER_LINES``, at most ``HEADER_BYTES``).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .files import display
from .keys import SCRIPT_KEYS, closest, pairs

HEADER_LINES = 40
# Read at once, at most: a file of one 50 MB line costs no more than a short one.
HEADER_BYTES = 64 * 1024
_MARKER = re.compile(rb"^\s*#\s*jaxrun\s*:(.*)$")
_BARE = {"skip": "skipped by its header comment", "xfail": "marked xfail in its header comment"}


@dataclass(frozen=True)
class HeaderSetting:
    key: str
    value: Any
    line: int


def read_header(script: Path) -> list[HeaderSetting]:
    """The settings in ``script``'s ``# jaxrun:`` comments (none when it cannot be read)."""
    try:
        with open(script, "rb") as handle:
            data = handle.read(HEADER_BYTES)
    except OSError:
        return []
    head = data.split(b"\n", HEADER_LINES)
    if len(head) <= HEADER_LINES and len(data) == HEADER_BYTES:
        head.pop()  # cut off by the bound: not a whole line
    head = head[:HEADER_LINES]
    settings: list[HeaderSetting] = []
    for number, raw in enumerate(head, start=1):
        match = _MARKER.match(raw.rstrip(b"\r\n"))
        if match:
            where = f"{display(script)}:{number}"
            text = match.group(1).decode("utf-8", errors="replace")
            settings += [HeaderSetting(key, value, number) for key, value in _words(text, where)]
    return settings


def _words(text: str, where: str) -> list[tuple[str, Any]]:
    try:
        words = shlex.split(text, comments=False)
    except ValueError as exc:
        raise UsageError(f"{where}: cannot read the '# jaxrun:' comment ({exc}): write key=value words") from None
    found = []
    for word in words:
        key, sep, raw = word.partition("=")
        key = key.strip()
        if key not in SCRIPT_KEYS:
            raise UsageError(f"{where}: unknown key {key!r} in the '# jaxrun:' comment: {closest(key, SCRIPT_KEYS)}")
        if not sep:
            found.append((key, _BARE.get(key, True)))
            continue
        found.append((key, _value(key, raw, where)))
    return found


def _value(key: str, raw: str, where: str) -> Any:
    if key == "args":
        return shlex.split(raw)
    if key == "env":
        try:
            return pairs(shlex.split(raw))
        except UsageError as exc:
            raise UsageError(f"{where}: env: {exc}") from None
    if key in ("skip", "xfail"):
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw  # text: device=cpu, memory_limit=4GB
