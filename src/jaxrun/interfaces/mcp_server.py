"""``jaxrun mcp``: the executor API's four MCP tools and the history's over stdio, with the
official ``mcp`` SDK.

Tools: ``execute.run_jax_scripts``, ``execute.check_jax_availability``,
``execute.monitor_jax_performance`` (read-only: a results folder, also while its batch runs),
``execute.benchmark_jax_script`` and ``history.changes`` (read-only: where a history's series
changed level, as ``jaxrun history --changes --json``). Runs and benchmarks go through ``python -m jaxrun run ... --json``
in a child process: its plain progress lines become MCP progress notifications (one per script
started and finished), its stdout is the batch result, and a cancelled request sends it SIGTERM,
which stops the running scripts' process trees and leaves valid result files (as Ctrl-C does).

Every path a client passes must lie, once symlinks and ``..`` are resolved, inside one of the
allowed folders (``--root DIR``, repeatable; the working folder by default); anything else is a
tool error. Client roots are not access control (the protocol says so), so they are not used.

Both SDK generations are supported: ``mcp.server.mcpserver.MCPServer`` (mcp >= 2) and its former
name ``mcp.server.fastmcp.FastMCP`` (mcp 1.x).
"""

import asyncio
import functools
import inspect
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Literal, Optional, TypeVar, Union

import anyio
from pydantic import BaseModel, Field

from jaxrun.config.option_spec import default_of, described
from jaxrun.config.options import BatchOptions, RunOptions, parse_devices
from jaxrun.core.formatting import one_line, shorten_middle
from jaxrun.core.validate import NO_TIMEOUT, shown_value, validate_device
from jaxrun.core.version import version
from jaxrun.errors import UsageError
from jaxrun.executors.backends import backend_named
from jaxrun.interfaces.mcp_arguments import argument_problem
from jaxrun.results.figures import SCRIPT_FIGURES
from jaxrun.results.models import BatchResult

try:  # mcp >= 2
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as _SDKServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context  # type: ignore[no-redef]
    from mcp.server.fastmcp import FastMCP as _SDKServer
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
from mcp.types import ToolAnnotations

_STARTED = re.compile(r"^\[(\d+)/(\d+|\?)\] (.+) \.\.\.$")  # "?": the plan is still finding scripts
_FINISHED = re.compile(r"^  (.+?): ((?:ok|XPASS|kept) .+|\w+: .*)$")
STOP_GRACE_SECONDS = 30.0
T = TypeVar("T")


class ScriptSummary(BaseModel):
    """One script as every surface states it (jaxrun/view: the terminal's row, the report's)."""

    script_name: str
    path: str = Field(description="Relative to the folder searched, with '/' (+ ' @device' on several devices)")
    success: bool
    status: str = Field(description="ok, failed, xfailed (failed as expected) or xpassed")
    error_class: Optional[str] = None
    error_message: Optional[str] = None
    error_location: Optional[str] = Field(None, description="Where it failed: file:line")
    hint: Optional[str] = None
    stderr_log: Optional[str] = Field(None, description="The log of a failed script")
    device_requested: str
    device_used: Optional[str] = Field(None, description="Platform it ran on (cpu, gpu, tpu)")
    device: Optional[str] = Field(None, description="The device as shown: gpu:1 when one was chosen, else the platform")
    fallback_reason: Optional[str] = Field(None, description="Why it ran elsewhere than asked")
    execution_time: Optional[float] = Field(None, description="Seconds, whole process (see timing)")
    import_time: Optional[float] = None
    jit_compile_time: Optional[float] = None
    run_time: Optional[float] = None
    timing: Optional[str] = Field(None, description="'median of N counted runs' when benchmarked; null: one run")
    memory_peak: Optional[float] = Field(None, description="MiB (2^20 bytes), peak RSS of the script's process tree")
    compile_count: Optional[int] = Field(None, description="XLA compilations (cache loads not included)")
    cache_hits: Optional[int] = Field(None, description="Executables loaded from the persistent compilation cache")
    verdict: Optional[str] = Field(None, description="The performance verdict against its history")
    kept: bool = Field(False, description="Kept from an earlier run by --resume")
    warnings: list[str] = []


# BatchReport and BenchmarkReport keep their names: each is a tool's published output schema, whose
# title is the class name (docs/ARCHITECTURE.md, "Words": the exceptions to "report").
class BatchReport(BaseModel):
    success: bool = Field(description="Every script succeeded (and the batch finished)")
    complete: bool = Field(description="False while the batch runs, or when it was cut off")
    summary: str = Field(description="The run in one line, as the terminal's last line")
    exit_status: int = Field(description="What `jaxrun run` exits with: 0, or 1 (exit_reasons say why)")
    exit_reasons: list[str] = []
    notes: list[str] = Field([], description="Said once about the run without failing it (a regression without "
                             "--fail-on-regression)")
    results_dir: str
    scripts_found: int
    scripts_executed: int
    scripts_successful: int
    scripts_failed: int
    total_execution_time: Optional[float] = None
    scripts: list[ScriptSummary]


class Availability(BaseModel):
    device: str
    available: bool
    jax_version: Optional[str] = None
    default_backend: Optional[str] = None
    platforms: dict[str, int] = Field({}, description="Platform -> number of devices JAX sees")
    reason: Optional[str] = None


class HistoryChanges(BaseModel):
    """Where each series of the history changed level, as `jaxrun history --changes --json` says."""

    history: str = Field(description="The history database read")
    metric: str
    since: Optional[str] = Field(None, description="Only runs recorded at or after it (UTC)")
    changes: list[dict[str, Any]] = Field(description=(
        "Each change point and candidate, newest series first as the CLI lists them (jaxrun schema SeriesChange: "
        "its commits, size with its 95% CI, p-value, whether a candidate, its confirmation)"))
    series: list[dict[str, Any]] = Field(description=(
        "Each series: its runs, noise and the smallest step its change points find (jaxrun schema SeriesSummary)"))


class BenchmarkReport(BaseModel):
    script_name: str
    success: bool
    device_used: Optional[str] = None
    runs_completed: int
    median: dict[str, Optional[float]] = Field(
        {}, description="Median of the counted runs per metric, in its unit: seconds; memory_peak in MiB, 2^20 bytes"
        + "".join(f"; {f.name} in {f.unit_name}" for f in SCRIPT_FIGURES if f.sampled and f.kind not in ("seconds", "mib")))
    ci_low: Optional[float] = Field(None, description="95% CI of the median wall time")
    ci_high: Optional[float] = None
    wall_times: list[float] = Field([], description="Every counted run's wall time, s")
    error_message: Optional[str] = None
    results_dir: str


def _summary(batch: BatchResult) -> BatchReport:
    """The MCP reply of a run: its view (jaxrun/view), as every other surface renders it."""
    from jaxrun.present.view.batch_view import view_batch

    meta = batch.metadata
    view = view_batch(batch)
    scripts = [
        ScriptSummary(
            script_name=s.name, path=s.label, success=r.success, status=s.status, error_class=r.error_class,
            error_message=r.error_message, error_location=s.location, hint=r.hint, stderr_log=s.log,
            device_requested=r.device_requested, device_used=r.device_used, device=None if s.device == "-" else s.device,
            fallback_reason=r.fallback_reason,
            execution_time=s.time, import_time=s.import_, jit_compile_time=s.jit, run_time=s.run, timing=s.timing,
            memory_peak=s.memory, compile_count=s.compiles, cache_hits=s.cache_loads, verdict=s.verdict,
            kept=s.kept, warnings=list(s.warnings),
        )
        for s, r in zip(view.scripts, batch.script_results)
    ]
    return BatchReport(
        success=batch.success, complete=meta.complete, summary=view.closing, exit_status=view.exit_status,
        exit_reasons=view.exit_reasons, notes=view.notes, results_dir=meta.results_dir,
        scripts_found=meta.scripts_found, scripts_executed=meta.scripts_executed,
        scripts_successful=meta.scripts_successful, scripts_failed=meta.scripts_failed,
        total_execution_time=view.total_time, scripts=scripts,
    )


class _Server(_SDKServer):  # type: ignore[misc, valid-type]
    """The SDK's server, with each call's arguments checked against the tool's input schema first
    (:func:`~jaxrun.interfaces.mcp_arguments.argument_problem`: the SDK's own check converts "2"
    to 2, ignores names it does not know and words a refusal as a pydantic report), and a
    tool's refusal passed on as it is worded (the SDK puts "Error executing tool NAME: " before it,
    so a refusal would not start with the argument's name)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        tool = self._tool_manager.get_tool(name)
        problem = argument_problem(name, tool.parameters, arguments) if tool is not None else None
        if problem is not None:
            raise ToolError(problem)
        try:
            return await super().call_tool(name, arguments, *args, **kwargs)
        except ToolError as exc:
            cause = exc.__cause__
            if type(exc) is ToolError and isinstance(cause, ToolError):
                raise ToolError(str(cause)) from cause
            raise


def _refused(argument: str, problem: str) -> ToolError:
    """A tool error that names the argument it refuses (once: a message of an option's own
    validator often starts with the option's name)."""
    return ToolError(problem if problem.startswith(f"{argument} ") else f"{argument}: {problem}")


def _path_problem(given: str) -> str | None:
    """Why ``given`` cannot be a path (checked before it is used): empty, a NUL byte, text that is
    not a file name's, longer than the system's PATH_MAX."""
    if not given:
        return "is empty: pass a path (relative to the first allowed folder, or absolute)"
    if "\0" in given:
        return f"{shown_value(given)} holds a NUL byte (\\x00), which no path can hold"
    try:
        size = len(os.fsencode(given))
    except UnicodeEncodeError:
        return f"{shown_value(given)} is not text a file name can hold (a lone surrogate)"
    if size >= _PATH_MAX:
        return f"is {size:,} bytes long; a path holds at most {_PATH_MAX - 1:,} (the system's PATH_MAX)"
    return None


def _path_max() -> int:
    try:
        return os.pathconf("/", "PC_PATH_MAX")
    except (OSError, ValueError):
        return 4096


_PATH_MAX = _path_max()


class Roots:
    """The folders a client may name; a path is checked after resolving symlinks and ``..``."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [Path(r).expanduser().resolve() for r in roots] or [Path.cwd().resolve()]

    def check(self, given: str, what: str) -> Path:
        problem = _path_problem(given)
        if problem is not None:
            raise _refused(what, problem)
        path = Path(given).expanduser()
        if not path.is_absolute():
            path = self.roots[0] / path
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long
            raise _refused(what, f"{shown_value(given)} cannot be resolved: {getattr(exc, 'strerror', None) or exc}") \
                from None
        if not any(resolved == root or resolved.is_relative_to(root) for root in self.roots):
            allowed = ", ".join(str(r) for r in self.roots)
            raise ToolError(f"{what} {shown_value(given)} resolves to {shown_value(str(resolved))}, outside the "
                            f"allowed folders ({allowed}); pass a path inside them, or start jaxrun mcp with --root "
                            "for that folder")
        return resolved


def _option(argument: str, check: Callable[[], T]) -> T:
    """``check()``: the option's own validator (what the CLI and the API use) for a tool's
    argument; its UsageError becomes a tool error that names the argument."""
    try:
        return check()
    except UsageError as exc:
        raise _refused(argument, str(exc)) from None


def _says_why(tool: Callable[..., Any]) -> Callable[..., Any]:
    """Any failure of ``tool`` is a tool error that says what it was: the SDK words an exception
    other than ToolError as a bare "Error executing tool ..."."""
    def why(exc: Exception) -> ToolError:
        return ToolError(f"jaxrun failed: {type(exc).__name__}: {shorten_middle(one_line(str(exc)) or '(no message)', 500)}")

    if inspect.iscoroutinefunction(tool):
        @functools.wraps(tool)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await tool(*args, **kwargs)
            except ToolError:
                raise
            except Exception as exc:  # noqa: BLE001 - said in the tool error
                raise why(exc) from exc
        return run_async

    @functools.wraps(tool)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return tool(*args, **kwargs)
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - said in the tool error
            raise why(exc) from exc
    return run


async def _run_cli(args: list[str], ctx: Context | None) -> BatchResult:
    """``python -m jaxrun run ARGS --json``; progress per script; SIGTERM when cancelled."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jaxrun", "run", *args, "--json", stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    stderr_tail: list[str] = []

    async def follow_progress() -> None:
        assert proc.stderr is not None
        done, total = 0, None  # total: None until the plan has found every script
        async for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            stderr_tail[:] = (stderr_tail + [line])[-20:]
            started, finished = _STARTED.match(line), _FINISHED.match(line)
            if started:
                total = int(started.group(2)) if started.group(2) != "?" else total
                message = f"running {started.group(3)}"
            elif finished:
                done += 1
                message = f"{finished.group(1)}: {finished.group(2)}"
            else:
                continue
            if ctx is not None:
                await ctx.report_progress(done, total, message)

    try:
        stdout, _ = await asyncio.gather(proc.stdout.read(), follow_progress())  # type: ignore[union-attr]
        await proc.wait()
    except BaseException:
        # Cancelled by the client (or the server is going away): SIGTERM makes jaxrun stop the
        # scripts' process trees and write valid files; SIGKILL would orphan the scripts, so it
        # waits for that, shielded from the cancellation, before letting it go on.
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_GRACE_SECONDS):
                await proc.wait()
        raise
    if proc.returncode == 2 or not stdout.strip():
        detail = next((line for line in reversed(stderr_tail) if line.strip()), f"exit status {proc.returncode}")
        raise ToolError(detail.removeprefix("jaxrun: error: "))
    return BatchResult.model_validate_json(stdout)


# The tools' parameters that are options: their type, help and default come from the options'
# declarations (jaxrun/config/options.py), as the CLI's flags do.
_Devices = described(BatchOptions, "device", str)
_Device = described(RunOptions, "device")
_Recursive = described(BatchOptions, "recursive")
# Seconds, or "none" for no limit, as on the command line: never null, which is what a JSON
# client sends for NaN and infinity.
_Timeout = described(RunOptions, "timeout", Union[float, Literal[NO_TIMEOUT]])  # type: ignore[valid-type]
_BenchmarkRuns = described(RunOptions, "benchmark_runs", int)
_WarmupRuns = described(RunOptions, "warmup_runs", int)
_ResultsDir = described(BatchOptions, "results_dir", Optional[str])
_AllowOtherFiles = described(BatchOptions, "allow_other_files")
_Backend = described(BatchOptions, "backend")
_DEVICE = default_of(RunOptions, "device")


def _new_server(jaxrun_version: str) -> Any:
    """The SDK's server, named jaxrun, with jaxrun's version in ``serverInfo`` (mcp >= 2 takes it;
    1.x's FastMCP does not, and its low-level server would say the SDK's own version)."""
    instructions = "Run folders of JAX scripts and measure them (jaxrun)."
    if "version" in inspect.signature(_Server.__init__).parameters:
        return _Server("jaxrun", instructions=instructions, version=jaxrun_version)
    server = _Server("jaxrun", instructions=instructions)
    server._mcp_server.version = jaxrun_version
    return server


def build_server(roots: list[Path]) -> Any:
    allowed = Roots(roots)
    server = _new_server(version())
    read_only = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)
    runs = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)

    @server.tool(name="execute.run_jax_scripts", annotations=runs)
    @_says_why
    async def run_jax_scripts(pipeline_output_dir: str, device: _Devices = _DEVICE,
                              recursive_search: _Recursive = default_of(BatchOptions, "recursive"),
                              timeout: _Timeout = default_of(RunOptions, "timeout"), results_dir: _ResultsDir = None,
                              allow_other_files: _AllowOtherFiles = False,
                              backend: _Backend = default_of(BatchOptions, "backend"),
                              ctx: Context = None) -> BatchReport:  # type: ignore[assignment]
        """Run every JAX script under a folder, each in its own process, and return what happened:
        per script success, error class, device, phases (import, compile, run) and peak memory.
        One progress notification per script started and finished; cancelling stops the scripts.
        A Ray cluster's address, Slurm's partition, account, ..., and how many scripts run at once
        come from the folder's config file (jaxrun.toml or pyproject.toml: ray_address, a [slurm]
        table, jobs)."""
        folder = allowed.check(pipeline_output_dir, "pipeline_output_dir")
        devices = _option("device", lambda: ",".join(parse_devices(device)))
        _option("timeout", lambda: RunOptions.check_value("timeout", timeout))
        out = allowed.check(results_dir, "results_dir") if results_dir is not None else \
            allowed.roots[0] / "jaxrun_results"
        args = [str(folder), "--device", devices, "--results-dir", str(out)]
        args += ["--timeout", str(timeout)] if timeout is not None else []
        args.append("--recursive" if recursive_search else "--no-recursive")
        args += ["--allow-other-files"] if allow_other_files else []
        _option("backend", lambda: (BatchOptions.check_value("backend", backend), backend_named(backend)))
        args += ["--backend", backend]
        return _summary(await _run_cli(args, ctx))

    @server.tool(name="execute.check_jax_availability", annotations=read_only)
    @_says_why
    def check_jax_availability(device: _Device = _DEVICE) -> Availability:
        """Whether JAX can use a device here (cpu, gpu, tpu, auto, or one device: gpu:1), with the
        devices it sees."""
        from jaxrun.discover.devices import (
            check_device_id,
            get_jax_device_info,
            resolve_device,
        )
        from jaxrun.errors import InvalidDeviceError, JAXExecutionError

        device = _option("device", lambda: validate_device(device))  # echoed as it is meant, never as given
        try:
            facts = get_jax_device_info()
            _, reason = resolve_device(device, facts)  # the reason `jaxrun run` and `jaxrun devices` give
            try:
                check_device_id(device, facts)
            except InvalidDeviceError as missing:  # gpu:3 on two GPUs: the ids there are
                reason = str(missing)
        except JAXExecutionError as exc:
            raise ToolError(str(exc)) from None
        available = reason is None
        platforms = {name: len(p.devices) for name, p in facts.platforms.items() if p.available}
        return Availability(device=device, available=available, jax_version=facts.jax_version,
                            default_backend=facts.default_backend, platforms=platforms, reason=reason)

    @server.tool(name="execute.monitor_jax_performance", annotations=read_only)
    @_says_why
    def monitor_jax_performance(results_dir: str) -> BatchReport:
        """The figures of a results folder: of a finished batch, or of one still running (its
        files are replaced after every script; ``complete`` says which)."""
        from jaxrun.present.view import read_batch
        from jaxrun.results import result_files

        folder = allowed.check(results_dir, "results_dir")
        try:
            return _summary(read_batch(folder))
        except UsageError as exc:
            if not os.path.lexists(folder / result_files.EXECUTION_RESULTS):
                raise ToolError(f"no jaxrun results in {str(folder)!r}: run execute.run_jax_scripts first") from None
            # A damaged file, or one that is not a regular file (a FIFO): one line that says where.
            raise _refused("results_dir", str(exc)) from None

    @server.tool(name="execute.benchmark_jax_script", annotations=runs)
    @_says_why
    # A benchmark tool runs the script more than once by default (the options' 0 means "run once").
    async def benchmark_jax_script(script_path: str, benchmark_runs: _BenchmarkRuns = 5, warmup_runs: _WarmupRuns = 1,
                                   device: _Device = _DEVICE, results_dir: _ResultsDir = None,
                                   allow_other_files: _AllowOtherFiles = False,
                                   ctx: Context = None) -> BenchmarkReport:  # type: ignore[assignment]
        """Benchmark one script: warm-up and counted process runs; the medians of each phase, a 95%
        confidence interval of the median wall time and every run's wall time."""
        script = allowed.check(script_path, "script_path")
        if not script.is_file():
            what = "a folder" if script.is_dir() else "not a regular file" if script.exists() else "missing"
            raise _refused("script_path", f"{shown_value(script_path)} is {what}: execute.benchmark_jax_script "
                           "benchmarks one script (a .py file or a notebook); execute.run_jax_scripts runs a folder")
        device = _option("device", lambda: validate_device(device))
        for name, runs in (("benchmark_runs", benchmark_runs), ("warmup_runs", warmup_runs)):
            _option(name, lambda name=name, runs=runs: RunOptions.check_value(name, runs))
        out = allowed.check(results_dir, "results_dir") if results_dir is not None else \
            allowed.roots[0] / "jaxrun_benchmarks"
        batch = await _run_cli([str(script), "--device", device, "--benchmark-runs", str(benchmark_runs),
                                "--warmup-runs", str(warmup_runs), "--results-dir", str(out), "--no-history",
                                *(["--allow-other-files"] if allow_other_files else [])], ctx)
        if len(batch.script_results) != 1:
            raise _refused("script_path", f"{shown_value(script_path)}: jaxrun found {len(batch.script_results)} "
                           "scripts to run there, not one JAX script")
        result = batch.script_results[0]
        bench = result.benchmark
        stats = bench.statistics if bench is not None else {}
        wall = stats.get("wall_time")
        return BenchmarkReport(
            script_name=result.script_name, success=result.success, device_used=result.device_used,
            runs_completed=bench.runs_completed if bench is not None else 0,
            median={metric: s.median for metric, s in stats.items()},
            ci_low=wall.ci_low if wall else None, ci_high=wall.ci_high if wall else None,
            wall_times=[s.wall_time for s in bench.samples if s.wall_time is not None] if bench is not None else [],
            error_message=result.error_message, results_dir=str(out),
        )

    @server.tool(name="history.changes", annotations=read_only)
    @_says_why
    def history_changes(history: str, script: Optional[str] = None, metric: str = "run_time",
                        since: Optional[str] = None) -> HistoryChanges:
        """Where each series of a history database (one script's benchmarked runs on one device,
        machine, mode and numerics) changed level: the change points (E-divisive means with
        Student's t-test), the candidates below the series' bar, each with its commits, size, 95%
        CI, p-value and kept confirmation, and each series' noise and smallest step found.
        Confirming runs the scripts: `jaxrun history --changes --confirm`."""
        from jaxrun.core.validate import validate_since
        from jaxrun.judge.history import HistoryStore
        from jaxrun.results.benchmark_result import resolve_metric

        database = allowed.check(history, "history")
        if script is not None and (problem := _path_problem(script)) is not None:
            raise _refused("script", problem)
        metric = _option("metric", lambda: resolve_metric(metric))
        since = _option("since", lambda: None if since is None else validate_since(since, "since"))
        if not database.is_file():
            raise _refused("history", f"{shown_value(history)} is not a history database (no such file): "
                           "jaxrun run SCRIPT --benchmark-runs N --history PATH makes one")
        try:
            with HistoryStore(database, create=False) as store:
                if script is not None and not store.match_scripts(script):
                    raise _refused("script", f"{shown_value(script)}: no benchmarked runs of it in the history")
                series = store.series(script, metric=metric, since=since)
        except UsageError as exc:
            raise _refused("history", str(exc)) from None
        return HistoryChanges(history=str(database), metric=metric, since=since,
                              changes=[c.model_dump(mode="json") for s in series for c in s.changes],
                              series=[s.summary.model_dump(mode="json") for s in series])

    for tool in server._tool_manager.list_tools():  # what argument_problem refuses, in the schema a client reads
        tool.parameters["additionalProperties"] = False
    return server


class OneLineFormatter(logging.Formatter):
    """Every record on one plain line: ``jaxrun mcp: INFO: Tool 'x' failed: '...'``; an exception
    as its type and message on that line, never a traceback over many."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"jaxrun mcp: {record.levelname}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f" ({type(exc).__name__}: {exc})"
        return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def plain_logging() -> None:
    """Log on stderr, one plain line per record. The SDK's server configures logging with
    ``logging.basicConfig`` and rich's handler (a boxed, wrapped block per tool error) when it is
    made; basicConfig does nothing once the root logger has a handler, so this one, set first, stays."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def serve(roots: list[Path]) -> None:
    plain_logging()
    build_server(roots).run()  # stdio
