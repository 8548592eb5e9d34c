"""jaxrun implements the interface of a JAX executor (its Python API, ``run_jax_scripts`` and
``execute_jax_script``; its configuration blocks; its MCP tools), here called the executor API.
Where that interface's names differ from jaxrun's own, they are accepted everywhere, through two
tables: one for options, one for result fields; jaxrun's own names stay the documented ones.
Nothing else in jaxrun spells an executor-API alias."""

from __future__ import annotations

from typing import Any, Mapping

from jaxrun.errors import UsageError

# Option aliases: executor-API name -> the options it sets (all to the value given).
OPTION_ALIASES: dict[str, tuple[str, ...]] = {
    "timeout_seconds": ("timeout",),
    "profile": ("enable_profiling",),
    "enable_jax_debug": ("debug_nans", "debug_infs"),  # "Enable JAX debug features": NaN and Inf checks
    "debug": ("verbose", "log_compiles"),  # "debug output for JAX execution"
}

# Result field aliases, per model: executor-API name -> jaxrun's field.
FIELD_ALIASES: dict[str, dict[str, str]] = {
    "ScriptResult": {"peak_memory_mb": "memory_peak"},
    "ScriptBenchmark": {"mean_time": "mean_execution_time", "std_time": "std_execution_time"},
}


def resolve_option_aliases(given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` with executor-API option names replaced by jaxrun's. A target also given with another
    value than the alias's is a UsageError naming both, unless that value is just the option's
    default (``execute_jax_script`` passes its keyword defaults along)."""
    out = {k: v for k, v in given.items() if k not in OPTION_ALIASES}
    for alias, value in given.items():
        for target in OPTION_ALIASES.get(alias, ()):
            mine = given.get(target, defaults.get(target))
            if target in given and mine != value and mine != defaults.get(target):
                raise UsageError(
                    f"{alias}={value!r} and {target}={mine!r} disagree: {alias} is another name for "
                    f"{', '.join(OPTION_ALIASES[alias])}; give one of them"
                )
            out[target] = value
    return out


def field_alias(model: str, name: str) -> str | None:
    """jaxrun's field for the executor API's ``name`` on ``model`` (a class name), or None."""
    return FIELD_ALIASES.get(model, {}).get(name)
