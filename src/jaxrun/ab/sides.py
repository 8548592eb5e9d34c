"""The two sides of an A/B comparison (``jaxrun ab``, ``jaxrun bisect``): two folders, two git
revisions of one repository (each checked out into a temporary worktree under jaxrun's cache,
removed afterwards, or by the next run when this one is killed: ab/checkouts.py; the user's own
tree and worktrees are never touched), or one folder under two Python interpreters.

A :class:`Side` is where its scripts are and how they run; :func:`sides` makes both from what the
user gave and cleans up what it made, whatever happens (Ctrl-C included).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from jaxrun.ab.checkouts import checkouts, remove_abandoned
from jaxrun.config.ab_options import ABOptions
from jaxrun.errors import UsageError

__all__ = ["Side", "git", "repository_of", "revision", "sides"]

_GIT_TIMEOUT = 120


@dataclass(frozen=True)
class Side:
    label: str  # "BASE" / "NEW", or a revision in a bisect
    root: Path  # the folder (or script) whose scripts run on this side
    python: str | None = None  # the interpreter (None: jaxrun's own)
    commit: str | None = None  # the revision checked out, its full hash
    given: str = ""  # what the user named: a folder, "rev v1.2", "python /x/bin/python"

    def describe(self) -> str:
        parts = [self.given or str(self.root)]
        if self.commit and self.commit not in self.given:
            parts.append(f"commit {self.commit[:12]}")
        return ", ".join(parts)


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS``'s output; a :class:`UsageError` with git's own message when it fails."""
    if shutil.which("git") is None:
        raise UsageError("git is not installed: comparing revisions needs it (or compare two folders instead)")
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=_GIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise UsageError(f"git {' '.join(args)} did not finish in {_GIT_TIMEOUT} s in {repo}") from None
    if done.returncode != 0:
        message = " ".join((done.stderr or done.stdout).split()) or f"exit status {done.returncode}"
        raise UsageError(f"git {' '.join(args)} failed in {repo}: {message}")
    return done.stdout.strip()


def repository_of(path: Path) -> tuple[Path, Path]:
    """``(the repository's top folder, path relative to it)`` for a path inside a git repository."""
    folder = path if path.is_dir() else path.parent
    if not folder.exists():
        raise UsageError(f"no such file or folder: {str(path)!r}")
    try:
        top = Path(git(folder, "rev-parse", "--show-toplevel")).resolve()
    except UsageError:
        raise UsageError(f"{str(path)!r} is not inside a git repository: --base-rev / --new-rev / bisect check "
                         "revisions out of the repository that holds it") from None
    return top, path.resolve().relative_to(top)


def revision(repo: Path, rev: str) -> str:
    """The full hash of ``rev``; a :class:`UsageError` naming it when the repository has no such commit."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except UsageError:
        raise UsageError(f"no commit {rev!r} in the repository {str(repo)!r} (a branch, tag or hash: "
                         "`git log --oneline` lists them)") from None


@contextlib.contextmanager
def sides(base: Path, new: Path | None, options: ABOptions) -> Iterator[tuple[Side, Side]]:
    """BASE and NEW: two folders (``base``, ``new``); or the folder ``base`` at two revisions;
    or under two interpreters (revisions and interpreters may be combined; ``options`` name them,
    the interpreters checked already)."""
    base_rev, new_rev = options.base_rev, options.new_rev
    base_python, new_python = options.base_python, options.new_python
    revs = base_rev is not None or new_rev is not None
    pythons = base_python is not None or new_python is not None
    remove_abandoned(git)  # the checkouts a killed jaxrun ab or bisect left
    if new is not None and (revs or pythons):
        raise UsageError("give either two folders (BASE NEW) or one folder with --base-rev/--new-rev or "
                         "--base-python/--new-python, not both")
    if new is None and not (revs or pythons):
        raise UsageError("give two folders to compare (jaxrun ab BASE NEW), or one folder with --base-rev REV "
                         "--new-rev REV (two revisions) or --base-python PATH --new-python PATH (two environments)")
    interpreters = (base_python, new_python)
    if new is not None:
        for path in (base, new):
            if not path.exists():
                raise UsageError(f"no such file or folder: {str(path)!r}")
        yield (Side("BASE", base.resolve(), given=str(base)), Side("NEW", new.resolve(), given=str(new)))
        return
    if not base.exists():
        raise UsageError(f"no such file or folder: {str(base)!r}")

    def labelled(label: str, root: Path, python: str | None, commit: str | None, rev: str | None) -> Side:
        given = [f"rev {rev}" if rev else str(base)]
        if python:
            given.append(f"python {python}")
        return Side(label, root, python, commit, " ".join(given))

    if not revs:
        yield (labelled("BASE", base.resolve(), interpreters[0], None, None),
               labelled("NEW", base.resolve(), interpreters[1], None, None))
        return
    repo, relative = repository_of(base)
    commits = [revision(repo, rev) if rev else git(repo, "rev-parse", "HEAD") for rev in (base_rev, new_rev)]
    with checkouts(repo, git) as made, made.worktree(commits[0], "base") as base_tree, \
            made.worktree(commits[1], "new") as new_tree:
        yield (labelled("BASE", base_tree / relative, interpreters[0], commits[0], base_rev or "HEAD"),
               labelled("NEW", new_tree / relative, interpreters[1], commits[1], new_rev or "HEAD"))
