"""`jaxrun run --benchmark-runs/--warm/--device a,b`, `jaxrun compare` and `jaxrun history`.

Real `python -m jaxrun` subprocesses, real JAX on CPU, a real SQLite history in tmp_path. The
speed differences are made with `time.sleep` in tiny scripts and judged by jaxrun's own verdict
(Mann-Whitney U, p < 0.01, at least 5% effect); no test asserts how long anything takes.
Every run gets `--results-dir` in tmp_path and `--history` / `--no-history`, and runs with
tmp_path as working folder, so nothing lands in the repository.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from helpers import load

from jaxrun import get_jax_device_info

REPO_ROOT = Path(__file__).resolve().parents[2]


def sleeper(seconds: float) -> str:
    return textwrap.dedent(
        f"""\
        import time

        import jax.numpy as jnp

        jnp.ones(2).block_until_ready()
        time.sleep({seconds})
        """
    )


WARM = """\
import jax
import jax.numpy as jnp


@jax.jit
def step(x):
    return jnp.tanh(x @ x.T).sum(axis=0)


X = jnp.linspace(0.0, 1.0, 64 * 64).reshape(64, 64)


def main():
    return step(X)


if __name__ == "__main__":
    raise SystemExit("the __main__ block must not run in warm mode")
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def cli(jaxrun_cli, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    # In a working folder of this module's (a default ./.jaxrun or ./jaxrun_results lands there),
    # with a device-facts cache of its own and no history the user's environment names.
    return jaxrun_cli.but(cwd=tmp_path_factory.mktemp("cwd"),
                          env={"JAXRUN_CACHE_DIR": str(tmp_path_factory.mktemp("device-cache")), "JAXRUN_HISTORY": None})


def counted(bench: dict) -> list[dict]:
    return [s for s in bench["samples"] if not s["warmup"]]


# --- jaxrun run --benchmark-runs ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def bench_dir(cli, tmp_path_factory: pytest.TempPathFactory):
    """Two tiny scripts, 1 warm-up + 5 counted runs each, through the CLI."""
    root = tmp_path_factory.mktemp("bench")
    write(root / "scripts" / "alpha.py", sleeper(0.05))
    write(root / "scripts" / "sub" / "beta.py", sleeper(0.05))
    out = root / "results"
    proc = cli.run(
        "run", root / "scripts", "--device", "cpu", "--benchmark-runs", 5, "--warmup-runs", 1,
        "--results-dir", out, "--history", root / "h.sqlite",
    )
    return proc, out


@pytest.mark.slow
def test_benchmark_runs_write_the_benchmark_file_with_raw_samples(bench_dir) -> None:
    proc, out = bench_dir
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load(out / "jax_benchmark_results.json")
    assert (doc["enabled"], doc["benchmark_runs"], doc["warmup_runs"]) == (True, 5, 1)
    assert doc["runs_completed"] == 10
    assert sorted(b["script_name"] for b in doc["benchmarks"]) == ["alpha", "sub__beta"]
    for bench in doc["benchmarks"]:
        assert bench["runs_completed"] == 5
        assert [s["index"] for s in counted(bench)] == [1, 2, 3, 4, 5]
        assert [w["warmup"] for w in bench["warmups"]] == [True]
        for sample in bench["samples"]:
            for metric in ("wall_time", "body_time", "import_time", "compile_time", "run_time", "memory_peak"):
                assert isinstance(sample[metric], float), (metric, sample)
        assert len({s["wall_time"] for s in bench["samples"]}) == 5  # five real processes
        assert bench["statistics"]["wall_time"]["n"] == 5
    # The terminal shows the benchmark table, with the counted runs per script.
    assert "process benchmark" in proc.stdout and "5/5" in proc.stdout


@pytest.mark.slow
def test_compare_a_results_dir_with_itself_finds_no_change(cli, bench_dir) -> None:
    _, out = bench_dir
    proc = cli.run("compare", out, out, "--json", "--fail-on-regression")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert sorted(s["script_name"] for s in report["scripts"]) == ["alpha", "sub__beta"]
    for row in report["scripts"]:
        assert row["verdict"] == "no significant change", row
        assert set(row["phases"]) == {"wall_time", "import_time", "compile_time", "run_time", "memory_peak"}
        for phase in row["phases"].values():
            assert (phase["base_n"], phase["new_n"]) == (5, 5)
            assert phase["ratio"] == pytest.approx(1.0)
    assert report["regressions"] == [] and report["improvements"] == []
    assert report["only_in_base"] == [] and report["only_in_new"] == []


# --- jaxrun compare: a deliberate slowdown -----------------------------------------------------------


def lazy_jax_sleeper(seconds: float) -> str:
    """A JAX script for jaxrun (it imports jax, in a function) whose run is only start-up + sleep.

    Importing jax takes ~1 s here and, on a busy 2-core box, varies by over 1 s from run to run
    (measured 0.9-2.0 s with another test session beside it): noise on top of any sleep. Left in a
    function that is never called, the import still makes the file a JAX script for discovery but
    costs nothing, so a run is the sleep plus ~0.06-0.17 s of process start-up, whose spread
    measured at most ~0.1 s with 3 busy loops beside it. A sleep is never shorter than asked.
    """
    return textwrap.dedent(
        f"""\
        import time

        time.sleep({seconds})


        def _never_called():
            import jax  # makes this a JAX script for discovery, without jax's start-up time
        """
    )


@pytest.fixture(scope="module")
def slow_pair(cli, tmp_path_factory: pytest.TempPathFactory):
    """bench.py sleeping 0.20 s (base) and 1.00 s (new), 1 warm-up + 5 runs each.

    Why the verdicts on this pair cannot flake: with 5 vs 5 runs the two-sided exact Mann-Whitney
    U test gives p < 0.01 only with complete separation (every new run slower than every base
    run), p = 2/C(10,5) = 2/252 = 0.0079; one inverted pair gives 4/252 = 0.016. With the sleep
    alone differing (lazy_jax_sleeper), inverting a pair needs a base run's start-up to exceed a
    new run's by the whole 0.8 s between the sleeps, ~8x the worst spread measured. The former pair
    (0.20 vs 0.45 s, both importing jax) left a 0.25 s margin under >1 s of jax-import noise.
    """
    root = tmp_path_factory.mktemp("pair")
    dirs = {}
    for label, seconds in (("base", 0.20), ("new", 1.00)):
        write(root / label / "bench.py", lazy_jax_sleeper(seconds))
        out = root / f"results_{label}"
        proc = cli.run(
            "run", root / label, "--device", "cpu", "--benchmark-runs", 5, "--warmup-runs", 1,
            "--results-dir", out, "--no-history",
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        dirs[label] = out
    return dirs["base"], dirs["new"]


@pytest.mark.slow
def test_compare_finds_the_slower_script_with_p_below_001(cli, slow_pair) -> None:
    base, new = slow_pair
    proc = cli.run("compare", base, new, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # without --fail-on-regression
    report = json.loads(proc.stdout)
    (row,) = report["scripts"]
    assert row["script_name"] == "bench"
    assert row["verdict"] == "slower", row
    # The script never imports jax: nothing is compiled (unknown, not 0), so run time alone gates.
    assert row["gate"] == ["run_time"] and row["phases"]["compile_time"]["new_n"] == 0
    for metric in ("wall_time", "run_time"):
        phase = row["phases"][metric]
        assert (phase["base_n"], phase["new_n"]) == (5, 5)
        assert phase["verdict"] == "slower" and phase["p_value"] < 0.01
        # No bound that start-up times could move: the ratio is that of the medians, and with complete
        # separation its bootstrap CI lies above min(new) / max(base) (~1.0 / 0.37 at worst), far above 1.05.
        assert phase["ratio"] == pytest.approx(phase["new_median"] / phase["base_median"])
        assert phase["ratio_ci_low"] > 1.05
    assert report["regressions"] == ["bench"]


@pytest.mark.slow
def test_fail_on_regression_exits_1_and_names_the_script(cli, slow_pair) -> None:
    base, new = slow_pair
    proc = cli.run("compare", base, new, "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "significantly slower: bench" in proc.stdout
    assert "slower" in proc.stdout and "Traceback" not in proc.stderr
    # The other way round the new side is faster: not a regression, so the gate passes.
    reverse = cli.run("compare", new, base, "--json", "--fail-on-regression")
    assert reverse.returncode == 0, reverse.stdout + reverse.stderr
    assert json.loads(reverse.stdout)["scripts"][0]["verdict"] == "faster"


@pytest.mark.slow
def test_compare_of_runs_without_a_script_in_common_is_one_line_and_exit_2(cli, bench_dir, slow_pair) -> None:
    """Not an empty table and exit 0: nothing was compared, and the line says what each side holds."""
    _, out = bench_dir
    base, _ = slow_pair
    for args in ((out, base, "--fail-on-regression"), (out, base, "--json")):
        proc = cli.run("compare", *args)
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("jaxrun: error: nothing to compare")
        assert "BASE has alpha.py, sub/beta.py; NEW has bench.py" in line  # named as their summaries name them


def test_compare_on_a_missing_path_is_one_line_and_exit_2(cli, tmp_path: Path) -> None:
    (tmp_path / "present").mkdir()
    proc = cli.run("compare", tmp_path / "nope", tmp_path / "present")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("jaxrun: error:") and "nope" in lines[0] and "does not exist" in lines[0]
    assert proc.stdout == ""


def test_every_command_that_shows_a_comparison_has_runs_export_flags_from_one_declaration() -> None:
    """`jaxrun run --markdown` existed and `jaxrun compare --markdown` did not, though the guide
    says "the same flags": compare and ab take run's export flags, made from the same declarations
    (config/options.py), with the same spellings and value words."""
    import click

    from jaxrun.interfaces.cli import app
    from jaxrun.interfaces.cli.flags import COMPARISON_EXPORTS

    def exports(command: str) -> dict[str, tuple]:
        made = app.get_command(click.Context(app), command)
        assert made is not None
        return {p.name: (p.opts, p.secondary_opts, p.metavar, type(p.type)) for p in made.params
                if p.name in COMPARISON_EXPORTS}

    run = exports("run")
    assert set(run) == {"markdown", "export_json", "export_csv"}
    assert run["markdown"][0] == ["--markdown", "--export-markdown"]
    assert exports("compare") == run and exports("ab") == run
    assert "markdown" not in {p.name for p in app.get_command(click.Context(app), "bisect").params}


@pytest.mark.slow
def test_compare_writes_its_markdown_with_runs_flag(cli, tmp_path: Path) -> None:
    from helpers import crafted_batch, crafted_benchmark, noisy_times, with_programs, write_results_dir

    base = write_results_dir(tmp_path / "b", crafted_batch([with_programs("m")], [crafted_benchmark("m", noisy_times(1))]))
    new = write_results_dir(tmp_path / "n", crafted_batch([with_programs("m")],
                                                          [crafted_benchmark("m", noisy_times(2, scale=2.0))]))
    done = cli.run("compare", base, new, "--markdown", tmp_path / "m.md", "--export-csv", tmp_path / "m.csv")
    assert done.returncode == 0, done.stderr
    again = cli.run("compare", base, new, "--export-markdown", tmp_path / "again.md")
    assert again.returncode == 0, again.stderr
    text = (tmp_path / "m.md").read_text()
    assert text.startswith("## jaxrun compare: ") and "| m.py → slower |" in text, text
    assert text == (tmp_path / "again.md").read_text()  # one flag, two spellings
    assert (tmp_path / "m.csv").read_text().count("\n") > 1
    refused = cli.run("compare", base, new, "--markdown", tmp_path / "no" / "m.md")
    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.strip().splitlines()
    assert "(--markdown)" in line and "does not exist" in line, line


# --- jaxrun history ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def history_story(cli, tmp_path_factory: pytest.TempPathFactory):
    """Three benchmark runs of one script path, then a fourth with the script made much slower.

    Runs 2 and 3 have fewer than 3 earlier runs: not judged (MIN_HISTORY_RUNS), whatever their
    times. Each run has 4 counted samples; 4 new against 12 pooled earlier samples can reach
    p < 0.01: complete separation gives the exact two-sided p = 2/C(16,4) = 2/1820 = 0.001.
    The sleep grows from 0.20 to 1.00 s and nothing else differs (lazy_jax_sleeper), so inverting
    even one pair needs one run's start-up to exceed another's by 0.8 s, ~8x the worst spread seen.
    """
    root = tmp_path_factory.mktemp("history")
    script = write(root / "scripts" / "bench.py", lazy_jax_sleeper(0.20))
    db = root / "h.sqlite"

    def bench_run(label: str, *more: object, history: Path = db) -> subprocess.CompletedProcess:
        return cli.run(
            "run", script, "--device", "cpu", "--benchmark-runs", 4, "--warmup-runs", 1,
            "--results-dir", root / f"results_{label}", "--history", history, *more,
        )

    story = {"script": script, "db": db, "run1": bench_run("1"), "run2": bench_run("2")}
    story["history_after_two"] = cli.run("history", "--history", db, "--json")
    story["history_table_after_two"] = cli.run("history", "--history", db)
    story["run2b"] = bench_run("2b")  # a third run: the slow one below is judged against three
    # Same path, new content: the sleep grows from 0.20 s to 1.00 s (~4x the whole process).
    write(script, lazy_jax_sleeper(1.00))
    # The same slower run without --fail-on-regression, against a copy of the history: reported only.
    shutil.copy(db, root / "copy.sqlite")
    story["run3_reported"] = bench_run("3r", history=root / "copy.sqlite")
    story["run3"] = bench_run("3", "--fail-on-regression")
    story["history_script"] = cli.run("history", "bench.py", "--history", db)
    story["history_script_json"] = cli.run("history", str(script), "--history", db, "--json")
    return story


@pytest.mark.slow
def test_history_shows_two_runs_of_a_script(history_story) -> None:
    for key in ("run1", "run2"):
        proc = history_story[key]
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = history_story["history_after_two"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    path = str(history_story["script"].resolve())
    assert list(doc["runs"]) == [path]
    runs = doc["runs"][path]
    assert len(runs) == 2
    assert runs[0]["id"] < runs[1]["id"]
    assert runs[0]["content_hash"] == runs[1]["content_hash"]
    for run in runs:
        assert run["device_used"] == "cpu"
        assert sum(1 for s in run["samples"] if not s["warmup"]) == 4
        assert sum(1 for s in run["samples"] if s["warmup"]) == 1
    (check,) = doc["checks"]
    assert check["newest_run_id"] == runs[1]["id"] and check["previous_runs"] == 1
    assert check["regression"] is False
    # One earlier run is no baseline: not judged, and said so.
    assert check["judged"] is False and check["comparison"] is None
    assert check["reason"] == "not judged: 1 earlier run, needs 3"
    table = history_story["history_table_after_two"]
    assert table.returncode == 0, table.stdout + table.stderr
    assert "benchmark history" in table.stdout and "bench" in table.stdout
    assert "not judged: 1 earlier run, needs 3" in " ".join(table.stdout.split())
    # jaxrun run shows the same in its benchmark table.
    assert "not judged:" in history_story["run2"].stdout and "not judged:" in history_story["run2b"].stdout
    assert history_story["run2b"].returncode == 0


@pytest.mark.slow
def test_run_of_a_slower_script_is_flagged_by_run_and_exits_1(history_story) -> None:
    """With --fail-on-regression the regression is the run's failure, and its last line says so."""
    proc = history_story["run3"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("1/1 succeeded; results in ")  # the script itself succeeded
    assert last.endswith("— exit 1: slower than its history (bench.py), with --fail-on-regression"), last
    assert "slower x" in proc.stdout  # the verdict column


@pytest.mark.slow
def test_a_regression_fails_a_run_only_when_asked(history_story) -> None:
    """Issue 23: a plain benchmarked run exited 1 for a performance verdict its output did not
    explain ("1/1 succeeded"); now it reports the regression and exits 0."""
    proc = history_story["run3_reported"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: slower than its history: bench.py (reported; the exit status does not count it without " \
           "--fail-on-regression)" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("1/1 succeeded; results in ")
    assert "exit 1" not in proc.stdout


@pytest.mark.slow
def test_history_of_the_script_flags_the_injected_regression(history_story) -> None:
    proc = history_story["history_script"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "regression: bench.py on cpu is slower than its 3 earlier runs: run_time x" in proc.stdout

    as_json = history_story["history_script_json"]
    assert as_json.returncode == 1, as_json.stdout + as_json.stderr
    doc = json.loads(as_json.stdout)
    (runs,) = doc["runs"].values()
    assert len(runs) == 4
    assert runs[3]["content_hash"] != runs[2]["content_hash"]  # new content, same path: still comparable
    (check,) = doc["checks"]
    assert check["newest_run_id"] == runs[3]["id"]
    assert check["previous_runs"] == 3
    assert check["regression"] is True and check["judged"] is True and check["reason"] is None
    comparison = check["comparison"]
    assert comparison["verdict"] == "slower" and check["gate"] == ["run_time"]
    run = comparison["phases"]["run_time"]
    assert run["p_value"] < 0.01
    assert (run["base_n"], run["new_n"]) == (12, 4)
    assert run["ratio"] > 1.05


@pytest.mark.slow
def test_history_of_an_unknown_script_is_exit_2(cli, history_story) -> None:
    proc = cli.run("history", "nope", "--history", history_story["db"])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope" in lines[0] and "bench" in lines[0], proc.stderr  # lists what is there
    assert "Traceback" not in proc.stderr


def test_history_with_a_missing_database_is_exit_2_and_creates_nothing(cli, tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    proc = cli.run("history", "--history", missing)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing.sqlite" in lines[0], proc.stderr
    assert not missing.exists()


@pytest.mark.slow
def test_jaxrun_history_environment_variable_is_honoured(cli, tmp_path: Path) -> None:
    script = write(tmp_path / "scripts" / "envbench.py", sleeper(0.01))
    db = tmp_path / "from-env.sqlite"
    env = {"JAXRUN_HISTORY": str(db)}
    proc = cli.run(
        "run", script, "--device", "cpu", "--benchmark-runs", 2, "--results-dir", tmp_path / "results",
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert db.is_file()
    assert not (cli.cwd / ".jaxrun").exists()  # the default location was not used
    shown = cli.run("history", "envbench", "--json", env=env)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    (runs,) = json.loads(shown.stdout)["runs"].values()
    assert len(runs) == 1 and runs[0]["script_name"] == "envbench"
    # --history wins over the environment variable.
    other = cli.run("history", "--history", tmp_path / "other.sqlite", env=env)
    assert other.returncode == 2 and "other.sqlite" in other.stderr


# --- warm mode and devices ----------------------------------------------------------------------------


@pytest.mark.slow
def test_warm_run_prints_first_call_and_steady_state_without_speedup(cli, tmp_path: Path) -> None:
    script = write(tmp_path / "scripts" / "warmscript.py", WARM)
    out = tmp_path / "results"
    proc = cli.run("run", script, "--device", "cpu", "--warm", "--warm-calls", 5, "--results-dir", out, "--no-history")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    start = proc.stdout.index("warm mode:")
    end = proc.stdout.index("succeeded; results in", start)
    table = proc.stdout[start:end]
    assert "compile+first-call overhead ratio" in table
    assert "first call" in table and "steady median" in table
    assert "speedup" not in table.lower() and "speed-up" not in table.lower()
    row = next(line for line in table.splitlines() if "warmscript" in line)
    assert " main " in row and " 5 " in row
    result = load(out / "script_results" / "warmscript_result.json")
    warm = result["warm"]
    assert len(warm["calls"]) == 5
    # A margin no noise bridges: the first call traces and compiles (10-25 ms measured), a steady
    # call of this small program takes ~0.1 ms; the median of the 4 steady calls passes the first
    # call only if at least 2 of them are each held up ~100x their length while the first is not.
    assert warm["first_call"] > warm["steady"]["median"]
    assert f"{warm['compile_first_call_overhead_ratio']:.1f}" in row


@pytest.mark.slow
def test_two_devices_print_that_the_fallback_is_not_a_real_comparison(cli, tmp_path: Path) -> None:
    # The second leg must be a device this machine lacks: the GPU where there is none (as on the
    # 2-core test box), else the TPU (where a GPU works, test_benchmark_runs runs a real gpu leg).
    platforms = get_jax_device_info().platforms
    absent = "gpu" if not platforms["gpu"].available else "tpu"
    if platforms[absent].available:
        pytest.skip("both a GPU and a TPU are usable here: no absent device to fall back from")
    write(tmp_path / "scripts" / "tiny.py", sleeper(0.01))
    out = tmp_path / "results"
    proc = cli.run(
        "run", tmp_path / "scripts", "--device", f"cpu,{absent}", "--benchmark-runs", 2, "--results-dir", out,
        "--no-history",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cross-device speed-up" in proc.stdout
    assert "not a real comparison" in proc.stdout
    assert f"fallback from {absent}" in proc.stdout  # that leg says it fell back
    files = sorted(p.name for p in (out / "script_results").iterdir())
    assert files == ["tiny@cpu_result.json", f"tiny@{absent}_result.json"]


# --- the bundled examples --------------------------------------------------------------------------


@pytest.mark.slow
def test_bundled_examples_benchmark_with_raw_samples(cli, tmp_path: Path) -> None:
    """The seed's real examples, 1 warm-up + 2 counted process runs each (~25 s on 2 cores).

    Only examples/gnn_rendered_simulators: with examples/workloads as well, 3 process runs of
    every example would take over the minute this one test may cost.
    """
    out = tmp_path / "results"
    proc = cli.run(
        "run", REPO_ROOT / "examples" / "gnn_rendered_simulators", "--benchmark-runs", 2, "--warmup-runs", 1, "--jobs", 2,
        "--results-dir", out, "--history", tmp_path / "h.sqlite", timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = load(out / "jax_benchmark_results.json")
    names = [r["script_name"] for r in load(out / "jax_execution_results.json")["script_results"]]
    assert len(names) >= 3
    assert sorted(b["script_name"] for b in doc["benchmarks"]) == sorted(names)
    for bench in doc["benchmarks"]:
        assert bench["runs_completed"] == 2, bench["warnings"]
        assert len(counted(bench)) == 2 and len(bench["warmups"]) == 1
        for sample in counted(bench):
            assert sample["compile_time"] > 0  # real JAX scripts compile in every process
            assert sample["wall_time"] >= sample["body_time"] > sample["run_time"] > 0
    assert doc["runs_completed"] == 2 * len(names)


@pytest.mark.slow
def test_history_reads_the_database_that_run_writes_from_the_same_settings(tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    """`jaxrun history` finds the database where `jaxrun run` put it: the config file's `history`
    (it once read only --history and JAXRUN_HISTORY, and showed an empty default database)."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "bench.py").write_text("import jax.numpy as jnp\nprint(float(jnp.ones(3).sum()))\n")
    (tmp_path / "jaxrun.toml").write_text('history = "db/h.sqlite"\n')
    (tmp_path / "db").mkdir()  # jaxrun makes no folder for a database the user named
    cli = jaxrun_cli.but(cwd=tmp_path, without=("JAXRUN_HISTORY",))
    ran = cli.run("run", "s", "--device", "cpu", "--benchmark-runs", "2", "--results-dir", tmp_path / "r")
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "db" / "h.sqlite").is_file() and not (tmp_path / ".jaxrun").exists()
    shown = cli.run("history", "--json")
    assert shown.returncode == 0, shown.stderr
    assert "bench.py" in json.dumps(json.loads(shown.stdout))


@pytest.mark.parametrize("where", ["flag", "variable", "config"])
def test_history_false_is_one_line_naming_where_it_was_set(tmp_path: Path, jaxrun_cli, where: str) -> None:  # type: ignore[no-untyped-def]
    args, env = ["history"], {}
    if where == "flag":
        args += ["--history", "false"]
    elif where == "variable":
        env["JAXRUN_HISTORY"] = "false"
    else:
        (tmp_path / "jaxrun.toml").write_text("history = false\n")
    proc = jaxrun_cli.but(cwd=tmp_path, without=("JAXRUN_HISTORY",)).run(*args, env=env)
    named = {"flag": "--history", "variable": "JAXRUN_HISTORY", "config": "history (jaxrun.toml:1)"}[where]
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"jaxrun: error: {named} is false: no history is kept, so there is none to "
                                        "read; give the database with --history PATH"]
    assert not list(tmp_path.glob("false*")) and not (tmp_path / ".jaxrun").exists()


def test_compare_refuses_runs_of_two_machines_in_one_line_unless_asked(tmp_path: Path) -> None:
    from helpers import crafted_batch, crafted_benchmark, crafted_script_result, jaxrun, noisy_times

    from jaxrun.results import result_files
    from jaxrun.results.machine import Machine

    def batch(machine: Machine, seed: int) -> Path:
        made = crafted_batch([crafted_script_result("a", 1.0)], benchmarks=[crafted_benchmark("a", noisy_times(seed))])
        path = tmp_path / f"run{seed}.json"
        result_files.write_model(path, made.model_copy(update={"metadata": made.metadata.model_copy(
            update={"machine": machine})}))
        return path

    here, there = Machine(cpu_model="AMD EPYC", cpus=2), Machine(cpu_model="Intel Xeon", cpus=64)
    done = jaxrun("compare", batch(here, 1), batch(there, 2))
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and line.startswith("jaxrun: error: BASE and NEW ran on different machines "
                                                    "(cpu_model: 'Intel Xeon' vs 'AMD EPYC'; cpus: 64 vs 2;"), line
    done = jaxrun("compare", batch(here, 1), batch(there, 2), "--allow-mismatch")
    assert done.returncode == 0 and "compared anyway (--allow-mismatch): cpu_model: 'Intel Xeon' vs 'AMD EPYC'" in \
        " ".join(done.stdout.split()), done.stdout
