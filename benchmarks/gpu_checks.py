"""jaxrun's GPU paths checked on a real NVIDIA GPU in one call, each check under its own limit.

Every check runs jaxrun as a user would (``python3 -m jaxrun ...`` with ``--json`` and the results
folder's files; ``jaxrun.bench`` in a child process); this script never imports jax, so it holds
no GPU memory itself. ``OUT/gpu_checks.json`` is written again after each check (a kill keeps the
checks before it): per check its number, title, status (pass / fail / not run), the reason, the
figures and the commands run. The output tails of a failed check go to ``OUT/gpu_checks.log``.
The small scripts the checks run are written to a temporary folder, never into the repository.

The GPU machine has jax with its CUDA plugin, nvidia-ml-py, numpy, scipy, psutil, click, rich and
filelock, but not pydantic, and no network. Where pip works, in the repository root (ignored by git):

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \\
        -d .whl pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 \\
        typing-extensions==4.16.0

Then on the GPU machine, from the repository root, with .whl carried there (about 6 minutes):

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 &&
    python3 benchmarks/gpu_checks.py --out $OUT

Anywhere, to prove the script itself (every check on the CPU at small sizes; the GPU's own
figures and expectations left out, GPU-only arguments replaced: cpu:1 for gpu:1, cpu,cpu:0 for
cpu,gpu, a --memory-limit for an allocation past the device's memory):

    PYTHONPATH=src python3 benchmarks/gpu_checks.py --out /tmp/gpuout --dry-cpu --budget 900

``--budget SECONDS`` (default 360) bounds the whole: a check gets what is left of it, at most its
own limit, and is not run when less than 10 s are left. ``--only 1,2,5`` runs those checks.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shlex
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
    "busy_energy.py": """
        import time, jax, jax.numpy as jnp
        f = jax.jit(lambda x: jnp.tanh(x @ x))
        x = jax.random.normal(jax.random.key(0), (ASYNC_N, ASYNC_N), jnp.float32)
        end = time.perf_counter() + ENERGY_SECONDS  # the device busy for this long: its power well above idle
        while time.perf_counter() < end:
            f(x).block_until_ready()
        """,
    "async_dispatch.py": """
        import time, jax, jax.numpy as jnp, jaxrun
        f = jax.jit(lambda x: jnp.tanh(x @ x))
        x = jax.random.normal(jax.random.key(0), (ASYNC_N, ASYNC_N), jnp.float32)
        f(x).block_until_ready()
        start = time.perf_counter()
        for _ in range(ASYNC_CALLS):
            y = f(x)
        y.block_until_ready()
        blocked = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(ASYNC_CALLS):
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
GPU_SIZES = dict(ASYNC_N=4096, ASYNC_CALLS=200, ELEMENTS=2**28, OUTER_SIDE=200_000, OOM_SHAPE=(40, 2**30),
                 READ_ELEMENTS=2**20, ARG_ELEMENTS=2**18, MATMUL_N=4096, MATMUL_CALLS=10, BENCH_N=8192,
                 ENERGY_SECONDS=4.0)
CPU_SIZES = dict(ASYNC_N=256, ASYNC_CALLS=100, ELEMENTS=2**22, OUTER_SIDE=16384, OOM_SHAPE=(1, 2**28),
                 READ_ELEMENTS=2**20, ARG_ELEMENTS=2**18, MATMUL_N=256, MATMUL_CALLS=20, BENCH_N=512,
                 ENERGY_SECONDS=1.0)
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
        # Absolute paths: jaxrun runs each script in the script's folder.
        paths = [*os.environ.get("PYTHONPATH", "").split(os.pathsep), REPO / "src"]
        self.env = {**os.environ, "JAXRUN_CACHE_DIR": str(self.tmp / "cache"), "COLUMNS": "200",
                    "PYTHONPATH": os.pathsep.join(str(Path(p).resolve()) for p in paths if p)}
        self.check_deadline = time.monotonic() + 60.0  # the current check's end (set per check)
        self.commands: list[str] = []
        self.last_output: tuple[str, str] = ("", "")  # stdout and stderr of the check's latest command
        self.last_batch: dict | None = None
        self.runs = 0
        self.stopped: list[str] = []  # the check's commands stopped at their limit
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
            self.stopped.append(f"{args[2] if len(args) > 2 else args[0]} stopped after {limit:.0f} s")
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
        self.last_output, self.last_batch = (out, err), batch
        return rc, batch, err

    def log_failure(self, entry: dict) -> None:
        """The tails of what the check's last command printed, and of each failed script's stderr log."""
        out, err = self.last_output
        if self.last_batch is not None:
            out = f"(the batch result of --json, {len(out)} characters: its figures are in gpu_checks.json)"
        self.log.write(f"=== check {entry['check']} ({entry['title']}): {entry['reason']}\n"
                       f"--- stdout (tail)\n{out[-LOG_TAIL:]}\n--- stderr (tail)\n{err[-LOG_TAIL:]}\n")
        for r in (self.last_batch or {}).get("script_results") or []:
            if not r.get("success") and r.get("stderr_log") and Path(r["stderr_log"]).is_file():
                text = Path(r["stderr_log"]).read_text(errors="replace")[-LOG_TAIL:]
                self.log.write(f"--- {r['script_name']}: its stderr log (tail)\n{text}\n")
        self.log.flush()

    def write(self) -> None:
        tmp = self.out / "gpu_checks.json.tmp"
        tmp.write_text(json.dumps(self.record, indent=1, default=str))
        os.replace(tmp, self.out / "gpu_checks.json")

    def check(self, number: int, title: str, limit: float, fn: Callable[["Harness"], dict]) -> None:
        """Run one check under its limit; whatever happens, record it and write the file."""
        entry: dict[str, Any] = {"check": number, "title": title, "status": None, "reason": None, "figures": {}}
        self.commands, self.stopped, self.last_output, self.last_batch = [], [], ("", ""), None
        started = time.monotonic()
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
        if self.stopped:
            entry["reason"] = "; ".join([*self.stopped, *([entry["reason"]] if entry["reason"] else [])])
        entry["ran"], entry["seconds"] = self.commands, round(time.monotonic() - started, 2)
        if entry["status"] == "fail":
            self.log_failure(entry)
        self.record["checks"].append(entry)
        self.write()
        print(f"    {entry['status']}{': ' + entry['reason'] if entry['reason'] else ''} ({entry['seconds']} s)",
              flush=True)


def expect(figures: dict, **conditions: bool) -> tuple[dict, list[str]]:
    """The figures and the names of the expectations that did not hold."""
    return figures, [name.replace("_", " ") for name, held in conditions.items() if not held]


def pick(mapping: dict | None, *keys: str) -> dict:
    return {k: (mapping or {}).get(k) for k in keys}


def one(batch: dict | None, err: str) -> dict:
    """The single script result of a batch, or Done with what jaxrun said."""
    if not batch or not batch.get("script_results"):
        raise Done("fail", f"jaxrun gave no result: {err.strip().splitlines()[-1] if err.strip() else 'no output'}")
    return batch["script_results"][0]


def results(batch: dict | None, err: str) -> list[dict]:
    one(batch, err)
    return batch["script_results"]


def number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def phases(r: dict) -> dict:
    """The phase figures of a result and whether import + JIT + run = body: the JIT work's wall time
    outside imports (body - import - run) against jit_compile_time (the sum of JAX's trace, lower
    and compile events), within 5% of the body + 20 ms (the phase's wall time holds the gaps between
    those events; nested events sum more than their wall time)."""
    body, imp, run, jit = (r.get(k) for k in ("body_time", "import_time", "run_time", "jit_compile_time"))
    gap = body - imp - run if None not in (body, imp, run) else None
    add_up = gap is not None and jit is not None and gap >= -1e-6 and abs(gap - jit) <= 0.05 * body + 0.02
    return {**pick(r, "body_time", "import_time", "jit_compile_time", "run_time", "drain_time", "phases_note"),
            "jit_wall_outside_imports": gap, "phases_add_up": add_up}


def device_figures(r: dict) -> dict:
    return {**pick(r, "script_name", "success", "error_class", "error_message", "device_used", "device_index",
                   "jax_backend", "device_count", "execution_time", "device_memory_peak", "device_memory_reason",
                   "device_utilization", "device_utilization_reason", "memory_peak", "compile_count"), **phases(r)}


def failure(r: dict) -> dict:
    return {**pick(r, "error_class", "error_message", "exception_type", "hint", "device_used", "fallback_reason"),
            "attempts": [pick(a, "device", "error_class", "error_message") for a in r.get("attempts") or []]}


def blocked_ratio(r: dict) -> float | None:
    """run_time over twice the blocked cost: the script's blocked loop and its dropped loop (as long)
    are both in run_time when the dropped work is timed (about 1), only the first when not (about 0.5)."""
    blocked = (r.get("results") or {}).get("blocked_cost")
    return r["run_time"] / (2 * blocked) if blocked and r.get("run_time") else None


# ---- the checks, in the order they run ---------------------------------------------------------

def check_devices(h: Harness) -> tuple[dict, list[str]]:
    rc, out, err = h.jaxrun("devices", "--json")
    facts = json.loads(out)
    rc_check, text, _ = h.jaxrun("check")
    nvml = next((line for line in text.splitlines() if "NVML" in line), "").strip(" │|")
    gpu = facts["platforms"].get("gpu", {})
    figures = {"platforms": {k: pick(v, "available", "error") for k, v in facts["platforms"].items()},
               "gpu_devices": gpu.get("devices"), "check_exit": rc_check, "nvml": nvml,
               **pick(facts, "jax_version", "jaxlib_version", "python_version", "available_devices", "driver_version")}
    if h.dry:
        return expect(figures, devices_exit_0=rc == 0, check_exit_0=rc_check == 0,
                      cpu_listed=bool(facts["platforms"]["cpu"]["devices"]))
    first = (gpu.get("devices") or [{}])[0]
    return expect(figures, gpu_available=bool(gpu.get("available")), device_kind=bool(first.get("device_kind")),
                  memory=bool(first.get("memory_bytes")), compute_capability=bool(first.get("compute_capability")),
                  driver_version=bool(facts.get("driver_version")), nvml_usable="usable, driver" in nvml)


def check_examples(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run("examples/", "--device", h.dev, "--timeout", 120)
    rows = [device_figures(r) for r in results(batch, err)]
    busy = [r["device_utilization"] for r in rows if r["device_utilization"] is not None]
    figures = {"exit": rc, "scripts": rows, "max_device_utilization": max(busy, default=None)}
    gpu = {} if h.dry else dict(device_memory_peak_numbers=all(number(r["device_memory_peak"]) for r in rows),
                                a_utilization_above_0=max(busy, default=0) > 0)
    return expect(figures, all_succeeded=all(r["success"] for r in rows),
                  all_on_device=all(r["device_used"] == h.dev for r in rows),
                  phases_add_up=all(r["phases_add_up"] for r in rows), **gpu)


def check_oom(h: Harness) -> tuple[dict, list[str]]:
    limit = CPU_MEMORY_LIMIT if h.dry else []
    rc, batch, err = h.run(h.script("allocate_too_much.py"), "--device", h.dev, "--no-fallback", *limit,
                           "--timeout", 60)
    r = one(batch, err)
    figures = {"exit": rc, **failure(r), "warnings": r.get("warnings")}
    allocator = re.search(r"out of memory|RESOURCE_EXHAUSTED|allocat", r.get("error_message") or "", re.I)
    return expect(figures, out_of_memory=r["error_class"] == "out_of_memory", on_device=r["device_used"] == h.dev,
                  one_attempt=len(figures["attempts"]) == 1, allocator_message=bool(allocator) or h.dry)


def check_device_index(h: Harness) -> tuple[dict, list[str]]:
    script = h.script("device_tiny.py")
    rc, batch, err = h.run(script, "--device", f"{h.dev}:0", "--timeout", 60)
    r = one(batch, err)
    rc1, _, err1 = h.jaxrun("run", script, "--device", f"{h.dev}:1", "--no-history",
                            "--results-dir", h.tmp / "results-index1")
    lines = err1.strip().splitlines()
    figures = {"exit": rc, **pick(r, "device_used", "device_index", "results"),
               f"{h.dev}:1": {"exit": rc1, "stderr": err1.strip()[-600:]}}
    return expect(figures, ran_on_device_0=r["device_used"] == h.dev and r.get("device_index") == 0,
                  index_1_exit_2=rc1 == 2, index_1_one_line=len(lines) == 1,
                  index_1_lists_ids=f"{h.dev}:0" in err1 and "Traceback" not in err1)


def check_async(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("async_dispatch.py"), "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    figures = {**device_figures(r), "results": r.get("results"), "run_time_over_twice_blocked": blocked_ratio(r)}
    return expect(figures, succeeded=r["success"], on_device=r["device_used"] == h.dev,
                  dropped_work_timed=(blocked_ratio(r) or 0) >= 0.8, phases_add_up=figures["phases_add_up"])


def check_transfers(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("transfers.py"), "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    t = r.get("transfers") or {}
    d2h, h2d = t.get("device_to_host") or {}, t.get("host_to_device") or {}
    read, arg = 3 * 4 * h.sizes["READ_ELEMENTS"], 4 * h.sizes["ARG_ELEMENTS"]
    figures = {"transfers": t, "expected_device_to_host": {"count": 3, "bytes": read},
               "expected_host_to_device": {"count": 1, "bytes": arg}}
    # On the CPU arrays are host memory: device_to_host is null there, with its reason.
    d2h_ok = t.get("device_to_host") is None if h.dry else (d2h.get("count"), d2h.get("bytes")) == (3, read)
    # JAX may copy a scalar or two itself (jnp.ones' fill value): the argument is the one of its size.
    argument = any(f"float32[{h.sizes['ARG_ELEMENTS']}]" in e for e in t.get("examples") or [])
    scalars_only = 0 <= (h2d.get("bytes") or 0) - arg <= 8 * ((h2d.get("count") or 1) - 1)
    return expect(figures, succeeded=r["success"], device_to_host=d2h_ok,
                  host_to_device_argument=argument and scalars_only)


def check_xla_memory(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("known_buffers.py"), "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    program = next((v for k, v in (r.get("compiles") or {}).items() if "known" in k), {})
    memory, size, peak = program.get("memory") or {}, 4 * h.sizes["ELEMENTS"], r.get("device_memory_peak")
    ratio = peak * MiB / (2 * size) if number(peak) else None
    figures = {"known_bytes": {"argument": size, "output": size}, "xla_memory": memory,
               "script_saw": r.get("results"), **pick(r, "device_memory_peak", "device_memory_reason"),
               "peak_over_argument_plus_output": ratio}
    known = dict(succeeded=r["success"], xla_argument_bytes=memory.get("argument_bytes") == size,
                 xla_output_bytes=memory.get("output_bytes") == size)
    if not h.dry:  # the peak holds x and f(x), and XLA's temps at most
        known["peak_near_argument_plus_output"] = 0.99 <= (ratio or 0) <= 1.1 + memory.get("temp_bytes", 0) / size
    limit = CPU_MEMORY_LIMIT if h.dry else []
    rc2, batch2, err2 = h.run(h.script("too_big.py"), "--device", h.dev, "--no-fallback", *limit, "--timeout", 60)
    r2 = one(batch2, err2)
    warned = [w for w in r2.get("warnings") or [] if FIT_MARKER in w]
    figures["too_big"] = {**failure(r2), "fit_warnings": warned}
    return expect(figures, **known, too_big_warned=bool(warned),
                  too_big_out_of_memory=r2["error_class"] == "out_of_memory")


BENCH_CODE = """
import json, jax, jax.numpy as jnp
from jaxrun import bench
k1, k2 = jax.random.split(jax.random.key(0))
a, b = (jax.random.normal(k, (N, N), jnp.bfloat16) for k in (k1, k2))  # random: zeros run faster
m = bench.measure(lambda x, y: x @ y, a, b, time_budget=1.0)
peaks = bench.device_peaks()
out = {k: getattr(m, k) for k in ("device", "flops", "cost_source", "median", "num_samples", "achieved_flops_per_s",
                                  "peak_flops_per_s", "peak_flops_source", "fraction_of_peak_flops", "warnings",
                                  "energy_per_call", "power", "energy_calls", "energy_source", "energy_reason")}
out["steady_cv"] = m.steady.cv
out["device_peaks"] = {"bfloat16": peaks.flops_per_s_bfloat16, "float32": peaks.flops_per_s_float32,
                       "bytes_per_s": peaks.bytes_per_s, "measure_seconds": peaks.measure_seconds}
print("GPUCHECK" + json.dumps(out, default=str))
"""


def check_bench_matmul(h: Harness) -> tuple[dict, list[str]]:
    n = h.sizes["BENCH_N"]
    rc, out, err = h.command([sys.executable, "-c", f"N = {n}\n" + BENCH_CODE])
    h.last_output = (out, err)
    line = next((x for x in out.splitlines() if x.startswith("GPUCHECK")), None)
    if line is None:
        raise Done("fail", f"the measurement printed nothing (exit {rc})")
    m = json.loads(line[len("GPUCHECK"):])
    tflops = (m.get("achieved_flops_per_s") or 0) / 1e12
    figures = {**m, "expected_flops": 2 * n**3, "achieved_tflops": tflops,
               "fraction_of_790_tflops": tflops / H200_BF16_TFLOPS}
    gpu = {} if h.dry else dict(ran_on_gpu="gpu" in str(m.get("device")), above_half_of_790=tflops > 395)
    # XLA's CPU analysis counts a little more than 2n^3 (the bf16 converts); the jaxpr count (GPU) is exact.
    return expect(figures, flops_within_1_percent=abs((m.get("flops") or 0) / (2 * n**3) - 1) < 0.01,
                  fraction_at_most_1=0 < (m.get("fraction_of_peak_flops") or 0) <= 1, **gpu)


def check_benchmark_runs(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("async_dispatch.py"), "--device", h.dev, "--benchmark-runs", 5,
                           "--warmup-runs", 1, "--timeout", 60)
    r = one(batch, err)
    bench = r.get("benchmark") or {}
    stats = bench.get("statistics") or {}
    figures = {"runs_completed": bench.get("runs_completed"), "timing": r.get("timing"),
               "cv": {k: v.get("cv") for k, v in stats.items()},
               "median": {k: v.get("median") for k, v in stats.items()},
               "last_run_recorded": r.get("results"), "run_time_over_twice_blocked": blocked_ratio(r)}
    return expect(figures, succeeded=r["success"], five_runs=bench.get("runs_completed") == 5,
                  dropped_work_timed=(blocked_ratio(r) or 0) >= 0.8)


def check_energy(h: Harness) -> tuple[dict, list[str]]:
    """GPU.md 18: the job's GPU energy from NVML's counter against the power NVML gave through the run
    (within 5 %); the host's from RAPL, or null with the reason; on the CPU (--dry-cpu) both null
    with their reasons."""
    rc, batch, err = h.run(h.script("busy_energy.py"), "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    keys = ("execution_time", "device_energy", "device_power", "device_power_sampled", "device_energy_reason",
            "host_energy", "host_power", "host_energy_reason", "device_utilization")
    figures = pick(r, *keys)
    counter, sampled = r.get("device_power"), r.get("device_power_sampled")
    figures["counter_over_sampled"] = counter / sampled if counter and sampled else None
    host_said = r.get("host_energy") is not None or bool(r.get("host_energy_reason"))
    if h.dry:
        return expect(figures, succeeded=r["success"], gpu_null_with_reason=r.get("device_energy") is None
                      and bool(r.get("device_energy_reason")), host_known_or_said_why=host_said)
    ratio = figures["counter_over_sampled"]
    return expect(figures, succeeded=r["success"], gpu_energy_known=r.get("device_energy") is not None,
                  counter_within_5_percent_of_sampled_power=ratio is not None and abs(ratio - 1) <= 0.05,
                  host_known_or_said_why=host_said)


def check_shared_gpu(h: Harness) -> tuple[dict, list[str]]:
    first = h.script("gpu_share.py", "share")
    shutil.copy(first, first.with_name("gpu_share_2.py"))
    rc, batch, err = h.run(first.parent, "--device", h.dev, "--jobs", 2, "--jobs-per-gpu", 2, "--timeout", 60)
    rows = [{**(r.get("results") or {}), **pick(r, "success", "device_used", "device_memory_peak", "error_message")}
            for r in results(batch, err)]
    overlapped = len(rows) == 2 and max(x.get("start") or 0 for x in rows) < min(x.get("end") or 0 for x in rows)
    figures = {"exit": rc, "jobs": rows, "overlapped": overlapped}
    gpu = {} if h.dry else dict(one_gpu=len({x.get("visible") for x in rows}) == 1,
                                memory_fraction_each=all(x.get("fraction") for x in rows))
    return expect(figures, both_succeeded=len(rows) == 2 and all(x["success"] for x in rows), ran_at_once=overlapped,
                  **gpu)


def check_cpu_vs_gpu(h: Harness) -> tuple[dict, list[str]]:
    devices = "cpu,cpu:0" if h.dry else "cpu,gpu"
    rc, batch, err = h.run(h.script("matmul_workload.py"), "--device", devices, "--benchmark-runs", 5,
                           "--timeout", 90)
    results(batch, err)
    bench = batch.get("benchmarking") or {}
    legs = {b["device_requested"]: {m: (b.get("statistics", {}).get(m) or {}).get("median")
                                    for m in ("wall_time", "body_time", "run_time")}
            for b in bench.get("benchmarks") or []}
    base, other = (legs.get(d, {}).get("body_time") for d in devices.split(","))
    row = (bench.get("device_comparison") or [{}])[0]
    figures = {"exit": rc, "device_comparison": bench.get("device_comparison"), "medians": legs,
               "body_time_speedup": base / other if base and other else None}
    if h.dry:  # cpu against cpu:0, the same CPU: the figures, no speed-up expected
        return expect(figures, succeeded=rc == 0, speedup_with_ci=number(row.get("ci_low")))
    return expect(figures, real_comparison=bool(row.get("real_comparison")), gpu_faster=(row.get("ci_low") or 0) > 1)


def check_callback_error(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("pure_callback_oom_text.py"), "--device", h.dev, "--retries", 2,
                           "--timeout", 60)
    figures = failure(one(batch, err))
    return expect(figures, script_error=figures["error_class"] == "script_error",
                  one_attempt=len(figures["attempts"]) == 1, never_moved=figures["device_used"] == h.dev)


def check_notebook(h: Harness) -> tuple[dict, list[str]]:
    folder = h.tmp / "notebook"
    folder.mkdir()
    consts = "".join(f"{k} = {h.sizes[k]}\n" for k in ("MATMUL_N", "MATMUL_CALLS"))
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
              "source": (consts if i == 0 else "") + source} for i, source in enumerate(NOTEBOOK_CELLS)]
    (folder / "cells.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                                    "cells": cells}))
    rc, batch, err = h.run(folder, "--device", h.dev, "--timeout", 60)
    r = one(batch, err)
    seconds = [c.get("seconds") for c in r.get("cells") or []]
    gap = r["body_time"] - sum(s or 0 for s in seconds) if number(r.get("body_time")) else None
    figures = {**device_figures(r), "body_minus_cells": gap,
               "cells": [pick(c, "index", "source", "seconds", "outcome") for c in r.get("cells") or []]}
    gpu = {} if h.dry else dict(device_memory_peak_number=number(r.get("device_memory_peak")))
    return expect(figures, succeeded=r["success"], on_device=r["device_used"] == h.dev,
                  every_cell_timed=bool(seconds) and None not in seconds,
                  cells_add_up_to_body=gap is not None and 0 <= gap <= 0.5, **gpu)


def check_processes(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("psum_processes.py", "processes"), "--device", h.dev, "--processes", 2,
                           "--timeout", 45, timeout=75)
    if rc is None:
        raise Done("fail", "jaxrun --processes 2 did not end within 75 s (its --timeout is 45 s)")
    r = one(batch, err)
    figures = {"exit": rc, **pick(r, "success", "error_class", "error_message", "results"),
               "processes": [pick(p, "process_id", "success", "error_class", "error_message", "stopped", "results")
                             for p in r.get("processes") or []]}
    clear = r["success"] or bool(r.get("error_message")) and r["error_class"] not in ("timeout", "crashed")
    return expect(figures, success_or_clear_refusal=clear)


def check_profile(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run("examples/gnn_rendered_simulators/jax/general_model.py", "--device", h.dev, "--profile",
                           "--timeout", 90)
    r = one(batch, err)
    traces = sorted(Path(batch["metadata"]["results_dir"], "jax_profiling").rglob("*.trace.json.gz"))
    processes, gpu_processes, gpu_events = set(), set(), 0
    for path in traces:
        events = json.loads(gzip.decompress(path.read_bytes())).get("traceEvents", [])
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
        gpu_pids = {pid for pid, name in names.items() if "gpu" in name.lower()}
        processes |= set(names.values())
        gpu_processes |= {names[pid] for pid in gpu_pids}
        gpu_events += sum(1 for e in events if e.get("ph") == "X" and e.get("pid") in gpu_pids)
    figures = {"succeeded": r["success"], "traces": [p.name for p in traces], "trace_processes": sorted(processes)[:20],
               "gpu_processes": sorted(gpu_processes), "gpu_events": gpu_events,
               "performance_metrics_keys": sorted(r.get("performance_metrics") or {})}
    gpu = {} if h.dry else dict(gpu_kernels_in_trace=gpu_events > 0)
    return expect(figures, succeeded=r["success"], trace_written=bool(traces), **gpu)


def check_later_features(h: Harness) -> tuple[dict, list[str]]:
    rc, batch, err = h.run(h.script("warm_entry.py", "warm"), "--device", h.dev, "--warm", "--warm-calls", 5,
                           "--timeout", 60)
    warm = (((batch or {}).get("script_results") or [{}])[0]).get("warm") or {}
    figures: dict[str, Any] = {"warm": {"exit": rc, "calls": len(warm.get("calls") or []),
                                        **pick(warm, "first_call", "steady_state", "warnings")}}
    base, new = h.script("device_tiny.py", "ab_base"), h.script("device_tiny.py", "ab_new")
    rc_ab, out, err_ab = h.jaxrun("ab", base.parent, new.parent, "--device", h.dev, "--pairs", 3, "--warmup-pairs", 0,
                                  "--json", "--quiet", "--results-dir", h.tmp / "ab", timeout=90)
    try:
        ab = json.loads(out)
    except ValueError:
        ab = {}
    figures["ab"] = {"exit": rc_ab, **pick(ab, "duet", "alternating_reason", "pairs"),
                     "scripts": len(ab.get("scripts") or []), "stderr": err_ab.strip()[-600:]}
    rc_sw, batch_sw, err_sw = h.run(h.script("sharded_sum.py", "sweep"), "--device", h.dev, "--param", "devices=1,2",
                                    "--timeout", 60)
    figures["sweep_devices"] = {"exit": rc_sw, "stderr": err_sw.strip()[-600:], "points": [
        pick(r, "script_name", "success", "device_used", "device_count", "error_message", "results")
        for r in (batch_sw or {}).get("script_results", [])]}
    h.last_output = (out, err + err_ab + err_sw)
    # A sweep point the machine cannot hold may be refused before anything runs: one line, exit 2.
    return expect(figures, warm_ran=figures["warm"]["calls"] > 0, ab_answered=rc_ab in (0, 1),
                  sweep_answered=rc_sw in (0, 1) or rc_sw == 2 and len(err_sw.strip().splitlines()) == 1)


PRESTART_SCRIPTS = 8


def check_prestart(h: Harness) -> tuple[dict, list[str]]:
    """GPU.md 19: a folder of small JAX scripts with --prestart jax (a warm compile cache: the
    folder is run once before) against a shell loop of ``python``. Every script forked from an
    interpreter that imported jax, and still on the device with its memory and compiles: CUDA
    cannot survive a fork, so a script that ran on the GPU initialised CUDA in its own process."""
    folder = h.tmp / "prestart"
    for i in range(PRESTART_SCRIPTS):
        script = h.script("device_tiny.py", "prestart")
        script.rename(folder / f"tiny_{i}.py")
    args = (folder, "--device", h.dev, "--prestart", "jax", "--timeout", 60)
    h.run(*args)  # fills the compile cache
    started = time.monotonic()
    rc, batch, err = h.run(*args)
    jaxrun_seconds = time.monotonic() - started
    loop = f"for f in {shlex.quote(str(folder))}/*.py; do {shlex.quote(sys.executable)} \"$f\" || exit 1; done"
    started = time.monotonic()
    loop_rc, _, loop_err = h.command(["bash", "-c", loop])
    loop_seconds = time.monotonic() - started
    runs = results(batch, err)
    modes = sorted({str(r.get("start_mode")) for r in runs})
    figures = {"jaxrun_s": jaxrun_seconds, "python_loop_s": loop_seconds, "loop_exit": loop_rc,
               "ratio": jaxrun_seconds / loop_seconds if loop_seconds else None, "start_modes": modes,
               "prestart_reasons": sorted({r.get("prestart_reason") for r in runs if r.get("prestart_reason")}),
               "scripts": [pick(r, "script_name", "success", "device_used", "start_mode", "compile_count", "cache_hits",
                                "device_memory_peak", "device_memory_reason", "results") for r in runs]}
    on_device = all(r["success"] and r.get("device_used") == h.dev for r in runs)
    memory = {} if h.dry else dict(memory_peak_each=all(r.get("device_memory_peak") is not None for r in runs))
    return expect(figures, every_script_on_the_device=on_device and len(runs) == PRESTART_SCRIPTS,
                  forked_with_jax=modes == ["fork+jax"], faster_than_the_loop=jaxrun_seconds < loop_seconds, **memory)


def check_fingerprint(h: Harness) -> tuple[dict, list[str]]:
    """GPU.md 20: one script benchmarked on the GPU and on the CPU into one history: each run's
    machine names the GPU model and driver, and --changes keeps the two devices' runs apart (a
    series each)."""
    history = h.tmp / "fingerprint.sqlite"
    script = h.script("device_tiny.py", "fingerprint")
    for device in dict.fromkeys((h.dev, "cpu")):
        for _ in range(2):
            h.jaxrun("run", script, "--device", device, "--benchmark-runs", 3, "--warmup-runs", 0, "--history", history,
                     "--results-dir", h.tmp / f"fingerprint-{device}", "--quiet", timeout=90)
    rc, out, err = h.jaxrun("history", "--history", history, "--json", timeout=30)
    rc_c, out_c, err_c = h.jaxrun("history", "--history", history, "--changes", "--metric", "wall_time", "--json",
                                  timeout=30)
    h.last_output = (out + out_c, err + err_c)
    try:
        by_script, series = json.loads(out)["runs"], json.loads(out_c)["series"]
        runs = [run for script_runs in by_script.values() for run in script_runs]
    except (ValueError, KeyError):
        raise Done("fail", f"jaxrun history gave no JSON (exit {rc}, {rc_c})") from None
    machines = [r.get("machine") or {} for r in runs]
    figures = {"runs": len(runs), "devices": [r.get("device_used") for r in runs],
               "machines": [pick(m, "gpus", "gpu_driver", "cpu_model") for m in machines[:1]],
               "machine_ids": sorted({str(r.get("machine_id")) for r in runs}),
               "series": [pick(x, "device", "runs", "machine_id") for x in series]}
    devices = {r.get("device_used") for r in runs}
    gpu = {} if h.dry else dict(machine_names_the_gpu=all(m.get("gpus") and m.get("gpu_driver") for m in machines),
                                gpu_and_cpu_runs=devices == {"gpu", "cpu"})
    return expect(figures, every_run_kept=len(runs) == 2 * len(dict.fromkeys((h.dev, "cpu"))),
                  a_series_per_device=sorted(x["device"] for x in series) == sorted(devices), **gpu)


def not_possible(reason: str) -> Callable[[Harness], tuple[dict, list[str]]]:
    def fn(h: Harness) -> tuple[dict, list[str]]:
        raise Done("not run", reason)
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
    (18, "energy: NVML's counter against its sampled power (5 %), RAPL or its reason", 45, check_energy),
    (19, "--prestart jax on the GPU: forked scripts on the device, faster than a loop of python", 150, check_prestart),
    (20, "the history's machine names the GPU; --changes keeps GPU and CPU runs apart", 150, check_fingerprint),
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
