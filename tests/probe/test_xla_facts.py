"""What XLA knows about each program of a script: cost and memory analysis, fingerprints,
device kind and count, the compile environment; and the JAX internals they rest on.

Every figure is read by the real probe in a real script's process (real JAX on CPU) and checked
against a ground truth: FLOPs of programs whose count is known by hand, buffers of known sizes,
fingerprints of the same program in two processes and of a program changed by one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write

from jaxrun import execute_jax_script
from jaxrun.probe import jax_internals

N = 256
MATMUL_FLOPS = 2 * N**3  # an N x N by N x N product: N^2 outputs of N multiply-adds

KNOWN_PROGRAMS = """\
import jax, jax.numpy as jnp
from jax import lax

def matmul(x, y):
    return x @ y

def conv(x, k):
    return lax.conv_general_dilated(x, k, (1, 1), "VALID")

def scan5(x, w):
    return lax.scan(lambda c, _: (c @ w, None), x, None, length=5)[0]

def chained(x):
    return (x @ x) @ x

def nothing(params, state):  # an optimizer's update with an empty state: no arithmetic at all
    return (), state

def identity(x):
    return x

def through_host(x):
    return jax.pure_callback(lambda v: v * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

a = jnp.ones((256, 256), jnp.float32)
jax.jit(matmul)(a, a).block_until_ready()
jax.jit(nothing)({"w": a}, ())
jax.jit(identity)(a).block_until_ready()
jax.jit(through_host)(a).block_until_ready()
jax.jit(conv)(jnp.ones((1, 3, 32, 32)), jnp.ones((8, 3, 3, 3))).block_until_ready()
jax.jit(scan5)(a, a).block_until_ready()
jax.jit(chained)(jnp.ones((1024, 1024), jnp.float32)).block_until_ready()
"""


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    script = write(tmp_path_factory.mktemp("known"), "known.py", KNOWN_PROGRAMS)
    result = execute_jax_script(script, device="cpu", timeout=120)
    assert result.success, result.error_message
    return result


def test_every_jax_internal_jaxrun_reads_is_where_it_expects(tmp_path: Path) -> None:
    # Fails on a JAX version where one moved, naming it: jaxrun then reports null with the reason.
    moved = {name: problem for name, problem in jax_internals.check().items() if problem is not None}
    assert not moved, f"JAX internals moved in this JAX version: {moved}"


@pytest.mark.slow
def test_a_moved_internal_leaves_the_figures_null_with_the_reason(tmp_path: Path) -> None:
    # As on a JAX whose compilation function was renamed: the script still runs, its figures are
    # null, and the result says why.
    script = write(tmp_path, "moved.py", """\
        import jax, jax.numpy as jnp
        import jaxrun.probe.programs as programs
        programs.COMPILING_FRAME = "_a_function_this_jax_does_not_have"
        print(jax.jit(lambda x: x * 3)(jnp.ones(4)).sum())
        """)
    result = execute_jax_script(script, device="cpu", timeout=120, compile_cache=False)
    assert result.success, result.error_message
    stats = result.compiles["jit(<lambda>)"]
    assert stats.count == 1 and stats.cost is None and stats.memory is None and stats.fingerprint is None
    assert stats.analysis_reason == ("a JAX internal jaxrun reads has moved in this JAX version (the locals of "
                                     "pxla._cached_compilation): XLA's analyses cannot be read")


def test_flops_of_known_programs(known) -> None:  # type: ignore[no-untyped-def]
    matmul, conv, scan = (known.compiles[f"jit({n})"].cost for n in ("matmul", "conv", "scan5"))
    assert matmul.flops == MATMUL_FLOPS and matmul.source == "xla" and matmul.reason is None
    # 8 output channels x 30 x 30 positions, each 3 x 3 x 3 multiply-adds.
    assert conv.flops == 2 * 8 * 30 * 30 * 3 * 3 * 3 and conv.source == "xla"
    # XLA counts a loop body once: the probe counts it by the trip count XLA proved (+1 add per trip).
    assert scan.source == "xla_trip_counts" and "x5" in scan.reason
    assert 5 * MATMUL_FLOPS <= scan.flops <= 5 * MATMUL_FLOPS + 10
    assert matmul.bytes_accessed == 3 * N * N * 4  # two inputs read, one output written
    assert matmul.transcendentals == 0


def test_a_program_that_computes_nothing_costs_zero_and_a_host_callback_is_unknown(known) -> None:  # type: ignore[no-untyped-def]
    # Its optimized module only returns an empty tuple: XLA's analysis is empty, and 0 is the truth.
    nothing = known.compiles["jit(nothing)"].cost
    assert (nothing.flops, nothing.bytes_accessed, nothing.transcendentals) == (0, 0, 0)
    assert nothing.source == "xla" and nothing.reason is None
    identity = known.compiles["jit(identity)"].cost  # a copy: no arithmetic, its bytes moved
    assert identity.flops == 0 and identity.bytes_accessed == 2 * N * N * 4 and identity.source == "xla"
    host = known.compiles["jit(through_host)"].cost  # XLA reports -1 across the callback: unknown
    assert host.flops is None and host.source is None and "host callback" in host.reason


def test_memory_analysis_of_known_buffers(known) -> None:  # type: ignore[no-untyped-def]
    memory = known.compiles["jit(chained)"].memory
    four_mib = 1024 * 1024 * 4
    assert memory.argument_bytes == four_mib and memory.output_bytes == four_mib and memory.alias_bytes == 0
    assert memory.temp_bytes >= four_mib  # x @ x lives while it is multiplied by x again
    assert memory.total_bytes == memory.argument_bytes + memory.output_bytes + memory.temp_bytes \
        + memory.generated_code_bytes


def test_device_kind_count_and_time(known) -> None:  # type: ignore[no-untyped-def]
    for key in ("jit(matmul)", "jit(scan5)"):
        stats = known.compiles[key]
        assert stats.device_kind == "cpu" and stats.device_count == 1 and stats.variants == 1
        assert 0 < stats.analysis_time < stats.compile_time + stats.lower_time + stats.trace_time + 1
        assert stats.analysis_reason is None and stats.fingerprint and stats.input_fingerprint
    env = known.compile_environment
    import jax

    assert env.jax_version == jax.__version__ and env.backend == "cpu" and env.xla_flags == []


PROGRAM = """\
import jax, jax.numpy as jnp
{above}
def step(x):
    return jnp.tanh(x @ x) * {scale}

jax.jit(step)(jnp.ones((64, 64))).block_until_ready()
"""


def _fingerprints(folder: Path, **fields: str):  # type: ignore[no-untyped-def]
    text = PROGRAM.format(**{"above": "", "scale": "0.5", **fields})
    result = execute_jax_script(write(folder, "step.py", text), device="cpu", timeout=120, compile_cache=False)
    assert result.success, result.error_message
    stats = result.compiles["jit(step)"]
    return stats.fingerprint, stats.input_fingerprint


@pytest.mark.slow
def test_fingerprints_are_the_programs_not_the_process_or_the_line(tmp_path: Path) -> None:
    first = _fingerprints(tmp_path / "a")
    assert _fingerprints(tmp_path / "b") == first  # another process, the same program
    # Lines above the function move its source locations: the same program.
    assert _fingerprints(tmp_path / "c", above="# a comment\n\n\nCONSTANT = 3\n") == first
    changed = _fingerprints(tmp_path / "d", scale="0.25")  # one line changed
    assert changed[0] != first[0] and changed[1] != first[1]


@pytest.mark.slow
def test_variants_counts_the_programs_built_for_new_shapes(tmp_path: Path) -> None:
    script = write(tmp_path, "shapes.py", """\
        import jax, jax.numpy as jnp
        f = jax.jit(lambda x: x * 2)
        for n in (4, 8, 16):
            f(jnp.ones(n)).block_until_ready()
        f(jnp.ones(4)).block_until_ready()
        """)
    result = execute_jax_script(script, device="cpu", timeout=120)
    stats = result.compiles["jit(<lambda>)"]
    assert stats.count == 3 and stats.variants == 3
    assert stats.memory.argument_bytes == 16 * 4  # the last executable built


def test_no_xla_analysis_leaves_the_figures_null(tmp_path: Path) -> None:
    script = write(tmp_path, "plain.py", "import jax, jax.numpy as jnp\njax.jit(lambda x: x + 1)(jnp.ones(3))\n")
    result = execute_jax_script(script, device="cpu", timeout=120, xla_analysis=False)
    stats = result.compiles["jit(<lambda>)"]
    assert stats.count == 1 and stats.cost is None and stats.memory is None and stats.fingerprint is None
    assert stats.analysis_time == 0.0


@pytest.mark.slow
def test_the_compile_environment_holds_what_the_cache_key_hashes(tmp_path: Path) -> None:
    script = write(tmp_path, "flags.py", "import jax, jax.numpy as jnp\njax.jit(lambda x: x + 1)(jnp.ones(3))\n")
    flags = "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=2"
    cache = tmp_path / "cache"
    result = execute_jax_script(script, device="cpu", timeout=120, env={"XLA_FLAGS": flags}, compile_cache=str(cache))
    env = result.compile_environment
    # JAX leaves the device count flag out of its key (the device count is its own ingredient).
    assert env.xla_flags == ["--xla_cpu_enable_fast_math=false"]
    assert env.cache_dir == str(cache)
    # The JAX settings that shape the program (they enter the key through it), as the script ended.
    assert env.jax_config["jax_enable_x64"] == "False" and env.jax_config["jax_default_matmul_precision"] == "None"


@pytest.mark.slow
def test_an_executable_loaded_from_the_persistent_cache_has_its_facts(tmp_path: Path) -> None:
    script = write(tmp_path, "cached.py", "import jax, jax.numpy as jnp\njax.jit(lambda x: x @ x)(jnp.ones((128, 128)))\n")
    options = dict(device="cpu", timeout=120, compile_cache=str(tmp_path / "cache"))
    first = execute_jax_script(script, **options).compiles["jit(<lambda>)"]
    second = execute_jax_script(script, **options).compiles["jit(<lambda>)"]
    assert first.count == 1 and second.count == 0 and second.cache_hits == 1
    assert second.fingerprint == first.fingerprint and second.input_fingerprint == first.input_fingerprint
    assert second.cost.flops == first.cost.flops == 2 * 128**3 and second.memory == first.memory
