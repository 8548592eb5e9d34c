"""The CLI's two consoles and exit codes (the only place, with the commands, that prints), and
jaxrun's one style of usage error: ``jaxrun: error: <message>`` on stderr, exit 2 (click's own
errors too: an unknown flag or command, a missing argument, a bad value, with a second line
saying where the usage is)."""

from __future__ import annotations

import re
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


def usage_message(exc: click.UsageError) -> str:
    """Click's message in jaxrun's words: "No such option '--bogus'. (Did you mean '--jobs'?)"
    -> "no such option '--bogus' (did you mean '--jobs'?)"."""
    message = " ".join(exc.format_message().split())
    message = re.sub(r"\.\s*\((Did|did) you mean", " (did you mean", message).rstrip(".")
    if message[:1].isupper() and not message[1:2].isupper():
        message = message[0].lower() + message[1:]
    return message


def _close(name: str, valid: list[str]) -> list[str]:
    """The names of ``valid`` that ``name`` may be a typo of, best first. Compared without their
    leading dashes: every long flag shares ``--``, which made ``--bogus`` "close" to ``--jobs``."""
    import difflib

    bare = {v.lstrip("-"): v for v in valid}
    return [bare[m] for m in difflib.get_close_matches(name.lstrip("-"), list(bare), n=3, cutoff=0.6)]


def _with_suggestions(exc: click.UsageError) -> click.UsageError:
    """Click's error about an unknown flag or command, with jaxrun's suggestions: the flags or
    commands of the command that refused it whose names are close to the one given (none when
    nothing is close), said one way for both."""
    ctx = exc.ctx
    if ctx is None:
        return exc
    if isinstance(exc, click.NoSuchOption):
        name = exc.option_name
        flags = [o for p in ctx.command.get_params(ctx) for o in (*p.opts, *p.secondary_opts)]
        close, what = _close(name, [f for f in flags if f.startswith("-") and f != name]), "option"
    elif isinstance(ctx.command, click.Group) and re.match(r"No such command '.+'\.", exc.message):
        name = re.match(r"No such command '(.+)'\.", exc.message).group(1)  # type: ignore[union-attr]
        close, what = _close(name, ctx.command.list_commands(ctx)), "command"
    else:
        return exc
    exc.message = f"No such {what} {name!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")
    exc.possibilities = None  # type: ignore[attr-defined]  # click's own, from names with their dashes
    return exc


def show_usage_error(exc: click.UsageError) -> int:
    """Print a click usage error as jaxrun's (two lines: what was wrong, where the help is);
    return its exit status (2)."""
    exc = _with_suggestions(exc)
    command = exc.ctx.command_path if exc.ctx is not None else "jaxrun"
    err.print(f"jaxrun: error: {usage_message(exc)}", markup=False, soft_wrap=True)
    err.print(f"try '{command} --help'", markup=False, soft_wrap=True)
    return EXIT_USAGE


def pair_progress(quiet: bool, command: str = "ab"):  # type: ignore[no-untyped-def]
    """A line on stderr for each run of a pair (``[ab] a.py pair 3 NEW: 1.234 s``)."""
    def on_run(key: str, side: Any, pair: int, warmup: bool, result: Any) -> None:
        if quiet:
            return
        which = "warm-up" if warmup else f"pair {pair + 1}"
        figure = f"{result.execution_time:.3f} s" if result.success and result.execution_time is not None else (
            f"failed ({result.error_class})")
        err.print(f"[{command}] {key} {which} {side.label}: {figure}", markup=False, soft_wrap=True)

    return on_run
