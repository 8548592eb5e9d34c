"""Why a warm persistent cache compiled a program an earlier run loaded (jaxrun.judge.cache_misses),
and whether two runs' program is the same: the pure functions, on hand-built results. The
end-to-end cases (real runs, a real cache, the history) are in tests/judge/test_cache_miss_history.py."""

from __future__ import annotations

import pytest

from jaxrun.judge.cache_misses import (
    NOTHING_SEEN_CHANGED,
    PROGRAM_CHANGED,
    SAME_PROGRAM,
    XLA_OUTPUT_CHANGED,
    explain_cache_miss,
    flag_changes,
    nearest_miss,
    program_change,
)
from jaxrun.results.models import CompileEnvironment, CompileStats


def env(**changes) -> CompileEnvironment:
    base = dict(jax_version="0.7.0", jaxlib_version="0.7.0", backend="cpu", platform_version="cpu",
                xla_flags=[], cache_dir="/c")
    return CompileEnvironment(**{**base, **changes})


def stats(**changes) -> CompileStats:
    base = dict(count=1, fingerprint="f1", input_fingerprint="i1", device_kind="cpu", device_count=1)
    return CompileStats(**{**base, **changes})


def test_nothing_changed_says_eviction_or_an_unrecorded_part() -> None:
    assert explain_cache_miss("jit(f)", env(), stats(), env(), stats(count=0, cache_hits=1)) == NOTHING_SEEN_CHANGED


@pytest.mark.parametrize(("now_env", "now_stats", "expected"), [
    (env(jax_version="0.7.1"), stats(), "jax version changed: 0.7.0 -> 0.7.1"),
    (env(jaxlib_version="0.7.1"), stats(), "jaxlib version changed: 0.7.0 -> 0.7.1"),
    (env(backend="gpu"), stats(), "backend changed: cpu -> gpu"),
    (env(platform_version="cuda 12.9"), stats(), "backend's platform version changed: cpu -> cuda 12.9"),
    (env(xla_flags=["--xla_cpu_enable_fast_math=true"]), stats(),
     "XLA_FLAGS changed: --xla_cpu_enable_fast_math=true added"),
    (env(), stats(device_kind="TPU v5"), "device kind changed: cpu -> TPU v5"),
    (env(), stats(device_count=8), "device count changed: 1 -> 8"),
    (env(), stats(input_fingerprint="i2"), "the program changed (its StableHLO differs)"),
    (env(cache_dir="/d"), stats(), "the cache folder changed: /c -> /d"),
])
def test_each_ingredient_is_named(now_env, now_stats, expected) -> None:
    assert explain_cache_miss("jit(f)", now_env, now_stats, env(), stats()) == expected


def test_every_change_is_said_in_the_key_order() -> None:
    reason = explain_cache_miss("jit(f)", env(jax_version="0.8", xla_flags=["--a=1"]), stats(input_fingerprint="i2"),
                                env(), stats())
    assert reason == ("jax version changed: 0.7.0 -> 0.8; XLA_FLAGS changed: --a=1 added; "
                      "the program changed (its StableHLO differs)")


def test_unknown_ingredients_are_not_compared() -> None:
    assert explain_cache_miss("jit(f)", None, stats(input_fingerprint=None, device_kind=None), env(jax_version="x"),
                              stats()) == NOTHING_SEEN_CHANGED


def test_a_jax_setting_is_said_with_the_program_it_changed_never_alone() -> None:
    x64 = env(jax_config={"jax_enable_x64": "True"})
    before = env(jax_config={"jax_enable_x64": "False"})
    assert explain_cache_miss("jit(f)", x64, stats(input_fingerprint="i2"), before, stats()) == (
        "the program changed (its StableHLO differs): jax_enable_x64 False -> True")
    # The same program (a function with explicit dtypes): the setting is not what missed.
    assert explain_cache_miss("jit(f)", x64, stats(), before, stats()) == NOTHING_SEEN_CHANGED
    # Fingerprints unknown: the setting is said as what may have changed the program.
    assert explain_cache_miss("jit(f)", x64, stats(input_fingerprint=None), before, stats()) == (
        "JAX settings that shape the program changed: jax_enable_x64 False -> True")
    assert explain_cache_miss("jit(f)", x64, stats(input_fingerprint="i2"), env(), stats()) == (
        "the program changed (its StableHLO differs)")  # unknown on one side: not compared


def test_the_nearest_earlier_entry_explains_a_miss() -> None:
    from typing import NamedTuple

    class Earlier(NamedTuple):
        environment: CompileEnvironment
        stats: CompileStats
        loaded: bool

    flagged = Earlier(env(xla_flags=["--a=1"]), stats(), False)
    loaded = Earlier(env(), stats(cache_hits=1, count=0), True)
    now = env(xla_flags=["--a=1"])
    assert nearest_miss(now, stats(), [flagged, loaded]) is None  # it wrote this key: maybe never written
    run, reason = nearest_miss(now, stats(input_fingerprint="i2"), [flagged, loaded])
    assert run is flagged and reason == "the program changed (its StableHLO differs)"  # one change, not two
    assert nearest_miss(env(), stats(), [flagged, loaded]) == (loaded, NOTHING_SEEN_CHANGED)  # evicted?
    assert nearest_miss(env(), stats(), []) is None


def test_flag_changes_added_removed_and_a_new_value() -> None:
    assert flag_changes(["--a=1", "--b", "--c=false"], ["--a=1", "--c=true", "--d"]) == [
        "--c=false -> --c=true", "--d added", "--b removed"]
    assert flag_changes(["--a"], ["--a"]) == []


@pytest.mark.parametrize(("before", "now", "expected"), [
    (stats(), stats(), SAME_PROGRAM),
    (stats(), stats(input_fingerprint="i2", fingerprint="f2"), PROGRAM_CHANGED),
    (stats(), stats(fingerprint="f2"), XLA_OUTPUT_CHANGED),
    (stats(), stats(fingerprint=None), SAME_PROGRAM),  # the same input is the same program
    (stats(input_fingerprint=None), stats(), SAME_PROGRAM),  # the same optimized program
    (stats(input_fingerprint=None), stats(fingerprint="f2"), None),  # a new program, or a new compiler
    (stats(input_fingerprint=None, fingerprint=None), stats(), None),
])
def test_program_change(before, now, expected) -> None:
    assert program_change(before, now) == expected


@pytest.mark.parametrize(("before", "now", "moved"), [
    (0.100, 0.130, True), (0.100, 0.115, False), (0.010, 0.019, False), (0.0, 0.02, True), (0.5, 0.1, True),
    (None, 0.5, False), (0.5, None, False),
])
def test_compile_time_moved_needs_20_percent_and_10_ms(before, now, moved) -> None:
    from jaxrun.judge.cache_misses import compile_time_moved

    assert compile_time_moved(before, now) is moved
