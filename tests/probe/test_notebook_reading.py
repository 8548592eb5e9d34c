"""Reading notebooks (probe/notebook_json.py, probe/notebook_cells.load, discovery): what jaxrun
uses of a notebook is what ``json`` reads of it, however the file is cut into chunks; a large
notebook is read in bounded memory; every bound of discovery says what it left out (in the
terminal and in the results); a notebook that cannot be run is refused before anything runs.

Real files throughout: notebooks of real sizes (a 20 MB one-string cell, 60 MB of image
output) on disk, the real command line in a subprocess."""

from __future__ import annotations

import base64
import io
import json
import os
import tracemalloc
from pathlib import Path

import pytest
from helpers import jaxrun as jaxrun_cli
from helpers import load, write, write_notebook
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxrun
from jaxrun.discover import scripts
from jaxrun.errors import UsageError
from jaxrun.probe import notebook_cells, notebook_json
from jaxrun.results import result_files

MiB = 1 << 20


def _what_jaxrun_uses(notebook: dict) -> tuple:
    """What jaxrun reads of a notebook: its code cells (number, position, source) and settings."""
    return (notebook_cells.code_cells(notebook), notebook_cells.settings(notebook), notebook.get("nbformat"))


# --- the reader agrees with json ---------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | st.sampled_from(
    ['\\', '"', '\\"', '\\\\"', 'a\\', "\u00e9\u4e2d\U0001f600", "\n\t\r", "x" * 5000, '\\' * 9 + '"',
     "line\n" * 100, "\u00e9" * 3000])
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                     | _text, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
                     max_leaves=12)
_source = _text | st.lists(_text, max_size=4)
_cell = st.fixed_dictionaries(
    {"cell_type": st.sampled_from(["code", "markdown", "raw"]), "source": _source},
    optional={"metadata": st.dictionaries(_text, _json, max_size=3), "outputs": st.lists(_json, max_size=3),
              "execution_count": st.none() | st.integers(0, 99), "attachments": _json})
_notebook = st.fixed_dictionaries(
    {"cells": st.lists(_cell | _json, max_size=5), "nbformat": st.integers(4, 4)},
    optional={"metadata": st.dictionaries(st.sampled_from(["jaxrun", "kernelspec", "widgets"]) | _text, _json,
                                          max_size=3),
              "nbformat_minor": st.integers(0, 5)})


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(notebook=_notebook, indent=st.sampled_from([None, 1, 2]), ascii_only=st.booleans(),
       chunk=st.sampled_from([1, 2, 3, 7, 64, 4096]), reorder=st.booleans(), before_311=st.booleans())
def test_the_reader_keeps_what_json_reads_however_the_file_is_cut(
        notebook: dict, indent: int | None, ascii_only: bool, chunk: int, reorder: bool, before_311: bool) -> None:
    if reorder:  # keys in another order than Jupyter's (a cell's source before its type)
        notebook = {k: notebook[k] for k in reversed(list(notebook))}
        notebook["cells"] = [{k: c[k] for k in reversed(list(c))} if isinstance(c, dict) else c
                             for c in notebook["cells"]]
    data = json.dumps(notebook, indent=indent, ensure_ascii=ascii_only).encode("utf-8")
    old = notebook_json.CHUNK, notebook_json._RUN
    notebook_json.CHUNK = chunk
    if before_311:  # the token runs an interpreter without possessive quantifiers uses
        notebook_json._RUN = notebook_json._RUN_BOUNDED
    try:
        read = notebook_json.read_notebook(io.BytesIO(data).read)
    finally:
        notebook_json.CHUNK, notebook_json._RUN = old
    assert not read.code_cut
    assert _what_jaxrun_uses(read.data) == _what_jaxrun_uses(json.loads(data))


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(notebook=_notebook, data=st.data())
def test_a_cut_or_merged_notebook_is_an_error_at_the_line_and_column_json_gives(notebook: dict, data) -> None:
    text = json.dumps(notebook, indent=1)  # as Jupyter writes it: no string spans two lines
    at = data.draw(st.integers(0, len(text) - 1))
    line_start = text.rfind("\n", 0, at) + 1
    damaged = data.draw(st.sampled_from([
        text[:at],  # cut anywhere
        text[:line_start] + "<<<<<<< HEAD\n" + text[line_start:],  # a merge's conflict marker, on a line of its own
    ]))
    try:
        json.loads(damaged)
    except json.JSONDecodeError as exc:
        expected = (exc.lineno, exc.colno)
    else:
        return  # still JSON (a marker inside a string)
    old = notebook_json.CHUNK
    notebook_json.CHUNK = 5
    try:
        with pytest.raises(notebook_json.JsonError) as raised:
            notebook_json.read_notebook(io.BytesIO(damaged.encode()).read)
    finally:
        notebook_json.CHUNK = old
    where = notebook_json.position(raised.value.offset, io.BytesIO(damaged.encode()).read)
    if raised.value.what is None:  # a byte JSON does not allow there: json stops at the same one
        assert where == expected
    else:  # the file ends too soon: said at its end (json says where the cut value began)
        assert raised.value.what.startswith("the file ends")
        assert where == (damaged.count("\n") + 1, len(damaged) - damaged.rfind("\n"))


def _big_notebook(path: Path, code: list[str], output_bytes: int) -> Path:
    """A notebook of real JAX work with a big embedded image output (base64), as Jupyter writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = base64.b64encode(os.urandom(output_bytes * 3 // 4)).decode()
    cells = [{"cell_type": "code", "execution_count": i + 1, "id": f"c{i}", "metadata": {},
              "outputs": [{"output_type": "display_data", "metadata": {},
                           "data": {"image/png": image, "text/plain": ["<Figure size 640x480 with 1 Axes>"]}}],
              "source": source.splitlines(keepends=True)} for i, source in enumerate(code)]
    path.write_text(json.dumps({"cells": cells, "metadata": {"jaxrun": {"timeout": 60}}, "nbformat": 4,
                                "nbformat_minor": 5}, indent=1))
    return path


def test_a_large_notebook_is_read_for_its_code_in_bounded_memory(tmp_path: Path) -> None:
    path = _big_notebook(tmp_path / "plots.ipynb", ["import jax.numpy as jnp\nx = jnp.ones(3)", "print(x)"],
                         30 * MiB)
    assert path.stat().st_size > 60 * MiB
    tracemalloc.start()
    try:
        notebook = notebook_cells.load(str(path), size_limit=scripts.NOTEBOOK_SIZE_LIMIT,
                                       code_limit=scripts.NOTEBOOK_CODE_LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB  # a chunk and the code (json.loads: ~3 times the file)
    whole = json.loads(path.read_bytes())
    assert _what_jaxrun_uses(notebook.data) == _what_jaxrun_uses(whole)
    assert scripts.search_jax_scripts(tmp_path).scripts == [path]


def test_a_large_notebook_runs_cell_by_cell_and_its_executed_copy_is_written(tmp_path: Path) -> None:
    """Past the whole-read size, the probe reads the notebook with the same reader as scripts."""
    path = _big_notebook(tmp_path / "s" / "plots.ipynb",
                         ["import jax.numpy as jnp\nx = jnp.arange(4.0)", "print('sum', float(x.sum()))"], 6 * MiB)
    assert path.stat().st_size > notebook_cells.WHOLE_LIMIT
    proc = jaxrun_cli("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "-d", "cpu",
                      "--save-notebooks", "--no-compile-cache")
    assert proc.returncode == 0, proc.stderr
    (result,) = load(tmp_path / "r" / result_files.EXECUTION_RESULTS)["script_results"]
    assert [(c["index"], c["outcome"]) for c in result["cells"]] == [(1, "ok"), (2, "ok")]
    assert result["settings"]["timeout"].endswith("metadata.jaxrun")  # its metadata read by the same reader
    copy = json.loads((tmp_path / "r" / "notebooks" / "plots.ipynb").read_text())
    assert copy["cells"][1]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "sum 6.0\n"}]


# --- discovery's bounds say what they left out ---------------------------------------------------

def _one_string_cell(path: Path, megabytes: int) -> Path:
    """A notebook whose one cell's source is one JSON string (not a list of lines), the import
    after a long data literal."""
    data = "# a table of values\nvalues = [" + ",".join(["1"] * (megabytes * MiB // 2)) + "]\n"
    source = data + "import jax.numpy as jnp\nprint(jnp.asarray(values).sum())\n"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {},
                                           "outputs": [], "source": source}],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


@pytest.mark.parametrize("megabytes", [15, 20])
def test_a_notebook_of_one_long_source_string_is_found_at_any_size(tmp_path: Path, megabytes: int) -> None:
    path = _one_string_cell(tmp_path / "table.ipynb", megabytes)
    assert path.stat().st_size > megabytes * 1_000_000
    assert scripts.search_jax_scripts(tmp_path) == scripts.ScriptSearch([path], [])


def test_every_bound_of_discovery_says_what_it_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "s"
    write(folder, "ok.py", "import jax\n")
    # A notebook past the bound on bytes read: a real notebook's start, the rest of the file a hole.
    huge = write_notebook(folder, "huge.ipynb", ["import jax"])
    with huge.open("r+b") as f:
        f.truncate(scripts.NOTEBOOK_SIZE_LIMIT + MiB)
    # Bounds on code and on .py scanning, lowered so that the files stay a few MiB.
    monkeypatch.setattr(scripts, "NOTEBOOK_CODE_LIMIT", 2 * MiB)
    monkeypatch.setattr(scripts, "SCAN_LIMIT", 2 * MiB)
    write_notebook(folder, "long_code.ipynb", ["x = '" + "y" * (3 * MiB) + "'", "import jax"])
    write(folder, "data.py", "values = [\n" + "1,\n" * (2 * MiB) + "]\nimport jax\n")
    write(folder, "plain_data.py", "values = 1\n" * 10)  # small and no JAX: not reported
    search = scripts.search_jax_scripts(folder)
    assert search.scripts == [folder / "ok.py"]
    reasons = dict(search.unreadable)
    assert set(reasons) == {"huge.ipynb", "long_code.ipynb", "data.py"}
    assert reasons["huge.ipynb"].startswith("257 MiB: more than the 256 MiB discovery reads of a notebook")
    assert reasons["long_code.ipynb"].startswith("no JAX import in the first 2 MiB of its code cells")
    assert reasons["data.py"].startswith("no JAX import in its first 2 MiB")
    assert all(reason.endswith("pass it by name to run it, or --exclude it") for reason in reasons.values())


def test_the_terminal_and_the_results_say_what_a_bound_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "ok.py", "if False:\n    import jax\nprint('ran')\n")
    huge = write_notebook(folder, "huge.ipynb", ["import jax"])
    with huge.open("r+b") as f:
        f.truncate(scripts.NOTEBOOK_SIZE_LIMIT + MiB)
    proc = jaxrun_cli("run", folder, "--results-dir", tmp_path / "r", "--no-history", "-d", "cpu")
    assert proc.returncode == 0, proc.stderr
    said = "huge.ipynb: 257 MiB: more than the 256 MiB discovery reads of a notebook: pass it by name to run it"
    assert said in proc.stderr
    batch = load(tmp_path / "r" / result_files.EXECUTION_RESULTS)
    assert [entry for entry in batch["metadata"]["unreadable_paths"] if said in entry]
    assert said in (tmp_path / "r" / result_files.EXECUTION_LOG).read_text()


# --- a notebook that cannot be run is refused before anything runs ----------------------------

_RAN = "import os, pathlib\nif False:\n    import jax\npathlib.Path(os.environ.get('RAN', os.devnull)).write_text('ran')\n"


def _damaged(folder: Path, kind: str) -> Path:
    good = write_notebook(folder, "nb.ipynb", ["import jax", "print(1)"])
    text = good.read_text()
    if kind == "big":  # past the whole-read size: the reader's path, a merge marker in its outputs
        cells = json.loads(text)
        cells["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "z" * (5 * MiB)}]
        text = json.dumps(cells, indent=1).replace('"outputs": [', '"outputs": [\n<<<<<<< HEAD\n', 1)
    # Each mentions JAX, so that discovery reads it (a file that mentions none is no candidate).
    damaged = {"cut": text[:text.index("import jax") + 20], "not_json": "import jax\nprint('a script')\n",
               "big": text, "no_cells": '{"nbformat": 4, "metadata": {"title": "jax"}}',
               "nbformat3": '{"nbformat": 3, "worksheets": [{"cells": [{"input": "import jax"}]}]}'}[kind]
    good.write_text(damaged)
    return good


@pytest.mark.parametrize("kind", ["cut", "not_json", "big", "no_cells", "nbformat3"])
def test_a_named_notebook_that_is_not_one_is_a_usage_error_before_anything_runs(tmp_path: Path, kind: str) -> None:
    notebook = _damaged(tmp_path / "nb", kind)
    script = write(tmp_path / "s", "first.py", _RAN)
    marker = tmp_path / "ran"
    proc = jaxrun_cli("run", script, notebook, "--results-dir", tmp_path / "r", "--no-history", "-d", "cpu",
                      env={"RAN": str(marker)})
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"jaxrun: error: {notebook}: not a valid notebook: ") and "Traceback" not in line
    if kind in ("cut", "big"):
        assert " at line " in line and " column " in line
    assert not marker.exists() and not (tmp_path / "r").exists()  # nothing ran, nothing written
    with pytest.raises(UsageError, match="not a valid notebook"):
        jaxrun.execute_jax_script(notebook, "cpu")
    with pytest.raises(UsageError, match="not a valid notebook"):
        jaxrun.run_jax_scripts(notebook, device="cpu", results_dir=tmp_path / "r2", history=False)
    # Found in a folder, it is what discovery could not read: reported, the rest runs.
    write(tmp_path / "nb", "other.py", _RAN)
    search = scripts.search_jax_scripts(tmp_path / "nb")
    assert search.scripts == [tmp_path / "nb" / "other.py"]
    ((rel, reason),) = search.unreadable
    assert rel == "nb.ipynb" and reason == line.removeprefix(f"jaxrun: error: {notebook}: ")


def test_warm_mode_for_a_notebook_is_a_usage_error_before_anything_runs(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "a_first.py", _RAN + "def main():\n    return 1\n")
    notebook = write_notebook(folder, "nb.ipynb", ["import jax", "def main():\n    return 1"])
    marker = tmp_path / "ran"
    for target in (folder, notebook):
        proc = jaxrun_cli("run", target, "--warm", "--results-dir", tmp_path / "r", "--no-history", "-d", "cpu",
                          env={"RAN": str(marker)})
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("jaxrun: error: ") and "nb.ipynb: warm mode calls main(), set by --warm" in line
        assert "Traceback" not in line and not marker.exists() and not (tmp_path / "r").exists()
    # The notebook's own setting, and the API's keyword.
    own = write_notebook(tmp_path / "own", "nb.ipynb", ["import jax"], metadata={"jaxrun": {"entry": "main"}})
    proc = jaxrun_cli("run", own, "--results-dir", tmp_path / "r", "--no-history", "-d", "cpu")
    assert proc.returncode == 2 and "nb.ipynb: metadata.jaxrun, a function of a .py script" in proc.stderr, proc.stderr
    with pytest.raises(UsageError, match=r"nb.ipynb: warm mode calls main\(\)"):
        jaxrun.execute_jax_script(notebook, "cpu", entry="main")
    # (a_first.py defines main(), so the folder's refusal is the notebook's)
    with pytest.raises(UsageError, match=r"nb.ipynb: warm mode calls main\(\)"):
        jaxrun.run_jax_scripts(folder, device="cpu", entry="main", results_dir=tmp_path / "r", history=False)
    assert not marker.exists()
