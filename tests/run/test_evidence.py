"""Classification by evidence, end to end: real scripts in real probe processes. The script's own
process decides (not a forked child); sys.exit is the script's decision whatever stderr says;
memory words in an ordinary exception or in XLA's "not a failure" warning are not out-of-memory;
the script's own KeyboardInterrupt is not jaxrun's Ctrl-C; an unprintable exception keeps its type
and traceback; os._exit gets a hint that fits."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write

import jaxrun


def run(tmp_path: Path, body: str):  # type: ignore[no-untyped-def]
    script = write(tmp_path, "s.py", body)
    return jaxrun.execute_jax_script(script, "cpu", results_dir=tmp_path / "r", compile_cache=False)


def test_a_forked_child_that_raises_does_not_fail_the_script(tmp_path: Path) -> None:
    result = run(tmp_path, """\
        import os
        pid = os.fork()
        if pid == 0:
            raise ValueError("the child fails")
        _, status = os.waitpid(pid, 0)
        print("child status", os.waitstatus_to_exitcode(status))
    """)
    assert result.success, (result.error_class, result.error_message)
    assert "child status 1" in Path(result.stdout_log).read_text()
    assert result.body_time is not None and result.exit_code == 0


def test_an_allocator_warning_before_sys_exit_is_the_scripts_exit(tmp_path: Path) -> None:
    result = run(tmp_path, """\
        import sys
        print("W external/xla/tsl/framework/bfc_allocator.cc:310] Allocator (GPU_0_bfc) ran out of memory "
              "trying to allocate 2.00GiB. The caller indicates that this is not a failure, but this may "
              "mean that there could be performance gains if more memory were available.", file=sys.stderr)
        sys.exit(3)
    """)
    assert result.error_class == "script_error" and result.exit_code == 3
    assert "sys.exit(3)" in result.error_message
    assert len(result.attempts) == 1  # not transient: never retried, never moved to another device


def test_an_ordinary_exception_about_allocation_is_a_script_error(tmp_path: Path) -> None:
    result = run(tmp_path, 'raise ValueError("failed to allocate the output buffer")\n')
    assert result.error_class == "script_error" and result.exception_type == "ValueError"


def test_the_scripts_own_keyboard_interrupt_is_a_script_error(tmp_path: Path) -> None:
    result = run(tmp_path, "raise KeyboardInterrupt\n")
    assert result.error_class == "script_error" and result.exception_type == "KeyboardInterrupt"
    assert "itself" in result.hint


def test_an_exception_whose_message_cannot_be_rendered_keeps_its_type(tmp_path: Path) -> None:
    result = run(tmp_path, """\
        class Broken(Exception):
            def __str__(self):
                raise RuntimeError("no text")
        def deep():
            raise Broken()
        deep()
    """)
    assert result.error_class == "script_error" and result.exception_type == "Broken"
    assert "could not be rendered" in result.error_message
    assert result.traceback and "deep()" in result.traceback and "Broken" in result.traceback


def test_os_exit_gets_a_hint_without_a_traceback(tmp_path: Path) -> None:
    result = run(tmp_path, "import os\nos._exit(5)\n")
    assert result.error_class == "script_error" and result.exit_code == 5
    assert "status 5" in result.error_message and result.traceback is None
    assert "os._exit" in result.hint and "traceback" not in result.hint


@pytest.mark.parametrize("code", ["raise SystemExit(0)", "import sys; sys.exit()"])
def test_a_clean_exit_is_success(tmp_path: Path, code: str) -> None:
    assert run(tmp_path, code + "\n").success


CALLBACK_RAISES = """\
    import jax, jax.numpy as jnp

    def host(x):
        raise ValueError("failed to allocate 12 GB for the buffer")

    @jax.jit
    def f(x):
        return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    f(jnp.ones(3)).block_until_ready()
"""


def test_a_callbacks_own_error_about_memory_is_a_script_error(tmp_path: Path) -> None:
    result = run(tmp_path, CALLBACK_RAISES)
    # The runtime carried it out as JaxRuntimeError; the exception is the callback's ValueError.
    assert result.error_class == "script_error" and result.exception_type == "ValueError"
    assert result.error_message.startswith("ValueError: failed to allocate 12 GB for the buffer")
    assert "host callback" in result.error_message
    assert len(result.attempts) == 1  # never retried, never moved to another device
    # The callback's traceback, copied into the runtime's message, starts at the script's line.
    for text in (result.traceback, Path(result.stderr_log).read_text()):
        assert "<frozen runpy>" not in text and "jaxrun/probe" not in text, text
        assert 'File "<string>"' not in text, text  # the bottom frame of the probe's `python -c`
    assert 'File "' + str(tmp_path / "s.py") + '", line 4, in host' in result.traceback


def test_sys_exit_with_a_message_keeps_it(tmp_path: Path) -> None:
    result = run(tmp_path, 'import sys\nsys.exit("no data in ./inputs: run fetch.py first")\n')
    assert result.exit_code == 1 and result.error_class == "script_error"
    assert result.error_message == (
        "exited with status 1: the script called sys.exit('no data in ./inputs: run fetch.py first')")
    assert Path(result.stderr_log).read_text() == "no data in ./inputs: run fetch.py first\n"  # as python prints it
