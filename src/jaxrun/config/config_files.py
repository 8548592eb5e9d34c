"""Finding and reading the config file: ``[tool.jaxrun]`` in a ``pyproject.toml`` or a
``jaxrun.toml`` (the same keys at its top level), the nearest one walking up from the searched
path. Each value keeps the line it was written on, for error messages and ``jaxrun config``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import msgspec

from jaxrun.errors import UsageError

JAXRUN_TOML = "jaxrun.toml"
PYPROJECT = "pyproject.toml"
CONFIG_ENV = "JAXRUN_CONFIG"  # names a config file, as --config does


class ConfigFile(msgspec.Struct):
    path: Path
    table: dict[str, Any]  # the jaxrun table: [tool.jaxrun] of a pyproject.toml, all of a jaxrun.toml
    prefix: tuple[str, ...]  # where that table is in the file: ("tool", "jaxrun") or ()
    lines: dict[tuple[str, ...], int] = msgspec.field(default_factory=dict)  # key path -> line number

    @property
    def folder(self) -> Path:
        """Relative paths and per-script globs in the file are relative to its folder."""
        return self.path.parent

    def where(self, *keys: str) -> str:
        """``pyproject.toml:12`` for the key (or table) at ``keys`` under the jaxrun table."""
        path = self.prefix + keys
        while path and path not in self.lines:
            path = path[:-1]  # a key in an inline table: the line of the table
        line = self.lines.get(path)
        return f"{display(self.path)}:{line}" if line else display(self.path)

    def table_name(self, *keys: str) -> str:
        """``[tool.jaxrun.scripts."sims/*.py"]``: the TOML header of the table at ``keys``."""
        parts = [p if re.fullmatch(r"[A-Za-z0-9_-]+", p) else f'"{p}"' for p in self.prefix + keys]
        return f"[{'.'.join(parts)}]" if parts else "the top level"


def display(path: Path) -> str:
    """A path as the user would type it: relative to the working folder when under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def find_config(start: Path) -> Path | None:
    """The nearest ``jaxrun.toml``, or ``pyproject.toml`` holding a ``[tool.jaxrun]`` table, in
    ``start`` (a folder, or a file's folder) or above it."""
    folder = start.resolve()
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        own = candidate / JAXRUN_TOML
        if own.is_file():
            return own
        project = candidate / PYPROJECT
        if project.is_file() and _has_jaxrun_table(project):
            return project
    return None


def _has_jaxrun_table(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    # Cheap before parsing: most pyproject.toml files have no jaxrun table at all.
    return "jaxrun" in text and "jaxrun" in _parse(path, text).get("tool", {})


def _parse(path: Path, text: str) -> dict[str, Any]:
    import tomllib  # only where a config file is read

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{display(path)}: not valid TOML: {exc}; fix the file or pass --no-config") from None


def read_config(path: Path) -> ConfigFile:
    """The jaxrun table of ``path`` (a pyproject.toml or a jaxrun.toml), with its lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such config file: {str(path)!r} — pass a pyproject.toml or jaxrun.toml") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the config file {str(path)!r}: {exc}") from None
    data = _parse(path, text)
    if path.name == JAXRUN_TOML:
        table, prefix = data, ()
    else:
        table, prefix = data.get("tool", {}).get("jaxrun"), ("tool", "jaxrun")
        if table is None:
            raise UsageError(f"{display(path)} has no [tool.jaxrun] table: add one, or name a jaxrun.toml")
        if not isinstance(table, dict):
            raise UsageError(f"{display(path)}: tool.jaxrun must be a table, got {table!r}")
    return ConfigFile(path.resolve(), table, prefix, key_lines(text))


# --- where each key is written -------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r'^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\'))*)\s*=')
_PART = re.compile(r'"([^"]*)"|\'([^\']*)\'|([A-Za-z0-9_-]+)')


def _dotted(text: str) -> tuple[str, ...]:
    return tuple(next(g for g in m.groups() if g is not None) for m in _PART.finditer(text))


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Each table header's and key's line (1-based), by its full dotted path. A line scanner, not
    a parser: it only has to find the lines of a file tomllib has already accepted; a key inside
    a multi-line value is not reported."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_multiline: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        header = _HEADER.match(line)
        if header and not line.lstrip().startswith("[["):
            table = _dotted(header.group(1))
            lines.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            lines.setdefault(table + _dotted(key.group(1)), number)
            rest = line[key.end():]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_multiline = quote
    return lines


def config_from_env(environ: os._Environ[str] | dict[str, str]) -> Path | None:
    value = environ.get(CONFIG_ENV, "").strip()
    return Path(value).expanduser() if value else None
