"""Where a benchmarked run came from: the script's identity and the git state of its repository."""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Sequence

from jaxrun.core.timestamps import now_iso
from jaxrun.errors import ScriptNotFoundError
from jaxrun.probe.channel import valid_text
from jaxrun.results.machine import Machine
from jaxrun.results.models import HistoryRun, ScriptBenchmark

GIT_TIMEOUT_SECONDS = 5.0


def script_identity(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(resolved absolute path, sha256 hex of the content)`` of a script."""
    resolved = _resolved(path)
    digest = hashlib.sha256()
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_CLOEXEC)  # unbuffered: 3 system calls, not 8 (probe/channel.py)
        try:
            while chunk := os.read(fd, 1 << 16):
                digest.update(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ScriptNotFoundError(f"cannot read script {str(path)!r} to identify it: {exc.strerror or exc}") from None
    return str(resolved), digest.hexdigest()


def _resolved(path: str | os.PathLike[str]) -> str:
    """``Path(path).expanduser().resolve()``'s text, its folder's resolved once a batch (each of
    its parts one more system call a script)."""
    given = os.path.expanduser(os.fspath(path))
    folder, name = os.path.split(given)
    if not os.path.isabs(given) or name in ("", ".", "..") or ".." in folder.split(os.sep):
        return os.path.realpath(given)  # (a ".." is resolved after the links before it)
    candidate = os.path.join(_real_folder(folder), name)
    return os.path.realpath(candidate) if os.path.islink(candidate) else candidate


@functools.lru_cache(maxsize=256)
def _real_folder(folder: str) -> str:
    return os.path.realpath(folder)


def _git(args: Sequence[str], cwd: Path) -> str | None:
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    try:
        done = subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_SECONDS,
            env=env, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(path: str | os.PathLike[str]) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the git repository holding ``path``; ``(None, None)`` outside one
    (:func:`git_revision`'s first two)."""
    commit, dirty, _ = git_revision(path)
    return commit, dirty


def git_revision(path: str | os.PathLike[str]) -> tuple[str | None, bool | None, str | None]:
    """``(commit, dirty, commit time)`` of the git repository holding ``path``; all None outside one.

    Dirty means ``git status --porcelain`` lists anything (untracked files included); the commit
    time is the committer's date (ISO 8601). Git missing, a repository without commits, or a
    timeout give None; this never raises.
    """
    try:
        target = Path(path).expanduser().resolve()
        folder = target if target.is_dir() else target.parent
    except (OSError, RuntimeError):
        return None, None, None
    head = _git(["show", "-s", "--no-show-signature", "--format=%H %cI", "HEAD"], folder)
    commit, _, when = (head or "").strip().partition(" ")
    if not commit:
        return None, None, None
    status = _git(["status", "--porcelain"], folder)
    return commit, (None if status is None else bool(status.strip())), when or None


def history_run_from_benchmark(
    benchmark: ScriptBenchmark,
    *,
    jax_version: str | None = None,
    jaxlib_version: str | None = None,
    host: str | None = None,
    jaxrun_version: str | None = None,
    recorded_at: str | None = None,
    machine: Machine | None = None,
) -> HistoryRun:
    """A :class:`HistoryRun` for one script's benchmark: its key and revision those the benchmark
    was given when it was measured (a result ``--resume`` writes to the history later), else a new
    key and the git state read now."""
    from jaxrun.core.version import __version__

    script_path, content_hash = script_identity(benchmark.script_path)
    script_path = valid_text(script_path)  # SQLite text must be valid UTF-8
    if benchmark.run_key is not None:
        run_key, commit, dirty, committed = (benchmark.run_key, benchmark.git_commit, benchmark.git_dirty,
                                             benchmark.git_commit_time)
    else:
        run_key = uuid.uuid4().hex
        commit, dirty, committed = git_revision(script_path)
    return HistoryRun(
        recorded_at=recorded_at or now_iso(),
        script_name=benchmark.script_name, script_path=script_path, content_hash=content_hash,
        git_commit=commit, git_dirty=dirty, host=host or socket.gethostname(),
        device_requested=benchmark.device_requested, device_used=benchmark.device_used,
        jax_version=jax_version, jaxlib_version=jaxlib_version, jaxrun_version=jaxrun_version or __version__,
        samples=[*benchmark.warmups, *benchmark.samples],
        mode=benchmark.mode,
        numerics=benchmark.numerics,
        git_commit_time=committed,
        machine=machine,
        machine_id=None if machine is None else machine.fingerprint,
        run_key=run_key,
    )
