"""Why the cache missed, across runs: the history keeps what each run of a
script compiled, and a program a warm persistent cache compiled though an earlier run of the same
script loaded it gets the ingredient of JAX's key that changed. The sink on hand-built results and a
real history (an SQLite file, then a database of a real PostgreSQL: the ``history_at`` fixture); then
real runs with a real cache (their history an SQLite file: what the history holds is the sink's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxrun.judge.history import HistoryStore
from jaxrun.outputs.history_sink import HistorySink
from jaxrun.plan.job import Job
from jaxrun.results.models import CompileEnvironment, CompileStats, ScriptResult


def job(script: Path, **run) -> Job:
    from jaxrun.config.options import RunOptions

    return Job(0, script, "m", "m", "cpu", "cpu", script.parent, run_options=RunOptions(**run) if run else None)


def result(script: Path, at: str, *, flags=(), cache_dir: str | None = "/cache", **stats) -> ScriptResult:
    programs = {"jit(loss)": CompileStats(**{"fingerprint": "f", "input_fingerprint": "i", "device_kind": "cpu",
                                             "device_count": 1, **stats})}
    env = CompileEnvironment(jax_version="0.7", jaxlib_version="0.7", backend="cpu", xla_flags=list(flags),
                             cache_dir=cache_dir)
    return ScriptResult(script_name="m", script_path=str(script), success=True, device_requested="cpu",
                        device_used="cpu", compiles=programs, compile_environment=env, started_at=at, finished_at=at)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "m.py"
    path.write_text("import jax\n")
    return path


def through_sink(history: Path | str, script: Path, *results: ScriptResult, **run) -> list[ScriptResult]:
    with HistoryStore(history) as store:
        sink = HistorySink(store, None)
        return [sink.on_result(job(script, **run), r) for r in results]


def test_a_compile_after_a_load_names_the_flag_that_changed(history_at: Path | str, script: Path) -> None:
    loaded = result(script, "2026-01-02T03:04:05+00:00", count=0, cache_hits=1)
    compiled = result(script, "2026-01-03T00:00:00+00:00", flags=["--xla_cpu_enable_fast_math=true"], count=1)
    _, now = through_sink(history_at, script, loaded, compiled)
    reason = "XLA_FLAGS changed: --xla_cpu_enable_fast_math=true added"
    assert now.compiles["jit(loss)"].cache_miss_reason == reason
    assert now.warnings == [f"jit(loss) was compiled though the run of 2026-01-02 03:04:05 loaded it from the "
                            f"persistent cache: {reason}"]


def test_no_explanation_without_an_earlier_load_a_warm_cache_or_a_compile(history_at: Path | str, script: Path) -> None:
    first, second = through_sink(history_at, script, result(script, "t1", count=1), result(script, "t2", count=1))
    assert second.warnings == [] and second.compiles["jit(loss)"].cache_miss_reason is None  # never loaded
    (loads,) = through_sink(history_at, script, result(script, "t3", count=0, cache_hits=1))
    assert loads.warnings == []  # loaded again: nothing to explain
    (off,) = through_sink(history_at, script, result(script, "t4", count=1, cache_dir=None))
    assert off.warnings == []  # the cache was off
    (cold,) = through_sink(history_at, script, result(script, "t5", count=1), cold_cache=True)
    assert cold.warnings == []  # every run starts with an empty cache
    (variant,) = through_sink(history_at, script, result(script, "t6", count=1, cache_hits=1))
    assert variant.warnings == []  # loaded, and a new variant compiled
    (miss,) = through_sink(history_at, script, result(script, "t7", count=1, input_fingerprint="i2"))
    assert miss.compiles["jit(loss)"].cache_miss_reason == "the program changed (its StableHLO differs)"
    assert "the run of t6 loaded it" in miss.warnings[0]  # the latest load


def test_a_compile_after_a_run_that_wrote_it_names_what_changed(history_at: Path | str, script: Path) -> None:
    """The earlier run compiled the program into the same cache (it never loaded it): its entry is
    what the cache held, so a change of its key's ingredients is named all the same."""
    wrote = result(script, "2026-01-02T03:04:05+00:00", count=1)
    compiled = result(script, "2026-01-03T00:00:00+00:00", flags=["--xla_cpu_enable_fast_math=false"], count=1)
    _, now = through_sink(history_at, script, wrote, compiled)
    reason = "XLA_FLAGS changed: --xla_cpu_enable_fast_math=false added"
    assert now.compiles["jit(loss)"].cache_miss_reason == reason
    assert now.warnings == [f"jit(loss) was compiled though the run of 2026-01-02 03:04:05 wrote it to the "
                            f"persistent cache: {reason}"]


def test_a_run_that_wrote_it_with_nothing_changed_says_nothing(history_at: Path | str, script: Path) -> None:
    """JAX may not have written the entry (host callbacks, its thresholds): no claim is made. Nor
    is one made from a run that compiled it into another folder (a --cold-cache run's own)."""
    _, again = through_sink(history_at, script, result(script, "t1", count=1), result(script, "t2", count=1))
    assert again.warnings == [] and again.compiles["jit(loss)"].cache_miss_reason is None
    (elsewhere,) = through_sink(history_at, script,
                                result(script, "t3", count=1, flags=["--b=1"], cache_dir="/tmp/cold"))
    (after,) = through_sink(history_at, script, result(script, "t4", count=1, flags=["--b=1"]))
    # t3 wrote into /tmp/cold: the nearest entry of /cache is t2's, whose flags differ.
    assert after.compiles["jit(loss)"].cache_miss_reason == "XLA_FLAGS changed: --b=1 added"
    assert "the run of t2 wrote it" in after.warnings[0]


def test_the_nearest_entry_explains_the_miss(history_at: Path | str, script: Path) -> None:
    """Several earlier runs left entries: the miss is explained against the one with the fewest
    changed ingredients, so a flag a later run already had is never blamed."""
    through_sink(history_at, script, result(script, "t1", count=0, cache_hits=1))  # loaded, no flags
    (flagged,) = through_sink(history_at, script, result(script, "t2", count=1, flags=["--a=1"]))
    assert flagged.compiles["jit(loss)"].cache_miss_reason == "XLA_FLAGS changed: --a=1 added"
    (same_flags,) = through_sink(history_at, script, result(script, "t3", count=1, flags=["--a=1"]))
    assert same_flags.compiles["jit(loss)"].cache_miss_reason is None  # t2 wrote this very key
    (changed,) = through_sink(history_at, script, result(script, "t4", count=1, input_fingerprint="i2"))
    assert changed.compiles["jit(loss)"].cache_miss_reason == "the program changed (its StableHLO differs)"
    assert "the run of t1 loaded it" in changed.warnings[0]  # t2, t3: the flag as well


def test_programs_that_missed_for_one_reason_are_one_warning(history_at: Path | str, script: Path) -> None:
    def with_programs(r: ScriptResult, **stats) -> ScriptResult:
        own = r.compiles["jit(loss)"].model_copy(update={"source": "m.py:3"})
        jax_own = [(f"jit(op{k})", r.compiles["jit(loss)"]) for k in range(4)]
        return r.model_copy(update={"compiles": dict(jax_own + [("jit(loss)", own)])})

    loaded = with_programs(result(script, "t1", count=0, cache_hits=1))
    _, now = through_sink(history_at, script, loaded,
                          with_programs(result(script, "t2", count=1, flags=["--a=1"])))
    assert now.warnings == ["jit(loss), jit(op0), jit(op1) and 2 more were compiled though the run of t1 loaded "
                            "them from the persistent cache: XLA_FLAGS changed: --a=1 added"]
    assert all(s.cache_miss_reason == "XLA_FLAGS changed: --a=1 added" for s in now.compiles.values())


def test_another_script_host_or_platform_is_not_an_earlier_run(tmp_path: Path, history_at: Path | str,
                                                               script: Path) -> None:
    other = tmp_path / "other.py"
    other.write_text("import jax\n")
    loaded = result(script, "t1", count=0, cache_hits=1)
    through_sink(history_at, other, result(other, "t1", count=0, cache_hits=1))
    through_sink(history_at, script, loaded.model_copy(update={"node": "elsewhere"}))
    through_sink(history_at, script, loaded.model_copy(update={"device_used": "gpu"}))
    (now,) = through_sink(history_at, script, result(script, "t2", count=1))
    assert now.warnings == []


def test_a_run_without_jax_opens_no_history(tmp_path: Path) -> None:
    """A batch of scripts that never use JAX leaves no history behind; one that does is recorded."""
    # SQLite alone: "no history behind" is no file (a PostgreSQL database is there before any run).
    from helpers import jaxrun

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "plain.py").write_text("if False:\n    import jax\nprint(1)\n")
    db = tmp_path / "h.sqlite"
    done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--history", db, "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert not db.exists()


# --- real runs, a real persistent cache --------------------------------------------------------------

SCRIPT = """\
import jax
import jax.numpy as jnp


def loss(x):
    for i in range(4):
        x = jnp.sin(x @ x.T * 0.5 + x)
    return x.sum()


print(jax.jit(loss)(jnp.ones((32, 32)) * 0.01))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScriptResult]:
    """One script, one cache, one history: r1 compiles (cold); r2 loads; r3 with an XLA flag
    compiles; r4, with one line of the function changed, compiles jit(loss)."""
    import os

    from helpers import run_batch

    root = tmp_path_factory.mktemp("cache-miss")
    script = root / "s" / "m.py"
    script.parent.mkdir()
    cache, db = root / "cache", root / "history.sqlite"
    developers = os.environ.pop("XLA_FLAGS", None)  # the runs' flags are the test's alone
    done = {}
    try:
        for name, text, env in (("r1", SCRIPT, {}), ("r2", SCRIPT, {}),
                                ("r3", SCRIPT, {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}),
                                ("r4", SCRIPT.replace("* 0.5 + x", "* 0.25 + x"), {})):
            script.write_text(text)
            batch = run_batch(script.parent, root / name, history=db, compile_cache=cache, env=env)
            (done[name],) = batch.script_results
            assert done[name].success, done[name].error_message
    finally:
        if developers is not None:
            os.environ["XLA_FLAGS"] = developers
    done["root"] = root  # type: ignore[assignment]
    return done


def test_the_same_run_again_loads_and_says_nothing(runs) -> None:
    first, second = runs["r1"].compiles["jit(loss)"], runs["r2"].compiles["jit(loss)"]
    assert first.count == 1 and first.cache_hits == 0  # a cold cache: compiled, and stored
    assert second.count == 0 and second.cache_hits == 1  # loaded
    assert second.cache_miss_reason is None and runs["r2"].warnings == []
    assert first.input_fingerprint and first.input_fingerprint == second.input_fingerprint


def test_an_xla_flag_added_is_named(runs) -> None:
    result = runs["r3"]
    assert result.compile_environment.xla_flags == ["--xla_cpu_enable_fast_math=false"]
    loss = result.compiles["jit(loss)"]
    assert loss.count == 1 and loss.cache_hits == 0  # compiled, not loaded: the flag is in JAX's key
    assert loss.cache_miss_reason == "XLA_FLAGS changed: --xla_cpu_enable_fast_math=false added"
    (warning,) = [w for w in result.warnings if "jit(loss)" in w]
    assert "compiled though the run of" in warning and "loaded" in warning
    assert warning.endswith("from the persistent cache: XLA_FLAGS changed: --xla_cpu_enable_fast_math=false added")


def test_a_changed_function_is_the_program_changed(runs) -> None:
    result = runs["r4"]
    loss = result.compiles["jit(loss)"]
    assert loss.count == 1 and loss.cache_hits == 0
    # The latest run that loaded it is r2 (r3 compiled it): same flags, same devices; the program differs.
    assert loss.cache_miss_reason == "the program changed (its StableHLO differs)"
    others = [stats for name, stats in result.compiles.items() if name != "jit(loss)"]
    assert others and all(s.count == 0 and s.cache_miss_reason is None for s in others)  # still loaded


def test_compare_says_whether_the_program_changed(runs) -> None:
    from jaxrun.judge.compare import compare_results

    root = runs["root"]
    loaded = compare_results(root / "r1", root / "r2")  # compiled, then loaded: the same program
    (same,) = [p for p in loaded.scripts[0].programs if p.program == "jit(loss)"]
    assert same.moved and same.new_compile_time == 0 and same.change == "same program"
    changed = compare_results(root / "r2", root / "r4")  # loaded, then a changed function compiled
    (loss,) = [p for p in changed.scripts[0].programs if p.program == "jit(loss)"]
    assert loss.moved and loss.base_compile_time == 0 and loss.change == "the program changed"
    from helpers import jaxrun

    shown = jaxrun("compare", root / "r2", root / "r4")
    assert shown.returncode == 0, shown.stderr
    # BASE loaded it from the cache: not a 0 s compilation, nor "not compiled", but what happened.
    assert re.search(r"jit\(loss\) loaded from the persistent cache in \d\.\d{3} s -> compiled in \d\.\d{3} s: "
                     "the program changed", shown.stdout), shown.stdout
    assert "not compiled" not in shown.stdout
    loads = jaxrun("compare", root / "r1", root / "r2", "--export-markdown", root / "loads.md")
    assert loads.returncode == 0, loads.stderr
    assert re.search(r"jit\(loss\) compiled in \d\.\d{3} s -> loaded from the persistent cache in \d\.\d{3} s: "
                     "same program", loads.stdout), loads.stdout
    assert "loaded from the persistent cache in" in (root / "loads.md").read_text()
    assert "not compiled" not in loads.stdout


def test_history_says_which_programs_changed_when_their_compile_time_moved(history_at: Path | str) -> None:
    """``jaxrun history SCRIPT``: per benchmarked run, each program whose compile time moved since
    the run before, and whether it is the same program."""
    import json

    from helpers import jaxrun

    from jaxrun.judge.compile_history import CompileRun
    from jaxrun.results.models import HistoryRun, RunSample

    programs = [
        {"jit(loss)": dict(count=1, compile_time=0.10, fingerprint="f", input_fingerprint="i"),
         "jit(step)": dict(count=1, compile_time=0.10, fingerprint="g", input_fingerprint="j")},
        {"jit(loss)": dict(count=1, compile_time=0.30, fingerprint="f2", input_fingerprint="i2"),  # changed
         "jit(step)": dict(count=1, compile_time=0.105, fingerprint="g", input_fingerprint="j")},  # not moved
        {"jit(loss)": dict(count=1, compile_time=0.60, fingerprint="f2", input_fingerprint="i2"),  # same, slower
         "jit(step)": dict(count=1, compile_time=0.10, fingerprint="g", input_fingerprint="j")},
    ]
    with HistoryStore(history_at) as store:
        for k, stats in enumerate(programs):
            run = HistoryRun(recorded_at=f"2026-01-0{k + 1}T00:00:00+00:00", script_name="m.py",
                             script_path="/proj/m.py", content_hash="h", host="hostA", device_requested="cpu",
                             device_used="cpu", jaxrun_version="x",
                             samples=[RunSample(index=0, warmup=False, success=True, wall_time=1.0, run_time=0.5)])
            run_id = store.record(run)
            store.record_compiles(CompileRun(run.recorded_at, "m.py", "/proj/m.py", "h", "hostA", "cpu", "cpu", None,
                                             {n: CompileStats(**s) for n, s in stats.items()}, run_id))
    shown = jaxrun("history", "m.py", "--history", history_at)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if "since the run before" in line]
    assert lines == [
        "run 2: jit(loss) compiled in 0.100 s -> compiled in 0.300 s since the run before: the program changed",
        "run 3: jit(loss) compiled in 0.300 s -> compiled in 0.600 s since the run before: same program"]
    as_json = json.loads(jaxrun("history", "m.py", "--history", history_at, "--json").stdout)
    assert [c["change"] for c in as_json["program_changes"]["2"]] == ["the program changed"]


@pytest.mark.slow
def test_a_history_that_cannot_be_opened_is_one_note_for_a_run_that_only_used_jax(tmp_path: Path) -> None:
    """Not a usage error (nothing was benchmarked), not "unreadable" (nothing is damaged): a note."""
    # SQLite alone: a folder given as the history.
    from helpers import jaxrun

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "j.py").write_text("import jax.numpy as jnp\nprint(jnp.ones(3).sum())\n")
    (tmp_path / "folder").mkdir()
    done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--history", tmp_path / "folder",
                  "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stdout.splitlines() + done.stderr.splitlines() if line.startswith("note: history")]
    assert notes == [f"note: history not used: history path {str(tmp_path / 'folder')!r} is a folder; pass a file "
                     "path with --history"]


# --- each ingredient jaxrun explains, through the CLI: a run writes the cache, the next misses it ---

TOTAL = """\
import jax
import jax.numpy as jnp
{setup}

def total(v):
    return jnp.sum(jnp.sin(v) * {scale})


print(jax.jit(total)({argument}))
"""
INGREDIENTS = {
    # script: (its program's setup, argument and constant (distinct programs), the second run's flag)
    "flags": ("", "jnp.arange(8.0)", "2.0", ["--xla-flags=--xla_cpu_enable_fast_math=false"]),
    "x64": ("", "jnp.arange(8.0)", "3.0", ["--x64"]),
    "devices": ("from jax.sharding import Mesh, NamedSharding, PartitionSpec\n"
                "mesh = Mesh(jax.devices(), ('d',))", "jax.device_put(jnp.arange(8.0), NamedSharding(mesh, "
                "PartitionSpec('d')))", "4.0", ["--host-devices", "2"]),
}


@pytest.fixture(scope="module")
def second_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[ScriptResult, str]]:
    """``jaxrun run s`` compiles every script's program into an empty cache (writes it, loads
    nothing); then each script again with one ingredient changed: its result and its output."""
    import os

    from helpers import jaxrun

    root = tmp_path_factory.mktemp("ingredients")
    for name, (setup, argument, scale, _) in INGREDIENTS.items():
        (root / "s").mkdir(exist_ok=True)
        (root / "s" / f"{name}.py").write_text(TOTAL.format(setup=setup, argument=argument, scale=scale))
    common = ["--device", "cpu", "--history", root / "h.sqlite", "--compile-cache", root / "cache"]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the runs' flags are the test's alone
    first = jaxrun("run", root / "s", *common, "--results-dir", root / "r1", env=env)
    assert first.returncode == 0, first.stderr
    done = {}
    for name, (*_, flags) in INGREDIENTS.items():
        shown = jaxrun("run", root / "s" / f"{name}.py", *common, *flags, "--results-dir", root / name, env=env)
        assert shown.returncode == 0, shown.stderr
        (path,) = (root / name / "script_results").glob("*_result.json")
        done[name] = (ScriptResult.model_validate_json(path.read_text()), shown.stdout + shown.stderr)
    return done


@pytest.mark.slow
@pytest.mark.parametrize("name, reason", [
    ("flags", "XLA_FLAGS changed: --xla_cpu_enable_fast_math=false added"),
    ("x64", "the program changed (its StableHLO differs): jax_enable_x64 False -> True"),
    ("devices", "device count changed: 1 -> 2"),
])
def test_a_run_after_one_that_wrote_the_cache_names_the_ingredient_that_changed(second_runs, name: str,
                                                                                  reason: str) -> None:
    result, output = second_runs[name]
    total = result.compiles["jit(total)"]
    assert total.count == 1 and total.cache_hits == 0  # compiled: the earlier run's entry has another key
    assert total.cache_miss_reason is not None and total.cache_miss_reason.startswith(reason), total.cache_miss_reason
    (warning,) = [w for w in result.warnings if w.startswith("jit(total)")]
    assert " wrote it to the persistent cache: " in warning and reason in warning
    assert reason in output  # the terminal says it too

