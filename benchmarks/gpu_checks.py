"""jaxrun's GPU paths checked on a real NVIDIA GPU, in one call, each check under its own limit.

Every check runs jaxrun as a user would (``python3 -m jaxrun ...`` with ``--json``, the results
folder's files, ``jaxrun.bench`` in a child process); this script never imports jax, so it holds
no GPU memory itself. After each check ``OUT/gpu_checks.json`` is written again (a kill keeps the
checks before it), and the output tail of a failed check goes to ``OUT/gpu_checks.log``. The
small scripts the checks run are written to a temporary folder, never into the repository.

On the GPU machine (jax with its CUDA plugin and nvidia-ml-py there; pydantic and its needs carried
as wheels in .whl), from the repository root:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 &&
    python3 benchmarks/gpu_checks.py --out $OUT

Here, to prove the script itself (every check on the CPU, small sizes; GPU-only figures null):

    PYTHONPATH=src python3 benchmarks/gpu_checks.py --out /tmp/gpuout --dry-cpu

``--budget SECONDS`` (default 360) bounds the whole: a check gets what is left of it, at most its
own limit, and is recorded as not run when less than 10 s are left. ``--only 1,2,5`` runs some.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
MiB = 2**20
H200_BF16_TFLOPS = 790.0  # dense bf16 matmul measured on H100/H200 machines (TFLOP/s)
FIT_MARKER = "will likely run out of memory"  # every fit warning holds it (probe/memory_fit.py)
LOG_TAIL = 4000  # characters of a failed command's stdout and stderr kept in the log

# The scripts the checks run. Their sizes are constants the harness puts above each body.
SCRIPTS = {
    "async_dispatch.py": """
        import time, jax, jax.numpy as jnp, jaxrun
        f = jax.jit(lambda x: jnp.tanh(x @ x))
        x = jax.random.normal(jax.random.key(0), (N, N), jnp.float32)
        f(x).block_until_ready()
        start = time.perf_counter()
        for _ in range(CALLS):
            y = f(x)
        y.block_until_ready()
        blocked = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(CALLS):
            f(x)  # dispatched, never waited for: the script ends with this work in flight
        jaxrun.record(blocked_cost=blocked, dropped_dispatch=time.perf_counter() - start)
        """,
    "pure_callback_oom_text.py": """
        import jax, jax.numpy as jnp
        def host_side(x):
            raise RuntimeError("failed to allocate 1048576 bytes for the scratch buffer (the script's own error)")
        f = jax.jit(lambda x: jax.pure_callback(host_side, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
        f(jnp.ones(4)).block_until_ready()
        """,
    "known_buffers.py": """
        import jax, jax.numpy as jnp, jaxrun
        def known(x):
            return jnp.sin(x) * 2.0 + 1.0
        f = jax.jit(known)
        x = jnp.ones((ELEMENTS,), jnp.float32)
        x.block_until_ready()
        device = x.devices().pop()
        before = device.memory_stats() or {}
        f(x).block_until_ready()
        after = device.memory_stats() or {}
        analysis = f.lower(x).compile().memory_analysis()
        jaxrun.record(in_use_before=before.get("bytes_in_use"), peak_after=after.get("peak_bytes_in_use"),
                      argument_bytes=getattr(analysis, "argument_size_in_bytes", None),
                      output_bytes=getattr(analysis, "output_size_in_bytes", None),
                      temp_bytes=getattr(analysis, "temp_size_in_bytes", None))
        """,
    "too_big.py": """
        import jax, jax.numpy as jnp
        def outer(x):
            return jnp.outer(x, x)  # OUTER_SIDE**2 float32: more than the device holds
        jax.jit(outer)(jnp.ones((OUTER_SIDE,), jnp.float32)).block_until_ready()
        """,
    "allocate_too_much.py": """
        import jax.numpy as jnp
        jnp.ones(OOM_SHAPE, jnp.float32).block_until_ready()
        """,
    "transfers.py": """
        import numpy as np, jax, jax.numpy as jnp
        double = jax.jit(lambda a: a * 2.0)
        a = double(jnp.ones((READ_ELEMENTS,), jnp.float32))
        b, c = double(a), double(double(a))
        for array in (a, b, c):
            np.asarray(array)  # three jitted results read back: three device_to_host copies
        double(np.ones((ARG_ELEMENTS,), np.float32)).block_until_ready()  # a NumPy argument: host_to_device
        """,
    "device_tiny.py": """
        import jax, jax.numpy as jnp, jaxrun
        y = jax.jit(lambda x: x @ x)(jnp.ones((256, 256)))
        jaxrun.record(device=str(y.devices().pop()))
        """,
    "gpu_share.py": """
        import os, time, jax, jax.numpy as jnp, jaxrun
        start = time.time()
        x = jnp.ones((1024, 1024))
        for _ in range(50):
            x = jnp.tanh(x @ x)
        x.block_until_ready()
        time.sleep(2.0)  # long enough for the two jobs to overlap
        stats = x.devices().pop().memory_stats() or {}
        jaxrun.record(visible=os.environ.get("CUDA_VISIBLE_DEVICES"), start=start, end=time.time(),
                      fraction=os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
                      preallocate=os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
                      bytes_limit=stats.get("bytes_limit"), device=str(x.devices().pop()))
        """,
    "matmul_workload.py": """
        import jax, jax.numpy as jnp
        f = jax.jit(lambda a: jnp.tanh(a @ a) * 0.5)
        x = jax.random.normal(jax.random.key(1), (MATMUL_N, MATMUL_N), jnp.float32)
        for _ in range(MATMUL_CALLS):
            x = f(x)
        x.block_until_ready()
        """,
    "psum_processes.py": """
        import jax, jax.numpy as jnp, jaxrun
        jax.distributed.initialize()  # no arguments: jaxrun's cluster environment supplies them
        total = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")(jnp.ones(jax.local_device_count()))
        jaxrun.record(process=jax.process_index(), processes=jax.process_count(), devices=jax.device_count(),
                      local=str(jax.local_devices()), psum=float(total[0]))
        """,
    "warm_entry.py": """
        import jax, jax.numpy as jnp
        f = jax.jit(lambda a: jnp.tanh(a @ a))
        def main():
            f(jnp.ones((1024, 1024))).block_until_ready()
        if __name__ == "__main__":
            main()
        """,
    "sharded_sum.py": """
        import jax, jax.numpy as jnp, jaxrun
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(jax.devices(), ("d",))
        x = jax.device_put(jnp.arange(8.0 * len(jax.devices())), NamedSharding(mesh, P("d")))
        jaxrun.record(devices=len(jax.devices()), total=float(jax.jit(jnp.sum)(x)))
        """,
}
NOTEBOOK_CELLS = [
    "import jax, jax.numpy as jnp",
    "f = jax.jit(lambda a: jnp.tanh(a @ a))\nx = jnp.ones((MATMUL_N, MATMUL_N))",
    "for _ in range(MATMUL_CALLS):\n    x = f(x)\nx.block_until_ready()",
    "print(float(x.sum()))",
]
GPU_SIZES = dict(N=4096, CALLS=300, ELEMENTS=2**28, OUTER_SIDE=200_000, OOM_SHAPE=(40, 2**30),
                 READ_ELEMENTS=2**20, ARG_ELEMENTS=2**18, MATMUL_N=4096, MATMUL_CALLS=20, BENCH_N=8192)
CPU_SIZES = dict(N=256, CALLS=100, ELEMENTS=2**22, OUTER_SIDE=16384, OOM_SHAPE=(1, 2**28),
                 READ_ELEMENTS=2**20, ARG_ELEMENTS=2**18, MATMUL_N=256, MATMUL_CALLS=20, BENCH_N=512)
# On the CPU an allocation past the host's memory would take the machine's memory: a limit stands in.
CPU_MEMORY_LIMIT = ["--memory-limit", "256MiB"]


class Done(Exception):
    """A check's verdict reached early (not run, or failed before its figures)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class Harness:
    """Runs jaxrun in subprocesses under limits and keeps the record of every check."""

    def __init__(self, out: Path, dry_cpu: bool, budget: float):
        self.out, self.dry, self.deadline = out, dry_cpu, time.monotonic() + budget
        self.dev = "cpu" if dry_cpu else "gpu"
        self.sizes = CPU_SIZES if dry_cpu else GPU_SIZES
        self.tmp = Path(tempfile.mkdtemp(prefix="jaxrun-gpu-checks-"))
        self.env = {**os.environ, "JAXRUN_CACHE_DIR": str(self.tmp / "cache"), "COLUMNS": "200",
                    "PYTHONPATH": os.pathsep.join(str(Path(p).resolve()) for p in
                                                  [*os.environ.get("PYTHONPATH", "").split(os.pathsep), REPO / "src"] if p)}
        self.check_deadline = time.monotonic() + 60.0  # the current check's end (set per check)
        self.commands: list[str] = []
        self.runs = 0
        self.record: dict[str, Any] = {
            "mode": "dry-cpu" if dry_cpu else "gpu", "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": platform.node(), "python": sys.version.split()[0], "commit": self._commit(), "budget_s": budget,
            "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in self.sizes.items()}, "checks": []}
        self.log = (out / "gpu_checks.log").open("w")

    def _commit(self) -> str | None:
        try:
            return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                                  timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            return None

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def script(self, name: str, folder: str = "scripts") -> Path:
        """One of SCRIPTS, written into its own folder of the temporary folder with its sizes above it."""
        path = self.tmp / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        body = textwrap.dedent(SCRIPTS[name])
        consts = "".join(f"{k} = {v!r}\n" for k, v in self.sizes.items() if re.search(rf"\b{k}\b", body))
        path.write_text(consts + body)
        return path

    def command(self, args: list[str], timeout: float | None = None) -> tuple[int | None, str, str]:
        """Run ``args`` in its own session; past its limit SIGINT (jaxrun writes what it has), then SIGKILL.
        The exit status is None when it was stopped."""
        limit = max(1.0, min(timeout or 1e9, self.check_deadline - time.monotonic(), self.left()))
        self.commands.append(" ".join(args))
        proc = subprocess.Popen(args, cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=limit)
            return proc.returncode, out, err
        except subprocess.TimeoutExpired:
            for sig, grace in ((signal.SIGINT, 15), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                    out, err = proc.communicate(timeout=grace)
                    break
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    out, err = "", ""
            return None, out or "", (err or "") + f"\n[gpu_checks: stopped after {limit:.0f} s]"

    def jaxrun(self, *args: Any, timeout: float | None = None) -> tuple[int | None, str, str]:
        return self.command([sys.executable, "-m", "jaxrun", *map(str, args)], timeout)

    def run(self, *paths_and_flags: Any, timeout: float | None = None) -> tuple[int | None, dict | None, str]:
        """``jaxrun run ... --json`` into a fresh results folder: (exit status, the batch result, stderr)."""
        self.runs += 1
        results = self.tmp / f"results{self.runs}"
        rc, out, err = self.jaxrun("run", *paths_and_flags, "--json", "--no-history", "--results-dir", results,
                                   "--quiet", timeout=timeout)
        try:
            batch = json.loads(out)
        except ValueError:
            batch = None
        self.last_output = (out, err)
        return rc, batch, err

    def write(self) -> None:
        tmp = self.out / "gpu_checks.json.tmp"
        tmp.write_text(json.dumps(self.record, indent=1, default=str))
        os.replace(tmp, self.out / "gpu_checks.json")

    def check(self, number: int, title: str, limit: float, fn: Callable[["Harness"], dict]) -> None:
        """Run one check under its limit; whatever happens, record it and write the file."""
        entry: dict[str, Any] = {"check": number, "title": title, "status": None, "reason": None, "figures": {}}
        self.commands, self.last_output, started = [], ("", ""), time.monotonic()
        limit = min(limit, self.left())
        self.check_deadline = started + limit
        print(f"[{time.strftime('%H:%M:%S')}] check {number}: {title} (limit {limit:.0f} s)", flush=True)
        try:
            if self.left() < 10:
                raise Done("not run", f"the script's budget was spent ({self.left():.0f} s left)")
            figures, failed = fn(self)
            entry["figures"] = figures
            entry["status"], entry["reason"] = ("fail", "; ".join(failed)) if failed else ("pass", None)
        except Done as done:
            entry["status"], entry["reason"] = done.status, done.reason
        except Exception as exc:  # a bug here or an unexpected shape of jaxrun's output: this check only
            entry["status"], entry["reason"] = "fail", f"the check itself raised {type(exc).__name__}: {exc}"
            self.log.write(f"=== check {number}: traceback of the check\n{traceback.format_exc()}\n")
        entry["ran"], entry["seconds"] = self.commands, round(time.monotonic() - started, 2)
        if entry["status"] == "fail":
            out, err = self.last_output
            self.log.write(f"=== check {number} ({title}): {entry['reason']}\n--- stdout (tail)\n{out[-LOG_TAIL:]}\n"
                           f"--- stderr (tail)\n{err[-LOG_TAIL:]}\n")
            self.log.flush()
        self.record["checks"].append(entry)
        self.write()
        print(f"    {entry['status']}{': ' + entry['reason'] if entry['reason'] else ''} ({entry['seconds']} s)",
              flush=True)


def expect(figures: dict, **conditions: bool) -> tuple[dict, list[str]]:
    """The figures and the names of the expectations that did not hold."""
    return figures, [name.replace("_", " ") for name, held in conditions.items() if not held]


def one(batch: dict | None, err: str) -> dict:
    """The single script result of a batch, or Done with what jaxrun said."""
    if not batch or not batch.get("script_results"):
        raise Done("fail", f"jaxrun gave no result: {err.strip().splitlines()[-1] if err.strip() else 'no output'}")
    return batch["script_results"][0]


def phases(r: dict) -> dict:
    """The phase figures of a result and whether import + JIT + run = body: the JIT work's wall time
    outside imports (body - import - run) against jit_compile_time (the sum of JAX's trace, lower
    and compile events), within 5% of the body + 20 ms (the phase's wall time holds the gaps between
    those events; nested events sum more than their wall time)."""
    body, imp, run, jit = (r.get(k) for k in ("body_time", "import_time", "run_time", "jit_compile_time"))
    gap = body - imp - run if None not in (body, imp, run) else None
    return {"body_time": body, "import_time": imp, "jit_compile_time": jit, "run_time": run,
            "drain_time": r.get("drain_time"), "jit_wall_outside_imports": gap,
            "phases_add_up": gap is not None and jit is not None and gap >= -1e-6 and abs(gap - jit) <= 0.05 * body + 0.02,
            "phases_note": r.get("phases_note")}


def device_figures(r: dict) -> dict:
    keys = ("script_name", "success", "error_class", "error_message", "device_used", "device_index", "device_count",
            "execution_time", "device_memory_peak", "device_memory_reason", "device_utilization",
            "device_utilization_reason", "memory_peak", "compile_count")
    return {**{k: r.get(k) for k in keys}, **phases(r)}


def attempts(r: dict) -> list:
    return [{k: a.get(k) for k in ("device", "error_class", "error_message") if k in a} for a in r.get("attempts") or []]


def on_device(h: Harness, r: dict) -> bool:
    return r.get("device_used") == h.dev


# ---- the checks, in the order they run ---------------------------------------------------------

def check_devices(h: Harness) -> tuple[dict, list[str]]:
    rc, out, err = h.jaxrun("devices", "--json")
    facts = json.loads(out)
    gpu = facts["platforms"].get("gpu", {})
    rc_check, text, _ = h.jaxrun("check")
    nvml = next((line for line in text.splitlines() if "NVML" in line), "")
    figures = {"platforms": {k: {"available": v.get("available"), "error": v.get("error")} for k, v in
                             facts["platforms"].items()},
               "gpu_devices": gpu.get("devices"), "available_devices": facts.get("available_devices"),
               "jax_version": facts.get("jax_version"), "check_exit": rc_check, "nvml": nvml.strip(" │|")}
    if h.dry:
        return expect(figures, devices_exit_0=rc == 0, check_exit_0=rc_check == 0, cpu_listed=bool(facts["platforms"]["cpu"]["devices"]))
    first = (gpu.get("devices") or [{}])[0]
    avail = next((d for d in facts.get("available_devices", []) if d.get("platform") == "gpu"), {})
    return expect(figures, gpu_available=bool(gpu.get("available")), device_kind=bool(first.get("device_kind")),
                  memory=bool(first.get("memory_bytes")), compute_capability=bool(first.get("compute_capability")),
                  driver_version=bool(avail.get("driver_version")), nvml_usable="usable, driver" in nvml)


def check_examples(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run("examples/", "--device", h.dev, "--timeout", 120)
    if not batch:
        one(batch, err)
    rows = [device_figures(r) for r in batch["script_results"]]
    utilizations = [r["device_utilization"] for r in rows if r["device_utilization"] is not None]
    figures = {"exit": rc, "scripts": rows, "max_device_utilization": max(utilizations, default=None)}
    gpu_only = {} if h.dry else dict(
        device_memory_peak_numbers=all(isinstance(r["device_memory_peak"], (int, float)) for r in rows),
        a_utilization_above_0=bool(utilizations) and max(utilizations) > 0)
    return expect(figures, all_succeeded=all(r["success"] for r in rows), all_on_device=all(r["device_used"] == h.dev for r in rows),
                  phases_add_up=all(r["phases_add_up"] for r in rows), **gpu_only)


def check_oom(h: Harness) -> tuple[dict, list[str]]:
    extra = CPU_MEMORY_LIMIT if h.dry else []
    rc, batch, err = h.run(h.script("allocate_too_much.py"), "--device", h.dev, "--no-fallback", *extra, "--timeout", 60)
    r = one(batch, err)
    figures = {"exit": rc, "error_class": r["error_class"], "error_message": r["error_message"], "hint": r.get("hint"),
               "device_used": r["device_used"], "attempts": attempts(r), "warnings": r.get("warnings")}
    allocator = re.search(r"out of memory|RESOURCE_EXHAUSTED|allocat", r.get("error_message") or "", re.I)
    return expect(figures, out_of_memory=r["error_class"] == "out_of_memory", on_device=on_device(h, r),
                  one_attempt=len(r.get("attempts") or []) == 1, allocator_message=bool(allocator) or h.dry)


def check_device_index(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("device_tiny.py"), "--device", f"{h.dev}:0", "--timeout", 60)
    r = one(batch, err)
    rc1, out1, err1 = h.jaxrun("run", h.script("device_tiny.py"), "--device", f"{h.dev}:1", "--no-history",
                               "--results-dir", h.tmp / "results-index1")
    lines = [line for line in err1.strip().splitlines() if line.strip()]
    figures = {"exit": rc, "device_used": r["device_used"], "device_index": r.get("device_index"),
               "device_seen": (r.get("results") or {}).get("device"),
               f"{h.dev}:1": {"exit": rc1, "stderr": err1.strip()[-600:]}}
    return expect(figures, ran_on_device_0=on_device(h, r) and r.get("device_index") == 0,
                  index_1_exit_2=rc1 == 2, index_1_one_line=len(lines) == 1,
                  index_1_lists_ids="0" in err1 and "traceback" not in err1.lower())


def check_async(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("async_dispatch.py"), "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    blocked = (r.get("results") or {}).get("blocked_cost")
    figures = {**device_figures(r), "results": r.get("results"),
               "run_time_over_twice_blocked": r["run_time"] / (2 * blocked) if blocked and r.get("run_time") else None}
    # run_time holds the blocked loop and the dropped one (as long): about 2x the blocked cost, not 1x.
    return expect(figures, succeeded=r["success"], on_device=on_device(h, r),
                  dropped_work_timed=(figures["run_time_over_twice_blocked"] or 0) >= 0.8,
                  phases_add_up=figures["phases_add_up"])


def check_transfers(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("transfers.py"), "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    t = r.get("transfers") or {}
    d2h, h2d = t.get("device_to_host") or {}, t.get("host_to_device") or {}
    read, arg = 3 * 4 * h.sizes["READ_ELEMENTS"], 4 * h.sizes["ARG_ELEMENTS"]
    figures = {"transfers": t, "expected_device_to_host": {"count": 3, "bytes": read},
               "expected_host_to_device": {"count": 1, "bytes": arg}}
    d2h_ok = (d2h.get("count") == 3 and d2h.get("bytes") == read) if not h.dry else t.get("device_to_host") is None
    # JAX itself may copy a scalar or two (jnp.ones' fill value): the argument is the one of its size.
    argument_seen = any(f"float32[{h.sizes['ARG_ELEMENTS']}]" in e for e in t.get("examples") or [])
    return expect(figures, succeeded=r["success"], device_to_host=d2h_ok, host_to_device_argument=argument_seen
                  and 0 <= (h2d.get("bytes") or 0) - arg <= 64 * (h2d.get("count") or 0))


def check_xla_memory(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("known_buffers.py"), "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    program = next((v for k, v in (r.get("compiles") or {}).items() if "known" in k), {})
    memory, size = program.get("memory") or {}, 4 * h.sizes["ELEMENTS"]
    rec = r.get("results") or {}
    figures = {"known_bytes": {"argument": size, "output": size}, "xla_memory": memory, "script_saw": rec,
               "device_memory_peak_mib": r.get("device_memory_peak"), "device_memory_reason": r.get("device_memory_reason"),
               "peak_over_argument_plus_output": (r["device_memory_peak"] * MiB / (2 * size)) if r.get("device_memory_peak") else None}
    known = dict(succeeded=r["success"], xla_argument_bytes=memory.get("argument_bytes") == size,
                 xla_output_bytes=memory.get("output_bytes") == size)
    if not h.dry:  # the peak holds x and f(x) (and XLA's temps), never less
        ratio = figures["peak_over_argument_plus_output"] or 0
        known["peak_near_argument_plus_output"] = 0.99 <= ratio <= 1.0 + (memory.get("temp_bytes", 0) / size) + 0.1
    extra = CPU_MEMORY_LIMIT if h.dry else []
    rc2, batch2, err2 = h.run(h.script("too_big.py"), "--device", h.dev, "--no-fallback", *extra, "--timeout", 60)
    r2 = one(batch2, err2)
    warned = [w for w in r2.get("warnings") or [] if FIT_MARKER in w]
    figures["too_big"] = {"error_class": r2["error_class"], "error_message": r2["error_message"], "hint": r2.get("hint"),
                          "fit_warnings": warned, "device_used": r2["device_used"]}
    return expect(figures, **known, too_big_warned=bool(warned), too_big_out_of_memory=r2["error_class"] == "out_of_memory")


def check_bench_matmul(h: Harness) -> tuple[dict, list[str]]:
    code = textwrap.dedent(f"""
        import json, jax, jax.numpy as jnp
        from jaxrun import bench
        n = {h.sizes['BENCH_N']}
        k1, k2 = jax.random.split(jax.random.key(0))
        a, b = (jax.random.normal(k, (n, n), jnp.bfloat16) for k in (k1, k2))
        m = bench.measure(lambda x, y: x @ y, a, b, time_budget=1.0)
        peaks = bench.device_peaks()
        keys = ("device", "flops", "median", "achieved_flops_per_s", "peak_flops_per_s", "peak_flops_source",
                "fraction_of_peak_flops", "bound", "cost_source", "num_samples", "warnings")
        out = {{k: getattr(m, k, None) for k in keys}}
        out["steady_cv"] = m.steady.cv
        out["device_peaks"] = {{"bfloat16": peaks.flops_per_s_bfloat16, "float32": peaks.flops_per_s_float32,
                               "bytes_per_s": peaks.bytes_per_s, "seconds": peaks.measure_seconds}}
        print("GPUCHECK" + json.dumps(out, default=str))
        """)
    rc, out, err = h.command([sys.executable, "-c", code])
    h.last_output = (out, err)
    line = next((x for x in out.splitlines() if x.startswith("GPUCHECK")), None)
    if line is None:
        raise Done("fail", f"the measurement printed nothing (exit {rc})")
    m = json.loads(line[len("GPUCHECK"):])
    tflops = (m.get("achieved_flops_per_s") or 0) / 1e12
    figures = {**m, "achieved_tflops": tflops, "fraction_of_790_tflops": tflops / H200_BF16_TFLOPS,
               "expected_flops": 2 * h.sizes["BENCH_N"] ** 3}
    real = {} if h.dry else dict(device_is_gpu="gpu" in str(m.get("device")), above_half_of_790=tflops > 0.5 * H200_BF16_TFLOPS)
    # XLA's CPU analysis counts a little more than 2n^3 (the bf16 converts); the jaxpr count is exact.
    return expect(figures, flops_within_1_percent=abs((m.get("flops") or 0) / figures["expected_flops"] - 1) < 0.01,
                  fraction_at_most_1=0 < (m.get("fraction_of_peak_flops") or 0) <= 1, **real)


def check_benchmark_runs(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("async_dispatch.py"), "--device", h.dev, "--benchmark-runs", 5,
                           "--warmup-runs", 1, "--timeout", 60)
    r = one(batch, err)
    stats = (r.get("benchmark") or {}).get("statistics") or {}
    blocked = (r.get("results") or {}).get("blocked_cost")
    cv = {k: (stats.get(k) or {}).get("cv") for k in ("wall_time", "execution_time", "body_time", "run_time", "compile_time")
          if k in stats}
    figures = {"runs_completed": (r.get("benchmark") or {}).get("runs_completed"), "cv": cv, "timing": r.get("timing"),
               "median_run_time": r.get("run_time"), "last_blocked_cost": blocked,
               "run_time_over_twice_blocked": r["run_time"] / (2 * blocked) if blocked and r.get("run_time") else None,
               "statistics_keys": sorted(stats)}
    return expect(figures, succeeded=r["success"], five_runs=figures["runs_completed"] == 5,
                  dropped_work_timed=(figures["run_time_over_twice_blocked"] or 0) >= 0.8)


def check_shared_gpu(h: Harness) -> tuple[dict, list[str]]:
    first, second = h.script("gpu_share.py", "share"), h.tmp / "share" / "gpu_share_2.py"
    shutil.copy(first, second)
    rc, batch, err = h.run(first.parent, "--device", h.dev, "--jobs", 2, "--jobs-per-gpu", 2, "--timeout", 60)
    if not batch:
        one(batch, err)
    rows = [{**(r.get("results") or {}), "device_used": r["device_used"], "success": r["success"],
             "device_memory_peak": r.get("device_memory_peak"), "error_message": r.get("error_message")}
            for r in batch["script_results"]]
    starts, ends = [x.get("start") or 0 for x in rows], [x.get("end") or 0 for x in rows]
    figures = {"exit": rc, "jobs": rows, "overlapped": len(rows) == 2 and max(starts) < min(ends)}
    gpu = {} if h.dry else dict(same_gpu=len({x.get("visible") for x in rows}) == 1,
                                memory_fraction_each=all(x.get("fraction") for x in rows))
    return expect(figures, both_succeeded=len(rows) == 2 and all(x["success"] for x in rows),
                  ran_at_once=figures["overlapped"], **gpu)


def check_cpu_vs_gpu(h: Harness) -> tuple[dict, list[str]]:
    devices = "cpu,cpu:0" if h.dry else "cpu,gpu"
    rc, batch, err = h.run(h.script("matmul_workload.py"), "--device", devices, "--benchmark-runs", 5, "--timeout", 90)
    if not batch:
        one(batch, err)
    bench = batch.get("benchmarking") or {}
    legs = {b["device_requested"]: {m: (b.get("statistics", {}).get(m) or {}).get("median")
                                    for m in ("wall_time", "body_time", "run_time")}
            for b in bench.get("benchmarks") or []}
    figures = {"exit": rc, "device_comparison": bench.get("device_comparison"), "medians": legs}
    row = (bench.get("device_comparison") or [{}])[0]
    if h.dry:  # cpu against cpu:0: the same CPU, so no speed-up is expected, only the figures
        return expect(figures, succeeded=rc == 0, speedup_with_ci=None not in (row.get("speedup"), row.get("ci_low")))
    return expect(figures, real_comparison=bool(row.get("real_comparison")),
                  gpu_faster=(row.get("ci_low") or 0) > 1.0)


def check_callback_error(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("pure_callback_oom_text.py"), "--device", h.dev, "--retries", 2, "--timeout", 60)
    r = one(batch, err)
    figures = {"error_class": r["error_class"], "error_message": r["error_message"], "exception_type": r.get("exception_type"),
               "attempts": attempts(r), "device_used": r["device_used"], "fallback_reason": r.get("fallback_reason")}
    return expect(figures, script_error=r["error_class"] == "script_error", one_attempt=len(r.get("attempts") or []) == 1,
                  never_moved=on_device(h, r))


def check_notebook(h: Harness) -> tuple[dict, list[str]]:
    folder = h.tmp / "notebook"
    folder.mkdir()
    consts = "".join(f"{k} = {h.sizes[k]}\n" for k in ("MATMUL_N", "MATMUL_CALLS"))
    cells = [consts + NOTEBOOK_CELLS[0], *NOTEBOOK_CELLS[1:]]
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [], "source": src}
        for i, src in enumerate(cells)]}
    (folder / "cells.ipynb").write_text(json.dumps(nb))
    rc, batch, err = h.run(folder, "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    seconds = [c.get("seconds") for c in r.get("cells") or []]
    total = sum(s for s in seconds if s is not None)
    figures = {**device_figures(r), "cells": [{k: c.get(k) for k in ("index", "source", "seconds", "outcome")}
                                             for c in r.get("cells") or []], "cells_sum": total,
               "body_minus_cells": (r["body_time"] - total) if r.get("body_time") is not None else None}
    gpu = {} if h.dry else dict(device_memory_peak_number=isinstance(r.get("device_memory_peak"), (int, float)))
    return expect(figures, succeeded=r["success"], on_device=on_device(h, r), every_cell_timed=None not in seconds,
                  cells_within_body=0 <= (figures["body_minus_cells"] if figures["body_minus_cells"] is not None else -1) <= 0.5,
                  **gpu)


def check_processes(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("psum_processes.py", "processes"), "--device", h.dev, "--processes", 2,
                           "--timeout", 45, timeout=75)
    if rc is None:
        raise Done("fail", "jaxrun --processes 2 hung past its limit")
    r = one(batch, err)
    procs = [{k: p.get(k) for k in ("process_id", "success", "error_class", "error_message", "stopped", "results")}
             for p in r.get("processes") or []]
    figures = {"exit": rc, "success": r["success"], "error_class": r["error_class"], "error_message": r["error_message"],
               "results": r.get("results"), "processes": procs}
    clear = r["success"] or bool(r.get("error_message")) and r["error_class"] not in ("timeout", "crashed")
    return expect(figures, ended_without_hang=True, success_or_clear_refusal=clear)


def check_profile(h: Harness) -> tuple[dict, list[str]]:
    example = "examples/gnn_rendered_simulators/jax/general_model.py"
    rc, batch, err = h.run(example, "--device", h.dev, "--profile", "--timeout", 90)
    r = one(batch, err)
    traces = sorted(Path(batch["metadata"]["results_dir"], "jax_profiling").rglob("*.trace.json.gz"))
    devices, kernels, processes = set(), 0, set()
    for path in traces:
        events = json.loads(gzip.decompress(path.read_bytes())).get("traceEvents", [])
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
        gpu_pids = {pid for pid, name in names.items() if "GPU" in name or "gpu" in name}
        devices |= {names[p] for p in gpu_pids}
        processes |= set(names.values())
        kernels += sum(1 for e in events if e.get("ph") == "X" and e.get("pid") in gpu_pids)
    figures = {"succeeded": r["success"], "traces": [str(p.name) for p in traces], "gpu_processes": sorted(devices),
               "trace_processes": sorted(processes)[:20],
               "gpu_events": kernels, "performance_metrics_keys": sorted(r.get("performance_metrics") or {})}
    gpu = {} if h.dry else dict(gpu_kernels_in_trace=kernels > 0)
    return expect(figures, succeeded=r["success"], trace_written=bool(traces), **gpu)


def check_later_features(h: Harness) -> tuple[dict, list[str]]:
    figures: dict[str, Any] = {}
    rc, batch, err = h.run(h.script("warm_entry.py", "warm"), "--device", h.dev, "--warm", "--warm-calls", 5, "--timeout", 60)
    w = (((batch or {}).get("script_results") or [{}])[0]).get("warm") or {}
    figures["warm"] = {"exit": rc, "calls": len(w.get("calls") or []), "first_call": w.get("first_call"),
                       "steady_state": w.get("steady_state"), "warnings": w.get("warnings")}
    base, new = h.script("device_tiny.py", "ab_base"), h.script("device_tiny.py", "ab_new")
    rc_ab, out, err_ab = h.jaxrun("ab", base.parent, new.parent, "--device", h.dev, "--pairs", 3, "--warmup-pairs", 0,
                                  "--json", "--quiet", "--results-dir", h.tmp / "ab", timeout=90)
    try:
        ab = json.loads(out)
    except ValueError:
        ab = {}
    figures["ab"] = {"exit": rc_ab, "duet": ab.get("duet"), "alternating_reason": ab.get("alternating_reason"),
                     "pairs": ab.get("pairs"), "scripts": len(ab.get("scripts") or []), "stderr": err_ab.strip()[-600:]}
    rc_sw, batch_sw, err_sw = h.run(h.script("sharded_sum.py", "sweep"), "--device", h.dev, "--param", "devices=1,2",
                                    "--timeout", 60)
    figures["sweep_devices"] = {"exit": rc_sw, "stderr": err_sw.strip()[-600:], "points": [
        {k: r.get(k) for k in ("script_name", "success", "device_used", "device_count", "error_message", "results")}
        for r in (batch_sw or {}).get("script_results", [])]}
    h.last_output = (out, err_ab + err_sw)
    return expect(figures, warm_ran=figures["warm"]["calls"] > 0, ab_answered=rc_ab in (0, 1),
                  sweep_answered=rc_sw in (0, 1, 2) and (rc_sw != 2 or len(err_sw.strip().splitlines()) == 1))


def not_possible(reason: str) -> Callable[[Harness], tuple[dict, list[str]]]:
    def fn(h: Harness) -> tuple[dict, list[str]]:
        raise Done("not run", reason)
    return fn


def unless_built(flag_probe: tuple[str, ...], marker: str, what: str) -> Callable[[Harness], tuple[dict, list[str]]]:
    """Not built yet unless ``marker`` is in the output of ``jaxrun <flag_probe>``."""
    def fn(h: Harness) -> tuple[dict, list[str]]:
        rc, out, err = h.jaxrun(*flag_probe, timeout=30)
        if marker not in out + err:
            raise Done("not run", f"not built yet: {what} ({marker!r} is not in `jaxrun {' '.join(flag_probe)}`)")
        raise Done("not run", f"{what} exists now, but this script has no check for it yet: run it by hand")
    return fn


# (number, title, limit in seconds, check): cheapest and most important first.
CHECKS = [
    (1, "devices --json and check: the GPU's facts, NVML", 40, check_devices),
    (2, "examples/ on the GPU: device, memory peak, utilisation, phases", 150, check_examples),
    (5, "more than the GPU holds, --no-fallback: out_of_memory with the allocator's message", 60, check_oom),
    (13, "--device gpu:0 runs there; gpu:1 is one usage line", 45, check_device_index),
    (9, "dropped jitted work is timed in run_time", 45, check_async),
    (14, "transfers: 3 device_to_host reads, a NumPy argument host_to_device", 40, check_transfers),
    (11, "XLA memory analysis vs memory_stats peak; a too-big program warned before its OOM", 75, check_xla_memory),
    (6, "bench.measure of an 8192x8192 bf16 matmul against 790 TFLOP/s", 120, check_bench_matmul),
    (3, "--benchmark-runs 5 --warmup-runs 1: CV, async work in run_time", 90, check_benchmark_runs),
    (4, "--jobs 2 --jobs-per-gpu 2: both on the one GPU with a memory fraction", 50, check_shared_gpu),
    (8, "--device cpu,gpu --benchmark-runs 5: speed-up with its CI", 120, check_cpu_vs_gpu),
    (10, "pure_callback raising 'failed to allocate': script_error, one attempt", 40, check_callback_error),
    (15, "a notebook on the GPU: cells add up to the body, memory peak", 45, check_notebook),
    (16, "--processes 2 on a one-GPU machine: GPU or a clear refusal, never a hang", 80, check_processes),
    (7, "--profile: a trace with the GPU kernels", 90, check_profile),
    (17, "--warm, ab (duet or alternation), a sweep over devices", 150, check_later_features),
    (12, "jaxrun ab under two JAX versions", 5, not_possible(
        "no second JAX version can be installed: the GPU machine reaches no package index and only its image's "
        "jax with the CUDA plugin is there")),
    (18, "energy from NVML", 30, unless_built(("schema",), "energy", "energy figures")),
    (19, "--prestart jax on the GPU", 30, unless_built(("run", "--help"), "--prestart", "--prestart")),
    (20, "history's machine fingerprint", 30, unless_built(("history", "--help"), "--changes", "history --changes")),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_checks.json and gpu_checks.log")
    parser.add_argument("--dry-cpu", action="store_true", help="run every check on the CPU at small sizes")
    parser.add_argument("--budget", type=float, default=360.0, help="seconds for the whole script")
    parser.add_argument("--only", default="", help="comma-separated check numbers")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    only = {int(x) for x in args.only.split(",") if x.strip()}
    h = Harness(args.out, args.dry_cpu, args.budget)
    try:
        for number, title, limit, fn in CHECKS:
            if not only or number in only:
                h.check(number, title, limit, fn)
    finally:
        h.record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        h.record["summary"] = {s: [c["check"] for c in h.record["checks"] if c["status"] == s]
                               for s in ("pass", "fail", "not run")}
        h.write()
        h.log.close()
        shutil.rmtree(h.tmp, ignore_errors=True)
    print(json.dumps(h.record["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
