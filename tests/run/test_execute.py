"""execute_jax_script end to end: crafted scripts in tmp_path, run as real processes with real JAX on CPU.

Each test writes a small script, runs it through the probe exactly as a user would, and checks the
ScriptResult jaxrun returns (and the files it leaves behind).
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import jsonschema
import psutil
import pytest

import jaxrun
from jaxrun import ScriptResult, execute_jax_script
from jaxrun.errors import (
    InvalidDeviceError,
    ScriptFailedError,
    ScriptNotFoundError,
    UsageError,
)
from jaxrun.results.models import SCHEMA_VERSION
from jaxrun.run.reading.classify import HINTS


def write_script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def run(path: Path, results_dir: Path, **kwargs) -> ScriptResult:
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("timeout", 120)
    return execute_jax_script(path, results_dir=results_dir, **kwargs)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return tmp_path / "results"


def assert_failed(result: ScriptResult, error_class: str) -> None:
    assert result.success is False, result.error_message
    assert result.error_class == error_class, (result.error_class, result.error_message)
    assert result.hint == HINTS[error_class]
    assert result.error_message
    assert result.attempts[-1].error_class == error_class


# --- the error taxonomy, one real process per class ---------------------------------------------


def test_syntax_error(tmp_path, results):
    script = write_script(tmp_path, "bad_syntax.py", "x = 1\ndef f(:\n    pass\n")
    result = run(script, results)
    assert_failed(result, "syntax_error")
    assert result.exception_type == "SyntaxError"
    assert "line 2" in result.error_message
    assert result.exit_code == 1 and result.signal is None
    assert result.body_time is not None  # the probe itself ran and reported


def test_import_error(tmp_path, results):
    script = write_script(tmp_path, "missing_import.py", "import jaxrun_no_such_module_for_tests\n")
    result = run(script, results)
    assert_failed(result, "import_error")
    assert result.exception_type == "ModuleNotFoundError"
    assert "jaxrun_no_such_module_for_tests" in result.error_message
    assert result.exit_code == 1 and result.signal is None


def test_script_error_keeps_message_and_traceback(tmp_path, results):
    script = write_script(
        tmp_path,
        "raises.py",
        """
        def helper():
            raise ValueError("boom 42")

        helper()
        """,
    )
    result = run(script, results)
    assert_failed(result, "script_error")
    assert result.exception_type == "ValueError"
    assert result.error_message == "ValueError: boom 42"
    assert result.exit_code == 1 and result.signal is None
    # the traceback reads like `python raises.py`: the script's frames, none of the probe's
    assert 'raises.py", line 5, in <module>' in result.traceback
    assert "in helper" in result.traceback
    assert "runpy" not in result.traceback and "jaxrun/probe" not in result.traceback
    stderr = Path(result.stderr_log).read_text()
    assert "ValueError: boom 42" in stderr


NAN_SCRIPT = """
import jax
import jax.numpy as jnp

@jax.jit
def f(x):
    return jnp.log(x) * 2.0

y = f(-1.0)
print("value", float(y))
"""


@pytest.mark.slow
def test_numerical_instability_with_debug_nans(tmp_path, results):
    script = write_script(tmp_path, "nan_jit.py", NAN_SCRIPT)
    result = run(script, results, debug_nans=True)
    assert_failed(result, "numerical_instability")
    assert result.exception_type == "FloatingPointError"
    assert "nan" in result.error_message.lower()
    # JAX names the primitive, and the traceback points at the line of the script that made the NaN
    assert "log" in result.error_message
    assert 'nan_jit.py", line 7, in f' in result.traceback
    assert "jnp.log(x)" in result.traceback


@pytest.mark.slow
def test_nan_without_debug_nans_is_a_success(tmp_path, results):
    script = write_script(tmp_path, "nan_jit.py", NAN_SCRIPT)
    result = run(script, results)
    assert result.success is True and result.error_class is None and result.hint is None
    assert result.exit_code == 0
    assert "value nan" in Path(result.stdout_log).read_text()


def test_compilation_failed_python_if_on_tracer(tmp_path, results):
    script = write_script(
        tmp_path,
        "traced_if.py",
        """
        import jax

        @jax.jit
        def f(x):
            if x > 0:
                return x
            return -x

        f(1.0)
        """,
    )
    result = run(script, results)
    assert_failed(result, "compilation_failed")
    assert result.exception_type == "TracerBoolConversionError"
    assert "if x > 0" in result.traceback
    assert result.exit_code == 1


def test_out_of_memory_absurd_allocation_on_cpu(tmp_path, results):
    # On this CPU backend a 4 TiB buffer fails cleanly with RESOURCE_EXHAUSTED (no OOM killer).
    script = write_script(
        tmp_path,
        "huge.py",
        """
        import jax.numpy as jnp
        x = jnp.zeros((2**40,), jnp.float32)
        print(x.shape)
        """,
    )
    result = run(script, results, retries=2)
    # XLA's memory analysis of the program said so as it compiled (probe/memory_fit.py), and the
    # failure's hint carries that evidence before the usual advice.
    [warning] = [w for w in result.warnings if "will likely run out of memory" in w]
    assert warning.startswith("jit(broadcast_in_dim) needs 4 TiB on cpu:0 (outputs 4 TiB;")
    assert result.hint == f"jaxrun warned at compile time: {warning}. R{HINTS['out_of_memory'][1:]}"  # "reduce ..."
    result = result.model_copy(update={"hint": HINTS["out_of_memory"]})
    assert_failed(result, "out_of_memory")
    assert "RESOURCE_EXHAUSTED" in result.error_message
    assert result.exception_type in ("JaxRuntimeError", "XlaRuntimeError")
    # host out-of-memory is not transient: no retry although retries were allowed
    assert len(result.attempts) == 1


def test_out_of_memory_memory_error(tmp_path, results):
    script = write_script(tmp_path, "memerr.py", "raise MemoryError('cannot allocate the table')\n")
    result = run(script, results)
    assert_failed(result, "out_of_memory")
    assert result.exception_type == "MemoryError"
    assert "cannot allocate the table" in result.error_message
    assert result.exit_code == 1


@pytest.mark.slow
def test_timeout(tmp_path, results):
    script = write_script(tmp_path, "sleepy.py", "import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    result = run(script, results, timeout=2)
    assert_failed(result, "timeout")
    assert "2 s" in result.error_message
    assert result.exit_code is None
    assert result.signal == signal.SIGTERM
    assert result.execution_time >= 2.0
    # The body never finished: jaxrun measured it up to the kill, its split unknown.
    assert 0 < result.body_time <= result.execution_time
    assert result.import_time is None and result.run_time is None and result.ended_by is None
    assert "stopped at the time limit" in result.phases_note
    assert "started" in Path(result.stdout_log).read_text()  # output up to the kill is kept


@pytest.mark.slow
def test_timeout_of_a_script_that_ignores_sigterm(tmp_path, results):
    script = write_script(
        tmp_path,
        "stubborn.py",
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
        """,
    )
    result = run(script, results, timeout=1)
    assert_failed(result, "timeout")
    assert result.signal == signal.SIGKILL  # SIGTERM was ignored, the grace period ended in SIGKILL


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_crashed_by_signal(tmp_path, results, sig):
    script = write_script(tmp_path, "dies.py", f"import os, signal\nos.kill(os.getpid(), {int(sig)})\n")
    result = run(script, results)
    assert_failed(result, "crashed")
    assert result.signal == sig
    assert result.exit_code is None
    assert signal.Signals(sig).name in result.error_message
    assert result.exception_type is None


def test_keyboard_interrupt_inside_the_script_is_a_result(tmp_path, results):
    # The script raising KeyboardInterrupt itself is one failed result, not a Ctrl-C of jaxrun:
    # execute_jax_script returns (a batch goes on) instead of raising.
    script = write_script(tmp_path, "ctrl_c.py", "raise KeyboardInterrupt\n")
    result = run(script, results, retries=2)
    # jaxrun did not interrupt it: the script's own KeyboardInterrupt is a script error.
    assert not result.success and result.error_class == "script_error"
    assert "raised KeyboardInterrupt itself" in result.hint
    assert result.exception_type == "KeyboardInterrupt"
    assert result.exit_code == 130
    assert len(result.attempts) == 1


def test_exit_status(tmp_path, results):
    script = write_script(tmp_path, "exit3.py", "import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)\n")
    result = run(script, results)
    assert not result.success and result.error_class == "script_error"
    assert result.exit_code == 3
    assert "status 3" in result.error_message and "bye" in result.error_message
    assert "sys.exit(3)" in result.error_message and "traceback" not in result.hint  # there is none

    ok = run(write_script(tmp_path, "exit0.py", "import sys\nsys.exit(0)\n"), results)
    assert ok.success is True and ok.exit_code == 0


def test_device_unavailable_tpu_without_fallback(tmp_path, results):
    marker = tmp_path / "ran.txt"
    script = write_script(tmp_path, "needs_tpu.py", f"open({str(marker)!r}, 'w').write('ran')\n")
    if jaxrun.get_jax_device_info().platforms["tpu"].available:
        pytest.skip("a TPU is usable here, so it cannot stand for an absent platform")
    reason = jaxrun.get_jax_device_info().platforms["tpu"].error
    assert reason  # no TPU here: the device facts say why

    result = run(script, results, device="tpu", fallback=False, retries=2)
    assert_failed(result, "device_unavailable")
    assert reason in result.error_message
    assert result.device_requested == "tpu"
    assert result.device_used is None
    assert result.exit_code is None and result.signal is None
    # decided from the device facts: never launched, never retried
    assert not marker.exists()
    assert len(result.attempts) == 1
    assert result.attempts[0].device == "tpu"
    assert result.attempts[0].error_class == "device_unavailable"
    assert result.stdout_log is None


# --- gpu -> cpu fallback --------------------------------------------------------------------------


@pytest.mark.slow
def test_gpu_falls_back_to_cpu(tmp_path, results):
    script = write_script(
        tmp_path,
        "on_gpu.py",
        """
        import os
        import jax
        import jax.numpy as jnp
        import jaxrun
        jaxrun.record(backend=jax.default_backend(), platforms=os.environ["JAX_PLATFORMS"],
                      total=float(jnp.arange(4.0).sum()))
        """,
    )
    result = run(script, results, device="gpu")
    assert result.success is True, result.error_message
    assert result.device_requested == "gpu"
    gpu = jaxrun.get_jax_device_info().platforms["gpu"]
    if gpu.available:
        # A GPU JAX can use is here: the script runs on it, with JAX_PLATFORMS naming its backend,
        # and nothing falls back (test_an_absent_accelerator_falls_back_to_cpu covers the fallback).
        assert result.device_used == "gpu" and result.jax_backend == "gpu"
        assert result.fallback_reason is None
        assert [(a.device, a.error_class, a.success) for a in result.attempts] == [("gpu", None, True)]
        assert result.results == {"backend": "gpu", "platforms": gpu.backend, "total": 6.0}
        return
    assert result.device_used == "cpu"
    assert result.jax_backend == "cpu"
    assert "gpu" in result.fallback_reason and "device_unavailable" in result.fallback_reason
    assert [a.device for a in result.attempts] == ["gpu", "cpu"]
    assert [a.error_class for a in result.attempts] == ["device_unavailable", None]
    assert [a.success for a in result.attempts] == [False, True]
    assert result.results == {"backend": "cpu", "platforms": "cpu", "total": 6.0}


def test_an_absent_accelerator_falls_back_to_cpu(tmp_path, results):
    """The fallback on every machine: the TPU stands for an absent accelerator (a GPU may be here)."""
    if jaxrun.get_jax_device_info().platforms["tpu"].available:
        pytest.skip("a TPU is usable here, so it cannot stand for an absent accelerator")
    script = write_script(
        tmp_path,
        "on_tpu.py",
        """
        import os
        import jax
        import jax.numpy as jnp
        import jaxrun
        jaxrun.record(backend=jax.default_backend(), platforms=os.environ["JAX_PLATFORMS"],
                      total=float(jnp.arange(4.0).sum()))
        """,
    )
    result = run(script, results, device="tpu", retries=2)
    assert result.success is True, result.error_message
    assert (result.device_requested, result.device_used, result.jax_backend) == ("tpu", "cpu", "cpu")
    assert "tpu" in result.fallback_reason and "device_unavailable" in result.fallback_reason
    # absent by the device facts: not launched and not retried on the TPU, straight to the CPU
    assert [(a.device, a.error_class, a.success) for a in result.attempts] == [
        ("tpu", "device_unavailable", False), ("cpu", None, True),
    ]
    assert result.results == {"backend": "cpu", "platforms": "cpu", "total": 6.0}


def test_gpu_without_fallback_fails(tmp_path, results):
    script = write_script(tmp_path, "on_gpu.py", "print('should not run')\n")
    result = run(script, results, device="gpu", fallback=False)
    if jaxrun.get_jax_device_info().platforms["gpu"].available:
        # Nothing to fail here: the GPU works, so fallback=False changes nothing (the absent-device
        # failure without fallback is test_device_unavailable_tpu_without_fallback's).
        assert result.success is True and result.device_used == "gpu", result.error_message
        assert result.fallback_reason is None and len(result.attempts) == 1
        return
    assert_failed(result, "device_unavailable")
    assert "gpu" in result.error_message
    assert result.fallback_reason is None
    assert result.device_used is None
    assert len(result.attempts) == 1


# --- retries ---------------------------------------------------------------------------------------


FLAKY_SCRIPT = """
import os, sys
marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tried_once")
if not os.path.exists(marker):
    open(marker, "w").close()
    print("first attempt")
    raise RuntimeError("Unable to initialize backend 'cuda': CUDA_ERROR_NO_DEVICE (test)")
print("second attempt")
"""


def test_transient_failure_is_retried_and_logs_kept(tmp_path, results):
    # a dotted name must survive the renaming of the first attempt's logs
    script = write_script(tmp_path, "flaky.py", FLAKY_SCRIPT)
    result = run(script, results, retries=1, name="v1.2__flaky")
    assert result.success is True, result.error_message
    assert len(result.attempts) == 2
    assert result.attempts[0].error_class == "device_unavailable"
    assert result.attempts[0].exit_code == 1
    assert result.attempts[1].success is True
    assert result.device_used == "cpu" and result.fallback_reason is None

    logs = results / "logs"
    first_err = logs / "v1.2__flaky.attempt1.stderr.log"
    first_out = logs / "v1.2__flaky.attempt1.stdout.log"
    assert "Unable to initialize backend 'cuda'" in first_err.read_text()
    assert first_out.read_text() == "first attempt\n"
    assert Path(result.stdout_log) == logs / "v1.2__flaky.stdout.log"
    assert Path(result.stdout_log).read_text() == "second attempt\n"
    assert "Unable to initialize" not in Path(result.stderr_log).read_text()


def test_non_transient_failure_is_not_retried(tmp_path, results):
    script = write_script(tmp_path, "value_error.py", "raise ValueError('deterministic')\n")
    result = run(script, results, retries=3)
    assert_failed(result, "script_error")
    assert len(result.attempts) == 1
    assert not list((results / "logs").glob("*attempt*"))


@pytest.mark.slow
def test_retries_are_bounded(tmp_path, results):
    count = tmp_path / "count.txt"
    script = write_script(
        tmp_path,
        "always_flaky.py",
        f"""
        with open({str(count)!r}, "a") as f:
            f.write("x")
        raise RuntimeError("Unable to initialize backend 'cuda': still no device")
        """,
    )
    result = run(script, results, retries=2)
    assert_failed(result, "device_unavailable")
    assert count.read_text() == "xxx"  # 1 attempt + 2 retries, and no CPU fallback from CPU
    assert [a.number for a in result.attempts] == [1, 2, 3]
    assert result.fallback_reason is None
    assert (results / "logs" / "always_flaky.attempt1.stderr.log").exists()
    assert (results / "logs" / "always_flaky.attempt2.stderr.log").exists()


# --- the process tree ------------------------------------------------------------------------------


TREE_SCRIPT = r'''
import os, subprocess, sys, time

pidfile = sys.argv[1]
GRANDCHILD = "import time; time.sleep(120)"
CHILD = (
    "import subprocess, sys, time\n"
    "g = subprocess.Popen([sys.executable, '-c', %r])\n"
    "open(sys.argv[1], 'a').write('grandchild %%d\\n' %% g.pid)\n"
    "time.sleep(120)\n" % GRANDCHILD
)
# leaves the process group: a killpg of the script's group alone would miss it
ESCAPER = "import os, sys, time; os.setsid(); open(sys.argv[1], 'a').write('escaper %d\\n' % os.getpid()); time.sleep(120)"
child = subprocess.Popen([sys.executable, "-c", CHILD, pidfile])
escaper = subprocess.Popen([sys.executable, "-c", ESCAPER, pidfile])
with open(pidfile, "a") as f:
    f.write(f"child {child.pid}\n")
time.sleep(120)
'''


def read_pids(pidfile: Path) -> dict[str, int]:
    return {role: int(pid) for role, pid in (line.split() for line in pidfile.read_text().splitlines())}


def describe(pid: int) -> str:
    try:
        proc = psutil.Process(pid)
        parent = psutil.Process(proc.ppid())
        return f"{proc.status()}, parent {parent.pid} {parent.cmdline()}"
    except psutil.NoSuchProcess:
        return "gone"


def still_running(pid: int) -> bool:
    """True unless the process is gone. A killed orphan belongs to init (pid 1), which may take a
    moment to reap it: that zombie is dead, and it is not jaxrun's (nor this test's) to reap."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            assert proc.ppid() != os.getpid(), f"pid {pid} is an unreaped zombie of the test process"
            return False
        return True
    except psutil.NoSuchProcess:
        return False


def assert_all_gone(pids: dict[str, int]) -> None:
    for role, pid in pids.items():
        assert not still_running(pid), f"{role} (pid {pid}) survived: {describe(pid)}"


@pytest.mark.slow
def test_timeout_kills_children_grandchildren_and_escapees(tmp_path, results):
    pidfile = tmp_path / "pids.txt"
    script = write_script(tmp_path, "tree.py", TREE_SCRIPT)
    result = run(script, results, timeout=3, args=[str(pidfile)])
    assert_failed(result, "timeout")
    pids = read_pids(pidfile)
    assert set(pids) == {"child", "grandchild", "escaper"}
    assert_all_gone(pids)


def test_background_processes_are_stopped_when_the_script_ends(tmp_path, results):
    pidfile = tmp_path / "pids.txt"
    script = write_script(
        tmp_path,
        "leaves_bg.py",
        """
        import subprocess, sys, time
        stay = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        escaper = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(120)"])
        time.sleep(0.5)
        with open(sys.argv[1], "w") as f:
            f.write(f"background {stay.pid}\\nescaper {escaper.pid}\\n")
        print("done")
        """,
    )
    result = run(script, results, args=[str(pidfile)])
    assert result.success is True, result.error_message
    assert result.exit_code == 0
    assert_all_gone(read_pids(pidfile))


# --- what is measured ------------------------------------------------------------------------------


@pytest.mark.slow
def test_compiles_counted_per_program_with_the_reason_of_each_recompile(tmp_path, results):
    script = write_script(
        tmp_path,
        "shapes.py",
        """
        import jax
        import jax.numpy as jnp

        @jax.jit
        def f(x):
            return jnp.sin(x) * 2.0 + x

        shapes = [jnp.ones((n,)) for n in range(1, 41)]
        for x in shapes:
            f(x).block_until_ready()
        for x in shapes:  # cached executables: no new compile
            f(x).block_until_ready()
        """,
    )
    result = run(script, results, compile_cache=False)
    assert result.success is True, result.error_message
    stats = result.compiles["jit(f)"]
    assert stats.count == stats.traces == 40
    line = script.read_text().splitlines().index("@jax.jit") + 1  # a decorated function starts there
    assert stats.source == f"{script}:{line}"
    assert stats.trace_time > 0 and stats.lower_time > 0 and stats.compile_time > 0
    assert stats.cache_hits == 0 and stats.cache_load_time == 0
    # JAX's reason for each of the 39 retraces names the argument and its shapes.
    assert len(stats.recompile_reasons) == 39
    assert all(r.startswith("argument x changed f32[") for r in stats.recompile_reasons), stats.recompile_reasons
    assert "argument x changed f32[1] -> f32[2]" in stats.recompile_reasons
    assert {r.rsplit("-> ", 1)[1] for r in stats.recompile_reasons} == {f"f32[{n}]" for n in range(2, 41)}
    (warning,) = [w for w in result.warnings if w.startswith("jit(f)")]
    assert warning == ("jit(f) compiled 40 times: argument x took 40 different values: "
                       "f32[1] -> f32[2] -> f32[3] -> (35 more) -> f32[39] -> f32[40]")
    assert result.compile_count == sum(s.count for s in result.compiles.values()) >= 40
    total = sum(s.trace_time + s.lower_time + s.compile_time for s in result.compiles.values())
    assert result.jit_compile_time == pytest.approx(total)
    # No persistent compilation cache: its figures are unknown, not 0.
    assert result.cache_hits is None and result.cache_misses is None and result.compile_time_saved is None


@pytest.mark.slow
def test_transformations_of_one_function_are_separate_programs(tmp_path, results):
    """jax.monitoring names jit(loss), jit(grad(loss)), jit(vmap(loss)) and pmap(loss) all `loss`
    (or `_fun`); the result keeps them apart, one compile each, and no warning."""
    script = write_script(
        tmp_path,
        "transforms.py",
        """
        import jax
        import jax.numpy as jnp

        def loss(w):
            return jnp.sum(w ** 2)

        x, xs = jnp.ones(3), jnp.ones((2, 3))
        jax.jit(loss)(x)
        jax.jit(jax.grad(loss))(x)
        jax.jit(jax.vmap(loss))(xs)
        jax.pmap(loss)(xs[:1])
        for _ in range(3):  # a new function object per call: compiled each time, and said why
            jax.jit(lambda v: v + 1)(x)
        """,
    )
    result = run(script, results, compile_cache=False)
    assert result.success is True, result.error_message
    for key in ("jit(loss)", "jit(grad(loss))", "jit(vmap(loss))", "pmap(loss)"):
        assert result.compiles[key].count == 1, (key, sorted(result.compiles))
        assert result.compiles[key].source == f"{script}:{script.read_text().splitlines().index('def loss(w):') + 1}"
        assert result.compiles[key].recompile_reasons == []
    lam = result.compiles["jit(<lambda>)"]
    assert lam.count == 3 and len(lam.recompile_reasons) == 2
    assert all("new object on every call" in r for r in lam.recompile_reasons)
    assert [w.split(":")[0] for w in result.warnings] == ["jit(<lambda>) compiled 3 times"]
    # jaxrun asked JAX for the explanations: they are in the result, not in the script's stderr.
    assert "CACHE MISS" not in Path(result.stderr_log).read_text()


def test_body_time_of_a_sleep(tmp_path, results):
    script = write_script(tmp_path, "sleep15.py", "import time\ntime.sleep(1.5)\n")
    result = run(script, results)
    assert result.success is True, result.error_message
    assert abs(result.body_time - 1.5) / 1.5 < 0.02
    assert result.execution_time >= result.body_time
    # no jax imported: JIT figures and device memory are unknown, not 0
    assert result.jit_compile_time is None and result.compile_count is None and result.cache_hits is None
    assert result.device_memory_peak is None
    assert "did not import jax" in result.device_memory_reason
    assert result.jax_backend is None and result.device_count is None


def test_cpu_time_includes_children(tmp_path, results):
    script = write_script(
        tmp_path,
        "burn.py",
        """
        import subprocess, sys, time

        def burn(seconds):
            end = time.process_time() + seconds
            x = 0
            while time.process_time() < end:
                x += 1

        burn(0.4)
        BURN_CHILD = "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass\\n"
        subprocess.run([sys.executable, "-c", BURN_CHILD], check=True)
        """,
    )
    result = run(script, results)
    assert result.success is True, result.error_message
    assert result.cpu_time is not None
    assert result.cpu_time >= 1.0  # 0.4 s in the script + 0.6 s in its child


@pytest.mark.slow
def test_memory_peak_of_the_process_tree(tmp_path, results):
    script = write_script(
        tmp_path,
        "alloc.py",
        """
        import numpy as np, time
        a = np.ones(300 * 2**20 // 8)  # 300 MiB, every page touched
        time.sleep(0.3)
        print(a.nbytes)
        """,
    )
    result = run(script, results)
    assert result.success is True, result.error_message
    assert result.memory_peak >= 300

    # memory held by a child process counts too (peak RSS of the tree, not of the probe alone)
    tree = write_script(
        tmp_path,
        "alloc_child.py",
        """
        import subprocess, sys
        CHILD = "import numpy as np, time\\na = np.ones(300 * 2**20 // 8)\\ntime.sleep(1.0)\\n"
        subprocess.run([sys.executable, "-c", CHILD], check=True)
        """,
    )
    result = run(tree, results)
    assert result.success is True, result.error_message
    assert result.memory_peak >= 300


@pytest.mark.slow
def test_cpu_device_memory_is_unknown_with_a_reason(tmp_path, results):
    script = write_script(
        tmp_path,
        "uses_jax.py",
        """
        import jax, jax.numpy as jnp
        jnp.ones((1000,)).sum().block_until_ready()
        """,
    )
    result = run(script, results)
    assert result.success is True, result.error_message
    assert result.device_memory_peak is None
    assert "cpu" in result.device_memory_reason
    assert result.device_utilization is None and result.device_utilization_reason
    assert result.jax_backend == "cpu"
    assert result.device_count == 1


def test_simulated_cpu_devices(tmp_path, results):
    script = write_script(
        tmp_path,
        "four.py",
        """
        import jax, jaxrun
        jaxrun.record(seen=jax.device_count())
        """,
    )
    result = run(script, results, env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert result.success is True, result.error_message
    assert result.device_count == 4
    assert result.results["seen"] == 4
    assert result.jax_backend == "cpu"


def test_recorded_results(tmp_path, results):
    script = write_script(
        tmp_path,
        "records.py",
        """
        import subprocess, sys
        import numpy as np
        import jaxrun
        jaxrun.record(a=1, arr=np.arange(3), loss=np.float32(0.5), label="run-1")
        jaxrun.record(a=2, nested={"k": [1.5, np.int64(7)]})  # a later value wins
        subprocess.run([sys.executable, "-c", "import jaxrun; jaxrun.record(from_child=7)"], check=True)
        """,
    )
    result = run(script, results)
    assert result.success is True, result.error_message
    assert result.results == {
        "a": 2,
        "arr": [0, 1, 2],
        "loss": 0.5,
        "label": "run-1",
        "nested": {"k": [1.5, 7]},
        "from_child": 7,
    }


def test_output_files(tmp_path, results):
    script = write_script(
        tmp_path,
        "writes.py",
        """
        import os, pathlib
        out = pathlib.Path(os.environ["JAXRUN_OUTPUT_DIR"])
        (out / "plot.txt").write_text("x")
        (out / "sub").mkdir()
        (out / "sub" / "weights.bin").write_bytes(b"\\0" * 16)
        """,
    )
    result = run(script, results)
    assert result.success is True, result.error_message
    assert result.output_files == ["plot.txt", "sub/weights.bin"]
    assert (results / "outputs" / "writes" / "sub" / "weights.bin").stat().st_size == 16

    # a script that writes nothing leaves no empty folder and lists nothing
    quiet = run(write_script(tmp_path, "quiet.py", "pass\n"), results)
    assert quiet.output_files == []
    assert not (results / "outputs" / "quiet").exists()

    # a folder the script made (empty) is the script's: nothing listed, nothing removed
    empty = run(write_script(tmp_path, "empty_dir.py", """
        import os, pathlib
        (pathlib.Path(os.environ["JAXRUN_OUTPUT_DIR"]) / "later").mkdir()
        """), results)
    assert empty.output_files == []
    assert (results / "outputs" / "empty_dir" / "later").is_dir()


def test_script_sees_the_world_of_python_script_py(tmp_path, results, monkeypatch):
    # the parent's own JAX_PLATFORMS and a user env both lose to the requested device
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    folder = tmp_path / "project" / "sub"
    script = write_script(
        folder,
        "where.py",
        """
        import os, sys
        import jaxrun
        print("to stdout")
        print("to stderr", file=sys.stderr)
        jaxrun.record(cwd=os.getcwd(), argv=sys.argv, name=__name__, path0=sys.path[0],
                      platforms=os.environ.get("JAX_PLATFORMS"), mine=os.environ.get("MY_SETTING"),
                      file=__file__)
        """,
    )
    result = run(script, results, args=["--flag", "x y"], env={"MY_SETTING": "42", "JAX_PLATFORMS": "cuda"})
    assert result.success is True, result.error_message
    seen = result.results
    assert Path(seen["cwd"]) == folder.resolve()
    assert seen["argv"] == [str(script.resolve()), "--flag", "x y"]
    assert seen["name"] == "__main__"
    assert Path(seen["path0"]) == folder.resolve()
    assert Path(seen["file"]) == script.resolve()
    assert seen["platforms"] == "cpu"
    assert seen["mine"] == "42"
    # output goes to the log files, not into the result
    assert Path(result.stdout_log).read_text() == "to stdout\n"
    assert Path(result.stderr_log).read_text() == "to stderr\n"
    assert Path(result.stdout_log) == results / "logs" / "where.stdout.log"
    assert result.stdout_truncated is False and result.stderr_truncated is False
    assert "to stdout" not in result.model_dump_json()


def test_log_cap_truncates_with_a_marker(tmp_path, results, monkeypatch):
    monkeypatch.setenv("JAXRUN_LOG_CAP_BYTES", "1000")
    script = write_script(
        tmp_path,
        "chatty.py",
        """
        import sys
        line = "x" * 99 + "\\n"
        for _ in range(50_000):   # 5 MB: far past the cap, and far past a pipe buffer
            sys.stdout.write(line)
        sys.stderr.write("e" * 3000)
        import jaxrun
        jaxrun.record(finished=True)
        """,
    )
    result = run(script, results)
    assert result.success is True, result.error_message
    assert result.results == {"finished": True}
    assert result.stdout_truncated is True and result.stderr_truncated is True
    out = Path(result.stdout_log).read_bytes()
    assert out.startswith(b"x" * 99 + b"\n")
    assert out[:1000] == (b"x" * 99 + b"\n") * 10
    marker = out[1000:].decode()
    assert marker == "\n[jaxrun: log truncated at 1000 bytes; 4999000 more bytes were discarded]\n"
    err = Path(result.stderr_log).read_bytes()
    assert err[:1000] == b"e" * 1000
    assert b"2000 more bytes were discarded" in err[1000:]


# --- result files and API behaviour -----------------------------------------------------------------


def test_result_file_validates_against_model_and_schema(tmp_path, results):
    script = write_script(tmp_path, "ok.py", "import jaxrun\njaxrun.record(v=1.25)\n")
    result = run(script, results, name="pkg__ok")
    path = results / "script_results" / "pkg__ok_result.json"
    assert path.is_file()
    text = path.read_text()
    loaded = ScriptResult.model_validate_json(text)
    assert loaded == result
    assert loaded.script_name == "pkg__ok" and loaded.results == {"v": 1.25}
    data = json.loads(text)
    jsonschema.validate(data, ScriptResult.model_json_schema())
    assert data["schema_version"] == SCHEMA_VERSION

    failed = run(write_script(tmp_path, "bad.py", "raise ValueError('x')\n"), results)
    data = json.loads((results / "script_results" / "bad_result.json").read_text())
    jsonschema.validate(data, ScriptResult.model_json_schema())
    assert data["error_class"] == "script_error" and data == json.loads(failed.model_dump_json())
    # the schema really constrains: an unknown error class is rejected
    data["error_class"] = "mystery"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, ScriptResult.model_json_schema())


def test_without_results_dir_logs_go_to_a_temp_folder(tmp_path):
    script = write_script(tmp_path, "hello.py", "print('hello')\n")
    result = execute_jax_script(script, "cpu", timeout=60)
    assert result.success is True
    assert Path(result.stdout_log).read_text() == "hello\n"
    assert not (tmp_path / "script_results").exists()
    assert result["success"] is True  # the seed documents read results like dicts


def test_raise_on_error(tmp_path, results):
    script = write_script(tmp_path, "fails.py", "raise ValueError('nope')\n")
    with pytest.raises(ScriptFailedError, match="script_error") as info:
        run(script, results, raise_on_error=True)
    assert info.value.result.error_class == "script_error"
    # the result was still written before raising
    assert (results / "script_results" / "fails_result.json").is_file()


def test_usage_errors_name_the_culprit(tmp_path, results):
    script = write_script(tmp_path, "fine.py", "pass\n")
    with pytest.raises(ScriptNotFoundError, match="nothere.py"):
        run(tmp_path / "nothere.py", results)
    with pytest.raises(InvalidDeviceError, match="auto, cpu, gpu, tpu"):
        run(script, results, device="cuda")
    with pytest.raises(UsageError, match="timeout"):
        run(script, results, timeout=0)
    with pytest.raises(UsageError, match="retries"):
        run(script, results, retries=-1)
    assert not results.exists()  # nothing was launched or written


PATHS = """\
import json, os, sys
if False:
    import jax
print(json.dumps({"path": sys.path[1:], "pythonpath": os.environ.get("PYTHONPATH")}))
"""


@pytest.mark.parametrize("pythonpath", [None, "mine"])
def test_the_script_sees_the_sys_path_and_pythonpath_of_python_script_py(tmp_path: Path, pythonpath: str | None) -> None:
    """jaxrun is installed (the test command installs it): its folder is not slipped into the
    script's PYTHONPATH, where it would sit ahead of the standard library on sys.path."""
    import subprocess
    import sys

    script = tmp_path / "s" / "paths.py"
    script.parent.mkdir()
    script.write_text(PATHS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(tmp_path / pythonpath)
    plain = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    done = subprocess.run([sys.executable, "-m", "jaxrun", "run", str(script), "--results-dir", str(tmp_path / "r"),
                           "--no-history", "--no-config", "-q"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    seen = json.loads((tmp_path / "r" / "logs" / "paths.stdout.log").read_text())
    assert seen == json.loads(plain.stdout)
