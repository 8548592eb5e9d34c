"""Numerical checks of the JAX example programs (real JAX, no mocks).

The examples are plain scripts, so they are loaded from their file paths rather than imported
as a package; they fall back to a no-op ``record`` when jaxrun is not importable.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import load_module

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gnn_rendered_simulators" / "jax"
TIGER_BELIEFS = (0.5, 0.05, 0.2, 0.35, 0.6, 0.75, 0.9)


def load(name: str):
    return load_module(EXAMPLES / f"{name}.py", f"examples_jax_{name}")


@pytest.fixture(scope="module")
def pomdp():
    return load("pomdp_solver")


@pytest.fixture(scope="module")
def general():
    return load("general_model")


@pytest.fixture(scope="module")
def combined():
    return load("combined_model")


# --------------------------------------------------------------------------- POMDP


def test_exact_pruning_preserves_upper_envelope(pomdp):
    rng = np.random.default_rng(0)
    p = np.linspace(0.0, 1.0, 4001)
    beliefs = np.stack([p, 1 - p], axis=1)
    for trial in range(200):
        alphas = rng.normal(size=(rng.integers(1, 30), 2))
        if trial % 2:
            alphas = np.round(alphas, 1)  # exercise ties and parallel lines
        kept = pomdp.prune_on_segment(alphas)
        np.testing.assert_allclose((beliefs @ kept.T).max(1), (beliefs @ alphas.T).max(1))


@pytest.mark.parametrize("horizon", [1, 4, 8])
def test_exact_solver_matches_belief_tree_search(pomdp, horizon):
    exact = pomdp.exact_tiger_value(horizon, TIGER_BELIEFS)
    search = [pomdp.tiger_value_by_search(horizon, b) for b in TIGER_BELIEFS]
    np.testing.assert_allclose(exact, search, atol=1e-8)


def test_tiger_one_step_values(pomdp):
    # horizon 1: best of listen (-1) and opening a door with expected reward
    values = pomdp.exact_tiger_value(1, [0.5, 0.0, 1.0])
    np.testing.assert_allclose(values, [-1.0, 10.0, 10.0])


@pytest.mark.slow
@pytest.mark.parametrize("horizon", [5, 10])
def test_pbvi_matches_exact_tiger_value(pomdp, horizon):
    pbvi = pomdp.solve_tiger_pbvi(horizon, 1001, TIGER_BELIEFS)["values"]
    exact = pomdp.exact_tiger_value(horizon, TIGER_BELIEFS)
    assert np.max(np.abs(pbvi - exact)) < 1e-3, (pbvi, exact)


def test_coarse_pbvi_is_a_lower_bound_that_misses(pomdp):
    # the dense-grid agreement above is not automatic: 11 points lose value
    coarse = pomdp.solve_tiger_pbvi(10, 11, TIGER_BELIEFS)["values"]
    exact = pomdp.exact_tiger_value(10, TIGER_BELIEFS)
    assert np.all(coarse <= exact + 1e-4)
    assert np.max(exact - coarse) > 1e-2


@pytest.mark.slow
def test_gridworld_value_between_bounds(pomdp):
    grid = pomdp.solve_gridworld(horizon=30)
    assert grid["lower"] < grid["value"] <= grid["upper"] + 1e-4


@pytest.mark.slow
def test_pbvi_sharded_over_two_devices():
    code = (
        "import jax, numpy as np, importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('p', {str(EXAMPLES / 'pomdp_solver.py')!r})\n"
        "p = importlib.util.module_from_spec(spec); sys.modules['p'] = p; spec.loader.exec_module(p)\n"
        "assert len(jax.devices()) == 2 and p.belief_sharding() is not None\n"
        "b = (0.5, 0.2, 0.9)\n"
        "err = np.abs(p.solve_tiger_pbvi(8, 1001, b)['values'] - p.exact_tiger_value(8, b)).max()\n"
        "assert err < 1e-3, err\n"
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


# --------------------------------------------------------------------------- active inference


def test_posterior_is_bayes_rule(general):
    model, _ = general.grid_model()
    prior = np.asarray(model.D)
    obs = 7
    post = np.asarray(general.infer_states(model.A, model.D, obs))
    expected = np.asarray(model.A)[obs] * prior
    np.testing.assert_allclose(post, expected / expected.sum(), rtol=1e-5)


@pytest.mark.slow
def test_active_inference_agents_reach_goal(general):
    res = general.run_agents(n_agents=256, n_steps=general.N_STEPS, seed=1)
    assert res["success_rate"] >= 0.9, res
    assert res["random_policy_success_rate"] < 0.9, res
    assert res["random_policy_success_rate"] < res["success_rate"] - 0.3, res


@pytest.mark.slow
def test_learned_likelihood_error_falls(combined):
    res = combined.run_learning(n_agents=128, seed=1)
    errors = np.array(res["error_by_episode"])
    assert errors[0] < res["initial_A_error"]
    assert errors[-1] < 0.5 * errors[0], errors
    # averaged over agents the curve should fall almost every episode
    assert np.mean(np.diff(errors) < 0) >= 0.9, errors
