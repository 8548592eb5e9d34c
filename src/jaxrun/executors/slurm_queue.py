"""Slurm's commands as jaxrun uses them, each waited for at most ``--slurm-timeout`` seconds:
is the controller there (``scontrol ping``), would this job array be accepted (``sbatch
--test-only``: partition, account, QOS, constraint and resources, checked before anything runs),
which tasks are pending or running (``squeue``), how a task that left the queue ended (``scontrol
show job``: its state and reason, kept by the controller for MinJobAge seconds; ``sacct`` where
accounting is on), and ``scancel``.

Slurm's states of a task that ended without a result of its own, each with the failure class it
is and what Slurm said, are :data:`ENDED`: the one place they are read.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Iterable, Sequence

from jaxrun.core.failures import hint_for
from jaxrun.errors import UsageError

# The commands --backend slurm runs on the machine jaxrun runs on (a login node).
COMMANDS = ("sbatch", "squeue", "scontrol", "scancel")
DEFAULT_MAX_ARRAY_SIZE = 1001


class SlurmUnanswered(Exception):
    """A Slurm command did not answer in time, or failed; ``str()`` is one line saying which and why."""


@dataclass(frozen=True)
class Ended:
    """How Slurm ended a task, as a failure class."""

    error_class: str
    what: str  # "Slurm stopped it at its time limit", ...
    cause: str | None = None  # its hint's cause within the class (core/failures.py), if not the class's own


# A task's JobState once it left the queue (scontrol, sacct) -> how jaxrun reports it. "node_lost"
# is transient (core/failures.py): the task is submitted again.
ENDED: dict[str, Ended] = {
    "TIMEOUT": Ended("timeout", "Slurm stopped the task at its time limit"),
    "DEADLINE": Ended("timeout", "Slurm stopped the task at its deadline"),
    "OUT_OF_MEMORY": Ended("out_of_memory", "Slurm stopped the task: it used more memory than it was given"),
    "NODE_FAIL": Ended("node_lost", "the node running the task failed"),
    "BOOT_FAIL": Ended("node_lost", "the node given to the task failed to boot"),
    "PREEMPTED": Ended("node_lost", "Slurm preempted the task (its node was taken for another job)"),
    # jaxrun's own cancel (Ctrl-C) is said by the executor; one it sees here came from outside.
    "CANCELLED": Ended("interrupted", "the task was cancelled (scancel)", "cancelled"),
    "FAILED": Ended("crashed", "the task failed on its node"),
    "COMPLETED": Ended("crashed", "the task ended without a result"),
}
# States of a task still in the queue (squeue's long names).
LIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                  "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})


def missing_commands() -> list[str]:
    return [c for c in COMMANDS if shutil.which(c) is None]


class SlurmQueue:
    """The controller, asked through Slurm's commands, each bounded by ``timeout`` seconds."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def _call(self, args: Sequence[str], *, what: str, check: bool = True,
              timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """``timeout``: a shorter bound than --slurm-timeout, for a caller that waits in steps."""
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        try:
            done = subprocess.run(list(args), capture_output=True, text=True, timeout=limit,
                                  stdin=subprocess.DEVNULL, env=_c_locale())
        except subprocess.TimeoutExpired:
            flag = " (--slurm-timeout)" if limit == self.timeout else ""
            raise SlurmUnanswered(f"`{args[0]}` did not answer within {limit:g} s{flag} while {what}") from None
        except OSError as exc:
            raise SlurmUnanswered(f"cannot run `{args[0]}` ({exc.strerror or exc}) while {what}") from None
        if check and done.returncode != 0:
            raise SlurmUnanswered(f"`{args[0]}` failed while {what}: {_said(done)}")
        return done

    # -- before the batch ------------------------------------------------------------------------

    def check_reachable(self) -> None:
        """One :class:`UsageError` when the controller does not answer."""
        try:
            done = self._call(["scontrol", "ping"], what="asking whether the controller is up", check=False)
        except SlurmUnanswered as exc:
            raise UsageError(f"--backend slurm: {exc}: check that the cluster is up (sinfo) and that SLURM_CONF, "
                             "if set, names its slurm.conf") from None
        if done.returncode != 0 or "is UP" not in done.stdout:
            said = "; ".join(line.strip() for line in done.stdout.splitlines() if line.strip().startswith("Slurmctld"))
            raise UsageError(f"--backend slurm: the Slurm controller is not reachable ({said or _said(done)}): check "
                             "that the cluster is up (sinfo) and that SLURM_CONF, if set, names its slurm.conf")

    def max_array_size(self) -> int:
        """The controller's MaxArraySize: an array's indices run from 0 to this - 1 (Slurm's
        default 1001 when it cannot be read)."""
        try:
            done = self._call(["scontrol", "show", "config"], what="reading MaxArraySize (scontrol show config)")
        except SlurmUnanswered:
            return DEFAULT_MAX_ARRAY_SIZE
        found = re.search(r"^MaxArraySize\s*=\s*(\d+)", done.stdout, re.MULTILINE)
        return max(1, int(found.group(1))) if found else DEFAULT_MAX_ARRAY_SIZE

    def test_submission(self, flags: Sequence[str]) -> None:
        """``sbatch --test-only`` of the array's options: a partition, account or QOS that does not
        exist, or resources no node has, is one UsageError before anything runs."""
        args = ["sbatch", "--test-only", *flags, "--wrap", "true"]
        try:
            done = self._call(args, what="checking the job array's options (sbatch --test-only)", check=False)
        except SlurmUnanswered as exc:
            raise UsageError(f"--backend slurm: {exc}") from None
        if done.returncode != 0:
            raise UsageError(f"--backend slurm: Slurm refuses the job array: {_said(done)} (options: "
                             f"{' '.join(flags) or 'none'}); check --slurm-partition, --slurm-account, --slurm-qos, "
                             "--slurm-constraint, --slurm-option, --memory-limit and --timeout against `sinfo` and "
                             "`sacctmgr show assoc`")

    # -- during the batch ------------------------------------------------------------------------

    def live_tasks(self, array_ids: Iterable[str], timeout: float | None = None) -> dict[str, tuple[str, str]]:
        """``"<array>_<task>"`` -> (state, node or reason) of each task of ``array_ids`` still in
        the queue (asked for at most ``timeout`` s, --slurm-timeout by default). Raises
        :class:`SlurmUnanswered`."""
        ids = sorted(set(array_ids))
        if not ids:
            return {}
        done = self._call(["squeue", "--noheader", "--array", "--jobs", ",".join(ids), "--format", "%i|%T|%N|%r"],
                          what="reading the job array's tasks (squeue)", check=False, timeout=timeout)
        if done.returncode != 0 and "Invalid job id" not in done.stderr:
            raise SlurmUnanswered(f"`squeue` failed while reading the job array's tasks: {_said(done)}")
        tasks: dict[str, tuple[str, str]] = {}
        for line in done.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4 and parts[0]:
                task_id, state, node, reason = parts
                tasks[task_id] = (state, node or reason)
        return tasks

    def array_named(self, name: str) -> str | None:
        """The id of the job array named ``name`` still in the queue, or None. Raises
        :class:`SlurmUnanswered`."""
        done = self._call(["squeue", "--noheader", "--name", name, "--format", "%F"],
                          what=f"looking for the job array {name} (squeue)")
        ids = {line.strip() for line in done.stdout.splitlines() if line.strip()}
        return min(ids, key=int) if ids else None

    def job_info(self, task_id: str) -> dict[str, str] | None:
        """What the controller (or, where accounting is on, ``sacct``) says of one task that left
        the queue: JobState, Reason, ExitCode, NodeList, SubmitTime, StartTime, EndTime; None when
        Slurm no longer knows it. Raises :class:`SlurmUnanswered`."""
        done = self._call(["scontrol", "show", "job", "--oneliner", task_id], what=f"reading task {task_id}",
                          check=False)
        if done.returncode == 0:
            for line in done.stdout.splitlines():
                fields = parse_oneliner(line)
                if _names_task(fields, task_id):
                    return fields
        return self._accounted(task_id)

    def _accounted(self, task_id: str) -> dict[str, str] | None:
        done = self._call(["sacct", "--noheader", "--parsable2", "--jobs", task_id, "--format",
                           "JobID,State,ExitCode,NodeList,Submit,Start,End"], what=f"reading task {task_id} (sacct)",
                          check=False)
        if done.returncode != 0:
            return None  # accounting is off: Slurm has forgotten the task
        for line in done.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 7 and parts[0] == task_id:
                state = parts[1].split()[0] if parts[1] else ""  # "CANCELLED by 0"
                return {"JobState": state, "Reason": parts[1], "ExitCode": parts[2], "NodeList": parts[3],
                        "SubmitTime": parts[4], "StartTime": parts[5], "EndTime": parts[6]}
        return None

    def cancel(self, array_ids: Iterable[str]) -> None:
        """``scancel`` of the arrays (their pending tasks never start; running ones get SIGTERM).
        Raises :class:`SlurmUnanswered`."""
        ids = sorted(set(array_ids))
        if ids:
            self._call(["scancel", *ids], what="cancelling the job array (scancel)")


_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_oneliner(line: str) -> dict[str, str]:
    """``scontrol show job --oneliner``'s ``Key=Value Key=Value ...`` as a dict (a value may hold
    spaces: it runs to the next key)."""
    fields: dict[str, str] = {}
    matches = list(_FIELD.finditer(line))
    for here, after in zip(matches, [*matches[1:], None]):
        end = after.start() if after is not None else len(line)
        fields[here.group(1)] = line[here.end():end].strip()
    return fields


def _names_task(fields: dict[str, str], task_id: str) -> bool:
    array, _, index = task_id.partition("_")
    if not index:
        return fields.get("JobId") == task_id
    return fields.get("ArrayJobId") == array and fields.get("ArrayTaskId") == index


# What slurmstepd writes into the task's log when it kills a step over its --mem without cgroups
# (jobacct_gather's sampling, OverMemoryKill): "StepId=12.0 exceeded memory limit (620 > 100), being
# killed"; the job then ends FAILED with signal 9, never OUT_OF_MEMORY.
_MEMORY_KILL = re.compile(r"(StepId=\S+ exceeded memory limit \([^)]*\)|Exceeded job memory limit)")


def ended(fields: dict[str, str] | None, log_tail: str = "") -> tuple[str, str, str]:
    """(failure class, one line, hint) of a task that left the queue without a result of its own
    (``log_tail``: the end of the task's Slurm log, where a memory kill without cgroups is said)."""
    memory = _MEMORY_KILL.search(log_tail)
    if memory is not None and (fields or {}).get("JobState") in (None, "FAILED", "CANCELLED", "OUT_OF_MEMORY"):
        said = ", ".join(f"{k}={fields[k]}" for k in ("JobState", "ExitCode", "NodeList") if (fields or {}).get(k))
        return "out_of_memory", (f"Slurm stopped the task: it used more memory than it was given ({memory.group(1)}"
                                 + (f"; {said}" if said else "") + ")"), hint_for("out_of_memory")
    if fields is None:
        return "crashed", ("the task left the queue without a result, and Slurm no longer knows how it ended "
                           "(no accounting, and the controller forgot it after MinJobAge)"), hint_for("crashed")
    state = fields.get("JobState", "")
    how = ENDED.get(state, Ended("crashed", f"the task ended in state {state or 'unknown'}"))
    said = [f"JobState={state}"] if state else []
    said += [f"{k}={fields[k]}" for k in ("Reason", "ExitCode", "NodeList") if fields.get(k) not in (None, "", "None")]
    return how.error_class, f"{how.what} ({', '.join(said)})", hint_for(how.error_class, how.cause)


def _said(done: subprocess.CompletedProcess[str]) -> str:
    text = " ".join((done.stderr or done.stdout or "").split())
    for prefix in ("sbatch: error: ", "squeue: error: ", "scontrol: error: ", "scancel: error: "):
        text = text.replace(prefix, "")
    return text[:300] or f"exit status {done.returncode}"


def _c_locale() -> dict[str, str]:
    """Slurm's output as the parser reads it (English, no local date formats)."""
    return {**os.environ, "LC_ALL": "C", "SLURM_TIME_FORMAT": "standard"}
