"""The one failure table: every ``error_class`` with its hint (and the hints of causes within it
that jaxrun tells apart: :func:`hint_for`), where it is transient, and what to try next.
Classification (run/reading/classify.py) decides the class; every executor acts on it only through
:func:`next_action`, so a failure takes the same path sequentially, in parallel and on Ray. A hint
joined after another text is joined as sentences (:func:`as_sentences`).

To add a class: a row in :data:`TABLE` (the result models' ``ErrorClass`` is made from it), and
the evidence that recognises it in run/reading/classify.py (docs/ARCHITECTURE.md, "Add a failure class").
"""

from __future__ import annotations

from typing import Literal

import msgspec

ACCELERATORS = ("gpu", "tpu")

# What to do after a failed attempt, in the order the table lists them for a class:
# "retry" on the same device (after a backoff), on an "other_gpu" (when the executor has one to
# offer; never for a chosen device, --device gpu:1: the runner says there is none, so it retries
# on that GPU or falls back to the CPU), "fallback" to the CPU, or "stop" and report the failure.
Action = Literal["retry", "other_gpu", "fallback", "stop"]

RETRY_BACKOFF_BASE = 1.0
RETRY_BACKOFF_MAX = 30.0


class FailureClass(msgspec.Struct, frozen=True):
    name: str
    hint: str
    # Platforms on which the failure may go away by retrying elsewhere; empty: never transient.
    transient_on: tuple[str, ...] = ()
    # The recovery steps tried, in order, while the failure is transient.
    recovery: tuple[Action, ...] = ()
    # Causes within the class that jaxrun tells apart, each with its own hint: (cause, hint).
    causes: tuple[tuple[str, str], ...] = ()


_EVERYWHERE = ("auto", "cpu", "gpu", "tpu")  # "auto": nothing usable was found

_ROWS: tuple[FailureClass, ...] = (
        FailureClass(
            "device_unavailable",
            "the requested accelerator is not usable here; run with --device cpu, or check the "
            "driver and the jax accelerator plugin (jaxrun check)",
            transient_on=_EVERYWHERE,
            recovery=("retry", "fallback"),
        ),
        FailureClass(
            "out_of_memory",
            "reduce the batch or model size; on GPU set XLA_PYTHON_CLIENT_MEM_FRACTION or leave "
            "XLA_PYTHON_CLIENT_PREALLOCATE=false so other processes do not hold the memory",
            # A host MemoryError will not go away on retry; an accelerator's memory may be free
            # on another GPU, and the host usually has far more of it.
            transient_on=ACCELERATORS,
            recovery=("retry", "other_gpu", "fallback"),
            causes=(("memory_limit", "the script's processes used more host memory than --memory-limit allows: "
                     "raise the limit or make the script use less"),),
        ),
        FailureClass(
            "compilation_failed",
            "JAX could not trace or compile a function: mark Python-valued arguments static "
            "(static_argnums), use jnp.where / lax.cond instead of Python if on traced values",
        ),
        FailureClass(
            "numerical_instability",
            "a NaN or Inf was produced; the traceback names the primitive. Check learning rates, "
            "divisions and logs of values that can reach 0",
        ),
        FailureClass("timeout", "the script ran past its time limit; raise --timeout or make the workload smaller"),
        FailureClass(
            "import_error",
            "a module the script imports is missing; pip install it into the Python that runs jaxrun",
        ),
        FailureClass("syntax_error", "the script does not parse; fix the line shown in the message"),
        FailureClass(
            "script_error",
            "the script raised an exception; see the traceback in its stderr log",
            causes=(("process_limit", "the script forks without bound (a fork bomb?) or needs more processes: raise "
                     "--max-processes"),),
        ),
        FailureClass(
            "crashed",
            "the process was killed by a signal; SIGKILL often means the kernel's out-of-memory "
            "killer, SIGSEGV/SIGABRT a crash inside a native library",
            # A Slurm task that left nothing in the results folder although Slurm says it ran.
            causes=(("results_not_shared", "pass a --results-dir that every node of the cluster sees at the same "
                     "path (the scripts too), and run jaxrun again"),),
        ),
        FailureClass(
            "node_lost",
            "the machine running it failed, or the cluster's scheduler took it back for another job (a "
            "preemption); jaxrun runs it again on another node, and reports it lost after that",
            transient_on=_EVERYWHERE,
            recovery=("retry",),
        ),
        FailureClass(
            "interrupted",
            "the run was interrupted (Ctrl-C); run it again",
            causes=(
                # Slurm's own cancel: someone else's, never the user's Ctrl-C (jaxrun says that one).
                ("cancelled", "its Slurm task was cancelled outside jaxrun (scancel by you, another user or the "
                 "cluster's administrator); `jaxrun run ... --resume` runs it again"),
                # Its task may still run: --resume must follow it, never submit it again.
                ("controller_gone", "its Slurm task may still be running: once the controller answers (`scontrol "
                 "ping`), `jaxrun run ... --resume` reattaches to it, and runs nothing twice"),
            ),
        ),
)


def one_row_each(rows: tuple[FailureClass, ...]) -> dict[str, FailureClass]:
    """The table by name; a name given two rows is an error when jaxrun is imported, never a row
    that silently replaces another."""
    table: dict[str, FailureClass] = {}
    for row in rows:
        if row.name in table:
            raise ValueError(f"the failure class {row.name!r} has two rows in core/failures.py: keep one")
        table[row.name] = row
    return table


TABLE: dict[str, FailureClass] = one_row_each(_ROWS)

HINTS: dict[str, str] = {name: row.hint for name, row in TABLE.items()}


def hint_for(error_class: str, cause: str | None = None) -> str:
    """The hint of ``error_class``, or of one of its causes (a KeyError for a cause the table lacks)."""
    row = TABLE[error_class]
    return dict(row.causes)[cause] if cause is not None else row.hint


def cause_hints() -> list[tuple[str, str, str]]:
    """(class, cause or "", hint) of every hint in the table."""
    return [(row.name, cause, hint) for row in TABLE.values() for cause, hint in (("", row.hint), *row.causes)]


def as_sentences(*texts: str | None) -> str:
    """Texts (a message, a hint: each may start in lower case, as hints do) joined into sentences:
    each after the first starts with a capital, none ends in a doubled period."""
    parts = [text.strip().rstrip(".").strip() for text in texts if text and text.strip().rstrip(".").strip()]
    return ". ".join(part if i == 0 else part[0].upper() + part[1:] for i, part in enumerate(parts))


def is_transient(error_class: str | None, platform: str | None) -> bool:
    """Whether the failure may go away on another attempt (only a missing device, or an
    accelerator out-of-memory)."""
    row = TABLE.get(error_class or "")
    return row is not None and platform in row.transient_on


def next_action(
    error_class: str | None,
    platform: str,
    *,
    retries_left: int,
    fallback: bool,
    launched: bool,
    other_gpu: bool = False,
) -> Action:
    """What to do after an attempt on ``platform`` failed with ``error_class``.

    ``launched`` is False when the device facts said the platform is absent: waiting will not
    install a driver, so that skips the retries. ``other_gpu`` says whether the executor can offer
    a GPU this job has not tried yet (only the local parallel executor hands out GPUs one by one).
    """
    if error_class is None or not is_transient(error_class, platform):
        return "stop"
    for step in TABLE[error_class].recovery:
        if step == "retry" and launched and retries_left > 0:
            return step
        if step == "other_gpu" and platform == "gpu" and other_gpu:
            return step
        if step == "fallback" and fallback and platform != "cpu":
            return step
    return "stop"


def backoff_seconds(retry_number: int, base: float = RETRY_BACKOFF_BASE, cap: float = RETRY_BACKOFF_MAX) -> float:
    """Exponential backoff before retry ``retry_number`` (from 1): base, 2*base, 4*base, ... capped."""
    return min(cap, base * 2 ** max(0, retry_number - 1))
