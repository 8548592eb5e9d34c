"""The :class:`ProcessPool`: what the scripts' processes of one jaxrun process are started with,
passed down to every launch (run/process/process_watch.py) instead of living in module globals.
It holds

* the spare probe process (run/process/spare.py): a process started before its job is known, so
  that a script's interpreter starts while jaxrun reads its options or writes the last result;
* the prestarted interpreters that fork the scripts' processes (run/process/prestart.py);
* the parent's own set-up that a script need not wait for (:meth:`when_started`), done right
  after the next script's process starts, while it runs.

It knows nothing of attempts: run/batch_pool.py's ``BatchPool`` is the pool that a batch hands, with
itself, to the attempt it runs. On another machine (a Ray worker) a pool unpickles as a new,
empty one: spares and set-up belong to the process that made them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from jaxrun.run.process.prestart import Prestarts
from jaxrun.run.process.spare import SparePool

logger = logging.getLogger(__name__)


class ProcessPool:
    def __init__(self) -> None:
        self.spares = SparePool()
        self.prestart = Prestarts()  # the prestarted interpreters that fork scripts (run/process/prestart.py)
        self._deferred: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), ()  # elsewhere, a pool of its own: nothing to share with this process

    # -- spares ----------------------------------------------------------------------------------

    def open_spares(self, env: Mapping[str, str]) -> None:
        """Keep a spare probe process ready from now on, started with ``env`` (SparePool.open)."""
        self.spares.open(env)

    def expect(self, processes: int) -> None:
        """How many more processes the batch starts here (0: none, its jobs run elsewhere)."""
        self.spares.expect(processes)

    def open_prestart(self, mode: str, env: Mapping[str, str] | None) -> None:
        """Scripts whose ``--prestart`` is ``auto`` are forked by a ``mode`` server (``none``: exec);
        ``env``: start it now with that environment (None: with its first script's)."""
        self.prestart.reopen()
        self.prestart.auto = mode if mode != "none" else None
        if mode != "none" and env is not None:
            self.prestart.open(mode, env)

    def close(self) -> None:
        """No more spares (the one waiting is stopped), no prestarted servers, no more put-off work."""
        self.drop_deferred()
        self.spares.close()
        self.prestart.close()

    # -- set-up that can wait until a script runs ------------------------------------------------

    def when_started(self, work: Callable[[], None]) -> None:
        """Do ``work`` once, right after the next script's process has started, in the thread that
        started it: what jaxrun must do but the script need not wait for (the batch files' first
        version, building the result models, importing the summary's tables) then overlaps the
        script instead of delaying its start. ``work`` must be safe to run again by its owner (who
        calls it when it must be done, started or not); its errors are left for that call."""
        with self._lock:
            self._deferred.append(work)

    def started(self) -> None:
        """A script's process has just started (or a job was handed to another machine): do the
        put-off work now."""
        with self._lock:
            work, self._deferred = self._deferred, []
        for item in work:
            try:
                item()
            except Exception:  # noqa: BLE001 - its owner does it again where the error belongs
                logger.debug("deferred set-up failed; its owner repeats it", exc_info=True)

    def has_deferred(self) -> bool:
        """Whether put-off work waits for the next script's start."""
        return bool(self._deferred)

    def drop_deferred(self) -> None:
        """Forget the put-off work (a batch that ends without starting a process)."""
        with self._lock:
            self._deferred = []
