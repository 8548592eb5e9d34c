"""jaxrun's cache folder and JAX's persistent compilation cache in it, kept bounded.

Scripts run with JAX's persistent compilation cache on (``--compile-cache``, default
``<cache folder>/xla_compilation_cache``) and, unless the user sets ``JAX_COMPILATION_CACHE_MAX_SIZE``,
with JAX's own bound, ``compile_cache_max_size`` (default ``DEFAULT_COMPILE_CACHE_MAX_SIZE``): past
it JAX deletes the least recently used executables (its ``LRUCache``, which needs ``filelock``).
``jaxrun cache info`` / ``jaxrun cache clear`` read and empty it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .defaults import MB, cache_dir, compile_cache_dir

DEFAULT_COMPILE_CACHE_MAX_SIZE = 4 * 1024 * MB
# JAX's file names in the cache folder: <key>-cache (an executable) and <key>-atime (its last use).
_ENTRY_SUFFIX = "-cache"


@dataclass
class CacheInfo:
    path: str
    exists: bool
    entries: int  # executables stored
    bytes: int  # every file in the folder
    oldest: float | None  # modification times (s since the epoch) of the entries
    newest: float | None

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _files(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return [e for e in entries if e.is_file(follow_symlinks=False)]
    except FileNotFoundError:
        return []


def cache_info(folder: str | os.PathLike[str] | None = None) -> CacheInfo:
    """What the compilation cache ``folder`` (default: jaxrun's) holds."""
    path = Path(folder) if folder is not None else compile_cache_dir(None)
    assert path is not None
    files = _files(path)
    entries = [f for f in files if f.name.endswith(_ENTRY_SUFFIX)]
    times = [f.stat().st_mtime for f in entries]
    return CacheInfo(
        path=str(path), exists=path.is_dir(), entries=len(entries), bytes=sum(f.stat().st_size for f in files),
        oldest=min(times) if times else None, newest=max(times) if times else None,
    )


def clear_cache(folder: str | os.PathLike[str] | None = None, *, everything: bool = False) -> tuple[int, int]:
    """Delete the compilation cache's files (``everything``: all of jaxrun's cache folder, the
    device facts and measured peaks too, which are probed again when next needed). Returns
    (files deleted, bytes freed)."""
    if everything:
        roots = [cache_dir()]
    else:
        default = compile_cache_dir(None)
        roots = [Path(folder) if folder is not None else default]  # type: ignore[list-item]
    count = freed = 0
    for root in roots:
        for current, _dirs, names in os.walk(root, topdown=False):
            for name in names:
                file = Path(current) / name
                try:
                    size = file.lstat().st_size
                    file.unlink()
                except FileNotFoundError:
                    continue
                count, freed = count + 1, freed + size
    return count, freed
