"""Discrete active-inference agents navigating a noisy grid, batched with vmap and lax.scan.

Generative model (the agents' model equals the environment here):

* ``A[o, s] = P(o | s)``        likelihood: the agent sees its own cell, blurred to neighbours
* ``B[s', s, u] = P(s' | s, u)`` transitions: moves up/down/left/right/stay, which can slip
* ``C[o]``                      log-preferences over observations, peaked at the goal cell
* ``D[s]``                      prior over the start state (uniform: agents are lost)

Each step the agent does Bayesian state inference, ``q(s_t) ∝ A[o_t, :] * (B[:, :, u] q(s_{t-1}))``,
scores every short policy ``π`` (all action sequences of length ``POLICY_DEPTH``) by its expected
free energy

    G(π) = Σ_τ  KL[ q(o_τ | π) || σ(C) ]  +  E_{q(s_τ | π)} H[ A[:, s_τ] ]
                 (risk)                      (ambiguity)

and samples a policy from ``q(π) = σ(-γ G)``, taking its first action.  Because C is graded
(log-preference falls off linearly with distance to the goal), lookahead of two steps already
gives a direction everywhere on the grid; a sparse C would need policies as long as the grid's
diameter.  With γ = 0 the policy posterior is uniform, so the same code gives the random-policy
baseline.

Run as ``python general_model.py``.
"""

from __future__ import annotations

import functools
import itertools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

try:
    from jaxrun import record
except ImportError:  # running outside jaxrun: recording is a no-op
    def record(**metrics):
        return None


GRID_SIZE = 5
N_STEPS = 15
POLICY_DEPTH = 2
PRECISION = 16.0
SUCCESS_THRESHOLD = 0.90
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1), (0, 0))  # up, down, left, right, stay
EPS = 1e-16


class GenerativeModel(NamedTuple):
    """A (obs x states), B (states x states x actions), C (obs,), D (states,)."""

    A: jax.Array
    B: jax.Array
    C: jax.Array
    D: jax.Array


def _neighbours(size: int, s: int) -> list[int]:
    r, c = divmod(s, size)
    out = []
    for dr, dc in MOVES[:4]:
        r2, c2 = r + dr, c + dc
        if 0 <= r2 < size and 0 <= c2 < size:
            out.append(r2 * size + c2)
    return out


def grid_model(size: int = GRID_SIZE, move_prob: float = 0.9, obs_accuracy: float = 0.8,
               preference_slope: float = 1.0) -> tuple[GenerativeModel, int]:
    """Build the grid's generative model; the goal is the bottom-right corner.

    A: the true cell is observed with ``obs_accuracy``, the rest of the mass is spread over
    the 4-neighbours, so observations are informative but not exact.
    B: an intended move succeeds with ``move_prob`` (else the agent stays); walls block.
    C: log-preference ``-preference_slope * manhattan(o, goal)``.
    """
    n = size * size
    goal = n - 1
    A = np.zeros((n, n))
    for s in range(n):
        nb = _neighbours(size, s)
        A[s, s] = obs_accuracy
        A[nb, s] = (1.0 - obs_accuracy) / len(nb)
    B = np.zeros((n, n, len(MOVES)))
    for s in range(n):
        r, c = divmod(s, size)
        for u, (dr, dc) in enumerate(MOVES):
            r2, c2 = min(max(r + dr, 0), size - 1), min(max(c + dc, 0), size - 1)
            B[r2 * size + c2, s, u] += move_prob
            B[s, s, u] += 1.0 - move_prob
    rows, cols = np.divmod(np.arange(n), size)
    C = -preference_slope * (np.abs(rows - (size - 1)) + np.abs(cols - (size - 1)))
    D = np.full(n, 1.0 / n)
    model = GenerativeModel(*(jnp.asarray(x, jnp.float32) for x in (A, B, C, D)))
    return model, goal


def all_policies(n_actions: int, depth: int) -> jax.Array:
    """Every action sequence of length ``depth``: shape (n_actions**depth, depth)."""
    return jnp.array(list(itertools.product(range(n_actions), repeat=depth)), dtype=jnp.int32)


# --------------------------------------------------------------------------- inference


def infer_states(A: jax.Array, prior: jax.Array, obs: jax.Array) -> jax.Array:
    """Exact posterior over states: Bayes' rule with the likelihood row of the observation."""
    unnorm = A[obs] * prior
    return unnorm / jnp.maximum(unnorm.sum(), EPS)


def entropy_of_columns(A: jax.Array) -> jax.Array:
    """H[A[:, s]] for every state: how ambiguous each state's observations are."""
    return -jnp.sum(A * jnp.log(A + EPS), axis=0)


def expected_free_energy(model: GenerativeModel, qs: jax.Array, policies: jax.Array) -> jax.Array:
    """G(π) for each policy: summed risk + ambiguity over the policy's future steps."""
    log_pref = jax.nn.log_softmax(model.C)
    ambiguity = entropy_of_columns(model.A)

    def one_policy(policy):
        def step(q, u):
            q = model.B[:, :, u] @ q
            qo = model.A @ q
            risk = jnp.sum(qo * (jnp.log(qo + EPS) - log_pref))
            return q, risk + ambiguity @ q

        _, g = jax.lax.scan(step, qs, policy)
        return g.sum()

    return jax.vmap(one_policy)(policies)


def select_action(key, G: jax.Array, precision: float, policies: jax.Array) -> jax.Array:
    """Sample π ~ softmax(-precision * G) and return its first action."""
    idx = jax.random.categorical(key, -precision * G)
    return policies[idx, 0]


# --------------------------------------------------------------------------- simulation


def run_episode(key, model: GenerativeModel, start: jax.Array, goal: int, n_steps: int,
                precision: float, policies: jax.Array) -> dict:
    """One agent for ``n_steps`` actions in the environment defined by the same model.

    Returns whether the true state hit the goal and the first step at which it did
    (``n_steps + 1`` if never).
    """
    never = n_steps + 1

    def step(carry, t):
        key, s, prior, first_hit = carry
        key, k_obs, k_act, k_env = jax.random.split(key, 4)
        first_hit = jnp.where((s == goal) & (first_hit == never), t, first_hit)
        obs = jax.random.categorical(k_obs, jnp.log(model.A[:, s] + EPS))
        qs = infer_states(model.A, prior, obs)
        u = select_action(k_act, expected_free_energy(model, qs, policies), precision, policies)
        s_next = jax.random.categorical(k_env, jnp.log(model.B[:, s, u] + EPS))
        return (key, s_next, model.B[:, :, u] @ qs, first_hit), None

    init = (key, start, model.D, jnp.int32(never))
    (_, s_final, _, first_hit), _ = jax.lax.scan(step, init, jnp.arange(n_steps))
    first_hit = jnp.where((s_final == goal) & (first_hit == never), n_steps, first_hit)
    return {"success": first_hit <= n_steps, "steps_to_goal": first_hit}


@functools.partial(jax.jit, static_argnames=("n_agents", "n_steps", "goal"))
def simulate(key, model: GenerativeModel, goal: int, n_agents: int, n_steps: int,
             precision: float, policies: jax.Array) -> dict:
    """vmap ``run_episode`` over agents that start at uniformly random non-goal cells."""
    k_start, k_run = jax.random.split(key)
    n_states = model.D.shape[0]
    # draw from the n-1 non-goal cells, then skip over the goal index
    starts = jax.random.randint(k_start, (n_agents,), 0, n_states - 1)
    starts = starts + (starts >= goal)
    keys = jax.random.split(k_run, n_agents)
    return jax.vmap(run_episode, in_axes=(0, None, 0, None, None, None, None))(
        keys, model, starts, goal, n_steps, precision, policies)


def summarise(out: dict) -> tuple[float, float]:
    """Success rate and mean first-hit step over successful agents."""
    success = np.asarray(out["success"])
    steps = np.asarray(out["steps_to_goal"])
    mean_steps = float(steps[success].mean()) if success.any() else float("nan")
    return float(success.mean()), mean_steps


def run_agents(n_agents: int = 256, n_steps: int = N_STEPS, seed: int = 0,
               precision: float = PRECISION) -> dict:
    """Active-inference agents and a random-policy baseline on identical start states.

    The baseline is the same agent with precision 0 (uniform policy posterior, hence a
    uniformly random first action) and the same random key, so only the choice rule differs.
    """
    model, goal = grid_model()
    policies = all_policies(len(MOVES), POLICY_DEPTH)
    key = jax.random.PRNGKey(seed)
    run = functools.partial(simulate, key, model, goal, n_agents, n_steps, policies=policies)

    jax.block_until_ready(run(precision=precision))  # compile outside the timing
    t0 = time.perf_counter()
    agents = jax.block_until_ready(run(precision=precision))
    elapsed = time.perf_counter() - t0
    baseline = run(precision=0.0)

    success_rate, mean_steps = summarise(agents)
    random_rate, random_steps = summarise(baseline)
    return {
        "success_rate": success_rate,
        "random_policy_success_rate": random_rate,
        "mean_steps_to_goal": mean_steps,
        "random_mean_steps_to_goal": random_steps,
        "agent_steps_per_s": n_agents * n_steps / elapsed,
        "n_agents": n_agents,
        "n_steps": n_steps,
    }


def main() -> dict:
    res = run_agents(n_agents=256, n_steps=N_STEPS, seed=0)
    print(f"{res['n_agents']} active-inference agents, {GRID_SIZE}x{GRID_SIZE} noisy grid, "
          f"goal in a corner, {res['n_steps']} steps, policies of depth {POLICY_DEPTH}")
    print(f"  success rate        {res['success_rate']:.3f} "
          f"(mean {res['mean_steps_to_goal']:.2f} steps to goal)")
    print(f"  random-policy rate  {res['random_policy_success_rate']:.3f}")
    print(f"  throughput          {res['agent_steps_per_s']:,.0f} agent-steps/s")
    if res["success_rate"] < SUCCESS_THRESHOLD:
        raise AssertionError(f"active-inference success rate {res['success_rate']:.3f} "
                             f"< {SUCCESS_THRESHOLD}")
    if res["random_policy_success_rate"] >= SUCCESS_THRESHOLD:
        raise AssertionError("random policy also reaches the goal: the task is too easy "
                             f"({res['random_policy_success_rate']:.3f})")
    record(success_rate=res["success_rate"],
           random_policy_success_rate=res["random_policy_success_rate"],
           mean_steps_to_goal=res["mean_steps_to_goal"],
           agent_steps_per_s=float(res["agent_steps_per_s"]))
    return res


if __name__ == "__main__":
    main()
