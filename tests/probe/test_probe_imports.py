"""What the probe costs a script that never imports jax is mostly what it imports: at the script's
first line, the probe's process holds jaxrun's own modules and a few small built-in ones beyond
what ``python script.py`` holds, never typing, json, re, enum, signal, threading, runpy or pkgutil
(each several ms of CPU in a fresh interpreter, in every script's process)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import jaxrun
from jaxrun.probe.arguments import ProbeArguments

# What the probe may add besides jaxrun's modules: C modules it needs (json's encoder, getrusage,
# the scripts' lock, atexit, the collector its exit asks), ``__future__``, and what every interpreter's site imports anyway (the
# interpreters here run with -S, so that no .pth file of this machine's adds modules to either side).
ALLOWED = {"__future__", "_json", "resource", "fcntl", "atexit", "gc",
           "os", "os.path", "posixpath", "genericpath", "stat", "_stat", "_collections_abc"}
# The probe's modules that only a JAX script, a notebook or --profile needs.
NOT_YET = {"jaxrun.probe.programs", "jaxrun.probe.xla_facts", "jaxrun.probe.profiler", "jaxrun.probe.notebook",
           "jaxrun.probe.memory_fit", "jaxrun.probe.loop_costs", "jaxrun.probe.jax_internals"}


def first_line_modules(command: list[str], script: Path, out: Path) -> set[str]:
    script.write_text(f"import sys\nopen({str(out)!r}, 'w').write(repr(sorted(sys.modules)))\n"
                      "if False:\n    import jax\n")
    # -S leaves site-packages out: jaxrun is found where this process found it.
    where = str(Path(jaxrun.__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (where, os.environ.get("PYTHONPATH")) if p)}
    subprocess.run(command, cwd=script.parent, env=env, capture_output=True, timeout=60, check=True)
    return set(ast.literal_eval(out.read_text()))


def test_a_script_without_jax_finds_only_jaxruns_own_modules_and_small_built_in_ones(tmp_path: Path) -> None:
    script, out = tmp_path / "s.py", tmp_path / "modules.txt"
    bare = first_line_modules([sys.executable, "-S", str(script)], script, out)
    command = ProbeArguments(events=str(tmp_path / "events.jsonl"), script_argv=(str(script),)).command()
    probed = first_line_modules([command[0], "-S", *command[1:]], script, out)
    added = probed - bare
    assert not {m for m in added if not m.startswith("jaxrun")} - ALLOWED, sorted(added)
    assert not added & NOT_YET, sorted(added & NOT_YET)
    assert "jaxrun.probe.jax_hooks" in added  # the import hook is there, waiting for jax
