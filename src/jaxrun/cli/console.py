"""The CLI's two consoles and exit codes (the only place, with the commands, that prints)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# Every command's: -h as well as --help, and help text up to 120 columns wide where the terminal is.
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 120}

# A path or message holding non-UTF-8 bytes is printed with \xNN escapes, never a crash.
for _stream in (sys.stdout, sys.stderr):
    if hasattr(_stream, "reconfigure"):
        _stream.reconfigure(errors="backslashreplace")


class _LazyConsole:
    """A rich Console made on first use: importing rich costs ~25 ms, which `jaxrun --help` and
    a fast `jaxrun run` start-up do not pay until something is printed."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def console(self) -> "Console":
        """The rich Console itself (for rich objects that take one, like Live)."""
        return self._get()

    def _get(self) -> "Console":
        if self._console is None:
            from rich.console import Console

            stream = sys.stderr if self._stderr else sys.stdout
            # Piped output (CI logs, files) gets a wide table instead of rich's 80-column default.
            self._console = Console(stderr=self._stderr, highlight=False, width=None if stream.isatty() else 160)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)


out: Any = _LazyConsole(stderr=False)
err: Any = _LazyConsole(stderr=True)


def fail_usage(message: str) -> click.exceptions.Exit:
    """Print one line on stderr and return the exit (status 2) to raise."""
    err.print(f"jaxrun: error: {message}", markup=False, soft_wrap=True)
    return click.exceptions.Exit(EXIT_USAGE)
