"""Entry point of the child shim. See :mod:`jaxrun.probe`."""

from __future__ import annotations

import os
import resource
import runpy
import sys
import time
import traceback

from . import events, import_timer
from .profiler import Profiler
from .channel import CGROUPS_ENV, EVENTS_ENV, EventWriter
from .jax_hooks import (
    block_until_ready,
    wait_for_device_work,
    compile_cache_facts,
    compile_wall_seconds_outside_imports,
    device_facts,
    jit_seconds,
    watch_jax_import,
)

USAGE = "usage: python -m jaxrun.probe --events FILE [--entry NAME --warm-calls N] [--profile DIR] -- SCRIPT [ARGS...]"
_TRACEBACK_TAIL = 8000
# The module name a script gets in warm mode: its `if __name__ == "__main__":` block stays idle.
WARM_RUN_NAME = "__jaxrun_warm__"


class WarmModeError(LookupError):
    """The script has no callable entry function to run in warm mode."""


def _parse(argv: list[str]) -> tuple[str, str | None, int, str | None, list[str]]:
    try:
        split = argv.index("--")
    except ValueError:
        raise SystemExit(USAGE) from None
    options, script_argv = argv[:split], argv[split + 1 :]
    values = dict(zip(options[::2], options[1::2]))
    known = {"--events", "--entry", "--warm-calls", "--profile"}
    if not script_argv or len(options) % 2 or "--events" not in values or set(values) - known:
        raise SystemExit(USAGE)
    entry = values.get("--entry")
    calls = int(values.get("--warm-calls", "1"))
    return values["--events"], entry, calls, values.get("--profile"), script_argv


def _run_warm(writer: EventWriter, script: str, entry: str, calls: int) -> None:
    """Load the module without its __main__ block, then time `entry()` `calls` times."""
    namespace = runpy.run_path(script, run_name=WARM_RUN_NAME)
    function = namespace.get(entry)
    if not callable(function):
        raise WarmModeError(
            f"warm mode calls {entry}() but {os.path.basename(script)} defines no function {entry!r}; "
            "define it (returning the arrays it computes) or run without --warm"
        )
    for index in range(1, calls + 1):
        jit_before = jit_seconds()
        started = time.perf_counter()
        block_until_ready(function())
        seconds = time.perf_counter() - started
        writer.emit(events.CALL, index=index, seconds=seconds, compile_time=jit_seconds() - jit_before)


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _own_peak_rss_kb() -> int | None:
    """This process's peak RSS since it started the probe (Linux VmHWM, which exec resets);
    ``ru_maxrss`` is no use: it keeps the peak of the launcher that forked this process."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _script_traceback(exc: BaseException) -> BaseException:
    """Drop the probe's and runpy's frames so the traceback reads as `python script.py`'s."""
    tb = exc.__traceback__
    while tb is not None and (
        tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>")
        or tb.tb_frame.f_code.co_filename.endswith("runpy.py")
    ):
        tb = tb.tb_next
    return exc.with_traceback(tb)


def _message(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when the exception's own ``__str__`` fails."""
    try:
        return str(exc)
    except Exception as failure:  # noqa: BLE001 - any error of the script's __str__
        return f"<the exception's message could not be rendered: {type(failure).__name__}>"


def _exception_event(writer: EventWriter, exc: BaseException) -> None:
    # traceback renders an unprintable exception itself ("<exception str() failed>").
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    kind = type(exc)
    writer.emit(
        events.EXCEPTION,
        pid=os.getpid(),
        exc_type=kind.__name__,
        exc_module=kind.__module__,
        exc_mro=[k.__name__ for k in kind.__mro__],
        message=_message(exc),
        traceback=text[-_TRACEBACK_TAIL:],
    )


def _join_cgroups() -> dict[str, object]:
    """Move this process into the run's cgroups (before the script can start anything), so that
    every process the script starts is born in them; the START event says how it went."""
    folders = [f for f in os.environ.pop(CGROUPS_ENV, "").split(os.pathsep) if f]
    if not folders:
        return {}
    me = str(os.getpid())
    for folder in folders:
        path = os.path.join(folder, "cgroup.procs")
        try:
            with open(path, encoding="ascii") as procs:
                if me in procs.read().split():
                    continue  # the parent moved it here already (run/cgroups.py: adopt)
            with open(path, "w", encoding="ascii") as procs:
                procs.write(me)
        except OSError as exc:
            return {"cgroup_joined": False, "cgroup_error": f"{folder}: {exc.strerror or exc}"}
    return {"cgroup_joined": True}


def _wait_as_spare() -> tuple[list[str], float] | None:
    """``--spare`` (jaxrun/run/spare.py): ready, wait for a job on stdin, become its probe (its
    environment, folder and stdin as a launched probe would have them). None: no job came."""
    _join_cgroups()  # its own group, which becomes its job's (run/spare.py); the job's START says
    ready_at = time.perf_counter()
    line = sys.stdin.buffer.readline()
    if not line:
        return None  # jaxrun stopped or no longer needs this spare
    import json

    job = json.loads(line.decode("utf-8", errors="surrogateescape"))
    os.environ.clear()
    os.environ.update({k: v for k, v in job["env"].items()})
    os.chdir(job["cwd"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return list(job["argv"]), ready_at


def main(argv: list[str]) -> int:
    spare_ready_at = None
    if argv == ["--spare"]:
        job = _wait_as_spare()
        if job is None:
            return 0
        argv, spare_ready_at = job
    events_path, entry, calls, profile_dir, script_argv = _parse(argv)
    script = script_argv[0]
    joined = _join_cgroups()
    writer = EventWriter(events_path)
    # jaxrun.record, in this process or in any process the script starts, finds the channel here.
    os.environ[EVENTS_ENV] = events_path
    probe_pid = os.getpid()
    if spare_ready_at is not None:
        joined["spare_ready_at"] = spare_ready_at
    writer.emit(events.START, pid=probe_pid, python=sys.version.split()[0], **joined)
    profiler = Profiler(profile_dir) if profile_dir else None
    watch_jax_import(writer, [profiler.on_jax_loaded] if profiler else None)

    # Make the script see the world exactly as `python script.py` would.
    sys.argv = list(script_argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    exit_code = 0
    import_timer.start()
    started = time.perf_counter()
    namespace: dict[str, object] = {}
    try:
        if entry is None:
            # Kept until the end: the script's arrays stay alive for wait_for_device_work.
            namespace = runpy.run_path(script, run_name="__main__")
        else:
            _run_warm(writer, script, entry, calls)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            exit_code = 0
        elif isinstance(code, int):
            exit_code = code
        else:
            print(code, file=sys.stderr)
            exit_code = 1
        writer.emit(events.EXIT, pid=os.getpid(), code=exit_code)
    except KeyboardInterrupt as exc:
        _script_traceback(exc)
        _exception_event(writer, exc)
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        exit_code = 130
    except BaseException as exc:  # the script's failure is the result, reported in full
        _script_traceback(exc)
        _exception_event(writer, exc)
        traceback.print_exception(type(exc), exc, exc.__traceback__)
        exit_code = 1
    if exit_code == 0:
        wait_for_device_work()
    body_time = time.perf_counter() - started
    import_timer.stop()
    if os.getpid() != probe_pid:
        # A child the script forked (os.fork) left the script's code: it ends as it would under
        # plain python; its body, exception or exit is not the script's.
        sys.stdout.flush()
        sys.stderr.flush()
        return exit_code

    extra = {}
    if profiler is not None:
        profiler.finish(writer)
        extra["imports"] = [[start, end] for start, end in import_timer.recent]
    writer.emit(
        events.END,
        body_start=started,
        **extra,
        body_time=body_time,
        import_time=import_timer.import_seconds(),
        compile_wall_time=compile_wall_seconds_outside_imports(),
        cpu_time=_cpu_seconds(),
        peak_rss_kb=_own_peak_rss_kb(),
        device=device_facts(),
        compile_cache=compile_cache_facts(),
        exit_code=exit_code,
    )
    writer.close()
    sys.stdout.flush()
    sys.stderr.flush()
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
