"""What `jaxrun` says about its own usage: every command's help shows readable value names, and
every usage error, click's own included, is one style (`jaxrun: error: ...`, exit 2). Real
`python -m jaxrun` subprocesses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import click
import pytest
from helpers import jaxrun

# What a value name must never look like: a set ({paths}), a type (<list[str]>, list[str]).
UNREADABLE = re.compile(r"[{}<>]|list\[|dict\[|tuple\[")


def _commands(path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and sub-command, from the groups' own help."""
    text = jaxrun(*path, "--help").stdout
    found = [path]
    if "Commands:" in text:
        for line in text.split("Commands:", 1)[1].splitlines():
            if re.match(r"^  \S", line):
                found += _commands((*path, line.split()[0]))
    return found


def _usage_and_value_names(help_text: str) -> list[str]:
    """The usage line and each option's names with its value name (the left column of Options)."""
    lines = [line for line in help_text.splitlines() if line.startswith("Usage:")]
    if "Options:" in help_text:
        for line in help_text.split("Options:", 1)[1].splitlines():
            if re.match(r"^  -", line):
                lines.append(re.split(r"\s{2,}", line.strip())[0])
    return lines


@pytest.mark.slow
def test_every_commands_help_names_its_values_in_words() -> None:
    commands = _commands()
    assert {("run",), ("compare",), ("history",), ("report",), ("config",), ("cache", "info")} <= set(commands)
    for command in commands:
        proc = jaxrun(*command, "--help")
        assert proc.returncode == 0, (command, proc.stderr)
        shown = _usage_and_value_names(proc.stdout)
        assert shown and shown[0].startswith("Usage: jaxrun"), (command, proc.stdout)
        bad = [line for line in shown if UNREADABLE.search(line)]
        assert not bad, (command, bad)
    # The usage error of a command run without its arguments names them the same way.
    missing = jaxrun("run")
    assert "'PATHS...'" in missing.stderr and not UNREADABLE.search(missing.stderr), missing.stderr


def test_flags_made_from_declarations_without_a_metavar_get_a_word_for_their_type() -> None:
    """The generator (interfaces/cli/flags.py) names every value: a list by its items' type, a mapping KEY=VALUE."""
    from jaxrun.config.option_spec import Flag, OptionSet, option
    from jaxrun.interfaces.cli.flags import option_params

    class Declared(OptionSet):
        names: Optional[tuple[str, ...]] = option(None, "Names (repeatable).")
        counts: list[int] = option([], "Counts (repeatable).")
        labels: Optional[dict[str, str]] = option(None, "Labels (repeatable).")
        where: Optional[Path] = option(None, "A folder.")
        ratio: float = option(0.5, "A ratio.")
        size: Optional[str] = option(None, "A size.", Flag(text=True))
        mode: str = option("a", "A mode.", Flag(choices=("a", "b")))

    params = {p.name: p for p in option_params((Declared,)) if isinstance(p, click.Option)}
    metavars = {name: p.metavar for name, p in params.items()}
    assert metavars == {"names": "TEXT", "counts": "N", "labels": "KEY=VALUE", "where": "PATH",
                        "ratio": "NUMBER", "size": "TEXT", "mode": "[a|b]"}
    assert params["labels"].multiple and params["counts"].multiple


@pytest.mark.parametrize(("args", "message", "help_of"), [
    (("run", "--bogus", "x"), "no such option '--bogus'", "jaxrun run"),  # an unknown flag
    (("run",), "missing argument 'PATHS...'", "jaxrun run"),  # a missing argument
    (("compare", "only-base"), "missing argument 'NEW'", "jaxrun compare"),
    (("run", ".", "--jobs", "many"), "invalid value for '--jobs' / '-j': 'many' is not a valid integer",
     "jaxrun run"),  # a bad value
    (("history", "--limit", "x"), "invalid value for '--limit': 'x' is not a valid integer", "jaxrun history"),
    (("nope",), "no such command 'nope'", "jaxrun"),  # an unknown command
    (("cache", "nope"), "no such command 'nope'", "jaxrun cache"),
    (("--output-dir",), "no such option '--output-dir'", "jaxrun"),
])
def test_clicks_usage_errors_are_jaxruns_one_style(args: tuple[str, ...], message: str, help_of: str) -> None:
    proc = jaxrun(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"jaxrun: error: {message}"), lines
    assert lines[1:] == [f"try '{help_of} --help'"], lines
    assert "Usage:" not in proc.stderr and "Error:" not in proc.stderr


def test_jaxruns_own_usage_errors_share_the_style(tmp_path: Path) -> None:
    for args, message in ((("run", tmp_path / "missing"), "no such file or folder"),
                          (("schema", "nope"), "unknown schema 'nope'"),
                          (("run", tmp_path, "--device", "quantum"), "quantum")):
        proc = jaxrun(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("jaxrun: error: "), proc.stderr
        assert message in proc.stderr and "Usage:" not in proc.stderr


def test_the_group_alone_still_shows_its_help() -> None:
    proc = jaxrun()
    assert proc.returncode == 2 and proc.stderr.startswith("Usage: jaxrun [OPTIONS] COMMAND"), proc.stderr


def _every_command(group: click.Command | None = None, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    from jaxrun.interfaces.cli import app

    group = app if group is None else group
    found = [(path, group)]
    if isinstance(group, click.Group):  # its commands as `jaxrun` finds them (imported when asked for)
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            found += _every_command(group.get_command(ctx, name), (*path, name))
    return found


def _long_flags(path: tuple[str, ...], command: click.Command) -> list[str]:
    if path == ("config",):  # config takes run's flags
        from jaxrun.interfaces.cli import app

        command = app.get_command(None, "run")
    ctx = click.Context(command, info_name=path[-1] if path else "jaxrun")
    return [o for p in command.get_params(ctx) for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]


@pytest.mark.slow
def test_an_unknown_flag_names_the_command_and_only_close_flags_everywhere() -> None:
    """Every command and sub-command: an unrelated flag gets no suggestion (it once got '--jobs,
    --verbose': click compares the names with their dashes), a typo gets its flag, and the help
    named is the command's own (`jaxrun config` once said `jaxrun run --help`)."""
    commands = _every_command()
    assert {("run",), ("config",), ("ab",), ("bisect",), ("compare",), ("history",), ("report",), ("cache", "info"),
            ("cache", "clear"), ("devices",), ("mcp",)} <= {path for path, _ in commands}
    for path, command in commands:
        where = " ".join(("jaxrun", *path))
        bogus = jaxrun(*path, "--bogus")
        assert bogus.returncode == 2, (path, bogus.stderr)
        assert bogus.stderr.splitlines() == ["jaxrun: error: no such option '--bogus'", f"try '{where} --help'"], \
            (path, bogus.stderr)
        flags = [f for f in _long_flags(path, command) if len(f) >= 8 and f != "--help"]
        if not flags:
            continue
        flag = max(flags, key=len)
        typo = flag[:4] + flag[5:]  # one letter left out
        done = jaxrun(*path, typo)
        first = done.stderr.splitlines()[0]
        assert done.returncode == 2 and first.startswith(f"jaxrun: error: no such option '{typo}' (did you mean "), \
            (path, done.stderr)
        assert repr(flag) in first and done.stderr.splitlines()[1] == f"try '{where} --help'", (path, done.stderr)


def test_an_unknown_command_gets_the_close_one() -> None:
    for args, said, where in ((("runn",), "no such command 'runn' (did you mean 'run'?)", "jaxrun"),
                              (("cache", "clr"), "no such command 'clr' (did you mean 'clear'?)", "jaxrun cache"),
                              (("bogus",), "no such command 'bogus'", "jaxrun")):
        done = jaxrun(*args)
        assert done.returncode == 2 and done.stderr.splitlines() == [f"jaxrun: error: {said}", f"try '{where} --help'"], \
            done.stderr
