"""The ``jaxrun`` command (click + rich). Only the CLI prints and chooses exit codes.

Exit codes: 0 all scripts succeeded, 1 a script failed, 2 bad usage or input, 130 interrupted.
Each command lives in its own module, imported when the command is asked for (``jaxrun run``
imports none of the others), and imports what it needs when it runs, so ``jaxrun --help`` stays
fast; `jaxrun run`'s flags are made from the options' declarations (interfaces/cli/flags.py).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from jaxrun.interfaces.cli.console import (
    CONTEXT_SETTINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    err,
    fail_usage,
    out,
    show_usage_error,
)

if TYPE_CHECKING:
    from jaxrun.run.batch_pool import BatchPool

__all__ = ["app", "main", "out", "err", "fail_usage"]


# Each command: the module of jaxrun.interfaces.cli that holds it, and its name there (a function that makes
# it, for `run`, whose flags come from the options).
COMMANDS = {
    "ab": ("ab_command", "ab"), "bisect": ("ab_command", "bisect"), "cache": ("cache_command", "app"), "check": ("info", "check"),
    "compare": ("analysis", "compare"), "config": ("config_command", "config"), "devices": ("info", "devices"),
    "history": ("analysis", "history"), "mcp": ("info", "mcp"), "report": ("analysis", "report"),
    "run": ("run_command", "command"), "schema": ("info", "schema"),
}


class JaxrunGroup(click.Group):
    """The `jaxrun` group: its commands are imported when asked for (:data:`COMMANDS`); click's
    own errors (unknown flag or command, missing argument, bad value) are shown in jaxrun's one
    style (console.show_usage_error), not click's usage block and ``Error: ...``; exit 2 as before."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import importlib

            module, name = COMMANDS[cmd_name]
            made = getattr(importlib.import_module(f".{module}", __name__), name)
            self.add_command(made() if cmd_name == "run" else made, cmd_name)
        return self.commands.get(cmd_name)

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,  # type: ignore[override]
             standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            # Not standalone: click raises its errors here instead of printing them its own way;
            # an Exit (raised by every command) comes back as its status.
            value = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            status = value if isinstance(value, int) else EXIT_OK
        except click.exceptions.NoArgsIsHelpError as exc:  # `jaxrun` alone: the help, as before
            exc.show()
            status = exc.exit_code
        except click.UsageError as exc:
            status = show_usage_error(exc)
        except click.ClickException as exc:
            err.print(f"jaxrun: error: {exc.format_message()}", markup=False, soft_wrap=True)
            status = exc.exit_code
        except click.Abort:
            err.print("jaxrun: interrupted", markup=False)
            status = EXIT_INTERRUPTED
        if standalone_mode:
            sys.exit(status)
        return status


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from jaxrun.core.version import describe

    out.print(f"jaxrun {describe()}", markup=False, highlight=False, soft_wrap=True)
    ctx.exit(EXIT_OK)


app = JaxrunGroup(
    name="jaxrun",
    help="Run a folder of JAX scripts on the best device and record what happened.",
    no_args_is_help=True,
    context_settings=CONTEXT_SETTINGS,
    params=[click.Option(["--version", "-V"], is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
                         help="Print jaxrun's version and exit (the installed distribution's; code that is not installed says where it is).")],
)


def main(argv: list[str] | None = None, pool: "BatchPool | None" = None) -> int:
    """Console entry point; returns the exit code instead of calling sys.exit when embedded.

    ``jaxrun run PATH -- ARGS``: everything after the first ``--`` is the scripts' own arguments,
    set aside here because click would take them for more paths. ``pool``: the one
    jaxrun.interfaces.entry made (with a spare process already starting) for `jaxrun run`."""
    args = list(sys.argv[1:] if argv is None else argv)
    script_args = None
    if args and args[0] in ("run", "config") and "--" in args:
        at = args.index("--")
        args, script_args = args[:at], args[at + 1:]
    try:
        app.main(args=args, prog_name="jaxrun", standalone_mode=True,
                 obj={"script_args": script_args, "pool": pool})
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    finally:
        if pool is not None:
            pool.close()  # a spare that jaxrun.interfaces.entry started and no batch used
    return EXIT_OK
