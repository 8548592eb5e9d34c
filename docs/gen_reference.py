"""The reference pages of the docs site, made from the code (never written by hand):

* ``reference/cli.md``: every command and every flag, from the click commands `jaxrun` runs (the
  flags of `jaxrun run` are made from the option declarations, jaxrun/config/options.py), laid
  out here rather than by click's help formatter, so that the page is the same under every click;
* ``reference/configuration.md``: every key a config file, a ``# jaxrun:`` comment or a
  ``JAXRUN_*`` variable may set, its type, default and meaning (jaxrun/settings/keys.py);
* ``reference/results.md``: every field of a script's result, with its unit, from the result
  models (jaxrun/models/);
* ``reference/errors.md``: every failure class, its hint and how jaxrun recovers from it
  (jaxrun/failures.py).

``python docs/gen_reference.py`` writes them under docs/reference/; tests/project/test_docs.py fails when
a committed page differs from what this makes of the code.
"""

from __future__ import annotations

import html
import inspect
import sys
import types
import typing
from pathlib import Path
from typing import Any

import click

HERE = Path(__file__).resolve().parent
GENERATED = "<!-- made by docs/gen_reference.py from the code: do not edit by hand -->"


def _cell(text: object) -> str:
    """Text for one Markdown table cell (pipes escaped, on one line)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: str) -> str:
    """``text`` as inline code in a table cell: as HTML, since a pipe escaped for the table inside
    backticks would be shown with its backslash."""
    return "<code>" + html.escape(" ".join(text.split()), quote=False).replace("|", "&#124;") + "</code>"


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args) + (" or null" if type(None) in typing.get_args(annotation) else "")
    if origin in (tuple, list):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "table of text"
    if origin is typing.Literal:
        return " / ".join(repr(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


# The CLI page is laid out here, from jaxrun's declarations and the plain attributes of click's
# parameter objects (opts, secondary_opts, metavar, type, help, default, required), never by click's
# help formatter (get_help_record, collect_usage_pieces, format_*): its layout changes between click
# releases (8.5 lists arguments as rows), and a generated page must not change with them.
_HELP_OPTION = "Show this message and exit."


def _paragraphs(text: str | None) -> list[str]:
    """A command's help, one line a paragraph, up to click's ``\\f`` (the rest is for code readers)."""
    text = inspect.cleandoc(text or "").split("\f")[0]
    return [" ".join(w for w in block.split() if w != "\b") for block in text.split("\n\n") if block.strip()]


def _argument_word(argument: click.Argument) -> str:
    """``NAME``, ``[NAME]`` when it may be left out, ``NAME...`` when it takes many."""
    if argument.metavar:
        return argument.metavar
    word = (argument.name or "").upper() + ("..." if argument.nargs != 1 else "")
    return word if argument.required else f"[{word}]"


def _usage(command: click.Command) -> str:
    words = [command.options_metavar or ""]
    words += [_argument_word(p) for p in command.params if isinstance(p, click.Argument) and not getattr(p, "hidden", False)]
    if isinstance(command, click.Group):
        words.append(command.subcommand_metavar or "COMMAND [ARGS]...")
    return " ".join(w for w in words if w)


def _value_word(option: click.Option) -> str:
    """The word an option's value is shown with: its metavar, its choices, or its type's name."""
    if option.metavar:
        return option.metavar
    if isinstance(option.type, click.Choice):
        return "[" + "|".join(str(c) for c in option.type.choices) + "]"
    return option.type.name.upper()


def _option_row(option: click.Option) -> tuple[str, str]:
    """(the flag as typed, what it does) of one option."""
    def spelled(opts: list[str]) -> str:  # short before long: -d, --device
        return ", ".join(sorted(opts, key=lambda o: len(o) - len(o.lstrip("-/+"))))

    flags = spelled(option.opts)
    if option.secondary_opts:
        flags += " / " + spelled(option.secondary_opts)
    if not option.is_flag:
        flags += " " + _value_word(option)
    extra = []
    if isinstance(option.show_default, str):
        extra.append(f"default: {option.show_default}")
    elif option.show_default and not callable(option.default) and isinstance(option.default, (str, int, float, Path)):
        extra.append(f"default: {option.default}")
    if isinstance(option.type, (click.IntRange, click.FloatRange)):
        extra += _range(option.type)
    if option.required:
        extra.append("required")
    return flags, " ".join([option.help or "", f"[{'; '.join(extra)}]" if extra else ""])


def _range(kind: click.IntRange | click.FloatRange) -> list[str]:
    """A numeric range as ``x>=1`` or ``0<x<=1``, from the range's own bounds."""
    low = "" if kind.min is None else f"{kind.min}{'<' if kind.min_open else '<='}"
    high = "" if kind.max is None else f"{'<' if kind.max_open else '<='}{kind.max}"
    if not low and not high:
        return []
    if low and not high:  # x>=1 reads better than 1<=x
        return [f"x{'>' if kind.min_open else '>='}{kind.min}"]
    return [f"{low}x{high}"]


def _help_option(command: click.Command, group: click.Group) -> list[str]:
    """The spellings of a command's help flag: its own setting, else its group's (click's rule)."""
    if not command.add_help_option:
        return []
    return list(command.context_settings.get("help_option_names")
                or group.context_settings.get("help_option_names") or ["--help"])


def cli_page() -> str:
    from jaxrun.interfaces.cli import COMMANDS, app

    ctx = click.Context(app, info_name="jaxrun")
    lines = [GENERATED, "", "# Command line", "", f"`jaxrun`: {_paragraphs(app.help)[0]}", ""]
    for name in sorted(COMMANDS):
        command = app.get_command(ctx, name)
        assert command is not None, name
        lines += [f"## jaxrun {name}", "", f"`jaxrun {name} {_usage(command)}`", ""]
        lines += [line for paragraph in _paragraphs(command.help) for line in (_cell(paragraph), "")]
        for sub_name in sorted(getattr(command, "commands", {})):
            nested = command.commands[sub_name]  # type: ignore[attr-defined]
            lines.append(f"- `jaxrun {name} {sub_name}`: {_cell(' '.join(_paragraphs(nested.help)))}")
        if getattr(command, "commands", None):
            lines.append("")
        rows = [_option_row(p) for p in command.params if isinstance(p, click.Option) and not p.hidden]
        helps = _help_option(command, app)
        if helps:
            rows.append((", ".join(helps), _HELP_OPTION))
        if rows:
            lines += ["| flag | what it does |", "|---|---|"]
            lines += [f"| {_code(flags)} | {_cell(text)} |" for flags, text in rows]
            lines.append("")
    return "\n".join(lines)


def configuration_page() -> str:
    from jaxrun.config.config_keys import DISPLAY_KEYS, SCRIPT_KEYS, TOP_KEYS, env_name
    from jaxrun.config.option_spec import shown_default
    from jaxrun.config.options import BatchOptions, RunOptions
    from jaxrun.config.slurm_options import PREFIX, TABLE

    lines = [GENERATED, "", "# Configuration keys", "",
             "Every key below may be set in `[tool.jaxrun]` of a `pyproject.toml` or in a `jaxrun.toml` "
             "(relative paths are relative to that file), and as a `JAXRUN_<KEY>` variable; the keys "
             "marked *per script* also in a `[tool.jaxrun.scripts.\"GLOB\"]` table or a script's own "
             "`# jaxrun: key=value` comment. A flag of `jaxrun run` wins over all of them.", "",
             f"The `{PREFIX}*` keys may also be written without their prefix in a `[{TABLE}]` table "
             f"(`[tool.jaxrun.{TABLE}]` in a `pyproject.toml`): `partition = \"gpu\"` there is "
             f"`{PREFIX}partition = \"gpu\"`.", "",
             "| key | variable | type | default | per script | what it sets |", "|---|---|---|---|---|---|"]
    for key in TOP_KEYS:
        if key in DISPLAY_KEYS:
            kind, default, text = "bool", "false", DISPLAY_KEYS[key]
        else:
            field = RunOptions.fields[key] if key in RunOptions.fields else BatchOptions.fields[key]
            default = str(field.default).lower() if isinstance(field.default, bool) else shown_default(field) or ""
            kind, text = _type_name(field.annotation), field.description
        lines.append(f"| `{key}` | `{env_name(key)}` | {_cell(kind)} | {_cell(default)} | "
                     f"{'yes' if key in SCRIPT_KEYS else ''} | {_cell(text)} |")
    return "\n".join(lines) + "\n"


def results_page() -> str:
    from jaxrun.results.models import ScriptResult

    lines = [GENERATED, "", "# Result fields", "",
             "Each script's result (`script_results/<name>_result.json`, and each entry of "
             "`jax_execution_results.json`'s `script_results`). A figure jaxrun could not measure is "
             "`null`, never 0; its reason, where there is one, is in the field beside it.", "",
             "| field | type | what it holds |", "|---|---|---|"]
    for name, field in ScriptResult.model_fields.items():
        if field.exclude:  # held while the batch runs, never in the file
            continue
        lines.append(f"| `{name}` | {_cell(_type_name(field.annotation))} | {_cell(field.description or '')} |")
    return "\n".join(lines) + "\n"


def errors_page() -> str:
    from jaxrun.core.failures import TABLE

    lines = [GENERATED, "", "# Error classes", "",
             "A failed script's `error_class`, the hint jaxrun prints with it, where a retry may help, "
             "and what jaxrun tries then, in order.", "",
             "| error class | hint | transient on | recovery |", "|---|---|---|---|"]
    for name, row in TABLE.items():
        lines.append(f"| `{name}` | {_cell(row.hint)} | {', '.join(row.transient_on) or 'never'} | "
                     f"{', '.join(row.recovery) or ''} |")
    lines += ["", "Where jaxrun knows the cause within a class, the hint is the cause's:", "",
              "| error class | cause | hint |", "|---|---|---|"]
    lines += [f"| `{row.name}` | {cause.replace('_', ' ')} | {_cell(hint)} |"
              for row in TABLE.values() for cause, hint in row.causes]
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Each page's path under docs/ and its text."""
    return {"reference/cli.md": cli_page(), "reference/configuration.md": configuration_page(),
            "reference/results.md": results_page(), "reference/errors.md": errors_page()}


def main() -> None:
    for rel, text in pages().items():
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
