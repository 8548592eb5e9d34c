"""jaxrun's temporary checkouts of a repository's revisions (``jaxrun ab --base-rev/--new-rev``,
``jaxrun bisect``): where they live, how a run proves they are its own, and how the next run
removes what a killed one left.

Each run makes one folder of its own under jaxrun's cache, ``<cache>/ab-checkouts/<run>/``, and
holds a lock on it (``flock`` on its ``.lock``, which the kernel lets go of when the process dies,
``kill -9`` included). Its ``owner.json`` names the repository and every worktree the run adds,
written before ``git worktree add`` registers it, so nothing is ever registered that the folder
does not name. A run removes its own worktrees when it ends (``git worktree remove --force``, one
path at a time: never ``git worktree prune``, which would prune the user's own missing worktrees
too). A run killed before it could do so leaves its folder, unlocked: the next ``jaxrun ab`` or
``jaxrun bisect`` (:func:`remove_abandoned`) removes from each such folder's repository the worktrees
the folder names, lie inside it and the repository still lists, and then the folder. A worktree
anywhere else, the user's own, is never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from jaxrun.core.formatting import plural
from jaxrun.core.paths import AB_CHECKOUTS_DIR, cache_dir
from jaxrun.errors import UsageError
from jaxrun.results.result_files import atomic_write_text

__all__ = ["Checkouts", "checkouts", "checkouts_root", "remove_abandoned"]

logger = logging.getLogger("jaxrun")

OWNER_FILE = "owner.json"
LOCK_FILE = ".lock"
# A folder without its owner file yet is a run that is still making it, unless it is older.
_MAKING_SECONDS = 300


def checkouts_root() -> Path:
    """Where every run's checkouts live (``jaxrun cache clear --all`` leaves it alone)."""
    return cache_dir() / AB_CHECKOUTS_DIR


class Checkouts:
    """One run's folder of checkouts: its repository, the worktrees it added (named in
    ``owner.json`` before git registers them)."""

    def __init__(self, folder: Path, repo: Path, git: Callable[..., str]) -> None:
        self.folder, self.repo, self._git = folder, repo, git
        self.worktrees: list[str] = []
        self._save()

    def _save(self) -> None:
        atomic_write_text(self.folder / OWNER_FILE, json.dumps(
            {"made_by": "jaxrun ab", "pid": os.getpid(), "repository": str(self.repo), "worktrees": self.worktrees},
            indent=2))

    @contextlib.contextmanager
    def worktree(self, commit: str, name: str) -> Iterator[Path]:
        """``commit`` checked out (detached) at ``<folder>/<name>``, removed with its bookkeeping
        afterwards."""
        into = self.folder / name
        self.worktrees.append(name)
        self._save()  # named before git registers it: a kill in between leaves nothing unnamed
        self._git(self.repo, "worktree", "add", "--detach", "--force", str(into), commit)
        try:
            yield into
        finally:
            _remove(self.repo, into, self._git)


@contextlib.contextmanager
def checkouts(repo: Path, git: Callable[..., str]) -> Iterator[Checkouts]:
    """A folder of this run's own for checkouts of ``repo``, locked while the run lives and removed
    afterwards (what killed runs left is :func:`remove_abandoned`'s)."""
    root = checkouts_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
        lock = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise UsageError(f"cannot make a folder for the checkouts under {str(root)!r} ({exc.strerror or exc}); "
                         "set JAXRUN_CACHE_DIR to a folder that can be written") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield Checkouts(folder, repo, git)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(lock)


def remove_abandoned(git: Callable[..., str]) -> list[Path]:
    """Remove the checkouts of runs that were killed (their folder's lock is free): each worktree
    its folder names that its repository still lists, then the folder. Returns the folders removed."""
    root = checkouts_root()
    try:
        folders = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    removed = []
    for folder in folders:
        try:
            lock = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            if _age(folder) < _MAKING_SECONDS:
                continue  # a run making its folder right now
            lock = None
        except OSError:
            continue
        try:
            if lock is not None:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its run is alive
            if not (folder / OWNER_FILE).exists() and _age(folder) < _MAKING_SECONDS:
                continue  # made a moment ago, its lock not taken yet
            worktrees = _remove_worktrees_of(folder, git)
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
            logger.warning("removed the temporary checkouts a killed jaxrun ab left in %s%s", folder,
                           f" ({plural(len(worktrees), 'worktree')} of {worktrees[0][0]})" if worktrees else "")
        finally:
            if lock is not None:
                os.close(lock)
    return removed


def _remove_worktrees_of(folder: Path, git: Callable[..., str]) -> list[tuple[str, Path]]:
    """Unregister from its repository each worktree ``folder``'s owner file names: only paths
    inside ``folder`` that the repository lists as its worktrees. Returns (repository, path) of each."""
    try:
        owner = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
        repo = Path(owner["repository"])
        names = [str(n) for n in owner["worktrees"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # no owner file: nothing was registered (it is written before git registers anything)
    inside = {(folder / name).resolve() for name in names if "/" not in name and name not in ("", ".", "..")}
    if not inside or not repo.is_dir():
        return []
    try:
        listed = {Path(line[len("worktree "):]).resolve()
                  for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")}
    except UsageError:
        return []
    removed = []
    for path in sorted(inside & listed):
        if _remove(repo, path, git):
            removed.append((str(repo), path))
    return removed


def _remove(repo: Path, path: Path, git: Callable[..., str]) -> bool:
    """``git worktree remove --force`` of one worktree (its folder gone already or not), then its folder."""
    try:
        git(repo, "worktree", "remove", "--force", str(path))
        done = True
    except UsageError as exc:
        logger.debug("git worktree remove %s: %s", path, exc)
        done = False
    shutil.rmtree(path, ignore_errors=True)
    return done


def _age(path: Path) -> float:
    import time

    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0
