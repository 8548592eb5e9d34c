"""The shared base of every result model: dict-like reading, NaN-safe JSON, the error classes."""

from __future__ import annotations

import json
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict

from jaxrun.core.aliases import field_alias
from jaxrun.core.failures import TABLE

# 2: run phases (import_time, run_time; steady_time is read as run_time) and per-phase verdicts.
SCHEMA_VERSION = 2

# The failure classes, in the order of the one table that declares them (core/failures.py).
ERROR_CLASSES: tuple[str, ...] = tuple(TABLE)
ErrorClass = Literal[ERROR_CLASSES]  # type: ignore[valid-type]


class MappingModel(BaseModel):
    """A model that can also be read like the dicts the executor API returns (``r["success"]``,
    and the executor API's own names such as ``r["peak_memory_mb"]``: :mod:`jaxrun.core.aliases`).
    ``to_dict()`` gives plain JSON-able data (what the result files hold)."""

    # NaN and infinities (a script may record them) are written as the JSON strings "NaN",
    # "Infinity", "-Infinity": valid JSON, and never confused with null (a value not measured).
    # defer_build: a model's validator and serializer are built when first used, not at import, so
    # `jaxrun run` does not pay for the models a plain run never touches (its start-up budget: benchmarks/README.md).
    model_config = ConfigDict(extra="forbid", validate_assignment=False, ser_json_inf_nan="strings", defer_build=True)

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
