"""The extension points, as a third party uses them: a package of its own, installed by pip, adds a
backend (entry point group ``jaxrun.backends``) and an output (``jaxrun.outputs``) without a line
of jaxrun edited, and ``jaxrun run`` uses both; what the backend declares it cannot do is refused
before anything runs, and an installed output that cannot be loaded is a line of the run log, not
a failed batch."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import SRC, jaxrun, write

PACKAGE = "toy_jaxrun_ext"

MODULE = '''
import json, os
from jaxrun.executors.backends import Backend
from jaxrun.executors.sequential import SequentialExecutor
from jaxrun.outputs.declarations import Output
from jaxrun.plan.sink import BaseSink


class ToyExecutor(SequentialExecutor):
    """Runs the jobs one after another, as the sequential executor does, and says which it ran."""

    def run(self, jobs, run_job, sink):
        super().run(jobs, run_job, sink)
        with open(os.environ["TOY_BACKEND_FILE"], "w") as f:
            json.dump(sorted(job.file_name for job in jobs), f)


class ToySink(BaseSink):
    def __init__(self, path):
        self.path, self.seen = path, []

    def on_result(self, job, result):
        self.seen.append([result.script_name, result.success, result.body_time])
        return result

    def on_end(self, batch):
        with open(self.path, "w") as f:
            json.dump({"results": self.seen, "complete": batch.metadata.complete}, f)


def make_output(context):
    return ToySink(os.environ["TOY_OUTPUT_FILE"])


BACKEND = Backend("toy", "toy_jaxrun_ext:ToyExecutor", "Toy", processes=False)
OUTPUT = Output("toy_output", "toy_jaxrun_ext:make_output")
'''

ENTRY_POINTS = """[jaxrun.backends]
toy = toy_jaxrun_ext:BACKEND

[jaxrun.outputs]
toy_output = toy_jaxrun_ext:OUTPUT
broken_output = toy_jaxrun_ext:NO_SUCH_THING
"""


def _wheel(folder: Path) -> Path:
    """A wheel of the toy package, made by hand (the format is a zip with a RECORD): no build
    backend, no network."""
    info = f"{PACKAGE}-0.1.dist-info"
    files = {
        f"{PACKAGE}.py": MODULE,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": ENTRY_POINTS,
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"{PACKAGE}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy package installed by pip into a folder of its own (never into the test's environment:
    its output would join every other test's batch)."""
    root = tmp_path_factory.mktemp("toy")
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                    str(target), str(_wheel(root))], check=True, capture_output=True, timeout=120)
    assert (target / f"{PACKAGE}-0.1.dist-info" / "entry_points.txt").is_file()
    return target


def _env(site: Path | None, tmp_path: Path) -> dict[str, str]:
    paths = [str(SRC), *([str(site)] if site else []), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p), "TOY_BACKEND_FILE": str(tmp_path / "backend.json"),
            "TOY_OUTPUT_FILE": str(tmp_path / "output.json")}


def test_an_installed_backend_and_output_run_a_batch(installed: Path, tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", "import jax\nimport time\ntime.sleep(0.2)\n")
    write(tmp_path / "s", "b.py", "import jax\nraise SystemExit(3)\n")
    out = tmp_path / "r"
    done = jaxrun("run", tmp_path / "s", "--backend", "toy", "--results-dir", out, "--no-history",
                  env=_env(installed, tmp_path))
    assert done.returncode == 1, done.stderr  # b.py failed: the batch's exit status, as on any backend
    # The backend ran both jobs, and jaxrun's own outputs wrote them.
    assert json.loads((tmp_path / "backend.json").read_text()) == ["a", "b"]
    batch = json.loads((out / "jax_execution_results.json").read_text())
    assert [(r["script_name"], r["success"]) for r in batch["script_results"]] == [("a", True), ("b", False)]
    assert "on the toy backend" in (out / "jax_execution_log.txt").read_text()
    # The installed output was told of each result and of the end, after jaxrun's own files.
    told = json.loads((tmp_path / "output.json").read_text())
    assert told["complete"] is True
    assert [(name, ok) for name, ok, _ in told["results"]] == [("a", True), ("b", False)]
    assert told["results"][0][2] >= 0.2  # the figure it reads is the result's own (a 0.2 s sleep)
    # The entry point that names nothing is one line of the run log; the batch went on.
    log = (out / "jax_execution_log.txt").read_text()
    assert "the output 'broken_output' a package installed is not used: toy_jaxrun_ext:NO_SUCH_THING could " \
           "not be loaded: AttributeError" in log
    assert "Traceback" not in done.stderr


def test_what_an_installed_backend_cannot_do_is_refused_before_anything_runs(installed: Path, tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", "import jax\n")
    out = tmp_path / "r"
    done = jaxrun("run", tmp_path / "s", "--backend", "toy", "--processes", "2", "--results-dir", out,
                  "--no-history", env=_env(installed, tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "jaxrun: error: --processes runs a job as several processes, which the toy backend cannot: use another backend"]
    assert not out.exists() and not (tmp_path / "backend.json").exists()
    # An unknown name lists the installed backend beside the built-in ones.
    done = jaxrun("run", tmp_path / "s", "--backend", "toys", "--results-dir", out, env=_env(installed, tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().endswith("unknown backend 'toys': choose one of local, ray, slurm, toy")


def test_without_the_package_the_backend_is_unknown_and_no_output_is_added(tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", "import jax\n")
    out = tmp_path / "r"
    done = jaxrun("run", tmp_path / "s", "--backend", "toy", "--results-dir", out, env=_env(None, tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "jaxrun: error: unknown backend 'toy': choose one of local, ray, slurm"]
    assert not out.exists()
    assert jaxrun("run", tmp_path / "s", "--results-dir", out, "--no-history", env=_env(None, tmp_path)).returncode == 0
    assert not (tmp_path / "output.json").exists()
    assert "installed is not used" not in (out / "jax_execution_log.txt").read_text()
