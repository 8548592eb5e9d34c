"""An MLP surrogate of a damped harmonic oscillator, trained with optax; jit vs no-jit speed.

The exact solution of ``x'' + 2 zeta omega x' + omega^2 x = 0`` with ``x(0) = 1`` and
``x'(0) = -zeta omega x(0)`` (underdamped, ``zeta < 1``) is

    x(t; zeta, omega) = exp(-zeta omega t) cos(omega sqrt(1 - zeta^2) t).

A small tanh MLP learns the map ``(zeta, omega, t) -> x`` from fixed-seed samples with Adam
(cosine-decayed learning rate) and must reach a low test error on fresh samples.

The same training step is timed jitted and un-jitted (op-by-op under ``jax.disable_jit``) with
``jaxrun.bench.speedup``, which also checks that both give the same loss and parameters; the
one-off compile time of the jitted step is reported apart from its sustained step time.

Run as ``python surrogate_training.py``.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

try:
    from jaxrun import record
except ImportError:  # running outside jaxrun: recording is a no-op
    def record(**metrics):
        return None


SEED = 0
LOW = (0.05, 1.0, 0.0)  # zeta, omega, t
HIGH = (0.5, 2.5, 4.0)
HIDDEN = (48, 48)
N_TRAIN = 1024
N_TEST = 1024
STEPS = 1000
LEARNING_RATE = 3e-3
TEST_MSE_THRESHOLD = 2e-3  # the target's variance is ~0.17: this is R^2 > 0.988
RTOL, ATOL = 1e-4, 1e-6  # jit vs op-by-op: same math, possibly different fusion/rounding


def oscillator(x, xp=jnp):
    """Exact displacement of the underdamped oscillator for rows ``(zeta, omega, t)``."""
    zeta, omega, t = x[..., 0], x[..., 1], x[..., 2]
    return xp.exp(-zeta * omega * t) * xp.cos(omega * xp.sqrt(1.0 - zeta**2) * t)


def make_data(seed: int = SEED, n_train: int = N_TRAIN, n_test: int = N_TEST):
    """Fixed-seed train and test sets ``(x, oscillator(x))`` as float32 arrays.  Built with
    numpy: eager JAX calls would each compile a kernel, costing more than this whole problem."""
    rng = np.random.default_rng(seed)

    def sample(n):
        x = rng.uniform(LOW, HIGH, size=(n, 3))
        return jnp.asarray(x, jnp.float32), jnp.asarray(oscillator(x, np), jnp.float32)

    return sample(n_train), sample(n_test)


def init_mlp(seed: int, hidden=HIDDEN) -> list[dict]:
    """LeCun-normal weights, zero biases."""
    rng = np.random.default_rng(seed)
    sizes = (3, *hidden, 1)
    return [{"w": jnp.asarray(rng.normal(size=(a, b)) / np.sqrt(a), jnp.float32),
             "b": jnp.zeros(b, jnp.float32)}
            for a, b in zip(sizes[:-1], sizes[1:])]


def predict(params: list[dict], x: jax.Array) -> jax.Array:
    low, high = jnp.array(LOW), jnp.array(HIGH)
    h = 2.0 * (x - low) / (high - low) - 1.0  # inputs scaled to [-1, 1]
    for layer in params[:-1]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return (h @ params[-1]["w"] + params[-1]["b"])[..., 0]


def mse(params: list[dict], x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((predict(params, x) - y) ** 2)


def make_optimizer(steps: int = STEPS) -> optax.GradientTransformation:
    return optax.adam(optax.cosine_decay_schedule(LEARNING_RATE, steps, alpha=0.05))


def make_train_step(optimizer: optax.GradientTransformation):
    """A pure training step ``(params, opt_state, x, y) -> (params, opt_state, loss)``."""

    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(mse)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step


def without_jit(fn):
    """``fn`` run op by op: every jnp call dispatched eagerly, nothing traced or fused."""

    @functools.wraps(fn)
    def eager(*args):
        with jax.disable_jit():
            return fn(*args)

    return eager


def train(params, opt_state, x, y, optimizer, steps: int):
    """``steps`` full-batch training steps in one jitted ``lax.scan``; returns the loss curve."""
    train_step = make_train_step(optimizer)

    @jax.jit
    def run(params, opt_state):
        def body(carry, _):
            params, opt_state, loss = train_step(*carry, x, y)
            return (params, opt_state), loss

        (params, opt_state), losses = jax.lax.scan(body, (params, opt_state), None, length=steps)
        return params, opt_state, losses

    return run(params, opt_state)


def check_consistency(jit_step, eager_step, params, opt_state, x, y, n_steps: int = 3) -> float:
    """Run ``n_steps`` with both steps from the same state (errors compound); return the largest
    absolute gap of losses and parameters, raising if one is beyond ``RTOL``/``ATOL``."""
    a = b = (params, opt_state)
    worst = 0.0
    for _ in range(n_steps):
        *a, loss_a = jit_step(*a, x, y)
        *b, loss_b = eager_step(*b, x, y)
        for u, v in zip(jax.tree.leaves((a[0], loss_a)), jax.tree.leaves((b[0], loss_b))):
            u, v = np.asarray(u), np.asarray(v)
            if not np.allclose(u, v, rtol=RTOL, atol=ATOL):
                raise AssertionError(f"jit and no-jit training steps disagree: max |diff| "
                                     f"{np.max(np.abs(u - v)):.3g}")
            worst = max(worst, float(np.max(np.abs(u - v))))
    return worst


def main() -> dict:
    from jaxrun import bench

    (x_train, y_train), (x_test, y_test) = make_data()
    optimizer = make_optimizer()
    params = init_mlp(SEED + 1)
    opt_state = optimizer.init(params)
    step = make_train_step(optimizer)
    jit_step, eager_step = jax.jit(step), without_jit(step)

    # The jitted step's cold compile, apart from its steady-state time (compiles here, once).
    timing = bench.measure(jit_step, params, opt_state, x_train, y_train, min_time=0.1,
                           peaks=False, name="train_step")
    start = time.perf_counter()
    jax.block_until_ready(eager_step(params, opt_state, x_train, y_train))
    eager_first = time.perf_counter() - start  # op-by-op also compiles: one kernel per op
    gap = check_consistency(jit_step, eager_step, params, opt_state, x_train, y_train)
    speed = bench.speedup(jit_step, eager_step, params, opt_state, x_train, y_train,
                          rtol=RTOL, atol=ATOL, min_time=0.15, names=("jit", "no-jit"))

    trained, _, losses = train(params, opt_state, x_train, y_train, optimizer, STEPS)
    first_loss, train_loss = float(losses[0]), float(losses[-1])
    test_loss = float(jax.jit(mse)(trained, x_test, y_test))
    variance = float(jnp.var(y_test))

    print(f"damped-oscillator surrogate: MLP 3-{'-'.join(map(str, HIDDEN))}-1, Adam, "
          f"{STEPS} full-batch steps on {N_TRAIN} samples")
    print(f"  train loss {first_loss:.4f} -> {train_loss:.2e}; test MSE {test_loss:.2e} "
          f"(target variance {variance:.3f})")
    cached = " (loaded from a compilation cache, not cold)" if timing.compile_cached else ""
    print(f"  jit step: compile {timing.compile_time:.3f} s{cached} (trace {timing.trace_time:.3f}, "
          f"lower {timing.lower_time:.3f}), steady {timing.steady.median * 1e6:,.0f} us/step")
    print(f"  no-jit step: first call {eager_first:.2f} s, steady "
          f"{speed.reference.steady.median * 1e3:,.1f} ms/step")
    print(f"  sustained jit speed-up {speed.ratio:,.1f}x (95% CI {speed.ci_low:,.1f}-"
          f"{speed.ci_high:,.1f}); jit vs no-jit after 3 steps: max |diff| {gap:.1e}")

    if not test_loss < TEST_MSE_THRESHOLD:
        raise AssertionError(f"surrogate test MSE {test_loss:.3g} >= {TEST_MSE_THRESHOLD}")
    if not train_loss < first_loss / 20:
        raise AssertionError(f"training loss barely fell: {first_loss} -> {train_loss}")
    if not speed.ratio > 1.0:
        raise AssertionError(f"the jitted step is not faster than op-by-op ({speed.ratio:.2f}x)")

    metrics = {
        "jit_speedup": float(speed.ratio),
        "speedup_ci": [float(speed.ci_low), float(speed.ci_high)],
        "compile_time_s": float(timing.compile_time),
        "compile_cached": bool(timing.compile_cached),
        "trace_lower_time_s": float(timing.trace_time + timing.lower_time),
        "steady_step_s": float(timing.steady.median),
        "nojit_step_s": float(speed.reference.steady.median),
        "nojit_first_call_s": eager_first,
        "final_train_loss": train_loss,
        "final_test_loss": test_loss,
        "jit_nojit_max_abs_gap": gap,
    }
    record(**metrics)
    return metrics


if __name__ == "__main__":
    main()
