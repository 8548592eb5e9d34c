"""The shared base of every result model: dict-like reading, NaN-safe JSON, the error classes."""

from __future__ import annotations

import json

from typing import Any, ClassVar, Iterator, Literal

from pydantic import BaseModel, ConfigDict

from ..seed_names import field_alias

# 2: run phases (import_time, run_time; steady_time is read as run_time) and per-phase verdicts.
SCHEMA_VERSION = 2

ErrorClass = Literal[
    "device_unavailable",
    "out_of_memory",
    "compilation_failed",
    "numerical_instability",
    "timeout",
    "import_error",
    "syntax_error",
    "script_error",
    "crashed",
    "interrupted",
]
ERROR_CLASSES: tuple[str, ...] = ErrorClass.__args__  # type: ignore[attr-defined]


class MappingModel(BaseModel):
    """A model that can also be read like the dicts the seed documents return (``r["success"]``,
    and the seed's own names such as ``r["peak_memory_mb"]``: :mod:`jaxrun.seed_names`).
    ``to_dict()`` gives plain JSON-able data (what the result files hold)."""

    # NaN and infinities (a script may record them) are written as the JSON strings "NaN",
    # "Infinity", "-Infinity": valid JSON, and never confused with null (a value not measured).
    # defer_build: a model's validator and serializer are built when first used, not at import, so
    # `jaxrun run` does not pay for the models a plain run never touches (DESIGN §10 start-up).
    model_config = ConfigDict(extra="forbid", validate_assignment=False, ser_json_inf_nan="strings", defer_build=True)

    # share_parts: the fields whose texts come from a small vocabulary (one object for each text),
    # and whether equal instances of the model may be one object.
    SHARED_TEXTS: ClassVar[frozenset[str]] = frozenset()
    SHARED_BY_VALUE: ClassVar[bool] = False

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self.__pydantic_fields_set__) is SharedNames:  # share_parts: its own copy first
            object.__setattr__(self, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        super().__setattr__(name, value)

    @classmethod
    def _field(cls, key: object) -> str | None:
        if not isinstance(key, str):
            return None
        if key in cls.model_fields:
            return key
        return field_alias(cls.__name__, key)

    def __getitem__(self, key: str) -> Any:
        name = self._field(key)
        if name is None:
            raise KeyError(key)
        return getattr(self, name)

    def __getattr__(self, key: str) -> Any:
        name = field_alias(type(self).__name__, key)
        if name is not None:
            return getattr(self, name)
        return super().__getattr__(key)  # type: ignore[misc]

    def __contains__(self, key: object) -> bool:
        return self._field(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        name = self._field(key)
        return default if name is None else getattr(self, name)

    def keys(self) -> Iterator[str]:
        return iter(type(self).model_fields)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: dicts, lists, str, numbers, bool, None (NaN and infinities as the
        strings "NaN", "Infinity", "-Infinity", as in the files)."""
        return json.loads(self.model_dump_json())


class SharedNames(set):
    """A model's ``__pydantic_fields_set__`` (the names of the fields it was given) shared by every
    model given the same names (:func:`share_parts`); it never changes: a model assigned a field
    first gets its own copy (:meth:`MappingModel.__setattr__`), a copy of a model a plain set."""

    def _unchanging(self, *args: Any) -> None:
        raise TypeError("a shared set of field names cannot change")

    add = update = discard = remove = pop = clear = _unchanging  # type: ignore[assignment]
    difference_update = intersection_update = symmetric_difference_update = _unchanging  # type: ignore[assignment]
    __ior__ = __iand__ = __isub__ = __ixor__ = _unchanging  # type: ignore[assignment]

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: Any) -> set[str]:
        return set(self)

    def __reduce__(self) -> Any:
        return (set, (list(self),))


# What share_parts shares, each bounded (emptied when full): the vocabularies are small.
_SHARED_MAX = 1024
_NAMES: dict[frozenset[str], SharedNames] = {}
_TEXTS: dict[str, str] = {}
_MODELS: dict[Any, BaseModel] = {}
_LAST_LISTS: dict[str, list[Any]] = {}  # by field name: the list of texts share_parts saw last


def _shared(table: dict[Any, Any], key: Any, value: Any) -> Any:
    found = table.get(key)
    if found is None:
        if len(table) >= _SHARED_MAX:
            table.clear()
        found = table[key] = value
    return found


def share_parts(model: BaseModel) -> None:
    """Make ``model`` (in place, its values unchanged) hold what the models before it hold too as
    the same objects, not one copy each: its (and its sub-models') set of the field names given,
    texts of a small vocabulary (``SHARED_TEXTS``), equal sub-models that may be one object
    (``SHARED_BY_VALUE``: Numerics, RunEnvironment), a list of texts' items equal to the last
    one's, equal texts within it. A batch holds every result until its end: this is ~4 KB of the
    ~8 KB each holds (DESIGN §10: +5 KB a result at most). Nothing may change a shared part in
    place; a field assigned anew is the model's own."""
    _share(model, {})


def _share(model: BaseModel, seen: dict[str, str]) -> None:
    names = model.__pydantic_fields_set__
    if type(names) is not SharedNames:
        key = frozenset(names)
        object.__setattr__(model, "__pydantic_fields_set__", _shared(_NAMES, key, SharedNames(key)))
    values = model.__dict__
    texts = getattr(type(model), "SHARED_TEXTS", ())
    for name, value in values.items():
        if isinstance(value, str):
            same = _shared(_TEXTS, value, value) if name in texts else seen.setdefault(value, value)
            if same is not value:
                values[name] = same
        elif isinstance(value, BaseModel):
            values[name] = _part(value, seen)
        elif isinstance(value, list) and value:
            if isinstance(value[0], str):  # a command line: the last one's words, or this model's texts
                last = _LAST_LISTS.get(name) or ()
                for i, item in enumerate(value):
                    if type(item) is str:
                        before = last[i] if i < len(last) else None
                        same = before if item == before else seen.setdefault(item, item)
                        if same is not item:
                            value[i] = same
                _LAST_LISTS[name] = value
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    value[i] = _part(item, seen)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, BaseModel):
                    value[key] = _part(item, seen)


def _part(model: BaseModel, seen: dict[str, str]) -> BaseModel:
    _share(model, seen)
    if not getattr(type(model), "SHARED_BY_VALUE", False):
        return model
    try:
        key = (type(model), tuple((name, _frozen(value)) for name, value in model.__dict__.items()))
        return _shared(_MODELS, key, model)
    except TypeError:  # a value that cannot be a key
        return model


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value
