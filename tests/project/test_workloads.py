"""The workloads in examples/workloads/: env semantics, surrogate training, sharded MLP (real JAX).

The workloads are plain scripts, loaded from their file paths. ``sharded_mlp`` chooses the CPU
device count at import, before JAX's backend exists, so it only ever runs in a subprocess here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import load_module

WORKLOADS = Path(__file__).resolve().parents[2] / "examples" / "workloads"


def load(name: str):
    return load_module(WORKLOADS / f"{name}.py", f"examples_workloads_{name}")


@pytest.fixture(scope="module")
def env():
    return load("arc_grid_env")


@pytest.fixture(scope="module")
def surrogate():
    return load("surrogate_training")


@pytest.fixture(scope="module")
def task(env):
    tasks, solutions = env.make_tasks(3, seed=7)
    return env.Task(tasks.input[0], tasks.target[0]), tuple(int(v) for v in solutions[0])


def sim(grid, target) -> float:
    return float((np.asarray(grid) == np.asarray(target)).mean())


# --------------------------------------------------------------------------- ARC-like env


def test_reset_starts_from_the_input(env, task):
    t, _ = task
    s = env.reset(jax.random.key(0), t)
    np.testing.assert_array_equal(s.working, t.input)
    np.testing.assert_array_equal(s.target, t.target)
    assert s.working.dtype == jnp.uint8 and s.working.shape == (30, 30)
    assert int(s.step) == 0 and not bool(s.done)
    assert int(s.matches) == int(s.input_matches) == int((t.input == t.target).sum())
    assert sim(s.working, s.target) < 1.0


def test_reset_picks_a_task_from_a_bank(env):
    tasks, _ = env.make_tasks(5, seed=3)
    picked = {int(np.flatnonzero([np.array_equal(env.reset(jax.random.key(i), tasks).input, g)
                                  for g in tasks.input])[0]) for i in range(12)}
    assert len(picked) > 1


def test_reset_rejects_bad_grids(env):
    with pytest.raises(ValueError, match="30, 30"):
        env.reset(jax.random.key(0), env.Task(np.zeros(30, np.uint8), np.zeros(30, np.uint8)))


@pytest.mark.parametrize("op", ["fill", "copy_input", "reset"])
@pytest.mark.parametrize("kind", ["point", "bbox", "mask"])
def test_each_action_and_operation(env, task, kind, op):
    t, _ = task
    start = env.reset(jax.random.key(0), t)
    # Paint the grid first so that copying the input back is visible.
    painted, _, _ = env.step(start, env.bbox(0, 0, 29, 29, 9))
    before = np.asarray(painted.working)
    rows, cols = np.indices((30, 30))
    if kind == "point":
        action, region = env.point(4, 7, 3), (rows == 4) & (cols == 7)
    elif kind == "bbox":  # corners in reverse order select the same rectangle
        action, region = env.bbox(12, 20, 5, 2, 3), (rows >= 5) & (rows <= 12) & (cols >= 2) & (cols <= 20)
    else:
        region = (rows + cols) % 3 == 0
        action = env.mask(region, 3)
    code = {"fill": env.FILL, "copy_input": env.COPY_INPUT, "reset": env.RESET}[op]
    action = action._replace(op=jnp.int32(code))
    after, reward, done = env.step(painted, action)

    expected = before.copy()
    if op == "fill":
        expected[region] = 3
    elif op == "copy_input":
        expected[region] = np.asarray(t.input)[region]
    else:  # the whole grid goes back to the input, whatever the selection
        expected = np.asarray(t.input).copy()
    np.testing.assert_array_equal(after.working, expected)
    assert float(reward) == pytest.approx(sim(expected, t.target) - sim(before, t.target), abs=1e-6)
    assert int(after.matches) == int((expected == np.asarray(t.target)).sum())
    assert int(after.step) == 2 and not bool(done)


def test_solving_ends_the_episode_and_auto_resets(env, task):
    t, (r0, c0, r1, c1, colour) = task
    s0 = env.reset(jax.random.key(0), t)
    s1, r_wrong, d1 = env.step(s0, env.bbox(r0, c0, r1, c1, (colour + 1) % 10))
    s2, r_solve, d2 = env.step(s1, env.bbox(r0, c0, r1, c1, colour))
    assert not bool(d1) and bool(d2)
    assert float(r_wrong) + float(r_solve) == pytest.approx(1.0 - sim(t.input, t.target), abs=1e-6)
    # auto-reset: the returned state is a fresh episode of the same task
    np.testing.assert_array_equal(s2.working, t.input)
    assert int(s2.step) == 0 and not bool(s2.done) and int(s2.matches) == int(s0.matches)
    # without auto-reset the solved grid stays, done sticks, and further steps do nothing
    n1, _, _ = env.step(s0, env.bbox(r0, c0, r1, c1, colour), auto_reset=False)
    np.testing.assert_array_equal(n1.working, t.target)
    assert bool(n1.done) and sim(n1.working, t.target) == 1.0
    n2, r, d = env.step(n1, env.bbox(0, 0, 29, 29, 0), auto_reset=False)
    np.testing.assert_array_equal(n2.working, t.target)
    assert float(r) == 0.0 and bool(d) and int(n2.step) == int(n1.step)


def test_episode_ends_at_max_steps(env, task):
    t, _ = task
    s = env.reset(jax.random.key(0), t)
    noop = env.point(0, 0, 0, env.COPY_INPUT)  # copies the input's cell onto itself
    dones = []
    for _ in range(7):
        s, r, d = env.step(s, noop, max_steps=3)
        dones.append(bool(d))
        assert float(r) == 0.0
    assert dones == [False, False, True, False, False, True, False]
    assert int(s.step) == 1


def test_rollout_actions_scans_a_fixed_sequence(env, task):
    t, (r0, c0, r1, c1, colour) = task
    s0 = env.reset(jax.random.key(0), t)
    seq = [env.bbox(0, 0, 2, 2, 5), env.bbox(0, 0, 2, 2, 0, env.COPY_INPUT),
           env.bbox(r0, c0, r1, c1, colour)]
    final, traj = env.rollout_actions(s0, env.stack_actions(seq))
    assert traj.reward.shape == (3,) and traj.done.shape == (3,)
    assert np.asarray(traj.done).tolist() == [False, False, True]
    s, rewards = s0, []
    for a in seq:
        s, r, _ = env.step(s, a)
        rewards.append(float(r))
    np.testing.assert_allclose(traj.reward, rewards, atol=1e-7)
    np.testing.assert_array_equal(final.working, s.working)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["point", "bbox", "mask"])
def test_batch_step_equals_a_loop_over_envs(env, kind):
    states, keys = env.make_batch(5, seed=11)
    actions = [env.random_action(keys[i], jnp.uint32(3),
                                 jax.tree.map(lambda x: x[i], states), kind) for i in range(5)]
    batched = jax.tree.map(lambda *xs: jnp.stack(xs), *actions)
    out_states, rewards, dones = env.batch_step(states, batched)
    for i in range(5):
        s_i, r_i, d_i = env.step(jax.tree.map(lambda x: x[i], states), actions[i])
        for a, b in zip(jax.tree.leaves(s_i), jax.tree.leaves(jax.tree.map(lambda x: x[i], out_states))):
            np.testing.assert_array_equal(a, b)
        assert float(r_i) == float(rewards[i]) and bool(d_i) == bool(dones[i])


def test_batch_reset_equals_make_batch(env):
    states, _ = env.make_batch(4, seed=2)
    tasks, _ = env.make_tasks(4, seed=2)
    reset = env.batch_reset(jax.random.split(jax.random.key(0), 4), tasks)
    for a, b in zip(jax.tree.leaves(reset), jax.tree.leaves(states)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bbox", "mask"])
def test_random_rollout_is_per_env_and_consistent(env, kind):
    states, keys = env.make_batch(6, seed=5)
    final, stats = env.rollout(states, keys, 130, kind)
    assert final.working.shape == (6, 30, 30) and final.working.dtype == jnp.uint8
    assert stats.total_reward.shape == stats.episode_return.shape == stats.episodes.shape == (6,)
    assert env.check_random_rollout(final, stats, 130) >= 6
    # vmap-invariant policy: an env's rollout does not depend on the rest of the batch
    one = jax.tree.map(lambda x: x[2:3], (states, keys))
    final_1, stats_1 = env.rollout(*one, 130, kind)
    for a, b in zip(jax.tree.leaves((final_1, stats_1)), jax.tree.leaves((final, stats))):
        np.testing.assert_allclose(np.asarray(a)[0], np.asarray(b)[2], atol=1e-6)


@pytest.mark.slow
def test_random_policy_covers_kinds_and_operations(env):
    states, keys = env.make_batch(1)
    s0 = jax.tree.map(lambda x: x[0], states)
    ops, corners = [], []
    for t in range(400):
        a = env.random_action(keys[0], jnp.uint32(t), s0, "bbox")
        ops.append(int(a.op))
        corners += [int(a.r0), int(a.c0), int(a.r1), int(a.c1)]
    assert set(ops) == {env.FILL, env.COPY_INPUT, env.RESET} and ops.count(env.FILL) > 300
    assert min(corners) == 0 and max(corners) == 29
    with pytest.raises(ValueError, match="kind must be one of"):
        env.random_action(keys[0], jnp.uint32(0), s0, "lasso")


@pytest.mark.slow
def test_scripted_episode_check(env):
    result = env.check_scripted_episode()
    assert 0 < result["similarity_start"] < 1
    assert result["episode_return"] == pytest.approx(1 - result["similarity_start"], abs=1e-6)


# --------------------------------------------------------------------------- surrogate


@pytest.mark.slow
def test_surrogate_jit_and_nojit_steps_agree(surrogate):
    (x, y), _ = surrogate.make_data(n_train=128, n_test=8)
    optimizer = surrogate.make_optimizer(steps=50)
    params = surrogate.init_mlp(3)
    opt_state = optimizer.init(params)
    step = surrogate.make_train_step(optimizer)
    gap = surrogate.check_consistency(jax.jit(step), surrogate.without_jit(step), params,
                                      opt_state, x, y, n_steps=2)
    assert gap < 1e-5
    # ...and the check does catch a step that computes something else
    other = surrogate.make_train_step(surrogate.optax.adam(1e-2))
    with pytest.raises(AssertionError, match="disagree"):
        surrogate.check_consistency(jax.jit(step), jax.jit(other), params, opt_state, x, y, 1)


def test_surrogate_learns_the_oscillator(surrogate):
    (x, y), (x_test, y_test) = surrogate.make_data(n_train=512, n_test=512)
    # the data is the exact solution: x'' + 2 zeta omega x' + omega^2 x = 0, x(0) = 1
    zeta, omega = 0.2, 1.7
    t = np.linspace(0, 4, 4001)
    xs = np.asarray(surrogate.oscillator(np.stack([np.full_like(t, zeta), np.full_like(t, omega), t], 1), np))
    dt = t[1] - t[0]
    residual = np.gradient(np.gradient(xs, dt), dt) + 2 * zeta * omega * np.gradient(xs, dt) + omega**2 * xs
    assert np.abs(residual[5:-5]).max() < 1e-3 and xs[0] == 1.0

    steps = 600
    optimizer = surrogate.make_optimizer(steps)
    params = surrogate.init_mlp(1)
    initial = float(jax.jit(surrogate.mse)(params, x_test, y_test))
    trained, _, losses = surrogate.train(params, optimizer.init(params), x, y, optimizer, steps)
    test = float(jax.jit(surrogate.mse)(trained, x_test, y_test))
    assert losses.shape == (steps,)
    assert test < 0.02 * initial and test < 5e-3, (initial, test)


# --------------------------------------------------------------------------- sharded MLP


def run_sharded(code: str, **env_vars: str | None) -> dict:
    env = dict(os.environ)
    for name, value in env_vars.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    prelude = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('sm', {str(WORKLOADS / 'sharded_mlp.py')!r})\n"
        "sm = importlib.util.module_from_spec(spec); sys.modules['sm'] = sm; spec.loader.exec_module(sm)\n"
        "import jax\n"
    )
    proc = subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_sharded_mlp_on_four_simulated_devices_matches_one_device():
    code = (
        "mesh, step, args, host = sm.setup()\n"
        "sharded, single = sm.run(step, args, host)\n"
        "sm.check(sharded, single)\n"
        "print(json.dumps({'n': len(jax.devices()), 'mesh': mesh.devices.size,\n"
        "    'spec': str(args[2].sharding.spec), 'shards': len(args[2].addressable_shards),\n"
        "    'losses': sharded[2].tolist(), 'single': single[2].tolist(),\n"
        "    'gap': sm.max_gap(sharded[0], single[0])}))\n"
    )
    # No device count configured: the script asks for 4 simulated CPU devices itself.
    out = run_sharded(code, XLA_FLAGS=None, JAX_NUM_CPU_DEVICES=None, JAX_PLATFORMS="cpu")
    assert out["n"] == out["mesh"] == out["shards"] == 4
    assert "data" in out["spec"]
    losses = np.array(out["losses"])
    assert losses[-1] < 0.5 * losses[0]
    np.testing.assert_allclose(losses, out["single"], rtol=1e-4, atol=1e-5)
    assert out["gap"] < 1e-4


def test_sharded_mlp_respects_a_device_count_the_user_chose():
    code = "print(json.dumps({'n': len(jax.devices()), 'mesh': sm.make_mesh().devices.size}))\n"
    out = run_sharded(code, XLA_FLAGS="--xla_force_host_platform_device_count=2",
                      JAX_PLATFORMS="cpu")
    assert out == {"n": 2, "mesh": 2}
