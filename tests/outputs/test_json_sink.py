"""The run's JSON on stdout is a sink asked for by a declared option: ``--json``, ``json = true`` in
a config file, ``JAXRUN_JSON=1`` and ``run_jax_scripts(json=True)`` all print the batch as its
file holds it, and nothing else; ``jaxrun config --json`` stays the config command's own switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import jaxrun, write

import jaxrun as api

# A JAX script as discovery sees it, that never imports jax: fast, and a real child process.
QUICK = "if False:\n    import jax\nprint('ran')\n"
FAILS = "if False:\n    import jax\nraise SystemExit(3)\n"


def _batch_file(results: Path) -> str:
    return (results / "jax_execution_results.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("how", ["flag", "config", "env"])
def test_each_way_to_ask_prints_the_batch_file_on_stdout_and_nothing_else(tmp_path: Path, how: str) -> None:
    write(tmp_path / "s", "a.py", QUICK)
    write(tmp_path / "s", "b.py", FAILS)
    args: list[object] = ["run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--device", "cpu"]
    env = {}
    if how == "flag":
        args.append("--json")
    elif how == "config":
        (tmp_path / "s" / "jaxrun.toml").write_text("json = true\n")
    else:
        env["JAXRUN_JSON"] = "1"
    done = jaxrun(*args, env=env)
    assert done.returncode == 1, done.stderr  # b.py failed: the exit status is the run's, as without --json
    assert done.stdout == _batch_file(tmp_path / "r")
    batch = json.loads(done.stdout)
    assert [(r["script_name"], r["success"]) for r in batch["script_results"]] == [("a", True), ("b", False)]
    assert batch["metadata"]["complete"] is True


def test_without_it_stdout_has_the_summary_not_json(tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", QUICK)
    done = jaxrun("run", tmp_path / "s", "--results-dir", tmp_path / "r", "--no-history", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert "1/1 succeeded" in done.stdout + done.stderr
    with pytest.raises(json.JSONDecodeError):
        json.loads(done.stdout)


def test_the_api_asks_for_the_same_sink(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "s", "a.py", QUICK)
    monkeypatch.chdir(tmp_path)
    batch = api.run_jax_scripts(tmp_path / "s", results_dir=tmp_path / "r", history=False, device="cpu", json=True,
                                return_detailed_results=True)
    printed = capsys.readouterr().out
    assert printed == _batch_file(tmp_path / "r")
    assert json.loads(printed)["script_results"][0]["script_name"] == batch.script_results[0].script_name == "a"
    api.run_jax_scripts(tmp_path / "s", results_dir=tmp_path / "r2", history=False, device="cpu")
    assert capsys.readouterr().out == ""  # not asked: nothing on stdout


def test_jaxrun_config_json_is_the_config_commands_own(tmp_path: Path) -> None:
    write(tmp_path / "s", "a.py", QUICK)
    (tmp_path / "s" / "jaxrun.toml").write_text("json = true\n")
    listed = jaxrun("config", tmp_path / "s")
    assert listed.returncode == 0, listed.stderr
    assert "json" in listed.stdout and "true" in listed.stdout
    with pytest.raises(json.JSONDecodeError):  # a config file's json = true is the run's output, not this one's
        json.loads(listed.stdout)
    as_json = jaxrun("config", tmp_path / "s", "--json")
    assert as_json.returncode == 0, as_json.stderr
    settings = json.loads(as_json.stdout)["settings"]
    assert any("json" in str(entry) for entry in (settings if isinstance(settings, list) else settings.items()))
