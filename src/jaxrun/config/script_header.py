"""A script's own settings, in a header comment::

    # jaxrun: timeout=900 device=cpu args="--steps 100"
    # jaxrun: xfail="diverges in float32" env="XLA_FLAGS=--xla_cpu_enable_fast_math=false"

Words are split like a shell; each is ``key=value`` (a bare ``key`` means true, or, for
``skip`` and ``xfail``, no reason given). Values are TOML scalars when they parse as one
(``900``, ``true``, ``1.5``), else text; ``args`` is split like a shell, ``env`` is
``KEY=VALUE`` words. Only the first lines of the file are read (``HEADER_LINES``, at most ``HEADER_BYTES``).

A notebook's settings are its ``metadata.jaxrun`` table (``{"timeout": 900, "args": ["--steps",
"100"], "env": {"XLA_FLAGS": "..."}}``: JSON values, or text read as in a comment) and the
``# jaxrun:`` lines of its first code cell, which win (each setting's ``place`` names the metadata or the cell's line).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from jaxrun.config.config_files import display
from jaxrun.config.config_keys import SCRIPT_KEYS, closest, pairs
from jaxrun.errors import UsageError
from jaxrun.probe import notebook_cells

HEADER_LINES = 40
# Read at once, at most: a file of one 50 MB line costs no more than a short one.
HEADER_BYTES = 64 * 1024
_MARKER = re.compile(rb"^\s*#\s*jaxrun\s*:(.*)$")
_BARE = {"skip": "skipped by its header comment", "xfail": "marked xfail in its header comment"}


class HeaderSetting(msgspec.Struct, frozen=True):
    key: str
    value: Any
    line: int
    place: str | None = None  # where it was set, when not "<script>:<line>" (a notebook's)


def read_header(script: Path) -> list[HeaderSetting]:
    """The settings in ``script``'s ``# jaxrun:`` comments (none when it cannot be read)."""
    if script.suffix == notebook_cells.SUFFIX:
        return _notebook_header(script)
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


def _notebook_header(notebook: Path) -> list[HeaderSetting]:
    """A notebook's ``metadata.jaxrun`` (line 0), then its first code cell's ``# jaxrun:`` lines."""
    try:
        data = notebook_cells.read(str(notebook))
    except (OSError, notebook_cells.NotebookError):
        return []  # discovery refuses (named) or reports (found in a folder) a notebook it cannot read
    where = f"{display(notebook)}: metadata.jaxrun"
    settings: list[HeaderSetting] = []
    for key, value in notebook_cells.settings(data).items():
        if key not in SCRIPT_KEYS:
            raise UsageError(f"{where}: unknown key {key!r}: {closest(key, SCRIPT_KEYS)}")
        if isinstance(value, str):
            value = _value(key, value, where)
        elif value is True and key in _BARE:  # "skip": true, as a bare `skip` in a comment
            value = _BARE[key].replace("header comment", "metadata")
        elif key == "env" and isinstance(value, dict):
            value = {str(k): str(v) for k, v in value.items()}
        settings.append(HeaderSetting(key, value, 0, where))
    cells = notebook_cells.code_cells(data)
    for number, raw in enumerate(cells[0].source.splitlines() if cells else [], start=1):
        match = _MARKER.match(raw.encode("utf-8", "surrogateescape"))
        if match:
            text = match.group(1).decode("utf-8", errors="replace")
            place = f"{display(notebook)}:cell 1:{number}"
            settings += [HeaderSetting(key, value, number, place) for key, value in _words(text, place)]
    return settings


def _words(text: str, where: str) -> list[tuple[str, Any]]:
    import shlex  # only for a script that has a '# jaxrun:' comment

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
    import shlex

    import tomllib

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
