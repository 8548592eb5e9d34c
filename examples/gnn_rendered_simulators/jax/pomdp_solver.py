"""Point-based value iteration (PBVI) for small POMDPs, checked against an exact solver.

A finite-horizon POMDP value function is piecewise-linear and convex in the belief:
``V_t(b) = max_k alpha_k . b`` for a finite set of alpha vectors.  One Bellman backup
at a belief ``b`` is

    g[a, o, k, s] = sum_s' T[a, s, s'] Z[a, s', o] alpha_k[s']      (projection)
    alpha_a^b     = R[a] + discount * sum_o g[a, o, argmax_k b.g[a, o, k], :]
    backup(b)     = alpha_{a*}^b  with  a* = argmax_a alpha_a^b . b

PBVI applies this backup at a fixed set of belief points only (vmapped, and sharded over
devices when more than one is visible), giving a lower bound on the optimal value that is
exact at a belief whenever the vectors it needs were kept.  On the 2-state Tiger problem a
dense belief grid keeps all of them, so PBVI is checked against an exact finite-horizon
solver (full alpha-vector enumeration with exact pruning on the 1-D belief simplex), which is
itself checked against a direct expectimax search over the belief tree.

Run as ``python pomdp_solver.py``.
"""

from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

try:
    from jaxrun import record
except ImportError:  # running outside jaxrun: recording is a no-op
    def record(**metrics):
        return None


TIGER_DISCOUNT = 0.95
TIGER_HORIZON = 10
TIGER_CHECK_BELIEFS = (0.5, 0.1, 0.25, 0.4, 0.65, 0.8, 0.97)
TOLERANCE = 1e-3
COARSE_GRID = 11


class POMDP(NamedTuple):
    """Tabular POMDP.

    T[a, s, s'] transition probabilities, Z[a, s', o] observation probabilities after
    acting, R[a, s] expected immediate reward, discount scalar.
    """

    T: np.ndarray
    Z: np.ndarray
    R: np.ndarray
    discount: float


# --------------------------------------------------------------------------- problems


def tiger_pomdp(accuracy: float = 0.85, discount: float = TIGER_DISCOUNT) -> POMDP:
    """Classic Tiger problem (Kaelbling, Littman & Cassandra 1998).

    States: 0 = tiger-left, 1 = tiger-right.  Actions: 0 = listen, 1 = open-left,
    2 = open-right.  Observations: 0 = hear-left, 1 = hear-right.  Opening a door ends the
    trial and the tiger is re-placed uniformly, so the belief resets to (0.5, 0.5) and the
    observation after opening is uninformative.
    """
    uniform = np.full((2, 2), 0.5)
    T = np.stack([np.eye(2), uniform, uniform])
    hear = np.array([[accuracy, 1 - accuracy], [1 - accuracy, accuracy]])
    Z = np.stack([hear, uniform, uniform])
    R = np.array([[-1.0, -1.0], [-100.0, 10.0], [10.0, -100.0]])
    return POMDP(T, Z, R, discount)


def gridworld_pomdp(size: int = 3, move_prob: float = 0.8, obs_accuracy: float = 0.6,
                    discount: float = 0.95) -> POMDP:
    """Noisy navigation on a ``size x size`` grid with an absorbing goal in the far corner.

    Actions N, S, E, W succeed with ``move_prob`` (else the agent stays; walls block).
    Every step outside the goal costs -1, the goal is free and absorbing, so the value is
    minus the expected discounted time to reach the goal.  The agent observes its cell
    correctly with ``obs_accuracy``; otherwise a uniformly random other cell.
    """
    n = size * size
    goal = n - 1
    moves = [(-1, 0), (1, 0), (0, 1), (0, -1)]
    T = np.zeros((len(moves), n, n))
    for a, (dr, dc) in enumerate(moves):
        for s in range(n):
            if s == goal:
                T[a, s, s] = 1.0
                continue
            r, c = divmod(s, size)
            r2, c2 = min(max(r + dr, 0), size - 1), min(max(c + dc, 0), size - 1)
            T[a, s, r2 * size + c2] += move_prob
            T[a, s, s] += 1.0 - move_prob
    wrong = (1.0 - obs_accuracy) / (n - 1)
    obs = np.full((n, n), wrong) + np.eye(n) * (obs_accuracy - wrong)
    Z = np.broadcast_to(obs, (len(moves), n, n)).copy()
    R = np.where(np.arange(n) == goal, 0.0, -1.0)[None, :].repeat(len(moves), axis=0)
    return POMDP(T, Z, R, discount)


# --------------------------------------------------------------------------- PBVI (JAX)

# The values are checked against an exact solution to 1e-3: on a GPU, float32 products at JAX's
# default precision use TF32 (10-bit mantissa), which was measured off by 6e-3 on an H100.
EXACT = jax.lax.Precision.HIGHEST


def project(model: POMDP, alphas: jax.Array) -> jax.Array:
    """g[a, o, k, s]: value of alpha_k one step later, given action a and observation o."""
    return jnp.einsum("ast,ato,kt->aoks", model.T, model.Z, alphas, precision=EXACT)


def point_backup(belief: jax.Array, g: jax.Array, R: jax.Array, discount: float):
    """Exact Bellman backup at one belief, restricted to the current alpha set.

    For each (a, o) the best successor vector is the one maximising b.g[a,o,k]; this is
    the standard PBVI trick that avoids enumerating |alphas|^|O| combinations.
    """
    scores = jnp.einsum("aoks,s->aok", g, belief, precision=EXACT)
    best = jnp.argmax(scores, axis=-1)
    chosen = jnp.take_along_axis(g, best[:, :, None, None], axis=2)[:, :, 0, :]
    alpha_per_action = R + discount * chosen.sum(axis=1)
    action = jnp.argmax(jnp.matmul(alpha_per_action, belief, precision=EXACT))
    return alpha_per_action[action], action


def belief_sharding() -> NamedSharding | None:
    """Shard belief points over all devices when there is more than one, else None."""
    devices = jax.devices()
    if len(devices) < 2:
        return None
    return NamedSharding(Mesh(np.array(devices), ("beliefs",)), PartitionSpec("beliefs"))


def place_beliefs(beliefs: np.ndarray, sharding: NamedSharding | None) -> jax.Array:
    """Pad the belief set so it splits evenly over devices, then distribute it.

    Padding repeats the last belief: a duplicate point only duplicates an alpha vector,
    which leaves max_k alpha_k . b unchanged.
    """
    if sharding is None:
        return jnp.asarray(beliefs, dtype=jnp.float32)
    n_dev = sharding.mesh.size
    pad = (-len(beliefs)) % n_dev
    padded = np.concatenate([beliefs, np.repeat(beliefs[-1:], pad, axis=0)])
    return jax.device_put(padded.astype(np.float32), sharding)


@functools.partial(jax.jit, static_argnames=("horizon", "sharding"))
def _pbvi(T, Z, R, discount, beliefs, horizon: int, sharding=None):
    """Run ``horizon`` PBVI backups starting from the zero value function."""
    model = POMDP(T, Z, R, discount)
    backup_all = jax.vmap(point_backup, in_axes=(0, None, None, None))

    def step(_, alphas):
        new_alphas, _ = backup_all(beliefs, project(model, alphas), R, discount)
        if sharding is not None:
            # keep the new vectors on the device that owns their belief point; XLA
            # all-gathers them for the next projection
            new_alphas = jax.lax.with_sharding_constraint(new_alphas, sharding)
        return new_alphas

    alphas = jnp.zeros_like(beliefs)
    return jax.lax.fori_loop(0, horizon, step, alphas)


def pbvi(model: POMDP, beliefs: np.ndarray, horizon: int) -> jax.Array:
    """Alpha vectors (one per belief point, possibly padded) after ``horizon`` backups."""
    sharding = belief_sharding()
    placed = place_beliefs(np.asarray(beliefs), sharding)
    args = [jnp.asarray(x, dtype=jnp.float32) for x in (model.T, model.Z, model.R)]
    return _pbvi(*args, jnp.float32(model.discount), placed, horizon=horizon,
                 sharding=sharding)


def value_at(alphas, beliefs) -> np.ndarray:
    """V(b) = max_k alpha_k . b for each belief row."""
    return np.max(np.asarray(beliefs, np.float64) @ np.asarray(alphas, np.float64).T, axis=1)


def tiger_belief_vectors(p_left) -> np.ndarray:
    """Scalar beliefs P(tiger-left) -> rows (P(left), P(right))."""
    p = np.atleast_1d(np.asarray(p_left, dtype=np.float64))
    return np.stack([p, 1.0 - p], axis=1)


def solve_tiger_pbvi(horizon: int = TIGER_HORIZON, n_beliefs: int = 1001,
                     beliefs=TIGER_CHECK_BELIEFS) -> dict:
    """PBVI on Tiger with a uniform grid over P(tiger-left) in [0, 1].

    Returns the alpha vectors and the value at the query ``beliefs`` (P(tiger-left)).
    """
    grid = tiger_belief_vectors(np.linspace(0.0, 1.0, n_beliefs))
    alphas = pbvi(tiger_pomdp(), grid, horizon).block_until_ready()
    return {"alphas": alphas, "values": value_at(alphas, tiger_belief_vectors(beliefs))}


# --------------------------------------------------------------------------- exact solver


def prune_on_segment(alphas: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Exact pruning for 2-state POMDPs: keep the upper envelope on p in [0, 1].

    Each vector is the line f(p) = c + m p with p = P(state 0), c = alpha[1] and
    m = alpha[0] - alpha[1].  Sorted by slope, the upper envelope is a convex hull
    (the "convex hull trick"): a line is dropped when its two neighbours meet at or
    before the point where it would take over.  Finally only lines whose stretch of the
    envelope overlaps [0, 1] with positive length are kept; no other vector is ever the
    unique maximiser at a belief, so the value function is unchanged.
    """
    if len(alphas) <= 1:
        return alphas
    c = alphas[:, 1]
    m = alphas[:, 0] - alphas[:, 1]
    order = np.lexsort((c, m))  # by slope, then intercept
    hull: list[int] = []
    for k in order:
        if hull and abs(m[hull[-1]] - m[k]) <= tol:
            # parallel lines: only the higher one can ever be on the envelope
            if c[k] <= c[hull[-1]]:
                continue
            hull.pop()
        while len(hull) >= 2:
            i, j = hull[-2], hull[-1]
            # j is useless if i and k intersect no later than i and j do
            if (c[i] - c[k]) * (m[j] - m[i]) <= (c[i] - c[j]) * (m[k] - m[i]) + tol:
                hull.pop()
            else:
                break
        hull.append(k)
    hull_arr = np.array(hull)
    hc, hm = c[hull_arr], m[hull_arr]
    cross = (hc[:-1] - hc[1:]) / (hm[1:] - hm[:-1])  # where line i+1 takes over
    left = np.maximum(np.concatenate([[-np.inf], cross]), 0.0)
    right = np.minimum(np.concatenate([cross, [np.inf]]), 1.0)
    return alphas[hull_arr[right - left > tol]]


def exact_backup(model: POMDP, alphas: np.ndarray, prune=prune_on_segment) -> np.ndarray:
    """Full Bellman backup of an alpha set by incremental pruning (Cassandra et al. 1997).

    For each action the new set is R[a] + discount * (G_{a,o1} (+) G_{a,o2} (+) ...),
    where (+) is the cross-sum; pruning after every cross-sum keeps sets small without
    changing the result, because pruning commutes with the upper envelope.
    """
    g = np.einsum("ast,ato,kt->aoks", model.T, model.Z, alphas)
    per_action = []
    for a in range(g.shape[0]):
        acc = prune(model.discount * g[a, 0])
        for o in range(1, g.shape[1]):
            nxt = prune(model.discount * g[a, o])
            acc = prune((acc[:, None, :] + nxt[None, :, :]).reshape(-1, acc.shape[1]))
        per_action.append(acc + model.R[a])
    return prune(np.concatenate(per_action))


def exact_tiger_alphas(horizon: int, model: POMDP | None = None) -> list[np.ndarray]:
    """Exact alpha sets for horizons 0..horizon (horizon 0 is the zero function)."""
    model = model or tiger_pomdp()
    sets = [np.zeros((1, 2))]
    for _ in range(horizon):
        sets.append(exact_backup(model, sets[-1]))
    return sets


def exact_tiger_value(horizon: int, beliefs) -> np.ndarray:
    """Optimal ``horizon``-step discounted Tiger value at beliefs P(tiger-left)."""
    return value_at(exact_tiger_alphas(horizon)[-1], tiger_belief_vectors(beliefs))


def tiger_value_by_search(horizon: int, p_left: float, model: POMDP | None = None) -> float:
    """Independent check: expectimax over the belief tree, memoised on (belief, steps).

    V_h(b) = max_a [ b.R[a] + discount * sum_o P(o | b, a) V_{h-1}(b^{a,o}) ].
    """
    model = model or tiger_pomdp()

    @functools.lru_cache(maxsize=None)
    def value(p: float, h: int) -> float:
        if h == 0:
            return 0.0
        b = np.array([p, 1.0 - p])
        best = -np.inf
        for a in range(model.R.shape[0]):
            total = b @ model.R[a]
            predicted = b @ model.T[a]
            for o in range(model.Z.shape[2]):
                joint = predicted * model.Z[a, :, o]
                p_o = joint.sum()
                if p_o > 0:
                    total += model.discount * p_o * value(round(joint[0] / p_o, 12), h - 1)
            best = max(best, total)
        return best

    return value(round(float(p_left), 12), horizon)


# --------------------------------------------------------------------------- gridworld


def sample_beliefs(n_states: int, n_random: int, seed: int) -> np.ndarray:
    """Simplex vertices, the uniform belief, and Dirichlet(1) samples (fixed seed)."""
    rng = np.random.default_rng(seed)
    uniform = np.full((1, n_states), 1.0 / n_states)
    return np.concatenate([np.eye(n_states), uniform, rng.dirichlet(np.ones(n_states), n_random)])


def mdp_value(model: POMDP, horizon: int) -> np.ndarray:
    """Fully observable finite-horizon value: an upper bound on any POMDP value."""
    v = np.zeros(model.R.shape[1])
    for _ in range(horizon):
        v = np.max(model.R + model.discount * model.T @ v, axis=0)
    return v


def blind_value(model: POMDP, horizon: int) -> np.ndarray:
    """Best open-loop 'repeat one action' value per state: a lower bound on the POMDP value."""
    vals = []
    for a in range(model.R.shape[0]):
        v = np.zeros(model.R.shape[1])
        for _ in range(horizon):
            v = model.R[a] + model.discount * model.T[a] @ v
        vals.append(v)
    return np.stack(vals)


def solve_gridworld(horizon: int = 30, n_random: int = 246, seed: int = 0) -> dict:
    """PBVI on the noisy gridworld, bracketed by blind-policy and MDP values."""
    model = gridworld_pomdp()
    n = model.R.shape[1]
    beliefs = sample_beliefs(n, n_random, seed)
    alphas = pbvi(model, beliefs, horizon).block_until_ready()
    start = np.full((1, n), 1.0 / (n - 1))
    start[0, -1] = 0.0  # start anywhere except the goal
    return {
        "value": float(value_at(alphas, start)[0]),
        "upper": float(start[0] @ mdp_value(model, horizon)),
        "lower": float(np.max(blind_value(model, horizon) @ start[0])),
        "n_beliefs": len(beliefs),
    }


# --------------------------------------------------------------------------- main


def time_backups(horizon: int, n_beliefs: int) -> float:
    """Point backups per second on Tiger, timed after compilation."""
    solve_tiger_pbvi(horizon, n_beliefs)  # compile
    t0 = time.perf_counter()
    solve_tiger_pbvi(horizon, n_beliefs)
    return horizon * n_beliefs / (time.perf_counter() - t0)


def main() -> dict:
    horizon, n_beliefs = TIGER_HORIZON, 1001
    checks = np.array(TIGER_CHECK_BELIEFS)
    pbvi_vals = solve_tiger_pbvi(horizon, n_beliefs, checks)["values"]
    exact_vals = exact_tiger_value(horizon, checks)
    search_vals = np.array([tiger_value_by_search(horizon, p) for p in checks])
    abs_error = float(np.max(np.abs(pbvi_vals - exact_vals)))
    # a coarse grid must NOT match: shows the comparison can fail (PBVI is only a lower bound)
    coarse_vals = solve_tiger_pbvi(horizon, COARSE_GRID, checks)["values"]
    coarse_error = float(np.max(np.abs(coarse_vals - exact_vals)))
    exact_vs_search = float(np.max(np.abs(exact_vals - search_vals)))
    n_exact = len(exact_tiger_alphas(horizon)[-1])

    grid = solve_gridworld()
    rate = time_backups(horizon, n_beliefs)

    print(f"devices: {len(jax.devices())} ({'sharded' if belief_sharding() else 'vmap'})")
    print(f"Tiger, horizon {horizon}, discount {TIGER_DISCOUNT}, {n_beliefs} belief points")
    for p, v_pb, v_ex in zip(checks, pbvi_vals, exact_vals):
        print(f"  P(left)={p:4.2f}  PBVI {v_pb:9.4f}  exact {v_ex:9.4f}")
    print(f"  max |PBVI - exact| = {abs_error:.2e}; exact vs tree search = {exact_vs_search:.2e}; "
          f"{n_exact} exact alpha vectors")
    print(f"  (a coarse {COARSE_GRID}-point grid is off by {coarse_error:.3f}: PBVI is a lower bound)")
    print(f"Gridworld 3x3, horizon 30: PBVI value {grid['value']:.4f} "
          f"(blind {grid['lower']:.4f} <= . <= MDP {grid['upper']:.4f})")
    print(f"PBVI throughput: {rate:,.0f} point backups/s")

    if exact_vs_search > 1e-6:
        raise AssertionError(f"exact alpha-vector solver disagrees with tree search by {exact_vs_search}")
    if abs_error > TOLERANCE:
        raise AssertionError(f"PBVI Tiger value off the exact value by {abs_error} > {TOLERANCE}")
    if not grid["lower"] - 1e-4 <= grid["value"] <= grid["upper"] + 1e-4:
        raise AssertionError(f"gridworld PBVI value {grid['value']} outside bounds "
                             f"[{grid['lower']}, {grid['upper']}]")

    metrics = {
        "tiger_value_pbvi": float(pbvi_vals[0]),
        "tiger_value_exact": float(exact_vals[0]),
        "abs_error": abs_error,
        "coarse_grid_abs_error": coarse_error,
        "tiger_horizon": horizon,
        "gridworld_value": grid["value"],
        "gridworld_mdp_bound": grid["upper"],
        "backups_per_s": float(rate),
        "n_devices": len(jax.devices()),
    }
    record(**metrics)
    return metrics


if __name__ == "__main__":
    main()
