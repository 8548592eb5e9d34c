"""Active-inference agents that learn their likelihood A by Dirichlet updates.

Same grid task as ``general_model.py`` (self-contained here): A[o, s] = P(o | s) is a noisy but
informative view of the agent's cell, B[s', s, u] are slippery moves, C is a log-preference
peaked at the goal corner.  The agents know B and C but not A: each holds a Dirichlet
concentration ``pA`` over every column of A, starting flat (all entries equal), and uses its
posterior mean ``Â = pA / Σ_o pA`` for state inference and expected free energy.  The
expected free energy gains the standard novelty term (expected information gain about A),
so early episodes are curiosity-driven exploration and later ones goal-directed.

After every observation the concentration gets the expected count of (o, s) pairs,

    pA  +=  onehot(o_t) ⊗ q(s_t),

which is the variational Bayes update for a Dirichlet prior on a categorical likelihood.
Each episode the agent is told its (random) start cell, ``D = onehot(start)``: with a flat A
nothing else distinguishes the states (any relabelling of states explains the data equally
well), so a known start plus known B is what anchors the learned mapping.  pA persists across
episodes; we scan over episodes and time steps and vmap over agents.

The figure of merit is the likelihood error: the total-variation distance between each
learned column Â[:, s] and the true column A[:, s], averaged over states and agents.

Run as ``python combined_model.py``.
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
N_AGENTS = 256
N_EPISODES = 20
N_STEPS = 15
POLICY_DEPTH = 2
PRECISION = 16.0
PRIOR_CONCENTRATION = 0.03
REQUIRED_ERROR_RATIO = 0.5
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1), (0, 0))  # up, down, left, right, stay
EPS = 1e-16


class Task(NamedTuple):
    """True likelihood A, transitions B, log-preferences C (shapes as in general_model)."""

    A: jax.Array
    B: jax.Array
    C: jax.Array


def grid_task(size: int = GRID_SIZE, move_prob: float = 0.9, obs_accuracy: float = 0.8,
              preference_slope: float = 1.0) -> tuple[Task, int]:
    """Noisy grid with the goal in the bottom-right corner (see general_model.grid_model)."""
    n = size * size
    rows, cols = np.divmod(np.arange(n), size)
    A = np.zeros((n, n))
    B = np.zeros((n, n, len(MOVES)))
    for s in range(n):
        r, c = rows[s], cols[s]
        nb = [(r + dr) * size + (c + dc) for dr, dc in MOVES[:4]
              if 0 <= r + dr < size and 0 <= c + dc < size]
        A[s, s] = obs_accuracy
        A[nb, s] = (1.0 - obs_accuracy) / len(nb)
        for u, (dr, dc) in enumerate(MOVES):
            r2, c2 = min(max(r + dr, 0), size - 1), min(max(c + dc, 0), size - 1)
            B[r2 * size + c2, s, u] += move_prob
            B[s, s, u] += 1.0 - move_prob
    C = -preference_slope * (np.abs(rows - (size - 1)) + np.abs(cols - (size - 1)))
    return Task(*(jnp.asarray(x, jnp.float32) for x in (A, B, C))), n - 1


def all_policies(n_actions: int, depth: int) -> jax.Array:
    """Every action sequence of length ``depth``."""
    return jnp.array(list(itertools.product(range(n_actions), repeat=depth)), dtype=jnp.int32)


# --------------------------------------------------------------------------- agent


def normalise_columns(pA: jax.Array) -> jax.Array:
    """Posterior-mean likelihood Â[o, s] = pA[o, s] / Σ_o pA[o, s]."""
    return pA / pA.sum(axis=0, keepdims=True)


def infer_states(A: jax.Array, prior: jax.Array, obs: jax.Array) -> jax.Array:
    """q(s) ∝ A[o, s] prior(s)."""
    unnorm = A[obs] * prior
    return unnorm / jnp.maximum(unnorm.sum(), EPS)


def novelty_weights(pA: jax.Array) -> jax.Array:
    """W = ½ (1/pA − 1/Σ_o pA): expected information gain about A per (o, s) count.

    First-order approximation of the expected KL between Dirichlet posteriors before and
    after one more (o, s) count (Friston et al. 2017); large where counts are small.
    """
    return 0.5 * (1.0 / pA - 1.0 / pA.sum(axis=0, keepdims=True))


def expected_free_energy(pA, B, C, qs, policies) -> jax.Array:
    """G(π) = Σ_τ risk + ambiguity − novelty, using the agent's current beliefs about A.

    risk = KL[q(o_τ|π) || σ(C)] and ambiguity = E_q(s_τ|π) H[Â[:, s]] as in general_model.
    The novelty (parameter information gain) term is what makes a learner explore: without it
    a flat Â looks maximally ambiguous everywhere except cells already visited, so the agent
    would rather stay put than learn.
    """
    A = normalise_columns(pA)
    W = novelty_weights(pA)
    log_pref = jax.nn.log_softmax(C)
    ambiguity = -jnp.sum(A * jnp.log(A + EPS), axis=0)

    def one_policy(policy):
        def step(q, u):
            q = B[:, :, u] @ q
            qo = A @ q
            risk = jnp.sum(qo * (jnp.log(qo + EPS) - log_pref))
            novelty = qo @ (W @ q)
            return q, risk + ambiguity @ q - novelty

        return jax.lax.scan(step, qs, policy)[1].sum()

    return jax.vmap(one_policy)(policies)


def likelihood_error(pA: jax.Array, A_true: jax.Array) -> jax.Array:
    """Mean over states of the total-variation distance between learned and true columns."""
    return 0.5 * jnp.abs(normalise_columns(pA) - A_true).sum(axis=0).mean()


# --------------------------------------------------------------------------- simulation


def run_episode(key, pA, task: Task, goal: int, n_steps: int, precision: float, policies):
    """One episode from a random known start; returns the updated pA and success flag."""
    n_states = task.A.shape[1]
    k_start, key = jax.random.split(key)
    start = jax.random.randint(k_start, (), 0, n_states - 1)
    start = start + (start >= goal)  # never start on the goal

    def step(carry, _):
        key, s, prior, pA, hit = carry
        key, k_obs, k_act, k_env = jax.random.split(key, 4)
        hit = hit | (s == goal)
        obs = jax.random.categorical(k_obs, jnp.log(task.A[:, s] + EPS))
        A_hat = normalise_columns(pA)
        qs = infer_states(A_hat, prior, obs)
        pA = pA.at[obs].add(qs)  # += onehot(obs) ⊗ q(s)
        G = expected_free_energy(pA, task.B, task.C, qs, policies)
        u = policies[jax.random.categorical(k_act, -precision * G), 0]
        s_next = jax.random.categorical(k_env, jnp.log(task.B[:, s, u] + EPS))
        return (key, s_next, task.B[:, :, u] @ qs, pA, hit), None

    prior = jax.nn.one_hot(start, n_states)
    init = (key, start, prior, pA, jnp.bool_(False))
    (_, s_final, _, pA, hit), _ = jax.lax.scan(step, init, None, length=n_steps)
    return pA, hit | (s_final == goal)


def run_agent(key, task: Task, goal: int, n_episodes: int, n_steps: int, precision: float,
              policies, prior_concentration: float):
    """Scan episodes for one agent, carrying its Dirichlet counts between episodes."""
    n_states = task.A.shape[1]
    pA0 = jnp.full((n_states, n_states), prior_concentration)

    def episode(pA, key):
        pA, success = run_episode(key, pA, task, goal, n_steps, precision, policies)
        return pA, (likelihood_error(pA, task.A), success)

    _, (errors, successes) = jax.lax.scan(episode, pA0, jax.random.split(key, n_episodes))
    return likelihood_error(pA0, task.A), errors, successes


@functools.partial(jax.jit, static_argnames=("goal", "n_agents", "n_episodes", "n_steps"))
def simulate(key, task: Task, goal: int, n_agents: int, n_episodes: int, n_steps: int,
             precision: float, policies, prior_concentration: float):
    """vmap ``run_agent`` over independent agents."""
    keys = jax.random.split(key, n_agents)
    return jax.vmap(run_agent, in_axes=(0, None, None, None, None, None, None, None))(
        keys, task, goal, n_episodes, n_steps, precision, policies, prior_concentration)


def run_learning(n_agents: int = N_AGENTS, n_episodes: int = N_EPISODES,
                 n_steps: int = N_STEPS, seed: int = 0,
                 prior_concentration: float = PRIOR_CONCENTRATION) -> dict:
    """Learn A across episodes; report the per-episode error and success rates."""
    task, goal = grid_task()
    policies = all_policies(len(MOVES), POLICY_DEPTH)
    run = functools.partial(simulate, jax.random.PRNGKey(seed), task, goal, n_agents,
                            n_episodes, n_steps, PRECISION, policies, prior_concentration)
    jax.block_until_ready(run())  # compile outside the timing
    t0 = time.perf_counter()
    initial, errors, successes = jax.block_until_ready(run())
    elapsed = time.perf_counter() - t0
    return {
        "initial_A_error": float(initial.mean()),
        "error_by_episode": np.asarray(errors.mean(axis=0)).tolist(),
        "success_by_episode": np.asarray(successes.mean(axis=0)).tolist(),
        "agent_steps_per_s": n_agents * n_episodes * n_steps / elapsed,
    }


def main() -> dict:
    res = run_learning()
    errs, succ = res["error_by_episode"], res["success_by_episode"]
    print(f"{N_AGENTS} agents learning A (flat Dirichlet prior {PRIOR_CONCENTRATION}), "
          f"{N_EPISODES} episodes x {N_STEPS} steps on a {GRID_SIZE}x{GRID_SIZE} grid")
    print(f"  A error before learning: {res['initial_A_error']:.3f} (mean TV distance per column)")
    for i, (e, s) in enumerate(zip(errs, succ), start=1):
        print(f"  episode {i:2d}: A error {e:.3f}  success {s:.3f}")
    print(f"  throughput: {res['agent_steps_per_s']:,.0f} agent-steps/s")
    if not errs[-1] < REQUIRED_ERROR_RATIO * errs[0]:
        raise AssertionError(f"likelihood error did not fall enough: first episode {errs[0]:.3f}, "
                             f"last {errs[-1]:.3f} (need < {REQUIRED_ERROR_RATIO}x)")
    record(initial_A_error=res["initial_A_error"], final_A_error=errs[-1],
           error_by_episode=errs, success_rate_first_episode=succ[0],
           success_rate_last_episode=succ[-1], agent_steps_per_s=float(res["agent_steps_per_s"]))
    return res


if __name__ == "__main__":
    main()
