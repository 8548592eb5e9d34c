"""Options that need another option (a check between options, config/options.py's model validators):
refused in one line, exit 2, wherever each value comes from (the command line, JAXRUN_*
variables, jaxrun.toml, pyproject's [tool.jaxrun] with the seed's block names, per-script and
per-device tables, a script's '# jaxrun:' comment), through `jaxrun run` and `jaxrun config`,
which agree. A config file in the folder once turned the line into a traceback."""

from __future__ import annotations

import ast
import re
import inspect
import json
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest
from helpers import jaxrun, write

from jaxrun.config import options as options_module
from jaxrun.config.option_spec import env_name, flag_name
from jaxrun.config.options import BatchOptions, RunOptions
from jaxrun.config.settings import resolve_batch_options
from jaxrun.errors import UsageError
from jaxrun.executors import backends
from jaxrun.executors.backends import check_backend
from jaxrun.plan.batch_plan import discover, make_jobs, plan_devices, plan_scripts

FIELDS = {**RunOptions.fields, **BatchOptions.fields}
SCRIPT = "if False:\n    import jax\nprint('ran')\n"  # a JAX script as discovery sees it, that never imports jax


class Pair(NamedTuple):
    values: dict  # option -> value, as a config file holds it
    flags: tuple[str, ...]  # the same on the command line
    message: str  # what the one line says


PAIRS = {
    "warmup_runs without benchmark_runs": Pair({"warmup_runs": 1}, ("--warmup-runs", "1"),
                                               "> 0 (warm-ups precede counted runs)"),
    "warm mode with one call": Pair({"entry": "main", "warm_calls": 1}, ("--warm", "--warm-calls", "1"),
                                    "must be at least 2 (one first call"),
    "processes on one chosen device": Pair({"processes": 2, "device": "gpu:0"}, ("--processes", "2", "--device", "gpu:0"),
                                           "gives each process a device of its own"),
    "ray_address without the ray backend": Pair({"ray_address": "127.0.0.1:1"}, ("--ray-address", "127.0.0.1:1"),
                                                "needs the ray backend"),
    "a chosen device under ray": Pair({"backend": "ray", "device": "gpu:0"}, ("--backend", "ray", "--device", "gpu:0"),
                                      "chooses a device of this machine"),
    "gpus_per_job and jobs_per_gpu": Pair({"gpus_per_job": 2, "jobs_per_gpu": 2},
                                          ("--gpus-per-job", "2", "--jobs-per-gpu", "2"), "not both"),
    "processes not a multiple of nodes": Pair({"backend": "slurm", "nodes": 2, "processes": 3},
                                              ("--backend", "slurm", "--nodes", "2", "--processes", "3"),
                                              "must be a multiple of"),
    "jobs_per_gpu under slurm": Pair({"backend": "slurm", "jobs_per_gpu": 2}, ("--backend", "slurm", "--jobs-per-gpu", "2"),
                                     "on Slurm each task gets GPUs of its own"),
    # Checked by the plan, where a sweep meets each script's own settings.
    "a devices sweep and host_devices": Pair({"sweep": "devices=1,2", "host_devices": 4},
                                             ("--param", "devices=1,2", "--host-devices", "4"), "sets it too: keep one"),
}
# A check in a model validator that looks at one option only (not a pair); one that only an
# installed backend's traits can make (tests/project/test_extension_points.py).
ONE_OPTION = ("entry must be the name of a function", "alpha must be between 0 and 1", "minimum effect must be")
INSTALLED_BACKENDS_ONLY = ("{} runs a job as several processes",)
PER_SCRIPT = ("warmup_runs without benchmark_runs", "warm mode with one call")  # RunOptions pairs without device
PLANNED = ("a devices sweep and host_devices",)  # checked by the plan, not by an options set


def _toml(values: dict) -> str:
    return "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())


def _refused(done, message: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxrun: error: ") and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def _plan(folder: Path, given: dict | None = None, environ: dict | None = None) -> None:
    """What `jaxrun run` does before its first script: the options, then each script's jobs."""
    options = resolve_batch_options([folder], given or {}, environ=environ or {}).options
    check_backend(options)
    found, _ = discover(options.paths, options.recursive, options.include, options.exclude)
    planned, _ = plan_scripts(options, found)
    make_jobs(options, planned, plan_devices(options, None))


def _model_validator_messages() -> list[str]:
    """The message of every UsageError config/options.py's checks between options (each set's
    ``_consistent``) and the backend's checks (executors/backends.py) raise, ``{}`` for each value
    put in it."""
    found = []
    for module, functions in ((options_module, ("_consistent",)), (backends, ("check_backend", "_refuse_settings_of"))):
        found += _raised(ast.parse(inspect.getsource(module)), functions)
    return found


def _raised(tree: ast.AST, functions: tuple[str, ...]) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            for raised in (n for n in ast.walk(node) if isinstance(n, ast.Raise) and n.exc is not None):
                text = raised.exc.args[0]  # type: ignore[attr-defined]
                parts = text.values if isinstance(text, ast.JoinedStr) else [text]
                found.append("".join(p.value if isinstance(p, ast.Constant) else "{}" for p in parts))
    return found


def _covers(said: str, template: str) -> bool:
    """Whether a row's message (part of what one check says) is one of ``template``'s: a text of
    its own, or one of its words between values (a backend's check names the backend as a value)."""
    chunks = [c.strip(" ();:,") for c in template.split("{}")]
    return said in template or any(len(c) >= 8 and c in said for c in chunks)


def test_every_check_between_options_is_in_the_table() -> None:
    """A new check between two options gets its row here (and so its tests below)."""
    messages = _model_validator_messages()
    assert len(messages) >= len(PAIRS) - len(PLANNED) + len(ONE_OPTION), messages
    missing = [m for m in messages if not any(_covers(p.message, m) for p in PAIRS.values())
               and not m.startswith(ONE_OPTION + INSTALLED_BACKENDS_ONLY)]
    assert not missing, f"checks between options with no row in PAIRS (or ONE_OPTION): {missing}"


@pytest.mark.parametrize("name", PAIRS)
def test_refused_from_every_layer_in_one_line(tmp_path: Path, name: str) -> None:
    pair = PAIRS[name]
    flags_given = {key: value for key, value in pair.values.items()}
    env = {f"JAXRUN_{key.upper()}": str(value) for key, value in pair.values.items()}
    seed_block = "[tool.jaxrun.execution]\n" + _toml(pair.values)
    layouts = {
        "api": ({}, flags_given, {}),
        "env": ({}, {}, env),
        "jaxrun.toml": ({"jaxrun.toml": _toml(pair.values)}, {}, {}),
        "jaxrun.toml beside the flags": ({"jaxrun.toml": "timeout = 5\n"}, flags_given, {}),
        "pyproject": ({"pyproject.toml": "[tool.jaxrun]\n" + _toml(pair.values)}, {}, {}),
        "pyproject's seed block": ({"pyproject.toml": seed_block}, {}, {}),
    }
    first, *rest = pair.values
    split = ({"jaxrun.toml": _toml({first: pair.values[first]})}, {k: pair.values[k] for k in rest}, {})
    if rest:
        layouts["one in the file, the other given"] = split
    for layout, (files, given, environ) in layouts.items():
        folder = tmp_path / layout.replace(" ", "_").replace("'", "")
        write(folder, "s.py", SCRIPT)
        for file, text in files.items():
            write(folder, file, text)
        with pytest.raises(UsageError) as caught:
            _plan(folder, given, environ)
        said = str(caught.value)
        assert pair.message in said and "\n" not in said, (layout, said)
        if files and not given and not environ:
            assert f"{file}:" in said, said  # where it was set
        way = "env" if environ else "key" if not given else "flag"
        ways = {key: "key" if layout == "one in the file, the other given" and key == first else way
                for key in pair.values}
        _names_each_option_once_as_given(said, ways)


def _names_each_option_once_as_given(said: str, ways: dict[str, str]) -> None:
    """Each option named the way it was given (``ways``: key -> flag, env or key), never another way
    too: "host_devices (--host-devices, --host-devices)" once named the culprit twice, by its key
    and its flag, on the command line."""
    for key, way in ways.items():
        spelled = {"flag": flag_name(FIELDS[key]), "env": env_name(key), "key": key}
        for other, text in spelled.items():
            if other == way or (other == "key" and "_" not in key):
                continue  # a key without "_" (processes, device) is a word of the message's prose too
            found = re.search(rf"(?<![\w-]){re.escape(text)}(?![\w-])", said)
            assert found is None, (key, way, said)
    assert any(re.search(rf"(?<![\w-]){re.escape({'flag': flag_name(FIELDS[k]), 'env': env_name(k), 'key': k}[w])}"
                         rf"(?![\w-])", said) for k, w in ways.items()), (ways, said)
    assert not re.search(r"\((--[\w-]+), \1\)", said), said


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "config"])
@pytest.mark.parametrize("name", PAIRS)
def test_the_cli_says_one_line_with_and_without_a_config_file(tmp_path: Path, name: str, command: str) -> None:
    pair = PAIRS[name]
    write(tmp_path / "bare", "s.py", SCRIPT)
    write(tmp_path / "toml", "s.py", SCRIPT)
    write(tmp_path / "toml", "jaxrun.toml", "timeout = 5\n")  # any config file at all once made it a traceback
    write(tmp_path / "all", "s.py", SCRIPT)
    write(tmp_path / "all", "pyproject.toml", "[project]\nname = 'x'\n\n[tool.jaxrun]\n" + _toml(pair.values))
    results = ("--results-dir", tmp_path / "results", "--no-history")
    _refused(jaxrun(command, tmp_path / "bare", *pair.flags, *results), pair.message)
    _refused(jaxrun(command, tmp_path / "toml", *pair.flags, *results), pair.message)
    _refused(jaxrun(command, tmp_path / "all", *results), pair.message)
    assert not (tmp_path / "results").exists()  # refused before anything was written


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "config"])
def test_the_seed_s_monitoring_names_and_script_settings_are_checked_too(tmp_path: Path, command: str) -> None:
    results = ("--results-dir", tmp_path / "results", "--no-history")
    monitoring = tmp_path / "monitoring"
    write(monitoring, "s.py", SCRIPT)
    write(monitoring, "pyproject.toml", "[tool.jaxrun.monitoring.benchmarking]\nwarmup_runs = 1\n")
    done = jaxrun(command, monitoring, *results)
    _refused(done, "warmup_runs = 1 (")
    assert "needs benchmark_runs > 0" in done.stderr
    assert "pyproject.toml:2" in done.stderr
    # The seed's measurement_runs (benchmark_runs) makes it valid.
    write(monitoring, "pyproject.toml", "[tool.jaxrun.monitoring.benchmarking]\nwarmup_runs = 1\nmeasurement_runs = 1\n")
    assert jaxrun("config", monitoring, *results).returncode == 0
    for name in PER_SCRIPT:
        pair = PAIRS[name]
        tables = {
            "scripts": f'[scripts."*.py"]\n{_toml(pair.values)}',
            "devices": f"[devices.cpu]\n{_toml(pair.values)}",
        }
        for table, text in tables.items():
            folder = tmp_path / f"{table}-{name.replace(' ', '_')}"
            write(folder, "s.py", SCRIPT)
            write(folder, "jaxrun.toml", text)
            done = jaxrun(command, folder, "--device", "cpu", *results)
            _refused(done, pair.message)
            assert "s.py: " in done.stderr and "jaxrun.toml:" in done.stderr, done.stderr  # which script, which line
        header = tmp_path / f"header-{name.replace(' ', '_')}"
        words = " ".join(f"{key}={value}" for key, value in pair.values.items())
        write(header, "s.py", f"# jaxrun: {words}\n" + SCRIPT)
        done = jaxrun(command, header, "--device", "cpu", "--no-config", *results)
        _refused(done, pair.message)
        assert "s.py:1" in done.stderr, done.stderr
    assert not (tmp_path / "results").exists()


# --- per-device settings in `jaxrun config` -----------------------------------------------------


@pytest.mark.slow
def test_jaxrun_config_shows_per_device_settings_where_the_run_takes_them(tmp_path: Path) -> None:
    write(tmp_path, "s.py", SCRIPT)
    write(tmp_path, "pyproject.toml", textwrap.dedent("""\
        [project]
        name = "demo"

        [tool.jaxrun.devices.cpu]
        memory_limit = "8GB"
        retries = 2
        """))
    shown = json.loads(jaxrun("config", tmp_path, "--device", "cpu", "--json").stdout)["settings"]
    where = f"{tmp_path / 'pyproject.toml'}"
    assert shown["memory_limit"]["devices"] == {
        "cpu": {"value": 8 * 10**9, "source": "config", "origin": f"{where}:5", "overridden_by": None}}
    assert shown["retries"]["devices"]["cpu"]["origin"] == f"{where}:6"
    assert "devices" not in shown["timeout"]
    # What the run itself records for the script: the same value, from the same line.
    done = jaxrun("run", tmp_path, "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["script_results"][0]
    assert result["settings"]["memory_limit"] == f"{where}:5"
    # A flag wins over the table: said on its line, as the run does it.
    table = jaxrun("config", ".", "--device", "cpu", "--memory-limit", "1GB", cwd=tmp_path, env={"COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    line = next(line for line in table.stdout.splitlines() if "memory_limit on cpu" in line)
    assert "8000000000" in line and "pyproject.toml:5" in line and "overridden by --memory-limit" in line
    overridden = json.loads(jaxrun("config", tmp_path, "--memory-limit", "1GB", "--json").stdout)["settings"]
    assert overridden["memory_limit"]["value"] == 10**9
    assert overridden["memory_limit"]["devices"]["cpu"]["overridden_by"] == "--memory-limit"
