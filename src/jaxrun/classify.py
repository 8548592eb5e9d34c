"""Failure classification into DESIGN §5's taxonomy, with a hint of what to do.

Evidence is weighed in a fixed order: what the parent itself knows (timeout, Ctrl-C), the
exception the probe captured (type, then message), the exit status or signal, and last the
stderr text (for deaths that left no Python exception, such as an XLA abort).
"""

from __future__ import annotations

import re
import signal as signal_module
from dataclasses import dataclass
from typing import Any

ACCELERATORS = ("gpu", "tpu")

HINTS: dict[str, str] = {
    "device_unavailable": "the requested accelerator is not usable here; run with --device cpu, or "
    "check the driver and the jax accelerator plugin (jaxrun check)",
    "out_of_memory": "reduce the batch or model size; on GPU set XLA_PYTHON_CLIENT_MEM_FRACTION or "
    "leave XLA_PYTHON_CLIENT_PREALLOCATE=false so other processes do not hold the memory",
    "compilation_failed": "JAX could not trace or compile a function: mark Python-valued arguments "
    "static (static_argnums), use jnp.where / lax.cond instead of Python if on traced values",
    "numerical_instability": "a NaN or Inf was produced; the traceback names the primitive. Check "
    "learning rates, divisions and logs of values that can reach 0",
    "timeout": "the script ran past its time limit; raise --timeout or make the workload smaller",
    "import_error": "a module the script imports is missing; pip install it into the Python that "
    "runs jaxrun",
    "syntax_error": "the script does not parse; fix the line shown in the message",
    "script_error": "the script raised an exception; see the traceback in its stderr log",
    "crashed": "the process was killed by a signal; SIGKILL often means the kernel's out-of-memory "
    "killer, SIGSEGV/SIGABRT a crash inside a native library",
    "interrupted": "the run was interrupted (Ctrl-C); run it again",
}

_OOM = re.compile(
    r"RESOURCE_EXHAUSTED|out of memory|Out of memory|OOM when allocating|failed to allocate|"
    r"Allocator .* ran out of memory|CUDA_ERROR_OUT_OF_MEMORY",
)
_DEVICE = re.compile(
    r"Unable to initialize backend|Unknown backend|failed to initialize|no platforms that are "
    r"instances of|CUDA_ERROR_NO_DEVICE|No visible (?:GPU|TPU|XPU) devices|Failed to open libtpu|"
    r"TPU initialization failed|jaxlib is not built with|CUDA backend failed|"
    r"Could not find .*cuda|no supported devices found for platform",
    re.IGNORECASE,
)
_NAN = re.compile(r"invalid value \((?:nan|inf)\)|NaN|nan encountered", re.IGNORECASE)
_TRACING_ERRORS = {
    "ConcretizationTypeError",
    "TracerBoolConversionError",
    "TracerIntegerConversionError",
    "TracerArrayConversionError",
    "UnexpectedTracerError",
    "NonConcreteBooleanIndexError",
    "KeyReuseError",
}
_COMPILE_TEXT = re.compile(
    r"compile_or_get_cached|backend_compile|Compilation failure|MLIR translation rule|"
    r"during compilation|XLA compilation",
)
# jax 0.10 without a CUDA plugin and JAX_PLATFORMS=cuda dies with this bare assertion.
_NO_BACKEND_ASSERT = re.compile(r"assert _default_backend is not None|xla_bridge\.py")


@dataclass(frozen=True)
class Classification:
    error_class: str
    message: str
    hint: str
    exception_type: str | None = None


def classification(cls: str, message: str, exception_type: str | None = None) -> Classification:
    return Classification(cls, message.strip() or cls.replace("_", " "), HINTS[cls], exception_type)


def _from_exception(exc: dict[str, Any]) -> str:
    names = set(exc.get("exc_mro") or [exc.get("exc_type", "")])
    message = str(exc.get("message", ""))
    tb = str(exc.get("traceback", ""))
    if "SyntaxError" in names:
        return "syntax_error"
    if "KeyboardInterrupt" in names:
        return "interrupted"
    if "MemoryError" in names or _OOM.search(message):
        return "out_of_memory"
    if _DEVICE.search(message):
        return "device_unavailable"
    if "AssertionError" in names and not message and "xla_bridge" in tb and _NO_BACKEND_ASSERT.search(tb):
        return "device_unavailable"
    if "FloatingPointError" in names and _NAN.search(message):
        return "numerical_instability"
    if names & _TRACING_ERRORS:
        return "compilation_failed"
    if names & {"ImportError", "ModuleNotFoundError"}:
        return "import_error"
    if ("XlaRuntimeError" in names or "JaxRuntimeError" in names) and _COMPILE_TEXT.search(message + tb):
        return "compilation_failed"
    return "script_error"


def _from_stderr(stderr_tail: str) -> str | None:
    if _OOM.search(stderr_tail):
        return "out_of_memory"
    if _DEVICE.search(stderr_tail):
        return "device_unavailable"
    return None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def classify(
    *,
    events: list[dict[str, Any]],
    exit_code: int | None,
    signal: int | None,
    timed_out: bool,
    interrupted: bool,
    timeout: float | None,
    stderr_tail: str,
) -> Classification | None:
    """Return why a run failed, or None when it succeeded."""
    if timed_out:
        return classification("timeout", f"stopped after the {timeout:g} s time limit")
    if interrupted:
        return classification("interrupted", "interrupted before the script finished")
    exception = next((e for e in reversed(events) if e.get("type") == "exception"), None)
    if exception is not None:
        cls = _from_exception(exception)
        exc_type = str(exception.get("exc_type"))
        message = f"{exc_type}: {exception.get('message', '')}".rstrip(": ")
        return classification(cls, message, exc_type)
    if signal is not None:
        try:
            name = signal_module.Signals(signal).name
        except ValueError:
            name = f"signal {signal}"
        from_text = _from_stderr(stderr_tail)
        if from_text == "out_of_memory":
            return classification("out_of_memory", f"killed by {name} after running out of memory")
        return classification("crashed", f"killed by {name}" + (f": {_last_line(stderr_tail)}" if stderr_tail.strip() else ""))
    if exit_code in (0, None) and exit_code is not None:
        return None
    from_text = _from_stderr(stderr_tail)
    detail = _last_line(stderr_tail)
    if from_text is not None:
        return classification(from_text, detail)
    if exit_code is None:
        return classification("crashed", "the process ended without an exit status")
    started = any(e.get("type") == "start" for e in events)
    if not started:
        return classification("script_error", f"the jaxrun probe could not start (exit status {exit_code}): {detail}")
    return classification("script_error", f"exited with status {exit_code}" + (f": {detail}" if detail else ""))


def is_transient(error_class: str | None, platform: str | None) -> bool:
    """Only a missing device or an accelerator out-of-memory may go away on retry or on CPU."""
    if error_class == "device_unavailable":
        return True
    return error_class == "out_of_memory" and platform in ACCELERATORS
