"""The shared base of every result model: msgspec structs that can also be read like dicts, NaN-safe
JSON, older files' layouts, and the error classes.

Result models are msgspec structs: defining one costs microseconds and its JSON is written by
msgspec's C encoder, so a plain ``jaxrun run`` pays nothing for the dozens of models it never
touches (pydantic cost ~150 ms of CPU on the way to a trivial script's end: its import, its model
classes, its validation). What pydantic gave the models' users is kept as methods of the same
names (``model_dump``, ``model_copy``, ``model_validate``, ``model_json_schema``...), so code
written against the earlier models keeps working.
"""

from __future__ import annotations

import typing
from typing import Any, ClassVar, Iterator, Literal, NamedTuple

import msgspec

from jaxrun.core.aliases import field_alias
from jaxrun.core.failures import TABLE
from jaxrun.results import model_json

# 2: run phases (import_time, run_time; steady_time is read as run_time) and per-phase verdicts.
SCHEMA_VERSION = 2

# The failure classes, in the order of the one table that declares them (core/failures.py).
ERROR_CLASSES: tuple[str, ...] = tuple(TABLE)
ErrorClass = Literal[ERROR_CLASSES]  # type: ignore[valid-type]


class ModelField(NamedTuple):
    """One field of a model as its readers see it (``Model.model_fields[name]``)."""

    name: str
    annotation: Any
    description: str | None
    default: Any  # msgspec.NODEFAULT when the field is required
    exclude: bool  # not written to the model's JSON (attached to the object in memory only)

    def is_required(self) -> bool:
        return self.default is msgspec.NODEFAULT


class _ModelMeta(msgspec.StructMeta):
    """Every model's fields are keyword-only, so that a required field may follow ones with
    defaults, in the order the files list them (msgspec asks each class to say so: this says it
    once)."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **config: Any) -> Any:
        config.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **config)

    @property
    def model_fields(cls) -> dict[str, ModelField]:
        """Every field by name, in order, with its type and description (its annotations resolved
        on the first call), the fields not written to JSON (``EXCLUDED``) last."""
        cached = cls.__dict__.get("_model_fields")
        if cached is None:
            hints = typing.get_type_hints(cls, include_extras=True)
            cached = {}
            for name, default in zip(cls.__struct_fields__, _defaults(cls)):
                annotation, description = _described(hints[name])
                cached[name] = ModelField(name, annotation, description, default, False)
            for name, description in cls.EXCLUDED.items():
                cached[name] = ModelField(name, Any, description, getattr(cls, name), True)
            cls._model_fields = cached
        return cached


def _defaults(cls: type) -> list[Any]:
    """Each field's default, msgspec.NODEFAULT for a required one (a factory's value made)."""
    out: list[Any] = []
    for field in msgspec.structs.fields(cls):
        if field.default is not msgspec.NODEFAULT:
            out.append(field.default)
        elif field.default_factory is not msgspec.NODEFAULT:
            out.append(field.default_factory())
        else:
            out.append(msgspec.NODEFAULT)
    return out


def _described(hint: Any) -> tuple[Any, str | None]:
    """``Annotated[T, Meta(description=...)]`` as ``(T, description)``."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *metadata = typing.get_args(hint)
        text = next((m.description for m in metadata if isinstance(m, msgspec.Meta) and m.description), None)
        return base, text
    return hint, None


def _rebuilt(cls: type, fields: dict[str, Any], attached: dict[str, Any]) -> Any:
    """A model back from its pickle, with what was attached to it (``EXCLUDED``)."""
    model = cls(**fields)
    if attached:
        model.__dict__.update(attached)
    return model


class MappingModel(msgspec.Struct, metaclass=_ModelMeta, forbid_unknown_fields=True):
    """A model that can also be read like the dicts the executor API returns (``r["success"]``,
    and the executor API's own names such as ``r["peak_memory_mb"]``: :mod:`jaxrun.core.aliases`).
    ``to_dict()`` gives plain JSON-able data (what the result files hold)."""

    # What an object carries in memory but never writes (name -> what it is): a class that has
    # any is declared with ``dict=True``, sets each as a class attribute holding its default, and
    # keeps them through model_copy and pickling.
    EXCLUDED: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        model_json.as_models(self)

    @classmethod
    def _field(cls, key: object) -> str | None:
        if not isinstance(key, str):
            return None
        if key in cls.__struct_fields__:
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
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")

    def __contains__(self, key: object) -> bool:
        return self._field(key) is not None

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """``(name, value)`` of each field, as pydantic's models iterate (``dict(model)`` works too)."""
        for name in self.__struct_fields__:
            yield name, getattr(self, name)

    def __reduce__(self) -> Any:
        attached = {name: self.__dict__[name] for name in self.EXCLUDED if name in self.__dict__} if self.EXCLUDED else {}
        return _rebuilt, (type(self), {name: getattr(self, name) for name in self.__struct_fields__}, attached)

    def get(self, key: str, default: Any = None) -> Any:
        name = self._field(key)
        return default if name is None else getattr(self, name)

    def keys(self) -> Iterator[str]:
        return iter(self.__struct_fields__)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: dicts, lists, str, numbers, bool, None (NaN and infinities as the
        strings "NaN", "Infinity", "-Infinity", as in the files)."""
        return model_json.plain_data(self)

    # -- what pydantic's models offered, for the code written against them ----------------------

    def model_dump(self, *, mode: str = "python", include: set[str] | None = None,
                   exclude: set[str] | None = None, **_: Any) -> dict[str, Any]:
        """The fields as plain data (nested models as dicts); ``mode="json"``: as the files hold
        them (:meth:`to_dict`). ``include`` / ``exclude``: top-level field names."""
        data = self.to_dict() if mode == "json" else msgspec.to_builtins(self, enc_hook=model_json.plain_value)
        if include is not None:
            data = {k: v for k, v in data.items() if k in include}
        if exclude:
            data = {k: v for k, v in data.items() if k not in exclude}
        return data

    def model_dump_json(self, *, indent: int | None = None, **_: Any) -> str:
        return model_json.json_text(self, indent=indent or 0)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy, with ``update``'s fields (or attached values, ``EXCLUDED``) replaced."""
        import copy

        source = copy.deepcopy(self) if deep else self
        update = update or {}
        fields = {k: v for k, v in update.items() if k in self.__struct_fields__}
        attached = {k: v for k, v in update.items() if k not in fields}
        unknown = [k for k in attached if k not in self.EXCLUDED]
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {unknown[0]!r}")
        out = msgspec.structs.replace(source, **fields)
        if self.EXCLUDED:
            for name in self.EXCLUDED:
                if name in source.__dict__:
                    out.__dict__[name] = source.__dict__[name]
            out.__dict__.update(attached)
        return out

    @classmethod
    def model_validate(cls, data: Any) -> Any:
        """``data`` (a dict as the files hold it, or a model) as this model; raises
        :class:`msgspec.ValidationError` naming the field that does not fit."""
        if isinstance(data, cls):
            return data
        if isinstance(data, MappingModel):
            data = data.to_dict()
        return model_json.converted(data, cls)

    @classmethod
    def model_validate_json(cls, text: str | bytes) -> Any:
        return model_json.decoded(text, cls)

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return model_json.json_schema_of(cls)
