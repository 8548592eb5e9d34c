"""The Slurm settings a user writes: the ``[slurm]`` table of a config file (``partition =
"gpu"`` is the option ``slurm_partition``) and the extra sbatch options of ``--slurm-option``.

An extra option is ``NAME=VALUE`` or ``NAME`` (a leading ``--`` is allowed: ``--exclusive``), as
sbatch spells it. Those jaxrun sets itself from other options are refused with the option to use
instead, and those the job array's bookkeeping needs (``array``, ``output``, ...) are refused
outright: a job whose output went elsewhere would leave jaxrun no result to read.
"""

from __future__ import annotations

import re
from typing import Any

from jaxrun.errors import UsageError

# The config file's [slurm] table: its key -> the option it sets.
TABLE = "slurm"
PREFIX = "slurm_"

# sbatch options with a jaxrun option of their own.
_SET_BY_OPTION = {
    "partition": "--slurm-partition", "p": "--slurm-partition",
    "account": "--slurm-account", "A": "--slurm-account",
    "qos": "--slurm-qos", "q": "--slurm-qos",
    "constraint": "--slurm-constraint", "C": "--slurm-constraint",
    "cpus-per-task": "--slurm-cpus-per-task", "c": "--slurm-cpus-per-task",
    "array": "--jobs (the array's parallelism)",
    "ntasks": "--processes", "n": "--processes", "ntasks-per-node": "--processes",
    "job-name": "nothing: jaxrun names the array after the batch", "J": "nothing: jaxrun names the array",
}
# sbatch options whose value the array's bookkeeping decides (where the task's result is written,
# the signal before the time limit): never the user's.
_RESERVED = ("output", "o", "error", "e", "open-mode", "signal", "wrap", "chdir", "D", "test-only", "parsable",
             "wait", "W", "export")

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def sbatch_option(text: Any) -> str:
    """``"--mail-type=END"`` -> ``"mail-type=END"``; a UsageError naming the culprit otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"slurm_options: each must be an sbatch option NAME=VALUE or NAME, got {text!r}")
    item = text.strip()
    bare = item.lstrip("-")
    name, sep, value = bare.partition("=")
    if not _NAME.fullmatch(name) or (sep and not value.strip()) or "\n" in value:
        raise UsageError(f"slurm_options: {text!r} is not an sbatch option: write NAME=VALUE or NAME "
                         "(mail-type=END, exclusive)")
    if name in _SET_BY_OPTION:
        raise UsageError(f"slurm_options: {name} is set by jaxrun from {_SET_BY_OPTION[name]}; use that instead")
    if name in _RESERVED:
        raise UsageError(f"slurm_options: {name} cannot be changed: jaxrun's job array needs its own (each task's "
                         "result is read back from where it writes it)")
    return f"{name}={value.strip()}" if sep else name


def sbatch_parameters(options: tuple[str, ...] | None) -> dict[str, Any]:
    """``("mail-type=END", "exclusive")`` -> submitit's ``additional_parameters``:
    ``{"mail-type": "END", "exclusive": True}``."""
    out: dict[str, Any] = {}
    for item in options or ():
        name, sep, value = item.partition("=")
        out[name] = value if sep else True
    return out
