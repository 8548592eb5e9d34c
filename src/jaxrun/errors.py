"""jaxrun's error tree.

Only usage mistakes and explicitly requested failures raise: a script that fails is a *result*
(see ``ScriptResult.error_class``), never an exception. Every message says what was wrong and
what to do, listing the valid values and naming the culprit, so the CLI can print it as one line.
"""

from __future__ import annotations

from typing import Iterable


class JAXExecutionError(Exception):
    """Base of every error jaxrun raises."""


class UsageError(JAXExecutionError, ValueError):
    """The caller asked for something jaxrun cannot do (bad path, unknown device, bad option)."""


class InvalidDeviceError(UsageError):
    """A device name that is not one of the valid choices."""


class ScriptNotFoundError(UsageError, FileNotFoundError):
    """A path given to run does not exist or cannot be read."""


class DeviceProbeError(JAXExecutionError):
    """The child process that reads device facts could not run (JAX missing or broken)."""


class ResultsWriteError(JAXExecutionError, OSError):
    """A file of the results (a result, a batch file, a log, an output folder) could not be written:
    a full disk, an I/O error, a file too large. One line: the file and the errno, as in
    ``cannot write /r/script_results/x_result.json: [Errno 28] No space left on device``. Still an
    ``OSError`` (its ``errno``, ``strerror`` and ``filename``) for callers that catch those."""

    def __init__(self, path: object, exc: OSError) -> None:
        super().__init__(exc.errno, exc.strerror or str(exc), str(path))
        self.path = str(path)

    def __str__(self) -> str:
        return f"cannot write {self.path}: {describe_os_error(self)}"


def describe_os_error(exc: OSError) -> str:
    """``[Errno 28] No space left on device`` (the errno and its text, without the file name)."""
    if exc.errno is None:
        return exc.strerror or str(exc) or type(exc).__name__
    return f"[Errno {exc.errno}] {exc.strerror}"


class ScriptFailedError(JAXExecutionError):
    """Raised only when the caller asked for ``raise_on_error=True``; carries the result."""

    def __init__(self, message: str, result: object | None = None) -> None:
        super().__init__(message)
        self.result = result


def closest(name: str, valid: "Iterable[str]", noun: str = "keys") -> str:
    """``did you mean 'timeout'?``, or the valid names (``valid keys are ...``) when none is close:
    the tail of every "unknown key / option / metric" message."""
    import difflib

    names = sorted(valid)
    match = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if match:
        return f"did you mean {match[0]!r}?"
    return f"valid {noun} are {', '.join(names)}"
