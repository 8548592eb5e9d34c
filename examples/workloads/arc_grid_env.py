"""An ARC-like grid environment in pure JAX: jitted reset/step, vmapped over a batch, scanned in time.

An ARC task shows an *input* grid and asks for a *target* grid (up to 30x30 cells, 10 colours).
The agent edits a *working* grid, initially a copy of the input, with actions that select cells
and apply an operation to them:

* selections: a **point** ``(row, col)``, a **bbox** ``(r0, c0, r1, c1)`` (inclusive corners, in
  either order), or an arbitrary 30x30 boolean **mask**;
* operations: ``FILL`` the selection with a colour, ``COPY_INPUT`` the input's cells into the
  selection, or ``RESET`` the whole working grid to the input (the selection is ignored).

The reward is the change in similarity to the target, ``sim(after) - sim(before)``, where
``sim`` is the fraction of cells equal to the target, so an episode's rewards sum to the
similarity gained.  An episode ends when the working grid equals the target or after
``max_steps`` steps; with ``auto_reset`` (the default, as in gymnax and JaxARC) the state that
``step`` returns for a finished episode is already a fresh reset of the same task, while the
returned ``done`` flag says the episode ended.

A step is two fused passes over the grids: the selection mask comes from broadcasted
comparisons of row/column iotas against the action's bounds, grids are ``uint8``, the number of
cells matching the target is cached in the state so that a step counts the edited grid's matches
once (straight from its inputs, without materialising it) and then writes it.  A whole rollout of
``T`` steps x ``B`` envs is one jitted call: ``vmap`` over envs of a ``lax.scan`` over time, with
a random policy whose actions come from each env's PRNG key and the step index inside the scan.

Run as ``python arc_grid_env.py``: checks a scripted episode, then reports env-steps/s for bbox
actions at batch 1..1024 and for point / mask actions at batch 1024.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Union

import jax
import jax.numpy as jnp
import numpy as np

try:
    from jaxrun import record
except ImportError:  # running outside jaxrun: recording is a no-op
    def record(**metrics):
        return None


GRID = 30
N_COLOURS = 10
N_CELLS = GRID * GRID
MAX_STEPS = 100

FILL, COPY_INPUT, RESET = 0, 1, 2
ACTION_KINDS = ("point", "bbox", "mask")

SEED = 0
BATCH_SIZES = (1, 16, 64, 256, 1024)
ROLLOUT_STEPS = 128  # > MAX_STEPS: every random-policy episode times out once per rollout


# --------------------------------------------------------------------------- data types


class Task(NamedTuple):
    """An input/target pair of ``uint8`` grids, ``(30, 30)`` or with leading batch axes."""

    input: jax.Array
    target: jax.Array


class EnvState(NamedTuple):
    working: jax.Array  # uint8 (30, 30): the grid being edited
    input: jax.Array  # uint8 (30, 30)
    target: jax.Array  # uint8 (30, 30)
    step: jax.Array  # int32: steps taken in the current episode
    done: jax.Array  # bool: the episode has ended (stays False under auto-reset)
    matches: jax.Array  # int32: cells of `working` equal to `target` (cached: one pass per step)
    input_matches: jax.Array  # int32: cells of `input` equal to `target` (the value at reset)


class PointAction(NamedTuple):
    row: jax.Array
    col: jax.Array
    colour: jax.Array
    op: jax.Array


class BboxAction(NamedTuple):
    r0: jax.Array
    c0: jax.Array
    r1: jax.Array
    c1: jax.Array
    colour: jax.Array
    op: jax.Array


class MaskAction(NamedTuple):
    mask: jax.Array  # bool (30, 30)
    colour: jax.Array
    op: jax.Array


Action = Union[PointAction, BboxAction, MaskAction]


def point(row, col, colour, op=FILL) -> PointAction:
    return PointAction(*(jnp.asarray(x, jnp.int32) for x in (row, col, colour, op)))


def bbox(r0, c0, r1, c1, colour, op=FILL) -> BboxAction:
    return BboxAction(*(jnp.asarray(x, jnp.int32) for x in (r0, c0, r1, c1, colour, op)))


def mask(cells, colour, op=FILL) -> MaskAction:
    return MaskAction(jnp.asarray(cells, bool), jnp.asarray(colour, jnp.int32),
                      jnp.asarray(op, jnp.int32))


# --------------------------------------------------------------------------- env


def similarity(grid: jax.Array, target: jax.Array) -> jax.Array:
    """Fraction of cells of ``grid`` equal to ``target`` (float32, over the last two axes)."""
    return _matches(grid, target).astype(jnp.float32) / N_CELLS


def _matches(grid, target):
    return jnp.sum(grid == target, axis=(-2, -1), dtype=jnp.int32)


def selection(action: Action) -> jax.Array:
    """The ``(30, 30)`` boolean mask of the cells an action selects."""
    rows = jax.lax.broadcasted_iota(jnp.int32, (GRID, GRID), 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, (GRID, GRID), 1)
    if isinstance(action, PointAction):
        return (rows == action.row) & (cols == action.col)
    if isinstance(action, BboxAction):
        r0, r1 = jnp.minimum(action.r0, action.r1), jnp.maximum(action.r0, action.r1)
        c0, c1 = jnp.minimum(action.c0, action.c1), jnp.maximum(action.c0, action.c1)
        return (rows >= r0) & (rows <= r1) & (cols >= c0) & (cols <= c1)
    if isinstance(action, MaskAction):
        return action.mask
    raise TypeError(f"action must be a PointAction, BboxAction or MaskAction, "
                    f"got {type(action).__name__}")


def _reset(key: jax.Array, task: Task) -> EnvState:
    """Start an episode on ``task``; if the task holds a bank of tasks (leading axis), ``key``
    picks one uniformly."""
    inp, tgt = jnp.asarray(task.input, jnp.uint8), jnp.asarray(task.target, jnp.uint8)
    if inp.ndim == 3:
        i = jax.random.randint(key, (), 0, inp.shape[0])
        inp, tgt = inp[i], tgt[i]
    elif inp.ndim != 2:
        raise ValueError(f"task grids must be (30, 30) or (n_tasks, 30, 30), got {inp.shape}")
    matches = _matches(inp, tgt)
    return EnvState(working=inp, input=inp, target=tgt, step=jnp.int32(0),
                    done=jnp.bool_(False), matches=matches, input_matches=matches)


def _step(state: EnvState, action: Action, max_steps: int = MAX_STEPS,
          auto_reset: bool = True) -> tuple[EnvState, jax.Array, jax.Array]:
    """Apply one action; returns ``(next_state, reward, done)``."""
    op = action.op
    chosen = selection(action) | (op == RESET)
    value = jnp.where(op == FILL, action.colour.astype(jnp.uint8), state.input)
    # Count the matches of the edited grid straight from the inputs (one fused pass that never
    # materialises it); the count before the step is cached in the state.
    after = jnp.sum(jnp.where(chosen, value == state.target, state.working == state.target),
                    axis=(-2, -1), dtype=jnp.int32)
    working = jnp.where(chosen, value, state.working)
    reward = (after - state.matches).astype(jnp.float32) / N_CELLS
    t = state.step + 1
    done = (after == N_CELLS) | (t >= max_steps)
    if auto_reset:  # a finished episode restarts on the same task
        working = jnp.where(done, state.input, working)
        t = jnp.where(done, 0, t)
        after = jnp.where(done, state.input_matches, after)
        flag = jnp.zeros_like(done)
    else:  # a finished episode stays finished: further steps change nothing
        working = jnp.where(state.done, state.working, working)
        t = jnp.where(state.done, state.step, t)
        after = jnp.where(state.done, state.matches, after)
        reward = jnp.where(state.done, 0.0, reward)
        done = done | state.done
        flag = done
    return EnvState(working, state.input, state.target, t, flag, after, state.input_matches), \
        reward, done


reset = jax.jit(_reset)
step = jax.jit(_step, static_argnames=("max_steps", "auto_reset"))


@jax.jit
def batch_reset(keys: jax.Array, tasks: Task) -> EnvState:
    return jax.vmap(_reset)(keys, tasks)


@functools.partial(jax.jit, static_argnames=("max_steps", "auto_reset"))
def batch_step(states: EnvState, actions: Action, max_steps: int = MAX_STEPS,
               auto_reset: bool = True):
    fn = functools.partial(_step, max_steps=max_steps, auto_reset=auto_reset)
    return jax.vmap(fn)(states, actions)


# --------------------------------------------------------------------------- random policy


def _field(bits: jax.Array, shift: int, n: int) -> jax.Array:
    """10 random bits at ``shift`` mapped to ``[0, n)`` by multiply-shift (bias < n / 1024)."""
    return ((((bits >> shift) & 0x3FF) * n) >> 10).astype(jnp.int32)


def _mix32(x: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finaliser: a bijection of uint32 in which every input bit flips
    each output bit with probability ~1/2."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def policy_bits(key: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """64 random bits for step ``t`` of the env whose policy key is ``key``.

    A counter-based hash of the key's data and the step: one env's stream never depends on the
    others (``vmap``-invariant) and it costs ~30 integer ops.  ``jax.random.bits`` would give the
    same guarantees through threefry, at ~0.3 s of XLA compile per executable and about a fifth
    of the step time, for a policy that only needs well-mixed bits."""
    seed = jnp.uint32(0x9E3779B9)
    for word in jax.random.key_data(key).ravel():
        seed = _mix32(seed ^ word)
    t = t.astype(jnp.uint32)
    return _mix32(seed ^ _mix32(2 * t)), _mix32(seed ^ _mix32(2 * t + 1))


def random_action(key: jax.Array, t: jax.Array, state: EnvState, kind: str) -> Action:
    """The random policy's action at step ``t``: a uniform selection of ``kind``, a uniform
    colour, and mostly ``FILL`` (1/16 ``COPY_INPUT``, 1/16 ``RESET``)."""
    a, b = policy_bits(key, t)
    colour = _field(b, 10, N_COLOURS)
    op16 = _field(b, 20, 16)
    op = jnp.where(op16 == 15, RESET, jnp.where(op16 == 14, COPY_INPUT, FILL)).astype(jnp.int32)
    if kind == "point":
        return PointAction(_field(a, 0, GRID), _field(a, 10, GRID), colour, op)
    if kind == "bbox":
        return BboxAction(_field(a, 0, GRID), _field(a, 10, GRID), _field(a, 20, GRID),
                          _field(b, 0, GRID), colour, op)
    if kind == "mask":  # select every cell of one colour of the working grid: a recolouring
        pick = _field(a, 0, N_COLOURS).astype(jnp.uint8)
        return MaskAction(state.working == pick, colour, op)
    raise ValueError(f"kind must be one of {ACTION_KINDS}, got {kind!r}")


class Trajectory(NamedTuple):
    reward: jax.Array  # float32, one per step
    done: jax.Array  # bool, one per step


class RolloutStats(NamedTuple):
    """What a random-policy rollout accumulates per env (in the scan's carry, no per-step output)."""

    total_reward: jax.Array  # float32: sum of all rewards
    episode_return: jax.Array  # float32: rewards since the current episode began
    episodes: jax.Array  # int32: episodes that ended


def env_rollout(state: EnvState, key: jax.Array, num_steps: int, kind: str = "bbox",
                max_steps: int = MAX_STEPS) -> tuple[EnvState, RolloutStats]:
    """One env for ``num_steps`` steps under the random policy, in one ``lax.scan`` (vmap it)."""

    def body(carry, t):
        s, stats = carry
        s, reward, done = _step(s, random_action(key, t, s, kind), max_steps=max_steps)
        episode_return = jnp.where(done, 0.0, stats.episode_return + reward)
        stats = RolloutStats(stats.total_reward + reward, episode_return,
                             stats.episodes + done.astype(jnp.int32))
        return (s, stats), None

    zero = RolloutStats(jnp.float32(0), jnp.float32(0), jnp.int32(0))
    steps = jnp.arange(num_steps, dtype=jnp.uint32)
    return jax.lax.scan(body, (state, zero), steps)[0]


@functools.partial(jax.jit, static_argnames=("num_steps", "kind", "max_steps"))
def rollout(states: EnvState, keys: jax.Array, num_steps: int, kind: str = "bbox",
            max_steps: int = MAX_STEPS) -> tuple[EnvState, RolloutStats]:
    """A batch of envs (one PRNG key each) for ``num_steps`` steps: ``vmap`` of ``env_rollout``."""
    fn = functools.partial(env_rollout, num_steps=num_steps, kind=kind, max_steps=max_steps)
    return jax.vmap(fn)(states, keys)


@functools.partial(jax.jit, static_argnames=("max_steps", "auto_reset"))
def rollout_actions(state: EnvState, actions: Action, max_steps: int = MAX_STEPS,
                    auto_reset: bool = True) -> tuple[EnvState, Trajectory]:
    """One env through a fixed sequence of actions of one kind (leading axis: time)."""

    def body(s, a):
        s, reward, done = _step(s, a, max_steps=max_steps, auto_reset=auto_reset)
        return s, Trajectory(reward, done)

    return jax.lax.scan(body, state, actions)


def stack_actions(actions: list) -> Action:
    """A list of same-kind actions as one action with a leading time axis."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *actions)


# --------------------------------------------------------------------------- tasks


def make_tasks(n: int, seed: int = SEED) -> tuple[Task, np.ndarray]:
    """``n`` synthetic ARC-like tasks, each solved by one bbox fill.

    The input is a background colour with a few random rectangles; the target paints one more
    rectangle of a new colour.  Returns the tasks and the solving ``(r0, c0, r1, c1, colour)``.
    """
    rng = np.random.default_rng(seed)
    inputs = np.empty((n, GRID, GRID), np.uint8)
    targets = np.empty_like(inputs)
    solutions = np.empty((n, 5), np.int32)
    for i in range(n):
        grid = np.full((GRID, GRID), rng.integers(N_COLOURS), np.uint8)
        for _ in range(rng.integers(2, 6)):
            r0, c0 = rng.integers(0, GRID - 2, size=2)
            r1, c1 = r0 + rng.integers(1, 10), c0 + rng.integers(1, 10)
            grid[r0:r1 + 1, c0:c1 + 1] = rng.integers(N_COLOURS)
        r0, c0 = rng.integers(0, GRID - 3, size=2)
        r1, c1 = min(GRID - 1, r0 + rng.integers(2, 12)), min(GRID - 1, c0 + rng.integers(2, 12))
        region = grid[r0:r1 + 1, c0:c1 + 1]
        colour = rng.choice(np.setdiff1d(np.arange(N_COLOURS), np.unique(region)))
        target = grid.copy()
        target[r0:r1 + 1, c0:c1 + 1] = colour
        inputs[i], targets[i] = grid, target
        solutions[i] = (r0, c0, r1, c1, colour)
    return Task(inputs, targets), solutions


def make_batch(batch: int, seed: int = SEED) -> tuple[EnvState, jax.Array]:
    """``batch`` envs reset on ``batch`` different tasks, and one policy PRNG key per env.

    Built with numpy (the same values ``batch_reset`` gives): eager JAX calls would compile a
    kernel for every batch size."""
    tasks, _ = make_tasks(batch, seed)
    inp, tgt = np.asarray(tasks.input), np.asarray(tasks.target)
    matches = (inp == tgt).sum(axis=(1, 2), dtype=np.int32)
    states = EnvState(working=inp, input=inp, target=tgt, step=np.zeros(batch, np.int32),
                      done=np.zeros(batch, bool), matches=matches, input_matches=matches)
    key_data = np.random.default_rng(seed).integers(0, 2**32, size=(batch, 2), dtype=np.uint32)
    return jax.device_put(states), jax.random.wrap_key_data(key_data)


# --------------------------------------------------------------------------- checks + timing


def check_scripted_episode() -> dict:
    """A wrong fill, an undo, then the solving bbox fill: the episode ends at similarity 1 well
    before ``max_steps``, the rewards sum to the similarity gained, and the env auto-resets."""
    tasks, sol = make_tasks(1, seed=SEED + 1)
    task = Task(tasks.input[0], tasks.target[0])
    r0, c0, r1, c1, colour = (int(x) for x in sol[0])
    state = reset(jax.random.key(SEED), task)
    script = stack_actions([
        bbox(r0, c0, r1, c1, (colour + 1) % N_COLOURS),  # right place, wrong colour
        bbox(r1, c1, r0, c0, 0, COPY_INPUT),              # undo it (corners given reversed)
        bbox(r0, c0, r1, c1, colour),                     # solve
        bbox(0, 0, GRID - 1, GRID - 1, 0, RESET),         # acts on the fresh episode
    ])
    final, traj = rollout_actions(state, script)
    rewards, dones = np.asarray(traj.reward), np.asarray(traj.done).tolist()
    sim0 = int(state.matches) / N_CELLS

    if sim0 >= 1.0:
        raise AssertionError("the scripted task is already solved at reset")
    if dones != [False, False, True, False]:
        raise AssertionError(f"done flags {dones}: the solving fill should end the episode")
    if not np.isclose(rewards[:3].sum(), 1.0 - sim0, atol=1e-6) or rewards[1] != -rewards[0]:
        raise AssertionError(f"rewards {rewards.tolist()} do not sum to the similarity gained "
                             f"{1.0 - sim0}")
    if not (np.array_equal(final.working, task.input) and int(final.step) == 1
            and int(final.matches) == int(state.matches) and rewards[3] == 0.0):
        raise AssertionError("the env did not auto-reset to the task's input after solving it")
    return {"similarity_start": sim0, "episode_return": float(rewards[:3].sum())}


def check_random_rollout(final: EnvState, stats: RolloutStats, num_steps: int) -> int:
    """Invariants of a random-policy rollout of ``num_steps`` (``MAX_STEPS <= num_steps <
    2 * MAX_STEPS``) from fresh episodes: the cached match counts equal the grids', the current
    episode's rewards sum to the similarity it gained, every env finished an episode, and step
    counters stayed below ``max_steps``.  Returns the number of episodes that ended."""
    working, target = np.asarray(final.working), np.asarray(final.target)
    matches, input_matches = np.asarray(final.matches), np.asarray(final.input_matches)
    if not np.array_equal(matches, (working == target).sum(axis=(1, 2))):
        raise AssertionError("the cached match count drifted from the grid")
    gained = (matches - input_matches) / N_CELLS
    if not np.allclose(stats.episode_return, gained, atol=1e-4):
        raise AssertionError("an episode's rewards do not sum to the similarity it gained")
    episodes, steps = np.asarray(stats.episodes), np.asarray(final.step)
    if not (episodes >= 1).all() or not (steps < MAX_STEPS).all():
        raise AssertionError(f"an episode outlived max_steps={MAX_STEPS}: {episodes.min()} "
                             f"episodes ended in {num_steps} steps, step counter {steps.max()}")
    if not (steps[episodes == 1] == num_steps - MAX_STEPS).all():
        raise AssertionError("episodes that timed out did not restart at step 0")
    return int(episodes.sum())


def main() -> dict:
    from jaxrun import bench

    episode = check_scripted_episode()

    def bbox_rollout(state, key):
        return env_rollout(state, key, ROLLOUT_STEPS, "bbox")

    scaling = bench.batch_scaling(bbox_rollout, make_batch, sizes=BATCH_SIZES, min_time=0.1)
    rates = {row.size: row.items_per_s * ROLLOUT_STEPS for row in scaling.rows}
    print(f"ARC-like 30x30 env: {ROLLOUT_STEPS}-step rollouts (lax.scan, vmap over envs), "
          f"random bbox actions, auto-reset")
    print(f"{'batch':>6} {'s / rollout':>12} {'env-steps/s':>14}")
    for row in scaling.rows:
        print(f"{row.size:>6} {row.time:>12.5f} {rates[row.size]:>14,.0f}")

    big = BATCH_SIZES[-1]
    states, keys = make_batch(big)
    episodes = 0
    for kind in ("point", "mask"):
        run = jax.jit(jax.vmap(functools.partial(env_rollout, num_steps=ROLLOUT_STEPS, kind=kind)))
        episodes += check_random_rollout(*run(states, keys), ROLLOUT_STEPS)  # compiles; reused below
        m = bench.measure(run, states, keys, min_time=0.1, peaks=False, name=f"rollout[{kind}]")
        rates[kind] = big * ROLLOUT_STEPS / m.steady.median
        print(f"{kind:>6} actions at batch {big}: {rates[kind]:,.0f} env-steps/s")
    print(f"scripted episode: similarity {episode['similarity_start']:.3f} -> 1.000 in 3 steps, "
          f"then auto-reset; {episodes} random-policy episodes ended within max_steps")

    metrics = {
        **{f"bbox_env_steps_per_s_b{b}": float(rates[b]) for b in BATCH_SIZES},
        "point_env_steps_per_s_b1024": float(rates["point"]),
        "mask_env_steps_per_s_b1024": float(rates["mask"]),
        "rollout_steps": ROLLOUT_STEPS,
        "random_episodes_ended": episodes,
        **episode,
    }
    record(**metrics)
    return metrics


if __name__ == "__main__":
    main()
