"""Warm mode's steady state (judge/steady_state.py): found by changepoint analysis of the per-call
times, not assumed after the first call. The ground truths are calls whose seconds the scripts set
themselves (time.sleep): flat, a warm-up of 6 slow calls, calls slower one after another."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from helpers import load, read_page, write

from jaxrun.judge.steady_state import MIN_CALLS, steady_state

# The entry sleeps as the pattern says for its n-th call (counted in a global), after a jitted op.
WARM = """\
import time
import jax
import jax.numpy as jnp

calls = 0
step = jax.jit(lambda x: x + 1)

def main():
    global calls
    calls += 1
    step(jnp.ones(4)).block_until_ready()
    time.sleep({pattern})
"""
PATTERNS = {
    "flat": "0.05",
    "warms_up": "0.2 if calls <= 6 else 0.05",
    "slows_down": "0.01 + 0.008 * calls",
}


@pytest.mark.slow
def test_each_warm_script_gets_the_steady_state_it_has(tmp_path: Path, jaxrun_cli) -> None:
    for name, pattern in PATTERNS.items():
        write(tmp_path / "s", f"{name}.py", WARM.format(pattern=pattern))
    done = jaxrun_cli.run("run", tmp_path / "s", "--device", "cpu", "--warm", "--warm-calls", "20", "--results-dir",
                          tmp_path / "r", "--no-history", "--report", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    warm = {name: load(tmp_path / "r" / "script_results" / f"{name}_result.json")["warm"] for name in PATTERNS}
    assert (warm["flat"]["steady_state"], warm["flat"]["steady_from"]) == ("flat", 2)
    assert warm["flat"]["steady"]["n"] == 19 and warm["flat"]["steady"]["median"] == pytest.approx(0.05, rel=0.25)
    # Calls 2..6 sleep 200 ms, then 50 ms: steady from call 7, its median that of the 50 ms calls.
    warms = warm["warms_up"]
    assert (warms["steady_state"], warms["steady_from"]) == ("warmup", 7)
    assert warms["steady"]["n"] == 14 and warms["steady"]["median"] == pytest.approx(0.05, rel=0.25)
    # 8 ms more each call: no steady state, and no median of the trend is given as the speed.
    slows = warm["slows_down"]
    assert slows["steady_state"] == "none" and slows["steady_from"] is None and slows["steady"] is None
    assert any(w.startswith("no steady state: the calls of main() kept changing") for w in slows["warnings"])
    # The terminal's warm table says the same.
    table = done.stdout[done.stdout.index("warm mode:"):]
    rows = {line.split()[0]: " ".join(line.split()) for line in table.splitlines() if line.split()
            and line.split()[0].removesuffix(".py") in PATTERNS}
    assert "flat from call 2" in rows["flat.py"] and "warmup from call 7" in rows["warms_up.py"]
    assert "no steady state" in rows["slows_down.py"]
    # The report plots every call's seconds, a line per script named with its steady state.
    lines, _ = read_page(tmp_path / "r" / "report.html", "#figure-warm .main-svg",
                         "return document.getElementById('figure-warm').data.map(t => [t.name, t.x, t.y])")
    plotted = {name: (x, y) for name, x, y in lines}
    assert set(plotted) == {"flat.py: flat from call 2", "warms_up.py: warmup from call 7",
                            "slows_down.py: no steady state"}
    for name, (x, y) in plotted.items():
        script = name.split(".py")[0]
        assert x == list(range(1, 21))
        assert y == [c["seconds"] for c in sorted(warm[script]["calls"], key=lambda c: c["index"])]


def noisy(values: list[float], seed: int = 0, jitter: float = 0.01) -> list[float]:
    rng = random.Random(seed)
    return [v * math.exp(rng.gauss(0, jitter)) for v in values]


@pytest.mark.parametrize("seed", range(20))
def test_the_classes_hold_under_a_percent_of_jitter(seed: int) -> None:
    assert steady_state(noisy([0.01] * 30, seed)).kind == "flat"
    warmup = steady_state(noisy([0.05] * 6 + [0.01] * 24, seed))
    assert (warmup.kind, warmup.start) == ("warmup", 6)
    slowdown = steady_state(noisy([0.01] * 10 + [0.02] * 20, seed))
    assert (slowdown.kind, slowdown.start) == ("slowdown", 10)
    assert steady_state(noisy([0.01 + 0.002 * i for i in range(30)], seed)).kind == "none"


@pytest.mark.parametrize("seed", range(20))
def test_a_load_that_moves_calls_by_a_tenth_for_a_while_is_no_change_of_level(seed: int) -> None:
    # As a busy machine does: 5 % jitter, and a stretch of calls 10 % slower.
    series = noisy([0.05] * 12 + [0.055] * 8 + [0.05] * 10, seed, jitter=0.05)
    assert steady_state(series).kind == "flat"


def test_too_few_calls_or_an_unmeasured_call_is_unknown() -> None:
    assert steady_state([0.01] * (MIN_CALLS - 1)).kind == "unknown"
    assert steady_state([0.01] * 10 + [float("nan")]).kind == "unknown"
    assert steady_state([0.01] * 10 + [0.0]).kind == "unknown"
