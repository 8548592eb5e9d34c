"""The plan of a batch: which scripts (discovery, batch-unique names), on which platform each
requested device will run, and the jobs in batch order.

A batch's plan is made one script at a time (:class:`Plan`, in a thread of its own): listing a
folder is cheap (10,000 files in ~10 ms), reading each file to see whether it imports JAX and
what its ``# jaxrun:`` comment says is not (~0.2 ms a file), so the first script starts while
the rest of a large folder is read. The batch waits for the first ``PLAN_AHEAD_JOBS`` jobs (or
the whole plan, when smaller): a small folder is planned whole before anything runs, as before.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import msgspec

from jaxrun.config.config_files import display
from jaxrun.config.option_spec import default_of
from jaxrun.config.options import BatchOptions, RunOptions, parse_devices
from jaxrun.config.resolve import set_where
from jaxrun.config.settings import ScriptSettings, script_settings
from jaxrun.config.sweeps import Point, names_of, point_changes, points
from jaxrun.core.formatting import joined, listed, plural
from jaxrun.discover.devices import check_device_id, device_ids, resolve_device
from jaxrun.discover.script_labels import point_name, script_label
from jaxrun.discover.scripts import (
    PreparedSearch,
    ScriptNames,
    defines_name,
    prepare_search,
    script_display_name,
)
from jaxrun.errors import UsageError
from jaxrun.plan.job import Job, Jobs
from jaxrun.probe import notebook_cells
from jaxrun.probe.channel import valid_text
from jaxrun.results import result_files

if TYPE_CHECKING:
    from jaxrun.discover.devices import Facts
    from jaxrun.results.models import SkippedScript

# Jobs planned before the first one starts (a folder of fewer scripts: all of them), and the
# longest the batch waits for them: enough for the longest-first order of a small --jobs batch and
# for a bad '# jaxrun:' comment to stop a small batch before anything runs.
PLAN_AHEAD_JOBS = 64
PLAN_AHEAD_SECONDS = 0.25
# The longest the plan waits, after those, for the first script to start (Plan.go_on).
HAND_OVER_SECONDS = 1.0
# Scripts looked up in the history at once, for the longest-first order of a --jobs batch.
DURATIONS_CHUNK = 64


def _no_scripts(paths: tuple[Path, ...], unreadable: list[str], recursive: bool = True, include: object = None,
                exclude: object = None, named: Callable[[str], str] | None = None) -> UsageError:
    """Why a batch has no script: the folders hold none, or ``include`` / ``exclude`` (each named
    by ``named``, as it was given) left none of those they hold."""
    shown = ", ".join(repr(str(p)) for p in paths)
    unread = f"; {plural(len(unreadable), 'path')} could not be read: {listed(unreadable, 3)}" if unreadable else ""
    filters = {name: value for name, value in (("include", include), ("exclude", exclude)) if value}
    if filters:  # only now that none is left: the folders searched again, without the patterns
        held = sum(1 for path in paths for _ in prepare_search(path, recursive).scripts())
        if held:
            said = joined(f"{named(name) if named else name} {joined(map(repr, globs), 'or')}"
                          for name, globs in filters.items())
            return UsageError(f"no JAX script left to run in {shown}: {plural(held, 'JAX script')} found there, "
                              f"but {said} {'leave' if len(filters) > 1 else 'leaves'} none of them{unread}")
    return UsageError(
        f"no JAX scripts found in {shown}: a .py file counts when it imports jax, flax, optax, "
        f"equinox or pymdp (pass a .py file directly to run it anyway){unread}"
    )


def _searches(paths: tuple[Path, ...], recursive: bool, include: object, exclude: object) -> list[PreparedSearch]:
    return [prepare_search(path, recursive, include=include, exclude=exclude)  # type: ignore[arg-type]
            for path in paths]


def _unreadable(paths: tuple[Path, ...], searches: list[PreparedSearch]) -> list[str]:
    return [valid_text(f"{os.path.join(path, rel)}: {reason}")
            for path, search in zip(paths, searches) for rel, reason in sorted(search.unreadable)]


def _named_scripts(paths: tuple[Path, ...], searches: list[PreparedSearch]) -> Iterator[tuple[Path, str]]:
    """Each script found, in batch order, with its batch-unique ``<name>`` (docs/ARCHITECTURE.md,
    "Results folder"): within a folder given, discovery's rule (its own base name kept, a clash
    suffixed past every name the folder's files have); across folders, first come first served."""
    batch = ScriptNames()
    for path, search in zip(paths, searches):
        root = path if path.is_dir() else path.parent
        folder = ScriptNames(reserved=search.base_names())
        for script in search.scripts():
            # The name goes into file names, JSON and the terminal: non-UTF-8 bytes become \xNN.
            yield script, batch.take(valid_text(folder.take(script_display_name(script, root))))


def discover(
    paths: tuple[Path, ...], recursive: bool, include: object, exclude: object,
    named: Callable[[str], str] | None = None,
) -> tuple[list[tuple[Path, str]], list[str]]:
    """All scripts to run, in order, each with its batch-unique ``<name>``; and what the search
    could not read (``"path: reason"``), which the batch reports and goes on without. ``named``:
    how a message names an option (``BatchOptions.named``)."""
    searches = _searches(paths, recursive, include, exclude)
    found = list(_named_scripts(paths, searches))
    skipped = _unreadable(paths, searches)
    if not found:
        raise _no_scripts(paths, skipped, recursive, include, exclude, named)
    return found, skipped


class DevicePlan(msgspec.Struct):
    platforms: dict[str, str | None] = msgspec.field(default_factory=dict)  # requested device -> where it will start (None: nowhere)
    notes: list[str] = msgspec.field(default_factory=list)  # why a requested device is missing, and what happens instead

    @property
    def summary(self) -> str:
        # A chosen device that will run where it was asked says which one (gpu:1).
        return ",".join(name if p and name.startswith(p + ":") else p or "none"
                        for name, p in self.platforms.items())

    def add(self, name: str, options: BatchOptions, facts: "Facts | None") -> str | None:
        """Where device ``name`` will run (planned once, with its note)."""
        if name not in self.platforms:
            planned, missing = resolve_device(name, facts) if facts is not None else (None, None)
            if planned is None and options.run.fallback and facts is not None and facts.platforms.get("cpu"):
                planned = "cpu"  # the requested accelerator is absent; its scripts will fall back
            self.platforms[name] = planned
            if missing:
                self.notes.append(missing + ("; falling back to cpu" if planned == "cpu" else ""))
        return self.platforms[name]


def plan_devices(options: BatchOptions, facts: "Facts | None", extra: tuple[str, ...] = ()) -> DevicePlan:
    """Where each requested device (the batch's, then ``extra`` ones that per-script settings
    ask for) will run."""
    devices = DevicePlan()
    for name in (*options.device, *extra):
        # One device that is not here (gpu:3 on two GPUs) is a usage error before anything runs.
        # A CPU id waits for each script's own settings (script_jobs): '# jaxrun: host_devices=2',
        # or a [devices.cpu] table's, makes cpu:1.
        if not name.startswith("cpu:"):
            check_device_id(name, facts)
        devices.add(name, options, facts)
    return devices


class ScriptPlan(msgspec.Struct, frozen=True):
    script: Path
    name: str
    devices: tuple[str, ...]  # the batch's, or the script's own device setting
    own_device: bool  # whether they are the script's own
    settings: ScriptSettings


def plan_script(options: BatchOptions, script: Path, name: str) -> "ScriptPlan | SkippedScript":
    """The script with its own settings (per-script tables, header comment), or why a skip
    setting leaves it out."""
    settings = script_settings(options, script)
    if settings.skip is not None:
        from jaxrun.results.models import (
            SkippedScript,  # the result models: only when a script is left out
        )

        return SkippedScript(script_name=name, script_path=str(script), reason=settings.skip,
                             origin=settings.origins.get("skip"))
    own_device = "device" in settings.values and not options.given("device")
    devices = parse_devices(settings.values["device"]) if own_device else options.device
    return ScriptPlan(script, name, devices, own_device, settings)


def plan_scripts(options: BatchOptions, scripts: list[tuple[Path, str]]) -> "tuple[list[ScriptPlan], list[SkippedScript]]":
    """Each script with its own settings; the ones a skip setting leaves out, with the reason."""
    planned: list[ScriptPlan] = []
    skipped: list["SkippedScript"] = []
    for script, name in scripts:
        plan = plan_script(options, script, name)
        (planned if isinstance(plan, ScriptPlan) else skipped).append(plan)  # type: ignore[arg-type]
    return planned, skipped


def _durations(options: BatchOptions, scripts: list[ScriptPlan]) -> dict[str, float]:
    """What the history expects of each script, for the longest-first order of a --jobs batch
    (only then: it needs numpy and scipy)."""
    if options.jobs <= 1:
        return {}
    if options.history is None or not options.history.is_file():  # resolved by BatchOptions
        return {}
    from jaxrun.judge.history import expected_durations

    return expected_durations(options.history, [p.script for p in scripts])


def search_roots(options: BatchOptions) -> list[str]:
    """The folders searched, as the batch's metadata records them (what a script's label is relative to)."""
    return [str(p.resolve()) for p in options.paths]


def _run_options(options: BatchOptions, plan: ScriptPlan, device: str, devices: DevicePlan,
                 facts: "Facts | None") -> tuple[str | None, RunOptions | None, RunOptions]:
    """Where ``device`` will run, the script's own run options on it (None: the batch's), and
    the options its run takes."""
    platform = devices.add(device, options, facts)
    own = plan.settings.run_settings(options, platform or (device.split(":")[0] if device != "auto" else None),
                                     device if plan.own_device else None)
    try:
        run_options = options.run_for(device).overlay(own.values, "script", own.origins) if own.values else None
    except UsageError as exc:
        # Which script, and which of its settings: the batch's own options alone were valid.
        exc.args = (f"{display(plan.script)}: {exc}{set_where(str(exc), own.values, own.origins)}",)
        raise
    return platform, run_options, run_options or options.run_for(device)


def _sweep_points(options: BatchOptions, plan: ScriptPlan, chosen: RunOptions) -> list[tuple[str, Point | None]]:
    """The script's (device, sweep point) pairs in batch order: each point on each device, or
    each point on its own device when the sweep has a ``device`` parameter."""
    if chosen.sweep is None:
        return [(device, None) for device in plan.devices]
    found = points(chosen.sweep, chosen.sweep_zip)
    if any("device" in point for point in found):
        if len(plan.devices) > 1:
            devices = options.said("device", plan.devices) if not plan.own_device else \
                f"device = {','.join(plan.devices)} ({plan.settings.origins['device']})"
            raise UsageError(f"{display(plan.script)}: {chosen.named('sweep')} sweeps the device and {devices} "
                             "chooses devices too: give them one way")
        return [(point.get("device", plan.devices[0]), point) for point in found]
    if "devices" in names_of(chosen.sweep) and chosen.source_of("host_devices") != "default":
        raise UsageError(f"{display(plan.script)}: {chosen.named('sweep')} sweeps devices, each point's device count; "
                         f"{chosen.said('host_devices', chosen.host_devices)} sets it too: keep one")
    return [(device, point) for point in found for device in plan.devices]


def _on_point(options: BatchOptions, chosen: RunOptions, point: Point, platform: str | None,
              facts: "Facts | None") -> RunOptions:
    """``chosen`` at ``point``: its parameters, and what its special ones set."""
    changes = point_changes(point, chosen.args, chosen.env)
    if platform == "gpu" and "devices" in point and facts is not None:
        # On GPUs a point's device count is the first N GPUs: the whole machine's, so one job at a time.
        ids, wanted = device_ids("gpu", facts), point["devices"]
        here = default_of(BatchOptions, "backend")  # the backend that runs jobs on this machine
        if options.backend != here or options.jobs > 1:
            how = options.medium("backend", "jobs")
            got = [options.said(name, getattr(options, name)) for name, wrong in
                   (("backend", options.backend != here), ("jobs", options.jobs > 1)) if wrong]
            raise UsageError(f"a sweep of devices on GPUs gives each point the first N GPUs of this machine: run it "
                             f"with {options.said('jobs', 1, how)} on the {here} backend "
                             f"({options.said('backend', here, how)}), not {' and '.join(got)}")
        if wanted > len(ids):
            raise UsageError(f"the sweep asks for devices={wanted}; this machine has {plural(len(ids), 'GPU')}")
        first = ids[:wanted]
        changes["env"] = {**(changes.get("env", chosen.env) or {}), "CUDA_VISIBLE_DEVICES": ",".join(map(str, first))}
    return chosen.evolve(**changes)


def no_entry(label: str, chosen: RunOptions) -> str:
    """Why warm mode cannot run script ``label``: the function it calls is not there (one line)."""
    entry = chosen.entry
    return (f"{label}: {chosen.named('entry')} calls the script's {entry}() repeatedly in one process, and it "
            f"defines no {entry}() at its top level (outside its `if __name__ == \"__main__\":` block): define one "
            "that does the work (returning the arrays it computes), or run it without warm mode")


def script_jobs(options: BatchOptions, plan: ScriptPlan, devices: DevicePlan, facts: "Facts | None",
                first: int, expected: float | None, roots: list[str]) -> list[Job]:
    """The script's jobs, one per device (and sweep point), numbered from ``first`` in batch order."""
    several = len(options.device) > 1
    on: dict[str, tuple[str | None, RunOptions | None, RunOptions]] = {}  # each device's, made once

    def options_on(device: str) -> tuple[str | None, RunOptions | None, RunOptions]:
        if device not in on:
            on[device] = _run_options(options, plan, device, devices, facts)
        return on[device]

    jobs: list[Job] = []
    entries: dict[str, bool | None] = {}  # whether the script defines each warm-mode entry, read once
    for device, point in _sweep_points(options, plan, options_on(plan.devices[0])[2]):
        platform, run_options, chosen = options_on(device)
        if point is not None:
            chosen = run_options = _on_point(options, chosen, point, platform, facts)
        if chosen.entry is not None and plan.script.suffix == notebook_cells.SUFFIX:
            raise UsageError(notebook_cells.no_warm_mode(script_label(str(plan.script), roots), chosen.entry,
                                                         chosen.origin_of("entry")))
        if chosen.entry is not None and chosen.entry not in entries:
            entries[chosen.entry] = defines_name(plan.script, chosen.entry)
        if chosen.entry is not None and entries[chosen.entry] is False:
            raise UsageError(no_entry(script_label(str(plan.script), roots), chosen))
        if plan.own_device or chosen.source_of("host_devices") == "script" or device.startswith("cpu:") \
                or (point is not None and "devices" in point):
            # The script's own device, its own simulated CPU devices, or a CPU id (how many CPU
            # devices a script has is its own setting): checked as the batch's were.
            check_device_id(device, facts, chosen.host_devices)
        name = point_name(plan.name, point)
        # Its own device list (a '# jaxrun: device=' setting) makes several jobs of one script
        # too: each needs its own files. A device the point names is in its name already.
        on_devices = (several or len(plan.devices) > 1) and not (point and "device" in point)
        jobs.append(Job(
            index=first + len(jobs), script=plan.script, name=name,
            file_name=result_files.file_stem(f"{name}@{device}" if on_devices else name),
            device=device, platform=platform, results_dir=options.results_dir,
            expected_seconds=expected,
            run_options=run_options,
            label=script_label(str(plan.script), roots, device if on_devices and len(plan.devices) > 1 else None,
                               point),
        ))
    return jobs


def make_jobs(options: BatchOptions, scripts: list[ScriptPlan], devices: DevicePlan,
              facts: "Facts | None" = None) -> list[Job]:
    """One job per script and device, in batch order (scripts first, then devices)."""
    durations, roots = _durations(options, scripts), search_roots(options)
    jobs: list[Job] = []
    for plan in scripts:
        jobs += script_jobs(options, plan, devices, facts, len(jobs), durations.get(str(plan.script)), roots)
    return jobs


class Plan:
    """The batch's plan, made in a thread of its own while the first scripts run: ``jobs`` grows
    in batch order; once it is complete, ``found``, ``unreadable``, ``skipped`` and ``devices``
    say what the whole search found.

    The paths are checked when it is built (a missing folder is a usage error before anything
    else); finding no script at all, or a script's bad ``# jaxrun:`` comment, stops the plan
    with a :class:`~jaxrun.errors.UsageError` that ``jobs`` raises where it stopped.
    """

    def __init__(self, options: BatchOptions, facts: "Facts | None") -> None:
        self.options, self.facts = options, facts
        self._searches = _searches(options.paths, options.recursive, options.include, options.exclude)
        self.jobs = Jobs(complete=False)
        self.found = 0
        self.skipped: list["SkippedScript"] = []
        self.devices = plan_devices(options, facts)
        self._roots = search_roots(options)
        self._count = 0  # jobs planned
        self._stop = threading.Event()
        self._handed_over = threading.Event()  # the first script has started (or need not be waited for)
        self._thread: threading.Thread | None = None

    @property
    def unreadable(self) -> list[str]:
        """What the search could not read, so far (``"path: reason"``)."""
        return _unreadable(self.options.paths, self._searches)

    def start(self) -> "Plan":
        self._thread = threading.Thread(target=self._run, name="jaxrun-plan", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Plan no further script (Ctrl-C, or the batch stopped)."""
        self._stop.set()
        self._handed_over.set()

    def go_on(self) -> None:
        """The first script has started: plan the rest. Until then the plan stops after the
        first PLAN_AHEAD_JOBS jobs (at most HAND_OVER_SECONDS), so that reading the rest of a
        large folder does not compete with the first script's start for the CPU."""
        self._handed_over.set()

    def all(self) -> list[Job]:
        """Every job, once the whole plan is made (--resume, Ray): it does not pause for a first script."""
        self.go_on()
        return self.jobs.all()

    def __enter__(self) -> "Plan":
        """Started, with its first jobs (:meth:`wait_ahead`); stopped when the batch ends."""
        self.start()
        try:
            self.wait_ahead()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_ahead(self) -> None:
        """Wait for the first jobs (all of a small batch), or the plan's end; raise what
        stopped it before any job was planned."""
        self.jobs.wait(PLAN_AHEAD_JOBS, timeout=PLAN_AHEAD_SECONDS)
        if self.jobs.error is not None:  # found before the first script starts: nothing runs
            raise self.jobs.error

    def _run(self) -> None:
        try:
            self._plan()
        except BaseException as exc:  # noqa: BLE001 - raised where the jobs are read
            self.jobs.finish(exc)
        else:
            self.jobs.finish()

    def _plan(self) -> None:
        options = self.options
        chunk = DURATIONS_CHUNK if options.jobs > 1 else 1
        waiting: list[ScriptPlan] = []
        for script, name in _named_scripts(options.paths, self._searches):
            if self._stop.is_set():
                return
            if self._count >= PLAN_AHEAD_JOBS and not self._handed_over.is_set():
                self._handed_over.wait(HAND_OVER_SECONDS)
                self._handed_over.set()  # once: a batch that never starts a process is not held up again
            # Let the batch's own thread have the interpreter between two files: it starts
            # the scripts (the interpreter otherwise switches threads every 5 ms).
            time.sleep(0)
            self.found += 1
            plan = plan_script(options, script, name)
            if not isinstance(plan, ScriptPlan):
                self.skipped.append(plan)
                continue
            waiting.append(plan)
            if len(waiting) >= chunk:
                self._add(waiting)
                waiting = []
        self._add(waiting)
        if not self.found:
            raise _no_scripts(options.paths, self.unreadable, options.recursive, options.include, options.exclude,
                              options.named)

    def _add(self, scripts: list[ScriptPlan]) -> None:
        durations = _durations(self.options, scripts) if scripts else {}
        for plan in scripts:
            for job in script_jobs(self.options, plan, self.devices, self.facts, self._count,
                                   durations.get(str(plan.script)), self._roots):
                self.jobs.add(job)
                self._count += 1
