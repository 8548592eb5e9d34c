"""The child's side of a multi-process job (``--processes N``; run/process/process_group.py is the parent's):
``jax.distributed.initialize()`` called with no arguments finds its coordinator, the number of
processes and its own id, as it would under Slurm or Open MPI.

JAX reads only the coordinator's address from the environment (``JAX_COORDINATOR_ADDRESS``); the
count and the id it asks the cluster environments it knows (``jax._src.clusters``: each
``ClusterEnv`` subclass registers itself; the first whose ``is_env_present()`` holds answers).
jaxrun adds one of its own when the script imports jax, first in JAX's list, present only in the
processes of a jaxrun job (``JAXRUN_PROCESS_COUNT`` set). Why not Slurm's or Open MPI's variables,
which JAX already reads: other libraries read them too (mpi4py, torch.distributed, Lightning,
submitit would believe they run in an allocation that does not exist), and under a real Slurm
allocation they would overwrite the job's own. First in the list: a jaxrun job inside a Slurm
allocation is jaxrun's job, not the allocation's.

Imports nothing at import time: the probe loads this module only in a multi-process job, and
touches JAX's internals through jax_internals.py (with its check) once the script imported jax.
"""

from __future__ import annotations

import os

PROCESS_ID_ENV = "JAXRUN_PROCESS_ID"
PROCESS_COUNT_ENV = "JAXRUN_PROCESS_COUNT"
COORDINATOR_ENV = "JAX_COORDINATOR_ADDRESS"  # JAX's own variable: it reads it before any cluster
# CPU collectives across processes: JAX's config variable (gloo is the default of recent JAX; older
# versions had none, and a collective across processes failed). Set by the parent, never over the user's.
COLLECTIVES_ENV = "JAX_CPU_COLLECTIVES_IMPLEMENTATION"
CLUSTER_NAME = "jaxrun"


def in_job() -> bool:
    """Whether this process is one of a multi-process job's."""
    return PROCESS_COUNT_ENV in os.environ


def _platform_is_gpu() -> bool:
    platforms = os.environ.get("JAX_PLATFORMS", "").lower()
    return any(name in platforms for name in ("cuda", "rocm", "gpu"))


def _make(base: type) -> type:
    class JaxrunCluster(base):  # type: ignore[misc, valid-type]
        """The processes of one jaxrun job, all on this machine."""

        name = CLUSTER_NAME

        @classmethod
        def is_env_present(cls) -> bool:
            return in_job() and PROCESS_ID_ENV in os.environ and COORDINATOR_ENV in os.environ

        @classmethod
        def get_coordinator_address(cls, timeout_secs: int | None = None,
                                    override_coordinator_port: str | None = None) -> str:
            return os.environ[COORDINATOR_ENV]

        @classmethod
        def get_process_count(cls) -> int:
            return int(os.environ[PROCESS_COUNT_ENV])

        @classmethod
        def get_process_id(cls) -> int:
            return int(os.environ[PROCESS_ID_ENV])

        @classmethod
        def get_local_process_id(cls) -> int | None:
            # On GPUs, one device per process, the id'th of those visible (Slurm's convention); on
            # CPU, None: each process keeps its CPU devices (JAX restricts only GPU visibility).
            return cls.get_process_id() if _platform_is_gpu() else None

    return JaxrunCluster


def register() -> None:
    """Make jaxrun's job the cluster ``jax.distributed.initialize()`` detects (jax is imported)."""
    from jaxrun.probe.jax_internals import register_cluster

    register_cluster(_make)
