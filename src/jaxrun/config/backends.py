"""Where jobs run. Each backend is one module with one class implementing
:class:`jaxrun.executors.base.Executor`; this table registers them by name (dotted paths only, so
reading it imports nothing: config/options.py validates ``--backend`` against it).

``sequential`` is what a ``local`` batch with ``--jobs 1`` uses. Adding a backend is one new module
plus one line here (docs/ARCHITECTURE.md, "Add a backend").
"""

from __future__ import annotations

EXECUTORS: dict[str, str] = {
    "sequential": "jaxrun.executors.sequential:SequentialExecutor",
    "local": "jaxrun.executors.local:LocalExecutor",
    "ray": "jaxrun.executors.ray:RayExecutor",
    "slurm": "jaxrun.executors.slurm:SlurmExecutor",
}

# What ``--backend`` accepts (``sequential`` is chosen by ``--jobs 1``, not by name).
BACKENDS: tuple[str, ...] = tuple(name for name in EXECUTORS if name != "sequential")
