"""FLOPs and bytes of loops, on real JAX (CPU), against analytic counts.

XLA's ``compiled.cost_analysis()`` counts a loop body once whatever its trip count: a scan of 10
matmuls came out at the FLOPs of one. Every figure here is checked against the arithmetic of the
program (2 n^3 per n x n matmul) within 1 %, so a count 10x, 2x or 0.5x off fails.
"""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from jaxrun import bench
from jaxrun.bench._cost import cost_figures
from jaxrun.bench._flops import _trips, jaxpr_cost
from jaxrun.bench.records import DevicePeaks

N = 64
MATMUL = 2 * N**3  # FLOPs of one N x N matmul
MATRIX_BYTES = N * N * 4
# Made-up peaks: the roofline's arithmetic is checked, not this machine's speed (no peak measurement).
PEAKS = DevicePeaks(platform="cpu", device_kind="cpu", device_count=1, jax_version="x", host="h",
                    flops_per_s_float32=1e11, bytes_per_s=1e10, measured_at="now")


def _doubling_until_1000(x, w):
    # Ends when the data says so: with x = 1 and w = 2/N everywhere, after 10 doublings.
    return lax.while_loop(lambda c: c[0, 0] < 1e3, lambda c: c @ w, x)


def _measure(fn, *args, peaks=PEAKS):
    return bench.measure(fn, *args, min_time=0.01, min_samples=3, peaks=peaks)


def _inputs():
    x = jax.random.normal(jax.random.key(0), (N, N), jnp.float32)
    w = jax.random.normal(jax.random.key(1), (N, N), jnp.float32) / N
    return x, w


def _scan10(x, w):
    return lax.scan(lambda c, _: (c @ w, None), x, None, length=10)[0]


def _assert_close(measured, analytic):
    assert measured is not None
    assert abs(measured - analytic) <= 0.01 * analytic, (measured, analytic, measured / analytic)


@pytest.mark.slow
def test_scan_of_10_matmuls_counts_all_10() -> None:
    x, w = _inputs()
    # The defect, as XLA alone has it: one matmul's FLOPs for a program that does ten.
    one_trip = cost_figures(jax.jit(_scan10).lower(x, w).compile().cost_analysis())
    _assert_close(one_trip["flops"], MATMUL)

    m = _measure(_scan10, x, w)
    _assert_close(m.flops, 10 * MATMUL)
    assert m.cost_source == "xla_trip_counts"
    assert any("counts each loop body once" in w and "x10" in w for w in m.warnings), m.warnings
    # Bytes are scaled with the FLOPs: each trip reads the carry and w and writes the carry.
    assert m.bytes_accessed >= 10 * 3 * MATRIX_BYTES > one_trip["bytes_accessed"]
    assert m.arithmetic_intensity == pytest.approx(m.flops / m.bytes_accessed)
    assert m.achieved_flops_per_s == pytest.approx(m.flops / m.median)
    assert m.bound == ("compute" if m.arithmetic_intensity >= m.ridge_point else "memory")


def test_transcendentals_of_a_scan_are_counted_per_trip() -> None:
    x, w = _inputs()
    m = _measure(lambda x, w: lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=10)[0], x, w)
    assert m.transcendentals == 10 * N * N  # one tanh per element per trip
    _assert_close(m.flops, 10 * MATMUL)


@pytest.mark.parametrize("loop", ["fori_loop", "while_loop_counter", "scan_unroll_3_reverse"])
def test_other_loops_with_static_trip_counts(loop: str) -> None:
    x, w = _inputs()
    programs = {
        # Python-int bounds: JAX lowers fori_loop to a scan.
        "fori_loop": lambda x, w: lax.fori_loop(0, 10, lambda i, c: c @ w, x),
        # A hand-written counter: XLA proves the trip count of `i < 10, i += 1`.
        "while_loop_counter": lambda x, w: lax.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] @ w), (0, x))[1],
        # unroll=3 over 10: a loop of 3 trips of 3 bodies, plus one body after it.
        "scan_unroll_3_reverse": lambda x, w: lax.scan(lambda c, _: (c @ w, None), x, None, length=10, unroll=3,
                                                       reverse=True)[0],
    }
    m = _measure(programs[loop], x, w)
    _assert_close(m.flops, 10 * MATMUL)
    assert m.cost_source == "xla_trip_counts"


def test_nested_scans_multiply_their_trip_counts() -> None:
    x, w = _inputs()

    def nested(x, w):
        inner = lambda c, _: (lax.scan(lambda c2, _: (c2 @ w, None), c, None, length=3)[0], None)  # noqa: E731
        return lax.scan(inner, x, None, length=4)[0]

    m = _measure(nested, x, w)
    _assert_close(m.flops, 4 * 3 * MATMUL)
    assert m.bytes_accessed >= 12 * 3 * MATRIX_BYTES


def test_a_loop_in_a_cond_branch_counts_its_trips() -> None:
    x, w = _inputs()
    m = _measure(lambda x, w: lax.cond(x[0, 0] > -100, lambda: _scan10(x, w)[:5] * 1.0, lambda: x[:5]), x, w)
    _assert_close(m.flops, 10 * MATMUL)


def test_gradient_of_a_scan_counts_forward_and_backward_trips() -> None:
    x, w = _inputs()
    loss = jax.grad(lambda x, w: lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=10)[0].sum())
    m = _measure(loss, x, w)
    # Per trip: forward c @ w and tanh; backward (1 - y^2) * cotangent (3 FLOPs an element), then @ w.T.
    _assert_close(m.flops, 10 * (2 * MATMUL + 3 * N * N))
    assert m.transcendentals == 10 * N * N


def test_xla_drops_work_the_jaxpr_still_holds() -> None:
    # The gradient of a linear scan needs no forward pass: XLA drops it and does 10 matmuls, while
    # the jaxpr holds 20. The figure is XLA's, scaled by trip counts, not the jaxpr's count.
    x, w = _inputs()
    linear = jax.grad(lambda x, w: _scan10(x, w).sum())
    _assert_close(jaxpr_cost(jax.jit(linear).trace(x, w).jaxpr).flops, 20 * MATMUL)
    _assert_close(_measure(linear, x, w).flops, 10 * MATMUL)


def test_a_fully_unrolled_scan_is_xlas_own_figure() -> None:
    # No loop is left after compilation: XLA counted every copy, and nothing is scaled.
    x, w = _inputs()
    m = _measure(lambda x, w: lax.scan(lambda c, _: (c @ w, None), x, None, length=10, unroll=True)[0], x, w)
    assert m.cost_source == "xla" and m.flops == 10 * MATMUL
    assert not any("loop" in w for w in m.warnings)


def test_a_loop_free_matmul_keeps_xlas_figure() -> None:
    x, w = _inputs()
    m = _measure(lambda x, w: x @ w, x, w)
    assert m.cost_source == "xla"
    assert m.flops == MATMUL and m.bytes_accessed == 3 * MATRIX_BYTES and m.transcendentals == 0
    assert not any("loop" in w for w in m.warnings)


@pytest.mark.parametrize("loop", ["while_loop_on_data", "fori_loop_traced_bound"])
def test_a_loop_without_static_trip_count_has_unknown_figures(loop: str) -> None:
    x, w = jnp.ones((N, N)), jnp.full((N, N), 2.0 / N)
    if loop == "while_loop_on_data":
        m = _measure(_doubling_until_1000, x, w)
    else:
        m = _measure(lambda x, w, k: lax.fori_loop(0, k, lambda i, c: c @ w, x), x, w, jnp.int32(10))
    assert m.flops is None and m.bytes_accessed is None and m.transcendentals is None and m.cost_source is None
    assert m.achieved_flops_per_s is None and m.arithmetic_intensity is None and m.bound is None
    (warning,) = [w for w in m.warnings if "trip count" in w]
    assert "test_bench_loops.py" in warning and "are unknown" in warning  # where, and what it means
    assert "fori_loop with Python-int bounds" in warning  # what to do


def _without_xla_analysis(monkeypatch) -> None:
    # As on an NVIDIA GPU, where JAX's compiled cost analysis says flops -1 (no GPU here).
    monkeypatch.setattr(sys.modules["jaxrun.probe.loop_costs"], "cost_figures",
                        lambda cost: cost_figures({"flops": -1.0, "bytes accessed": -1.0}))


def test_jaxpr_count_multiplies_trip_counts_where_xla_has_no_analysis(monkeypatch) -> None:
    x, w = _inputs()
    _without_xla_analysis(monkeypatch)
    m = _measure(_scan10, x, w)
    assert m.cost_source == "jaxpr" and m.flops == 10 * MATMUL
    assert m.bytes_accessed == 3 * MATRIX_BYTES  # arguments + output: the stated lower bound
    assert any("lower bound" in w and "trip counts" in w for w in m.warnings)
    m = _measure(lambda x, w: lax.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] @ w), (0, x))[1], x, w)
    _assert_close(m.flops, 10 * MATMUL)
    unknown = _measure(_doubling_until_1000, jnp.ones((N, N)), jnp.full((N, N), 2.0 / N))
    assert unknown.flops is None and unknown.cost_source is None
    assert any("no static trip count" in w and "test_bench_loops.py" in w for w in unknown.warnings)


def test_jaxpr_count_is_used_where_xlas_loop_figures_cannot_be_read(monkeypatch) -> None:
    # A jaxlib without the private functions that analyse one loop body: the jaxpr's count, said so.
    from jaxrun.probe import loop_costs as _loop_costs

    def unavailable(*args, **kwargs):
        raise _loop_costs.LoopCostUnavailable("no module cost analysis in this jaxlib")

    monkeypatch.setattr(_loop_costs, "_analyser", unavailable)
    x, w = _inputs()
    m = _measure(_scan10, x, w)
    assert m.cost_source == "jaxpr" and m.flops == 10 * MATMUL
    assert any("could not be read" in w and "no module cost analysis" in w for w in m.warnings)
    # A loop-free program never needs them.
    assert _measure(lambda x, w: x @ w, x, w).cost_source == "xla"


def test_nothing_is_added_where_the_backend_counts_every_trip_itself(monkeypatch) -> None:
    from jaxrun.probe import loop_costs as _loop_costs

    device = jax.devices()[0]
    assert _loop_costs._counts_each_body_once(device.client, device.platform) is True  # XLA:CPU, today
    monkeypatch.setitem(_loop_costs._body_once, jax.devices()[0].platform, False)  # as a future XLA might
    x, w = _inputs()
    m = _measure(_scan10, x, w)
    assert m.cost_source == "xla" and not any("loop" in w for w in m.warnings)
    _assert_close(m.flops, MATMUL)  # XLA's figure, which such a backend would have counted in full


def test_while_trip_counts_proved_from_the_jaxpr() -> None:
    x = jnp.ones((8, 8))
    body = 2 * 8**3 + 1  # the matmul and the counter's add

    def counted(cond, step, start):
        loop = lambda x: lax.while_loop(cond, lambda s: (s[0] + step, s[1] @ s[1]), (start, x))[1]  # noqa: E731
        return jaxpr_cost(jax.jit(loop).trace(x).jaxpr).flops

    assert counted(lambda s: s[0] < 10, 1, 0) == 10 * body + 11  # 11 tests of the condition
    assert counted(lambda s: s[0] <= 9, 3, 0) == 4 * body + 5  # 0, 3, 6, 9
    assert counted(lambda s: 0 < s[0], -1, 10) == 10 * body + 11  # counting down, bound on the left
    assert counted(lambda s: s[0] < 0, 1, 5) == 0 * body + 1  # never enters
    assert counted(lambda s: s[0] > -1, 1, 0) is None  # moves away from its bound: ends only by overflow
    # fori_loop with a concrete but non-Python bound: a while whose bound is a carry passed on unchanged.
    fori = jax.jit(lambda x: lax.fori_loop(0, jnp.int32(7), lambda i, c: c @ c, x)).trace(x)
    assert jaxpr_cost(fori.jaxpr).flops == 7 * body + 8


def test_trip_count_arithmetic() -> None:
    assert _trips(0, 1, 10, "lt") == 10 and _trips(0, 1, 10, "le") == 11
    assert _trips(0, 3, 10, "lt") == 4 and _trips(0, 3, 9, "le") == 4 and _trips(0, 3, 8, "le") == 3
    assert _trips(10, -1, 0, "gt") == 10 and _trips(10, -2, 0, "ge") == 6
    assert _trips(5, 1, 0, "lt") == 0
    assert _trips(0, -1, 10, "lt") is None and _trips(0, 1, -5, "gt") is None


@pytest.mark.slow
def test_a_sharded_scan_counts_every_trip_on_every_device() -> None:
    # Two simulated CPU devices need XLA_FLAGS before jax starts: a process of its own.
    code = """
import jax, jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxrun import bench
n = 64
x = jax.device_put(jnp.ones((2 * n, n)), NamedSharding(Mesh(jax.devices(), ("d",)), P("d")))
w = jnp.full((n, n), 1.0 / n)
m = bench.measure(lambda x, w: lax.scan(lambda c, _: (c @ w, None), x, None, length=10)[0], x, w,
                  min_time=0.01, min_samples=3, peaks=False)
print(m.num_devices, m.cost_source, m.flops)
"""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    devices, source, flops = out.stdout.split()
    assert devices == "2" and source == "xla_trip_counts"
    _assert_close(float(flops), 10 * 2 * (2 * N) * N * N)  # 10 trips of a (2N x N) @ (N x N) matmul
