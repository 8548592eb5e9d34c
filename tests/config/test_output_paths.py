"""Every file a user names for jaxrun to write (`--markdown`, `--export-*`, `--junit-xml`, a
`--history` database, `jaxrun report -o`, compare's and ab's exports, the pytest plugin's
`--jax-benchmark-json`) is checked before anything runs, by one checker
(resultfiles.check_output_file): a missing folder is refused, never made (a typo once made
folders, at / too), a place where no file can be created (/proc) is refused up front (it once ran
the whole batch first). One line, exit 2, no script run, nothing written."""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import pytest
from helpers import jaxrun, write

import jaxrun as jaxrun_api
from jaxrun.config.option_spec import flag_of
from jaxrun.config.options import BatchOptions
from jaxrun.errors import UsageError
from jaxrun.outputs.declarations import named_output_files

MARK = "ran.txt"


def _script(folder: Path) -> Path:
    """A JAX script (as discovery sees it) that leaves a mark when it runs."""
    return write(folder, "s.py", f"if False:\n    import jax\nopen({str(folder / MARK)!r}, 'w').write('ran')\n")


def _file_options() -> dict[str, str]:
    """Every option of `jaxrun run` that names a file (its flag's value is a FILE, or the history's PATH)."""
    found = {}
    for name, field in BatchOptions.fields.items():
        flag = flag_of(field)
        if flag is None or Path not in typing.get_args(field.annotation):
            continue
        if flag.metavar == "FILE" or name == "history":
            found[name] = (flag.names or ("--" + name.replace("_", "-"),))[0]
    return found


def test_every_file_option_is_checked() -> None:
    """A new option naming a file is in named_output_files (so in the check) without another line here."""
    files = _file_options()
    assert set(files) >= {"markdown", "export_json", "export_csv", "junit_xml", "history"}, files
    options = BatchOptions.build("cli", paths=["."], **{name: f"/tmp/x-{name}" for name in files})
    checked = {str(path): what for path, what in named_output_files(options)}
    assert set(checked) == {f"/tmp/x-{name}" for name in files}
    assert all(f"({flag})" in checked[f"/tmp/x-{name}"] for name, flag in files.items()), checked


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_file_options()))
def test_run_refuses_a_file_it_could_not_write_before_the_first_script(tmp_path: Path, name: str) -> None:
    flag = _file_options()[name]
    _script(tmp_path / "s")
    more = ("--benchmark-runs", "1") if name == "history" else ("--no-history",)
    for target, said in ((tmp_path / "new" / "sub" / "x.out", "the folder"), (Path("/proc/jaxrun-x.out"), "no file can "
                         "be created in '/proc'"), (tmp_path / "s", "it is a folder")):
        if name == "history" and target.exists():
            continue  # a history path that exists is the history store's to open (a folder there is its note)
        done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--results-dir", tmp_path / "r", flag, target, *more)
        assert done.returncode == 2, (flag, target, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("jaxrun: error: cannot write the ") and f"({flag})" in lines[0] \
            and said in lines[0], lines
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "s" / MARK).exists() and not (tmp_path / "r").exists()
    assert not (tmp_path / "new").exists()  # no folder made for it


def test_the_api_refuses_the_same_before_running(tmp_path: Path) -> None:
    _script(tmp_path / "s")
    with pytest.raises(UsageError, match=r"cannot write the JUnit report \(junit_xml\) .*no file can be created"):
        jaxrun_api.run_jax_scripts(tmp_path / "s", device="cpu", history=False, results_dir=tmp_path / "r",
                                   junit_xml="/proc/jaxrun-x.xml")
    with pytest.raises(UsageError, match="does not exist"):
        jaxrun_api.run_jax_scripts(tmp_path / "s", device="cpu", history=False, results_dir=tmp_path / "r",
                                   markdown=tmp_path / "missing" / "x.md")
    assert not (tmp_path / "s" / MARK).exists() and not (tmp_path / "missing").exists()


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--export-json", "--export-csv", "--export-markdown"])
def test_run_ab_and_compare_refuse_an_export_alike(tmp_path: Path, flag: str) -> None:
    """One checker: the same line from `jaxrun run`, `jaxrun ab` and `jaxrun compare`."""
    for side in ("a", "b"):
        _script(tmp_path / side)
    for target in (Path("/proc/jaxrun-x.out"), tmp_path / "missing" / "x.out"):
        run = jaxrun("run", tmp_path / "a", "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r", flag, target)
        ab = jaxrun("ab", tmp_path / "a", tmp_path / "b", "--device", "cpu", "--results-dir", tmp_path / "ab", flag, target)
        compare = jaxrun("compare", tmp_path / "a", tmp_path / "b", flag, target)
        for done in (run, ab, compare):
            assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        # The same words from the path on (run's --export-markdown is its --markdown: named so).
        said = {done.stderr.split(repr(str(target)), 1)[1] for done in (run, ab, compare)}
        assert len(said) == 1 and all(d.stderr.startswith("jaxrun: error: cannot write the ") for d in (run, ab, compare))
        assert not (tmp_path / "a" / MARK).exists() and not (tmp_path / "b" / MARK).exists()
        assert not (tmp_path / "ab").exists() and not (tmp_path / "r").exists()
    assert not (tmp_path / "missing").exists()


@pytest.mark.slow
def test_report_and_the_pytest_plugin_check_their_file_first(tmp_path: Path) -> None:
    _script(tmp_path / "s")
    assert jaxrun("run", tmp_path / "s", "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r").returncode == 0
    done = jaxrun("report", tmp_path / "r", "-o", tmp_path / "missing" / "report.html")
    assert done.returncode == 2 and done.stderr.startswith("jaxrun: error: cannot write the report (--output) "), done.stderr
    assert not (tmp_path / "missing").exists()
    write(tmp_path / "t", "test_one.py", "def test_one():\n    pass\n")
    plugin = subprocess.run([sys.executable, "-m", "pytest", "-p", "jaxrun.pytest_plugin", "-p", "no:randomly",
                             "-p", "no:xdist", "-p", "no:cacheprovider", str(tmp_path / "t"),
                             "--jax-benchmark-json", str(tmp_path / "missing" / "b.json")],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path / "t")
    assert plugin.returncode == 4, plugin.stdout + plugin.stderr  # pytest's usage error: before any test
    assert "cannot write the benchmarks file (--jax-benchmark-json)" in plugin.stderr and "1 passed" not in plugin.stdout
    assert not (tmp_path / "missing").exists()
