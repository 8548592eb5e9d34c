"""One declaration per option: its field in :mod:`jaxrun.config.options` carries the type, the default,
the help and how it is spelled on the command line. Everything else is made from it: `jaxrun
run`'s flags (interfaces/cli/flags.py), the API's keywords and their defaults (:func:`keyword_signature`),
the MCP tools' input schemas (:func:`described`), the config-file keys and ``JAXRUN_*`` variables
(config/config_keys.py) and what `jaxrun config` lists.

    timeout: Optional[float] = option(300.0, "Seconds per script before it is stopped.",
                                      Flag(metavar="SECONDS"))

:class:`OptionSet` is what a class of such fields becomes: immutable, picklable, validated field by
field (the field's own checks, declared with :func:`checks`, else its type) and then as a whole
(``_consistent``). It is plain Python on purpose: options are read and checked on the way to the
first script, where a validation library's import and model building cost more than the whole
budget (docs/ARCHITECTURE.md, "jaxrun's own speed").
"""

from __future__ import annotations

import os
import sys
import typing
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterator,
    Mapping,
    NamedTuple,
    Optional,
    TypeVar,
)

from jaxrun.core.validate import shown_value
from jaxrun.errors import UsageError

if TYPE_CHECKING:
    import inspect

O = TypeVar("O", bound="OptionSet")


class Flag(NamedTuple):
    """How an option is spelled on `jaxrun run`'s command line. The defaults fit most options:
    ``--name-with-dashes`` taking a value of the field's type, a switch for a bool that is off by
    default, ``--name/--no-name`` for one that is on."""

    names: tuple[str, ...] = ()  # default: ("--name-with-dashes",)
    metavar: Optional[str] = None
    sets: Any = None  # a switch (no value) that sets this: --warm -> entry="main", --no-fallback -> False
    off: Optional[str] = None  # a second switch that turns the option off: --no-history -> False
    off_help: Optional[str] = None
    help: Optional[str] = None  # the flag's own help where it differs from the option's
    choices: Optional[tuple[str, ...]] = None
    text: bool = False  # one value, as text that the option's validator reads ("4GB", "5%", "cpu,gpu")
    # The flag and its ``off`` switch both given: refused, with this said after "--a and --b exclude
    # each other: " (without it the off switch wins: --no-history --history X).
    exclusive: Optional[str] = None


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class OptionField:
    """One declared field: its name and type (filled in by the class that holds it), default,
    help and flag. ``declared`` is False for a field that is not an option of its own (``run``,
    the options of each script's run inside the batch's)."""

    __slots__ = ("name", "annotation", "default", "factory", "description", "flag", "show_default", "declared", "words",
                 "low", "low_open")

    def __init__(self, default: Any, description: str, flag: Optional[Flag], show_default: Optional[str],
                 factory: Optional[Callable[[], Any]] = None, declared: bool = True,
                 words: Optional[Mapping[str, Any]] = None, low: Optional[float] = None, low_open: bool = False) -> None:
        self.name = ""
        self.annotation: Any = None
        self.default, self.factory, self.description = default, factory, description
        self.flag, self.show_default, self.declared = flag, show_default, declared
        self.words: dict[str, Any] = {w.lower(): v for w, v in (words or {}).items()}
        # The least value a number may take (``low_open``: not even that one); None: no bound.
        self.low, self.low_open = low, low_open

    def range_text(self) -> Optional[str]:
        """The values the option takes, as the help shows them (``x>=1``, ``x>0``), or None."""
        if self.low is None:
            return None
        return f"x{'>' if self.low_open else '>='}{self.low}"

    def is_required(self) -> bool:
        return self.default is REQUIRED

    def meant(self, value: Any) -> Any:
        """What ``value`` stands for: the value of one of the option's words (``"false"`` for
        ``--compile-cache false``, any case, as text from any source), else ``value`` itself."""
        if self.words and isinstance(value, str):
            return self.words.get(value.strip().lower(), value)
        return value

    def is_word(self, value: Any) -> bool:
        """Whether ``value`` is text spelling one of the option's words."""
        return isinstance(value, str) and value.strip().lower() in self.words

    def __repr__(self) -> str:
        return f"OptionField({self.name!r}, default={self.default!r})"


def option(default: Any, help: str, flag: Optional[Flag] = Flag(), *, show_default: Optional[str] = None,
           words: Optional[Mapping[str, Any]] = None, at_least: Optional[float] = None,
           above: Optional[float] = None) -> Any:
    """The field of one option: its default (``...``: required) and help, and its flag
    (``flag=None``: the option is not on the command line, like ``args``, which follows ``--``).
    ``show_default``: how the help shows a default that is resolved later (a folder, a size; ``""``:
    none shown). ``words``: the words its help promises (``{"false": False}``: ``false`` turns the
    cache off), each meaning the value the API takes; they are read the same from every source (a
    flag, a config file, a ``JAXRUN_*`` variable, a script's comment, a keyword), in any case.
    ``at_least`` / ``above``: the bound of a number, checked with the option's value (one line
    naming its flag) and shown by its flag's help (``[x>=1]``)."""
    low, low_open = (above, True) if above is not None else (at_least, False)
    return OptionField(REQUIRED if default is ... else default, help, flag, show_default, words=words, low=low,
                       low_open=low_open)


class _Inherited:
    def __repr__(self) -> str:
        return "inherited()"


def inherited() -> Any:
    """``name = inherited()`` in a set that inherits option ``name``: the option stands here among
    the set's own ones (the order of its flags in a command's help), declared once, where it was."""
    return _Inherited()


def part(factory: Callable[[], Any], help: str) -> Any:
    """A field holding another set of options (made by ``factory`` when not given), not an option
    of its own: it has no flag, keyword or config key."""
    return OptionField(REQUIRED, help, None, None, factory=factory, declared=False)


def checks(*names: str) -> Callable[[Callable[[Any, str], Any]], Any]:
    """Declare ``function(value, name) -> value`` the check of fields ``names``: it receives what
    was given (a default too) and returns the value kept, or raises :class:`UsageError` naming the
    option. A field without one is checked against its type (:func:`_typed`)."""

    def declare(function: Callable[[Any, str], Any]) -> Any:
        function.__option_checks__ = names  # type: ignore[attr-defined]
        return staticmethod(function)

    return declare


class _Declarations(dict):  # type: ignore[type-arg]
    """An option set's class body: a second declaration of one option is an error at import,
    never a silent replacement of the first (Python's own class body keeps the last)."""

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, OptionField) and isinstance(self.get(key), OptionField):
            raise TypeError(f"the option {key!r} is declared twice in one option set: keep one")
        super().__setitem__(key, value)


class _OptionSetType(type):
    @classmethod
    def __prepare__(mcs, name: str, bases: tuple[type, ...], **kwargs: Any) -> _Declarations:  # type: ignore[override]
        return _Declarations()


class OptionSet(metaclass=_OptionSetType):
    """Immutable options: ``cls(**values)`` checks each given value and each default, then the
    whole (``_consistent``); ``fields`` maps each name to its :class:`OptionField`, in declaration
    order. An option is declared once: twice in one set, or again in a set that inherits it, is
    refused when the module is imported."""

    fields: typing.ClassVar[dict[str, OptionField]] = {}
    _checks: typing.ClassVar[dict[str, Callable[[Any, str], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = dict(cls.fields)
        body = [n for n, v in vars(cls).items() if isinstance(v, (OptionField, _Inherited))]
        own = {n: v for n, v in vars(cls).items() if isinstance(v, OptionField)}
        placed = [n for n in body if n not in own]
        for name in placed:
            if name not in fields:
                raise TypeError(f"{cls.__name__} places {name!r} with inherited(), but no set it inherits declares it")
            delattr(cls, name)
        if own:
            # The module's own names, as its annotations are written (text, under `from __future__
            # import annotations`): cheaper than typing.get_type_hints, which walks every base.
            names, written = vars(sys.modules[cls.__module__]), vars(cls).get("__annotations__", {})
            for name, field in own.items():
                if name in fields:
                    raise TypeError(f"the option {name!r} of {cls.__name__} is declared already by a set it "
                                    "inherits: keep one")
                hint = written[name]
                field.name, field.annotation = name, eval(hint, names) if isinstance(hint, str) else hint
                fields[name] = field
                delattr(cls, name)  # the instance's value, never the declaration, answers cls().name
        if placed:  # what is inherited and not placed first, then the set's body in its order
            fields = {n: fields[n] for n in [*(n for n in fields if n not in body), *body]}
        cls.fields = fields
        found = dict(cls._checks)
        for value in vars(cls).values():
            function = getattr(value, "__func__", None)
            for name in getattr(function, "__option_checks__", ()):
                found[name] = function  # type: ignore[assignment]
        cls._checks = found

    def __init__(self, **values: Any) -> None:
        self._fill(values)
        self._consistent()

    def _fill(self, values: Mapping[str, Any]) -> None:
        """Each field's value checked on its own (the checks between fields wait: ``_consistent``)."""
        unknown = sorted(set(values) - set(self.fields))
        if unknown:
            raise UsageError(f"unknown option {unknown[0]!r}: valid options are {', '.join(self.fields)}")
        data = {}
        for name, field in self.fields.items():
            if name in values:
                value = values[name]
            elif field.factory is not None:
                value = field.factory()
            elif field.is_required():
                raise UsageError(f"{name} is required")
            else:
                value = field.default
            data[name] = self._check_field(name, value)
        object.__setattr__(self, "__dict__", data)

    @classmethod
    def _check_field(cls, name: str, value: Any) -> Any:
        field = cls.fields[name]
        value = field.meant(value)
        if isinstance(value, str) and not value.strip() and _takes_a_path(field.annotation):
            # Path("") is the working folder: an empty setting must not put a cache or results there.
            raise UsageError(f"{name} must be a path, got {shown_value(value)}")
        check = cls._checks.get(name)
        if check is not None:
            try:
                value = check(value, name)
            except UsageError:
                raise
            except (TypeError, ValueError) as exc:  # a check's own mistake on a value of a type it did not expect
                raise UsageError(f"{name}: {exc}, got {shown_value(value)}") from None
        value = _typed(name, field.annotation, value)
        if field.low is not None and value is not None and (value < field.low or field.low_open and value == field.low):
            raise UsageError(f"invalid value for {flag_name(field) or name!r}: {value} is not in the range "
                             f"{field.range_text()}")
        return value

    @classmethod
    def word_for(cls, name: str, value: Any) -> Optional[str]:
        """The word of option ``name`` that stands for ``value`` as the option holds it (``false``
        for a history of None), or None: how a value is shown the way it can be written."""
        for word, meaning in cls.fields[name].words.items():
            try:
                if cls._check_field(name, meaning) == value:
                    return word
            except UsageError:
                continue
        return None

    def _consistent(self) -> None:
        """Checks between options, once every value is checked on its own."""

    def _replaced(self: O, changes: Mapping[str, Any], check: bool) -> O:
        """A copy with ``changes``, each checked on its own when ``check`` (the checks between
        fields are the caller's to run, once it has noted where the values came from)."""
        copy = object.__new__(type(self))
        data = {k: v for k, v in self.__dict__.items() if k != "_key"}  # the copy's own fingerprint is its own
        for name, value in changes.items():
            if name not in self.fields:
                raise UsageError(f"unknown option {name!r}: valid options are {', '.join(self.fields)}")
            data[name] = self._check_field(name, value) if check else value
        object.__setattr__(copy, "__dict__", data)
        return copy

    def evolve(self: O, **changes: Any) -> O:
        """A copy with ``changes``, each checked as it would be when made."""
        copy = self._replaced(changes, check=True)
        copy._consistent()
        return copy

    def to_json(self, exclude: Optional[set[str]] = None) -> dict[str, Any]:
        """The values as JSON holds them (paths as text, tuples as lists), in declaration order."""
        return {n: _jsonable(v) for n, v in self._declared_values() if not exclude or n not in exclude}

    def _declared_values(self) -> Iterator[tuple[str, Any]]:
        data = self.__dict__
        return ((name, data[name]) for name in self.fields if name in data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: use evolve(...) for a changed copy")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.fields)

    __hash__ = None  # type: ignore[assignment]  # values hold dicts (env)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={v!r}" for n, v in self._declared_values())
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> Any:
        return (_rebuilt, (type(self), self.__dict__))


def _rebuilt(cls: type[O], data: dict[str, Any]) -> O:
    """An unpickled copy, as it was (its values were checked when it was made)."""
    options = object.__new__(cls)
    object.__setattr__(options, "__dict__", dict(data))
    return options


def _jsonable(value: Any) -> Any:
    if isinstance(value, OptionSet):
        return value.to_json()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


_TRUE_WORDS = {"1", "on", "t", "true", "y", "yes"}
_FALSE_WORDS = {"0", "off", "f", "false", "n", "no"}


def _typed(name: str, annotation: Any, value: Any) -> Any:
    """``value`` as a value of ``annotation``: None for an Optional, a bool from a bool (or 0/1,
    yes/no...), a whole number from an int or a number or text that holds one, a number from an
    int, float or numeric text, a path from text; containers and other classes as given (their
    fields' own checks shape them). Else one line naming the option and what it takes."""
    if typing.get_origin(annotation) is typing.Union:
        if value is None:
            return None
        kind = _one_kind(annotation)
        return _typed(name, kind, value) if kind is not None else value
    if annotation is bool:
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if word in _TRUE_WORDS or word in _FALSE_WORDS:
            return word in _TRUE_WORDS
        raise UsageError(f"{name} must be true or false, got {shown_value(value)}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise UsageError(f"{name} must be a whole number, got {shown_value(value)}")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise UsageError(f"{name} must be a number, got {shown_value(value)}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise UsageError(f"{name} must be text, got {shown_value(value)}")
    if annotation is Path:
        if isinstance(value, (str, os.PathLike)):
            return Path(value)
        raise UsageError(f"{name} must be a path, got {shown_value(value)}")
    return value


def _one_kind(annotation: Any) -> Any:
    """The one type ``annotation`` holds: ``X`` for ``X`` or ``Optional[X]``, None for a union of
    several."""
    if typing.get_origin(annotation) is not typing.Union:
        return annotation
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
    return kinds[0] if len(kinds) == 1 else None


def holds_a_path(field: OptionField) -> bool:
    """Whether the option is declared as one path (``Path`` or ``Optional[Path]``, or a path or
    text: the history, a file or a PostgreSQL URL): what a config file gives it relative is
    relative to the file's folder."""
    return _takes_a_path(field.annotation)


def _takes_a_path(annotation: Any) -> bool:
    if typing.get_origin(annotation) is not typing.Union:
        return annotation is Path
    return Path in typing.get_args(annotation)


def flag_of(field: OptionField) -> Optional[Flag]:
    """The option's flag, or None when it has none."""
    return field.flag


ENV_PREFIX = "JAXRUN_"


def env_name(key: str) -> str:
    """``timeout`` -> ``JAXRUN_TIMEOUT``: the variable that sets an option."""
    return ENV_PREFIX + key.upper()


def flag_name(field: OptionField) -> Optional[str]:
    """The option's flag as the help lists it first (``--host-devices``), or None without one."""
    if field.flag is None:
        return None
    return (field.flag.names or ("--" + field.name.replace("_", "-"),))[0]


def shown_default(field: OptionField) -> Optional[str]:
    """The default as the help shows it, or None when there is nothing worth showing."""
    if field.show_default is not None:
        return field.show_default
    default = field.default
    if field.is_required() or default is None or isinstance(default, bool):
        return None
    if isinstance(default, tuple):
        return ",".join(str(d) for d in default) or None
    return str(default)


def described(options: type[OptionSet], name: str, annotation: Any = None) -> Any:
    """The option's type (or ``annotation``, where a tool takes it in another shape) with its help
    attached, ``Annotated[type, Field(description=...)]``: the parameter annotation an MCP tool's
    input schema is made from."""
    from pydantic import (
        Field,  # the MCP server's own schemas: never on the way to a script
    )

    field = options.fields[name]
    return typing.Annotated[annotation or field.annotation, Field(description=field.description)]  # type: ignore[name-defined]


def default_of(options: type[OptionSet], name: str) -> Any:
    return options.fields[name].default


def keyword_signature(function: Any, *sets: type[OptionSet], skip: tuple[str, ...] = ()) -> "inspect.Signature":
    """``function``'s signature with its ``**options`` spelled out: every option of ``sets`` as a
    keyword with its default, in declaration order (what ``help()`` and editors show). The
    function still receives only the keywords its caller gave."""
    import inspect

    signature = inspect.signature(function)
    params = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    taken = {p.name for p in params} | set(skip)
    for options in sets:
        for name, field in options.fields.items():
            if name in taken or not field.declared:
                continue
            taken.add(name)
            default = inspect.Parameter.empty if field.is_required() else field.default
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=field.annotation))
    return signature.replace(parameters=params)
