"""The hard paths of issue 21, each figure against a reading taken outside jaxrun's own clocks:

1. four threads importing jax at once: ``import_time`` against the union of the script's own spans;
2. device work whose results are dropped: ``drain_time`` against the device's own stamp of its
   last product (a debug callback writing ``perf_counter``, one clock with the probe's);
3. ``os._exit(0)`` after ``time.sleep(1.0)``: ``run_time`` against the sleep;
4. a forked child never waited for: ``cpu_time`` against every process's own ``process_time``;
5. ``jit(loss)`` compiled for a second device: per-program counts, and JAX's backend compile
   events in a plain ``python`` run of the same code;
6. an error raised in a host callback whose text speaks of allocation: its class;
7. ``bench.measure`` of a 10-step ``lax.scan`` of 256x256 matmuls: FLOPs against the analytic count.

    python benchmarks/hard_paths.py

Real subprocesses, real JAX on the CPU; one line a case.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import jaxrun

WORK = Path(tempfile.mkdtemp(prefix="jaxrun-hard-paths-"))


def run(name: str, text: str):  # type: ignore[no-untyped-def]
    path = WORK / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    return jaxrun.execute_jax_script(path, "cpu", results_dir=WORK / "results", compile_cache=False)


def union(spans: list[list[float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def threads() -> str:
    r = run("threads", """
        import time, threading
        spans, lock, barrier = [], threading.Lock(), threading.Barrier(4)
        def work():
            barrier.wait(); s = time.perf_counter(); import jax; e = time.perf_counter()
            with lock: spans.append((s, e))
            time.sleep(1.0)
        ts = [threading.Thread(target=work) for _ in range(4)]
        [t.start() for t in ts]; [t.join() for t in ts]
        import jaxrun; jaxrun.record(spans=spans)
        """)
    return (f"import_time {r.import_time:.3f} s, union of the script's spans {union(r.results['spans']):.3f} s; "
            f"run_time {r.run_time:.3f} s for four parallel 1 s sleeps; body {r.body_time:.3f} s")


def dropped() -> str:
    stamps = WORK / "stamps"
    os.environ["STAMPS"] = str(stamps)
    r = run("dropped", """
        import os, time, jax, jax.numpy as jnp, jaxrun
        out = open(os.environ["STAMPS"], "a", buffering=1)
        def stamp(_): out.write(f"{time.perf_counter()}\\n")
        def step(x, b): return (x @ b) * 1e-3
        def stamped(x, b):
            y = step(x, b); jax.debug.callback(stamp, y[0, 0]); return y
        f, last = jax.jit(step), jax.jit(stamped)
        b = jnp.ones((1000, 1000))
        def chain():
            x = jnp.ones((1000, 1000))
            for _ in range(15): x = f(x, b)
            return last(x, b)
        chain().block_until_ready()
        started = time.perf_counter(); chain().block_until_ready(); blocked = time.perf_counter() - started
        chain()  # dropped
        jaxrun.record(blocked=blocked, ended=time.perf_counter())
        """)
    truth = max(float(x) for x in stamps.read_text().split()) - r.results["ended"]
    return (f"drain_time {r.drain_time:.4f} s, the dropped chain's last product {truth:.4f} s after the body's last line "
            f"(the same chain blocked: {r.results['blocked']:.4f} s); run_time {r.run_time:.3f} s")


def os_exit() -> str:
    r = run("os_exit", "import os, time\ntime.sleep(1.0)\nos._exit(0)\n")
    return f"success {r.success}, run_time {r.run_time:.4f} s for a 1 s sleep ({100 * (r.run_time - 1):+.2f} %), ended_by {r.ended_by!r}"


def unwaited_child() -> str:
    mine = WORK / "cpu"
    r = run("child", f"""
        import os, time
        if os.fork() == 0:
            t = time.process_time()
            while time.process_time() - t < 1.0: pass
            open({str(mine)!r} + ".child", "w").write(str(time.process_time()))
            os._exit(0)
        time.sleep(1.5)  # never waits: init reaps the child after the script ends
        open({str(mine)!r} + ".parent", "w").write(str(time.process_time()))
        """)
    own = sum(float(Path(f"{mine}.{who}").read_text()) for who in ("child", "parent"))
    return f"cpu_time {r.cpu_time:.3f} s, the processes' own process_time {own:.3f} s (x{r.cpu_time / own:.3f}); cpu_method: {r.cpu_method.split(' (')[0]}"


SECOND_DEVICE = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp
def loss(x): return (x * x).sum()
d0, d1 = jax.devices()[:2]
jl, jg = jax.jit(loss), jax.jit(jax.grad(loss))
x0, x1 = jax.device_put(jnp.ones(3), d0), jax.device_put(jnp.ones(3), d1)
jl(x0); jg(x0); jl(x1)
"""
LISTEN = """
import collections, jax
n = collections.Counter()
def heard(event, secs, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        n[kw.get("fun_name")] += 1
jax.monitoring.register_event_duration_secs_listener(heard)
exec(compile(open(FILE).read(), FILE, "exec"))
print(sum(n.values()), dict(n))
"""


def second_device() -> str:
    r = run("devices", SECOND_DEVICE)
    plain = subprocess.run([sys.executable, "-c", LISTEN.replace("FILE", repr(str(WORK / "devices.py")))],
                           capture_output=True, text=True, check=True).stdout.strip()
    ours = {k: c.count for k, c in r.compiles.items() if "loss" in k}
    return (f"jaxrun {ours}, {r.compile_count} compiles in all; plain run's backend compile events: {plain} "
            "(JAX names jit(grad(loss)) 'jit(loss)': grad keeps the function's name)")


def callback_error() -> str:
    r = run("callback", """
        import jax, jax.numpy as jnp, numpy as np
        def cb(x): raise ValueError("failed to allocate 12 GiB of scratch for my cache")
        jax.pure_callback(cb, jax.ShapeDtypeStruct((), np.float32), jnp.float32(1)).block_until_ready()
        """)
    return f"error_class {r.error_class}, exception_type {r.exception_type}"


def scan_flops() -> str:
    r = run("scan", """
        import jax, jax.numpy as jnp, jaxrun
        from jaxrun import bench
        def body(c, _): return c @ c * 1e-3, None
        f = jax.jit(lambda x: jax.lax.scan(body, x, None, length=10)[0])
        m = bench.measure(f, jnp.ones((256, 256)), samples=3, peaks=False)
        jaxrun.record(flops=m.flops, source=m.cost_source)
        """)
    analytic = 10 * (2 * 256**3 + 256**2)  # the matmul and the scaling, ten times
    return f"flops {r.results['flops']:,.0f} ({r.results['source']}), analytic {analytic:,} (x{r.results['flops'] / analytic:.7f})"


if __name__ == "__main__":
    for case in (threads, dropped, os_exit, unwaited_child, second_device, callback_error, scan_flops):
        print(f"{case.__name__}: {case()}", flush=True)
