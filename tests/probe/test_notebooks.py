"""Notebooks as programs (probe/notebook.py, probe/notebook_cells.py, outputs/notebook_outputs.py): found
by their code cells' imports, run cell by cell in one process by the real probe under real JAX,
each cell timed, a failing cell named, IPython lines run by IPython or skipped without it, and
the executed copy written with its outputs (validated by nbformat)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from helpers import chrome, load, open_page, run_batch, write, write_notebook
from helpers import jaxrun as jaxrun_cli
from jsonschema import Draft202012Validator

import jaxrun
from jaxrun.present.view.script_rows import error_location
from jaxrun.results import result_files
from jaxrun.results.models import ScriptResult

EQUINOX = [
    "md:# An MLP fitted with equinox (in the style of equinox's docs/examples)",
    """\
    import jax
    import jax.numpy as jnp
    import equinox as eqx

    key, data_key = jax.random.split(jax.random.PRNGKey(0))
    model = eqx.nn.MLP(in_size=2, out_size=1, width_size=16, depth=2, key=key)
    x = jax.random.normal(data_key, (64, 2))
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
    "%time loss0 = float(loss_fn(model, x, y))",
    """\
    for _ in range(30):
        model, loss = step(model, x, y)
    print("loss", float(loss))
    assert float(loss) < loss0
    """,
]
OPTAX = [
    "!pip install optax",
    """\
    import jax
    import jax.numpy as jnp
    import optax
    import jaxrun

    w_true = jnp.array([2.0, -1.0, 0.5])
    xs = jax.random.normal(jax.random.PRNGKey(1), (128, 3))
    ys = xs @ w_true
    """,
    """\
    optimiser = optax.adam(0.1)
    w = jnp.zeros(3)
    state = optimiser.init(w)

    @jax.jit
    def update(w, state):
        loss, grad = jax.value_and_grad(lambda w: jnp.mean((xs @ w - ys) ** 2))(w)
        updates, state = optimiser.update(grad, state)
        return optax.apply_updates(w, updates), state, loss
    """,
    """\
    for _ in range(200):
        w, state, loss = update(w, state)
    print("fitted", w)
    jaxrun.record(final_loss=float(loss))
    """,
]
FAILS = [
    "import jax.numpy as jnp",
    "def f(x):\n    return x.missing",
    "y = 1\nf(jnp.ones(2))\nprint('never')",
    "print('not run')",
]
SYNTAX = ["import jax", "def broken(:\n    pass"]
SETTINGS = ["# jaxrun: timeout=120\nimport os, sys, jax, jaxrun\njaxrun.record(flag=os.environ.get('NB_FLAG'), argv=sys.argv[1:])"]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """`jaxrun run` on a folder of notebooks and .py scripts, --save-notebooks."""
    root = tmp_path_factory.mktemp("nb")
    folder = root / "docs"
    write_notebook(folder, "eqx_mlp.ipynb", EQUINOX)
    write_notebook(folder, "optax_fit.ipynb", OPTAX)
    write_notebook(folder, "fails.ipynb", FAILS)
    write_notebook(folder, "syntax.ipynb", SYNTAX)
    write_notebook(folder, "settings.ipynb", SETTINGS,
                   metadata={"jaxrun": {"env": {"NB_FLAG": "on"}, "args": ["--steps", "3"]}})
    write(folder, "a.py", "import jax.numpy as jnp\nprint(jnp.ones(2).sum())\n")
    write_notebook(folder, "a.ipynb", ["import jax.numpy as jnp\nprint(jnp.ones(3).sum())"])
    # Not programs: no JAX in the code cells (only in markdown); not JSON.
    write_notebook(folder, "plain.ipynb", ["md:uses jax elsewhere", "%matplotlib inline\nimport numpy as np"])
    (folder / "broken.ipynb").write_text('{"cells": [{"cell_type": "code", "source": "import jax"')
    results = root / "results"
    proc = jaxrun_cli("run", folder, "--results-dir", results, "-d", "cpu", "--no-history", "--no-compile-cache",
                      "--save-notebooks", "-j", "2", "--json")
    return folder, results, proc


def _results(results: Path) -> dict[str, ScriptResult]:
    batch = load(results / result_files.EXECUTION_RESULTS)
    return {r["script_name"]: ScriptResult.model_validate(r) for r in batch["script_results"]}


@pytest.mark.slow
def test_a_folder_of_notebooks_and_scripts_runs_both_with_the_same_files(mixed) -> None:
    folder, results, proc = mixed
    assert proc.returncode == 1, proc.stderr  # two notebooks fail on purpose
    found = _results(results)
    # a.py and a.ipynb do not collide: a notebook's <name> keeps its suffix.
    assert set(found) == {"a", "a.ipynb", "eqx_mlp.ipynb", "optax_fit.ipynb", "fails.ipynb", "syntax.ipynb",
                          "settings.ipynb"}
    for name in ("a", "a.ipynb", "eqx_mlp.ipynb", "optax_fit.ipynb", "settings.ipynb"):
        assert found[name].success, (name, found[name].error_message)
    assert found["a"].cells is None and [c.index for c in found["a.ipynb"].cells] == [1]
    assert found["optax_fit.ipynb"].results["final_loss"] < 1e-3
    assert found["eqx_mlp.ipynb"].compile_count >= 2  # filter_jit'd loss and step
    assert [str(p) for p in jaxrun.find_jax_scripts(folder)] == [str(folder / n) for n in (
        "a.ipynb", "a.py", "eqx_mlp.ipynb", "fails.ipynb", "optax_fit.ipynb", "settings.ipynb", "syntax.ipynb")]
    schemas = json.loads(jaxrun_cli("schema").stdout)
    Draft202012Validator(schemas["execution_results"]).validate(load(results / result_files.EXECUTION_RESULTS))
    for path in (results / "script_results").glob("*_result.json"):
        Draft202012Validator(schemas["script_result"]).validate(load(path))
    for name in found:
        assert (results / "logs" / f"{name}.stdout.log").exists()
    assert "loss" in (results / "logs" / "eqx_mlp.ipynb.stdout.log").read_text()
    # --json printed the same batch.
    assert {r["script_name"] for r in json.loads(proc.stdout)["script_results"]} == set(found)


@pytest.mark.slow
def test_what_is_not_a_program_is_not_discovered_and_a_broken_notebook_is_one_line(mixed) -> None:
    folder, results, proc = mixed
    batch = load(results / result_files.EXECUTION_RESULTS)
    assert "plain.ipynb" not in json.dumps(batch["script_results"])
    unreadable = batch["metadata"]["unreadable_paths"]
    assert any("broken.ipynb" in str(entry) and "not a valid notebook: not JSON" in str(entry) for entry in unreadable)
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_magics_and_installs_with_ipython(mixed) -> None:
    _, results, _ = mixed
    found = _results(results)
    eqx_cells = found["eqx_mlp.ipynb"].cells
    assert [c.outcome for c in eqx_cells] == ["ok"] * 4  # %time ran, loss0 defined by it
    assert "Wall time" in (results / "logs" / "eqx_mlp.ipynb.stdout.log").read_text()  # IPython's %time
    (warning,) = [w for w in found["optax_fit.ipynb"].warnings if "notebook" in w]
    assert "package installs not run" in warning and "cell 1 line 1: !pip install optax" in warning


@pytest.mark.slow
def test_a_failing_cell_is_named_with_its_line(mixed) -> None:
    folder, results, _ = mixed
    found = _results(results)
    fails = found["fails.ipynb"]
    assert fails.error_class == "script_error" and "AttributeError" in (fails.error_message or "")
    # Every code cell: the one after the failing cell is "not run", not left out.
    assert [(c.index, c.outcome, c.error_line) for c in fails.cells] == [(1, "ok", None), (2, "ok", None),
                                                                          (3, "error", 2), (4, "not run", None)]
    assert fails.cells[3].seconds is None and fails.cells[3].source == "print('not run')"
    assert f'File "{folder / "fails.ipynb"}:cell 3", line 2' in fails.traceback
    assert "f(jnp.ones(2))" in fails.traceback  # the cell's source line, from linecache
    assert error_location(fails, [str(folder)]) == "fails.ipynb:cell 2, line 2"  # innermost: inside f
    syntax = found["syntax.ipynb"]
    assert syntax.error_class == "syntax_error"
    assert [(c.index, c.outcome, c.error_line) for c in syntax.cells] == [(1, "ok", None), (2, "error", 1)]
    assert error_location(syntax, [str(folder)]) == "syntax.ipynb:cell 2, line 1"


@pytest.mark.slow
def test_settings_from_the_metadata_and_the_first_cell(mixed) -> None:
    _, results, _ = mixed
    result = _results(results)["settings.ipynb"]
    assert result.results == {"flag": "on", "argv": ["--steps", "3"]}
    assert set(result.settings) >= {"env", "args", "timeout"}
    assert "metadata.jaxrun" in result.settings["env"] and "cell 1:1" in result.settings["timeout"]


@pytest.mark.slow
def test_save_notebooks_writes_a_valid_executed_copy(mixed) -> None:
    folder, results, _ = mixed
    copy = nbformat.read(results / "notebooks" / "fails.ipynb", as_version=4)
    nbformat.validate(copy)
    code = [c for c in copy.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2, 3, None]
    assert code[2].outputs[-1]["output_type"] == "error" and code[2].outputs[-1]["ename"] == "AttributeError"
    assert code[3].outputs == []
    good = nbformat.read(results / "notebooks" / "eqx_mlp.ipynb", as_version=4)
    nbformat.validate(good)
    texts = "".join(o.get("text", "") for c in good.cells if c.cell_type == "code" for o in c.outputs)
    assert "loss" in texts and "Wall time" in texts
    assert json.loads((folder / "eqx_mlp.ipynb").read_text())["cells"][4]["outputs"] == []  # the user's file untouched


@pytest.mark.slow
def test_each_cell_time_is_what_the_cell_measured_of_itself(tmp_path: Path) -> None:
    # Each timed cell measures its own body with perf_counter; jaxrun's figure of the cell holds
    # that and little more (compiling the cell's code, two channel writes): a figure 2x off fails.
    def timed(body: str) -> str:
        return f"_t = time.perf_counter()\n{body}\nseen.append(time.perf_counter() - _t)"

    write_notebook(tmp_path / "t", "timed.ipynb", [
        "import time, jaxrun\nseen = []",
        timed("time.sleep(0.3)"),
        timed("import jax.numpy as jnp\nx = jnp.ones((300, 300))\n(x @ x).block_until_ready()"),
        timed("total = sum(range(3_000_000))"),
        "jaxrun.record(seen=seen)",
    ])
    batch = run_batch(tmp_path / "t", tmp_path / "r")
    (result,) = batch.script_results
    assert result.success, result.error_message
    seen, cells = result.results["seen"], result.cells[1:4]
    assert 0.3 <= cells[0].seconds < 0.3 + 0.1
    for own, cell in zip(seen, cells):
        assert own <= cell.seconds <= own * 1.5 + 0.02, (own, cell)
    assert sum(c.seconds for c in result.cells) <= result.body_time
    assert result.import_time + result.run_time <= result.body_time + 1e-6 and result.phases_note is None


@pytest.mark.slow
def test_a_cell_may_await_at_top_level_on_one_loop_for_the_whole_notebook(tmp_path: Path) -> None:
    """As in Jupyter (its kernel awaits on its event loop): a queue made on the loop in one cell
    is used by a task awaited in the next; an error in an awaiting cell names its line."""
    write_notebook(tmp_path / "a", "awaits.ipynb", [
        "import asyncio, time, jaxrun\nimport jax.numpy as jnp",
        "queue = asyncio.Queue()\n_t = time.perf_counter()\nawait asyncio.sleep(0.2)\nslept = time.perf_counter() - _t",
        "async def produce():\n    await queue.put(float(jnp.ones(3).sum()))\nawait produce()\ngot = await queue.get()",
        "jaxrun.record(got=got, slept=slept)",
        "await asyncio.sleep(0)\nraise ValueError('after awaiting')",
    ])
    (result,) = run_batch(tmp_path / "a", tmp_path / "r").script_results
    assert result.error_class == "script_error" and "after awaiting" in result.error_message
    assert result.results["got"] == 3.0
    assert result.results["slept"] <= result.cells[1].seconds <= result.results["slept"] + 0.05
    assert [c.outcome for c in result.cells] == ["ok", "ok", "ok", "ok", "error"] and result.cells[4].error_line == 2


@pytest.mark.slow
def test_code_that_calls_get_ipython_itself_gets_the_shell(tmp_path: Path) -> None:
    """No magic line, but get_ipython() in the code (as notebooks exported from IPython have):
    with IPython installed, the shell is there, as in Jupyter."""
    pytest.importorskip("IPython")
    write_notebook(tmp_path / "g", "calls.ipynb", [
        "import jax.numpy as jnp, jaxrun",
        "shell = get_ipython()\nshell.run_line_magic('load_ext', 'autoreload')\n"
        "jaxrun.record(shell=type(shell).__name__, total=float(jnp.ones(2).sum()))",
    ])
    (result,) = run_batch(tmp_path / "g", tmp_path / "r").script_results
    assert result.success, result.error_message
    assert result.results == {"shell": "InteractiveShell", "total": 2.0}


@pytest.mark.slow
def test_a_benchmarked_notebook_s_cells_are_the_medians_of_its_counted_runs(tmp_path: Path) -> None:
    write_notebook(tmp_path / "b", "bench.ipynb", [
        "import os, time, jax\nrun = len(os.listdir('.')) - 1",  # 0, 1, 2: the files it left before
        "open(f'mark{run}', 'w').close()\ntime.sleep(0.1 + 0.1 * run)",
    ])
    (result,) = run_batch(tmp_path / "b", tmp_path / "r", benchmark_runs=3).script_results
    assert result.success and result.timing == "median of 3 counted runs"
    assert 0.2 <= result.cells[1].seconds < 0.28  # sleeps of 0.1, 0.2, 0.3 s


def test_ipython_lines_are_skipped_with_one_warning_without_ipython(tmp_path: Path) -> None:
    # An interpreter where IPython is not importable: a virtual environment with nothing installed
    # (jaxrun reaches it through --python's link; the cells need no jax).
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    cells = ["x = 2\n%time y = x * 3\nif x:\n    !echo shell-line", "print('y is', globals().get('y'))",
             "%%bash\necho from-bash", "%%time\nz = x + 1\nprint('z is', z)"]
    notebook = write_notebook(tmp_path / "n", "magics.ipynb", cells)
    plain = run_batch(notebook, tmp_path / "plain", python=str(env / "bin" / "python"))
    (result,) = plain.script_results
    assert result.success, result.error_message
    (warning,) = [w for w in result.warnings if "IPython lines skipped" in w]
    assert ("cell 1 line 2: %time y = x * 3; cell 1 line 4: !echo shell-line; cell 3 line 1: %%bash; "
            "cell 4 line 1: %%time") in warning
    out = Path(result.stdout_log).read_text()
    assert "y is None" in out and "z is 3" in out and "from-bash" not in out
    # The same notebook where IPython is importable: every line runs.
    (with_ipython,) = run_batch(notebook, tmp_path / "ipython").script_results
    out = Path(with_ipython.stdout_log).read_text()
    assert with_ipython.success and "y is 6" in out and "shell-line" in out and "from-bash" in out and "z is 3" in out
    assert not [w for w in with_ipython.warnings if "notebook" in w]


def test_the_probe_knows_a_notebook_by_the_one_suffix() -> None:
    from jaxrun.probe import __main__ as probe_main
    from jaxrun.probe import notebook_cells

    assert probe_main.NOTEBOOK_SUFFIX == notebook_cells.SUFFIX


@pytest.mark.slow
def test_the_html_report_lists_each_notebook_cell(mixed, tmp_path: Path) -> None:
    _, results, _ = mixed
    proc = jaxrun_cli("report", results, "-o", tmp_path / "report.html")
    assert proc.returncode == 0, proc.stderr
    # What the reader sees: each notebook's block, its table's rows as Chromium renders them.
    driver = chrome()
    try:
        open_page(driver, tmp_path / "report.html", "table.cells tbody tr")
        summaries = {d.find_element("css selector", "summary").text.split(": ")[0]:
                     d.find_element("css selector", "summary").text.split(": ", 1)[1]
                     for d in driver.find_elements("css selector", "details") if d.find_elements("css selector", "table.cells")}
        blocks = {d.find_element("css selector", "summary").text.split(":")[0]:
                  [[td.text for td in tr.find_elements("css selector", "td")]
                   for tr in d.find_elements("css selector", "table.cells tbody tr")]
                  for d in driver.find_elements("css selector", "details") if d.find_elements("css selector", "table.cells")}
    finally:
        driver.quit()
    failing = blocks[next(name for name in blocks if name.endswith("fails.ipynb"))]
    assert [row[0] for row in failing] == [str(i) for i in range(1, len(failing) + 1)]  # In [N], in order
    assert [row[3] for row in failing] == ["ok", "ok", "error at line 2", "not run"]
    assert failing[-1][1:3] == ["print('not run')", "-"]  # never ran: no seconds
    assert any(name.endswith("fails.ipynb") and summary == "3 of 4 cells ran (1 not run)"
               for name, summary in summaries.items()), summaries
    trained = next(rows for name, rows in blocks.items() if "%time loss0 = float(loss_fn(model, x, y))" in
                   [row[1] for row in rows])
    assert all(row[2].endswith("s") and row[3] == "ok" for row in trained)  # seconds shown with their unit


# Every way a cell can end: (its code after a known sleep and a flushed print, outcome, ended_by).
SLEEP = 0.5
ENDINGS = {
    "returns": ("pass", "ok", "return"),
    "raises": ("raise ValueError('no')", "error", "exception"),
    "sys_exit": ("sys.exit(3)", "exit", "sys.exit(3)"),
    "os_exit": ("os._exit(3)", "exit", "os._exit(3)"),
    "os_exit_thread": ("t = threading.Thread(target=os._exit, args=(4,)); t.start(); time.sleep(30)", "exit",
                       "os._exit(4)"),
    "abort": ("os.abort()", "exit", "os.abort()"),
    "signal": ("os.kill(os.getpid(), signal.SIGTERM)", "exit", "the script sent its own process SIGTERM"),
    "timeout": ("time.sleep(60)", "not finished", None),
}


@pytest.mark.slow
def test_every_way_a_cell_ends_gives_its_outcome_its_true_seconds_and_its_output(tmp_path: Path) -> None:
    for name, (code, _, _) in ENDINGS.items():
        write_notebook(tmp_path / "n", f"{name}.ipynb", [
            "import os, signal, sys, threading, time\nif False:\n    import jax\n"
            "print('IPython loaded:', 'IPython' in sys.modules)\ndisplay('shown')",
            f"time.sleep({SLEEP})\nprint('printed', flush=True)\n{code}",
            "print('never')",
        ])
    batch = run_batch(tmp_path / "n", tmp_path / "r", timeout=8, jobs=2, save_notebooks=True)
    found = {r.script_name: r for r in batch.script_results}
    for name, (_, outcome, ended_by) in ENDINGS.items():
        result = found[f"{name}.ipynb"]
        cells = result.cells
        # The cell after it ran only when it returned; otherwise it is listed as not run.
        assert [(c.index, c.outcome) for c in cells][1:] == [(2, outcome), (3, "ok" if outcome == "ok" else "not run")], name
        assert result.ended_by == ended_by, name
        seconds = cells[1].seconds
        if name == "timeout":  # stopped from outside: up to the process's end, as the body
            assert seconds is not None and seconds > SLEEP
            assert abs(result.body_time - sum(c.seconds for c in cells if c.outcome != "not run")) < 0.5, (result.body_time, cells)
        else:
            assert seconds is not None and SLEEP <= seconds < SLEEP + 1.0, (name, seconds)
        copy = nbformat.read(tmp_path / "r" / "notebooks" / f"{name}.ipynb", as_version=4)
        nbformat.validate(copy)
        outputs = copy.cells[1].outputs
        if name != "timeout":  # what the cell printed before it ended, os._exit included
            assert outputs[0] == {"output_type": "stream", "name": "stdout", "text": "printed\n"}, (name, outputs)
        if outcome in ("error", "not finished"):  # why it ended: the exception, the time limit
            assert outputs[-1]["output_type"] == "error", (name, outputs)
            assert outputs[-1]["ename"] == {"raises": "ValueError", "timeout": "timeout"}[name]
    out = Path(found["timeout.ipynb"].stdout_log).read_text()
    assert "shown" in out and "IPython loaded: False" in out  # a notebook without IPython lines never loads it


def test_discovery_of_notebooks_stays_bounded_and_reads_their_settings(tmp_path: Path) -> None:
    from jaxrun.config.script_header import read_header
    from jaxrun.discover.scripts import search_jax_scripts
    from jaxrun.probe.notebook_cells import WHOLE_LIMIT

    blob = "x" * (WHOLE_LIMIT + 1024)  # past what is read whole: read for the code alone
    big = write_notebook(tmp_path, "big.ipynb", [f"print('{blob}')", "import jax.numpy as jnp"])
    write_notebook(tmp_path, "big_plain.ipynb", [f"print('{blob}')", "import numpy as np"])
    skipped = write_notebook(tmp_path, "skipped.ipynb", ["import jax"], metadata={"jaxrun": {"skip": True}})
    # A results folder's executed copies are never programs of a later run.
    write_notebook(tmp_path / "jaxrun_results" / "notebooks", "skipped.ipynb", ["import jax"])
    (tmp_path / "jaxrun_results" / ".jaxrun.lock").touch()
    assert search_jax_scripts(tmp_path).scripts == [big, skipped]
    (setting,) = read_header(skipped)
    assert (setting.key, setting.value) == ("skip", "skipped by its metadata")
    write_notebook(tmp_path, "typo.ipynb", ["import jax"], metadata={"jaxrun": {"timout": 5}})
    with pytest.raises(jaxrun.errors.UsageError, match=r"typo.ipynb: metadata.jaxrun: unknown key 'timout'.*timeout"):
        read_header(tmp_path / "typo.ipynb")


@pytest.mark.slow
def test_execute_jax_script_runs_a_notebook_beside_its_script(tmp_path: Path) -> None:
    notebook = write_notebook(tmp_path, "m.ipynb", ["import jax.numpy as jnp\nprint('sum', jnp.ones(4).sum())"])
    script = write(tmp_path, "m.py", "import jax.numpy as jnp\nprint('sum', jnp.ones(4).sum())\n")
    results = tmp_path / "r"
    ran = jaxrun.execute_jax_script(notebook, "cpu", results_dir=results, compile_cache=False, save_notebooks=True)
    plain = jaxrun.execute_jax_script(script, "cpu", results_dir=results, compile_cache=False)
    assert (ran.script_name, plain.script_name) == ("m.ipynb", "m") and ran.success and plain.success
    assert sorted(p.name for p in (results / "script_results").iterdir()) == ["m.ipynb_result.json", "m_result.json"]
    copy = nbformat.read(results / "notebooks" / "m.ipynb", as_version=4)
    nbformat.validate(copy)
    assert copy.cells[0].outputs == [{"output_type": "stream", "name": "stdout", "text": "sum 4.0\n"}]


@pytest.mark.slow
def test_run_verbose_prints_each_cell(mixed, tmp_path: Path) -> None:
    folder, _, _ = mixed
    proc = jaxrun_cli("run", folder / "fails.ipynb", "-v", "--results-dir", tmp_path / "r", "-d", "cpu",
                      "--no-history", "--no-compile-cache", env={"COLUMNS": "200"})
    assert proc.returncode == 1
    table = proc.stdout[proc.stdout.index("notebook cells"):]
    assert "y = 1" in table and "error at line 2" in table
    (last,) = [line for line in table.splitlines() if "print('not run')" in line]  # the cell after it, shown
    assert last.split()[-2:] == ["not", "run"] and " 4 " in last
    assert "at fails.ipynb:cell 2, line 2" in proc.stdout + proc.stderr
