"""Parameter sweeps run for real: each point a job of its own, named by its parameters in every
file and on every surface, its values reaching the script every way jaxrun passes them, the
parameters jaxrun applies itself applied, and the persistent compilation cache shared between
points whose programs are the same."""

from __future__ import annotations

import csv
import json
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import load, tables, write

from jaxrun.present.view import read_batch_view

NO_JAX = """\
import os, sys
if False:
    import jax  # noqa: F401  (discovery takes it; the run never imports jax)
import jaxrun
jaxrun.record(seen=jaxrun.params(n=0, tag="none"), argv=sys.argv[1:],
              env_n=os.environ.get("JAXRUN_PARAM_N"), env_json=os.environ.get("JAXRUN_PARAMS"),
              var=os.environ.get("FROM_ENV"))
"""

MATMUL = """\
import jax, jax.numpy as jnp
import jaxrun
p = jaxrun.params(batch=4, devices=1)
x = jnp.ones((p["batch"], 32), jnp.float32)
total = jax.jit(lambda a: (a @ a.T).sum())(x)
jaxrun.record(device_count=jax.device_count(), rows=int(total) // (32 * p["batch"]), throughput=p["batch"] * 10.0)
"""


def test_each_point_is_a_job_named_by_its_parameters_and_reads_them_every_way(tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, "a.py", NO_JAX)
    result = jaxrun_cli.run("run", "a.py", "--param", "n=1,2", "--param", "tag=x,y", "--zip", "--env", "FROM_ENV={tag}",
                            "--results-dir", "out", "--no-history", "--", "--n={n}", "{other}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    files = sorted(p.name for p in (tmp_path / "out" / "script_results").iterdir())
    assert files == ["a[n=1,tag=x]_result.json", "a[n=2,tag=y]_result.json"]
    for n, tag in ((1, "x"), (2, "y")):
        got = load(tmp_path / "out" / "script_results" / f"a[n={n},tag={tag}]_result.json")
        assert got["script_name"] == f"a[n={n},tag={tag}]" and got["params"] == {"n": n, "tag": tag}
        recorded = got["results"]
        assert recorded["seen"] == {"n": n, "tag": tag}  # jaxrun.params(), its defaults overridden
        assert recorded["argv"] == [f"--n={n}", "{other}"]  # a name that is not a parameter stays as written
        assert recorded["env_n"] == str(n) and json.loads(recorded["env_json"]) == {"n": n, "tag": tag}
        assert recorded["var"] == tag
        assert (tmp_path / "out" / "logs" / f"a[n={n},tag={tag}].stdout.log").is_file()
    view = read_batch_view(tmp_path / "out")
    assert [s.label for s in view.scripts] == ["a.py[n=1,tag=x]", "a.py[n=2,tag=y]"]
    (sweep,) = view.sweeps
    assert sweep.script == "a.py" and sweep.params == ["n", "tag"]
    assert [[p.text(c) for c in sweep.columns[:3]] for p in sweep.points] == [["1", "x", "ok"], ["2", "y", "ok"]]
    # Outside jaxrun the script's own defaults hold.
    import subprocess
    import sys

    from helpers import child_env

    plain = subprocess.run([sys.executable, "-c", "import jaxrun; print(jaxrun.params(n=7))"], env=child_env(),
                           capture_output=True, text=True, timeout=60)
    assert plain.stdout.strip() == "{'n': 7}", plain.stderr


def test_a_config_table_a_list_of_tables_and_a_per_script_table_sweep_each_script_as_asked(
        tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, "a.py", NO_JAX)
    write(tmp_path, "b.py", NO_JAX)
    write(tmp_path, "c.py", NO_JAX)
    (tmp_path / "jaxrun.toml").write_text(
        '[[sweep]]\nn = [1, 2]\n[[sweep]]\nn = [3]\ntag = ["big"]\n'
        '[scripts."b.py"]\nsweep = { tag = ["p", "q"] }\n'
        '[scripts."c.py"]\nskip = "not today"\n')
    result = jaxrun_cli.run("run", ".", "--results-dir", "out", "--no-history", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    names = sorted(p.name.removesuffix("_result.json") for p in (tmp_path / "out" / "script_results").iterdir())
    assert names == ["a[n=1]", "a[n=2]", "a[n=3,tag=big]", "b[tag=p]", "b[tag=q]"]
    assert load(tmp_path / "out" / "script_results" / "a[n=3,tag=big]_result.json")["results"]["seen"] == \
        {"n": 3, "tag": "big"}


def test_jaxrun_applies_x64_matmul_precision_and_device_and_a_point_on_a_device_says_it_once(
        tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, "s.py", "import jax, jax.numpy as jnp\nimport jaxrun\n"
          "jaxrun.record(dtype=str(jnp.ones(1).dtype), precision=str(jax.config.jax_default_matmul_precision))\n")
    result = jaxrun_cli.run("run", "s.py", "--param", "x64=true,false", "--param", "matmul_precision=highest",
                            "--param", "device=cpu", "--results-dir", "out", "--no-history", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for x64, dtype in (("true", "float64"), ("false", "float32")):
        got = load(tmp_path / "out" / "script_results" / f"s[x64={x64},matmul_precision=highest,device=cpu]_result.json")
        assert got["results"] == {"dtype": dtype, "precision": "highest"}
        assert got["numerics"]["x64"] is (x64 == "true") and got["device_requested"] == "cpu"
    assert [s.label for s in read_batch_view(tmp_path / "out").scripts] == [
        "s.py[x64=true,matmul_precision=highest,device=cpu]", "s.py[x64=false,matmul_precision=highest,device=cpu]"]


@pytest.mark.slow
def test_a_sweep_of_batch_sizes_and_device_counts_is_six_named_points_on_every_surface(
        tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, "train.py", MATMUL)
    history = tmp_path / "h.sqlite"
    result = jaxrun_cli.run(
        "run", "train.py", "--param", "batch=8,16,32", "--param", "devices=1,2", "--benchmark-runs", "2",
        "--results-dir", "out", "--history", str(history), "--markdown", "out.md", "--junit-xml", "junit.xml",
        "--export-csv", "out.csv", "--json", cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr
    labels = [f"train.py[batch={b},devices={d}]" for b in (8, 16, 32) for d in (1, 2)]
    names = [f"train[batch={b},devices={d}]" for b in (8, 16, 32) for d in (1, 2)]
    batch = json.loads(result.stdout)
    assert [r["script_name"] for r in batch["script_results"]] == names
    for r in batch["script_results"]:
        p = r["params"]
        # devices is applied: that many simulated CPU devices; the batch reaches the program.
        assert r["results"]["device_count"] == p["devices"] and r["results"]["rows"] == p["batch"]
        assert r["benchmark"]["statistics"]["wall_time"]["n"] == 2
    # Markdown: the table of every script and the sweep's table, as a GFM parser reads them.
    md = tables((tmp_path / "out.md").read_text())
    assert [row[0] for row in md["Every script"][1:]] == labels
    sweep = md["Sweep: `train.py`"]
    assert sweep[0][:4] == ["batch", "devices", "status", "time"]
    assert [row[:3] for row in sweep[1:]] == [[str(b), str(d), "ok"] for b in (8, 16, 32) for d in (1, 2)]
    view = read_batch_view(tmp_path / "out")
    (swept,) = view.sweeps
    assert [[p.text(c) for c in swept.columns] for p in swept.points] == [row for row in sweep[1:]]
    # JUnit (a testcase per job) and the CSV export name the points.
    cases = [c.get("name") for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")]
    assert cases == labels
    with open(tmp_path / "out.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["script"] for r in rows] == labels
    # The history keeps each point apart: six groups, each its own mode.
    with sqlite3.connect(history) as db:
        modes = sorted(m for (m,) in db.execute("SELECT DISTINCT mode FROM runs"))
    assert modes == sorted(f"process[batch={b},devices={d}]" for b in (8, 16, 32) for d in (1, 2))
    # jaxrun compare pairs the points by name.
    compared = jaxrun_cli.run("compare", "out", "out", "--json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    assert sorted(s["script_name"] for s in report["scripts"]) == sorted(names)
    # Each point against itself, with two runs a side: paired, and too few runs for a verdict.
    assert {s["verdict"] for s in report["scripts"]} == {"too few runs to judge"}


@pytest.mark.slow
def test_points_that_change_only_a_value_share_the_compile_cache_and_the_terminal_says_so(
        tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, "step.py", "import jax, jax.numpy as jnp\nimport jaxrun\n"
          "lr = jnp.float32(jaxrun.params(lr=0.1)['lr'])\n"
          "w = jax.jit(lambda w, lr: w - lr * jnp.tanh(w))(jnp.ones(256), lr)\n"
          "jaxrun.record(w0=float(w[0]))\n")
    result = jaxrun_cli.run("run", "step.py", "--param", "lr=0.1,0.2,0.3", "--compile-cache", str(tmp_path / "cache"),
                            "--results-dir", "out", "--no-history", cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    got = {lr: load(tmp_path / "out" / "script_results" / f"step[lr={lr}]_result.json") for lr in (0.1, 0.2, 0.3)}
    assert got[0.1]["compile_count"] >= 1 and got[0.1]["cache_hits"] == 0  # the first point compiles
    for lr in (0.2, 0.3):  # the others load what it stored
        assert got[lr]["compile_count"] == 0 and got[lr]["cache_hits"] == got[0.1]["compile_count"], got[lr]
        assert abs(got[lr]["results"]["w0"] - (1 - lr * 0.7615941559557649)) < 1e-6
    out = result.stdout + result.stderr
    assert "sweep: step.py" in out
    loaded = got[0.1]["compile_count"] * 2
    assert (f"the points shared the persistent compilation cache: 2 of 3 loaded {loaded} executable"
            in " ".join(out.split())), out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] in (["0.1"], ["0.2"], ["0.3"])}
    assert rows["0.2"][1] == "ok" and f"{got[0.1]['compile_count']} cached" in " ".join(rows["0.2"]), rows


def test_the_api_runs_one_point_as_a_sweep_would_and_refuses_a_sweep(tmp_path: Path) -> None:
    import jaxrun

    script = write(tmp_path, "a.py", NO_JAX)
    result = jaxrun.execute_jax_script(script, params={"n": 3, "tag": "t"}, args=["--n={n}"], env={"FROM_ENV": "{tag}"},
                                       results_dir=tmp_path / "out")
    assert result.success and result.script_name == "a[n=3,tag=t]" and result.params == {"n": 3, "tag": "t"}
    assert result.results["seen"] == {"n": 3, "tag": "t"} and result.results["argv"] == ["--n=3"]
    assert result.results["var"] == "t"
    assert (tmp_path / "out" / "script_results" / "a[n=3,tag=t]_result.json").is_file()
    with pytest.raises(jaxrun.UsageError, match="a sweep is a batch of them: run_jax_scripts"):
        jaxrun.execute_jax_script(script, sweep={"n": [1, 2]})


def test_a_devices_sweep_on_gpus_gives_each_point_the_first_n_gpus_or_says_why_it_cannot(tmp_path: Path) -> None:
    # Recorded device facts listing two GPUs: this machine has none, the plan is the real code.
    from fake_gpu import GpuFacts

    from jaxrun.config.options import BatchOptions
    from jaxrun.errors import UsageError
    from jaxrun.plan.batch_plan import make_jobs, plan_devices, plan_scripts

    script = write(tmp_path, "a.py", NO_JAX)
    two_gpus = GpuFacts(2)()

    def jobs(**given):  # type: ignore[no-untyped-def]
        options = BatchOptions.build("api", paths=[script], device="gpu", sweep={"devices": [1, 2]},
                                     results_dir=tmp_path / "out", **given)
        planned, _ = plan_scripts(options, [(script, "a")])
        return make_jobs(options, planned, plan_devices(options, two_gpus), two_gpus)

    found = jobs()
    assert [j.label for j in found] == ["a.py[devices=1]", "a.py[devices=2]"]
    assert [j.run_options.env["CUDA_VISIBLE_DEVICES"] for j in found] == ["0", "0,1"]
    assert [j.run_options.host_devices for j in found] == [1, 2]  # a CPU fallback keeps the count
    with pytest.raises(UsageError, match=r"with jobs=1 on the local backend \(backend='local'\), not jobs=2$"):
        jobs(jobs=2)
    options = BatchOptions.build("api", paths=[script], device="gpu", sweep={"devices": [4]}, results_dir=tmp_path)
    planned, _ = plan_scripts(options, [(script, "a")])
    with pytest.raises(UsageError, match="devices=4; this machine has 2 GPU"):
        make_jobs(options, planned, plan_devices(options, two_gpus), two_gpus)


def test_recorded_figures_past_the_tables_columns_are_named_in_a_note_and_plotted_in_the_report(
        tmp_path: Path, jaxrun_cli) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, "r.py", "if False:\n    import jax\nimport jaxrun\n"
          "n = jaxrun.params(n=1)['n']\njaxrun.record(**{f'f{i}': n * i for i in range(1, 7)}, flag=True)\n")
    result = jaxrun_cli.run("run", "r.py", "--param", "n=1,2", "--results-dir", "out", "--no-history", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (sweep,) = read_batch_view(tmp_path / "out").sweeps
    assert [c.label for c in sweep.columns if c.key.startswith("results.")] == ["f1", "f2", "f3", "f4"]
    assert [c.label for c in sweep.more] == ["f5", "f6"]  # a boolean is no figure
    assert sweep.notes == ["recorded figures in the report's plot and each result's results, not in this table: "
                           "f5, f6"]
    assert [p.values["results.f6"] for p in sweep.points] == [6, 12]
    from jaxrun.present.reports.sweep_section import sweep_figure

    figure, _ = sweep_figure(sweep)
    menu = [button.label for button in figure.layout.updatemenus[0].buttons]
    assert menu[-6:] == ["f1", "f2", "f3", "f4", "f5", "f6"]
