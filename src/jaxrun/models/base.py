"""The shared base of every result model: dict-like reading, NaN-safe JSON, the error classes."""

from __future__ import annotations

from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict

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
    """A model that can also be read like the dicts the seed documents return (``r["success"]``)."""

    # NaN and infinities (a script may record them) are written as the JSON strings "NaN",
    # "Infinity", "-Infinity": valid JSON, and never confused with null (a value not measured).
    model_config = ConfigDict(extra="forbid", validate_assignment=False, ser_json_inf_nan="strings")

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in type(self).model_fields

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default) if key in type(self).model_fields else default

    def keys(self) -> Iterator[str]:
        return iter(type(self).model_fields)
