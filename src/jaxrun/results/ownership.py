"""What of a results folder jaxrun wrote, and so may replace: the folder's manifest.

jaxrun deletes or overwrites in a results folder only what it can prove it wrote. The proof is
``.jaxrun.manifest``, one JSON object a line, each line appended (one ``os.write`` on an
``O_APPEND`` descriptor) *before* the files it covers are made, so a run killed at any moment has
claimed everything it left behind:

- the manifest itself says the folder is a results folder: jaxrun's batch files at their fixed
  names (``jax_execution_results.json``, ``jax_profiling/memory_profile.json``, ``report.html``,
  ...) are jaxrun's in it;
- ``{"script": "<file name>"}``: the files of one script (its result file, its logs, its
  ``outputs/`` and trace folders, its executed notebook), claimed as the script starts: while
  this is the last word on the script (a run killed before the script's end), every file under
  its names is jaxrun's;
- ``{"done": "<file name>", "files": {path: identity}}``: once the script's run ended, the very
  files it and jaxrun wrote under its names (every file and folder of ``outputs/<name>/``), each
  by its size and modification time: from then on only these, while unchanged, are jaxrun's (its
  result file is jaxrun's by its name: jaxrun reads and checks it, and replaces a damaged one);
  not written for a script whose process may still run (a Slurm controller or a Ray cluster
  that stopped answering), whose claim then stands;
- ``{"file": "<path>"}``: a file an option asked for inside the folder (``--markdown
  RESULTS/summary.md``), claimed before the batch runs;
- ``slurm/``: what ``--backend slurm`` writes for its tasks, which this folder's ``clear`` leaves
  alone: the Slurm backend tidies it itself, once no task of an earlier batch runs there
  (executors/slurm_record.py).

A folder without a manifest proves nothing: what looks like jaxrun's results in it may be a
copy, or the user's, so nothing in it is jaxrun's, and the refusal says the manifest is missing. A
manifest with lines jaxrun cannot read (garbled, binary, cut short) is used for the lines it can
read; a refusal then names it as the cause, and a run it lets go on writes it anew.

Everything else in the folder is the user's: a folder holding such files is refused unless
``--allow-other-files``, and then they are kept, never deleted or overwritten (a file at a name
one of the batch's scripts needs is still refused). A symbolic link at any of jaxrun's names is
refused always: jaxrun never writes or deletes through one.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from jaxrun.core.formatting import listed, readable
from jaxrun.errors import UsageError
from jaxrun.results import result_files

if TYPE_CHECKING:
    from jaxrun.results.models import ScriptResult

logger = logging.getLogger("jaxrun")

MANIFEST = ".jaxrun.manifest"
# Made by every run and never the user's (batch/folder_lock.py, probe/lifeline.py, the room kept for
# the batch files: outputs/batch_files.py).
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
            yield entry[: -len(".ipynb")]  # notebooks/<name>@cpu.ipynb (outputs/notebook_outputs.py)
        return
    yield entry  # outputs/<name>/, traces/<name>/


# What tells the very file jaxrun wrote from another at its name: (size, mtime_ns) of a file or a
# link, () of a folder. Not the inode: a folder copied with its times (cp -a, rsync -a, a move to
# another disk) is still the files jaxrun wrote, while a file written over or replaced has a new
# modification time.
Identity = tuple[int, ...]


def _identity(st: os.stat_result) -> Identity:
    return () if stat.S_ISDIR(st.st_mode) else (st.st_size, st.st_mtime_ns)


def _place(relative: str) -> tuple[str, str, str] | None:
    """``(script folder, entry, path inside the entry)`` of a path under one of the script
    folders (``outputs/a/w/x.bin``: ``("outputs", "a", "w/x.bin")``), or None."""
    for folder in SCRIPT_FOLDERS:
        if relative.startswith(folder + "/"):
            entry, _, inside = relative[len(folder) + 1:].partition("/")
            return folder, entry, inside
    return None


def _looks_like_jaxruns(relative: str) -> bool:
    """A file at one of the names jaxrun gives its own files (a batch file, a result file, a log)."""
    place = _place(relative)
    if relative in BATCH_FILES:
        return True
    return place is not None and not place[2] and place[0] in (result_files.SCRIPT_RESULTS_DIR, result_files.LOGS_DIR) \
        and any(True for _ in _names_of(place[0], place[1]))


class ResultsFolder:
    """One results folder's manifest, read once; claims are appended as they are made.

    A script's files are jaxrun's by the manifest's last word on the script: once its run ended,
    the files it recorded then (:meth:`record_script`), each while it is still the very file
    recorded (its size and modification time); while only claimed (a run killed before
    its end), every file under its names (that run found none of the user's there: check())."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / MANIFEST
        self.scripts: set[str] = set()
        self.files: set[str] = set()
        self.exists = False  # the manifest is there
        # script -> what its ended run recorded: the files by identity, or, for a record this run
        # made, the manifest line that holds them (a few hundred bytes, where the files as Python
        # objects took ~760: a batch of 10,000 scripts holds one a script; read back by _recorded).
        self.done: dict[str, dict[str, Identity] | bytes] = {}
        self.damage: str | None = None  # what of the manifest could not be read (its other lines are used)
        self._left: dict[str, dict[str, Identity]] = {}  # script -> its folders clear() could not remove
        self.cut = False  # its last line was cut (a run killed while appending it, or the file cut short)
        self._lock = threading.Lock()
        self._fd: int | None = None  # the manifest, open for appending from the first claim to close()
        self._root_fd: int | None = None  # the folder, open from the first record to close()
        try:
            with result_files.open_regular(self.path) as handle:
                self.exists = True
                data = handle.read()
        except (FileNotFoundError, NotADirectoryError):
            return
        except result_files.NotRegularFileError as exc:
            raise UsageError(f"{str(self.path)!r}, the results folder's manifest, is {exc.problem.removeprefix('not a regular file but ')}: "
                             "remove it, or pass another --results-dir") from None
        except OSError as exc:
            raise UsageError(f"cannot read {str(self.path)!r} ({exc.strerror or exc}): make it readable, "
                             "or pass another --results-dir") from None
        lines = data.split(b"\n")
        bad = [n for n, line in enumerate(lines, 1) if line.strip() and not self._take(line)]
        # A last line cut by a run killed while appending it claimed files not yet made: no damage
        # unless files are found that no other line proves (then the manifest may have been cut short).
        self.cut = bad[-1:] == [len(lines)]
        if bad and not (self.cut and len(bad) == 1):
            total = sum(1 for line in lines if line.strip())
            self.damage = (f"line {bad[0]} of {total} is not a claim jaxrun wrote" if len(bad) == 1 else
                           f"lines {listed(bad, 3)} of {total} are not claims jaxrun wrote")

    def _take(self, line: bytes) -> bool:
        """Take one line's claim; False when it is none (garbled, cut, not jaxrun's)."""
        try:
            claim = json.loads(line.decode("utf-8", "surrogateescape"))
        except (ValueError, RecursionError):
            return False
        if not isinstance(claim, dict):
            return False
        if isinstance(claim.get("script"), str):
            name = claim["script"]
            self.scripts.add(name)
            self.done.pop(name, None)  # a new run of it: what the last one recorded is gone
            return True
        if isinstance(claim.get("file"), str):
            self.files.add(claim["file"])
            return True
        if isinstance(claim.get("done"), str) and isinstance(claim.get("files"), dict):
            name = claim["done"]
            self.scripts.add(name)
            self.done[name] = {path: tuple(ident) for path, ident in claim["files"].items()
                               if isinstance(ident, list) and all(isinstance(i, int) for i in ident)}
            return True
        return False

    # -- what is whose -------------------------------------------------------------------------

    def owns(self, relative: str, st: "os.stat_result | os.DirEntry[str] | None" = None,
             place: "tuple[str, str, str] | None | bool" = False) -> bool:
        """Whether the entry at ``relative`` (a path under the folder, with ``/``) is jaxrun's.
        ``st``: its ``lstat``, or its ``DirEntry`` (stat only when a recorded file is compared);
        ``place``: its :func:`_place`, when known."""
        if relative in (MANIFEST, *LOCK_FILES):
            return True
        if not self.exists:
            return False
        folder, _, entry = relative.rpartition("/")
        written = result_files.temporary_of(entry)
        if written is not None:  # an atomic write's temporary file, left by a killed run
            return self._claimed_name(f"{folder}/{written}" if folder else written)
        if relative in self.files or relative in BATCH_FILES or relative in _CONTAINERS or relative in BACKEND_FOLDERS:
            return True
        if place is False:
            place = _place(relative)
        if not isinstance(place, tuple):
            return False
        if place[0] == result_files.SCRIPT_RESULTS_DIR:
            # jaxrun's own record of the script, which it reads and checks: a damaged one is
            # said to be so and replaced (plan/resume.py), like the batch files.
            return bool(self._scripts_of(place))
        for name in self._scripts_of(place):
            if name not in self.done:
                return True
            recorded = self._recorded(name).get(relative)
            if recorded is None:
                continue
            try:
                if st is None:
                    st = os.lstat(self.root / relative)
                elif isinstance(st, os.DirEntry):
                    st = st.stat(follow_symlinks=False)
            except OSError:
                return False  # gone since it was listed
            if _identity(st) == recorded:
                return True
        return False

    def _scripts_of(self, place: tuple[str, str, str]) -> list[str]:
        return [n for n in _names_of(place[0], place[1]) if n in self.scripts]

    def _claimed_name(self, relative: str) -> bool:
        if relative in self.files or relative in BATCH_FILES or relative == MANIFEST:
            return True
        place = _place(relative)
        return place is not None and bool(self._scripts_of(place))

    def _walk(self) -> Iterator[tuple[str, os.DirEntry[str], bool, "tuple[str, str, str] | None"]]:
        """Every entry of the folder jaxrun may have written, with whether it is jaxrun's and its
        :func:`_place`; within what a script wrote (``outputs/<name>/``) only into folders that
        are jaxrun's, never into the user's own folders, never through a link."""
        pending: list[tuple[str, tuple[str, str, str] | None]] = [("", None)]
        while pending:
            folder, where = pending.pop()
            try:
                listing = list(os.scandir(self.root / folder if folder else self.root))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in listing:
                name = entry.name
                relative = f"{folder}/{name}" if folder else name
                if where is not None:  # inside a script's folder (outputs/<name>/...)
                    place: tuple[str, str, str] | None = (where[0], where[1], f"{where[2]}/{name}" if where[2] else name)
                elif folder in SCRIPT_FOLDERS:
                    place = (folder, name, "")
                else:
                    place = None
                owned = self.owns(relative, entry, place)
                yield relative, entry, owned, place
                if entry.is_dir(follow_symlinks=False) and (relative in _CONTAINERS or (owned and place is not None)):
                    pending.append((relative, place))

    def check(self, *, allow_other_files: bool = False, names: Callable[[], Iterable[str]] | None = None) -> None:
        """Refuse the folder, in one line, before anything is written: a symbolic link at one of
        jaxrun's names (always); files jaxrun did not write (unless ``allow_other_files``; then
        those at a name of ``names()``, the file names of the scripts about to run)."""
        foreign: list[str] = []
        for relative, entry, owned, place in self._walk():
            if entry.is_symlink() and (place is None or not place[2]) and (
                    owned or relative in _CONTAINERS or relative in BATCH_FILES
                    or (place is not None and self._scripts_of(place))):
                raise UsageError(
                    f"the results folder {str(self.root)!r} holds a symbolic link at {relative!r} (to "
                    f"{os.readlink(entry.path)!r}); jaxrun never writes or deletes through one: remove the link, "
                    "or pass another --results-dir")
            if not owned and not (relative in _CONTAINERS and entry.is_dir(follow_symlinks=False)):
                foreign.append(relative)
        if not foreign:
            return
        shown = listed(map(readable, sorted(foreign)), _SHOWN)
        cause = None
        if self.damage is not None:
            cause = f"its manifest {str(self.path)!r} is damaged ({self.damage})"
        elif any(_looks_like_jaxruns(r) and not self._claimed_name(r) for r in foreign):
            cause = (f"its manifest {str(self.path)!r} does not claim them (it ends in a cut line: cut short?)"
                     if self.cut else f"its manifest {str(self.path)!r} does not claim them" if self.exists else
                     f"it has no manifest ({MANIFEST}, jaxrun's record of what it wrote there)")
        if not allow_other_files:
            if cause is not None:
                raise UsageError(
                    f"the results folder {str(self.root)!r} holds files jaxrun cannot prove it wrote ({shown}): {cause}, "
                    "and jaxrun never deletes or overwrites what may be yours: move out what you want to keep and "
                    f"delete the rest{' and the manifest' if self.exists else ''}, pass a new --results-dir, or "
                    "--allow-other-files to write beside them")
            raise UsageError(
                f"the results folder {str(self.root)!r} holds files jaxrun did not write ("
                f"{shown}); jaxrun never deletes or overwrites them: pass a new or empty "
                "--results-dir, or --allow-other-files to write beside them")
        wanted = set(names() if names is not None else ())
        # In outputs/<name>/ too: the script's process starts in it emptied (run/runner.py).
        clashes = [r for r in foreign if (p := _place(r)) is not None and any(n in wanted for n in _names_of(p[0], p[1]))]
        clashes += [r for r in foreign if r in BATCH_FILES or r in _CONTAINERS]
        if clashes:
            raise UsageError(
                f"the results folder {str(self.root)!r} holds files jaxrun did not write where this run writes "
                f"its own ({listed(map(readable, sorted(set(clashes))), _SHOWN)}); move them, or pass another --results-dir"
                + (f" ({cause})" if cause is not None else ""))

    # -- claims --------------------------------------------------------------------------------

    def claim_scripts(self, names: Iterable[str]) -> None:
        new = [n for n in names if n not in self.scripts or n in self.done]
        if new or not self.exists:
            self._append([{"script": n} for n in new])
            for name in new:
                self.scripts.add(name)
                self.done.pop(name, None)

    def record_script(self, name: str, result: "ScriptResult", *, profiled: bool = True) -> None:
        """After a script's run ended (its logs and outputs written): the files under its names
        that it and jaxrun wrote, by their identity, so that only these very files are deleted
        later (not a file the user puts in ``outputs/<name>/`` or replaces there after). Its result
        file is jaxrun's by its name (:meth:`owns`); ``profiled``: the batch wrote traces (with
        none, a ``traces/<name>`` there now is not jaxrun's: the run's start cleared the last one)."""
        files: dict[str, Identity] = {}
        root = os.fspath(self.root)
        processes = max(1, len(result.processes or ()))
        # A retried attempt's logs keep its number (run/runner.py); a run of one attempt has none.
        attempts = ("", *(f".attempt{n}" for n in range(1, len(result.attempts) + 1))) if len(result.attempts) > 1 else ("",)
        candidates: list[str] = []
        if result.cells is not None:  # a notebook's executed copy (--save-notebooks)
            candidates += [f"{result_files.NOTEBOOKS_DIR}/{name}", f"{result_files.NOTEBOOKS_DIR}/{name}.ipynb"]
        for k in range(processes):
            stem = f"{name}.p{k}" if k else name
            for suffix in attempts:
                candidates += [f"{result_files.LOGS_DIR}/{stem}{suffix}.{s}.log" for s in ("stdout", "stderr")]
        # Relative to the folder opened once: a batch records thousands of scripts, and a path's
        # lookup from / cost more than the lstat itself.
        with self._lock:
            if self._root_fd is None:
                self._root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            fd = self._root_fd
        for relative in candidates:
            try:
                files[relative] = _identity(os.lstat(relative, dir_fd=fd))
            except OSError:
                continue
        tops = [f"{result_files.OUTPUTS_DIR}/{name}"]
        if profiled:
            tops.append(f"{result_files.PROFILING_DIR}/{result_files.TRACES_DIR}/{name}")
        for top in tops:
            try:
                st = os.lstat(top, dir_fd=fd)
            except OSError:
                continue
            files[top] = _identity(st)
            if stat.S_ISDIR(st.st_mode):
                for folder, dirs, names in os.walk(os.path.join(root, top)):  # links are listed, never followed
                    base = os.path.relpath(folder, root).replace(os.sep, "/")
                    for entry in [*dirs, *names]:
                        try:
                            files[f"{base}/{entry}"] = _identity(os.lstat(os.path.join(folder, entry)))
                        except OSError:
                            continue
        line = _line({"done": name, "files": {path: list(ident) for path, ident in files.items()}})
        self._write(line)
        self.scripts.add(name)
        self.done[name] = line

    def _recorded(self, name: str) -> dict[str, Identity]:
        files = self.done[name]
        if isinstance(files, bytes):  # this run's own record, as written
            files = {path: tuple(ident) for path, ident in json.loads(files.decode("utf-8", "surrogateescape"))["files"].items()}
        return files

    def claim_file(self, path: Path) -> None:
        """Claim a file an option writes, when it lies in the folder (else it is none of ours)."""
        try:
            relative = Path(os.path.abspath(path)).relative_to(os.path.abspath(self.root)).as_posix()
        except ValueError:
            return
        if not self.owns(relative):
            self._append([{"file": relative}])
            self.files.add(relative)

    def _append(self, claims: list[dict[str, Any]]) -> None:
        self._write(b"".join(_line(c) for c in claims))

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._fd is None:  # kept open: a batch claims each of its scripts, one write each
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            if data:
                os.write(self._fd, data)
            self.exists = True

    def close(self) -> None:
        """Close the manifest (the next claim opens it again)."""
        with self._lock:
            for fd in (self._fd, self._root_fd):
                if fd is not None:
                    os.close(fd)
            self._fd = self._root_fd = None

    def compact(self, kept: Iterable[str]) -> None:
        """After :meth:`clear`: the manifest holds the claims still true (atomically replaced)."""
        self.close()  # it is replaced: claims go to the new one
        if self.damage is not None:  # check() found every file proven by the lines it could read
            logger.warning("%r, the results folder's manifest, was damaged (%s); every file of the folder is "
                           "still proven jaxrun's or not by its other lines: it is written anew from them",
                           str(self.path), self.damage)
        with self._lock:
            # A script cleared but for folders of its that hold a file of the user's: they stay its.
            for name, folders in self._left.items():
                if name not in kept:
                    self.done[name] = folders
            self.scripts = {*kept, *self._left}
            self._left = {}
            lines: list[bytes] = []
            for name in sorted(self.scripts):
                if name in self.done:
                    lines.append(_line({"done": name, "files": {p: list(i) for p, i in self._recorded(name).items()}}))
                else:
                    lines.append(_line({"script": name}))
            self.done = {n: f for n, f in self.done.items() if n in self.scripts}
            lines += [_line({"file": f}) for f in sorted(self.files)]
            result_files.atomic_write_text(self.path, b"".join(lines).decode("utf-8", "surrogateescape"),
                                           durable=False)
            self.exists = True
            self.damage = None

    # -- clearing ------------------------------------------------------------------------------

    def clear(self, keep: Iterable[str] = (), only: Iterable[str] | None = None) -> None:
        """Delete what an earlier run of jaxrun left here that would pass for this run's: the files
        of its scripts (all of them, or those of ``only``) except those of ``keep`` (--resume
        reuses their results), and for a whole batch the batch files it does not rewrite at once
        (:data:`STALE_BATCH_FILES`) and the temporary files of a killed run. Only what the manifest
        proves jaxrun's; never through a link (:meth:`check` refused those); a folder only once
        nothing is left in it (a file of the user's in ``outputs/<name>/`` of a script not run is kept)."""
        kept, chosen = set(keep), None if only is None else set(only)
        folders: list[tuple[str, str]] = []
        for relative, entry, owned, place in list(self._walk()):
            if relative == result_files.RESERVE and chosen is None:
                os.unlink(entry.path)  # the room a killed batch kept: this batch keeps its own
                continue
            if relative in _CONTAINERS or not owned or relative in (MANIFEST, *LOCK_FILES):
                continue
            if place is not None:
                name = result_files.temporary_of(place[1]) if not place[2] else None
                mine = set(_names_of(place[0], name or place[1])) & self.scripts
                if mine & kept or (chosen is not None and not mine & chosen):
                    continue
            elif chosen is not None or not (relative in STALE_BATCH_FILES or result_files.temporary_of(
                    relative.rpartition("/")[2])):
                continue
            if entry.is_dir(follow_symlinks=False):
                folders.append((relative, entry))
            else:
                os.unlink(entry.path)
        for relative, entry in sorted(folders, key=lambda f: -f[0].count("/")):  # the deepest first
            try:
                os.rmdir(entry.path)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                place = _place(relative)
                for name in self._scripts_of(place) if place is not None else ():
                    self._left.setdefault(name, {})[relative] = _identity(entry.stat(follow_symlinks=False))


def _line(claim: dict[str, Any]) -> bytes:
    return json.dumps(claim, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"


def take_script_place(base: Path, file_name: str, allow_other_files: bool = False) -> None:
    """One script's place in ``base``, for a run outside a batch (``execute_jax_script``, each run of
    ``jaxrun ab``): the folder checked (a folder of files jaxrun did not write is refused unless
    ``allow_other_files``), the script's earlier files gone (an earlier run's logs and outputs would
    pass for this one's), the place claimed."""
    from jaxrun.errors import ResultsWriteError

    folder = ResultsFolder(base)
    folder.check(allow_other_files=allow_other_files, names=lambda: [file_name])
    try:
        folder.clear(only=[file_name])
        base.mkdir(parents=True, exist_ok=True)
        folder.claim_scripts([file_name])
    except OSError as exc:
        raise ResultsWriteError(folder.path, exc) from None
    finally:
        folder.close()


def claim_script(results_dir: Path, name: str) -> None:
    """Claim one script's files in ``results_dir`` (its manifest made first when it has none)."""
    folder = ResultsFolder(results_dir)
    try:
        folder.claim_scripts([name])
    finally:
        folder.close()
