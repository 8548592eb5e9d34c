"""Why the cache missed, across runs (issue 25, part 3): the history keeps what each run of a
script compiled, and a program a warm persistent cache compiled though an earlier run of the same
script loaded it gets the ingredient of JAX's key that changed. The sink on hand-built results and a
real SQLite file; then real runs with a real cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxrun.history import HistoryStore
from jaxrun.job import Job
from jaxrun.models import CompileEnvironment, CompileStats, ScriptResult
from jaxrun.sinks.history import HistorySink


def job(script: Path, **run) -> Job:
    from jaxrun.options import RunOptions

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


def through_sink(db: Path, script: Path, *results: ScriptResult, **run) -> list[ScriptResult]:
    with HistoryStore(db) as store:
        sink = HistorySink(store, None)
        return [sink.on_result(job(script, **run), r) for r in results]


def test_a_compile_after_a_load_names_the_flag_that_changed(tmp_path: Path, script: Path) -> None:
    loaded = result(script, "2026-01-02T03:04:05+00:00", count=0, cache_hits=1)
    compiled = result(script, "2026-01-03T00:00:00+00:00", flags=["--xla_cpu_enable_fast_math=true"], count=1)
    _, now = through_sink(tmp_path / "h.sqlite", script, loaded, compiled)
    reason = "XLA_FLAGS changed: --xla_cpu_enable_fast_math=true added"
    assert now.compiles["jit(loss)"].cache_miss_reason == reason
    assert now.warnings == [f"jit(loss) was compiled though the run of 2026-01-02 03:04:05 loaded it from the "
                            f"persistent cache: {reason}"]


def test_no_explanation_without_an_earlier_load_a_warm_cache_or_a_compile(tmp_path: Path, script: Path) -> None:
    db = tmp_path / "h.sqlite"
    first, second = through_sink(db, script, result(script, "t1", count=1), result(script, "t2", count=1))
    assert second.warnings == [] and second.compiles["jit(loss)"].cache_miss_reason is None  # never loaded
    (loads,) = through_sink(db, script, result(script, "t3", count=0, cache_hits=1))
    assert loads.warnings == []  # loaded again: nothing to explain
    (off,) = through_sink(db, script, result(script, "t4", count=1, cache_dir=None))
    assert off.warnings == []  # the cache was off
    (cold,) = through_sink(db, script, result(script, "t5", count=1), cold_cache=True)
    assert cold.warnings == []  # every run starts with an empty cache
    (variant,) = through_sink(db, script, result(script, "t6", count=1, cache_hits=1))
    assert variant.warnings == []  # loaded, and a new variant compiled
    (miss,) = through_sink(db, script, result(script, "t7", count=1, input_fingerprint="i2"))
    assert miss.compiles["jit(loss)"].cache_miss_reason == "the program changed (its StableHLO differs)"
    assert "the run of t6 loaded it" in miss.warnings[0]  # the latest load


def test_another_script_or_host_is_not_an_earlier_run(tmp_path: Path, script: Path) -> None:
    other = tmp_path / "other.py"
    other.write_text("import jax\n")
    db = tmp_path / "h.sqlite"
    through_sink(db, other, result(other, "t1", count=0, cache_hits=1))
    through_sink(db, script, result(script, "t1", count=0, cache_hits=1).model_copy(update={"node": "elsewhere"}))
    (now,) = through_sink(db, script, result(script, "t2", count=1))
    assert now.warnings == []


def test_a_run_without_jax_opens_no_history(tmp_path: Path) -> None:
    """A batch of scripts that never use JAX leaves no history behind; one that does is recorded."""
    from helpers import jaxrun

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "plain.py").write_text("if False:\n    import jax\nprint(1)\n")
    db = tmp_path / "h.sqlite"
    done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--history", db, "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert not db.exists()
