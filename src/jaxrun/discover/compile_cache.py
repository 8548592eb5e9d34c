"""jaxrun's cache folder and JAX's persistent compilation cache in it, kept bounded.

Scripts run with JAX's persistent compilation cache on (``--compile-cache``, default
``<cache folder>/xla_compilation_cache``) and, unless the user sets ``JAX_COMPILATION_CACHE_MAX_SIZE``,
with JAX's own bound, ``compile_cache_max_size`` (default ``DEFAULT_COMPILE_CACHE_MAX_SIZE``): past
it JAX deletes the least recently used executables (its ``LRUCache``, which needs ``filelock``).
``jaxrun cache info`` / ``jaxrun cache clear`` read and empty it. :func:`compile_cache_warning`
checks, once before a batch, that the folder its scripts will use can be written: JAX itself only
warns in each script's stderr, and its figures then read as ordinary misses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import msgspec
import msgspec.structs

from jaxrun.core.defaults import MiB
from jaxrun.core.paths import AB_CHECKOUTS_DIR, cache_dir, compile_cache_dir

DEFAULT_COMPILE_CACHE_MAX_SIZE = 4 * 1024 * MiB
# JAX's file names in the cache folder: <key>-cache (an executable) and <key>-atime (its last use).
_ENTRY_SUFFIX = "-cache"


class CacheInfo(msgspec.Struct):
    path: str
    exists: bool
    entries: int  # executables stored
    bytes: int  # every file in the folder
    oldest: float | None  # modification times (s since the epoch) of the entries
    newest: float | None

    def as_dict(self) -> dict[str, object]:
        return msgspec.structs.asdict(self)


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
    device facts and measured peaks too, which are probed again when next needed; not the checkouts
    of jaxrun ab, which a running one uses and the next one removes). Returns (files deleted, bytes
    freed)."""
    if everything:
        roots = [cache_dir()]
    else:
        default = compile_cache_dir(None)
        roots = [Path(folder) if folder is not None else default]  # type: ignore[list-item]
    count = freed = 0
    for root in roots:
        for current, dirs, names in os.walk(root):
            if everything and Path(current) == root:
                dirs[:] = [d for d in dirs if d != AB_CHECKOUTS_DIR]  # jaxrun ab's checkouts, live or to be removed by it
            for name in names:
                file = Path(current) / name
                try:
                    size = file.lstat().st_size
                    file.unlink()
                except FileNotFoundError:
                    continue
                count, freed = count + 1, freed + size
    return count, freed


def unwritable_reason(folder: str | os.PathLike[str]) -> str | None:
    """Why the compilation cache ``folder`` cannot be written (``None``: it can). The folder is
    created when missing, as JAX would create it, and a file is written there and removed: a
    real write, so that a read-only mount stops root as well (root ignores permission bits)."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        return "it is a file, not a folder"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".jaxrun-write-check-{os.getpid()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def compile_cache_warning(
    folder: Path | None, cold: bool = False, env: Mapping[str, str] | None = None,
) -> str | None:
    """The one line to say when the persistent compilation cache a batch's scripts will use
    cannot be written; ``None`` when it can, when there is none (``folder`` None: off), or with
    ``cold`` (every run gets an empty folder of its own). The user's own
    ``JAX_COMPILATION_CACHE_DIR`` (in ``env``, the scripts' extra variables, or jaxrun's
    environment) wins over ``folder``, as in the scripts' environment."""
    if folder is None or cold:
        return None
    chosen = (env or {}).get("JAX_COMPILATION_CACHE_DIR") or os.environ.get("JAX_COMPILATION_CACHE_DIR") or folder
    reason = unwritable_reason(chosen)
    if reason is None:
        return None
    return (f"the compilation cache folder {str(chosen)!r} cannot be written ({reason}): every script compiles "
            "as with an empty cache and stores nothing (its cache figures read as misses); pass "
            "--compile-cache DIR with a folder you can write, or --no-compile-cache")
