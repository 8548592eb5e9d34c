"""The plan of a batch: which scripts (discovery, batch-unique names), on which platform each
requested device will run, and the jobs in batch order."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .. import resultfiles
from ..devices import resolve_device
from ..discovery import search_jax_scripts, unique_names
from ..errors import UsageError
from ..models import DeviceInfo, SkippedScript
from ..options import BatchOptions, parse_devices
from ..probe.channel import valid_text
from ..job import Job
from ..view.scripts import relative_path
from ..settings import ScriptSettings, script_settings


def discover(
    paths: tuple[Path, ...], recursive: bool, include: object, exclude: object,
) -> tuple[list[tuple[Path, str]], list[str]]:
    """All scripts to run, in order, each with its batch-unique ``<name>``; and what the search
    could not read (``"path: reason"``), which the batch reports and goes on without."""
    found: list[tuple[Path, str]] = []
    skipped: list[str] = []
    taken: set[str] = set()
    for path in paths:
        search = search_jax_scripts(path, recursive, include=include, exclude=exclude)  # type: ignore[arg-type]
        scripts = search.scripts
        skipped += [valid_text(f"{os.path.join(path, rel)}: {reason}") for rel, reason in search.unreadable]
        root = path if path.is_dir() else path.parent
        for script, name in unique_names(scripts, root).items():
            # The name goes into file names, JSON and the terminal: non-UTF-8 bytes become \xNN.
            name = valid_text(name)
            unique, n = name, 2
            while unique.casefold() in taken:
                unique, n = f"{name}_{n}", n + 1
            taken.add(unique.casefold())
            found.append((script, unique))
    if not found:
        shown = ", ".join(repr(str(p)) for p in paths)
        unread = f"; {len(skipped)} path(s) could not be read: {', '.join(skipped[:3])}" if skipped else ""
        raise UsageError(
            f"no JAX scripts found in {shown}: a .py file counts when it imports jax, flax, optax, "
            f"equinox or pymdp (pass a .py file directly to run it anyway){unread}"
        )
    return found, skipped


@dataclass(frozen=True)
class DevicePlan:
    platforms: dict[str, str | None]  # requested device -> platform it will start on (None: nowhere)
    notes: list[str]  # why a requested device is missing, and what happens instead

    @property
    def summary(self) -> str:
        return ",".join(p or "none" for p in self.platforms.values())


def plan_devices(options: BatchOptions, info: DeviceInfo | None, extra: tuple[str, ...] = ()) -> DevicePlan:
    """Where each requested device (the batch's, then ``extra`` ones that per-script settings
    ask for) will run."""
    platforms: dict[str, str | None] = {}
    notes: list[str] = []
    for name in dict.fromkeys((*options.device, *extra)):
        planned, missing = resolve_device(name, info) if info is not None else (None, None)
        if planned is None and options.run.fallback and info is not None and info.platforms.get("cpu"):
            planned = "cpu"  # the requested accelerator is absent; its scripts will fall back
        platforms[name] = planned
        if missing:
            notes.append(missing + ("; falling back to cpu" if planned == "cpu" else ""))
    return DevicePlan(platforms, notes)


@dataclass(frozen=True)
class ScriptPlan:
    script: Path
    name: str
    devices: tuple[str, ...]  # the batch's, or the script's own device setting
    own_device: bool  # whether they are the script's own
    settings: ScriptSettings


def plan_scripts(options: BatchOptions, scripts: list[tuple[Path, str]]) -> tuple[list[ScriptPlan], list[SkippedScript]]:
    """Each script with its own settings (per-script tables, header comment); the ones a skip
    setting leaves out, with the reason."""
    planned: list[ScriptPlan] = []
    skipped: list[SkippedScript] = []
    for script, name in scripts:
        settings = script_settings(options, script)
        if settings.skip is not None:
            skipped.append(SkippedScript(script_name=name, script_path=str(script), reason=settings.skip,
                                         origin=settings.origins.get("skip")))
            continue
        own_device = "device" in settings.values and not options.given("device")
        devices = parse_devices(settings.values["device"]) if own_device else options.device
        planned.append(ScriptPlan(script, name, devices, own_device, settings))
    return planned, skipped


def make_jobs(options: BatchOptions, scripts: list[ScriptPlan], devices: DevicePlan) -> list[Job]:
    """One job per script and device, in batch order (scripts first, then devices)."""
    several = len(options.device) > 1
    durations: dict[str, float] = {}
    if options.jobs > 1:  # longest first needs the history (numpy, scipy): only for parallel batches
        from ..history import expected_durations

        durations = expected_durations(options.history or False, [p.script for p in scripts])
    jobs: list[Job] = []
    roots = [str(p.resolve()) for p in options.paths]  # as the batch's metadata records them
    for plan in scripts:
        for device in plan.devices:
            platform = devices.platforms[device]
            own = plan.settings.run_settings(options, platform or (device if device != "auto" else None),
                                             device if plan.own_device else None)
            jobs.append(Job(
                index=len(jobs), script=plan.script, name=plan.name,
                # Its own device list (a '# jaxrun: device=' setting) makes several jobs of one
                # script too: each needs its own files.
                file_name=resultfiles.file_stem(f"{plan.name}@{device}" if several or len(plan.devices) > 1
                                                else plan.name),
                device=device, platform=platform, results_dir=options.results_dir,
                expected_seconds=durations.get(str(plan.script)),
                run_options=options.run_for(device).overlay(own.values, "script", own.origins) if own.values else None,
                label=relative_path(str(plan.script), roots) + (f" @{device}" if len(plan.devices) > 1 else ""),
            ))
    return jobs
