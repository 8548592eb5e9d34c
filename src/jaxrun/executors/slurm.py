"""Jobs as the tasks of Slurm job arrays (``--backend slurm``), submitted through submitit.

Each job is one task of a job array running the same ``run_job`` as a local batch with the same
:class:`~jaxrun.config.options.RunOptions` object (pickled by submitit into the results folder's
``slurm/`` folder, never rebuilt from a dict); the task pickles its result there, and the driver's
sinks write every file, as for local runs. ``--jobs N`` is the array's parallelism (``%N``).
Jobs that need other resources (a GPU, another time limit or memory) go in arrays of their own.
Resources come from the options: the time limit from ``--timeout`` (every run and attempt the
job may take, plus a margin), the memory from ``--memory-limit`` (plus what jaxrun's own processes
on the node need), GPUs from the device (``--gpus-per-job``), the rest from ``--slurm-*``.

Assumptions, as on every Slurm cluster: the results folder and the scripts are on a file system
the compute nodes share, and jaxrun and JAX are installed in the Python the task runs
(``--slurm-setup`` lines run first). A task whose node cannot see the results folder leaves no
result there; it is reported as such.

Faults: a task Slurm ends (its time limit, memory, a node failure, a preemption, an scancel) is a
result with Slurm's own state and reason (slurm_queue.ENDED); one whose node was lost is submitted
again, as the failure table says for ``node_lost``. Ctrl-C cancels the arrays (their running
scripts are stopped and report what they did). Every array submitted is recorded in
``slurm/tasks.jsonl`` before and after ``sbatch``: when jaxrun itself is killed, the arrays run on
and ``--resume`` reattaches to their tasks instead of running those scripts again. A task is
recorded as reported only once its end is known: one left behind when the controller stopped
answering is not, so that ``--resume`` follows it; a resume never submits a script whose earlier
task is still in the queue. Every wait on Slurm is bounded by ``--slurm-timeout``.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from jaxrun.config.slurm_options import sbatch_parameters
from jaxrun.core.failures import hint_for, next_action
from jaxrun.core.formatting import listed, plural
from jaxrun.errors import UsageError
from jaxrun.executors.base import BatchInterrupted, RunJob, with_lost_attempts
from jaxrun.executors.slurm_queue import LIVE, SlurmQueue, SlurmUnanswered, ended, missing_commands
from jaxrun.executors.slurm_ranks import merged, process_of, rank, stop_the_others
from jaxrun.executors.slurm_record import TaskRecord, Submission
from jaxrun.results.models import ScriptResult
from jaxrun.results.ownership import ResultsFolder
from jaxrun.results.result_files import SLURM_DIR
from jaxrun.run.reading.result import failed_before_running

if TYPE_CHECKING:
    from jaxrun.config.options import BatchOptions, RunOptions
    from jaxrun.discover.devices import Facts
    from jaxrun.plan.job import Job
    from jaxrun.plan.sink import Sink

# A task lost with its node (or preempted) is submitted again this many times at most.
LOST_TASK_RETRIES = 2
# Added to the runs' own time limits: the task's Python start-up, the probe's, writing the result.
TIME_MARGIN_S = 120
# Added to --memory-limit: the task's Python and jaxrun's runner beside the script (~150 MiB measured).
MEMORY_MARGIN_MIB = 512
_RESULT_POLL_S = 0.5  # how often the results folder is looked at for a finished task's result
_QUEUE_POLL_S = 2.0  # how often squeue is asked which tasks still run
_LATE_RESULT_S = 5.0  # a result written just before its task left the queue may show late on a shared FS
# A controller slower than this to answer squeue is said to be waited for (at most --slurm-timeout,
# in all, since it last answered).
_WAIT_NOTICE_S = 10.0


def run_on_node(run_job: RunJob, job: "Job", options: "RunOptions") -> dict[str, Any]:
    """The task body, on its node: one job through the ordinary ``run_job``, returned as plain data.
    Slurm's SIGTERM (scancel, the time limit, a preemption) stops the script, whose result then
    says what it did."""
    from jaxrun.plan.sink import NO_SINK
    from jaxrun.run.process.environment import SCHEDULED_ENV
    from jaxrun.run.process.placement import WHOLE_MACHINE
    from jaxrun.run.runner import RunInterrupted

    started = time.time()
    # The script holds no lock on the results folder: a killed jaxrun's scripts stop within
    # seconds, so a new run waits for them, but a task runs on, and a new run asks Slurm about it
    # instead (refused, or with --resume following it; SlurmExecutor).
    os.environ[SCHEDULED_ENV] = "1"
    process, count = rank()
    if count > 1:  # one process of a multi-process job: the step's other tasks run the others
        job, options = process_of(job, options, process, count)
    stop = threading.Event()
    signals: list[str] = []

    def stopped(signum: int, frame: Any) -> None:
        signals.append(signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, stopped)
    try:
        result = run_job(job, options, placement=WHOLE_MACHINE, stop=stop, sink=NO_SINK)
    except RunInterrupted as interrupted:
        result = interrupted.result
    if count > 1 and not result.success and not stop.is_set():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the step's SIGTERM reaches this task too: not a stop
        stop_the_others()
    data = result.model_dump(mode="json")
    data["node"] = socket.gethostname()
    return {"result": data, "started": started, "signals": signals}


@dataclass
class _Task:
    """One job's task in Slurm, as the driver follows it."""

    job: "Job"
    task_id: str  # "<array>_<index>" (squeue's %i), or "<job>" for an array of one
    submitted_at: float
    processes: int  # --processes: the tasks of its job step, each with a result of its own
    options_key: str
    lost: list[Any] = field(default_factory=list)  # attempts lost with a node, in order
    state: str = "PENDING"  # as squeue last said
    last_pickle: str = ""  # the result file of its last process, whose arrival says the task is done
    result: ScriptResult | None = None  # read from its pickle
    signalled: bool = False  # Slurm stopped it: its final state decides its class
    gone_since: float | None = None  # when it was first seen out of the queue without a result


class SlurmExecutor:
    starts_processes_here = False  # Slurm's nodes start them

    def __init__(self, options: "BatchOptions", facts: "Facts | None") -> None:
        """Checks everything it can before the batch changes its results folder: submitit, Slurm's
        commands, the controller, the array's options (``sbatch --test-only``), and whether an
        earlier batch's array still writes into the folder."""
        from jaxrun.core.extras import require
        from jaxrun.executors.backends import BUILT_IN

        self.submitit = require(BUILT_IN["slurm"].extra)
        missing = missing_commands()
        if missing:
            raise UsageError(f"--backend slurm needs Slurm's commands, and {', '.join(missing)} is not on PATH: run "
                             "jaxrun on a node of the cluster (a login node), where sbatch works")
        self.options = options
        self.queue = SlurmQueue(options.slurm_timeout)
        self.queue.check_reachable()
        run = options.run
        self.queue.test_submission(sbatch_flags(self._parameters(run, "gpu" in options.device)))
        # A batch of more scripts than an array may hold is submitted as several arrays.
        self.max_array = self.queue.max_array_size()
        self.folder = options.results_dir / SLURM_DIR
        if os.path.lexists(self.folder) and not ResultsFolder(options.results_dir).owns(SLURM_DIR):
            raise UsageError(f"the results folder {str(options.results_dir)!r} holds a {SLURM_DIR!r} that jaxrun did "
                             "not write, where --backend slurm keeps its tasks' files: move it, or pass another "
                             "--results-dir")
        self.record = TaskRecord(self.folder)
        self._earlier, self._reported = self.record.read() if self.record.exists() else ([], set())
        self._live: dict[str, tuple[str, str]] = {}
        self._reattach: dict[int, tuple[Submission, str, str]] | None = None
        if self._earlier:
            try:
                self._earlier = [self._with_array(s) for s in self._earlier]
                self._live = self.queue.live_tasks(s.array for s in self._earlier if s.array)
            except SlurmUnanswered as exc:
                raise UsageError(f"--backend slurm: {exc}") from None
        # (A reported task still in the queue is completing: its script has ended.)
        running = set(self._live) - self._reported
        if running and not options.resume:
            arrays = sorted({t.partition("_")[0] for t in running})
            one = len(arrays) == 1
            raise UsageError(
                f"an earlier batch's Slurm job array{'' if one else 's'} {', '.join(arrays)} still "
                f"run{'s' if one else ''} scripts into {str(options.results_dir)!r}: `jaxrun run ... --resume` "
                f"reattaches to {'it' if one else 'them'}, or `scancel {' '.join(arrays)}` first")

    # -- what an earlier batch left running ------------------------------------------------------

    def _with_array(self, submission: Submission) -> Submission:
        """A submission recorded before sbatch answered (jaxrun was killed in between): its array
        found by its unique name."""
        if submission.array is not None:
            return submission
        return submission.found(self.queue.array_named(submission.name))

    def _reattachable(self, jobs: Iterable["Job"]) -> dict[int, tuple[Submission, str, str]]:
        """Job index -> the earlier task of the same script, device and options still running or
        holding a result, with ``--resume`` (its submission, task id, options key); found once, when
        the batch asks which files to keep (``running_elsewhere``), or when it runs."""
        if self._reattach is not None:
            return self._reattach
        self._reattach = {}
        if not self.options.resume:
            return self._reattach
        by_key = {}
        for submission in self._earlier:
            for task_id, key in submission.tasks():
                by_key[key] = (submission, task_id)
        for job in jobs:
            key = self.options.options_for(job).key
            entry = by_key.get((job.name, job.device, key))
            # A reported task has ended as its result says (one still in the queue is completing).
            if entry is None or entry[1] in self._reported:
                continue
            if entry[1] in self._live or self._paths(entry[1]).result_pickle.exists():
                self._reattach[job.index] = (*entry, key)
        # Any other task that may still run would write beside this batch: never submitted twice.
        followed = {task_id for _, task_id, _ in self._reattach.values()}
        stray = sorted(set(self._live) - followed - self._reported)
        if stray:
            scripts = {task_id: key[0] for s in self._earlier for task_id, key in s.tasks()}
            named = listed((f"{t} ({scripts.get(t, '?')})" for t in stray), 5)
            raise UsageError(
                f"--resume: an earlier batch's Slurm task{'s' if len(stray) > 1 else ''} {named} still "
                f"run{'' if len(stray) > 1 else 's'} into {str(self.options.results_dir)!r} with other scripts or "
                f"options than this run's, and would write beside it: wait for {'them' if len(stray) > 1 else 'it'}, "
                f"or `scancel {' '.join(stray)}` first")
        return self._reattach

    def running_elsewhere(self, jobs: Iterable["Job"]) -> set[int]:
        """The jobs whose earlier task this executor reattaches to: their files stay while the
        batch clears the folder for the rest."""
        return set(self._reattachable(jobs))

    # -- resources -------------------------------------------------------------------------------

    def _parameters(self, run: "RunOptions", gpu: bool) -> dict[str, Any]:
        """submitit's parameters of an array of jobs with run options ``run``."""
        options = self.options
        # A multi-process job: its processes the tasks of one step, spread over --nodes (all on one
        # node when its own --processes is no multiple of them).
        nodes = options.nodes if run.processes % options.nodes == 0 else 1
        params: dict[str, Any] = {
            "partition": options.slurm_partition, "account": options.slurm_account, "qos": options.slurm_qos,
            "constraint": options.slurm_constraint, "cpus_per_task": options.slurm_cpus_per_task,
            "time": time_limit_minutes(run, gpu), "mem": memory_request(run.memory_limit, run.processes // nodes),
            "gpus_per_node": options.gpus_per_job * (run.processes // nodes) if gpu else None,
            "nodes": nodes, "ntasks_per_node": run.processes // nodes,
            "additional_parameters": sbatch_parameters(options.slurm_options),
        }
        if "requeue" not in params["additional_parameters"]:
            # A task lost with its node (or preempted) is jaxrun's to submit again, as the failure
            # table says for node_lost, with the lost attempt in the result; Slurm's own requeue
            # would run the script again unseen.
            params["additional_parameters"]["no-requeue"] = True
        if options.slurm_setup:
            params["setup"] = list(options.slurm_setup)
        return params

    def _paths(self, task_id: str, process: int = 0) -> Any:
        return self.submitit.core.utils.JobPaths(self.folder, job_id=task_id, task_id=process)

    # -- the batch -------------------------------------------------------------------------------

    def run(self, jobs: Iterable["Job"], run_job: RunJob, sink: "Sink") -> None:
        jobs = list(jobs)  # the whole plan: an array is submitted at once
        total = len(jobs)
        reattach = self._reattachable(jobs)
        if not self.options.resume:
            self.record.start()
        tasks: dict[str, _Task] = {}
        for job in jobs:
            if job.index in reattach:
                submission, task_id, key = reattach[job.index]
                sink.on_start(job, total)
                tasks[task_id] = self._task(job, task_id, submission.submitted_at, self.options.options_for(job), key)
        fresh = [job for job in jobs if job.index not in reattach]
        try:
            # Handed over when submitted, as Ray's tasks are: its files are claimed before its task
            # can write them (a kill of jaxrun then leaves them its own, for --resume).
            for job in fresh:
                sink.on_start(job, total)
            for task in self._submit(fresh, run_job):
                tasks[task.task_id] = task
            self._follow(tasks, run_job, sink, total)
        except KeyboardInterrupt:
            self._cancel(tasks, sink)
            raise BatchInterrupted from None

    def _submit(self, jobs: list["Job"], run_job: RunJob, lost: dict[int, list[Any]] | None = None) -> list[_Task]:
        """Submit ``jobs``, one array per set of resources (of at most MaxArraySize tasks); their
        tasks, recorded. A submission that fails cancels the arrays this call submitted."""
        # Keyed by a hashable copy of its parameters; each group keeps the parameters themselves
        # (submitit wants its lists as lists).
        groups: dict[tuple[Any, ...], tuple[dict[str, Any], list["Job"]]] = {}
        for job in jobs:
            params = self._parameters(self.options.options_for(job), job.platform == "gpu")
            groups.setdefault(_frozen(params), (params, []))[1].append(job)
        chunks = [(params, members[i:i + self.max_array]) for params, members in groups.values()
                  for i in range(0, len(members), self.max_array)]
        tasks: list[_Task] = []
        try:
            for params, members in chunks:
                tasks.extend(self._submit_array(params, members, run_job, lost or {}))
        except UsageError:
            with contextlib.suppress(SlurmUnanswered):
                self.queue.cancel({t.task_id.partition("_")[0] for t in tasks})
            raise
        return tasks

    def _submit_array(self, params: dict[str, Any], members: list["Job"], run_job: RunJob,
                      lost: dict[int, list[Any]]) -> list[_Task]:
        """One job array of ``members`` (at most MaxArraySize), recorded before and after sbatch."""
        tasks: list[_Task] = []
        name = f"jaxrun-{secrets.token_hex(4)}"
        runs = [self.options.options_for(job) for job in members]
        keys = [(job.name, job.device, run.key) for job, run in zip(members, runs)]
        submitted_at = time.time()
        self.record.submitting(name, submitted_at, keys)
        executor = _executor(self.submitit, self.folder, self.queue.timeout)
        executor.update_parameters(job_name=name, array_parallelism=max(1, self.options.jobs), **params)
        try:
            submitted = executor.map_array(run_on_node, [run_job] * len(members), members, runs)
        except Exception as exc:  # noqa: BLE001 - sbatch refused, timed out, or its output was unreadable
            raise UsageError(f"--backend slurm: submitting the job array failed: {_first_line(exc)}") from None
        array = submitted[0].job_id.partition("_")[0]
        self.record.submitted(name, array)
        for job, run, key, slurm_job in zip(members, runs, keys, submitted):
            task = self._task(job, slurm_job.job_id, submitted_at, run, key[2])
            task.lost = lost.get(job.index, [])
            tasks.append(task)
        return tasks

    def _task(self, job: "Job", task_id: str, submitted_at: float, run: "RunOptions", options_key: str) -> _Task:
        task = _Task(job, task_id, submitted_at, run.processes, options_key)
        task.last_pickle = str(self._paths(task_id, run.processes - 1).result_pickle)
        return task

    def _follow(self, tasks: dict[str, _Task], run_job: RunJob, sink: "Sink", total: int) -> None:
        """Wait for every task: each result as it arrives, each task Slurm ended as Slurm says."""
        asked = 0.0
        answered = time.monotonic()  # when the controller last answered
        waiting = False  # for a controller that does not answer: said once, until it answers again
        while tasks:
            now = time.monotonic()
            for task in list(tasks.values()):
                # Only a task squeue saw start can have a result; one that starts and ends between
                # two polls is read once it has left the queue (_settle). A waiting array of
                # thousands costs no look at the file system.
                if task.result is None and task.state != "PENDING":
                    self._read_result(task)
                if task.result is not None and not task.signalled:
                    self._hand_over(tasks.pop(task.task_id), sink, total)
            if not tasks:
                return
            if now - asked >= _QUEUE_POLL_S:
                asked = now
                left = answered + self.queue.timeout - time.monotonic()
                try:
                    live = self.queue.live_tasks({t.task_id.partition("_")[0] for t in tasks.values()},
                                                 timeout=max(1.0, min(left, _WAIT_NOTICE_S, self.queue.timeout / 2)))
                except SlurmUnanswered as exc:
                    if time.monotonic() - answered >= self.queue.timeout:
                        self._controller_gone(tasks, sink, total)
                        return
                    if not waiting:
                        _say(f"the Slurm controller does not answer ({exc}): waiting for it at most "
                             f"{self.queue.timeout:g} s (--slurm-timeout)")
                    waiting, live = True, None
                else:
                    if waiting:
                        _say(f"the Slurm controller answers again, after {time.monotonic() - answered:.0f} s")
                    answered, waiting = time.monotonic(), False
                if live is not None:
                    self._run_again(self._settle(tasks, live, sink, total), tasks, run_job, sink)
            time.sleep(_RESULT_POLL_S)

    def _run_again(self, lost: list[_Task], tasks: dict[str, _Task], run_job: RunJob, sink: "Sink") -> None:
        """Submit again the tasks lost with their node; one that cannot be is its lost run's result."""
        if not lost:
            return
        try:
            for task in self._submit([t.job for t in lost], run_job, {t.job.index: t.lost for t in lost}):
                tasks[task.task_id] = task
        except UsageError as exc:
            for task in lost:
                assert task.result is not None
                task.result.warnings.append(f"not run again: {exc}")
                task.lost = task.lost[:-1]  # the lost run is the result itself
                self._hand_over(task, sink)

    def _read_result(self, task: _Task) -> None:
        """The task's result, once each process of its job step pickled its own."""
        if not os.path.exists(task.last_pickle):
            return  # (the last process's first: the others are read once it is there)
        payloads = []
        for process in range(task.processes):
            paths = self._paths(task.task_id, process)
            try:
                outcome, payload = self.submitit.core.utils.pickle_load(paths.result_pickle)
            except FileNotFoundError:
                return
            except Exception as exc:  # noqa: BLE001 - a result cut off or unreadable: the task's failure
                task.result = _stand_in(task, f"the task's result could not be read ({type(exc).__name__}: {exc})")
                return
            if outcome != "success":
                lines = str(payload).strip().splitlines()
                task.result = _stand_in(task, f"the task failed on its node before the script's result was made: "
                                        f"{lines[-1] if lines else 'no traceback'} (the whole traceback: "
                                        f"{paths.stderr})")
                return
            payloads.append(payload)
        results = [ScriptResult.model_validate(p["result"]) for p in payloads]
        signalled = ["SIGTERM" in p.get("signals", ()) for p in payloads]
        result = results[0] if task.processes == 1 else merged(results, signalled, task.options_key)
        result.slurm_job_id = task.task_id
        result.queue_wait = round(max(0.0, min(p["started"] for p in payloads) - task.submitted_at), 3)
        task.result = result
        # Stopped by Slurm (its time limit, a preemption, scancel) unless a process failed on its own first.
        task.signalled = any(signalled) and all(s or r.success for s, r in zip(signalled, results))

    def _settle(self, tasks: dict[str, _Task], live: dict[str, tuple[str, str]], sink: "Sink",
                total: int) -> list[_Task]:
        """Act on what squeue said: tasks that started, tasks that left the queue. Returns the
        tasks to submit again (lost with their node)."""
        again: list[_Task] = []
        now = time.monotonic()
        for task in list(tasks.values()):
            state = live.get(task.task_id)
            if state is not None and state[0] in LIVE:
                task.gone_since, task.state = None, state[0]
                continue
            if task.result is None:
                self._read_result(task)
            if task.result is not None and not task.signalled:
                continue  # reported by the loop
            if task.gone_since is None and task.result is None:
                task.gone_since = now  # its result may still be on its way over a shared file system
                continue
            if task.result is None and now - (task.gone_since or now) < _LATE_RESULT_S:
                continue
            try:
                info = self.queue.job_info(task.task_id)
            except SlurmUnanswered:
                continue  # asked again at the next poll
            state = (info or {}).get("JobState")
            if state in LIVE:
                continue
            if task.result is not None and state in (None, "COMPLETED", "FAILED"):
                task.signalled = False  # stopped by a SIGTERM that was not Slurm ending the task: as it said
                self._hand_over(tasks.pop(task.task_id), sink, total)
                continue
            error_class, line, hint = ended(info, self._log_tail(task))
            if task.result is None and not self._left_a_log(task):
                if error_class == "crashed":  # Slurm says it ran and ended, yet nothing of it is here
                    error_class, line = "crashed", self._not_shared(info)
                    hint = hint_for("crashed", "results_not_shared")
                else:  # Slurm ended it (a cancel, a time limit, a lost node) before it wrote anything
                    line = f"{line}, before it started: the script did not run"
            result = _slurm_ended(task, error_class, line, info, hint)
            lost_before = len(task.lost)
            if next_action(error_class, task.job.platform or "cpu", retries_left=LOST_TASK_RETRIES - lost_before,
                           fallback=False, launched=True) == "retry":
                tasks.pop(task.task_id)
                task.lost.append(result.attempts[-1].model_copy(update={"number": lost_before + 1}))
                task.result = result
                again.append(task)
                continue
            task.result, task.signalled = result, False
            self._hand_over(tasks.pop(task.task_id), sink, total)
        return again

    def _log_tail(self, task: _Task) -> str:
        """The end of the Slurm log of the task (each process's), where slurmstepd says why it
        killed a step."""
        tails = []
        for process in range(task.processes):
            with contextlib.suppress(OSError):
                with open(self._paths(task.task_id, process).stderr, "rb") as handle:
                    handle.seek(0, 2)
                    handle.seek(max(0, handle.tell() - 8192))
                    tails.append(handle.read().decode("utf-8", "replace"))
        return "\n".join(tails)

    def _left_a_log(self, task: _Task) -> bool:
        paths = self._paths(task.task_id)
        return paths.stdout.exists() or paths.stderr.exists()

    def _not_shared(self, info: dict[str, str] | None) -> str:
        node = (info or {}).get("NodeList") or "its node"
        state = f" (JobState={info['JobState']})" if info and info.get("JobState") else ""
        return (f"the task ended{state} without writing anything into {str(self.folder)!r}: {node} cannot see or write "
                "the results folder. On a cluster --results-dir must be on a file system every node shares (a home "
                "or project folder, not /tmp or a local disk)")

    def _hand_over(self, task: _Task, sink: "Sink", total: int = 0, ended: bool = True) -> None:
        """The task's result to the batch; recorded as reported only when its task has ended
        (``ended``), so that --resume follows one that may still run."""
        assert task.result is not None
        result = with_lost_attempts(task.result, task.lost, "its Slurm node was lost or preempted")
        if not ended:
            result = result.model_copy(update={"may_still_run": True})
        sink.on_result(task.job, result)
        if ended:
            self.record.reported(task.task_id)

    def _cancel(self, tasks: dict[str, _Task], sink: "Sink") -> None:
        """Ctrl-C: cancel the arrays; each task that had started reports what its script did (it
        was stopped by Slurm's SIGTERM), waited for a bounded time; one still in the queue never ran."""
        arrays = {t.task_id.partition("_")[0] for t in tasks.values()}
        try:
            live = self.queue.live_tasks(arrays)  # which tasks run now (the last poll may be 2 s old)
            for task in tasks.values():
                task.state = live.get(task.task_id, ("GONE", ""))[0]
        except SlurmUnanswered:
            pass  # as the last poll said
        cancelled = True
        try:
            self.queue.cancel(arrays)
        except SlurmUnanswered as exc:
            cancelled = False
            _say(f"could not cancel the Slurm job array {', '.join(sorted(arrays))}: {exc}; its tasks may "
                 f"still run: `jaxrun run ... --resume` reattaches to them, or `scancel {' '.join(sorted(arrays))}`")
        deadline = time.monotonic() + min(self.queue.timeout, 30.0)
        started = [t for t in tasks.values() if t.state != "PENDING"]
        while time.monotonic() < deadline and any(t.result is None for t in started):
            for task in started:
                if task.result is None:
                    self._read_result(task)
            time.sleep(_RESULT_POLL_S)
        why = "the batch was interrupted (Ctrl-C) and jaxrun cancelled its Slurm task (scancel)"
        for task in tasks.values():
            if task.result is None:
                self._read_result(task)
            if not cancelled and (task.result is None or task.signalled):  # its end unknown: --resume follows it
                task.result = task.result or _stand_in(
                    task, "the batch was interrupted (Ctrl-C) and jaxrun could not cancel its Slurm task, which may "
                    "still run", "interrupted", hint_for("interrupted", "controller_gone"))
                self._hand_over(task, sink, ended=False)
                continue
            if task.result is None and task.state == "PENDING":
                task.result = _stand_in(task, f"{why} while the task still waited in Slurm's queue: the script did "
                                        "not run", "interrupted")
            elif task.result is None:
                task.result = _stand_in(task, f"{why}; what the script did is unknown", "interrupted")
            elif task.signalled:  # the script was stopped by the cancel's SIGTERM: said as an interruption
                task.result = _slurm_ended(task, "interrupted", why, None)
            self._hand_over(task, sink)

    def _controller_gone(self, tasks: dict[str, _Task], sink: "Sink", total: int) -> None:
        """The controller did not answer for --slurm-timeout: the batch ends, each task left
        `interrupted` as far as jaxrun knows, and none recorded as ended (each may still run)."""
        arrays = sorted({t.task_id.partition("_")[0] for t in tasks.values()})
        timeout = f"{self.queue.timeout:g} s (--slurm-timeout)"
        _say(f"the Slurm controller did not answer for {timeout}: jaxrun stops following job array "
             f"{', '.join(arrays)}, whose {plural(len(tasks), 'task')} may still run; once `scontrol ping` "
             "answers, `jaxrun run ... --resume` reattaches to them")
        line = f"the Slurm controller stopped answering for {timeout} while the task was in Slurm"
        hint = hint_for("interrupted", "controller_gone")
        for task in tasks.values():
            if task.result is None:
                task.result = _stand_in(task, f"{line}; what the script did is unknown", "interrupted", hint)
            else:  # stopped by a SIGTERM whose cause only the controller knows
                task.result = _slurm_ended(task, "interrupted", line, None, hint)
            self._hand_over(task, sink, total, ended=False)
        tasks.clear()


def time_limit_minutes(run: "RunOptions", gpu: bool) -> int | None:
    """The task's time limit: each run (warm-ups and counted ones) and each attempt (retries, a
    fallback to the CPU) at its --timeout, plus a margin; None without a timeout (the partition's)."""
    if run.timeout is None:
        return None
    runs = run.warmup_runs + run.benchmark_runs if run.benchmark_runs else 1
    attempts = 1 + run.retries + (1 if gpu and run.fallback else 0)
    return math.ceil((runs * attempts * run.timeout + TIME_MARGIN_S) / 60)


def memory_request(limit_bytes: int | None, processes_per_node: int = 1) -> str | None:
    """sbatch's ``--mem`` (per node) for a script's processes each held to ``limit_bytes`` (None:
    the partition's default)."""
    if limit_bytes is None:
        return None
    return f"{processes_per_node * (math.ceil(limit_bytes / 2**20) + MEMORY_MARGIN_MIB)}M"


def sbatch_flags(params: dict[str, Any]) -> list[str]:
    """The sbatch flags submitit writes for ``params`` (for ``sbatch --test-only``)."""
    flags = []
    for name in ("partition", "account", "qos", "constraint", "cpus_per_task", "time", "mem", "gpus_per_node", "nodes",
                 "ntasks_per_node"):
        if params.get(name) is not None:
            flags.append(f"--{name.replace('_', '-')}={params[name]}")
    for name, value in (params.get("additional_parameters") or {}).items():
        flags.append(f"--{name}" if value is True else f"--{name}={value}")
    return flags


def _executor(submitit: Any, folder: Path, timeout: float) -> Any:
    """submitit's SlurmExecutor, with ``sbatch`` bounded by ``timeout`` seconds (submitit waits for
    it without end)."""

    class BoundedSlurmExecutor(submitit.SlurmExecutor):
        def _make_submission_command(self, submission_file_path: Path) -> list[str]:
            return ["timeout", "--kill-after=5", f"{timeout:g}", "sbatch", str(submission_file_path)]

        def _internal_process_submissions(self, delayed_submissions: list[Any]) -> list[Any]:
            # submitit's own, except that the array is submitted by this class (submitit makes a
            # plain SlurmExecutor for it, which would drop the two changes here).
            if len(delayed_submissions) == 1:
                return super()._internal_process_submissions(delayed_submissions)
            utils = submitit.core.utils
            staging = utils.JobPaths.get_first_id_independent_folder(self.folder)
            staging.mkdir(parents=True, exist_ok=True)
            pickles = []
            for delayed in delayed_submissions:
                path = staging / f"{secrets.token_hex(16)}.pkl"
                delayed.set_timeout(self.parameters.get("time") or 0, self.max_num_timeout)
                delayed.dump(path)
                pickles.append(path)
            array = type(self)(self.folder, self.max_num_timeout)
            array.update_parameters(**self.parameters)
            array.parameters["map_count"] = len(delayed_submissions)
            first = array._submit_command(self._submitit_command_str)
            jobs = [submitit.SlurmJob(folder=self.folder, job_id=f"{first.job_id}_{index}", tasks=[0])
                    for index in range(len(delayed_submissions))]
            for job, path in zip(jobs, pickles):
                job.paths.move_temporary_file(path, "submitted_pickle")
            return jobs

        def _make_submission_file_text(self, command: str, uid: str) -> str:
            # submitit asks Slurm for SIGUSR2 90 s before the time limit (its checkpointing), which
            # Slurm sends to every process of the task: it would kill the script (USR2's default
            # action) 90 s early, as a crash. Without it the script meets the limit itself.
            text = super()._make_submission_file_text(command, uid)
            return "\n".join(line for line in text.split("\n") if not line.startswith("#SBATCH --signal="))

    return BoundedSlurmExecutor(folder=folder)


def _frozen(params: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, tuple(sorted(v.items())) if isinstance(v, dict) else tuple(v) if isinstance(v, list)
                         else v) for k, v in params.items()))


def _stand_in(task: _Task, message: str, error_class: str = "crashed", hint: str | None = None) -> ScriptResult:
    result = failed_before_running(task.job, message, error_class, hint=hint or hint_for(error_class))
    result.slurm_job_id = task.task_id
    return result


def _slurm_ended(task: _Task, error_class: str, line: str, info: dict[str, str] | None,
                 hint: str | None = None) -> ScriptResult:
    """The task's result once Slurm ended it: what its script did (when it reported back after
    Slurm's SIGTERM), classed as Slurm says."""
    node = (info or {}).get("NodeList") or None
    if task.result is None:
        result = _stand_in(task, line, error_class, hint)
        result.node = node if node not in (None, "(null)") else None
        return result
    said = f"{line}; the script was stopped: {task.result.error_message}" if task.result.error_message else line
    attempts = task.result.attempts[:-1] + [task.result.attempts[-1].model_copy(
        update={"error_class": error_class, "error_message": said, "success": False})] if task.result.attempts else []
    return task.result.model_copy(update={"success": False, "error_class": error_class, "error_message": said,
                                          "hint": hint or hint_for(error_class), "attempts": attempts})


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return " ".join(lines[-1].split()) if lines else type(exc).__name__


def _say(line: str) -> None:
    import sys

    with contextlib.suppress(Exception):
        print(f"jaxrun: {line}", file=sys.stderr)
