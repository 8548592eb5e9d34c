"""Entry point of the child shim. See :mod:`jaxrun.probe`."""

from __future__ import annotations

import io
import os
import sys
import time

from jaxrun.probe import events, exiting
from jaxrun.probe.arguments import PRESTART_SERVER, SPARE, ProbeArguments
from jaxrun.probe.cgroup_join import join_cgroups
from jaxrun.probe.channel import EVENTS_ENV, EventWriter
from jaxrun.probe.cluster import in_job
from jaxrun.probe.ending import Body
from jaxrun.probe.jax_hooks import (
    block_until_ready,
    jit_seconds,
    live_array_bytes,
    watch_jax_import,
)
from jaxrun.probe.lifeline import hold_scripts_lock
from jaxrun.probe.lifeline import watch as watch_lifeline

_TRACEBACK_TAIL = 8000
# What starts a file that runpy runs otherwise than as source: a compiled file's magic number
# (importlib.util.MAGIC_NUMBER, from the import system already loaded), a zip file's header.
_NOT_SOURCE = (sys.modules["_frozen_importlib_external"].MAGIC_NUMBER, b"PK\x03\x04")
# notebook_cells.SUFFIX; the notebook's modules are imported only for a notebook (its `re` is not every script's).
NOTEBOOK_SUFFIX = ".ipynb"
# The module name a script gets in warm mode: its `if __name__ == "__main__":` block stays idle.
WARM_RUN_NAME = "__jaxrun_warm__"


class WarmModeError(LookupError):
    """The script has no callable entry function to run in warm mode."""


def _script_code(path: str) -> object:
    """The script compiled, as ``python script.py`` compiles it before its first line (and so
    before the body begins: compiling is not the script's run time); None where runpy must run it
    (a compiled file, a folder, a zip file). An error (a SyntaxError, an unreadable file) is
    returned, to be raised as the body begins, where the script's own errors are."""
    try:
        with io.open_code(os.path.abspath(os.fsdecode(path))) as file:  # as runpy opens it
            source = file.read()
    except IsADirectoryError:
        return None
    except BaseException as exc:  # noqa: BLE001 - raised in the body: the script's failure
        return exc
    if source.startswith(_NOT_SOURCE) or not os.path.isfile(path):
        return None
    try:
        # dont_inherit: the script is compiled with its own __future__ imports, never the probe's.
        return compile(source, path, "exec", dont_inherit=True)
    except BaseException as exc:  # noqa: BLE001 - as above
        return exc


def _run_script(path: str, code: object) -> dict[str, object]:
    """``runpy.run_path(path, run_name="__main__")`` for ``code`` (:func:`_script_code`), done as
    runpy does it for a file of source code (run in a new ``__main__`` module with ``sys.argv[0]``
    set to it, a copy of its globals returned), without the ``pkgutil`` runpy imports for it (~7 ms
    of CPU in a fresh interpreter, in every script's process). Anything else runpy can run (a
    compiled file, a folder, a zip file) is runpy's."""
    if isinstance(code, BaseException):
        raise code
    if code is None:
        import runpy

        return runpy.run_path(path, run_name="__main__")
    module = type(sys)("__main__")
    saved_main, saved_argv0 = sys.modules.get("__main__"), sys.argv[0]
    sys.modules["__main__"] = module
    sys.argv[0] = path
    try:
        run_globals = module.__dict__
        run_globals.update(__name__="__main__", __file__=path, __cached__=None, __doc__=None, __loader__=None,
                           __package__="", __spec__=None)
        exec(code, run_globals)  # type: ignore[arg-type]
    finally:
        sys.argv[0] = saved_argv0
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        else:
            del sys.modules["__main__"]
    return run_globals.copy()


def _run_warm(writer: EventWriter, script: str, entry: str, calls: int) -> None:
    """Load the module without its __main__ block, then time `entry()` `calls` times."""
    import runpy

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
        call = events.Call(type=events.CALL, index=index, seconds=seconds, compile_time=jit_seconds() - jit_before)
        live = live_array_bytes()  # after the call, its return value dropped: what it left alive
        if live is not None:
            call["live_array_bytes"] = live
        writer.send(call)


# The probe's own files whose frames a script's traceback leaves out (a notebook's runner's too).
_PROBE_FILES = (__file__, *(os.path.join(os.path.dirname(__file__), name) for name in ("notebook.py", "notebook_cells.py")))


def _script_traceback(exc: BaseException) -> BaseException:
    """Drop the probe's and runpy's frames so the traceback reads as `python script.py`'s."""
    tb = exc.__traceback__
    while tb is not None and (
        tb.tb_frame.f_code.co_filename in (*_PROBE_FILES, "<frozen runpy>")
        or tb.tb_frame.f_code.co_filename.endswith("runpy.py")
    ):
        tb = tb.tb_next
    return exc.with_traceback(tb)


def _message(value: object) -> str:
    """``str(value)`` (an exception, a ``sys.exit`` argument), or a stand-in when its own
    ``__str__`` fails."""
    try:
        return str(value)
    except Exception as failure:  # noqa: BLE001 - any error of the script's __str__
        return f"<the message could not be rendered: {type(failure).__name__}>"


def _is_probe_frame(line: str) -> bool:
    return line.lstrip().startswith(('File "<frozen runpy>"', *(f'File "{f}"' for f in _PROBE_FILES))) or (
        line.lstrip().startswith('File "') and '/runpy.py", line' in line)


# The bottom frame of a probe started as ``python -c ENTRY`` (probe/arguments.py): the probe's when
# the next frame is the probe's; a script's own code run from a string keeps its frames.
_ENTRY_FRAME = 'File "<string>", line 1, in <module>'


def _is_entry_frame(lines: list[str], index: int) -> bool:
    if lines[index].strip() != _ENTRY_FRAME:
        return False
    following = next((line for line in lines[index + 1:] if line.lstrip().startswith('File "')), "")
    return _is_probe_frame(following)


def _without_probe_frames(text: str) -> str:
    """``text`` without the probe's and runpy's frames (and their source lines), wherever they
    are: a host callback's traceback is copied into the message of the runtime's error, from the
    bottom of the stack, where the probe's frames are."""
    kept: list[str] = []
    skipping = False
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if _is_probe_frame(line) or _is_entry_frame(lines, index):
            skipping = True
            continue
        if skipping and line.startswith("    ") and not line.lstrip().startswith('File "'):
            continue  # the dropped frame's source line and its ^^^ markers
        skipping = False
        kept.append(line)
    return "".join(kept)


def _exception_event(writer: EventWriter, exc: BaseException) -> str:
    """Report the script's exception; return its traceback as ``python script.py`` prints it."""
    import traceback  # here: with textwrap and tokenize it is ~3 ms of every script's start-up

    # traceback renders an unprintable exception itself ("<exception str() failed>").
    text = _without_probe_frames("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    kind = type(exc)
    writer.send(events.Exception_(
        type=events.EXCEPTION,
        pid=os.getpid(),
        exc_type=kind.__name__,
        exc_module=kind.__module__,
        exc_mro=[k.__name__ for k in kind.__mro__],
        message=_without_probe_frames(_message(exc)),
        traceback=text[-_TRACEBACK_TAIL:],
    ))
    return text


def _wait_as_spare() -> tuple[list[str], float] | None:
    """``--spare`` (jaxrun/run/process/spare.py): ready, wait for a job on stdin, become its probe (its
    environment, folder and stdin as a launched probe would have them). None: no job came."""
    join_cgroups()  # its own group, which becomes its job's (run/process/spare.py); the job's START says
    ready_at = time.perf_counter()
    data = sys.stdin.buffer.read()  # jaxrun closes it after the job
    if not data:
        return None  # jaxrun stopped or no longer needs this spare
    import marshal  # built in: json's import is ~5 ms of CPU (run/process/spare.py wrote it with this interpreter)

    job = marshal.loads(data)
    os.environ.clear()
    os.environ.update({k: v for k, v in job["env"].items()})
    os.chdir(job["cwd"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return list(job["argv"]), ready_at


def main(argv: list[str]) -> int:
    if argv[:1] == [PRESTART_SERVER]:
        # What an exec'd probe holds here: a forked child forgets what the server adds to it.
        baseline = frozenset(sys.modules)
        from jaxrun.probe.fork_server import serve

        forked = serve(argv[1:], baseline, watch_lifeline)  # the server's own lifeline: it ends with jaxrun
        if forked is None:
            return 0  # the server, told to end
        argv = forked  # a forked child, now what an exec'd probe is here: its own lifeline next
    spare = argv == [SPARE]
    # Into the run's cgroups first, while this process has one thread (the kernel moves a lone
    # thread quickest: probe/cgroup_join.py); a spare joins its own group as it waits.
    joined = {} if spare else join_cgroups()
    watch_lifeline()  # before anything can run: a spare too (it may wait long for its job)
    spare_ready_at = None
    if spare:
        job = _wait_as_spare()
        if job is None:
            return 0
        argv, spare_ready_at = job
        joined = join_cgroups()
    hold_scripts_lock()  # the job's environment names it (a spare has it only now)
    arguments = ProbeArguments.parse(argv)
    events_path, entry, profile_dir = arguments.events, arguments.entry, arguments.profile
    script_argv = list(arguments.script_argv)
    script = script_argv[0]
    writer = EventWriter(events_path)
    # jaxrun.record, in this process or in any process the script starts, finds the channel here.
    os.environ[EVENTS_ENV] = events_path
    probe_pid = os.getpid()
    if spare_ready_at is not None:
        joined["spare_ready_at"] = spare_ready_at
    writer.send(events.Start(type=events.START, pid=probe_pid, python=sys.version.split()[0], **joined))  # type: ignore[typeddict-item]
    profiler = None
    if profile_dir:
        from jaxrun.probe.profiler import Profiler

        profiler = Profiler(profile_dir)
    watch_jax_import(writer, [profiler.on_jax_loaded] if profiler else None, analyse=bool(arguments.xla_analysis))

    # Make the script see the world exactly as `python script.py` would.
    sys.argv = list(script_argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    body = Body(writer, [profiler.finish] if profiler else None)
    exit_code, ended_by = 0, "return"
    namespace: dict[str, object] = {}
    if script.endswith(NOTEBOOK_SUFFIX) or entry is not None:
        # The interpreter's first compilation sets its compiler up (~1 ms): not a cell's time, nor warm mode's.
        compile(b"", "<jaxrun>", "exec")
        code = None
    else:
        code = _script_code(script)
    body.begin()
    try:
        if script.endswith(NOTEBOOK_SUFFIX):
            if entry is not None:
                from jaxrun.probe.notebook_cells import (
                    no_warm_mode,  # jaxrun refuses it first; a probe run by hand too
                )

                raise WarmModeError(no_warm_mode(os.path.basename(script), entry))
            from jaxrun.probe.notebook import run_notebook

            namespace = run_notebook(writer, script, capture=bool(arguments.cell_outputs), body=body)  # noqa: F841
        elif entry is None:
            # Kept until the end: the script's arrays stay alive for the drain (probe/drain.py).
            namespace = _run_script(script, code)  # noqa: F841
        else:
            _run_warm(writer, script, entry, arguments.warm_calls)
    except SystemExit as exc:
        exit_code, message = _exit_status(exc.code)
        ended_by = f"sys.exit({exit_code})"
        exited = events.Exit(type=events.EXIT, pid=os.getpid(), code=exit_code)
        if message is not None:
            print(message, file=sys.stderr)
            exited["message"] = message
        writer.send(exited)
    except BaseException as exc:  # the script's failure is the result, reported in full
        _script_traceback(exc)
        sys.stderr.write(_exception_event(writer, exc))
        exit_code = 130 if isinstance(exc, KeyboardInterrupt) else 1
        ended_by = "exception"
    if os.getpid() != probe_pid:
        # A child the script forked (os.fork) left the script's code: it ends as it would under
        # plain python; its body, exception or exit is not the script's.
        sys.stdout.flush()
        sys.stderr.flush()
        return exit_code
    body.end(exit_code, ended_by, wait_for_devices=exit_code == 0)
    if exit_code != 0 and in_job():
        # A failed process of a multi-process job (--processes N) ends now, its END event written:
        # JAX's distributed shutdown at exit would wait at a barrier for the others, which are
        # themselves waiting for this one (jaxrun stops them as soon as it is gone).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)
    return exit_code


def _exit_status(code: object) -> tuple[int, str | None]:
    """The status ``sys.exit(code)`` gives under ``python``, and the text it prints, if any."""
    if code is None:
        return 0, None
    if isinstance(code, int):
        return code, None
    return 1, _message(code)


def run() -> None:
    """The probe's process (arguments.ENTRY): its arguments follow ``-c ENTRY``."""
    exiting.leave(main(sys.argv[1:]))


if __name__ == "__main__":
    run()
