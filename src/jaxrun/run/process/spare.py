"""A probe process started before its script is known, so the interpreter's own start-up (~40 ms
of Python, jaxrun's probe modules) happens while jaxrun is still getting ready: the first script
of ``jaxrun run`` starts as soon as the command has read its options, and each later script while
the previous result is being written.

The spare (``python -c ENTRY --spare``, probe/arguments.py; its own session, stdout and stderr piped
as for any script) waits for its job on stdin (marshal, read to its end): the probe's arguments, the
environment and the working folder. It then becomes exactly what a probe started with those
arguments would have been, except for what a process reads when it starts and cannot take back: so a
spare is used only when the job's environment agrees with the spare's on every variable of
``STARTUP_VARIABLES`` (Python's own ``PYTHON*``, the dynamic loader's ``LD_*``, the locale,
``HOME``, ``TMPDIR``, ``TZ``, glibc's malloc settings); otherwise the job gets a process of its own
as before. Where jaxrun can make cgroups, a spare waits in one of its own, which becomes its job's
(with the job's limits) unless the job needs a controller it lacks.

Its time as a spare is not the script's: its START event says when it was ready
(``spare_ready_at``), and the launch takes the time it sat ready out of the process's wall time
(run/process/process_watch.py), so ``execution_time`` stays what
``python script.py`` would have taken. Nothing is left behind: a spare that is not used is
stopped (:meth:`SparePool.close`), and one whose jaxrun died reads end-of-file and exits.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Mapping

from jaxrun.probe.arguments import SPARE
from jaxrun.probe.arguments import interpreter as probe_interpreter
from jaxrun.run.process import cgroups, lifeline_pipe

if TYPE_CHECKING:
    from pathlib import Path

# This module is imported by `jaxrun run` before anything else (interfaces/cli/__init__.py): nothing heavy.

_STARTUP_PREFIXES = ("PYTHON", "LD_", "LC_", "MALLOC_")
_STARTUP_NAMES = {"LANG", "LANGUAGE", "HOME", "TMPDIR", "TZ", "GLIBC_TUNABLES"}


def startup_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` that a process reads as it starts (and never again)."""
    return {k: v for k, v in env.items() if k in _STARTUP_NAMES or k.startswith(_STARTUP_PREFIXES)}


class Spare:
    def __init__(self, proc: subprocess.Popen, spawned_at: float, startup: dict[str, str],
                 group: cgroups.ScriptCgroup | None = None) -> None:
        self.proc = proc
        self.spawned_at = spawned_at  # time.perf_counter() just before it was started
        self.startup = startup  # its startup_variables
        self.group = group  # the cgroup it joined while it waited; its job's, unless that needs another

    def hand_over(self, argv: list[str], env: Mapping[str, str], cwd: "Path") -> bool:
        """Give the spare its job; False if it is gone (then start a process as usual)."""
        import marshal  # the spare is this interpreter: it reads it back without importing json (~5 ms)

        job = marshal.dumps({"argv": list(argv), "env": dict(env), "cwd": str(cwd)})
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(job)
            self.proc.stdin.close()
            return True
        except (OSError, ValueError):
            self.stop()
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def discard(self) -> None:
        """Stop it and remove its cgroup: it will never run a job."""
        self.stop()
        if self.group is not None:
            self.group.remove()


class SparePool:
    """At most one spare at a time, used only while a batch has said it wants them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spare: Spare | None = None
        self._env: dict[str, str] | None = None  # the environment spares start with; None: off
        self._wanted: int | None = None  # processes the batch will still start; None: not known

    def open(self, env: Mapping[str, str]) -> None:
        """Keep a spare ready from now on, started with ``env`` (what the jobs' environments
        will agree with: the user's, plus the probe's PYTHONPATH and PYTHONUNBUFFERED)."""
        with self._lock:
            self._env = dict(env)
        self.replenish()

    def expect(self, processes: int) -> None:
        """The batch will start this many more processes (retries aside): no spare is started
        after the last one, where it would only be stopped again, its start-up competing with
        the writing of the last result."""
        with self._lock:
            self._wanted = processes
            spare = self._spare if processes == 0 else None
            if spare is not None:
                self._spare = None
        if spare is not None:
            spare.discard()
        self.replenish()

    def replenish(self) -> None:
        with self._lock:
            if self._env is None or self._spare is not None or self._wanted == 0:
                return
            # It joins a cgroup of its own while it waits: moving a process costs the kernel 10-30 ms,
            # which a job would otherwise wait for (run/process/cgroups.py).
            group = cgroups.create()
            spawned_at = time.perf_counter()
            try:
                proc = subprocess.Popen(
                    [*probe_interpreter(), SPARE],
                    env={**self._env, **(group.env() if group else {}), **lifeline_pipe.child_env()},
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                    pass_fds=lifeline_pipe.child_fds(),  # it stops its tree when jaxrun is gone (run/process/lifeline_pipe.py)
                )
            except OSError:
                if group is not None:
                    group.remove()
                return  # no spare: every job starts its own process, as without spares
            self._spare = Spare(proc, spawned_at, startup_variables(self._env), group)

    def take(self, env: Mapping[str, str]) -> Spare | None:
        """The spare, if there is one that can become a job with environment ``env``."""
        with self._lock:
            spare, self._spare = self._spare, None
            if self._wanted:
                self._wanted -= 1
        if spare is None:
            return None
        if spare.startup != startup_variables(env) or spare.proc.poll() is not None:
            spare.discard()
            return None
        return spare

    def close(self) -> None:
        """No more spares; the one waiting, if any, is stopped."""
        with self._lock:
            spare, self._spare, self._env, self._wanted = self._spare, None, None, None
        if spare is not None:
            spare.discard()


def spare_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a spare starts with: the user's, with what every probe gets that Python
    reads at start-up (run/process/environment.py: child_env)."""
    from jaxrun.core.paths import make_jaxrun_importable

    env = dict(os.environ if environ is None else environ)
    env["PYTHONUNBUFFERED"] = "1"
    return make_jaxrun_importable(env)

