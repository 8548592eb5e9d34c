"""Program identity and recompile reasons (jaxrun.probe.programs), in-process with real JAX, and
through a real run where the script's own stderr is involved."""

from __future__ import annotations

import logging
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from helpers import write

from jaxrun import bench, execute_jax_script
from jaxrun.probe import programs
from jaxrun.results.models import CompileStats
from jaxrun.run.reading.compiles import recompile_warnings


def test_jaxs_messages_become_reasons() -> None:
    """Messages as jax 0.10 logs them (copied from a real run), and what jaxrun makes of them."""
    never = ("TRACING CACHE MISS at /s.py:19 (<module>):\n  never seen function:\n"
             "    loss id=140607371166400 defined at /s.py:16")
    assert programs.explain(never) == ("loss", None)
    shape = ("TRACING CACHE MISS at /s.py:25:4 (<module>):\n  for loss defined at /s.py:16\n  all previously seen "
             "cache keys differ. For the closest previous key:\n  different input types:\n  * at w, now f32[1] and "
             "before f32[3]")
    assert programs.explain(shape) == ("loss", "argument w changed f32[3] -> f32[1]")
    static = ("TRACING CACHE MISS at /s.py:13:19 (<module>):\n  for loss defined at /s.py:9\n  all previously seen "
              "cache keys differ. For the closest previous key:\n  different input pytree:\n  * at input path [0][1], "
              "now <class 'jax._src.tree_util.Static'> with pytree metadata Static(val=2) and before <class "
              "'jax._src.tree_util.Static'> with pytree metadata Static(val=1), so the pytree node metadata does not match")
    assert programs.explain(static) == (
        "loss", "argument input path [0][1] changed Static(val=1) -> Static(val=2) (the pytree node metadata does not match)")
    other = ("TRACING CACHE MISS at /s.py:3 (f):\n  for g defined at /s.py:1\n  tracing context doesn't match, e.g. "
             "due to config or context manager")
    assert programs.explain(other) == ("g", "tracing context doesn't match, e.g. due to config or context manager")
    assert programs.explain("PERSISTENT COMPILATION CACHE MISS for 'jit_f'") is None


def test_program_keys_name_the_transformation_and_the_function() -> None:
    def loss(w):
        return jnp.sum(w ** 2)

    assert programs.base_name("jit(grad(loss)) @ m.py:4") == "loss"
    assert programs.base_name("pmap(<lambda>)") == "<lambda>"
    x = jnp.ones(3)
    with bench.count_compiles() as c:
        jax.jit(jax.hessian(loss))(x)
        jax.jit(jax.jit(loss))(x + 1)  # jit of jit: one program, named as written
    assert {programs.base_name(k) for k in c.counts} >= {"loss"}
    assert all(k.startswith("jit(") for k in c.counts), c.counts


@pytest.mark.slow
def test_the_explanation_budget_ends_with_a_reason_that_says_so() -> None:
    f = jax.jit(lambda v: v * 2)
    xs = [jnp.ones(n) for n in range(1, programs.MAX_EXPLAINED + 6)]
    with programs.explaining(), bench.count_compiles() as c:
        for x in xs:
            f(x)
    (reasons,) = c.reasons.values()
    assert len(reasons) == programs.MAX_EXPLAINED + 4  # every retrace has a reason
    assert reasons[0] == "argument v changed f32[1] -> f32[2]"
    # The budget counts every explanation JAX gave, the first sight of the function included.
    explained = [r for r in reasons if r != programs.NOT_EXPLAINED]
    assert len(explained) == programs.MAX_EXPLAINED - 1 and all(r.startswith("argument v") for r in explained)
    assert reasons[len(explained):] == [programs.NOT_EXPLAINED] * 5
    assert jax.config.jax_explain_cache_misses is False  # handed back as it was


def test_a_warning_groups_the_values_an_argument_took() -> None:
    stats = CompileStats(count=5, traces=5, source="/s.py:3", recompile_reasons=[
        "argument x changed f32[1] -> f32[2]", "argument x changed f32[1] -> f32[3]",
        "argument x changed f32[3] -> f32[4]", "argument x changed f32[1] -> f32[5]"])
    jax_own = CompileStats(count=9, traces=9, recompile_reasons=["JAX gave no explanation"] * 8)
    once = CompileStats(count=1, traces=1, source="/s.py:9")
    assert recompile_warnings({"jit(f)": stats, "jit(broadcast_in_dim)": jax_own, "jit(g)": once}) == [
        "jit(f) compiled 5 times: argument x took 5 different values: f32[1] -> f32[2] -> f32[3] -> f32[4] -> f32[5]"]


def test_a_warning_does_not_call_a_cache_load_a_compilation() -> None:
    """Issue 23: 'jit(_pbvi) compiled 3 times (3 loaded from the persistent cache)' beside a table
    that said 0 compiles: the executables loaded were never compiled."""
    loaded = CompileStats(count=1, cache_hits=2, traces=3, source="/s.py:3", recompile_reasons=[
        "argument x changed f32[1] -> f32[2]", "argument x changed f32[2] -> f32[3]"])
    assert recompile_warnings({"jit(f)": loaded}) == [
        "jit(f) needed 3 executables (1 compiled, 2 loaded from the persistent cache): argument x took 3 different "
        "values: f32[1] -> f32[2] -> f32[3]"]


@pytest.mark.slow
def test_a_script_that_asked_for_explanations_still_sees_them(tmp_path: Path) -> None:
    """jaxrun hides only the explanations it asked for; the script's own logging is its own."""
    script = write(tmp_path / "s", "asks.py", (
        "import logging, jax, jax.numpy as jnp\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "jax.config.update('jax_explain_cache_misses', True)\n"
        "f = jax.jit(lambda v: v + 1)\n"
        "f(jnp.ones(2)); f(jnp.ones(3))\n"
        "logging.getLogger('mine').warning('my own warning')\n"
    ))
    result = execute_jax_script(script, device="cpu", results_dir=tmp_path / "r", compile_cache=False)
    assert result.success, result.error_message
    stderr = Path(result.stderr_log).read_text()
    assert "TRACING CACHE MISS" in stderr and "my own warning" in stderr
    (reason,) = result.compiles["jit(<lambda>)"].recompile_reasons
    assert reason == "argument v changed f32[2] -> f32[3]"


@pytest.mark.slow
def test_the_persistent_caches_bookkeeping_stays_out_of_the_scripts_stderr(tmp_path: Path) -> None:
    """JAX logs 'Writing jit_f to persistent compilation cache' at WARNING only because jaxrun
    turned explanations on: a plain python run prints nothing, and so does the script under
    jaxrun; a script that turns them on itself sees them."""
    text = ("import jax, jax.numpy as jnp\n"
            "{own}jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)\n"
            "print(jax.jit(lambda v: v * 3.25 + {n})(jnp.ones({n})))\n")
    cache = tmp_path / "cache"
    for own, asked in (("", False), ("jax.config.update('jax_explain_cache_misses', True)\n", True)):
        script = write(tmp_path / f"s{asked}", "writes.py", text.format(own=own, n=7 + asked))
        result = execute_jax_script(script, device="cpu", results_dir=tmp_path / f"r{asked}",
                                    env={"JAX_COMPILATION_CACHE_DIR": str(cache)})
        assert result.success, result.error_message
        assert sum(s.count for s in result.compiles.values()) >= 1  # something new was compiled and written
        stderr = Path(result.stderr_log).read_text()
        assert ("to persistent compilation cache with key" in stderr) is asked, stderr


@pytest.mark.parametrize("explain", [False, True])
def test_other_jax_warnings_are_left_alone(caplog: pytest.LogCaptureFixture, explain: bool) -> None:
    with caplog.at_level(logging.WARNING):
        with programs.explaining() if explain else bench.count_compiles():
            logging.getLogger("jax._src.compiler").warning("something else")
    assert [r.getMessage() for r in caplog.records] == ["something else"]


def test_a_retrace_that_changed_many_arguments_is_summarised() -> None:
    """As the sharded example does: every argument's sharding changed in one retrace."""
    reason = "; ".join(f"argument p{i} changed f32[8]({{Auto: ('data',)}}) -> f32[8]({{}})" for i in range(14))
    stats = CompileStats(count=2, traces=2, source="/s.py:3", recompile_reasons=[reason])
    assert recompile_warnings({"jit(step)": stats}) == [
        "jit(step) compiled 2 times: 14 arguments changed at once, e.g. argument p0 changed "
        "f32[8]({Auto: ('data',)}) -> f32[8]({})"]


# Each program called in turn; around each call the script counts JAX's own backend-compile events
# (a plain jax.monitoring listener): the truth for which program each compilation belongs to.
SEVERAL_DEVICES = """\
    import json, os, sys
    import numpy as np
    import jax, jax.numpy as jnp
    import jax.monitoring
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, s, **kw: compiles.append(kw.get("fun_name")) if event.endswith("backend_compile_duration") else None)

    def loss(w):
        return jnp.sum(jnp.sin(w) ** 2)

    d0, d1 = jax.devices()[:2]
    x0 = jax.device_put(jnp.ones(8), d0)
    x1 = jax.device_put(jnp.ones(8), d1)
    xs = jax.device_put(jnp.ones(8), NamedSharding(Mesh(np.array([d0, d1]), ("d",)), P("d")))
    jit_loss, jit_grad = jax.jit(loss), jax.jit(jax.grad(loss))
    truth = {}
    for program, call in [("jit(loss)", lambda: jit_loss(x0)), ("jit(grad(loss))", lambda: jit_grad(x0)),
                          ("jit(loss)", lambda: jit_loss(x1)), ("jit(grad(loss))", lambda: jit_grad(x1)),
                          ("jit(loss)", lambda: jit_loss(xs)), ("jit(loss)", lambda: jit_loss(x1))]:
        before = len(compiles)
        jax.block_until_ready(call())
        truth[program] = truth.get(program, 0) + len(compiles) - before
    print(json.dumps(truth))
"""


def test_compiles_are_charged_to_the_program_jax_compiled(tmp_path: Path) -> None:
    """jit(loss) compiled again for a second device (JAX neither traces nor lowers it again) and for
    a sharding, between compilations of jit(grad(loss)): each count equals the plain listener's."""
    import json

    script = write(tmp_path, "devices.py", SEVERAL_DEVICES)
    result = execute_jax_script(script, "cpu", results_dir=tmp_path / "r", compile_cache=False, host_devices=2)
    assert result.success, result.error_message
    truth = json.loads(Path(result.stdout_log).read_text())
    assert truth == {"jit(loss)": 3, "jit(grad(loss))": 2}  # device 0, device 1, the sharding; then cached
    assert {key: result.compiles[key].count for key in truth} == truth
    # Only the sharding made JAX trace jit(loss) again; the second device reused its trace and module.
    assert result.compiles["jit(loss)"].traces == 2 and result.compiles["jit(grad(loss))"].traces == 1
