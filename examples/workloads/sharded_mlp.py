"""A data-parallel MLP over a device mesh: the batch is sharded, the parameters replicated.

On a CPU-only machine the mesh is made of simulated CPU devices: unless the user already chose a
device count (``--xla_force_host_platform_device_count`` in ``XLA_FLAGS``, or
``JAX_NUM_CPU_DEVICES``), the script asks JAX for ``N_SIM_DEVICES`` CPU devices right after
``import jax``, before any backend exists.  On a GPU/TPU machine it uses the accelerators.

The model regresses a fixed random "teacher" MLP plus noise.  One training step (forward,
backward, SGD with momentum) is jitted with the batch sharded as ``P("data")`` over the mesh and
the parameters replicated, so XLA's SPMD partitioner inserts the gradient all-reduce.  Checks:
the loss falls, and the sharded run matches the same steps computed on a single device.  The
steady-state step time and XLA's FLOP count of the step come from ``jaxrun.bench.measure``;
achieved FLOP/s is the whole mesh's FLOPs per step over the step time.  (Simulated devices share
the host's cores, so they show the partitioning, not a speed-up over one device.)

Run as ``python sharded_mlp.py``; ``jaxrun run sharded_mlp.py --param batch=512,1024,2048 --param
devices=1,2`` sweeps the batch size and the device count (``jaxrun.params()`` reads the batch).
"""

from __future__ import annotations

import os
import re

import jax

N_SIM_DEVICES = 4


def _configure_cpu_devices(n: int = N_SIM_DEVICES) -> None:
    """Ask for ``n`` simulated CPU devices unless the user chose a count or a non-CPU platform,
    or JAX's backends already exist (then the devices are whatever they are)."""
    platforms = os.environ.get("JAX_PLATFORMS", "").strip().lower()
    if platforms not in ("", "cpu"):
        return
    if re.search(r"--xla_force_host_platform_device_count\b", os.environ.get("XLA_FLAGS", "")):
        return
    if os.environ.get("JAX_NUM_CPU_DEVICES") or jax.config.jax_num_cpu_devices > 0:
        return
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:  # a backend was initialised before this module was imported
        pass


_configure_cpu_devices()

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

try:
    from jaxrun import params, record
except ImportError:  # running outside jaxrun: recording is a no-op, the parameters their defaults
    def record(**metrics):
        return None

    def params(**defaults):
        return defaults


SEED = 0
SIZES = (64, 512, 512, 16)  # input, hidden, hidden, output
# A sweep sets it: jaxrun run sharded_mlp.py --param batch=512,1024,2048 --param devices=1,2
BATCH = params(batch=2048)["batch"]
STEPS = 20
LEARNING_RATE = 0.05
MOMENTUM = 0.9
NOISE = 0.01
RTOL, ATOL = 1e-4, 1e-5  # sharded vs single device: same math, different reduction order


def init_params(rng: np.random.Generator, sizes=SIZES) -> list[dict]:
    return [{"w": (rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32),
             "b": np.zeros(b, np.float32)}
            for a, b in zip(sizes[:-1], sizes[1:])]


def apply(params, x):
    for layer in params[:-1]:
        x = jax.nn.gelu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def make_data(seed: int = SEED, batch: int = BATCH):
    """Inputs and targets from a fixed random teacher MLP (numpy, fixed seed), plus noise."""
    rng = np.random.default_rng(seed)
    teacher = init_params(rng)
    x = rng.normal(size=(batch, SIZES[0])).astype(np.float32)
    h = x
    for layer in teacher[:-1]:
        h = np.tanh(h @ layer["w"] + layer["b"])
    y = h @ teacher[-1]["w"] * 2.0
    y = (y + NOISE * rng.normal(size=y.shape)).astype(np.float32)
    return x, y, init_params(rng)


def loss_fn(params, x, y):
    return jnp.mean((apply(params, x) - y) ** 2)


def train_step(params, velocity, x, y):
    """One step of SGD with momentum on the mean squared error."""
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    velocity = jax.tree.map(lambda v, g: MOMENTUM * v + g, velocity, grads)
    params = jax.tree.map(lambda p, v: p - LEARNING_RATE * v, params, velocity)
    return params, velocity, loss


def train(step, params, velocity, x, y, steps: int = STEPS):
    losses = []
    for _ in range(steps):
        params, velocity, loss = step(params, velocity, x, y)
        losses.append(loss)
    return params, velocity, np.array(jax.device_get(losses))


def make_mesh(devices=None) -> Mesh:
    devices = jax.devices() if devices is None else devices
    return Mesh(np.array(devices), ("data",))


def sharded_step(mesh: Mesh):
    """The training step jitted for ``mesh``: batch split over "data", everything else replicated."""
    data = NamedSharding(mesh, P("data"))
    replicated = NamedSharding(mesh, P())
    return jax.jit(train_step,
                   in_shardings=(replicated, replicated, data, data),
                   out_shardings=(replicated, replicated, replicated)), data, replicated


def setup(devices=None):
    """The mesh, the sharded step, and its arguments placed on the mesh; plus the host data."""
    mesh = make_mesh(devices)
    if BATCH % mesh.devices.size:
        raise ValueError(f"batch {BATCH} does not split over {mesh.devices.size} devices")
    x, y, params = make_data()
    velocity = jax.tree.map(np.zeros_like, params)
    step, data, replicated = sharded_step(mesh)
    args = (jax.device_put(params, replicated), jax.device_put(velocity, replicated),
            jax.device_put(x, data), jax.device_put(y, data))
    return mesh, step, args, (params, velocity, x, y)


def run(step, args, host_args, steps: int = STEPS) -> tuple:
    """Train on the mesh and on one device from the same start; return both results."""
    sharded = train(step, *args, steps=steps)
    single = train(jax.jit(train_step), *jax.device_put(host_args, jax.devices()[0]), steps=steps)
    return sharded, single


def max_gap(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u) - np.asarray(v))))
               for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def check(sharded, single) -> None:
    (p_sh, _, losses), (p_one, _, losses_one) = sharded, single
    if not losses[-1] < 0.5 * losses[0]:
        raise AssertionError(f"the loss did not fall: {losses[0]:.4f} -> {losses[-1]:.4f}")
    if not np.allclose(losses, losses_one, rtol=RTOL, atol=ATOL):
        raise AssertionError(f"sharded and single-device losses differ by {max_gap(losses, losses_one)}")
    for u, v in zip(jax.tree.leaves(p_sh), jax.tree.leaves(p_one)):
        if not np.allclose(np.asarray(u), np.asarray(v), rtol=RTOL, atol=ATOL):
            raise AssertionError(f"sharded and single-device parameters differ by {max_gap(u, v)}")


def main() -> dict:
    from jaxrun import bench

    mesh, step, args, host_args = setup()
    n = mesh.devices.size
    # First, so that its compile is cold; training below reuses the executable.
    m = bench.measure(step, *args, min_time=0.2, peaks=False, name="sharded_train_step")
    sharded, single = run(step, args, host_args)
    check(sharded, single)
    losses, losses_one = sharded[2], single[2]
    # measure() sums XLA's per-partition cost analysis over the program's devices.
    assert m.num_devices == n, (m.num_devices, n)
    flops = m.flops
    rate = m.achieved_flops_per_s

    print(f"data-parallel MLP {'-'.join(map(str, SIZES))}, batch {BATCH} over {n} "
          f"{mesh.devices.flat[0].platform} device(s): mesh {dict(mesh.shape)}, "
          f"x sharded as {args[2].sharding.spec}, parameters replicated")
    print(f"  loss {losses[0]:.4f} -> {losses[-1]:.4f} in {STEPS} steps; vs single device: "
          f"max |loss diff| {max_gap(losses, losses_one):.1e}")
    compiled = "cached compile" if m.compile_cached else "cold compile"
    print(f"  step: {m.steady.median * 1e3:.2f} ms ({compiled} {m.compile_time:.2f} s); "
          + ("FLOPs unknown" if flops is None else
             f"{flops / 1e9:.2f} GFLOP per step (XLA cost analysis) -> {rate / 1e9:.1f} GFLOP/s"))

    metrics = {
        "n_devices": n,
        "achieved_flops_per_s": rate,
        "flops_per_step": flops,
        "steady_step_s": m.steady.median,
        "samples_per_s": BATCH / m.steady.median,
        "compile_time_s": m.compile_time,
        "compile_cached": m.compile_cached,
        "loss_first": float(losses[0]),
        "loss_last": float(losses[-1]),
        "max_abs_loss_gap_vs_single_device": max_gap(losses, losses_one),
    }
    record(**metrics)
    return metrics


if __name__ == "__main__":
    main()
