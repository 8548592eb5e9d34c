"""What of a results folder jaxrun wrote, and so may replace: the folder's manifest.

jaxrun deletes or overwrites in a results folder only what it can prove it wrote. The proof is
``.jaxrun.manifest``, one JSON object a line, each line appended (one ``os.write`` on an
``O_APPEND`` descriptor) *before* the files it covers are made, so a run killed at any moment has
claimed everything it left behind:

- the manifest itself says the folder is a results folder: jaxrun's batch files at their fixed
  names (``jax_execution_results.json``, ``jax_profiling/memory_profile.json``, ``report.html``,
  ...) are jaxrun's in it;
- ``{"script": "<file name>"}``: the files of one script (its result file, its logs, its
  ``outputs/`` and trace folders, its executed notebook), claimed as the script starts;
- ``{"file": "<path>"}``: a file an option asked for inside the folder (``--markdown
  RESULTS/summary.md``), claimed before the batch runs;
- ``slurm/``: what ``--backend slurm`` writes for its tasks, which this folder's ``clear`` leaves
  alone: the Slurm backend tidies it itself, once no task of an earlier batch runs there
  (executors/slurm_record.py).

A folder an older jaxrun wrote has no manifest; it proves itself by its own results (the batch
file, the per-script result files that read as results) and is adopted: its manifest is written.

Everything else in the folder is the user's: a folder holding such files is refused unless
``--allow-other-files``, and then they are kept, never deleted or overwritten (a file at a name
one of the batch's scripts needs is still refused). A symbolic link at any of jaxrun's names is
refused always: jaxrun never writes or deletes through one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator

from jaxrun.core.formatting import listed
from jaxrun.errors import UsageError
from jaxrun.results import result_files

MANIFEST = ".jaxrun.manifest"
# Made by every run and never the user's (batch/folder_lock.py, probe/lifeline.py, the room kept for
# the batch files: present/sinks/batch_files.py).
LOCK_FILES = (".jaxrun.lock", ".jaxrun.scripts.lock", result_files.RESERVE)
REPORT_FILE = "report.html"
# jaxrun's batch files, by their place in the folder.
BATCH_FILES = (
    result_files.EXECUTION_RESULTS, result_files.PERFORMANCE_METRICS, result_files.EXECUTION_LOG,
    result_files.DEVICE_INFO, result_files.BENCHMARK_RESULTS, REPORT_FILE,
    f"{result_files.PROFILING_DIR}/{result_files.MEMORY_PROFILE}", f"{result_files.PROFILING_DIR}/{result_files.TIMING_PROFILE}",
)
# Batch files an earlier run left that this run does not replace at its start: they would pass for
# this run's (a run that cannot read device facts writes no jax_device_info.json).
STALE_BATCH_FILES = (
    result_files.EXECUTION_LOG, result_files.BENCHMARK_RESULTS, result_files.DEVICE_INFO,
    f"{result_files.PROFILING_DIR}/{result_files.MEMORY_PROFILE}", f"{result_files.PROFILING_DIR}/{result_files.TIMING_PROFILE}",
)
# The folders whose entries are per-script files (each named after its script's file name).
SCRIPT_FOLDERS = (
    result_files.SCRIPT_RESULTS_DIR, result_files.LOGS_DIR, result_files.OUTPUTS_DIR, result_files.NOTEBOOKS_DIR,
    f"{result_files.PROFILING_DIR}/{result_files.TRACES_DIR}",
)
# Folders a backend fills for the whole batch (--backend slurm: its tasks' pickles and logs, the
# record --resume reattaches from): jaxrun's, left to the backend by clear() (a task of an earlier
# batch may still write there).
BACKEND_FOLDERS = (result_files.SLURM_DIR,)
# Folders that hold jaxrun's folders and files, never a script's alone.
_CONTAINERS = {*SCRIPT_FOLDERS, result_files.PROFILING_DIR}
# A script's file name may hold any character but "/" and NUL (a newline too: DOTALL, and \Z, not $,
# which also matches before a final newline).
_LOG = re.compile(r"(?P<stem>.+)\.(?:stdout|stderr)\.log", re.DOTALL)
_PROCESS_OR_ATTEMPT = re.compile(r"\.(?:p\d+|attempt\d+)\Z")
_SHOWN = 5  # foreign files named in a refusal


def _shown(relative: str) -> str:
    """A path as a refusal names it: on one line, whatever its name holds (a newline, a tab)."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in relative)


def _names_of(folder: str, entry: str) -> Iterator[str]:
    """The script file names an entry of ``folder`` may belong to (a log's name may end with
    ``.p<k>`` and ``.attempt<n>``, which may also end the name itself: every reading)."""
    if folder == result_files.SCRIPT_RESULTS_DIR:
        if entry.endswith("_result.json"):
            yield entry[: -len("_result.json")]
        return
    if folder == result_files.LOGS_DIR:
        match = _LOG.fullmatch(entry)
        if match:
            stem = match["stem"]
            yield stem
            for _ in range(2):
                stem, cut = _PROCESS_OR_ATTEMPT.subn("", stem)
                if not cut:
                    break
                yield stem
        return
    if folder == result_files.NOTEBOOKS_DIR:
        yield entry  # a notebook's name keeps .ipynb
        if entry.endswith(".ipynb"):
            yield entry[: -len(".ipynb")]  # notebooks/<name>@cpu.ipynb (present/sinks/notebook_outputs.py)
        return
    yield entry  # outputs/<name>/, traces/<name>/


class ResultsFolder:
    """One results folder's manifest, read once; claims are appended as they are made."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / MANIFEST
        self.scripts: set[str] = set()
        self.files: set[str] = set()
        self.exists = False  # the manifest is there
        self.adopted = False  # no manifest, but the folder's own results prove it jaxrun's
        self._lock = threading.Lock()
        self._fd: int | None = None  # the manifest, open for appending from the first claim to close()
        try:
            with open(self.path, "rb") as handle:
                self.exists = True
                for line in handle:
                    self._take(line)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            raise UsageError(f"cannot read {str(self.path)!r} ({exc.strerror or exc}): make it readable, "
                             "or pass another --results-dir") from None

    def _take(self, line: bytes) -> None:
        try:
            claim = json.loads(line)
        except ValueError:
            return  # a line cut by a crash claims nothing
        if isinstance(claim, dict):
            if isinstance(claim.get("script"), str):
                self.scripts.add(claim["script"])
            if isinstance(claim.get("file"), str):
                self.files.add(claim["file"])

    # -- what is whose -------------------------------------------------------------------------

    def owns(self, relative: str) -> bool:
        """Whether the entry at ``relative`` (a path under the folder, with ``/``) is jaxrun's."""
        if relative in (MANIFEST, *LOCK_FILES):
            return True
        if not (self.exists or self.adopted):
            return False
        folder, _, entry = relative.rpartition("/")
        written = result_files.temporary_of(entry)
        if written is not None:  # an atomic write's temporary file, left by a killed run
            return self.owns(f"{folder}/{written}" if folder else written)
        if relative in self.files or relative in BATCH_FILES or relative in _CONTAINERS or relative in BACKEND_FOLDERS:
            return True
        return folder in SCRIPT_FOLDERS and any(n in self.scripts for n in _names_of(folder, entry))

    def entries(self) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """Every entry of the folder jaxrun may have written, without descending into what a
        script wrote (``outputs/<name>/``) or the user's own folders."""
        pending = [""]
        while pending:
            folder = pending.pop()
            try:
                listing = list(os.scandir(self.root / folder if folder else self.root))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in listing:
                relative = f"{folder}/{entry.name}" if folder else entry.name
                yield relative, entry
                if relative in _CONTAINERS and entry.is_dir(follow_symlinks=False):
                    pending.append(relative)

    def check(self, *, allow_other_files: bool = False, names: Callable[[], Iterable[str]] | None = None) -> None:
        """Refuse the folder, in one line, before anything is written: a symbolic link at one of
        jaxrun's names (always); files jaxrun did not write (unless ``allow_other_files``; then
        those at a name of ``names()``, the file names of the scripts about to run)."""
        self._adopt_older_results()
        foreign: list[str] = []
        for relative, entry in self.entries():
            if entry.is_symlink() and (
                    self.owns(relative) or relative in _CONTAINERS or relative in BATCH_FILES):
                raise UsageError(
                    f"the results folder {str(self.root)!r} holds a symbolic link at {relative!r} (to "
                    f"{os.readlink(entry.path)!r}); jaxrun never writes or deletes through one: remove the link, "
                    "or pass another --results-dir")
            if not self.owns(relative) and not (relative in _CONTAINERS and entry.is_dir(follow_symlinks=False)):
                foreign.append(relative)
        if not foreign:
            return
        if not allow_other_files:
            raise UsageError(
                f"the results folder {str(self.root)!r} holds files jaxrun did not write ("
                f"{listed(map(_shown, sorted(foreign)), _SHOWN)}); jaxrun never deletes or overwrites them: pass a new or empty "
                "--results-dir, or --allow-other-files to write beside them")
        wanted = set(names() if names is not None else ())
        clashes = [r for r in foreign if "/" in r and any(
            n in wanted for n in _names_of(r.rpartition("/")[0], r.rpartition("/")[2]))]
        clashes += [r for r in foreign if r in BATCH_FILES or r in _CONTAINERS]
        if clashes:
            raise UsageError(
                f"the results folder {str(self.root)!r} holds files jaxrun did not write where this run writes "
                f"its own ({listed(map(_shown, sorted(set(clashes))), _SHOWN)}); move them, or pass another --results-dir")

    def _adopt_older_results(self) -> None:
        """A folder an older jaxrun wrote (no manifest): its own results say what was its."""
        if self.exists or self.adopted:
            return
        batch_file = self.root / result_files.EXECUTION_RESULTS
        if not batch_file.is_file() and not (self.root / result_files.SCRIPT_RESULTS_DIR).is_dir():
            return  # a new folder (or one with no results): nothing to adopt, no model to import
        from jaxrun.results.models import (  # only for a folder an older jaxrun wrote
            BatchResult,
            ScriptResult,
        )

        names: set[str] = set()
        proven = False
        try:
            if batch_file.is_file():
                batch = result_files.read_model(batch_file, BatchResult)
                proven = True
                names.update(Path(r.stdout_log).name.removesuffix(".stdout.log")
                             for r in batch.script_results if r.stdout_log)
        except (OSError, result_files.DamagedFileError):
            pass
        for path in (self.root / result_files.SCRIPT_RESULTS_DIR).glob("*_result.json"):
            try:
                if path.is_file() and not path.is_symlink():
                    result_files.read_model(path, ScriptResult)
                    names.add(path.name.removesuffix("_result.json"))
                    proven = True
            except (OSError, result_files.DamagedFileError):
                continue
        if proven:  # held here; written with the next claim (the manifest made then has them all)
            self.scripts.update(names)
            self.adopted = True

    # -- claims --------------------------------------------------------------------------------

    def claim_scripts(self, names: Iterable[str]) -> None:
        new = [n for n in names if n not in self.scripts]
        if new or not self.exists:
            self._append([{"script": n} for n in new])
            self.scripts.update(new)

    def claim_file(self, path: Path) -> None:
        """Claim a file an option writes, when it lies in the folder (else it is none of ours)."""
        try:
            relative = Path(os.path.abspath(path)).relative_to(os.path.abspath(self.root)).as_posix()
        except ValueError:
            return
        if not self.owns(relative):
            self._append([{"file": relative}])
            self.files.add(relative)

    def _append(self, claims: list[dict[str, str]]) -> None:
        if not self.exists:  # the manifest made now holds what was proven before (an adopted folder)
            claims = [*({"script": n} for n in sorted(self.scripts)), *({"file": f} for f in sorted(self.files)), *claims]
        data = b"".join(json.dumps(c, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n" for c in claims)
        with self._lock:
            if self._fd is None:  # kept open: a batch claims each of its scripts, one write each
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            if data:
                os.write(self._fd, data)
            self.exists = True

    def close(self) -> None:
        """Close the manifest (the next claim opens it again)."""
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)

    def compact(self, kept: Iterable[str]) -> None:
        """After :meth:`clear`: the manifest holds the claims still true (atomically replaced)."""
        self.close()  # it is replaced: claims go to the new one
        with self._lock:
            self.scripts = set(kept)
            lines = [json.dumps({"script": n}, ensure_ascii=False) for n in sorted(self.scripts)]
            lines += [json.dumps({"file": f}, ensure_ascii=False) for f in sorted(self.files)]
            result_files.atomic_write_text(self.path, "".join(line + "\n" for line in lines), durable=False)
            self.exists = True

    # -- clearing ------------------------------------------------------------------------------

    def clear(self, keep: Iterable[str] = (), only: Iterable[str] | None = None) -> None:
        """Delete what an earlier run of jaxrun left here that would pass for this run's: the files
        of its scripts (all of them, or those of ``only``) except those of ``keep`` (--resume
        reuses their results), and for a whole batch the batch files it does not rewrite at once
        (:data:`STALE_BATCH_FILES`) and the temporary files of a killed run. Only what the manifest
        proves jaxrun's; never through a link (:meth:`check` refused those)."""
        kept, chosen = set(keep), None if only is None else set(only)
        for relative, entry in list(self.entries()):
            if relative in _CONTAINERS or not self.owns(relative):
                continue
            folder, _, name = relative.rpartition("/")
            if folder in SCRIPT_FOLDERS:
                mine = set(_names_of(folder, result_files.temporary_of(name) or name)) & self.scripts
                if mine & kept or (chosen is not None and not mine & chosen):
                    continue
            elif chosen is not None or not (relative in STALE_BATCH_FILES or result_files.temporary_of(name)):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)  # a script's outputs or trace: links inside are unlinked, not followed
            else:
                os.unlink(entry.path)


def claim_script(results_dir: Path, name: str) -> None:
    """Claim one script's files in ``results_dir`` (its manifest made first when it has none)."""
    folder = ResultsFolder(results_dir)
    try:
        folder.claim_scripts([name])
    finally:
        folder.close()
