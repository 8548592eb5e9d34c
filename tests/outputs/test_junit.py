"""``--junit-xml FILE``: the batch as JUnit XML, read back by a JUnit parser (junitparser, what CI
report tools use) and by the standard library's XML parser. End to end through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import jaxrun, write
from junitparser import Error, Failure, JUnitXml, Skipped

PASSES = "import jax, jax.numpy as jnp\nprint(float(jax.jit(lambda x: x.sum())(jnp.arange(3.0))))\n"
# A message with a terminal colour code and a NUL: characters XML 1.0 cannot hold.
FAILS = 'import jax\nraise ValueError("bad \\x1b[31minput\\x1b[0m & <more>\\x00")\n'
EXPECTED_TO_FAIL = "# jaxrun: xfail='known bug'\nimport jax\nraise RuntimeError('still broken')\n"
SKIPPED = "# jaxrun: skip='needs a TPU'\nimport jax\nprint('never')\n"


@pytest.mark.slow
def test_the_report_holds_each_script_as_a_ci_reads_it(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write(folder, "a_passes.py", PASSES)
    write(folder, "models/b_fails.py", FAILS)
    write(folder, "c_xfail.py", EXPECTED_TO_FAIL)
    write(folder, "d_skip.py", SKIPPED)
    report = tmp_path / "junit.xml"
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun", "run", str(folder), "--device", "cpu", "--no-history", "--no-config",
         "--no-compile-cache", "--results-dir", str(tmp_path / "r"), "--junit-xml", str(report)],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one script failed

    xml = JUnitXml.fromfile(str(report))
    suites = list(xml) if hasattr(xml, "__iter__") else [xml]
    (suite,) = suites
    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == ("jaxrun", 4, 1, 0, 2)
    cases = {case.name: case for case in suite}
    # Named as the terminal and every other surface name them: the path under the folder given.
    assert set(cases) == {"a_passes.py", "models/b_fails.py", "c_xfail.py", "d_skip.py"}

    assert cases["a_passes.py"].is_passed and cases["a_passes.py"].time > 0
    failure = cases["models/b_fails.py"].result[0]
    assert isinstance(failure, Failure) and failure.type == "script_error"
    assert failure.message.startswith("ValueError: bad \ufffd[31minput\ufffd[0m & <more>\ufffd")
    assert "raise ValueError" in failure.text  # the traceback
    assert cases["models/b_fails.py"].classname == "jaxrun.models"
    (xfailed,) = cases["c_xfail.py"].result
    assert isinstance(xfailed, Skipped) and "known bug" in xfailed.message and "RuntimeError" in xfailed.message
    (skipped,) = cases["d_skip.py"].result
    assert isinstance(skipped, Skipped) and skipped.message.startswith("needs a TPU")
    assert not any(isinstance(r, Error) for case in suite for r in case.result)

    # The run's figures travel as properties, equal to the results file's.
    tree = ET.parse(report)
    passed = tree.find(".//testcase[@name='a_passes.py']")
    assert passed is not None
    figures = {p.get("name"): p.get("value") for p in passed.iter("property")}
    assert figures["device_used"] == "cpu" and float(figures["run_time"]) >= 0
    assert {"body_time", "import_time", "jit_compile_time", "memory_peak"} <= set(figures)


def test_without_the_flag_no_report_is_written(tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", "print('hi')\n")
    proc = jaxrun("run", tmp_path / "s" / "a.py", "--device", "cpu", "--no-history", "--no-config", "--results-dir",
                  tmp_path / "r", timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.rglob("*.xml"))


def test_a_report_path_that_cannot_be_written_is_refused_before_anything_runs(tmp_path: Path) -> None:
    script = write(tmp_path, "a.py", "open('ran', 'w').close()\n")
    proc = jaxrun("run", script, "--device", "cpu", "--no-history", "--no-config", "--results-dir", tmp_path / "r",
                  "--junit-xml", tmp_path / "missing" / "junit.xml", timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("jaxrun: error: cannot write the JUnit report")
    assert not (tmp_path / "ran").exists()
