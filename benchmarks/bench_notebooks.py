"""What running a notebook costs against the same code as a .py script, and its per-cell times.

Three programs with the same code, an equinox MLP fitted a few steps (equinox's examples' style):
``mlp.py`` (the cells joined), ``mlp.ipynb`` (the cells as code cells), and ``mlp_magic.ipynb``
(one line as ``%time``: IPython's transformer and shell are loaded for it). Each round runs the
three through ``jaxrun.execute_jax_script`` in turn (interleaved; no compile cache):
medians of ``body_time`` and ``execution_time`` over the rounds, their ratios to the script's
(of the medians, and the median of each round's own ratio: a noisy machine's drift cancels within
a round), the body outside any cell (``body_time`` - the cells' seconds: reading the notebook,
preparing its cells, IPython's loading for the magic one), and the median of each cell's seconds.

    python benchmarks/bench_notebooks.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import textwrap
from pathlib import Path

import jaxrun

CELLS = [
    """\
    import jax
    import jax.numpy as jnp
    import equinox as eqx

    key, data_key = jax.random.split(jax.random.PRNGKey(0))
    model = eqx.nn.MLP(in_size=2, out_size=1, width_size=64, depth=2, key=key)
    x = jax.random.normal(data_key, (256, 2))
    y = x[:, :1] * x[:, 1:]
    """,
    """\
    @eqx.filter_jit
    def loss_fn(model, x, y):
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    @eqx.filter_jit
    def step(model, x, y):
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        return eqx.apply_updates(model, jax.tree_util.tree_map(lambda g: -0.1 * g, grads)), loss
    """,
    "loss0 = float(loss_fn(model, x, y))",
    """\
    for _ in range(200):
        model, loss = step(model, x, y)
    print("loss", float(loss), "from", loss0)
    """,
]


def _notebook(path: Path, cells: list[str]) -> None:
    def cell(i: int, text: str) -> dict:
        return {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
                "source": textwrap.dedent(text).splitlines(keepends=True)}

    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                "cells": [cell(i, c) for i, c in enumerate(cells)]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        programs = {"mlp.py": folder / "mlp.py", "mlp.ipynb": folder / "mlp.ipynb",
                    "mlp_magic.ipynb": folder / "mlp_magic.ipynb"}
        programs["mlp.py"].write_text("\n".join(textwrap.dedent(c) for c in CELLS))
        _notebook(programs["mlp.ipynb"], CELLS)
        _notebook(programs["mlp_magic.ipynb"], [*CELLS[:2], "%time " + CELLS[2], *CELLS[3:]])
        body: dict[str, list[float]] = {name: [] for name in programs}
        wall: dict[str, list[float]] = {name: [] for name in programs}
        cells: dict[str, list[list[float]]] = {name: [] for name in programs}
        outside: dict[str, list[float]] = {name: [] for name in programs}
        for round_ in range(rounds):
            for name, path in programs.items():
                result = jaxrun.execute_jax_script(path, "cpu", results_dir=folder / "results", compile_cache=False)
                assert result.success, (name, result.error_message)
                body[name].append(result.body_time)
                wall[name].append(result.execution_time)
                if result.cells is not None:
                    cells[name].append([c.seconds for c in result.cells])
                    outside[name].append(result.body_time - sum(c.seconds for c in result.cells))
            print(f"round {round_ + 1}/{rounds}: " + ", ".join(f"{n} {body[n][-1]:.3f} s" for n in programs), flush=True)
    base_body, base_wall = statistics.median(body["mlp.py"]), statistics.median(wall["mlp.py"])
    print(f"\nmedians of {rounds} interleaved rounds (compile cache off):")
    print(f"{'program':<18}{'body_time s':>12}{'x script':>10}{'paired x':>10}{'execution_time s':>18}{'x script':>10}"
          f"{'paired x':>10}{'outside cells ms':>18}")
    for name in programs:
        b, w = statistics.median(body[name]), statistics.median(wall[name])
        paired_b = statistics.median(n / s for n, s in zip(body[name], body["mlp.py"]))
        paired_w = statistics.median(n / s for n, s in zip(wall[name], wall["mlp.py"]))
        out = f"{statistics.median(outside[name]) * 1000:.1f}" if outside[name] else "-"
        print(f"{name:<18}{b:>12.3f}{b / base_body:>10.3f}{paired_b:>10.3f}{w:>18.3f}{w / base_wall:>10.3f}"
              f"{paired_w:>10.3f}{out:>18}")
    for name in ("mlp.ipynb", "mlp_magic.ipynb"):
        per_cell = [statistics.median(column) for column in zip(*cells[name])]
        print(f"{name} per cell (medians): " + ", ".join(f"In [{i}] {s * 1000:.1f} ms" for i, s in
                                                        enumerate(per_cell, start=1)))


if __name__ == "__main__":
    main()
