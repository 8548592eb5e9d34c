"""Every flag of `jaxrun run`, `jaxrun compare` and `jaxrun history` that no other test checks by its
effect: `run --compile-cache/--no-compile-cache/--cold-cache/--no-history/--debug-nans/--no-fallback/
--retries/--timeout/--gpus-per-job/--jobs-per-gpu`, `compare --metric/--alpha/--min-effect` and
`history --metric/--alpha/--min-effect/--limit`.

The CLI is driven only as a user drives it: `python -m jaxrun ...` subprocesses, working folder in
tmp, `JAXRUN_HISTORY` in tmp, and the result files it writes read back as JSON. Nothing here
imports jaxrun's internal modules (they are being moved): only `jaxrun.get_jax_device_info()`,
to know whether this machine has an accelerator. Scripts are tiny (a small jit at most); scripts
that need no JAX are passed as files so they skip `import jax`. No test asserts how long anything
takes: speed differences are either crafted into result files (compare) or made large with
`time.sleep` and judged with options chosen from the statistics jaxrun itself reports (history).
"""

from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path

import pytest
from helpers import RunResult, load, write

import jaxrun

# Settings of a developer's shell that would change what these tests observe.
_FOREIGN_ENV = (
    "JAX_PLATFORMS",
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
    "JAX_DEBUG_NANS",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "OMP_NUM_THREADS",
    "JAXRUN_HISTORY",
)

TINY_JIT = """\
import jax
import jax.numpy as jnp

f = jax.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)
print("value", float(f(jnp.float32(0.5))))
"""
# log(-1) is NaN: a plain run prints nan, jax_debug_nans stops at the primitive inside the jit.
MAKES_NAN = """\
import jax
import jax.numpy as jnp

f = jax.jit(lambda x: jnp.log(x) + 1.0)
print("value", float(f(jnp.float32(-1.0))))
"""
CLEAN = """\
import jax
import jax.numpy as jnp

print("value", float(jax.jit(lambda x: jnp.log(x) + 1.0)(jnp.float32(2.0))))
"""
# The message is what JAX raises when a platform's backend cannot start (a transient class).
NO_DEVICE = "raise RuntimeError(\"Unable to initialize backend 'cuda': no devices (simulated)\")\n"
# Fails like a missing device on its first attempt only (the marker lives in its working folder,
# which is the script's folder).
FLAKY = """\
from pathlib import Path

marker = Path("first_attempt_done")
if not marker.exists():
    marker.write_text("1")
    raise RuntimeError("Unable to initialize backend 'cuda': no devices (simulated)")
print("second attempt ok")
"""
RECORDS_SLOT_ENV = """\
import os

import jax
import jaxrun

jaxrun.record(
    cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
    mem_fraction=os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
    omp_threads=os.environ.get("OMP_NUM_THREADS"),
    platform=jax.default_backend(),
)
"""


# --- running the CLI -------------------------------------------------------------------------------


def _cli(jaxrun_cli, cwd: Path, cache_dir: Path | None = None):  # type: ignore[no-untyped-def]
    """The CLI in ``cwd``, with a tmp history there and none of the developer's settings; the device
    facts cache (and jaxrun's default compile cache) in ``cache_dir``, or the session's."""
    env = {"JAXRUN_HISTORY": str(cwd / "history.sqlite")}
    if cache_dir is not None:
        env["JAXRUN_CACHE_DIR"] = str(cache_dir)
    return jaxrun_cli.but(cwd=cwd, env=env, without=_FOREIGN_ENV)


@pytest.fixture
def cli(tmp_path: Path, jaxrun_cli):  # type: ignore[no-untyped-def]
    """`python -m jaxrun ARGS` in tmp_path, with the session's device-facts cache and a tmp history."""
    return _cli(jaxrun_cli, tmp_path)


def ok(proc: RunResult) -> RunResult:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def one_line_usage_error(proc: RunResult, *needles: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    # One line; click's own errors (a bad flag value) add where the help is: "try 'jaxrun run --help'".
    assert len(lines) == 1 or (len(lines) == 2 and re.fullmatch(r"try 'jaxrun [a-z ]+ --help'", lines[1])), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert lines[0].startswith("jaxrun: error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def script_result(results: Path, name: str) -> dict:
    return load(results / "script_results" / f"{name}_result.json")


def cache_entries(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


@pytest.fixture
def device_info():
    return jaxrun.get_jax_device_info()


def available(info, platform: str) -> bool:
    facts = info.platforms.get(platform)
    return bool(facts is not None and facts.available)


# --- run --compile-cache DIR / --no-compile-cache -------------------------------------------------


@pytest.mark.slow
def test_compile_cache_dir_is_filled_then_hit_by_the_next_run(cli, tmp_path: Path, jaxrun_cache_dir: Path) -> None:
    write(tmp_path, "s/tiny.py", TINY_JIT)
    cache = tmp_path / "my-cache"
    default_cache = jaxrun_cache_dir / "xla_compilation_cache"  # what the runs would use without DIR
    before = cache_entries(default_cache)
    ok(cli.run("run", "s", "--device", "cpu", "--compile-cache", cache, "--results-dir", "r1"))
    cold = script_result(tmp_path / "r1", "tiny")
    entries = cache_entries(cache)
    assert entries, "the first run stored nothing in --compile-cache DIR"
    assert cold["cache_hits"] == 0 and cold["compile_count"] >= 1
    assert cold["cache_misses"] == cold["compile_count"]  # every compilation was a miss first

    ok(cli.run("run", "s", "--device", "cpu", "--compile-cache", cache, "--results-dir", "r2"))
    warm = script_result(tmp_path / "r2", "tiny")
    # Every program of the second run was loaded from DIR: hits, not compilations.
    assert warm["compile_count"] == 0 and warm["cache_misses"] == 0
    assert warm["cache_hits"] == cold["compile_count"] > 0
    assert sum(p["cache_hits"] for p in warm["compiles"].values()) == warm["cache_hits"]
    assert all(p["cache_load_time"] > 0 for p in warm["compiles"].values() if p["cache_hits"])
    assert cache_entries(cache) == entries  # nothing new had to be stored
    assert cache_entries(default_cache) == before  # DIR replaced jaxrun's default cache


@pytest.mark.slow
def test_no_compile_cache_ignores_a_cache_that_holds_the_script(jaxrun_cli, tmp_path: Path) -> None:
    """The default cache (in jaxrun's cache folder) serves a second run; --no-compile-cache does not
    use it even though it holds this very script's programs, and adds nothing to it."""
    cli = _cli(jaxrun_cli, tmp_path, tmp_path / "jaxrun-cache")  # a private default cache
    default_cache = tmp_path / "jaxrun-cache" / "xla_compilation_cache"
    write(tmp_path, "s/tiny.py", TINY_JIT)
    ok(cli.run("run", "s", "--device", "cpu", "--results-dir", "r1"))
    entries = cache_entries(default_cache)
    assert entries, "without a flag the default compilation cache was not used"
    assert script_result(tmp_path / "r1", "tiny")["cache_hits"] == 0

    ok(cli.run("run", "s", "--device", "cpu", "--no-compile-cache", "--results-dir", "r2"))
    off = script_result(tmp_path / "r2", "tiny")
    # The cache was off: its figures are unknown, not 0.
    assert off["compile_count"] >= 1 and off["cache_hits"] is None and off["cache_misses"] is None
    assert cache_entries(default_cache) == entries


# --- run --cold-cache --------------------------------------------------------------------------------


@pytest.mark.slow
def test_cold_cache_makes_every_benchmark_run_compile(cli, tmp_path: Path) -> None:
    """Without --cold-cache the 2nd counted run loads the 1st run's programs from DIR; with it, runs
    get an empty cache each, so even a DIR that already holds the script's programs gives no hit.
    (Only the last run's cache_hits is in the result, so the last run is what is compared.)"""
    write(tmp_path, "s/tiny.py", TINY_JIT)
    cache = tmp_path / "cache"
    ok(cli.run("run", "s", "--device", "cpu", "--compile-cache", cache, "--benchmark-runs", 2,
           "--results-dir", "shared"))
    shared = script_result(tmp_path / "shared", "tiny")
    assert shared["benchmark"]["runs_completed"] == 2
    assert shared["cache_hits"] > 0 and shared["compile_count"] == 0
    entries = cache_entries(cache)
    assert entries

    ok(cli.run("run", "s", "--device", "cpu", "--compile-cache", cache, "--benchmark-runs", 2, "--cold-cache",
           "--results-dir", "cold"))
    cold = script_result(tmp_path / "cold", "tiny")
    assert cold["benchmark"]["runs_completed"] == 2
    assert cold["compile_count"] == shared["cache_hits"]
    assert cold["cache_hits"] == 0
    for sample in cold["benchmark"]["samples"]:
        assert sample["success"] and sample["compile_time"] > 0
    assert cache_entries(cache) == entries  # the cold runs neither read nor wrote DIR


@pytest.mark.slow
def test_cold_cache_on_a_plain_run_starts_cold(cli, tmp_path: Path) -> None:
    write(tmp_path, "s/tiny.py", TINY_JIT)
    cache = tmp_path / "cache"
    ok(cli.run("run", "s", "--device", "cpu", "--compile-cache", cache, "--results-dir", "r1"))
    entries = cache_entries(cache)
    ok(cli.run("run", "s", "--device", "cpu", "--compile-cache", cache, "--cold-cache", "--results-dir", "r2"))
    cold = script_result(tmp_path / "r2", "tiny")
    assert cold["cache_hits"] == 0 and cold["compile_count"] > 0
    assert cache_entries(cache) == entries  # the cold run neither read nor wrote DIR


# --- run --no-history ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("named_by", ["env", "--history before", "--history after", "no --no-history"])
def test_no_history_stores_nothing_wherever_the_history_is_named(cli, tmp_path: Path, named_by: str) -> None:
    """A benchmark is stored in the history that $JAXRUN_HISTORY or --history names, unless
    --no-history is given (in any position); the last case is the control."""
    hello = write(tmp_path, "s/hello.py", "print('hello')\n")  # no JAX: a fast benchmark
    db = tmp_path / "named.sqlite"
    args = ("run", hello, "--device", "cpu", "--benchmark-runs", 1, "--no-compile-cache", "--results-dir", "r")
    if named_by == "env":
        proc = cli.run(*args, "--no-history", env={"JAXRUN_HISTORY": str(db)})
    elif named_by == "--history before":
        proc = cli.run(*args, "--history", db, "--no-history")
    elif named_by == "--history after":
        proc = cli.run(*args, "--no-history", "--history", db)
    else:
        proc = cli.run(*args, env={"JAXRUN_HISTORY": str(db)})
    ok(proc)
    assert script_result(tmp_path / "r", "hello")["benchmark"]["runs_completed"] == 1
    assert db.exists() == (named_by == "no --no-history")
    assert not Path(cli.env["JAXRUN_HISTORY"]).exists()


# --- run --debug-nans --------------------------------------------------------------------------------


@pytest.mark.slow
def test_debug_nans_turns_a_nan_inside_jit_into_numerical_instability(cli, tmp_path: Path) -> None:
    nan = write(tmp_path, "s/nan.py", MAKES_NAN)
    write(tmp_path, "s/clean.py", CLEAN)
    ok(cli.run("run", nan, "--device", "cpu", "--no-compile-cache", "--results-dir", "plain"))
    result = script_result(tmp_path / "plain", "nan")
    assert result["success"] and result["error_class"] is None
    assert "value nan" in (tmp_path / "plain/logs/nan.stdout.log").read_text()

    debug = cli.run("run", "s", "--device", "cpu", "--no-compile-cache", "--debug-nans", "--results-dir", "debug")
    assert debug.returncode == 1, debug.stdout + debug.stderr
    result = script_result(tmp_path / "debug", "nan")
    assert not result["success"]
    assert result["error_class"] == "numerical_instability"
    assert result["exception_type"] == "FloatingPointError"
    assert "nan" in result["error_message"].lower()
    assert script_result(tmp_path / "debug", "clean")["success"]  # a script without NaNs is unaffected


# --- run --no-fallback -------------------------------------------------------------------------------


@pytest.fixture
def absent_accelerator(device_info) -> str:
    for platform in ("gpu", "tpu"):
        if not available(device_info, platform):
            return platform
    pytest.skip("both gpu and tpu are available here: no absent accelerator to request")


@pytest.mark.slow
def test_no_fallback_fails_instead_of_running_on_cpu(cli, tmp_path: Path, absent_accelerator: str) -> None:
    write(tmp_path, "s/tiny.py", TINY_JIT)
    fell_back = ok(cli.run("run", "s", "--device", absent_accelerator, "--no-compile-cache", "--results-dir", "fb"))
    result = script_result(tmp_path / "fb", "tiny")
    assert result["success"]
    assert (result["device_requested"], result["device_used"]) == (absent_accelerator, "cpu")
    assert result["fallback_reason"] and absent_accelerator in result["fallback_reason"]
    assert [(a["device"], a["error_class"]) for a in result["attempts"]] == [
        (absent_accelerator, "device_unavailable"), ("cpu", None)
    ]
    assert f"fallback from {absent_accelerator}" in fell_back.stdout

    proc = cli.run("run", "s", "--device", absent_accelerator, "--no-fallback", "--no-compile-cache", "--results-dir", "nf")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = script_result(tmp_path / "nf", "tiny")
    assert not result["success"]
    assert result["error_class"] == "device_unavailable"
    assert result["device_used"] is None and result["fallback_reason"] is None
    assert [(a["device"], a["error_class"]) for a in result["attempts"]] == [(absent_accelerator, "device_unavailable")]
    assert load(tmp_path / "nf" / "jax_execution_results.json")["metadata"]["device_used"] == "none"


# --- run --retries N ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_retries_rerun_a_transient_failure_until_it_succeeds(cli, tmp_path: Path) -> None:
    without = write(tmp_path, "a/flaky.py", FLAKY)
    proc = cli.run("run", without, "--device", "cpu", "--no-compile-cache", "--results-dir", "r0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = script_result(tmp_path / "r0", "flaky")
    assert result["error_class"] == "device_unavailable"
    assert len(result["attempts"]) == 1

    retried = write(tmp_path, "b/flaky.py", FLAKY)
    ok(cli.run("run", retried, "--device", "cpu", "--retries", 1, "--no-compile-cache", "--results-dir", "r1"))
    result = script_result(tmp_path / "r1", "flaky")
    assert result["success"] and result["device_used"] == "cpu" and result["fallback_reason"] is None
    assert [(a["number"], a["device"], a["error_class"]) for a in result["attempts"]] == [
        (1, "cpu", "device_unavailable"), (2, "cpu", None)
    ]
    logs = tmp_path / "r1" / "logs"
    assert "second attempt ok" in (logs / "flaky.stdout.log").read_text()
    assert "Unable to initialize backend" in (logs / "flaky.attempt1.stderr.log").read_text()


@pytest.mark.slow
def test_retries_are_bounded_and_only_for_transient_failures(cli, tmp_path: Path) -> None:
    nodev = write(tmp_path, "s/nodev.py", NO_DEVICE)
    broken = write(tmp_path, "s/broken.py", "raise ValueError('not transient')\n")
    proc = cli.run("run", nodev, broken, "--device", "cpu", "--retries", 2, "--no-compile-cache", "--results-dir", "r")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = script_result(tmp_path / "r", "nodev")
    assert [(a["number"], a["error_class"]) for a in result["attempts"]] == [
        (1, "device_unavailable"), (2, "device_unavailable"), (3, "device_unavailable")
    ]
    assert {"nodev.attempt1.stderr.log", "nodev.attempt2.stderr.log"} <= set(os.listdir(tmp_path / "r" / "logs"))
    result = script_result(tmp_path / "r", "broken")
    assert result["error_class"] == "script_error"
    assert len(result["attempts"]) == 1  # a script error is not retried


# --- run --timeout S ---------------------------------------------------------------------------------


@pytest.mark.parametrize("timeout, stopped", [("0.3", True), ("30", False)])
def test_timeout_stops_only_a_script_that_runs_past_it(cli, tmp_path: Path, timeout: str, stopped: bool) -> None:
    nap = write(tmp_path, "s/nap.py", "import time\nprint('napping', flush=True)\ntime.sleep(1.0)\nprint('woke')\n")
    proc = cli.run("run", nap, "--device", "cpu", "--timeout", timeout, "--no-compile-cache", "--results-dir", "r")
    result = script_result(tmp_path / "r", "nap")
    if stopped:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert not result["success"] and result["error_class"] == "timeout"
        assert f"after the {timeout} s time limit" in result["error_message"]
        assert "woke" not in (tmp_path / "r/logs/nap.stdout.log").read_text()
    else:
        ok(proc)
        assert result["success"] and result["error_class"] is None
        assert "woke" in (tmp_path / "r/logs/nap.stdout.log").read_text()


# --- run --gpus-per-job / --jobs-per-gpu ---------------------------------------------------------------


@pytest.mark.parametrize("option", ["--gpus-per-job", "--jobs-per-gpu"])
def test_gpu_slot_options_below_one_are_usage_errors(cli, tmp_path: Path, option: str) -> None:
    write(tmp_path, "s/tiny.py", TINY_JIT)
    one_line_usage_error(cli.run("run", "s", option, 0, "--results-dir", "r"), option[2:].replace("-", "_"), ">= 1")
    assert not (tmp_path / "r").exists()  # rejected before anything ran


@pytest.mark.slow
def test_jobs_per_gpu_leaves_cpu_jobs_alone(cli, tmp_path: Path) -> None:
    """The memory fraction of --jobs-per-gpu is a GPU-slot setting: CPU jobs of the same batch run
    with their core share and no XLA memory fraction (the GPU side needs a GPU: see below)."""
    write(tmp_path, "s/one.py", RECORDS_SLOT_ENV)
    write(tmp_path, "s/two.py", RECORDS_SLOT_ENV)
    ok(cli.run("run", "s", "--device", "cpu", "-j", 2, "--jobs-per-gpu", 2, "--no-compile-cache", "--results-dir", "r"))
    cores = sorted(os.sched_getaffinity(0))
    shares = sorted(str(len(cores[i::2]) if len(cores) >= 2 else 1) for i in range(2))
    results = [script_result(tmp_path / "r", name) for name in ("one", "two")]
    for result in results:
        assert result["success"] and result["device_used"] == "cpu"
        assert result["results"]["mem_fraction"] is None
    assert sorted(r["results"]["omp_threads"] for r in results) == shares  # each its share of the cores


@pytest.mark.slow
def test_gpus_per_job_without_gpus_is_accepted_and_unused(cli, tmp_path: Path, device_info) -> None:
    """Without GPUs --gpus-per-job has nothing to hand out: it is validated (>= 1, above) and a CPU
    batch runs as without it. What it does with GPUs is checked by the GPU-only tests below."""
    if available(device_info, "gpu"):
        pytest.skip("GPUs are present: the GPU tests below check --gpus-per-job")
    write(tmp_path, "s/one.py", RECORDS_SLOT_ENV)
    write(tmp_path, "s/two.py", RECORDS_SLOT_ENV)
    ok(cli.run("run", "s", "--device", "cpu", "-j", 2, "--gpus-per-job", 2, "--no-compile-cache", "--results-dir", "r"))
    for name in ("one", "two"):
        result = script_result(tmp_path / "r", name)
        assert result["success"] and result["results"]["platform"] == "cpu"
        assert result["results"]["cuda_visible_devices"] == os.environ.get("CUDA_VISIBLE_DEVICES")  # untouched


def test_gpus_per_job_with_jobs_per_gpu_is_rejected_up_front(cli, tmp_path: Path) -> None:
    write(tmp_path, "s/tiny.py", TINY_JIT)
    proc = cli.run("run", "s", "--device", "cpu", "--gpus-per-job", 2, "--jobs-per-gpu", 2,
               "--no-compile-cache", "--results-dir", "r")
    one_line_usage_error(proc, "not both")


def _gpu_ids(device_info) -> list[int]:
    if not available(device_info, "gpu"):
        pytest.skip("needs a GPU: GPU slots are only built when JAX sees GPUs")
    return [d.id for d in device_info.platforms["gpu"].devices]


def test_jobs_per_gpu_shares_a_gpu_with_a_memory_fraction(cli, tmp_path: Path, device_info) -> None:
    ids = {str(i) for i in _gpu_ids(device_info)}
    write(tmp_path, "s/one.py", RECORDS_SLOT_ENV)
    write(tmp_path, "s/two.py", RECORDS_SLOT_ENV)
    ok(cli.run("run", "s", "--device", "gpu", "-j", 2, "--jobs-per-gpu", 2, "--no-compile-cache", "--results-dir", "r"))
    for name in ("one", "two"):
        result = script_result(tmp_path / "r", name)
        assert result["success"] and result["device_used"] == "gpu", result["error_message"]
        assert result["results"]["cuda_visible_devices"] in ids  # one GPU each
        assert float(result["results"]["mem_fraction"]) == pytest.approx(0.9 / 2, abs=1e-3)


def test_gpus_per_job_gives_each_job_that_many_gpus(cli, tmp_path: Path, device_info) -> None:
    ids = _gpu_ids(device_info)
    write(tmp_path, "s/tiny.py", TINY_JIT)
    too_many = len(ids) + 1
    one_line_usage_error(
        cli.run("run", "s", "--device", "gpu", "-j", 2, "--gpus-per-job", too_many, "--results-dir", "bad"),
        f"--gpus-per-job {too_many} needs at least {too_many} GPUs",
    )
    if len(ids) < 2:
        pytest.skip("needs 2 GPUs to give a job more than one")
    write(tmp_path, "s2/one.py", RECORDS_SLOT_ENV)
    ok(cli.run("run", "s2", "--device", "gpu", "-j", 2, "--gpus-per-job", 2, "--no-compile-cache", "--results-dir", "r"))
    result = script_result(tmp_path / "r", "one")
    assert result["success"] and result["device_used"] == "gpu", result["error_message"]
    visible = result["results"]["cuda_visible_devices"].split(",")
    assert len(visible) == 2 and set(visible) <= {str(i) for i in ids}
    assert result["results"]["mem_fraction"] is None


# --- compare --metric / --alpha / --min-effect (crafted result files) ---------------------------------


def _sample(index: int, wall: float, body: float) -> dict:
    return {
        "index": index, "warmup": False, "success": True, "error_class": None,
        "wall_time": wall, "body_time": body, "compile_time": 0.01, "steady_time": body - 0.01,
        "memory_peak": 200.0,
    }


def _benchmark_file(folder: Path, scripts: dict[str, tuple[list[float], list[float]]]) -> Path:
    """A jax_benchmark_results.json whose scripts have exactly these counted wall and body times."""
    benchmarks = []
    for name, (walls, bodies) in scripts.items():
        benchmarks.append({
            "script_name": name, "script_path": f"/suite/{name}.py", "device_requested": "cpu",
            "device_used": "cpu", "benchmark_runs": len(walls), "warmup_runs": 0,
            "runs_completed": len(walls),
            "samples": [_sample(i + 1, w, b) for i, (w, b) in enumerate(zip(walls, bodies))],
        })
    document = {
        "generated_at": "2024-05-01T00:00:00+00:00", "host": "testhost", "jaxrun_version": "0.1.0",
        "jax_version": "0.4.30", "enabled": True, "benchmark_runs": max(len(w) for w, _ in scripts.values()),
        "warmup_runs": 0, "benchmarks": benchmarks,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "jax_benchmark_results.json").write_text(json.dumps(document, indent=2))
    return folder


# "tenpct": 10 runs a side, NEW's wall times exactly 10% above BASE's and fully separated from them
# (p ~ 1e-5), body times identical on both sides. "fourruns": 4 runs a side, 50% slower, fully
# separated: the exact two-sided p is 2 / C(8, 4) = 0.0286, between alpha 0.01 and 0.05.
_BASE_WALLS = [1.00 + 0.01 * i for i in range(10)]
_FOUR = [2.00, 2.02, 2.04, 2.06]


@pytest.fixture(scope="module")
def crafted_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("compare")
    bodies = [w - 0.5 for w in _BASE_WALLS]
    base = _benchmark_file(root / "base", {
        "tenpct": (_BASE_WALLS, bodies),
        "fourruns": (_FOUR, [w - 0.5 for w in _FOUR]),
    })
    new = _benchmark_file(root / "new", {
        "tenpct": ([1.10 * w for w in _BASE_WALLS], bodies),
        "fourruns": ([1.5 * w for w in _FOUR], [1.5 * w - 0.5 for w in _FOUR]),
    })
    return base, new


def compare_json(cli, base: Path, new: Path, *options: object, expect: int = 0) -> tuple[dict, dict[str, dict]]:
    proc = cli.run("compare", base, new, "--json", *options)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    return report, {row["script_name"]: row for row in report["scripts"]}


@pytest.fixture(scope="module")
def default_comparison(crafted_pair, tmp_path_factory: pytest.TempPathFactory, jaxrun_cli):
    """The pair compared with the default options (every phase, gate run + compile time, alpha 0.01,
    min effect 5%), as a gate."""
    cli = _cli(jaxrun_cli, tmp_path_factory.mktemp("compare-cwd"))
    base, new = crafted_pair
    proc = cli.run("compare", base, new, "--json", "--fail-on-regression")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # tenpct's slowdown is outside its body
    report = json.loads(proc.stdout)
    return report, {row["script_name"]: row for row in report["scripts"]}


def test_compare_defaults_judge_every_phase_and_gate_on_run_and_compile(default_comparison) -> None:
    report, rows = default_comparison
    assert (report["gate"], report["alpha"], report["min_effect"]) == (["run_time", "compile_time"], 0.01, 0.05)
    wall = rows["tenpct"]["phases"]["wall_time"]
    assert wall["base_median"] == pytest.approx(statistics.median(_BASE_WALLS))
    assert wall["ratio"] == pytest.approx(1.10) and wall["p_value"] < 0.01 and wall["verdict"] == "slower"
    run = rows["tenpct"]["phases"]["run_time"]  # steady_time in the file: its old name
    assert run["ratio"] == pytest.approx(1.0) and run["verdict"] == "no significant change"
    assert rows["tenpct"]["slower"] == ["wall_time"] and rows["tenpct"]["verdict"] == "no significant change"
    four = rows["fourruns"]["phases"]["wall_time"]
    assert four["p_value"] == pytest.approx(2 / 70) and four["ratio"] == pytest.approx(1.5)
    # 4 vs 4 can never reach p < 0.01 (at best 2/70 = 0.029): too few runs to judge, not "no
    # significant change"; and not a regression, so --fail-on-regression exits 0 (default_comparison).
    assert rows["fourruns"]["verdict"] == "too few runs to judge" and four["verdict"] == "too few runs to judge"
    assert "at least 5 runs each" in rows["fourruns"]["phases"]["run_time"]["note"]
    assert report["regressions"] == []


@pytest.mark.slow
def test_compare_of_three_runs_against_three_says_too_few_and_passes_the_gate(cli, tmp_path: Path) -> None:
    """Issue 23: 'run_time x2.751 [2.717, 2.780] p=0.1' (3 vs 3) was printed as 'no significant change'.
    No 3-vs-3 test can reach p < 0.05: the table says too few runs to judge and how many are needed,
    and --fail-on-regression does not count it as a regression."""
    walls = [1.00, 1.01, 0.99]
    base = _benchmark_file(tmp_path / "base", {"three": (walls, [w - 0.5 for w in walls])})
    new = _benchmark_file(tmp_path / "new", {"three": ([2.751 * w for w in walls], [2.751 * w - 0.5 for w in walls])})
    proc = ok(cli.run("compare", base, new, "--alpha", "0.05", "--fail-on-regression", env={"COLUMNS": "250"}))
    assert "three → too few runs to judge" in proc.stdout
    assert "no test can reach p < 0.05:" in proc.stdout and "at least 4 runs each" in proc.stdout  # the note
    assert "no significant change" not in proc.stdout
    assert "too few runs to judge (not a regression): three; at least 4 runs each (--benchmark-runs)" in proc.stdout
    assert "significantly slower" not in proc.stdout
    report, rows = compare_json(cli, base, new, "--alpha", "0.05", "--fail-on-regression")
    assert rows["three"]["verdict"] == "too few runs to judge" and report["regressions"] == []


@pytest.mark.slow
def test_compare_metric_picks_the_gate(cli, crafted_pair) -> None:
    base, new = crafted_pair
    report, rows = compare_json(cli, base, new, "--metric", "wall_time", "--fail-on-regression", expect=1)
    assert report["gate"] == ["wall_time"] and rows["tenpct"]["gate"] == ["wall_time"]
    assert rows["tenpct"]["verdict"] == "slower" and report["regressions"] == ["tenpct"]
    report, rows = compare_json(cli, base, new, "--metric", "body_time")
    assert report["gate"] == ["body_time"] and "body_time" in report["metrics"]
    body = rows["tenpct"]["phases"]["body_time"]
    assert body["base_median"] == pytest.approx(statistics.median(_BASE_WALLS) - 0.5)
    assert body["ratio"] == pytest.approx(1.0)  # the body times did not change
    assert rows["tenpct"]["verdict"] == "no significant change"
    assert report["regressions"] == []  # fourruns: p = 0.029 in body_time too, not below 0.01


@pytest.mark.slow
def test_compare_quiet_prints_only_the_scripts_that_changed_and_a_summary(cli, crafted_pair) -> None:
    """-q: no table; tenpct (10% slower, p < 0.01) has a line, and so has fourruns (4 runs a side
    can never reach p < 0.01: too few runs to judge, with the runs it needs); then the summary."""
    base, new = crafted_pair
    proc = cli.run("compare", base, new, "--metric", "wall_time", "-q", "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3, proc.stdout
    assert re.fullmatch(r"tenpct( \(\w+\))?: slower: wall_time 1\.100x \(95% CI 1\.\d{3}-1\.\d{3}, p=\S+\)", lines[0]), lines[0]
    assert re.fullmatch(r"fourruns( \(\w+\))?: too few runs to judge: at least 5 runs each", lines[1]), lines[1]
    assert lines[2] == ("2 scripts compared: 1 slower, 0 faster, 0 no significant change, 1 too few runs to judge; "
                        f"geometric mean of ratios (NEW/BASE): wall_time {(1.10 * 1.5) ** 0.5:.3f}"), lines[2]
    # Nothing changed: the summary, and fourruns, whose 4 runs a side can never be judged.
    same = cli.run("compare", base, base, "--quiet")
    assert same.returncode == 0 and same.stdout.splitlines() == [
        "fourruns (cpu): too few runs to judge: at least 5 runs each",
        "2 scripts compared: 0 slower, 0 faster, 1 no significant change, 1 too few runs to judge; "
        "geometric mean of ratios (NEW/BASE): compile_time 1.000, run_time 1.000"], same.stdout


@pytest.mark.slow
def test_compare_min_effect_decides_whether_ten_percent_counts(cli, crafted_pair) -> None:
    base, new = crafted_pair
    # Gated on wall time, tenpct is slower at the default 5%; at 20% the same p < 0.01 does not count.
    default, _ = compare_json(cli, base, new, "--metric", "wall_time")
    report, rows = compare_json(cli, base, new, "--metric", "wall_time", "--min-effect", "20%", "--fail-on-regression")
    assert default["regressions"] == ["tenpct"] and report["min_effect"] == pytest.approx(0.20)
    wall = rows["tenpct"]["phases"]["wall_time"]
    assert wall["p_value"] < 0.01 and wall["verdict"] == "no significant change"
    assert report["regressions"] == []  # so the gate passes (exit 0)


def test_compare_alpha_decides_whether_p_0029_is_significant(cli, crafted_pair) -> None:
    base, new = crafted_pair
    # At the default alpha 0.01 fourruns is too few runs to judge (default_comparison).
    report, rows = compare_json(cli, base, new, "--alpha", "0.05", "--correction", "none")
    assert report["alpha"] == pytest.approx(0.05) and report["correction"] == "none"
    run = rows["fourruns"]["phases"]["run_time"]
    assert run["p_value"] == pytest.approx(2 / 70) and run["verdict"] == "slower"
    assert rows["fourruns"]["verdict"] == "slower" and rows["fourruns"]["p_adjusted"] == pytest.approx(2 / 70)
    assert report["regressions"] == ["fourruns"]  # tenpct's run time did not change
    # Judged with the others at once (Holm's correction, the default), 2/70 is not below 0.05.
    report, rows = compare_json(cli, base, new, "--alpha", "0.05")
    tested = sum(1 for r in rows.values() if r["p_adjusted"] is not None)
    assert report["correction"] == "holm" and tested > 1 and report["regressions"] == []
    assert rows["fourruns"]["verdict"] == "no significant change" and rows["fourruns"]["p_adjusted"] >= 0.05
    assert f"not significant once corrected for {tested} scripts judged at once (Holm's" in rows["fourruns"]["note"]
    assert rows["fourruns"]["phases"]["run_time"]["p_value"] == pytest.approx(2 / 70)  # its own p is kept


@pytest.mark.parametrize(
    "options, needle",
    [
        (["--alpha", "0"], "alpha must be between 0 and 1"),
        (["--alpha", "1.5"], "alpha must be between 0 and 1"),
        (["--min-effect", "5"], "ambiguous"),
        (["--metric", "bogus"], "unknown metric 'bogus'"),
    ],
)
def test_compare_bad_option_values_are_usage_errors(cli, crafted_pair, options, needle) -> None:
    base, new = crafted_pair
    one_line_usage_error(cli.run("compare", base, new, *options), needle)


# --- history --metric / --alpha / --min-effect / --limit (a real history) -----------------------------

DELAYED = """\
import time
from pathlib import Path

import jax.numpy as jnp

jnp.ones(2).block_until_ready()
time.sleep(float(Path("delay.txt").read_text()))
"""


@pytest.fixture(scope="module")
def history_db(tmp_path_factory: pytest.TempPathFactory, jaxrun_cli):
    """alpha.py and beta.py benchmarked three times (2 runs each, no delay: the 3 earlier runs a
    history check needs), then beta.py once more with a 2 s sleep added (read from delay.txt, so the
    script, its path and hash are unchanged)."""
    root = tmp_path_factory.mktemp("history")
    cli = _cli(jaxrun_cli, root)
    write(root, "s/alpha.py", DELAYED)
    write(root, "s/beta.py", DELAYED)
    (root / "s" / "delay.txt").write_text("0")
    common = ("--device", "cpu", "--benchmark-runs", 2, "--no-compile-cache")
    for label in ("1", "2", "3"):
        ok(cli.run("run", "s", *common, "--jobs", 2, "--results-dir", f"r{label}"))
    (root / "s" / "delay.txt").write_text("2")
    # With the default alpha 0.01, 2 new samples against 6 earlier ones cannot be significant
    # (the smallest two-sided p is 2 / C(8, 2) = 0.071): too few runs to judge, run flags nothing.
    ok(cli.run("run", root / "s" / "beta.py", *common, "--results-dir", "r4"))

    def history(*args: object) -> RunResult:
        return cli.run("history", *args)

    return history


def history_json(history, *args: object, expect: int = 0) -> dict:
    proc = history("--json", *args)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def by_script(doc: dict) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    runs = {Path(path).stem: rs for path, rs in doc["runs"].items()}
    checks = {Path(c["script_path"]).stem: c for c in doc["checks"]}
    return runs, checks


@pytest.fixture(scope="module")
def history_default(history_db) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """`jaxrun history --json` with the default options (gate run + compile, alpha 0.01, 5%, no limit)."""
    runs, checks = by_script(history_json(history_db))
    assert {name: len(rs) for name, rs in runs.items()} == {"alpha": 3, "beta": 4}
    return runs, checks


@pytest.fixture(scope="module")
def history_table(history_db) -> str:
    """The table of beta with --metric body_time --limit 1."""
    proc = history_db("beta", "--metric", "body_time", "--limit", 1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def counted(runs: list[dict], metric: str) -> list[float]:
    return [s[metric] for r in runs for s in r["samples"] if s["success"] and not s["warmup"]]


@pytest.mark.slow
def test_history_limit_shows_only_the_newest_runs_per_script(history_db, history_default, history_table) -> None:
    runs, checks = history_default
    limited, limited_checks = by_script(history_json(history_db, "--limit", 2))
    # Per script, not in all: alpha keeps its newest two of three runs, beta its newest two of four.
    assert {name: [r["id"] for r in rs] for name, rs in limited.items()} == {
        name: [r["id"] for r in rs[-2:]] for name, rs in runs.items()
    }
    assert limited_checks == checks  # the regression check still uses every earlier run
    rows = [line for line in history_table.splitlines() if "process" in line]  # one per run shown
    assert len(rows) == 1 and f" {runs['beta'][-1]['id']} " in rows[0], history_table


@pytest.mark.slow
def test_history_metric_selects_the_samples_checked(history_db, history_default, history_table) -> None:
    runs, default_checks = history_default
    beta = runs["beta"]
    assert counted(beta, "body_time") != counted(beta, "wall_time")
    _, body_checks = by_script(history_json(history_db, "--metric", "body_time"))
    assert default_checks["beta"]["gate"] == ["run_time", "compile_time"] and body_checks["beta"]["gate"] == ["body_time"]
    for metric, check in (("run_time", default_checks["beta"]), ("body_time", body_checks["beta"])):
        phase = check["comparison"]["phases"][metric]
        assert phase["metric"] == metric and metric in check["gate"]
        assert check["previous_runs"] == 3
        # The newest run against the three earlier ones, in the chosen metric's samples.
        assert phase["base_median"] == pytest.approx(statistics.median(counted(beta[:-1], metric)))
        assert phase["new_median"] == pytest.approx(statistics.median(counted(beta[-1:], metric)))
    assert "beta.py: body_time per run" in history_table


@pytest.mark.slow
def test_history_alpha_and_min_effect_decide_the_regression(history_db, history_default) -> None:
    """The options are chosen around the p-value and ratio that jaxrun reports for the stored runs,
    so the expected verdicts follow from the data whatever the timings were."""
    _, checks = history_default
    comparison = checks["beta"]["comparison"]
    p, ratio = comparison["phases"]["run_time"]["p_value"], comparison["phases"]["run_time"]["ratio"]
    # The 2 s sleep made beta slower by more than the default 5%; 6 vs 2 samples cannot give p < 0.01:
    # too few runs to judge (it said "no significant change"), so not judged and no regression.
    assert comparison["verdict"] == "too few runs to judge" and not checks["beta"]["regression"]
    assert checks["beta"]["judged"] is False and checks["beta"]["reason"].startswith("not judged: too few runs to judge")
    assert "at least 5 runs each" in checks["beta"]["reason"]
    assert p < 1 and ratio >= 1.06, comparison

    loose = f"{(1 + p) / 2:.4f}"  # an alpha above this p
    _, checks = by_script(history_json(history_db, "--alpha", loose, expect=1))
    assert checks["beta"]["regression"] and checks["beta"]["comparison"]["verdict"] == "slower"
    assert "run_time" in checks["beta"]["comparison"]["slower"]

    above = f"{100 * (ratio - 1) * 2:.1f}%"  # twice the slowdown measured
    _, checks = by_script(history_json(history_db, "--alpha", loose, "--min-effect", above))
    assert checks["beta"]["comparison"]["phases"]["run_time"]["p_value"] == pytest.approx(p)
    assert checks["beta"]["comparison"]["verdict"] == "no significant change"
    assert not checks["beta"]["regression"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "options, needle",
    [
        (["--metric", "bogus"], "unknown metric 'bogus'"),
        (["--min-effect", "5"], "ambiguous"),
    ],
)
def test_history_bad_option_values_are_usage_errors(history_db, options, needle) -> None:
    one_line_usage_error(history_db(*options), needle)


@pytest.mark.slow
def test_history_alpha_outside_0_1_is_a_usage_error(history_db) -> None:
    one_line_usage_error(history_db("--alpha", "1.5"), "alpha must be between 0 and 1")


@pytest.mark.slow
def test_history_negative_limit_is_a_usage_error(history_db) -> None:
    one_line_usage_error(history_db("--limit", "-1"), "limit")
