"""The flags of `jaxrun run` (and of compare, history, ab and bisect), made from the options' own
declarations (jaxrun/config/option_spec.py): each field with a
:class:`~jaxrun.config.option_spec.Flag` becomes one click parameter (two with an ``off`` switch),
with the field's help and default. :func:`given_options` turns what the command line
gave back into option values, each with the flag that gave it; flags left out give nothing, so a
config file or ``JAXRUN_*`` value under them is not hidden by a default."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

if TYPE_CHECKING:
    from jaxrun.config.option_spec import Flag, OptionSet



class Only(typing.NamedTuple):
    """Some options of a model, for a command that takes only those (`jaxrun ab`'s --timeout)."""

    model: "type[OptionSet]"
    names: tuple[str, ...]


Models = tuple["type[OptionSet] | Only", ...]

# The switch that turns an option off wins over the flag that sets it (--no-history --history X),
# unless its Flag says the two exclude each other (--duet --alternate: one line, exit 2).
_OFF = "__off"


def run_models() -> Models:
    """`jaxrun run`'s options: the batch's, then each run's."""
    from jaxrun.config.options import BatchOptions, RunOptions

    return BatchOptions, RunOptions


def verdict_models() -> Models:
    """The options of a command that judges (compare, history, ab, bisect)."""
    from jaxrun.config.options import VerdictOptions

    return (VerdictOptions,)


# The files a comparison is also written to (`jaxrun compare`, `jaxrun ab`): `jaxrun run`'s own
# export options, their flags made from BatchOptions' declarations as run's are, each with what it
# writes of a comparison.
COMPARISON_EXPORTS = {
    "markdown": "Also write the comparison as Markdown: the table, each program under its heading, what is on one "
                "side only.",
    "export_json": "Also write the comparison with both sides' raw samples as JSON.",
    "export_csv": "Also write one CSV row per script and phase.",
}


def history_models() -> Models:
    """The options of `jaxrun history`: how it judges, and how `--changes --confirm` re-runs a
    change point (config/ab_options.py's ConfirmOptions; of each run, its time limit)."""
    from jaxrun.config.ab_options import ConfirmOptions
    from jaxrun.config.options import RunOptions, VerdictOptions

    return (VerdictOptions, Only(ConfirmOptions, ("confirm", "pairs", "bisect", "results_dir")),
            Only(RunOptions, ("timeout",)))


def compared_models() -> Models:
    """The options of `jaxrun compare`: how it judges, and the files it also writes."""
    from jaxrun.config.options import BatchOptions, VerdictOptions

    return VerdictOptions, Only(BatchOptions, tuple(COMPARISON_EXPORTS))


def paired_models() -> Models:
    """What `jaxrun ab` and `jaxrun bisect` share: how they judge, and of each run, its time limit."""
    from jaxrun.config.options import RunOptions, VerdictOptions

    return VerdictOptions, Only(RunOptions, ("timeout",))


def ab_models() -> Models:
    """The options of `jaxrun ab`: the shared ones, the files it also writes (as `jaxrun compare`),
    then its own (config/ab_options.py)."""
    from jaxrun.config.ab_options import ABOptions
    from jaxrun.config.options import BatchOptions

    return (*paired_models(), Only(BatchOptions, tuple(COMPARISON_EXPORTS)), ABOptions)


def bisect_models() -> Models:
    """The options of `jaxrun bisect`: the shared ones, then its own (config/ab_options.py)."""
    from jaxrun.config.ab_options import BisectOptions

    return (*paired_models(), BisectOptions)


def judged_by(module: str, exports: bool = False, own: dict[str, str] | None = None) -> Callable[[], dict[str, str]]:
    """The help of a judging command's options that depends on how it judges: ``--alpha`` names
    the test of ``module`` (``stats``: two samples, ``paired``: pairs), as that module names it;
    ``exports``: the command writes a comparison to the files of :data:`COMPARISON_EXPORTS`;
    ``own``: the command's help of an option it takes from another command (`jaxrun history`'s
    ``--timeout``, of each run ``--confirm`` makes)."""
    def helps() -> dict[str, str]:
        import importlib

        test = importlib.import_module(f"jaxrun.judge.{module}").TEST_NAME
        return {"alpha": f"Significance level of the {test}: a change counts only when its p-value is below it.",
                **(COMPARISON_EXPORTS if exports else {}), **(own or {})}

    helps.module = module  # type: ignore[attr-defined]  # what tests/interfaces/test_help.py checks the help against
    return helps


class OptionsCommand(click.Command):
    """A command whose option flags are made from option models (``models``, a function: the
    models are imported only when the command is used, so `jaxrun --help` does not import
    them). Its own arguments come first, its own options after the generated ones."""

    def __init__(self, *args: Any, models: Callable[[], Models], helps: Callable[[], dict[str, str]] | None = None,
                 **kwargs: Any) -> None:
        self._models = models
        self.helps = helps  # option -> this command's own help for it, where the declaration's is not enough
        self._made: list[click.Parameter] | None = None
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def params(self) -> list[click.Parameter]:
        if self._made is None:
            arguments = [p for p in self._own if isinstance(p, click.Argument)]
            options = [p for p in self._own if not isinstance(p, click.Argument)]
            self._made = [*arguments, *option_params(self._models(), self.helps() if self.helps else None), *options]
            from jaxrun.core.startup_trace import mark

            mark("the options imported, the flags made")
        return self._made

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._own, self._made = list(value), None


def _fields(models: Models) -> Iterator[tuple[str, Any, "Flag"]]:
    """(name, field, flag) of every option of ``models`` on the command line, the first model's
    first where two declare one name (``device``)."""
    from jaxrun.config.option_spec import flag_of

    seen: set[str] = set()
    for entry in models:
        model, only = (entry.model, entry.names) if isinstance(entry, Only) else (entry, None)
        for name, field in model.fields.items():
            flag = flag_of(field)
            if flag is not None and name not in seen and (only is None or name in only):
                seen.add(name)
                yield name, field, flag


def _value_type(annotation: Any) -> tuple[Any, bool]:
    """The click type of one value, and whether the flag may be repeated (lists, mappings)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Union and len(args) == 1:
        return _value_type(args[0])
    if origin in (tuple, list, dict):
        return click.STRING, True
    return {int: click.INT, float: click.FLOAT, Path: click.Path(path_type=Path)}.get(annotation, click.STRING), False


# The word a value is shown with when its option's Flag names none (never click's TEXT, nor a
# type's repr: `--names <list[str]>`): by the value's type; a mapping is KEY=VALUE.
_WORDS = {int: "N", float: "NUMBER", Path: "PATH", str: "TEXT", bool: "BOOL"}


def _value_word(annotation: Any) -> str:
    """The metavar of one value of ``annotation`` (the element's, for a list or tuple)."""
    if _is_mapping(annotation):
        return "KEY=VALUE"
    args = [a for a in typing.get_args(annotation) if a is not type(None) and a is not Ellipsis]
    if typing.get_origin(annotation) is not None and args:
        return _value_word(args[0])
    return _WORDS.get(annotation, "VALUE")


def _backends() -> tuple[str, ...]:
    from jaxrun.executors.backends import BUILT_IN  # the built-in ones: an installed one is accepted too

    return tuple(b.name for b in BUILT_IN.values() if b.chosen)


# Options whose values an upper layer declares (by the Flag's metavar): shown as choices.
_CHOICES_DECLARED_ABOVE = {"BACKEND": _backends}


def metavar_of(annotation: Any, flag: "Flag") -> str:
    """How the help shows the value of an option's flag: its choices, the Flag's metavar, or a
    word for its type (:func:`_value_word`)."""
    if flag.metavar in _CHOICES_DECLARED_ABOVE:
        return f"[{'|'.join(_CHOICES_DECLARED_ABOVE[flag.metavar]())}]"
    if flag.choices:
        return f"[{'|'.join(flag.choices)}]"
    if flag.metavar:
        return flag.metavar
    return "TEXT" if flag.text else _value_word(annotation)


def _is_mapping(annotation: Any) -> bool:
    return any(typing.get_origin(a) is dict for a in (annotation, *typing.get_args(annotation)))


def _help(text: str, default: str | None) -> str:
    return f"{text}  [default: {default}]" if default else text


def _range_type(annotation: Any, field: Any) -> click.ParamType:
    """The click type of a number with a bound (``option(..., at_least=1)``): click's range type,
    so that the help shows the range as click shows one (``INTEGER RANGE``, ``[x>=1]``), whose
    conversion checks only the number: the bound is the declaration's to check, in one place."""
    kind = _one(annotation)
    base = click.IntRange if kind is int else click.FloatRange

    class Bounded(base):  # type: ignore[misc, valid-type]
        def convert(self, value: Any, param: Any, ctx: Any) -> Any:
            return super(click.types._NumberRangeBase, self).convert(value, param, ctx)

    return Bounded(min=field.low, min_open=field.low_open)


def _one(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if typing.get_origin(annotation) is typing.Union and len(args) == 1 else annotation


def option_params(models: Models, helps: dict[str, str] | None = None) -> list[click.Parameter]:
    """The click parameters of every option of ``models`` with a flag, in declaration order
    (``helps``: a command's own help for some of them)."""
    from jaxrun.config.option_spec import shown_default

    params: list[click.Parameter] = []
    for name, field, flag in _fields(models):
        names = list(flag.names or ("--" + name.replace("_", "-"),))
        text = (helps or {}).get(name) or flag.help or field.description or ""
        if field.annotation is bool and flag.sets is None and not flag.off:
            if field.default is True:  # on by default: --name / --no-name
                names = [f"{names[0]}/--no-{names[0].removeprefix('--')}", *names[1:]]
                shown = field.show_default if field.show_default is not None else name.replace("_", "-")
                params.append(click.Option([*names, name], default=None, help=_help(text, shown)))
            else:
                params.append(click.Option([*names, name], is_flag=True, default=None, help=text))
            continue
        if flag.sets is not None:  # a switch setting one value (--warm, --no-fallback)
            params.append(click.Option([*names, name], is_flag=True, flag_value=flag.sets, default=None, help=text))
            if flag.off:  # and one turning it off (--duet, --alternate)
                params.append(click.Option([flag.off, name + _OFF], is_flag=True, default=None, help=flag.off_help))
            continue
        if field.low is not None:  # a bounded number: its default and range shown as click shows them
            params.append(click.Option([*names, name], type=_range_type(field.annotation, field), default=field.default,
                                       show_default=True, metavar=flag.metavar, help=text))
            continue
        kind, repeatable = _value_type(field.annotation)
        if flag.text:
            kind, repeatable = click.STRING, False
        elif field.words:
            kind = click.STRING  # a word ("false") reaches the option's check as typed, not as a path
        # The choices are shown, and checked by the option's validator: one line that lists them.
        # A required one has no default at all: click says "missing option" only for a value not given.
        default = {"required": True} if field.is_required() else {"default": None}
        params.append(click.Option([*names, name], type=kind, multiple=repeatable, **default,
                                   metavar=metavar_of(field.annotation, flag), help=_help(text, shown_default(field))))
        if flag.off:
            params.append(click.Option([flag.off, name + _OFF], is_flag=True, default=None, help=flag.off_help))
    return params


def given_options(ctx: click.Context, models: Models) -> tuple[dict[str, Any], dict[str, str]]:
    """The options of ``models`` the command line gave (by option name), and the flag that gave each."""
    def given(param: str) -> bool:
        source = ctx.get_parameter_source(param)
        return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")

    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name, field, flag in _fields(models):
        spelled = (flag.names or ("--" + name.replace("_", "-"),))[0]
        if flag.exclusive and given(name + _OFF) and ctx.params.get(name + _OFF) and given(name):
            from jaxrun.errors import UsageError

            raise UsageError(f"{spelled} and {flag.off} exclude each other: {flag.exclusive}")
        if given(name + _OFF) and ctx.params.get(name + _OFF):
            values[name], origins[name] = False, flag.off  # type: ignore[assignment]
            continue
        value = ctx.params.get(name)
        if not given(name) or value is None or value == ():
            continue
        if _is_mapping(field.annotation):  # KEY=VALUE, repeated
            from jaxrun.config.config_keys import pairs

            value = pairs(value)
        values[name] = value
        origins[name] = f"--no-{spelled[2:]}" if value is False and flag.sets is None else spelled
    return values, origins
