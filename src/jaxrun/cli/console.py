"""The CLI's two consoles and exit codes (the only place, with the commands, that prints)."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# A path or message holding non-UTF-8 bytes is printed with \xNN escapes, never a crash.
for _stream in (sys.stdout, sys.stderr):
    if hasattr(_stream, "reconfigure"):
        _stream.reconfigure(errors="backslashreplace")

# Piped output (CI logs, files) gets a wide table instead of rich's 80-column default.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


def fail_usage(message: str) -> typer.Exit:
    """Print one line on stderr and return the exit (status 2) to raise."""
    err.print(f"jaxrun: error: {message}", markup=False, soft_wrap=True)
    return typer.Exit(EXIT_USAGE)
