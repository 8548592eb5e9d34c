"""One batch per results folder at a time: an exclusive lock on ``<results>/.jaxrun.lock``.

Two runs writing into one folder would leave a ``jax_execution_results.json`` of one batch beside
``script_results/`` of both. The lock is the kernel's (``flock``), so it is released when the
holder exits however it exits (a SIGKILLed run leaves no stale lock); the file holds the holder's
pid and start time for the error message. The scripts of a run hold ``.jaxrun.scripts.lock``
shared while they live (probe/lifeline.py), so a run that starts after a killed one waits for
the killed one's scripts to be gone: no script runs twice at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from jaxrun.core.timestamps import now_iso
from jaxrun.errors import UsageError
from jaxrun.probe.lifeline import SCRIPTS_LOCK_FILE
from jaxrun.results.ownership import ResultsFolder

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions
    from jaxrun.plan.batch_plan import Plan

LOCK_FILE = ".jaxrun.lock"
SCRIPTS_STOP_SECONDS = 10.0  # how long a new run waits for the scripts of a killed one to stop


def unwritable(folder: Path, exc: OSError) -> UsageError:
    """The one message for a results folder jaxrun cannot write to."""
    from jaxrun.errors import describe_os_error

    return UsageError(f"cannot write the results folder {str(folder)!r}: {describe_os_error(exc)}; "
                      "pass a folder you can write to --results-dir")


def holder_of(fd: int) -> str:
    return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"


def _wait_for_earlier_scripts(folder: Path, patience: float = SCRIPTS_STOP_SECONDS) -> None:
    """The scripts of an earlier run hold a shared lock while they live (probe/lifeline.py): wait
    for the last of them (a killed jaxrun's scripts stop themselves at once), or refuse."""
    try:
        fd = os.open(folder / SCRIPTS_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise unwritable(folder, exc) from None
    try:
        deadline = time.monotonic() + patience
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise UsageError(
                        f"the results folder {str(folder)!r} is still in use by the scripts of an earlier jaxrun "
                        f"run that ended; they did not stop within {patience:.0f} s: stop them, or pass another "
                        "--results-dir"
                    ) from None
                time.sleep(0.05)
    finally:
        os.close(fd)  # unlocked: this run's scripts take it shared


class ResultsFolderLock:
    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> "ResultsFolderLock":
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise unwritable(self.path.parent, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = holder_of(fd)
            os.close(fd)
            raise UsageError(
                f"the results folder {str(self.path.parent)!r} is in use by another jaxrun run ({holder}); "
                "wait for it to finish or pass another --results-dir"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}, started {now_iso()}".encode(), 0)
        except OSError as exc:  # a full disk: no batch can write here; the lock is not kept either
            os.close(fd)
            raise unwritable(self.path.parent, exc) from None
        self._fd = fd
        try:
            _wait_for_earlier_scripts(self.path.parent)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock; the file stays (removing it would race)
            self._fd = None

    def __enter__(self) -> "ResultsFolderLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def held_results_folder(options: "BatchOptions", plan: "Plan") -> Iterator[ResultsFolder]:
    """The batch's results folder, checked (whose files it holds: results/ownership.py) before
    anything is written there, made, and locked for the batch (its lock's file included); let go
    however the batch ends."""
    out = options.results_dir
    lock = ResultsFolderLock(out)
    try:
        if out.exists() and not out.is_dir():
            raise UsageError(f"cannot write the results folder {str(out)!r}: it is a file; pass a folder to --results-dir")
        folder = ResultsFolder(out)
        folder.check(allow_other_files=options.allow_other_files, names=lambda: [job.file_name for job in plan.all()])
        out.mkdir(parents=True, exist_ok=True)
        lock.acquire()  # before touching anything: a batch running there keeps its files
    except (OSError, UsageError) as exc:
        lock.release()
        if isinstance(exc, UsageError):
            raise
        raise unwritable(out, exc) from None
    try:
        yield folder
    finally:
        folder.close()
        lock.release()
