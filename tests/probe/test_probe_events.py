"""The probe's events have one definition each (jaxrun.probe.events): every line a real probe writes,
on every path of a script (jax, warm mode, profiling, recorded values, an exception, sys.exit,
os._exit, a forked child), matches its definition, and the parent reads back what was written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import write, write_notebook

from jaxrun.probe import events
from jaxrun.probe.arguments import ProbeArguments
from jaxrun.probe.channel import read_events
from jaxrun.run.reading.probe_reading import read_probe_events

SCRIPTS = {
    "jax_recorded": """\
        import jax, jax.numpy as jnp, jaxrun
        f = jax.jit(lambda x: x * 2)
        f(1.0); f(jnp.float32(1.0))  # a retrace with a reason
        jaxrun.record(value=float(f(jnp.ones(())))) 
    """,
    "raises": "raise ValueError('no')\n",
    "exits": "import sys\nsys.exit('bye')\n",
    "os_exit": "import os\nos._exit(2)\n",
    "forks": "import os\npid = os.fork()\nif pid == 0:\n    raise SystemExit(3)\nos.waitpid(pid, 0)\n",
    "warm": "import jax.numpy as jnp\ndef main():\n    return jnp.ones(3) * 2\n",
    "sets_guard": "import jax\njax.config.update('jax_transfer_guard', 'allow')\nwith jax.transfer_guard('log'):\n    pass\n",
}
# Notebooks (probe/notebook.py): each a list of code cells; their outputs sent (--save-notebooks).
NOTEBOOKS = {
    "notebook": ["import jax.numpy as jnp\nx = jnp.ones(3)", "!pip install optax\nprint(x.sum())", "x / 0\nraise ValueError('cell')"],
}
ARGUMENTS = {"warm": {"entry": "main", "warm_calls": 2}, "jax_recorded": {"profile": "PROFILE"},
             "notebook": {"cell_outputs": 1}}


def run_probe(tmp_path: Path, name: str) -> Path:
    """The real probe process, as jaxrun starts it; returns its channel file."""
    script = (write_notebook(tmp_path, f"{name}.ipynb", NOTEBOOKS[name]) if name in NOTEBOOKS
              else write(tmp_path, f"{name}.py", SCRIPTS[name]))
    channel = tmp_path / "events.jsonl"
    options = {k: str(tmp_path / "profile") if v == "PROFILE" else v for k, v in ARGUMENTS.get(name, {}).items()}
    command = ProbeArguments(events=str(channel), script_argv=(str(script),), **options).command()
    subprocess.run(command, cwd=tmp_path, capture_output=True, timeout=300, check=False)
    return channel


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted([*SCRIPTS, *NOTEBOOKS]))
def test_every_line_a_real_probe_writes_matches_its_definition(tmp_path: Path, name: str) -> None:
    lines = [json.loads(line) for line in run_probe(tmp_path, name).read_text().splitlines()]
    assert lines and all(not events.problems(line) for line in lines), [events.problems(line) for line in lines]
    kinds = [line["type"] for line in lines]
    assert kinds[:2] == [events.START, events.BODY] and events.END in kinds, kinds
    if name == "jax_recorded":
        assert {events.COMPILE, events.RECORD, events.PROFILE, events.JAX_LOADED} <= set(kinds)
    if name == "warm":
        assert kinds.count(events.CALL) == 2
        assert all(isinstance(line["live_array_bytes"], int) for line in lines if line["type"] == events.CALL)
    if name == "notebook":  # a start and an end a cell; the warning for the install line
        assert kinds.count(events.CELL) == 6 and events.PROBE_WARNING in kinds and events.EXCEPTION in kinds
        ends = [line for line in lines if line["type"] == events.CELL and "s" in line]
        assert [e["outcome"] for e in ends] == ["ok", "ok", "error"] and ends[2]["error_line"] == 2
        assert ends[1]["outputs"] == [["stdout", "3.0\n"]]
    if name == "sets_guard":
        assert kinds.count(events.TRANSFER_GUARD) == 1  # once, however many settings


@pytest.mark.slow
def test_the_parent_reads_back_what_the_probe_wrote(tmp_path: Path) -> None:
    written = read_events(run_probe(tmp_path, "jax_recorded"))
    reading = read_probe_events(written)
    end = next(e for e in written if e["type"] == events.END)
    assert reading.body_time == end["body_time"] and reading.run_time == end["run_time"]
    assert reading.results == {"value": 2.0} and reading.jax_loaded and not reading.warnings
    assert sum(s.traces for s in reading.compiles.values()) == sum(
        1 for e in written if e["type"] == events.COMPILE and e["phase"] == events.PHASE_TRACE)


def test_a_line_that_does_not_match_is_a_warning_not_a_crash() -> None:
    damaged = [{"type": events.END, "body_time": 1.0}]  # an END event cut down to one field
    reading = read_probe_events(damaged)  # type: ignore[arg-type]
    assert reading.body_time is None  # unknown, never half-read
    assert reading.warnings and "end: missing" in reading.warnings[0]


def test_the_definitions_the_run_reads_are_typings_typed_dicts() -> None:
    """At run time the definitions are stand-ins (probe/events.py: no typing in a script's process);
    type checkers read the same classes as typing's TypedDicts: the same keys, the same required."""
    import types

    source = Path(events.__file__).read_text().replace("TYPE_CHECKING = False", "TYPE_CHECKING = True", 1)
    typed = types.ModuleType("typed_events")
    exec(compile(source, events.__file__, "exec"), typed.__dict__)
    assert set(typed.DEFINITIONS) == set(events.DEFINITIONS)
    for name, definition in events.DEFINITIONS.items():
        real = typed.DEFINITIONS[name]
        assert list(definition.__annotations__) == list(real.__annotations__), name
        assert definition.__required_keys__ == real.__required_keys__, name
        assert definition.__optional_keys__ == real.__optional_keys__, name
        assert type(definition(type=name)) is dict
