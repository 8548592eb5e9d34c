"""No time limit is a value every surface can say (`--timeout none`, `JAXRUN_TIMEOUT=none`,
`timeout = "none"` in a config file or a script's comment, `timeout=None` through the API), and
the message refusing a bad timeout names a way that works (it once said "omit it for no limit",
which gave the 300 s default)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import jaxrun, write

import jaxrun as jaxrun_api
from jaxrun.config.options import RunOptions
from jaxrun.config.settings import resolve_batch_options
from jaxrun.core.defaults import DEFAULT_TIMEOUT
from jaxrun.errors import UsageError
from jaxrun.plan.batch_plan import discover, make_jobs, plan_devices, plan_scripts

SCRIPT = "if False:\n    import jax\nprint('ran')\n"


def _timeouts(folder: Path, given: dict | None = None, environ: dict | None = None) -> dict[str, float | None]:
    options = resolve_batch_options([folder], given or {}, environ=environ or {}).options
    found, _ = discover(options.paths, options.recursive, options.include, options.exclude)
    planned, _ = plan_scripts(options, found)
    return {job.name: options.options_for(job).timeout for job in make_jobs(options, planned, plan_devices(options, None))}


@pytest.mark.parametrize(("files", "given", "environ"), [
    ({}, {"timeout": "none"}, {}),  # what --timeout none gives the resolver
    ({}, {"timeout": "None"}, {}),
    ({}, {}, {"JAXRUN_TIMEOUT": "none"}),
    ({"jaxrun.toml": 'timeout = "none"\n'}, {}, {}),
    ({"pyproject.toml": '[tool.jaxrun]\ntimeout = "none"\n'}, {}, {}),
    ({"pyproject.toml": '[tool.jaxrun.execution]\ntimeout_seconds = "none"\n'}, {}, {}),  # the seed's name
    ({"jaxrun.toml": 'timeout = 60\n[scripts."s.py"]\ntimeout = "none"\n'}, {}, {}),
    ({"jaxrun.toml": 'timeout = 60\n[devices.cpu]\ntimeout = "none"\n'}, {"device": "cpu"}, {}),
    ({"s.py": "# jaxrun: timeout=none\n" + SCRIPT}, {}, {}),
], ids=["flag", "flag-capitalised", "env", "jaxrun.toml", "pyproject", "seed-block", "script-table", "device-table",
        "header"])
def test_no_limit_from_every_source(tmp_path: Path, files: dict, given: dict, environ: dict) -> None:
    project = tmp_path / "project"
    write(project, "s.py", SCRIPT)
    for name, text in files.items():
        write(project, name, text)
    assert _timeouts(project, given, environ) == {"s": None}
    write(tmp_path / "plain", "s.py", SCRIPT)
    assert _timeouts(tmp_path / "plain") == {"s": DEFAULT_TIMEOUT}  # left out: the default, not "no limit"


@pytest.mark.parametrize("bad", [0, -1, "0", "soon", "nan", float("nan"), True, ""])
def test_a_bad_timeout_names_the_way_to_say_no_limit_and_that_way_works(bad: object) -> None:
    with pytest.raises(UsageError) as caught:
        RunOptions.build("api", timeout=bad)
    message = str(caught.value)
    assert "omit" not in message and "\n" not in message
    way = re.search(r"or (\w+) for no limit", message)
    assert way is not None, message
    assert RunOptions.build("api", timeout=way.group(1)).timeout is None
    assert RunOptions.build("api", timeout=None).timeout is None  # the API's own spelling
    assert RunOptions.build("api", timeout=float("inf")).timeout is None


@pytest.mark.slow
def test_the_cli_and_the_api_run_without_a_limit(tmp_path: Path) -> None:
    write(tmp_path, "s.py", SCRIPT)
    refused = jaxrun("run", tmp_path, "--timeout", "0", "--no-history", "--results-dir", tmp_path / "r0")
    assert refused.returncode == 2 and not (tmp_path / "r0").exists()
    assert refused.stderr.strip().splitlines() == [
        "jaxrun: error: timeout must be a number of seconds > 0, or none for no limit, got '0'"]
    shown = json.loads(jaxrun("config", tmp_path, "--timeout", "none", "--json").stdout)["settings"]["timeout"]
    assert shown == {"value": "none", "source": "cli", "origin": "--timeout"}  # as a config file writes it
    done = jaxrun("run", tmp_path, "--timeout", "none", "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert "none: no limit" in " ".join(jaxrun("run", "--help").stdout.split())
    assert "none: no limit" in " ".join(jaxrun("ab", "--help").stdout.split())
    refused_ab = jaxrun("ab", tmp_path, tmp_path, "--timeout", "0", "--results-dir", tmp_path / "ab")
    assert refused_ab.returncode == 2 and "none for no limit" in refused_ab.stderr and not (tmp_path / "ab").exists()
    batch = jaxrun_api.run_jax_scripts(tmp_path, device="cpu", timeout=None, history=False, results_dir=tmp_path / "api",
                                       return_detailed_results=True)
    assert batch.success  # type: ignore[union-attr]
    assert jaxrun_api.execute_jax_script(tmp_path / "s.py", device="cpu", timeout=None).success
