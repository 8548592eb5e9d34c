"""``jaxrun config [PATH...] [run options]``: the settings ``jaxrun run`` would use with the same
arguments, each with its source (default, config, script, env, cli) and where it was set; then
every script whose own settings (per-script tables, its ``# jaxrun:`` comment) change them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..errors import JAXExecutionError
from .console import CONTEXT_SETTINGS, fail_usage, out, show_usage_error

CONTEXT = {**CONTEXT_SETTINGS, "allow_extra_args": True, "ignore_unknown_options": True}

@click.command(context_settings=CONTEXT, options_metavar="[PATHS]... [RUN OPTIONS]")
@click.pass_context
def config(ctx: click.Context) -> None:
    """Show the effective settings of `jaxrun run` and where each value came from.

    Takes what `jaxrun run` takes (PATH defaults to .; --json prints JSON). Precedence: command
    line > JAXRUN_<OPTION> variables > per-script settings > config file ([tool.jaxrun] in
    pyproject.toml, or jaxrun.toml, the nearest above PATH) > defaults.
    """
    from .run import resolve_settings

    run_command = ctx.parent.command.get_command(ctx.parent, "run")  # type: ignore[union-attr]
    args = list(ctx.args)
    try:
        run_ctx = run_command.make_context("run", list(args), parent=ctx.parent, obj=ctx.obj)  # click consumes it
    except click.UsageError as exc:
        if not isinstance(exc, click.MissingParameter):
            raise click.exceptions.Exit(show_usage_error(exc)) from None
        run_ctx = run_command.make_context("run", [".", *args], parent=ctx.parent, obj=ctx.obj)
    with run_ctx:
        paths = run_ctx.params["paths"]
        resolved = resolve_settings(run_ctx, paths)  # type: ignore[arg-type]
        as_json = bool(run_ctx.params.get("json_output"))
    try:
        scripts = _scripts(resolved.options)
    except JAXExecutionError as exc:
        raise fail_usage(str(exc)) from None
    report = {
        "config_file": str(resolved.config.path) if resolved.config else None,
        "settings": _settings(resolved),
        "scripts": scripts,
    }
    if as_json:
        out.file.write(json.dumps(report, indent=2) + "\n")
        return
    _print(report)


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _settings(resolved: Any) -> dict[str, dict[str, Any]]:
    from ..settings.keys import TOP_KEYS

    options = resolved.options
    found: dict[str, dict[str, Any]] = {}
    for key in TOP_KEYS:
        if key in resolved.display:
            value, source, origin = resolved.display[key]
        elif key in ("quiet", "report"):
            value, source, origin = False, "default", None
        else:
            run_value = key in options.run.model_fields and key not in type(options).model_fields
            value = getattr(options.run if run_value else options, key)
            source, origin = options.source_of(key), options.origin_of(key)
        found[key] = {"value": _plain(value), "source": source, "origin": origin}
    return found


def _scripts(options: Any) -> list[dict[str, Any]]:
    """Scripts with settings of their own: the values that apply, and those a stronger layer overrides."""
    from ..batch.plan import discover, plan_scripts

    found, _ = discover(options.paths, options.recursive, options.include, options.exclude)
    planned, skipped = plan_scripts(options, found)
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
    table = Table(title="settings of jaxrun run", title_justify="left")
    for column in ("key", "value", "source", "where"):
        table.add_column(column, overflow="fold")
    for key, item in report["settings"].items():
        style = "dim" if item["source"] == "default" else None
        table.add_row(Text(key, style=style), Text(json.dumps(item["value"]), style=style), Text(item["source"], style=style),
                      Text(item["origin"] or "", style=style))
    out.print(table)
    for row in report["scripts"]:
        if row["skip"] is not None:
            out.print(f"{row['name']}: skipped: {row['skip']} ({row['skip_origin']})", markup=False, soft_wrap=True)
            continue
        parts = [f"{k}={json.dumps(v['value'])} ({v['origin']})" for k, v in row["settings"].items()]
        parts += [f"{k}={json.dumps(v['value'])} ({v['origin']}) overridden by {v['by']}" for k, v in row["overridden"].items()]
        out.print(f"{row['name']}: {', '.join(parts)}", markup=False, soft_wrap=True)
