"""RunOptions and BatchOptions: validated once, immutable, picklable, and each value knows where it
came from. Through the API (``execute_jax_script`` / ``run_jax_scripts`` build them) and directly."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from helpers import jaxrun as run_cli
from helpers import load, write

import jaxrun
from jaxrun import BatchOptions, RunOptions
from jaxrun.errors import InvalidDeviceError, UsageError


def test_options_are_exported_and_immutable() -> None:
    options = RunOptions.build("api", timeout=5)
    with pytest.raises(AttributeError, match="immutable"):
        options.timeout = 10  # type: ignore[misc]
    assert options.timeout == 5.0 and options.retries == 0 and options.device == "auto"


def test_each_value_remembers_its_source() -> None:
    options = BatchOptions.build("cli", sources={"history": "env"}, paths=["x"], jobs=2, timeout=7,
                                 history="h.sqlite")
    assert options.source_of("jobs") == "cli"
    assert options.source_of("timeout") == "cli"  # a run option, read through the batch
    assert options.run.source_of("timeout") == "cli"
    assert options.source_of("history") == "env"
    assert options.source_of("retries") == "default"
    assert options.source_of("compile_cache") == "default"  # resolved to jaxrun's folder, still a default
    assert options.run.compile_cache is not None
    assert options.source_of("device") == "default"
    assert options.sources["paths"] == "cli" and options.sources["backend"] == "default"
    with pytest.raises(UsageError, match="unknown option 'nope'"):
        options.source_of("nope")


def test_options_pickle_with_their_sources() -> None:
    options = BatchOptions.build("api", paths=["a", "b"], device="cpu,gpu", retries=2, env={"A": "1"})
    copy = pickle.loads(pickle.dumps(options))
    assert copy == options
    assert copy.source_of("retries") == "api" and copy.source_of("jobs") == "default"
    gpu = copy.run_for("gpu")
    assert gpu.device == "gpu" and gpu.retries == 2 and gpu.source_of("retries") == "api"
    assert options.run.device == "cpu"  # the first device; the original is unchanged


def test_one_name_per_option_and_values_normalised_once() -> None:
    options = BatchOptions.build("api", paths="x", device=["gpu", "cpu", "gpu"], compile_cache=False,
                                 history=False, args=["--n", 3], include="*.py")
    assert options.device == ("gpu", "cpu")
    assert options.run.compile_cache is None and options.history is None
    assert options.run.args == ("--n", "3")
    assert options.include == ("*.py",)
    assert options.results_dir.is_absolute()


@pytest.mark.parametrize(
    "given, error, message",
    [
        ({"bogus": 1}, UsageError, "unknown option 'bogus': valid options are .*timeout"),
        ({"device": "xpu"}, InvalidDeviceError, "auto, cpu, gpu, tpu"),
        ({"timeout": "soon"}, UsageError, "timeout must be a number of seconds"),
        ({"entry": "1x"}, UsageError, "entry must be the name of a function"),
        ({"entry": "main", "warm_calls": 1}, UsageError, "warm_calls must be at least 2"),
        ({"env": ["A=1"]}, UsageError, "env must be a mapping"),
        ({"args": "--n 3"}, UsageError, "args must be a list of strings"),
        ({"compile_cache": 3}, UsageError, "compile_cache must be a folder path"),
        ({"fallback": "maybe"}, UsageError, "fallback must be true or false, got 'maybe'$"),
        ({"warm_calls": "x" * 10_000}, UsageError, "warm_calls must be a whole number, got 'x+…x+'$"),
        ({"retries": 1.5}, UsageError, "retries must be a whole number >= 0"),
        ({"benchmark_runs": 2**63}, UsageError, "benchmark_runs must be at most 10,000 process runs of each script, "
                                                "got 9223372036854775808$"),
        ({"benchmark_runs": 1, "warmup_runs": 10_001}, UsageError, "warmup_runs must be at most 10,000"),
        ({"benchmark_runs": 10**400}, UsageError, "got a whole number of 1,329 bits$"),
        ({"device": "gpu:2147483648"}, InvalidDeviceError, "unknown device 'gpu:2147483648'"),
        ({"device": "cpu:" + "0" * 10_000 + "9x"}, InvalidDeviceError, "unknown device 'cpu:0+…0+9x': choose"),
    ],
)
def test_bad_run_options_name_the_culprit(tmp_path: Path, given: dict, error: type, message: str) -> None:
    script = write(tmp_path, "a.py", "import jax\n")
    with pytest.raises(error, match=message):
        jaxrun.execute_jax_script(script, results_dir=tmp_path / "r", **given)
    assert not (tmp_path / "r").exists()  # nothing ran, nothing was written


def test_counts_of_runs_are_bounded_on_every_surface_and_a_value_is_never_echoed_whole(tmp_path: Path) -> None:
    assert RunOptions.build("api", benchmark_runs=10_000, warmup_runs=10_000).benchmark_runs == 10_000
    assert RunOptions.build("api", device="cpu:" + "0" * 10_000).device == "cpu:0"
    with pytest.raises(InvalidDeviceError) as refused:
        BatchOptions.build("api", paths=["x"], device="x" * 10_000_000)
    assert len(str(refused.value)) < 300
    write(tmp_path / "s", "a.py", "import jax\n")
    for args in (["--benchmark-runs", "10001"], ["--benchmark-runs", "1", "--warmup-runs", str(2**64)]):
        done = run_cli("run", tmp_path / "s", "--results-dir", tmp_path / "r", *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "must be at most 10,000 process runs of each script" in done.stderr
    done = run_cli("run", tmp_path / "s", "--results-dir", tmp_path / "r", env={"JAXRUN_BENCHMARK_RUNS": "20000"})
    assert done.returncode == 2 and "benchmark_runs must be at most 10,000" in done.stderr, done.stderr
    assert not (tmp_path / "r").exists()


def test_unknown_batch_option_names_the_close_one_or_lists_batch_and_run_options(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"unknown option 'job': did you mean 'jobs'\?"):
        jaxrun.run_jax_scripts(tmp_path, results_dir=tmp_path / "r", job=2)
    with pytest.raises(UsageError, match=r"unknown option 'timout': did you mean 'timeout'\?"):
        jaxrun.execute_jax_script(tmp_path / "x.py", timout=3)  # a run option, through the other API
    with pytest.raises(UsageError, match="unknown option 'qqq': valid options are .*jobs.*retries"):
        jaxrun.run_jax_scripts(tmp_path, results_dir=tmp_path / "r", qqq=2)


DIVIDES_BY_ZERO = """\
import jax
import jax.numpy as jnp
print(jax.jit(lambda x: 1.0 / x)(jnp.float32(0.0)))
"""


@pytest.mark.slow
def test_debug_infs_reaches_the_child(tmp_path: Path) -> None:
    """An option added in three files (options, environment, CLI) changes what the script sees."""
    script = write(tmp_path, "inf.py", DIVIDES_BY_ZERO)
    plain = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "a", compile_cache=False)
    assert plain.success and "inf" in Path(plain.stdout_log).read_text()
    strict = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "b", compile_cache=False, debug_infs=True)
    assert not strict.success and strict.error_class == "numerical_instability"
    assert strict.exception_type == "FloatingPointError"


LEAKS_A_TRACER = """\
import jax, jax.numpy as jnp
leaked = []

@jax.jit
def f(x):
    leaked.append(x)
    return x + 1

print(f(jnp.ones(3)))
"""


@pytest.mark.slow
def test_an_option_declared_in_two_files_reaches_the_child_from_every_surface(tmp_path: Path) -> None:
    """check_tracer_leaks is one field (config/options.py) and one variable (run/process/environment.py): the CLI
    flag, the JAXRUN_* variable and the API keyword all reach the script; without it the same
    script passes (JAX keeps no watch on leaked tracers by default)."""
    script = write(tmp_path, "leak.py", LEAKS_A_TRACER)
    plain = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "a", compile_cache=False)
    assert plain.success, plain.error_message
    api = jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "b", compile_cache=False,
                                    check_tracer_leaks=True)
    assert not api.success and "Leaked trace" in (api.error_message or ""), api.error_message
    for how, extra in (("flag", ["--check-tracer-leaks"]), ("variable", [])):
        env = {"JAXRUN_CHECK_TRACER_LEAKS": "1"} if how == "variable" else {}
        done = run_cli("run", script, "--device", "cpu", "--no-compile-cache", "--no-history", "--no-config",
                       "--results-dir", tmp_path / how, *extra, env=env)
        assert done.returncode == 1, (how, done.stderr)
        [row] = load(tmp_path / how / "jax_execution_results.json")["script_results"]
        assert "Leaked trace" in row["error_message"], (how, row["error_message"])


def test_the_cli_marks_flags_env_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds one BatchOptions; each value says whether a flag, the environment or the
    default set it. The batch itself is not run: run_batch is replaced by a probe of its options."""
    from click.testing import CliRunner

    import jaxrun.batch.pipeline
    from jaxrun.interfaces.cli import app

    seen: list[BatchOptions] = []

    def capture(options: BatchOptions, **_: object):  # type: ignore[no-untyped-def]
        seen.append(options)
        raise KeyboardInterrupt  # stop here: the CLI reports an interrupted run

    monkeypatch.setattr(jaxrun.batch.pipeline, "run_batch", capture)
    monkeypatch.setenv("JAXRUN_HISTORY", str(tmp_path / "h.sqlite"))
    write(tmp_path / "s", "a.py", "import jax\n")
    result = CliRunner().invoke(app, ["run", str(tmp_path / "s"), "--jobs", "2", "--no-fallback", "--warm",
                                      "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 130, result.output
    (options,) = seen
    assert options.jobs == 2 and options.source_of("jobs") == "cli"
    assert options.run.fallback is False and options.source_of("fallback") == "cli"  # --no-fallback
    assert options.run.entry == "main" and options.source_of("entry") == "cli"  # --warm
    assert options.history == tmp_path / "h.sqlite" and options.source_of("history") == "env"
    assert options.run.timeout == 300.0 and options.source_of("timeout") == "default"


@pytest.mark.parametrize("given, key", [
    ({"compile_cache": "/tmp/cc"}, "7faf9f5d53b9bd6d"),
    ({"compile_cache": "/tmp/cc", "timeout": None, "env": {"A": "é\n"}, "args": ["x", "y"], "processes": 2,
      "memory_limit": "1GiB", "matmul_precision": "high", "xla_flags": "--x=1"}, "4d270694b90486da"),
    ({"compile_cache": False, "timeout": 12.5, "benchmark_runs": 3, "warmup_runs": 1, "entry": "main", "warm_calls": 4,
      "x64": True, "host_devices": 4, "compile_cache_max_size": None, "device": "cpu:1"}, "f9bd1153e0970140"),
])
def test_the_options_key_is_the_one_earlier_results_hold(given: dict, key: str) -> None:
    # The keys were computed by jaxrun 0.1.0 when the options were pydantic models: a results folder
    # written then still resumes (--resume keeps a result only when its options' key matches).
    assert RunOptions.build("api", **given).key == key


def test_a_value_is_checked_against_its_type_where_no_check_of_its_own_reads_it() -> None:
    options = RunOptions.build("config", x64="yes", warm_calls=4.0, fallback=0)
    assert options.x64 is True and options.warm_calls == 4 and options.fallback is False
    for given, said in [({"x64": 2}, "x64 must be true or false, got 2"),
                        ({"warm_calls": True}, "warm_calls must be a whole number, got True"),
                        ({"entry": 3}, "entry must be text, got 3")]:
        with pytest.raises(UsageError, match=f"^{said}$"):
            RunOptions.build("api", **given)
    with pytest.raises(UsageError, match="^results_dir: .*, got 3$"):
        BatchOptions.build("api", paths=["."], results_dir=3)
