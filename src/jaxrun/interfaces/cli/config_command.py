"""``jaxrun config [PATH...] [run options]``: the settings ``jaxrun run`` would use with the same
arguments, each with its source (default, config, script, env, cli) and where it was set; then
every script whose own settings (per-script tables, its ``# jaxrun:`` comment) change them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from jaxrun.errors import JAXExecutionError
from jaxrun.interfaces.cli.console import (
    CONTEXT_SETTINGS,
    fail_usage,
    out,
    show_usage_error,
)

CONTEXT = {**CONTEXT_SETTINGS, "allow_extra_args": True, "ignore_unknown_options": True}

@click.command(context_settings=CONTEXT, options_metavar="[PATHS]... [RUN OPTIONS]")
@click.pass_context
def config(ctx: click.Context) -> None:
    """Show the effective settings of `jaxrun run` and where each value came from.

    Takes what `jaxrun run` takes (PATH defaults to .; --json prints JSON). Precedence: command
    line > JAXRUN_<OPTION> variables > per-script settings > config file ([tool.jaxrun] in
    pyproject.toml, or jaxrun.toml, the nearest above PATH) > defaults.
    """
    from jaxrun.interfaces.cli.run_command import resolve_settings

    run_command = ctx.parent.command.get_command(ctx.parent, "run")  # type: ignore[union-attr]
    args = list(ctx.args)
    # run's parameters parsed under this command's name: a mistake in them points at `jaxrun config --help`.
    try:
        run_ctx = run_command.make_context("config", list(args), parent=ctx.parent, obj=ctx.obj)  # click consumes it
    except click.UsageError as exc:
        if not isinstance(exc, click.MissingParameter):
            raise click.exceptions.Exit(show_usage_error(exc)) from None
        run_ctx = run_command.make_context("config", [".", *args], parent=ctx.parent, obj=ctx.obj)
    with run_ctx:
        paths = run_ctx.params["paths"]
        resolved = resolve_settings(run_ctx, paths)  # type: ignore[arg-type]
        as_json = bool(run_ctx.params.get("json"))  # given here, not the option a config file may set
    try:
        planned, skipped = _plan(resolved.options)
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    report = {
        "config_file": str(resolved.config.path) if resolved.config else None,
        "settings": _settings(resolved),
        "scripts": _scripts(resolved.options, planned, skipped),
    }
    if as_json:
        out.file.write(json.dumps(report, indent=2) + "\n")
        return
    _print(report)


def _as_written(key: str, value: Any) -> Any:
    """Option ``key``'s ``value`` as a config file writes it: the word that stands for it where
    the option has one (``history = false``, ``timeout = "none"``: never a bare null that reads as
    "not set"), else the value itself (paths as text, tuples as lists)."""
    from jaxrun.config.options import BatchOptions, RunOptions

    owner = BatchOptions if key in BatchOptions.fields else RunOptions if key in RunOptions.fields else None
    word = owner.word_for(key, value) if owner is not None else None
    if word is not None:
        return {"false": False, "true": True}.get(word, word)
    return _plain(value)


def _plain(value: Any) -> Any:
    from jaxrun.core.paths import is_history_url

    if isinstance(value, Path):
        return str(value)
    if is_history_url(value):  # a PostgreSQL history: its password is never shown
        from jaxrun.judge.history_db import shown_location

        return shown_location(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _settings(resolved: Any) -> dict[str, dict[str, Any]]:
    from jaxrun.config.config_keys import DISPLAY_KEYS, TOP_KEYS

    options = resolved.options
    found: dict[str, dict[str, Any]] = {}
    for key in TOP_KEYS:
        if key in resolved.display:
            value, source, origin = resolved.display[key]
        elif key in DISPLAY_KEYS:
            value, source, origin = False, "default", None
        else:
            run_value = key in options.run.fields and key not in type(options).fields
            value = getattr(options.run if run_value else options, key)
            source, origin = options.source_of(key), options.origin_of(key)
        found[key] = {"value": _as_written(key, value), "source": source, "origin": origin}
    for platform, values in _device_tables(options).items():
        for key, item in values.items():
            found[key].setdefault("devices", {})[platform] = item
    return found


def _device_tables(options: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """What each per-device table ([tool.jaxrun.devices.cpu]) sets for the scripts that run on
    that platform, as a run applies it (RunOptions.overlay): platform -> key -> its value, where
    it was set, and the flag or variable that overrides it (None when it applies)."""
    from jaxrun.errors import UsageError

    tables: dict[str, dict[str, dict[str, Any]]] = {}
    for rule in options.rules:
        if rule.device is None:
            continue
        try:
            applied = options.run.overlay(rule.values, "config", rule.origins)
        except UsageError:
            applied = None  # a table whose values do not go together: the run says so if it uses it
        for key, value in rule.values.items():
            given = options.given(key)
            shown = getattr(applied, key) if applied is not None and not given else _alone(key, value)
            tables.setdefault(rule.device, {})[key] = {
                "value": _as_written(key, shown), "source": "config", "origin": rule.origins.get(key, rule.table),
                "overridden_by": (options.origin_of(key) or options.source_of(key)) if given else None}
    return tables


def _alone(key: str, value: Any) -> Any:
    """``value`` as option ``key`` holds it (``"8GB"`` -> bytes), read on its own."""
    from jaxrun.config.options import RunOptions
    from jaxrun.errors import UsageError

    try:
        return getattr(RunOptions.build("config", **{key: value}), key)
    except UsageError:
        return value


def _plan(options: Any) -> tuple[list[Any], list[Any]]:
    """The scripts `jaxrun run` would plan with these options, and those a skip setting leaves out.
    Each script's jobs are made as the run makes them (its device table, its own settings over
    the batch's), so a setting the run refuses is refused here, with the same line."""
    from jaxrun.discover.devices import get_jax_device_info
    from jaxrun.errors import DeviceProbeError
    from jaxrun.plan.batch_plan import discover, make_jobs, plan_devices, plan_scripts

    try:
        facts = get_jax_device_info(python=options.run.python)
    except DeviceProbeError:
        facts = None  # the run goes on without device facts too
    found, _ = discover(options.paths, options.recursive, options.include, options.exclude, options.named)
    planned, skipped = plan_scripts(options, found)
    make_jobs(options, planned, plan_devices(options, facts), facts)
    return planned, skipped


def _scripts(options: Any, planned: list[Any], skipped: list[Any]) -> list[dict[str, Any]]:
    """Scripts with settings of their own: the values that apply, and those a stronger layer overrides."""
    rows: list[dict[str, Any]] = [
        {"script": s.script_path, "name": s.script_name, "skip": s.reason, "skip_origin": s.origin, "settings": {},
         "overridden": {}} for s in skipped
    ]
    for plan in planned:
        own = plan.settings.run_settings(options, None)
        if plan.own_device:
            own.put("device", plan.devices, plan.settings.origins["device"])
        if not own.values:
            continue
        applied, overridden = {}, {}
        for key, value in own.values.items():
            origin = own.origins.get(key)
            if not options.given(key) or key == "device":
                applied[key] = {"value": _plain(value), "origin": origin}
            else:
                overridden[key] = {"value": _plain(value), "origin": origin,
                                   "by": options.origin_of(key) or options.source_of(key)}
        rows.append({"script": str(plan.script), "name": plan.name, "skip": None, "skip_origin": None,
                     "settings": applied, "overridden": overridden})
    return rows


def _print(report: dict[str, Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    out.print(f"config file: {report['config_file'] or 'none'}", markup=False)
    config_file = Path(report["config_file"]).resolve() if report["config_file"] else None

    def where(origin: str | None) -> str:
        """``pyproject.toml:5`` for a line of the config file named above the table: its whole path
        once, not in every row, where a long one would wrap in the middle of its name."""
        path, colon, line = (origin or "").rpartition(":")
        if config_file is not None and colon and line.isdigit() and Path(path).resolve() == config_file:
            return f"{config_file.name}:{line}"
        return origin or ""

    table = Table(title="settings of jaxrun run", title_justify="left")
    for column in ("key", "value", "source", "where"):
        table.add_column(column, overflow="fold")
    for key, item in report["settings"].items():
        style = "dim" if item["source"] == "default" else None
        table.add_row(Text(key, style=style), Text(json.dumps(item["value"]), style=style), Text(item["source"], style=style),
                      Text(where(item["origin"]), style=style))
        for platform, device in item.get("devices", {}).items():
            said = where(device["origin"]) + (f", overridden by {device['overridden_by']}" if device["overridden_by"] else "")
            table.add_row(Text(f"  {key} on {platform}"), Text(json.dumps(device["value"])), Text(device["source"]),
                          Text(said))
    out.print(table)
    for row in report["scripts"]:
        if row["skip"] is not None:
            out.print(f"{row['name']}: skipped: {row['skip']} ({row['skip_origin']})", markup=False, soft_wrap=True)
            continue
        parts = [f"{k}={json.dumps(v['value'])} ({v['origin']})" for k, v in row["settings"].items()]
        parts += [f"{k}={json.dumps(v['value'])} ({v['origin']}) overridden by {v['by']}" for k, v in row["overridden"].items()]
        out.print(f"{row['name']}: {', '.join(parts)}", markup=False, soft_wrap=True)
