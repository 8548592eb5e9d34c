"""Settings from everywhere: the config file, per-script tables and header comments,
JAXRUN_* variables and the command line, in one precedence, each value with its source and the
file and line it came from; the mistakes a user makes in them; xfail and skip; script arguments;
numerics and environment options, recorded, and the refusal to compare across numerics.

The precedence is checked on the real resolver and planner (no subprocess needed: the same
functions `jaxrun run` calls), then end to end through the CLI with real JAX scripts."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import jaxrun, load, write

from jaxrun.config.config_files import key_lines
from jaxrun.config.settings import resolve_batch_options
from jaxrun.errors import UsageError
from jaxrun.judge.compare import compare_results
from jaxrun.judge.history import HistoryStore
from jaxrun.plan.batch_plan import discover, make_jobs, plan_devices, plan_scripts
from jaxrun.results.models import HistoryRun, Numerics, RunSample

PROJECT = """\
[project]
name = "demo"

[tool.jaxrun]
timeout = 120
x64 = true
results_dir = "out"
env = { SHARED = "config", ONLY_CONFIG = "1" }

[tool.jaxrun.scripts."sims/*_long.py"]
timeout = 900
args = ["--steps", "3"]
env = { SHARED = "script" }

[tool.jaxrun.scripts."sims/flaky.py"]
xfail = "diverges in float32"
"""
JAX = "import jax\n"


def project(root: Path, pyproject: str = PROJECT) -> Path:
    write(root, "pyproject.toml", pyproject)
    write(root, "sims/a_long.py", JAX)
    write(root, "sims/flaky.py", JAX)
    write(root, "sims/plain.py", JAX)
    write(root, "sims/own.py", "# jaxrun: timeout=33 args='--lr 0.1' env='SHARED=header'\n" + JAX)
    return root / "sims"


def jobs_by_name(paths, given=None, environ=None, source="cli"):
    options = resolve_batch_options(paths, given or {}, source=source, environ=environ or {}).options
    found, _ = discover(options.paths, options.recursive, options.include, options.exclude)
    planned, skipped = plan_scripts(options, found)
    jobs = make_jobs(options, planned, plan_devices(options, None, tuple(d for p in planned for d in p.devices)))
    return options, {job.name: options.options_for(job) for job in jobs}, skipped


def test_precedence_cli_over_env_over_script_over_config_over_default(tmp_path: Path) -> None:
    sims = project(tmp_path)
    options, runs, _ = jobs_by_name([sims])
    # config file only
    assert options.run.timeout == 120 and options.source_of("timeout") == "config"
    assert options.origin_of("timeout") == f"{tmp_path / 'pyproject.toml'}:5" or options.origin_of("timeout").endswith("pyproject.toml:5")
    assert options.results_dir == tmp_path / "out"  # relative to the file's folder, not the working one
    assert runs["plain"].timeout == 120 and runs["plain"].source_of("retries") == "default"
    # a per-script table beats the config file; the header comment beats the table
    assert (runs["a_long"].timeout, runs["a_long"].source_of("timeout")) == (900, "script")
    assert runs["a_long"].args == ("--steps", "3") and runs["a_long"].origin_of("args").endswith("pyproject.toml:12")
    assert (runs["own"].timeout, runs["own"].args) == (33, ("--lr", "0.1"))
    assert runs["own"].origin_of("timeout").endswith("own.py:1")
    # variables merge one by one, each from its strongest layer
    assert runs["a_long"].env == {"SHARED": "script", "ONLY_CONFIG": "1"}
    assert runs["own"].env == {"SHARED": "header", "ONLY_CONFIG": "1"}
    assert runs["plain"].env == {"SHARED": "config", "ONLY_CONFIG": "1"}
    # the environment beats per-script settings ...
    options, runs, _ = jobs_by_name([sims], environ={"JAXRUN_TIMEOUT": "50", "JAXRUN_ENV": "SHARED=env"})
    assert options.source_of("timeout") == "env" and options.origin_of("timeout") == "JAXRUN_TIMEOUT"
    assert {name: run.timeout for name, run in runs.items()} == {"a_long": 50, "flaky": 50, "own": 50, "plain": 50}
    assert runs["own"].env == {"SHARED": "env", "ONLY_CONFIG": "1"}
    assert runs["a_long"].args == ("--steps", "3")  # what the environment does not set stays the script's
    # ... and the command line beats the environment
    options, runs, _ = jobs_by_name([sims], {"timeout": 7, "x64": False}, {"JAXRUN_TIMEOUT": "50"})
    assert (options.run.timeout, options.source_of("timeout"), options.run.x64) == (7, "cli", False)
    assert {run.timeout for run in runs.values()} == {7}
    # several devices, as --device takes them, from the environment
    options, _, _ = jobs_by_name([sims], environ={"JAXRUN_DEVICE": "cpu,gpu"})
    assert options.device == ("cpu", "gpu") and options.origin_of("device") == "JAXRUN_DEVICE"
    # the API's keywords stand where the command line does
    _, runs, _ = jobs_by_name([sims], {"timeout": 8}, {"JAXRUN_TIMEOUT": "50"}, source="api")
    assert {run.timeout for run in runs.values()} == {8}


def test_every_path_a_config_file_names_is_relative_to_the_file(tmp_path: Path, monkeypatch) -> None:
    """Each option declared as a path (results, history, cache, every output file; a new one by its
    type alone) is read from a config file relative to the file's folder, not the working one."""
    from jaxrun.config.config_keys import TOP_KEYS
    from jaxrun.config.option_spec import holds_a_path
    from jaxrun.config.options import BatchOptions, RunOptions

    keys = sorted(name for options in (BatchOptions, RunOptions) for name, field in options.fields.items()
                  if holds_a_path(field) and name in TOP_KEYS)
    assert {"results_dir", "history", "compile_cache", "markdown", "export_json", "junit_xml"} <= set(keys)
    project_dir = tmp_path / "project"
    lines = "\n".join(f'{key} = "made/{key}.out"' for key in keys)
    write(project_dir, "pyproject.toml", f'[project]\nname = "demo"\n\n[tool.jaxrun]\n{lines}\n')
    write(project_dir, "sims/a.py", JAX)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    options = resolve_batch_options([project_dir / "sims"], {}, source="cli").options
    for key in keys:
        value = getattr(options, key) if key in BatchOptions.fields else getattr(options.run, key)
        assert value == project_dir / "made" / f"{key}.out", key


def test_jaxrun_config_shows_every_key_a_config_file_sets_as_the_run_reads_it(tmp_path: Path) -> None:
    """Each key of the config file is shown by `jaxrun config` with its value and line: a display
    setting (quiet) and every option alike, an output's switch (report) included."""
    from jaxrun.config.config_keys import DISPLAY_KEYS

    write(tmp_path / "s", "a.py", JAX)
    write(tmp_path / "s", "jaxrun.toml", "quiet = true\nreport = true\nstrict_xfail = true\n")
    done = jaxrun("config", tmp_path / "s", "--json")
    assert done.returncode == 0, done.stderr
    settings = json.loads(done.stdout)["settings"]
    where = str(tmp_path / "s" / "jaxrun.toml")
    for line, key in enumerate(("quiet", "report", "strict_xfail"), start=1):
        assert settings[key] == {"value": True, "source": "config", "origin": f"{where}:{line}"}, key
    assert set(DISPLAY_KEYS) == {"quiet"}  # report is an option (a sink's), not the CLI's own setting


def test_config_file_is_the_nearest_above_the_path_and_can_be_named_or_ignored(tmp_path: Path) -> None:
    sims = project(tmp_path / "proj")
    write(tmp_path / "proj", "sims/deep/jaxrun.toml", "timeout = 11\n")
    write(tmp_path / "proj", "sims/deep/d.py", JAX)
    assert resolve_batch_options([sims / "deep"], {}, environ={}).options.run.timeout == 11  # jaxrun.toml nearer
    assert resolve_batch_options([sims], {}, environ={}).options.run.timeout == 120
    assert resolve_batch_options([sims], {}, config=False, environ={}).options.run.timeout == 300
    named = resolve_batch_options([sims], {}, config=sims / "deep" / "jaxrun.toml", environ={})
    assert named.options.run.timeout == 11 and named.config.path == sims / "deep" / "jaxrun.toml"
    via_env = resolve_batch_options([sims], {}, environ={"JAXRUN_CONFIG": str(sims / "deep" / "jaxrun.toml")})
    assert via_env.options.run.timeout == 11
    # a pyproject.toml without a [tool.jaxrun] table is passed over
    write(tmp_path, "other/pyproject.toml", "[project]\nname = 'x'\n")
    write(tmp_path, "other/s.py", JAX)
    assert resolve_batch_options([tmp_path / "other"], {}, environ={}).config is None


@pytest.mark.parametrize(("text", "line", "message"), [
    ("[tool.jaxrun]\ntimeout = 5\ntimout = 3\n", 3, "unknown key 'timout' in [tool.jaxrun]: did you mean 'timeout'?"),
    ("[tool.jaxrun]\ntimeout = 'fast'\n", 2, "[tool.jaxrun] timeout: timeout must be a number of seconds > 0, or none for no limit, got 'fast'"),
    ("[tool.jaxrun]\ndevice = 'gpux'\n", 2, "unknown device 'gpux': choose one of auto, cpu, gpu, tpu"),
    ('[tool.jaxrun]\n\n[tool.jaxrun.scripts."a/*.py"]\nretrys = 2\n', 4,
     'unknown key \'retrys\' in [tool.jaxrun.scripts."a/*.py"]: did you mean \'retries\'?'),
    ("[tool.jaxrun.execution]\nmixed_precision = true\n", 2, '--matmul-precision bfloat16'),
    ("[tool.jaxrun.execution]\ncheckpoint_gradients = true\n", 2, "memory_limit (--memory-limit)"),
    ("[tool.jaxrun]\nskip = 'x'\n", 2, "skip is a per-script setting"),
    ("[tool.jaxrun]\nmatmul_precision = 'bf17'\n", 2, "is not one of JAX's: default, high, highest, bfloat16"),
    ("[tool.jaxrun.monitoring.metrics]\ngpu_utilisation = true\n", 1, "did you mean 'gpu_utilization'?"),
    ("[tool.jaxrun]\ndevice = ['cpu', 'gpx']\n", 2, "device: unknown device 'gpx'"),
])
def test_a_mistake_in_the_config_file_names_file_line_and_the_fix(tmp_path: Path, text: str, line: int,
                                                                   message: str) -> None:
    write(tmp_path, "pyproject.toml", text)
    write(tmp_path, "s.py", JAX)
    with pytest.raises(UsageError) as caught:
        resolve_batch_options([tmp_path], {}, environ={})
    assert f"pyproject.toml:{line}: " in str(caught.value) and message in str(caught.value), str(caught.value)


def test_cli_reports_a_config_mistake_in_one_line_and_exit_2(tmp_path: Path) -> None:
    write(tmp_path, "jaxrun.toml", "jobs = 2\n[scripts.'*.py']\ntimout = 5\n")
    write(tmp_path, "s.py", JAX)
    done = jaxrun("run", tmp_path, "--no-history")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"jaxrun: error: {tmp_path / 'jaxrun.toml'}:3: unknown key 'timout' in [scripts.\"*.py\"]: did you mean 'timeout'?"]
    header = write(tmp_path / "h", "s.py", "# jaxrun: timeot=3\n" + JAX)
    done = jaxrun("run", header, "--no-history", "--no-config")
    assert done.returncode == 2 and "s.py:1: unknown key 'timeot' in the '# jaxrun:' comment: did you mean 'timeout'?" \
        in done.stderr and "Traceback" not in done.stderr
    done = jaxrun("run", tmp_path, "--no-config", "--no-history", env={"JAXRUN_JOBS": "two"})
    assert done.returncode == 2 and "environment variable JAXRUN_JOBS: must be a whole number, got 'two'" in done.stderr


def test_seed_configuration_blocks_map_onto_options(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", """\
        [tool.jaxrun.execution]
        device_selection = "cpu"
        memory_limit = "auto"
        timeout_seconds = 60
        enable_profiling = false
        parallel_execution = true
        cleanup_temp_files = true

        [tool.jaxrun.devices.cpu]
        platform_name = "cpu"
        memory_limit = "8GB"

        [tool.jaxrun.monitoring.metrics]
        execution_time = true
        gpu_utilization = true

        [tool.jaxrun.monitoring.logging]
        level = "DEBUG"

        [tool.jaxrun.monitoring.benchmarking]
        warmup_runs = 1
        measurement_runs = 3
        statistical_analysis = true
        """)
    write(tmp_path, "s.py", JAX)
    options, runs, _ = jobs_by_name([tmp_path])
    assert options.device == ("cpu",) and options.run.timeout == 60 and options.jobs == (os.cpu_count() or 1)
    assert (options.run.warmup_runs, options.run.benchmark_runs, options.run.verbose) == (1, 3, True)
    assert options.run.memory_limit is None  # "auto": no limit ...
    assert runs["s"].memory_limit == 8 * 10**9  # ... but the cpu table's limit (8GB: decimal) holds for a script on cpu
    assert options.origin_of("benchmark_runs").endswith("pyproject.toml:22")


@pytest.mark.slow
def test_jaxrun_config_shows_each_value_and_where_it_came_from(tmp_path: Path) -> None:
    sims = project(tmp_path)
    write(tmp_path, "sims/skipped.py", "# jaxrun: skip='needs a TPU'\n" + JAX)
    done = jaxrun("config", sims, "--jobs", "2", "--json", env={"JAXRUN_RETRIES": "1"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    settings = report["settings"]
    assert report["config_file"] == str(tmp_path / "pyproject.toml")
    assert settings["timeout"] == {"value": 120.0, "source": "config", "origin": f"{tmp_path / 'pyproject.toml'}:5"}
    assert settings["retries"] == {"value": 1, "source": "env", "origin": "JAXRUN_RETRIES"}
    assert settings["jobs"] == {"value": 2, "source": "cli", "origin": "--jobs"}
    assert settings["backend"] == {"value": "local", "source": "default", "origin": None}
    scripts = {s["name"]: s for s in report["scripts"]}
    assert scripts["skipped"]["skip"] == "needs a TPU"
    assert scripts["a_long"]["settings"]["timeout"]["value"] == 900
    assert "plain" not in scripts  # nothing of its own
    overridden = jaxrun("config", sims, "--timeout", "5", "--json")
    own = {s["name"]: s for s in json.loads(overridden.stdout)["scripts"]}["own"]
    assert own["overridden"]["timeout"] == {"value": 33, "origin": f"{sims / 'own.py'}:1", "by": "--timeout"}
    # The table names the config file's lines by its name (its path is the first line): however long
    # the folder's path (pytest-xdist adds popen-gwN/), "pyproject.toml:5" is never split in two.
    table = jaxrun("config", sims)
    assert table.returncode == 0 and "pyproject.toml:5" in table.stdout and "skipped: needs a TPU" in table.stdout
    # Without PATH it reads the current folder, as the help says.
    here = jaxrun("config", "--json", cwd=sims)
    assert here.returncode == 0, here.stderr
    assert json.loads(here.stdout)["config_file"] == str(tmp_path / "pyproject.toml")
    bad = jaxrun("config", sims, "--timeout", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("jaxrun: error: timeout must be a number of seconds > 0, "
                                                         "or none for no limit, got 'soon'"), bad.stderr


# --- end to end: one real batch ---------------------------------------------------------------------

PRINTS = """\
import json, os, sys
import jax, jax.numpy as jnp
print(json.dumps({"argv": sys.argv[1:], "dtype": str(jnp.ones(2).dtype),
                  "precision": jax.config.jax_default_matmul_precision,
                  "disable_jit": jax.config.jax_disable_jit,
                  "env": sorted(k for k in os.environ if k in ("FOO", "MY_SECRET", "JAX_TEST_KEEP"))}))
"""


@pytest.mark.slow
def test_a_configured_project_runs_with_its_settings_end_to_end(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", """\
        [tool.jaxrun]
        x64 = true
        device = "cpu"
        history = false
        compile_cache = false

        [tool.jaxrun.scripts."isolated.py"]
        isolate_env = true
        """)
    write(tmp_path, "p/prints.py", PRINTS)
    write(tmp_path, "p/isolated.py", PRINTS)
    write(tmp_path, "p/fails.py", "# jaxrun: xfail='known bug #12'\nif False:\n    import jax\nraise ValueError('boom')\n")
    write(tmp_path, "p/passes.py", "# jaxrun: xfail='was broken'\nif False:\n    import jax\n")
    write(tmp_path, "p/skipped.py", "# jaxrun: skip='needs a TPU'\nif False:\n    import jax\nraise SystemExit(3)\n")
    results = tmp_path / "r"
    done = jaxrun("run", tmp_path / "p", "--results-dir", results, "--matmul-precision", "highest", "--env", "FOO=bar",
                  "--", "--steps", "100", env={"MY_SECRET": "s3cret", "JAX_TEST_KEEP": "1"})
    # a script expected to fail that fails leaves the batch green; one that passes is reported
    assert done.returncode == 0, done.stdout + done.stderr
    assert "xfail: fails.py: script_error: ValueError: boom at fails.py:4 (expected: known bug #12)" in done.stdout
    assert "XPASS: passes.py passed but is marked xfail (was broken)" in done.stdout
    assert "skipped: skipped.py: needs a TPU (" in done.stdout  # and where the skip was set
    doc = load(results / "jax_execution_results.json")
    rows = {r["script_name"]: r for r in doc["script_results"]}
    assert sorted(rows) == ["fails", "isolated", "passes", "prints"]  # the skipped script never ran
    assert (rows["fails"]["outcome"], rows["fails"]["success"], rows["fails"]["xfail"]) == ("xfailed", False, "known bug #12")
    assert rows["passes"]["outcome"] == "xpassed" and rows["prints"]["outcome"] == "passed"
    meta = doc["metadata"]
    assert (meta["scripts_xfailed"], meta["scripts_xpassed"], meta["config_file"]) == (1, 1, str(tmp_path / "pyproject.toml"))
    assert meta["skipped"] == [{"script_name": "skipped", "script_path": str(tmp_path / "p/skipped.py"),
                                "reason": "needs a TPU", "origin": f"{tmp_path / 'p/skipped.py'}:1"}]
    # what the script saw is what the result records
    row = rows["prints"]
    seen = json.loads((results / "logs/prints.stdout.log").read_text())
    assert seen == {"argv": ["--steps", "100"], "dtype": "float64", "precision": "highest", "disable_jit": False,
                    "env": ["FOO", "JAX_TEST_KEEP", "MY_SECRET"]}
    assert row["script_args"] == ["--steps", "100"] and row["command"][-3:] == [str(tmp_path / "p/prints.py"), "--steps", "100"]
    assert row["numerics"] == {"x64": True, "matmul_precision": "highest", "debug_nans": False, "debug_infs": False,
                               "disable_jit": False, "xla_flags": None}
    assert row["environment"]["mode"] == "inherited" and row["environment"]["set"] == {"FOO": "bar"}
    assert row["settings"] == {}
    # the isolated script lost the user's own variable, kept JAX_* and got --env's
    isolated = json.loads((results / "logs/isolated.stdout.log").read_text())
    assert isolated["env"] == ["FOO", "JAX_TEST_KEEP"] and rows["isolated"]["environment"]["mode"] == "isolated"
    assert rows["isolated"]["settings"] == {"isolate_env": f"{tmp_path / 'pyproject.toml'}:8"}
    assert rows["isolated"]["environment"]["variables"] < rows["prints"]["environment"]["variables"]

    # --strict-xfail: the unexpected pass fails the batch
    strict = jaxrun("run", tmp_path / "p", "--results-dir", tmp_path / "r2", "--strict-xfail", "--include", "passes.py")
    assert strict.returncode == 1, strict.stdout + strict.stderr

    # Two runs with other numerics are not compared silently
    other = tmp_path / "r_other"
    shutil.copytree(results, other)
    document = load(other / "jax_execution_results.json")
    for result in document["script_results"]:
        result["numerics"]["x64"] = False
    (other / "jax_execution_results.json").write_text(json.dumps(document))
    report = compare_results(results, other)
    assert report.numerics_mismatch == ["fails", "isolated", "passes", "prints"]
    prints = next(s for s in report.scripts if s.script_name == "prints")
    assert prints.verdict == "not comparable" and "numerics differ (base vs new: x64 True vs False)" in prints.note
    judged = compare_results(results, other, allow_mismatch=True)
    assert "not judged" not in (next(s for s in judged.scripts if s.script_name == "prints").note or "")
    gate = jaxrun("compare", results, other, "--fail-on-regression")
    assert gate.returncode == 1 and "not judged; pass --allow-mismatch" in gate.stdout
    assert jaxrun("compare", results, other, "--fail-on-regression", "--allow-mismatch").returncode == 0


@pytest.mark.slow
def test_disable_jit_and_xla_flags_reach_the_script(tmp_path: Path) -> None:
    write(tmp_path, "s/check.py", """\
        import os, jax
        assert jax.config.jax_disable_jit
        assert "--xla_cpu_enable_fast_math=false" in os.environ["XLA_FLAGS"].split()
        assert "--xla_cpu_enable_fast_math=true" not in os.environ["XLA_FLAGS"]
        """)
    done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--results-dir", tmp_path / "r", "--no-history",
                  "--disable-jit", "--xla-flags", "--xla_cpu_enable_fast_math=false",
                  env={"XLA_FLAGS": "--xla_cpu_enable_fast_math=true"})
    assert done.returncode == 0, done.stdout + done.stderr
    numerics = load(tmp_path / "r/script_results/check_result.json")["numerics"]
    assert numerics["disable_jit"] and numerics["xla_flags"] == "--xla_cpu_enable_fast_math=false"


# --- the history and numerics ---------------------------------------------------------------------


def _run(walls: list[float], numerics: Numerics | None) -> HistoryRun:
    return HistoryRun(recorded_at="2026-01-01T00:00:00Z", script_name="s", script_path="/s.py", content_hash="h",
                      host="h", device_requested="cpu", device_used="cpu", jaxrun_version="t", numerics=numerics,
                      samples=[RunSample(index=i, warmup=False, wall_time=w, run_time=w, compile_time=0.1, success=True)
                               for i, w in enumerate(walls)])


@pytest.mark.slow
def test_history_judges_only_against_runs_with_the_same_numerics(tmp_path: Path) -> None:
    plain, x64 = Numerics(), Numerics(x64=True)
    with HistoryStore(tmp_path / "h.sqlite") as store:
        for _ in range(3):
            store.record(_run([1.0, 1.01, 0.99, 1.0, 1.02], plain))
        newest = store.record(_run([2.0, 2.01, 1.99, 2.0, 2.02], x64))
        check = store.check_regression(newest)
        assert (check.regression, check.previous_runs, check.other_numerics) == (False, 0, 3)
        assert check.note.startswith("not judged: the 3 earlier runs started with other numerics")
        assert not check.judged and check.reason == "not judged: no earlier run, needs 3 (3 more with other numerics)"
        pooled = store.check_regression(newest, allow_mismatch=True)
        assert pooled.regression and pooled.previous_runs == 3 and pooled.judged
        same = store.record(_run([2.0, 2.02, 1.98, 2.01, 2.0], x64))
        check = store.check_regression(same)
        assert (check.previous_runs, check.other_numerics, check.regression, check.judged) == (1, 3, False, False)
        assert check.reason == "not judged: 1 earlier run, needs 3 (3 more with other numerics)"
        assert store.get(same).numerics == x64


@pytest.mark.slow
def test_jaxrun_history_says_not_judged_across_numerics_unless_allowed(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with HistoryStore(db) as store:
        for _ in range(3):
            store.record(_run([1.0, 1.01, 0.99, 1.0, 1.02], Numerics()))
        store.record(_run([2.0, 2.01, 1.99, 2.0, 2.02], Numerics(matmul_precision="bfloat16")))
    refused = jaxrun("history", "--history", db, "--json")
    (check,) = json.loads(refused.stdout)["checks"]
    assert refused.returncode == 0 and check["other_numerics"] == 3 and check["note"].startswith("not judged")
    assert check["judged"] is False and check["reason"] == "not judged: no earlier run, needs 3 (3 more with other numerics)"
    allowed = jaxrun("history", "--history", db, "--json", "--allow-mismatch")
    assert allowed.returncode == 1 and json.loads(allowed.stdout)["checks"][0]["regression"]  # 2x slower
    table = " ".join(jaxrun("history", "--history", db).stdout.split())
    assert "not judged: no earlier run, needs 3" in table


def test_key_lines_finds_keys_in_quoted_tables_and_skips_multiline_strings() -> None:
    lines = key_lines('a = 1\n[tool.jaxrun]\nx = """\nfake = 2\n"""\n[tool.jaxrun.scripts."s/*.py"]\n"quoted key" = 3\n')
    assert lines[("a",)] == 1 and lines[("tool", "jaxrun", "x")] == 3
    assert ("tool", "jaxrun", "fake") not in lines
    assert lines[("tool", "jaxrun", "scripts", "s/*.py", "quoted key")] == 7


def test_each_job_gets_its_own_device_tables_settings_and_origins(tmp_path: Path) -> None:
    write(tmp_path, "jaxrun.toml", """\
        device = ["cpu", "gpu"]
        [devices.cpu]
        memory_limit = "1GB"
        [devices.gpu]
        memory_limit = "2GiB"
        """)
    write(tmp_path, "s.py", JAX)
    options = resolve_batch_options([tmp_path], {}, environ={}).options
    found, _ = discover(options.paths, options.recursive, options.include, options.exclude)
    planned, _ = plan_scripts(options, found)
    jobs = make_jobs(options, planned, plan_devices(options, None))
    runs = {job.device: options.options_for(job) for job in jobs}
    assert (runs["cpu"].memory_limit, runs["gpu"].memory_limit) == (10**9, 2 * 2**30)  # 1GB, 2GiB
    assert runs["cpu"].origin_of("memory_limit").endswith("jaxrun.toml:3")
    assert runs["gpu"].origin_of("memory_limit").endswith("jaxrun.toml:5")  # not the cpu table's line


def test_a_script_s_own_device_list_gives_each_device_its_own_files(tmp_path: Path) -> None:
    """A '# jaxrun: device=' list makes one job per device: before, both wrote the same
    <name>_result.json and logs (the batch added @device only for a batch-wide list)."""
    write(tmp_path, "s/both.py", "# jaxrun: device='cpu,gpu'\nif False:\n    import jax\nprint('hi')\n")
    write(tmp_path, "s/plain.py", "if False:\n    import jax\nprint('hi')\n")
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history")
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted(p.name for p in (tmp_path / "r" / "script_results").iterdir())
    assert files == ["both@cpu_result.json", "both@gpu_result.json", "plain_result.json"]
    doc = load(tmp_path / "r" / "jax_execution_results.json")
    assert [(r["script_name"], r["device_requested"]) for r in doc["script_results"]] == [
        ("both", "cpu"), ("both", "gpu"), ("plain", "auto")]
    assert "both.py @cpu" in done.stdout and "both.py @gpu" in done.stdout and "plain.py @" not in done.stdout


def test_the_header_comment_is_read_from_a_bounded_start_of_the_file(tmp_path: Path) -> None:
    # read_header read 40 lines with an unbounded readline: a file of one 50 MB line was read whole.
    from jaxrun.config.script_header import HEADER_BYTES, read_header

    script = tmp_path / "long.py"
    script.write_bytes(b"# jaxrun: timeout=5\n" + b"x = 1  # " + b"y" * (4 * HEADER_BYTES) + b"\n# jaxrun: timeout=9\n")
    assert [(s.key, s.value, s.line) for s in read_header(script)] == [("timeout", 5, 1)]
    one_line = tmp_path / "one_line.py"
    one_line.write_bytes(b"# jaxrun: timeout=7 " + b"z" * (4 * HEADER_BYTES))  # cut off by the bound: not read
    assert read_header(one_line) == []
    short = tmp_path / "short.py"
    short.write_bytes(b"import jax\r\n" * 3 + b"# jaxrun: timeout=3")  # the last line, without its newline
    assert [(s.key, s.value, s.line) for s in read_header(short)] == [("timeout", 3, 4)]
