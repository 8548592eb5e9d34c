"""``RESULTS_DIR/slurm/tasks.jsonl``: the job arrays a batch submitted, so that ``--resume``
finds the tasks still running after jaxrun itself was killed.

One JSON object a line, each appended with one ``os.write`` (a kill at any moment cuts at most the
line being written, which then claims nothing):

- ``{"name": "jaxrun-1a2b3c4d", "submitted_at": <epoch s>, "tasks": [[script, device, options key], ...]}``
  before ``sbatch`` runs: the array's unique job name and its scripts, task by task;
- ``{"name": ..., "array": "123"}`` once ``sbatch`` answered with the array's id;
- ``{"reported": "123_4"}`` once a task's result went to the batch's files: its pickled result is
  not taken again (an interrupted one runs again with ``--resume``).

A submission without its id line (killed while sbatch ran) is found by its name in the queue.
Task ``i`` of array ``123`` is ``123_i``; an array of one task is submitted as a plain job ``123``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

RECORD = "tasks.jsonl"
# What submitit writes for a task: <job>[_<index>]_submitted.pkl, <job>_submission.sh (and a link
# to it, .submission_file_<uuid>.sh), <job>[_<index>]_<process>_result.pkl / _log.out / _log.err.
_SUBMITIT_FILE = re.compile(r"\d+(?:_\d+)?(?:_submitted\.pkl|_submission\.sh|_\d+_(?:result\.pkl|log\.out|log\.err))"
                            r"|\.submission_file_[0-9a-f]+\.sh")

Key = tuple[str, str, str]  # (script name, device asked for, options key)


@dataclass(frozen=True)
class Submission:
    name: str
    submitted_at: float
    keys: tuple[Key, ...]
    array: str | None = None

    def tasks(self) -> Iterator[tuple[str, Key]]:
        """(task id, key) of each of its tasks; none while its array is unknown."""
        if self.array is None:
            return
        for index, key in enumerate(self.keys):
            yield (self.array if len(self.keys) == 1 else f"{self.array}_{index}"), key

    def found(self, array: str | None) -> "Submission":
        return replace(self, array=array)


class TaskRecord:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / RECORD

    def exists(self) -> bool:
        return self.path.is_file()

    def read(self) -> tuple[list[Submission], set[str]]:
        """The submissions, and the tasks whose result was reported."""
        submissions: dict[str, Submission] = {}
        reported: set[str] = set()
        try:
            with open(self.path, "rb") as handle:
                lines = handle.read().splitlines()
        except OSError:
            return [], reported
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # cut off by a kill
            if isinstance(entry, dict) and isinstance(entry.get("reported"), str):
                reported.add(entry["reported"])
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                continue
            name = entry["name"]
            if isinstance(entry.get("tasks"), list):
                keys = tuple(tuple(str(part) for part in key) for key in entry["tasks"] if isinstance(key, list))
                at = float(entry.get("submitted_at") or 0.0)
                submissions[name] = Submission(name, at, keys)  # type: ignore[arg-type]
            elif isinstance(entry.get("array"), str) and name in submissions:
                submissions[name] = submissions[name].found(entry["array"])
        return list(submissions.values()), reported

    def start(self) -> None:
        """A new batch: the record of an earlier one (jaxrun's own file) is replaced, and the files
        submitit wrote for its tasks are deleted (their results are in the batch's files; none of
        its tasks runs any more: the executor refuses a new batch while one does)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(self.folder):
            if _SUBMITIT_FILE.fullmatch(entry.name) and (entry.is_symlink() or entry.is_file(follow_symlinks=False)):
                os.unlink(entry.path)  # a link itself, never what it points to
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))

    def submitting(self, name: str, submitted_at: float, keys: list[Key]) -> None:
        self._append({"name": name, "submitted_at": submitted_at, "tasks": [list(k) for k in keys]})

    def submitted(self, name: str, array: str) -> None:
        self._append({"name": name, "array": array})

    def reported(self, task_id: str) -> None:
        # Not forced to disk: a line lost with the machine only makes --resume read a result twice.
        self._append({"reported": task_id}, durable=False)

    def _append(self, entry: dict[str, object], durable: bool = True) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = json.dumps(entry, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
