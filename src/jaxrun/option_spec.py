"""One declaration per option: its field in :mod:`jaxrun.options` carries the type, the default,
the help and how it is spelled on the command line. Everything else is made from it: `jaxrun
run`'s flags (cli/flags.py), the API's keywords and their defaults (:func:`keyword_signature`),
the MCP tools' input schemas (:func:`described`), the config-file keys and ``JAXRUN_*`` variables
(settings/keys.py) and what `jaxrun config` lists.

    timeout: Optional[float] = option(300.0, "Seconds per script before it is stopped.",
                                      Flag(metavar="SECONDS"))
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, Optional

from pydantic import Field

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo


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


def option(default: Any, help: str, flag: Optional[Flag] = Flag(), *, show_default: Optional[str] = None) -> Any:
    """The field of one option: its default and help, and its flag (``flag=None``: the option is
    not on the command line, like ``args``, which follows ``--``). ``show_default``: how the help
    shows a default that is resolved later (a folder, a size)."""
    info = Field(default, description=help)
    info.metadata.append(_Spec(flag, show_default))
    return info


class _Spec(NamedTuple):
    flag: Optional[Flag]
    show_default: Optional[str]


def _spec(field: "FieldInfo") -> Optional[_Spec]:
    return next((m for m in field.metadata if isinstance(m, _Spec)), None)


def flag_of(field: "FieldInfo") -> Optional[Flag]:
    """The option's flag, or None when it has none."""
    spec = _spec(field)
    return spec.flag if spec is not None else None


def shown_default(field: "FieldInfo") -> Optional[str]:
    """The default as the help shows it, or None when there is nothing worth showing."""
    spec = _spec(field)
    if spec is not None and spec.show_default is not None:
        return spec.show_default
    default = field.default
    if field.is_required() or default is None or isinstance(default, bool):
        return None
    if isinstance(default, tuple):
        return ",".join(str(d) for d in default) or None
    return str(default)


def described(model: "type[BaseModel]", name: str, annotation: Any = None) -> Any:
    """The option's type (or ``annotation``, where a tool takes it in another shape) with its help
    attached, ``Annotated[type, Field(description=...)]``: the parameter annotation an MCP tool's
    input schema is made from."""
    field = model.model_fields[name]
    return Annotated[annotation or field.annotation, Field(description=field.description)]  # type: ignore[name-defined]


def default_of(model: "type[BaseModel]", name: str) -> Any:
    return model.model_fields[name].default


def keyword_signature(function: Any, *models: "type[BaseModel]", skip: tuple[str, ...] = ()) -> inspect.Signature:
    """``function``'s signature with its ``**options`` spelled out: every option of ``models`` as a
    keyword with its default, in declaration order (what ``help()`` and editors show). The
    function still receives only the keywords its caller gave."""
    signature = inspect.signature(function)
    params = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    taken = {p.name for p in params} | set(skip)
    for model in models:
        for name, field in model.model_fields.items():
            if name in taken or _spec(field) is None:
                continue
            taken.add(name)
            default = inspect.Parameter.empty if field.is_required() else field.default
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=field.annotation))
    return signature.replace(parameters=params)
