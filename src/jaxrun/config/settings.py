"""Settings from everywhere a user keeps them, in one precedence: the command line (or the API's
keywords) > ``JAXRUN_*`` variables > per-script settings > the config file > defaults.

- ``keys``: every key, the executor API's names, what a runner cannot honour;
- ``files``: finding and reading ``[tool.jaxrun]`` / ``jaxrun.toml``, with each key's line;
- ``header``: a script's ``# jaxrun:`` comment;
- ``resolve``: the layers into one :class:`~jaxrun.config.options.BatchOptions`, and one script's settings.
"""

from __future__ import annotations

from jaxrun.config.config_files import ConfigFile, find_config, read_config
from jaxrun.config.resolve import (
           Resolved,
           ScriptSettings,
           resolve_batch_options,
           script_settings,
)

__all__ = ["ConfigFile", "Resolved", "ScriptSettings", "find_config", "read_config", "resolve_batch_options",
           "script_settings"]
