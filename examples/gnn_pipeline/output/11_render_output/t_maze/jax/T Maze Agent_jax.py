"""T Maze Agent: JAX simulation rendered from the GNN specification "T Maze Agent".

The classic active-inference T-maze (Friston et al. 2015). A mouse starts in the centre of a
T-shaped maze; one arm holds a reward and the other a shock, and a cue at the bottom of the
maze tells (with validity 0.95) which arm is which. The arms are absorbing.

Hidden states: location (centre, left arm, right arm, cue) x context (reward-left,
reward-right), flattened to 8. Actions: move to one of the 4 locations. Three observation
modalities: location (exact), outcome (nothing, reward, shock) and cue (none, left, right).

    A[m][o, s]   likelihood of observation o of modality m in state s
    B[s', s, a]  transitions (moving; the arms are absorbing, the context never changes)
    C[m][o]      log-preferences over each modality's observations
    D[s]         prior: in the centre, context unknown

Each step the agent scores every 2-step policy by its expected free energy (scanned over the
policy's steps, vmapped over the 16 policies), takes the first action of the best one,
observes, and updates its beliefs. Without a cue it cannot do better than chance, so it
first visits the cue (epistemic value), then goes to the arm the cue points to. 256 trials of 3
steps are simulated at once. The script checks its own result (beliefs are distributions,
every agent visits the cue first, the reward rate is near the cue's validity) and writes a
JSON summary to ``$JAXRUN_OUTPUT_DIR`` (under jaxrun) or ``output/T Maze Agent_jax/`` (plain
``python``).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

try:
    import jaxrun
except ImportError:  # running outside jaxrun: nothing is recorded
    jaxrun = None

MODEL_NAME = "T Maze Agent"
N_TRIALS = 256
N_STEPS = 3
POLICY_DEPTH = 2
CUE_VALIDITY = 0.95
REWARD_PROB = 0.98
CENTRE, LEFT, RIGHT, CUE = 0, 1, 2, 3
N_LOC, N_CTX = 4, 2
NOTHING, REWARD, SHOCK = 0, 1, 2
MIN_REWARD_RATE = 0.85  # expected 0.95 * 0.98 + 0.05 * 0.02 = 0.932


def state(loc: int, ctx: int) -> int:
    return loc * N_CTX + ctx


class TMazeAgent:
    """The GNN model's matrices and its jitted inference (``self`` is static: the model is fixed)."""

    def __init__(self):
        n = N_LOC * N_CTX
        A_loc = np.zeros((N_LOC, n))
        A_out = np.zeros((3, n))
        A_cue = np.zeros((3, n))
        B = np.zeros((n, n, N_LOC))
        for loc, ctx in itertools.product(range(N_LOC), range(N_CTX)):
            s = state(loc, ctx)
            A_loc[loc, s] = 1.0
            if loc in (LEFT, RIGHT):
                good = (loc == LEFT) == (ctx == 0)
                A_out[REWARD, s] = REWARD_PROB if good else 1.0 - REWARD_PROB
                A_out[SHOCK, s] = 1.0 - A_out[REWARD, s]
            else:
                A_out[NOTHING, s] = 1.0
            if loc == CUE:
                A_cue[1 + ctx, s] = CUE_VALIDITY
                A_cue[2 - ctx, s] = 1.0 - CUE_VALIDITY
            else:
                A_cue[0, s] = 1.0
            for action in range(N_LOC):
                target = loc if loc in (LEFT, RIGHT) else action  # arms are absorbing
                B[state(target, ctx), s, action] = 1.0
        self.A = (jnp.asarray(A_loc), jnp.asarray(A_out), jnp.asarray(A_cue))
        self.B = jnp.asarray(B)
        self.C = (jnp.zeros(N_LOC), jax.nn.log_softmax(jnp.array([0.0, 3.0, -6.0])), jnp.zeros(3))
        D = np.zeros(n)
        D[[state(CENTRE, 0), state(CENTRE, 1)]] = 0.5
        self.D = jnp.asarray(D)
        self.policies = jnp.array(list(itertools.product(range(N_LOC), repeat=POLICY_DEPTH)))

    @partial(jax.jit, static_argnums=(0,))
    def update_beliefs(self, qs: jax.Array, action: jax.Array, obs: tuple) -> jax.Array:
        """Posterior over states after moving and observing one outcome of each modality."""
        posterior = self.B[:, :, action] @ qs
        for A_m, o in zip(self.A, obs):
            posterior = posterior * A_m[o]
        return posterior / posterior.sum()

    @partial(jax.jit, static_argnums=(0,))
    def expected_free_energy(self, qs: jax.Array) -> jax.Array:
        """G[policy]: summed over its steps, -(expected utility + expected information gain)."""

        def policy_G(policy):
            def step(q, action):
                q = self.B[:, :, action] @ q
                g = 0.0
                for A_m, C_m in zip(self.A, self.C):
                    qo = A_m @ q
                    entropy = -jnp.sum(qo * jnp.log(qo + 1e-16))
                    ambiguity = -jnp.sum(A_m * jnp.log(A_m + 1e-16), axis=0) @ q
                    g = g - (qo @ C_m + entropy - ambiguity)
                return q, g

            return jax.lax.scan(step, qs, policy)[1].sum()

        return jax.vmap(policy_G)(self.policies)

    @partial(jax.jit, static_argnums=(0,))
    def simulate(self, key: jax.Array) -> dict:
        """One trial of ``N_STEPS`` steps; returns its trace."""
        key, k_ctx = jax.random.split(key)
        true_state = jnp.int32(CENTRE * N_CTX) + jax.random.bernoulli(k_ctx).astype(jnp.int32)

        def step(carry, step_key):
            qs, s = carry
            action = self.policies[jnp.argmin(self.expected_free_energy(qs)), 0]
            s = jnp.argmax(self.B[:, s, action])
            obs = tuple(
                jax.random.categorical(k, jnp.log(A_m[:, s] + 1e-16))
                for k, A_m in zip(jax.random.split(step_key, len(self.A)), self.A)
            )
            qs = self.update_beliefs(qs, action, obs)
            return (qs, s), {"belief": qs, "action": action, "outcome": obs[1], "state": s}

        _, trace = jax.lax.scan(step, (self.D, true_state), jax.random.split(key, N_STEPS))
        return trace


def main() -> dict:
    agent = TMazeAgent()
    keys = jax.random.split(jax.random.key(1), N_TRIALS)
    simulate_all = jax.jit(jax.vmap(agent.simulate)).lower(keys).compile()  # compile apart
    t0 = time.perf_counter()
    trace = jax.block_until_ready(simulate_all(keys))
    elapsed = time.perf_counter() - t0

    beliefs = np.asarray(trace["belief"])  # [trial, step, state]
    actions = np.asarray(trace["action"])
    outcomes = np.asarray(trace["outcome"])
    sum_error = float(np.abs(beliefs.sum(axis=-1) - 1.0).max())
    if sum_error > 1e-5 or beliefs.min() < 0.0:
        raise AssertionError(f"beliefs are not distributions (sums off by {sum_error:.2e})")
    cue_first = float((actions[:, 0] == CUE).mean())
    if cue_first != 1.0:
        raise AssertionError(f"only {cue_first:.3f} of the agents visited the cue first")
    final = outcomes[:, -1]
    reward_rate = float((final == REWARD).mean())
    if reward_rate < MIN_REWARD_RATE:
        raise AssertionError(f"reward rate {reward_rate:.3f} < {MIN_REWARD_RATE}")
    summary = {
        "model": MODEL_NAME,
        "n_trials": N_TRIALS,
        "n_steps": N_STEPS,
        "policies": int(agent.policies.shape[0]),
        "cue_first_rate": cue_first,
        "reward_rate": reward_rate,
        "shock_rate": float((final == SHOCK).mean()),
        "max_belief_sum_error": sum_error,
        "trial_steps_per_s": N_TRIALS * N_STEPS / elapsed,
    }
    print(f"{MODEL_NAME}: {N_TRIALS} trials x {N_STEPS} steps, cue first in {cue_first:.3f}, "
          f"reward {reward_rate:.3f}, shock {summary['shock_rate']:.3f}")

    out_dir = os.environ.get("JAXRUN_OUTPUT_DIR", os.path.join("output", f"{MODEL_NAME}_jax"))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{MODEL_NAME}_simulation.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)

    if jaxrun is not None:
        jaxrun.record(reward_rate=reward_rate, cue_first_rate=cue_first,
                      trial_steps_per_s=summary["trial_steps_per_s"])
    return summary


if __name__ == "__main__":
    main()
