"""The phases on the hard paths, against what the script itself measured: imports in several
threads at once, device work whose results are dropped, and every way out of a script (os._exit,
sys.exit in a thread, a signal it sends itself, a timeout). Each check fails for a figure 2x too
high and for one 2x too low. Real subprocesses, real JAX on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Stamps, write

import jaxrun

# Four threads import jax at the same moment, then sleep 1 s in parallel. The script records the
# span of every import statement it runs (perf_counter, one clock with the probe's).
THREADED_IMPORTS = """\
import time
_t = time.perf_counter()
import threading
spans = [(_t, time.perf_counter())]
lock = threading.Lock()
barrier = threading.Barrier(4)

def work():
    barrier.wait()
    started = time.perf_counter()
    import jax
    ended = time.perf_counter()
    with lock:
        spans.append((started, ended))
    time.sleep(1.0)

threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
_t = time.perf_counter()
import jaxrun
spans.append((_t, time.perf_counter()))
jaxrun.record(spans=spans, ended=time.perf_counter())
"""

# The same chain of jitted matmuls, first dispatched and waited for (its cost) three times, then
# dispatched and dropped. The chain's last call is one that stamps, from the device's side, the
# moment its product is done (a debug callback writes perf_counter to a file: one clock with the
# probe's), so the script knows when its dropped work really ended, whatever the load did.
DROPPED_RESULTS = """\
import os, time
import jax, jax.numpy as jnp
import jaxrun
stamps = open(os.environ["STAMPS"], "a", buffering=1)
def stamp(_):
    stamps.write(f"{time.perf_counter()}\\n")
def step(x, b):
    return (x @ b) * 1e-3
def stamped(x, b):
    y = step(x, b)
    jax.debug.callback(stamp, y[0, 0])
    return y
f, last = jax.jit(step), jax.jit(stamped)
b = jnp.ones((1000, 1000))
def chain():
    x = jnp.ones((1000, 1000))
    for _ in range(CALLS - 1):
        x = f(x, b)
    return last(x, b)
chain().block_until_ready()
blocked = []
for _ in range(3):
    started = time.perf_counter()
    chain().block_until_ready()
    blocked.append(time.perf_counter() - started)
started = time.perf_counter()
chain()
ended = time.perf_counter()
jaxrun.record(blocked=blocked, dispatched=ended - started, ended=ended)
"""


def union(spans: list[list[float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def run(tmp_path: Path, text: str, **options):  # type: ignore[no-untyped-def]
    script = write(tmp_path, "script.py", text)
    return jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "r", compile_cache=False, **options)


def assert_partition(result) -> None:  # type: ignore[no-untyped-def]
    """import + JIT work outside imports + run = body, none negative, the JIT part at most the
    JIT phases' sum (nested phases overlap) plus the probe's reading of XLA's analyses after each
    compilation: JIT work too (probe/jax_hooks.py), but not in jit_compile_time, which is JAX's
    trace, lower and compile seconds (a full suite once saw the wall 0.5 ms over those alone)."""
    assert min(result.import_time, result.run_time) >= 0
    compile_wall = result.body_time - result.import_time - result.run_time
    analyses = sum(stats.analysis_time for stats in result.compiles.values())
    assert -1e-6 <= compile_wall <= (result.jit_compile_time or 0.0) + analyses + 1e-6, (
        compile_wall, result.jit_compile_time, analyses)


@pytest.mark.slow
def test_imports_in_four_threads_count_their_union(tmp_path: Path) -> None:
    result = run(tmp_path, THREADED_IMPORTS)
    assert result.success, result.error_message
    truth = union(result.results["spans"])
    # The script's own spans enclose the probe's (perf_counter outside the import statement).
    assert truth - 0.005 <= result.import_time <= truth * 1.02, (result.import_time, truth)
    # The four 1 s sleeps ran in parallel: the run is one second (and thread start-up), what the
    # script lived from its first line to its last outside its imports (a late wake-up included).
    lived = result.results["ended"] - result.results["spans"][0][0] - truth
    assert lived >= 1.0 and lived - 0.005 <= result.run_time <= lived * 1.02 + 0.02, (result.run_time, lived)
    assert_partition(result)
    assert result.phases_note is None


@pytest.mark.slow
def test_device_work_whose_results_are_dropped_is_run_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stamps = tmp_path / "stamps"
    monkeypatch.setenv("STAMPS", str(stamps))
    result = run(tmp_path, DROPPED_RESULTS.replace("CALLS", "8"))
    assert result.success, result.error_message
    blocked, dispatched, ended = (result.results[k] for k in ("blocked", "dispatched", "ended"))
    done = [float(line) for line in stamps.read_text().split()]
    assert len(done) == 5  # the dropped chain ran to its end, after the body
    assert dispatched < min(blocked) / 4  # the dropped calls were only dispatched inside the body
    # What the probe waited for after the last line is the dropped calls' work that was still to
    # run: from the body's last line to the last product's stamp, once (not 0, not twice), plus
    # the drain's own tiny program.
    truth = max(done) - ended
    assert truth > min(blocked) / 4  # most of the work was left for the drain
    assert 0.9 * truth <= result.drain_time <= 1.1 * truth + 0.02, (result.drain_time, truth)
    # The run holds every round, the dropped work and the first call.
    assert result.run_time >= sum(blocked) + 0.9 * truth, (result.run_time, blocked, truth)
    assert_partition(result)


def test_a_script_that_blocks_on_its_results_waits_for_nothing_after(tmp_path: Path) -> None:
    text = "import jax, jax.numpy as jnp\nprint(jax.jit(lambda x: x @ x)(jnp.ones((300, 300))).sum())\n"
    result = run(tmp_path, text)
    assert result.success, result.error_message
    assert 0 <= result.drain_time < 0.005, result.drain_time
    assert result.compile_count == result.compiles["jit(<lambda>)"].count + sum(
        s.count for k, s in result.compiles.items() if k != "jit(<lambda>)")
    assert not any("v + 1" in key or "drain" in key for key in result.compiles)  # the drain's own program


@pytest.mark.parametrize("code, success", [(0, True), (3, False)])
def test_os_exit_records_the_phases_up_to_that_point(tmp_path: Path, code: int, success: bool) -> None:
    stamps = Stamps(tmp_path / "stamps")
    result = run(tmp_path, f"import os, time\n{stamps.line}\ntime.sleep(1.0)\n{stamps.line}\nos._exit({code})\n")
    assert result.success is success and result.exit_code == code
    stamps.holds(result.run_time, at_least=1.0)
    assert result.body_time is not None and result.import_time is not None
    assert result.ended_by == f"os._exit({code})"
    assert_partition(result)


def test_os_exit_in_a_thread_and_in_a_forked_child(tmp_path: Path) -> None:
    stamps = Stamps(tmp_path / "stamps")
    text = """\
    import os, threading, time
    STAMP
    pid = os.fork()
    if pid == 0:
        os._exit(0)  # the child's way out: not the script's end
    os.waitpid(pid, 0)
    def leave():
        time.sleep(0.8)
        STAMP
        os._exit(0)
    threading.Thread(target=leave).start()
    time.sleep(30)
    """.replace("STAMP", stamps.line)
    result = run(tmp_path, text)
    assert result.success, result.error_message
    assert result.ended_by == "os._exit(0)"
    stamps.holds(result.run_time, at_least=0.8)  # the fork and the sleep


def test_sys_exit_in_a_thread_only_ends_the_thread(tmp_path: Path) -> None:
    stamps = Stamps(tmp_path / "stamps")
    text = """\
    import sys, threading, time
    STAMP
    t = threading.Thread(target=lambda: (time.sleep(0.3), sys.exit(4)))
    t.start(); t.join()
    time.sleep(0.4)
    STAMP
    """.replace("STAMP", stamps.line)
    result = run(tmp_path, text)
    assert result.success and result.ended_by == "return"
    stamps.holds(result.run_time, at_least=0.7)


def test_a_signal_the_script_sends_itself_ends_the_body_there(tmp_path: Path) -> None:
    stamps = Stamps(tmp_path / "stamps")
    text = f"import os, signal, time\n{stamps.line}\ntime.sleep(0.6)\n{stamps.line}\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(5)\n"
    result = run(tmp_path, text)
    assert not result.success and result.signal == 15 and result.error_class == "crashed"
    assert result.ended_by == "the script sent its own process SIGTERM"
    stamps.holds(result.run_time, at_least=0.6)
    assert_partition(result)


def test_a_signal_the_script_handles_is_not_its_end(tmp_path: Path) -> None:
    stamps = Stamps(tmp_path / "stamps")
    text = """\
    import os, signal, time
    STAMP
    signal.signal(signal.SIGUSR1, lambda *a: None)
    os.kill(os.getpid(), signal.SIGUSR1)
    time.sleep(1.0)
    STAMP
    """.replace("STAMP", stamps.line)
    result = run(tmp_path, text)
    assert result.success and result.ended_by == "return"
    stamps.holds(result.run_time, at_least=1.0)


def test_a_timed_out_script_has_its_body_measured_to_the_kill(tmp_path: Path) -> None:
    result = run(tmp_path, "import time\ntime.sleep(30)\n", timeout=1.5)
    assert result.error_class == "timeout"
    # The body started after the interpreter did and ended when jaxrun stopped the process.
    assert 0.5 <= result.body_time <= result.execution_time, (result.body_time, result.execution_time)
    assert result.import_time is None and result.run_time is None
    assert "before the probe could report its phases" in result.phases_note


@pytest.mark.slow
def test_the_drains_program_is_kept_and_a_damaged_copy_is_replaced(tmp_path: Path, jaxrun_cache_dir: Path) -> None:
    """The drain's tiny program is kept serialized in jaxrun's cache folder (XLA compiles it in tens
    of ms; it loads in a few), never in the script's compile cache; a damaged copy costs a compile."""
    text = "import jax, jax.numpy as jnp\njax.jit(lambda x: x * 2)(jnp.ones(4)).block_until_ready()\n"
    script = write(tmp_path, "s.py", text)
    cache = tmp_path / "xla-cache"
    first = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "r1", compile_cache=cache)
    assert first.success, first.error_message
    kept = list((jaxrun_cache_dir / "drain").glob("*.xla"))  # other tests' device sets have theirs
    assert kept and all(p.stat().st_size > 0 for p in kept)
    assert first.cache_misses == first.compile_count  # the drain's own lookup is not the script's
    stored = {p.name for p in cache.rglob("*") if p.is_file()}
    for path in kept:
        path.write_bytes(b"not an executable")
    second = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "r2", compile_cache=cache)
    assert second.success and second.drain_time is not None and second.drain_time < 0.005
    assert [p.read_bytes() != b"not an executable" for p in kept].count(True) == 1  # built again, replaced
    assert {p.name for p in cache.rglob("*") if p.is_file()} == stored  # nothing of the drain's stored there


def test_an_import_still_running_when_the_body_ends_is_said(tmp_path: Path) -> None:
    """A daemon thread still inside an import statement when the script returns: its import counts
    up to the end of the body, and the result (and its warnings, on every surface) says so."""
    write(tmp_path, "slow_module.py", "import time\ntime.sleep(5)\n")
    text = """\
    import sys, threading, time
    sys.path.insert(0, %r)
    threading.Thread(target=lambda: __import__("slow_module"), daemon=True).start()
    time.sleep(0.5)
    """ % str(tmp_path)
    result = run(tmp_path, text)
    assert result.success, result.error_message
    assert 0.5 <= result.import_time <= result.body_time and result.run_time < 0.05, (result.import_time, result.run_time)
    assert "still running in another thread" in result.phases_note
    assert any(w.startswith("phases: an import was still running") for w in result.warnings)
    assert_partition(result)
