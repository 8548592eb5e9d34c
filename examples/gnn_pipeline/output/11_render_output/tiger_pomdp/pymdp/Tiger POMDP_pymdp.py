"""Tiger POMDP: NumPy reference rendering (sibling of ../jax/Tiger POMDP_jax.py).

Not a JAX script: it imports only NumPy, so `jaxrun run` does not pick it up (jaxrun counts a
file as a JAX script when it imports jax, jaxlib, flax, optax, equinox or pymdp; mentioning
them in text, as here, does not count). Run it with plain ``python``.
"""

import numpy as np

HEAR_ACCURACY = 0.85

A_hear = np.array([[HEAR_ACCURACY, 1 - HEAR_ACCURACY], [1 - HEAR_ACCURACY, HEAR_ACCURACY]])
D = np.array([0.5, 0.5])


def update_beliefs(qs: np.ndarray, obs: int) -> np.ndarray:
    posterior = A_hear[obs] * qs
    return posterior / posterior.sum()


if __name__ == "__main__":
    qs = D
    for _ in range(3):
        qs = update_beliefs(qs, 0)  # hear the tiger on the left three times
    print(f"P(tiger left | 3 hears left) = {qs[0]:.4f}")
