"""jaxrun.bench's other tools on real JAX: batch_scaling, speedup, recompilation guards, pytree bytes."""

from __future__ import annotations

import doctest
import functools
import importlib
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrun import bench
from jaxrun.bench import NumericalMismatchError, RecompileError
from jaxrun.bench.records import BatchScaling, LeafBytes, Speedup
from jaxrun.errors import JAXExecutionError, UsageError

# --- batch_scaling --------------------------------------------------------------------------------


def _mlp_item(params, x):
    # One item: a 64-vector through a small MLP, so batching amortises per-call dispatch.
    h = jnp.tanh(x @ params["w1"])
    return h @ params["w2"]


@pytest.mark.slow
def test_batch_scaling_table() -> None:
    key = jax.random.key(0)
    w1 = jax.random.normal(key, (64, 64))
    w2 = jax.random.normal(key, (64, 8))

    def step(x):
        return _mlp_item({"w1": w1, "w2": w2}, x)

    # Samples of 5 ms (time_budget / 200 samples), not 1 ms: the sizes are timed one after the
    # other, and on a machine loaded past its cores a 1 ms sample is either untouched or stretched
    # by a whole scheduler slice, so two sizes' medians could swap (items/s 16 vs 256 is ~3.5x idle).
    result = bench.batch_scaling(step, lambda n: (jnp.ones((n, 64)),), sizes=(1, 16, 256), time_budget=1.0)
    assert isinstance(result, BatchScaling)
    assert result.name == "step" and result.baseline_size == 1
    assert [r.size for r in result.rows] == [1, 16, 256]
    for row in result.rows:
        assert row.time and row.time > 0
        assert row.per_item == pytest.approx(row.time / row.size)
        assert row.items_per_s == pytest.approx(row.size / row.time)
        assert row.ci_low <= row.time <= row.ci_high
        assert row.compile_time and row.compile_time > 0
    assert result.rows[0].speedup_per_item == pytest.approx(1.0)
    # A batch of 256 costs far less per item than 256 separate calls of a tiny function.
    items = [r.items_per_s for r in result.rows]
    assert items == sorted(items), items
    assert result.rows[-1].speedup_per_item == pytest.approx(result.rows[0].per_item / result.rows[-1].per_item)
    text = result.table()
    assert "items/s" in text and "speedup/item vs 1" in text
    assert len(text.splitlines()) == 3 + len(result.rows)
    assert str(result) == text


def test_batch_scaling_with_several_arguments_and_in_axes() -> None:
    def affine(w, x):
        return w * x + 1.0

    result = bench.batch_scaling(
        affine, lambda n: (jnp.full(8, 2.0), jnp.ones((n, 8))), sizes=(4, 2), in_axes=(None, 0), min_time=0.02
    )
    assert [r.size for r in result.rows] == [2, 4] and result.baseline_size == 2


def test_batch_scaling_names_a_missing_batch_axis() -> None:
    with pytest.raises(UsageError, match=r"shape \(3,\).*leading batch axis of length 4"):
        bench.batch_scaling(jnp.sin, lambda n: (jnp.ones(3),), sizes=(4,))
    with pytest.raises(UsageError, match="positive"):
        bench.batch_scaling(jnp.sin, lambda n: (jnp.ones(n),), sizes=(0, 4))


def test_batch_scaling_says_fn_takes_one_item_when_given_a_whole_batch_function() -> None:
    w = jnp.ones((64, 8))

    def whole_batch(batch):  # written for (batch, 64): one item of shape (64,) cannot be unpacked
        n, d = batch.shape
        return jnp.tanh(batch.reshape(n, d) @ w)

    with pytest.raises(UsageError) as caught:
        bench.batch_scaling(whole_batch, lambda n: (jnp.ones((n, 64)),), sizes=(1, 16), time_budget=0.02)
    message = str(caught.value)
    assert message.startswith("batch_scaling: fn 'whole_batch' must take ONE item (batch_scaling vmaps it over the batch)")
    assert "given one item (args[0]: (64,)) it raised ValueError: not enough values to unpack" in message
    assert "given the whole batch of 1 (args[0]: (1, 64)) it runs" in message
    assert "\n" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # one error, not JAX's chain

    # A function that fails on the whole batch too is the function's own error, raised as it is.
    def broken(x):
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        bench.batch_scaling(broken, lambda n: (jnp.ones((n, 4)),), sizes=(2,), time_budget=0.02)


def test_batch_scaling_documents_that_fn_takes_one_item() -> None:
    assert "``fn`` takes ONE item" in bench.batch_scaling.__doc__


# --- speedup --------------------------------------------------------------------------------------


def _gelu(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def test_speedup_jit_versus_op_by_op() -> None:
    x = jnp.linspace(-4, 4, 200_000, dtype=jnp.float32)
    # Samples of 50 ms (time_budget / max_samples), many scheduler slices long: on a machine loaded
    # past its cores both calls then wait their fair share alike. Samples of 1 ms (a 0.1 s budget)
    # are each either untouched or stretched by a whole slice of waiting, and the median of ten
    # such came out 0.28x at load 8.
    result = bench.speedup(jax.jit(_gelu), _gelu, x, rtol=1e-5, atol=1e-6, time_budget=2.0, max_samples=40)
    assert isinstance(result, Speedup)
    # jax.jit keeps the function's name, so the two labels are told apart by role.
    assert (result.fast.name, result.reference.name) == ("_gelu (fast)", "_gelu (reference)")
    assert result.leaves_checked == 1 and result.max_abs_error <= 1e-5
    assert result.fast.steady.n == len(result.fast.samples) >= 5
    assert result.reference.steady.n == len(result.reference.samples) >= 5
    expected = np.median(result.reference.samples) / np.median(result.fast.samples)
    assert result.ratio == pytest.approx(expected)
    assert result.ci_low <= result.ratio <= result.ci_high
    assert result.ratio > 1  # fusing six elementwise ops beats dispatching them one by one
    assert "speed-up of" in result.table()


def test_speedup_against_numpy_with_pytrees() -> None:
    def stats_jax(x):
        return {"mean": jnp.mean(x, axis=0), "extremes": (jnp.min(x), jnp.max(x))}

    def stats_numpy(x):
        x = np.asarray(x)
        return {"mean": x.mean(axis=0), "extremes": [x.min(), x.max()]}  # a list where JAX has a tuple

    x = np.random.default_rng(0).normal(size=(512, 64)).astype(np.float32)
    result = bench.speedup(jax.jit(stats_jax), stats_numpy, x, rtol=1e-4, atol=1e-5, min_time=0.05,
                           names=("jax", "numpy"))
    assert result.fast.name == "jax" and result.reference.name == "numpy"
    assert result.leaves_checked == 3
    assert result.ratio is not None and result.ratio > 0


def test_speedup_mismatch_names_the_leaf() -> None:
    def good(x):
        return {"loss": jnp.sum(x), "grads": [x * 2, x * 3]}

    def wrong(x):
        return {"loss": jnp.sum(x), "grads": [x * 2, x * 3 + 1e-2]}

    x = jnp.arange(10.0)
    with pytest.raises(NumericalMismatchError) as info:
        bench.speedup(jax.jit(good), wrong, x)
    message = str(info.value)
    assert "['grads'][1]" in message and info.value.leaf == "['grads'][1]"
    assert "max abs error 0.01" in message and "rtol=1e-05" in message
    assert isinstance(info.value, JAXExecutionError) and isinstance(info.value, AssertionError)

    with pytest.raises(NumericalMismatchError, match=r"shape \(10,\).*\(5,\)"):
        bench.speedup(jnp.sin, lambda v: jnp.sin(v)[:5], x)
    with pytest.raises(NumericalMismatchError, match="different structures"):
        bench.speedup(lambda v: (v, v), lambda v: (v,), x)


def test_speedup_nan_in_same_place_is_equal_but_one_sided_nan_is_not() -> None:
    x = jnp.array([1.0, jnp.nan, 3.0])
    bench.speedup(jax.jit(jnp.sqrt), np.sqrt, x, min_time=0.01)  # NaN where both have NaN: fine
    with pytest.raises(NumericalMismatchError, match=r"index \(1,\)"):
        bench.speedup(jnp.sqrt, lambda v: np.nan_to_num(np.sqrt(np.asarray(v))), x, min_time=0.01)


# --- recompilation --------------------------------------------------------------------------------


def test_count_compiles_per_function() -> None:
    def double(x):
        return 2 * x

    def halve(x):
        return x / 2

    f, g = jax.jit(double), jax.jit(halve)
    a, b = jnp.ones(3), jnp.ones(4)
    with bench.count_compiles() as c:
        f(a), f(a), f(b), g(a)
    assert c.counts == {"jit(double)": 2, "jit(halve)": 1}
    assert c.total == 3
    assert c.traces["jit(double)"] == 2
    assert set(c.seconds) == {"jit(double)", "jit(halve)"} and all(s > 0 for s in c.seconds.values())
    with bench.count_compiles() as quiet:
        f(a), g(a)
    assert quiet.total == 0 and quiet.counts == {}


@pytest.fixture
def guarded():
    @bench.no_recompile
    @functools.partial(jax.jit, static_argnames="mode")
    def step(x, lr, mode="sgd"):
        return x - lr * x if mode == "sgd" else x

    step(jnp.ones(3), 0.1)
    step(jnp.ones(3), 0.2)  # a Python float is traced (weakly typed): a new value does not recompile
    return step


def test_no_recompile_allows_the_same_signature(guarded) -> None:
    guarded(jnp.zeros(3), 0.3)
    assert guarded.calls == 3
    assert guarded.lower(jnp.ones(3), 0.1) is not None  # the jitted function's API stays reachable


def test_no_recompile_names_the_argument_whose_shape_changed(guarded) -> None:
    with pytest.raises(RecompileError) as info:
        guarded(jnp.ones(4), 0.1)
    message = str(info.value)
    assert message.startswith("step was recompiled")
    assert "argument 'x' changed shape from (3,) to (4,)" in message
    assert "keep shapes fixed (pad or bucket) or mark the argument static" in message
    assert info.value.function == "step" and info.value.counts == {"jit(step)": 1}
    assert isinstance(info.value, JAXExecutionError) and isinstance(info.value, AssertionError)


def test_no_recompile_names_a_dtype_change(guarded) -> None:
    with pytest.raises(RecompileError, match="argument 'x' changed dtype from float32 to int32"):
        guarded(jnp.ones(3, jnp.int32), 0.1)
    with pytest.raises(RecompileError, match="argument 'lr' changed from float 0.1 to int 1"):
        guarded(jnp.ones(3, jnp.int32), 1)


def test_no_recompile_names_a_static_value_change() -> None:
    @bench.no_recompile
    @functools.partial(jax.jit, static_argnames="mode")
    def update(x, mode):
        return -x if mode == "neg" else x

    x = jnp.ones(3)
    update(x, mode="neg")
    update(x, mode="neg")
    with pytest.raises(RecompileError) as info:
        update(x, mode="id")
    assert "argument 'mode' changed value from 'neg' to 'id'" in str(info.value)
    assert "static argument compiles once per value" in str(info.value)


def test_no_recompile_names_how_an_argument_was_passed(guarded) -> None:
    # jax.jit keys its cache on the call as written: a default spelled out is a new entry.
    with pytest.raises(RecompileError, match="argument 'mode' was left to its default before and passed by keyword now"):
        guarded(jnp.ones(3), 0.1, mode="sgd")


def test_no_recompile_names_a_pytree_structure_change() -> None:
    @bench.no_recompile
    @jax.jit
    def total(params):
        return sum(jnp.sum(v) for v in params.values())

    total({"w": jnp.ones(2)})
    with pytest.raises(RecompileError, match="argument 'params' changed pytree structure"):
        total({"w": jnp.ones(2), "b": jnp.ones(2)})


def test_no_recompile_names_a_nested_leaf() -> None:
    @bench.no_recompile
    @jax.jit
    def total(params):
        return jnp.sum(params["layer"]["w"]) + jnp.sum(params["layer"]["b"])

    total({"layer": {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}})
    with pytest.raises(RecompileError, match=r"argument 'params' at \['layer'\]\['w'\] changed shape from \(2, 2\) to \(3, 2\)"):
        total({"layer": {"w": jnp.ones((3, 2)), "b": jnp.ones(2)}})


def test_no_recompile_without_a_changed_argument_points_elsewhere() -> None:
    scale = {"value": 2.0}

    @bench.no_recompile
    def make_and_call(x):
        # A new jitted closure per call: same arguments, yet a compile every time.
        return jax.jit(lambda v: v * scale["value"])(x)

    x = jnp.ones(3)
    make_and_call(x)
    with pytest.raises(RecompileError, match="no argument changed shape.*new function object"):
        make_and_call(x)


def test_assert_max_compiles() -> None:
    def norm(v):
        return jnp.sqrt(jnp.sum(v * v))

    f = jax.jit(norm)
    a, b, c = jnp.ones(3), jnp.ones(5), jnp.ones(7)
    with bench.assert_max_compiles(1) as counter:
        f(a), f(a)
    assert counter.counts == {"jit(norm)": 1}
    with pytest.raises(RecompileError) as info:
        with bench.assert_max_compiles(1):
            f(b), f(c)
    message = str(info.value)
    assert message.startswith("jit(norm) compiled 2 times in the block (at most 1 allowed)")
    # JAX explains each miss against the closest executable it has (here the f32[3] one).
    assert "argument v changed f32[3] -> f32[7]" in message
    # Only the named function is checked.
    with bench.assert_max_compiles(0, fun="something_else"):
        f(jnp.ones(9))
    with pytest.raises(ValueError, match="whole number"):
        with bench.assert_max_compiles(-1):
            pass


def test_transformations_of_one_function_are_different_programs() -> None:
    """jit(loss), jit(grad(loss)) and jit(vmap(loss)) are three programs, one compile each: JAX's
    own events name all three `loss`."""
    def loss(w):
        return jnp.sum(w ** 2)

    x, xs = jnp.ones(3), jnp.ones((2, 3))
    with bench.assert_max_compiles(1, fun=loss) as counter:
        jax.jit(loss)(x), jax.jit(jax.grad(loss))(x), jax.jit(jax.vmap(loss))(xs)
        jax.jit(jax.value_and_grad(loss))(x), jax.jit(jax.checkpoint(loss))(x)
    assert counter.counts == {"jit(loss)": 1, "jit(grad(loss))": 1, "jit(vmap(loss))": 1,
                              "jit(value_and_grad(loss))": 1, "jit(checkpoint(loss))": 1}
    with bench.count_compiles() as pmapped:
        jax.pmap(loss)(jnp.ones((1, 3)))
    assert "pmap(loss)" in pmapped.counts, pmapped.counts


def test_two_functions_with_one_name_are_two_programs() -> None:
    namespace: dict = {}
    exec(compile("import jax.numpy as jnp\ndef f(x):\n    return x + 1\n", "/virtual/other.py", "exec"), namespace)

    def f(x):
        return x * 3

    with bench.count_compiles() as c:
        jax.jit(f)(jnp.ones(2)), jax.jit(namespace["f"])(jnp.ones(2))
    # The first source keeps the plain key; the other one's key says where it comes from.
    assert c.counts == {"jit(f)": 1, "jit(f) @ other.py:2": 1}, c.counts


def test_cache_miss_explanations_stay_out_of_the_log(caplog: pytest.LogCaptureFixture) -> None:
    f = jax.jit(lambda v: v + 1)
    with caplog.at_level(logging.WARNING):
        with bench.assert_max_compiles(5):
            f(jnp.ones(2)), f(jnp.ones(3))
    assert not [r for r in caplog.records if "CACHE MISS" in r.getMessage()]
    assert jax.config.jax_explain_cache_misses is False  # restored


# --- pytree bytes ---------------------------------------------------------------------------------


def test_pytree_nbytes_and_breakdown() -> None:
    state = {
        "params": {"w": jnp.zeros((128, 64)), "b": jnp.zeros(64, jnp.bfloat16)},
        "opt": (np.zeros(10, np.float64), jax.ShapeDtypeStruct((4, 4), jnp.int8)),
        "step": 3,
        "name": "run-1",
    }
    leaves = bench.pytree_breakdown(state)
    assert all(isinstance(x, LeafBytes) for x in leaves)
    by_path = {x.path: x for x in leaves}
    assert by_path["['params']['w']"].nbytes == 128 * 64 * 4
    assert by_path["['params']['w']"].shape == [128, 64] and by_path["['params']['w']"].dtype == "float32"
    assert by_path["['params']['b']"].nbytes == 128 and by_path["['params']['b']"].dtype == "bfloat16"
    assert by_path["['opt'][0]"].nbytes == 80
    assert by_path["['opt'][1]"].nbytes == 16  # ShapeDtypeStruct: size x itemsize, no data needed
    assert by_path["['step']"].nbytes == 4 and by_path["['step']"].dtype == "int32"
    assert by_path["['name']"].nbytes is None  # not an array: unknown, not 0
    total = 128 * 64 * 4 + 128 + 80 + 16 + 4
    assert bench.pytree_nbytes(state) == total
    table = bench.breakdown_table(state)
    lines = table.splitlines()
    assert "['params']['w']" in lines[2]  # largest first
    assert lines[-1].split()[0] == "total" and "32.22 KiB" in lines[-1]
    assert "(2 more leaves)" in bench.breakdown_table(leaves, top=4)
    assert bench.pytree_nbytes({}) == 0


# --- the documentation's examples -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("module", ["measure", "scaling", "speedup", "recompile", "_compiles", "pytree", "roofline"])
def test_docstring_examples_run(module: str) -> None:
    mod = importlib.import_module(f"jaxrun.bench.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
