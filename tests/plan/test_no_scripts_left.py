"""A batch with no script says why: a folder without JAX scripts, or patterns (--include,
--exclude, from wherever they came) that left none of those it holds, naming the patterns and
how many scripts they left out. `--include 'zzz*'` once said "no JAX scripts found", as if the
folder had none."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import jaxrun, write

from jaxrun.config.settings import resolve_batch_options
from jaxrun.errors import UsageError
from jaxrun.plan.batch_plan import Plan, discover

SCRIPT = "if False:\n    import jax\nprint('ran')\n"


def _refusal(folder: Path, given: dict | None = None, environ: dict | None = None) -> tuple[str, str]:
    """The line of `jaxrun config` (discover) and of `jaxrun run` (the streamed plan)."""
    options = resolve_batch_options([folder], given or {}, environ=environ or {}).options
    with pytest.raises(UsageError) as by_discovery:
        discover(options.paths, options.recursive, options.include, options.exclude, options.named)
    plan = Plan(options, None).start()
    with pytest.raises(UsageError) as by_plan:
        plan.all()
    assert str(by_plan.value) == str(by_discovery.value)
    return str(by_plan.value), options.named("include")


@pytest.mark.parametrize(("given", "files", "environ", "said"), [
    ({"include": ["zzz*"]}, {}, {}, "--include 'zzz*' leaves none of them"),
    ({"exclude": ["*.py"]}, {}, {}, "--exclude '*.py' leaves none of them"),
    ({"include": ["a*", "b*"], "exclude": ["*"]}, {}, {}, "--include 'a*' or 'b*' and --exclude '*' leave none of them"),
    ({}, {"jaxrun.toml": 'include = ["zzz*"]\n'}, {}, "include (jaxrun.toml:1) 'zzz*' leaves none of them"),
    ({}, {}, {"JAXRUN_EXCLUDE": "one.py,two.py,sub"}, "JAXRUN_EXCLUDE 'one.py', 'two.py' or 'sub' leaves none of them"),
], ids=["include", "exclude", "both", "config", "env"])
def test_patterns_that_leave_no_script_are_named_with_the_scripts_they_left_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: dict, files: dict, environ: dict, said: str) -> None:
    for name in ("one.py", "two.py", "sub/three.py"):
        write(tmp_path, name, SCRIPT)
    write(tmp_path, "notes.py", "print('not a JAX script')\n")
    for name, text in files.items():
        write(tmp_path, name, text)
    monkeypatch.chdir(tmp_path)  # a file's line is said relative to the working folder
    line, _ = _refusal(tmp_path, given, environ)
    assert line == f"no JAX script left to run in '{tmp_path}': 3 JAX scripts found there, but {said}", line


def test_a_folder_without_jax_scripts_says_so_with_or_without_patterns(tmp_path: Path) -> None:
    write(tmp_path, "notes.py", "print('not a JAX script')\n")
    for given in ({}, {"include": ["zzz*"]}):
        line, _ = _refusal(tmp_path, given)
        assert line.startswith(f"no JAX scripts found in '{tmp_path}': a .py file counts when it imports jax"), line
    write(tmp_path, "one.py", SCRIPT)
    line, _ = _refusal(tmp_path, {"include": ["zzz*"]})
    assert "1 JAX script found there" in line  # one, in the singular


@pytest.mark.slow
def test_the_cli_says_it_in_one_line(tmp_path: Path) -> None:
    write(tmp_path / "s", "one.py", SCRIPT)
    write(tmp_path / "s", "two.py", SCRIPT)
    done = jaxrun("run", "s", "--include", "zzz*", "--no-history", "--results-dir", "r", cwd=tmp_path)
    assert done.returncode == 2 and not (tmp_path / "r").exists()
    assert done.stderr.strip().splitlines() == [
        "jaxrun: error: no JAX script left to run in 's': 2 JAX scripts found there, but --include 'zzz*' leaves "
        "none of them"]
