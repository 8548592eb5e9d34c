"""The GNN pipeline's own layout (examples/gnn_pipeline/): `jaxrun run` on its `output/` folder.

The pipeline writes `output/11_render_output/<model>/<framework>/<Model Name>_<framework>.py`,
with spaces in the names, next to files that are not JAX scripts. The tree is copied to tmp_path
and run once, as a user would (`python -m jaxrun run ...` in a subprocess, on the CPU); the tests
below read what that run wrote. About 10 s on 2 cores, plus 2 plain `python` runs of ~4 s each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load

import jaxrun

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
PIPELINE_OUTPUT = REPO_ROOT / "examples" / "gnn_pipeline" / "output"

# <name> as jaxrun gives it (path relative to the searched folder, "/" -> "__", no ".py") ->
# (the script's path under output/, the files it writes to JAXRUN_OUTPUT_DIR, what it records)
RENDERED = {
    "11_render_output__t_maze__jax__T Maze Agent_jax": (
        "11_render_output/t_maze/jax/T Maze Agent_jax.py",
        ["T Maze Agent_simulation.json"],
        {"reward_rate", "cue_first_rate", "trial_steps_per_s"},
    ),
    "11_render_output__tiger_pomdp__jax__Tiger POMDP_jax": (
        "11_render_output/tiger_pomdp/jax/Tiger POMDP_jax.py",
        ["Tiger POMDP_simulation.json", "traces/agent0_beliefs.csv"],
        {"correct_open_rate", "listens_per_door", "agent_steps_per_s"},
    ),
}
# Files of the tree that are not JAX scripts: never run.
NOT_JAX = (
    "11_render_output/README.md",
    "11_render_output/tiger_pomdp/pymdp/Tiger POMDP_pymdp.py",
    "11_render_output/t_maze/rxinfer/T Maze Agent_rxinfer.jl",
)


def tree_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory: pytest.TempPathFactory, jaxrun_cache_dir: Path):
    """(copy of output/, results folder, the finished process, the copy's files before the run)."""
    base = tmp_path_factory.mktemp("gnn pipeline")  # a space in every path the run sees
    output = base / "output"
    shutil.copytree(PIPELINE_OUTPUT, output, ignore=shutil.ignore_patterns("__pycache__"))
    before = tree_files(output)
    results = base / "results"
    env = dict(os.environ, JAXRUN_CACHE_DIR=str(jaxrun_cache_dir))
    env.pop("JAX_PLATFORMS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "run", str(output), "--device", "cpu",
         "--results-dir", str(results), "--no-history"],
        capture_output=True, text=True, env=env, cwd=base, timeout=240,
    )
    return output, results, proc, before


def test_the_tree_holds_the_files_the_tests_name() -> None:
    files = tree_files(PIPELINE_OUTPUT)
    assert {script for script, _, _ in RENDERED.values()} | set(NOT_JAX) <= files


def test_exactly_the_rendered_jax_scripts_run_and_succeed(pipeline_run) -> None:
    output, results, proc, _ = pipeline_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2/2 succeeded" in proc.stdout
    doc = load(results / "jax_execution_results.json")
    assert doc["metadata"]["complete"] is True
    # In discovery order (sorted by relative path), named with the spaces kept.
    assert [r["script_name"] for r in doc["script_results"]] == list(RENDERED)
    for result in doc["script_results"]:
        script, _, recorded = RENDERED[result["script_name"]]
        assert result["script_path"] == str(output / script)
        assert result["success"] is True, result["error_message"]
        assert result["error_class"] is None and result["exit_code"] == 0
        assert result["device_used"] == "cpu"
        assert result["compile_count"] >= 1  # real JAX scripts compile
        assert set(result["results"]) == recorded
    # The same scripts, and only those, as the API finds them.
    assert jaxrun.find_jax_scripts(output) == [output / s for s, _, _ in RENDERED.values()]


def test_names_with_spaces_name_every_file_of_the_result(pipeline_run) -> None:
    _, results, _, _ = pipeline_run
    for name in RENDERED:
        assert " " in name
        per_script = load(results / "script_results" / f"{name}_result.json")
        assert per_script["script_name"] == name and per_script["success"] is True
        stdout = results / "logs" / f"{name}.stdout.log"
        assert per_script["stdout_log"] == str(stdout)
        assert (results / "logs" / f"{name}.stderr.log").is_file()
        model = name.rsplit("__", 1)[1].removesuffix("_jax")  # "Tiger POMDP", "T Maze Agent"
        assert stdout.read_text().startswith(f"{model}: ")


def test_each_result_lists_the_output_files_it_wrote(pipeline_run) -> None:
    output, results, _, before = pipeline_run
    doc = load(results / "jax_execution_results.json")
    for result in doc["script_results"]:
        name = result["script_name"]
        _, outputs, _ = RENDERED[name]
        assert result["output_files"] == outputs
        folder = results / "outputs" / name
        for rel in outputs:
            assert (folder / rel).is_file() and (folder / rel).stat().st_size > 0
        assert {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} == set(outputs)
        summary = load(folder / outputs[0])  # the JSON summary holds the numbers it recorded
        assert summary["model"] == name.rsplit("__", 1)[1].removesuffix("_jax")
        for key, value in result["results"].items():
            assert summary[key] == pytest.approx(value)
    # Under jaxrun the scripts wrote to JAXRUN_OUTPUT_DIR only: the searched tree is unchanged.
    assert tree_files(output) == before


def test_the_files_that_are_not_jax_scripts_were_not_run(pipeline_run) -> None:
    output, results, proc, _ = pipeline_run
    doc = load(results / "jax_execution_results.json")
    ran = {r["script_path"] for r in doc["script_results"]}
    for rel in NOT_JAX:
        assert (output / rel).is_file() and str(output / rel) not in ran
    for folder in ("script_results", "logs", "outputs"):
        for entry in (results / folder).iterdir():
            assert any(entry.name.startswith(name) for name in RENDERED), entry
    assert "pymdp" not in proc.stdout and "rxinfer" not in proc.stdout and "README" not in proc.stdout


@pytest.mark.parametrize("name", list(RENDERED))
def test_a_rendered_script_also_runs_under_plain_python(name: str, tmp_path: Path) -> None:
    """Without jaxrun's runner: no JAXRUN_OUTPUT_DIR, so its files go to output/ under the cwd."""
    script, outputs, _ = RENDERED[name]
    env = {k: v for k, v in os.environ.items() if k not in ("JAXRUN_OUTPUT_DIR", "JAX_PLATFORMS")}
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run(
        [sys.executable, str(PIPELINE_OUTPUT / script)], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    model_dir = tmp_path / "output" / Path(script).stem  # "output/Tiger POMDP_jax"
    assert tree_files(model_dir) == set(outputs)
