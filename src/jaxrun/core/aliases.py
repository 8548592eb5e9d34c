"""The seed documents' names (the README and AGENTS of the JAX executor that jaxrun implements,
whose examples README.md's "Python API" shows) where they differ from jaxrun's own: one table for options, one for result
fields. Their code examples must run as written, so these names are accepted everywhere; jaxrun's
own names stay the documented ones. Nothing else in jaxrun spells a seed alias.
"""

from __future__ import annotations

from typing import Any, Mapping

from jaxrun.errors import UsageError

# Option aliases: seed name -> the options it sets (all to the value given).
OPTION_ALIASES: dict[str, tuple[str, ...]] = {
    "timeout_seconds": ("timeout",),
    "profile": ("enable_profiling",),
    "enable_jax_debug": ("debug_nans", "debug_infs"),  # "Enable JAX debug features": NaN and Inf checks
    "debug": ("verbose", "log_compiles"),  # "debug output for JAX execution"
}

# Result field aliases, per model: seed name -> jaxrun's field.
FIELD_ALIASES: dict[str, dict[str, str]] = {
    "ScriptResult": {"peak_memory_mb": "memory_peak"},
    "ScriptBenchmark": {"mean_time": "mean_execution_time", "std_time": "std_execution_time"},
}


def resolve_option_aliases(given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` with seed option names replaced by jaxrun's. A target also given with another
    value than the alias's is a UsageError naming both, unless that value is just the option's
    default (``execute_jax_script`` passes its keyword defaults along)."""
    out = {k: v for k, v in given.items() if k not in OPTION_ALIASES}
    for alias, value in given.items():
        for target in OPTION_ALIASES.get(alias, ()):
            mine = given.get(target, defaults.get(target))
            if target in given and mine != value and mine != defaults.get(target):
                raise UsageError(
                    f"{alias}={value!r} and {target}={mine!r} disagree: {alias} is the seed "
                    f"documents' name for {', '.join(OPTION_ALIASES[alias])}; give one of them"
                )
            out[target] = value
    return out


def field_alias(model: str, name: str) -> str | None:
    """jaxrun's field for the seed's ``name`` on ``model`` (a class name), or None."""
    return FIELD_ALIASES.get(model, {}).get(name)
