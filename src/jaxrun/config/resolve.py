"""The layers of settings, one precedence for every option:

    command line (or the API's keywords) > environment (JAXRUN_*) > per-script settings
    > config file > defaults

:func:`resolve_batch_options` turns the config file, the environment and the given values into
one :class:`~jaxrun.config.options.BatchOptions` whose every value knows its source and where it was set;
:func:`script_settings` gives one script's own settings (per-device table, per-script tables in
file order, its header comment: later wins), which :meth:`RunOptions.overlay` applies under the
environment and the command line.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

import msgspec

from jaxrun.config import slurm_options
from jaxrun.config.config_files import (
    ConfigFile,
    config_from_env,
    display,
    find_config,
    read_config,
)
from jaxrun.config.config_keys import (
    DEVICE_ID_KEY,
    DEVICE_KEYS,
    DISPLAY_KEYS,
    EXECUTOR_KEYS,
    RUN_KEYS,
    SCRIPT_KEYS,
    TOP_KEYS,
    UNSUPPORTED,
    closest,
    device_id_value,
    env_name,
    from_text,
    monitoring_metrics,
)
from jaxrun.config.option_spec import holds_a_path
from jaxrun.config.options import (
    BatchOptions,
    RunOptions,
    ScriptRule,
    Source,
    parse_devices,
)
from jaxrun.config.script_header import read_header
from jaxrun.core.aliases import OPTION_ALIASES
from jaxrun.core.paths import is_history_url
from jaxrun.discover.scripts import path_matches
from jaxrun.errors import UsageError

# Keys whose relative paths in a config file are relative to the file's folder: every option
# declared as a path (a new output file's option is one by its type, with nothing to add here;
# a PostgreSQL URL of the history stays as written), and python when it holds a "/" (a bare name
# is a command looked up on PATH).
_PATH_KEYS = frozenset({name for options in (BatchOptions, RunOptions) for name, field in options.fields.items()
                        if holds_a_path(field)} | {"python"})
_EXECUTOR_BLOCKS = {"execution": "JAX_EXEC_CONFIG", "monitoring": "MONITORING_CONFIG"}
_MONITORING = {"logging": ("level", "file_output", "console_output", "performance_summary"),
               "benchmarking": ("warmup_runs", "measurement_runs", "statistical_analysis")}


def _field(key: str) -> Any:
    return (RunOptions.fields | BatchOptions.fields)[key]


class Layer(msgspec.Struct):
    """Values of one source, each with where it was set."""

    values: dict[str, Any] = msgspec.field(default_factory=dict)
    origins: dict[str, str] = msgspec.field(default_factory=dict)

    def put(self, key: str, value: Any, origin: str) -> None:
        if key == "env" and isinstance(self.values.get("env"), dict):
            value = {**self.values["env"], **value}  # variables merge one by one
        self.values[key], self.origins[key] = value, origin


class Resolved(msgspec.Struct):
    options: BatchOptions
    display: dict[str, tuple[Any, Source, str | None]]  # DISPLAY_KEYS (quiet): value, source, origin
    config: ConfigFile | None


def check(key: str, value: Any) -> None:
    """Raise UsageError when ``value`` is not valid for ``key`` on its own."""
    if key in DISPLAY_KEYS:
        if not isinstance(value, bool):
            raise UsageError(f"{key} must be true or false, got {value!r}")
    elif key == "skip":
        if not isinstance(value, (str, bool)) or value is False:
            raise UsageError(f"skip must be a reason (text) or true, got {value!r}")
    elif key == "device":
        parse_devices(value)  # one device or several ("cpu,gpu", ["cpu", "gpu"]), as --device takes
    elif key in RUN_KEYS:
        RunOptions.check_value(key, value)
    else:
        BatchOptions.check_value(key, value)


# --- the config file -------------------------------------------------------------------------------


class _Reader:
    """Reads one config file's jaxrun table into a layer and script / device rules."""

    def __init__(self, config: ConfigFile) -> None:
        self.config = config
        self.top = Layer()
        self.rules: list[ScriptRule] = []
        self.device_ids: dict[str, tuple[int, str]] = {}  # platform ("*": the batch's) -> (id, where)

    def read(self) -> None:
        for key, value in self.config.table.items():
            if key == "scripts":
                self._scripts(value)
            elif key == "devices":
                self._devices(value)
            elif key in _EXECUTOR_BLOCKS:
                self._executor_block(key, value)
            elif key == slurm_options.TABLE:
                self._slurm(value)
            else:
                self._put(self.top, key, value, (key,), TOP_KEYS)

    def _table(self, value: Any, keys: tuple[str, ...], what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise UsageError(f"{self.config.where(*keys)}: {self.config.table_name(*keys)} must be a table of {what}, "
                             f"got {value!r}")
        return value

    def _put(self, layer: Layer, key: str, value: Any, keys: tuple[str, ...], allowed: tuple[str, ...],
             executor_keys: bool = True) -> None:
        where = self.config.where(*keys)
        table = self.config.table_name(*keys[:-1])
        if key == DEVICE_ID_KEY and allowed is not SCRIPT_KEYS:
            self._device_id(value, keys, where, table)
            return
        if key in UNSUPPORTED:
            raise UsageError(f"{where}: {table} {key}: {UNSUPPORTED[key]}")
        if executor_keys and key in EXECUTOR_KEYS:
            try:
                mapped = EXECUTOR_KEYS[key](value)
            except UsageError as exc:
                raise UsageError(f"{where}: {table} {exc}") from None
            for name, mapped_value in mapped.items():
                self._put(layer, name, mapped_value, keys, allowed + tuple(mapped), executor_keys=False)
            return
        targets = OPTION_ALIASES.get(key, (key,))  # the executor API's timeout_seconds, profile, ...
        for target in targets:
            if target not in allowed:
                if target == "skip" and allowed is TOP_KEYS:
                    raise UsageError(f"{where}: {table} skip: skip is a per-script setting; put it in a "
                                     f'[tool.jaxrun.scripts."GLOB"] table or a "# jaxrun: skip=..." comment')
                raise UsageError(f"{where}: unknown key {key!r} in {table}: {closest(key, allowed)}")
            if target in _PATH_KEYS and isinstance(value, str) and value.strip() and not is_history_url(value) \
                    and (target != "python" or "/" in value) and not _field(target).is_word(value):
                value = str(self.config.folder / Path(value).expanduser())
            try:
                check(target, value)
            except UsageError as exc:
                label = keys[-1] if table == "the top level" else f"{table} {keys[-1]}"  # as the file spells it
                raise UsageError(f"{where}: {label}: {exc}") from None
            layer.put(target, value, where)

    def _device_id(self, value: Any, keys: tuple[str, ...], where: str, table: str) -> None:
        """``device_id = 1``: at the top level, of the device the batch asks for; in a
        ``[devices.gpu]`` table, of gpu (the executor API's DEVICE_CONFIG). Kept apart until the layers
        are merged (:func:`with_device_ids`), since the device may come from another layer."""
        try:
            index = device_id_value(value)
        except UsageError as exc:
            raise UsageError(f"{where}: {table} {exc}") from None
        platform = keys[1] if keys[0] == "devices" else "*"
        self.device_ids[platform] = (index, where)

    def _scripts(self, value: Any) -> None:
        for pattern, settings in self._table(value, ("scripts",), 'per-script tables ([scripts."GLOB"])').items():
            keys = ("scripts", pattern)
            layer = Layer()
            for key, item in self._table(settings, keys, "settings").items():
                self._put(layer, key, item, (*keys, key), SCRIPT_KEYS)
            self.rules.append(ScriptRule(table=self.config.table_name(*keys), pattern=pattern,
                                         base=self.config.folder, values=layer.values, origins=layer.origins))

    def _devices(self, value: Any) -> None:
        for device, settings in self._table(value, ("devices",), "per-device tables ([devices.cpu])").items():
            keys = ("devices", device)
            if device not in ("cpu", "gpu", "tpu"):
                raise UsageError(f"{self.config.where(*keys)}: unknown device table {device!r}: choose cpu, gpu or tpu")
            layer = Layer()
            for key, item in self._table(settings, keys, "settings").items():
                if key == "platform_name" and item not in (device, "cuda" if device == "gpu" else device):
                    raise UsageError(f"{self.config.where(*keys, key)}: platform_name {item!r} in the {device} table")
                self._put(layer, key, item, (*keys, key), DEVICE_KEYS)
            self.rules.append(ScriptRule(table=self.config.table_name(*keys), device=device, values=layer.values,
                                         origins=layer.origins))

    def _slurm(self, value: Any) -> None:
        """``[slurm]``: ``partition = "gpu"`` is the option slurm_partition."""
        names = tuple(k.removeprefix(slurm_options.PREFIX) for k in TOP_KEYS if k.startswith(slurm_options.PREFIX))
        for key, item in self._table(value, (slurm_options.TABLE,), "Slurm settings").items():
            if key not in names:
                raise UsageError(f"{self.config.where(slurm_options.TABLE, key)}: unknown key {key!r} in "
                                 f"{self.config.table_name(slurm_options.TABLE)}: {closest(key, names)}")
            self._put(self.top, slurm_options.PREFIX + key, item, (slurm_options.TABLE, key), TOP_KEYS)

    def _executor_block(self, block: str, value: Any) -> None:
        table = self._table(value, (block,), "settings")
        if block == "execution":  # JAX_EXEC_CONFIG: the top level's keys
            for key, item in table.items():
                self._put(self.top, key, item, (block, key), TOP_KEYS)
            return
        for part, items in table.items():  # MONITORING_CONFIG: metrics, logging, benchmarking
            keys = (block, part)
            if part == "metrics":
                try:
                    monitoring_metrics(items)
                except UsageError as exc:
                    raise UsageError(f"{self.config.where(*keys)}: {exc}") from None
                continue
            if part not in _MONITORING:
                raise UsageError(f"{self.config.where(*keys)}: unknown table {part!r} in {self.config.table_name(block)}: "
                                 f"{closest(part, ['metrics', *_MONITORING])}")
            for key, item in self._table(items, keys, "settings").items():
                self._put(self.top, key, item, (*keys, key), _MONITORING[part] + TOP_KEYS)


def config_layer(config: ConfigFile) -> tuple[Layer, list[ScriptRule], dict[str, tuple[int, str]]]:
    """The config file's run settings, its per-script and per-device rules, and its device_ids
    (merged into the device once every layer's device is known: :func:`with_device_ids`)."""
    reader = _Reader(config)
    reader.read()
    return reader.top, reader.rules, reader.device_ids


def with_device_ids(device: Any, ids: dict[str, tuple[int, str]]) -> Any:
    """The batch's device(s) with the config file's ``device_id``: ``gpu`` + ``device_id = 1`` ->
    ``gpu:1`` (a device that names its id already keeps it)."""
    names = list(parse_devices(device))
    if "*" in ids and names == ["auto"]:
        index, where = ids["*"]
        raise UsageError(f"{where}: device_id = {index} needs a platform: set device = \"gpu\" (or cpu, tpu), "
                         f"or device = \"gpu:{index}\"")
    chosen = [name if ":" in name or name == "auto" or not ({name, "*"} & set(ids))
              else f"{name}:{ids.get(name, ids.get('*'))[0]}" for name in names]  # type: ignore[index]
    return ",".join(chosen)


# --- the environment --------------------------------------------------------------------------------


def env_layer(environ: Mapping[str, str]) -> Layer:
    """``JAXRUN_<KEY>`` variables (``JAXRUN_TIMEOUT=60``, ``JAXRUN_X64=1``, ``JAXRUN_ENV="A=1 B=2"``)."""
    layer = Layer()
    for key in TOP_KEYS:
        name = env_name(key)
        if name not in environ:
            continue
        try:
            value = from_text(key, environ[name])
            check(key, value)
        except UsageError as exc:
            raise UsageError(f"environment variable {name}: {exc}") from None
        layer.put(key, value, name)
    return layer


# --- all layers together ----------------------------------------------------------------------------


def explicit_keywords(function: Callable[..., Any], given: Mapping[str, Any],
                      renamed: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``given`` (an API function's keywords, by option name) without those left at the function's
    own defaults: a default keyword must not hide the config file's or the environment's value.
    ``renamed``: option name -> parameter name where they differ."""
    defaults = {name: p.default for name, p in inspect.signature(function).parameters.items()
                if p.default is not inspect.Parameter.empty}
    names = renamed or {}
    return {k: v for k, v in given.items() if names.get(k, k) not in defaults or v != defaults[names.get(k, k)]}


def locate_config(paths: tuple[Path, ...] | list[Path], config: str | os.PathLike[str] | bool | None,
                  environ: Mapping[str, str]) -> ConfigFile | None:
    """The config file: the one named (``config`` / ``$JAXRUN_CONFIG``), none with ``config=False``,
    else the nearest one above the first searched path."""
    if config is False:
        return None
    named = Path(config).expanduser() if isinstance(config, (str, os.PathLike)) else config_from_env(environ)  # type: ignore[arg-type]
    if named is not None:
        return read_config(named)
    found = find_config(Path(paths[0]) if paths else Path.cwd())
    return read_config(found) if found is not None else None


def resolve_batch_options(
    paths: Any,
    given: Mapping[str, Any],
    *,
    source: Source = "cli",
    origins: Mapping[str, str] | None = None,
    config: str | os.PathLike[str] | bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> Resolved:
    """Batch options from every layer: the config file, ``JAXRUN_*`` variables, then ``given``
    (the command line's or the API's values, whose source is ``source``)."""
    environ = os.environ if environ is None else environ
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths or ())
    found = locate_config([Path(p) for p in items], config, environ)
    top, rules, device_ids = config_layer(found) if found is not None else (Layer(), [], {})
    layers: list[tuple[Source, Layer]] = [("config", top), ("env", env_layer(environ)),
                                          (source, Layer(dict(given), dict(origins or {})))]
    merged, sources = Layer(), {}
    for layer_source, layer in layers:
        for key, value in layer.values.items():
            merged.put(key, value, layer.origins.get(key, ""))
            sources[key] = layer_source
    where = {k: v for k, v in merged.origins.items() if v}
    shown = {k: (merged.values.pop(k), sources[k], where.get(k)) for k in DISPLAY_KEYS if k in merged.values}
    if device_ids:
        merged.values["device"] = with_device_ids(merged.values.get("device", "auto"), device_ids)
    try:
        options = BatchOptions.build(
            source, sources=sources, origins=where, paths=paths, rules=tuple(rules),
            config_file=found.path if found else None, **merged.values,
        )
    except UsageError as exc:
        exc.args = (f"{exc}{set_where(str(exc), merged.values, where)}",)  # its own class kept (InvalidDeviceError)
        raise
    # rules and config_file are the file's structure, not settings with a source of their own.
    for name in ("rules", "config_file"):
        options._sources.pop(name, None)
    return Resolved(options, shown, found)


def set_where(message: str, values: Mapping[str, Any], where: Mapping[str, str]) -> str:
    """`` (warmup_runs = 1 at jaxrun.toml:3)``: where the options ``message`` names were set, when a
    file or a variable set them and the message does not say it already (a flag the user just typed
    needs no pointer); empty otherwise."""
    named = [key for key in values if re.search(rf"\b{re.escape(key)}\b", message)
             and where.get(key) and not where[key].startswith("-") and where[key] not in message]
    if not named:
        return ""
    return " (" + ", ".join(f"{key} = {json.dumps(values[key], default=str)} at {where[key]}" for key in named) + ")"


# --- one script's own settings ----------------------------------------------------------------------


class ScriptSettings(Layer):
    """One script's own settings (per-script tables, its header comment), each with where it was set."""

    @property
    def skip(self) -> str | None:
        value = self.values.get("skip")
        if value is None or value is False:
            return None
        return value if isinstance(value, str) and value else "skipped by its settings"

    def run_settings(self, options: BatchOptions, platform: str | None, device: str | None = None) -> Layer:
        """The run options this script sets for a job on ``platform``: its device table's, then its
        own (later wins); ``device``: the job's device when the script's own device setting chose it."""
        found = Layer()
        platform = platform.split(":")[0] if platform else None  # gpu:1 takes the [devices.gpu] table
        for rule in options.rules:
            if rule.device is not None and rule.device == platform:
                for key, value in rule.values.items():
                    found.put(key, value, rule.origins.get(key, rule.table))
        for key, value in self.values.items():
            if key not in ("skip", "device"):
                found.put(key, value, self.origins[key])
        if device is not None:
            found.put("device", device, self.origins.get("device", ""))
        return found


def script_settings(options: BatchOptions, script: Path) -> ScriptSettings:
    """``script``'s settings from the per-script tables that match it (in file order) and its
    ``# jaxrun:`` header comment, later ones winning."""
    found = ScriptSettings()
    for rule in options.rules:
        if rule.pattern is None:
            continue
        try:
            rel = script.resolve().relative_to(rule.base).as_posix()
        except ValueError:
            continue  # a script outside the config file's folder: its globs do not reach it
        if path_matches(rel, rule.pattern):
            for key, value in rule.values.items():
                found.put(key, value, rule.origins.get(key, rule.table))
    for setting in read_header(script):
        place = setting.place or f"{display(script)}:{setting.line}"
        try:
            check(setting.key, setting.value)
        except UsageError as exc:
            raise UsageError(f"{place}: '# jaxrun:' {setting.key}: {exc}") from None
        found.put(setting.key, setting.value, place)
    return found


def script_run_options(script: Path, given: Mapping[str, Any], config: str | os.PathLike[str] | bool | None,
                       source: Source = "api") -> RunOptions:
    """The run options of one script run outside a batch (``execute_jax_script``, each run of ``jaxrun
    ab``): ``given`` over ``JAXRUN_*``, the script's own settings (its header comment, per-script
    tables) and the config file's run options (``config``: its path, None to find it, False for
    none). A skip setting is the batch's business: a script named here runs."""
    batch = resolve_batch_options([script], given, source=source, config=config).options
    own = script_settings(batch, script)
    device = None if batch.given("device") else own.values.get("device")
    found = own.run_settings(batch, device or (batch.run.device if batch.run.device != "auto" else None), device)
    return batch.run.overlay(found.values, "script", found.origins) if found.values else batch.run


__all__ = ["Layer", "explicit_keywords", "Resolved", "ScriptSettings", "config_layer", "env_layer", "locate_config",
           "resolve_batch_options", "script_run_options", "script_settings", "set_where"]
