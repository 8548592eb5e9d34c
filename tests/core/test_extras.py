"""Every feature that needs an optional dependency (jaxrun.core.extras: the report's plotly, Ray, the
MCP SDK) checks it before its work starts: one line naming the extra to install, exit 2, no script
run and nothing written (`--report` once ran the whole batch, then failed). The dependency is
made to fail for real in the jaxrun process: a folder first on PYTHONPATH holding a broken package
of that name, or a sitecustomize that hides it as if it were not installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tomllib
from helpers import jaxrun, write

from jaxrun.core.extras import EXTRAS as FEATURES
from jaxrun.executors.backends import BUILT_IN

# Every optional dependency: the features' (core/extras.py) and the backends' own (executors/backends.py).
EXTRAS = {**FEATURES, **{backend.name: backend.extra for backend in BUILT_IN.values() if backend.extra is not None}}

ROOT = Path(__file__).resolve().parents[2]
# Extras whose absence changes no outcome (core/extras.py's docstring says why).
DEGRADE = {"gpu", "cuda12", "cuda13", "examples", "dev"}
MARK = "ran.txt"


def _commands(tmp_path: Path) -> dict[str, list[tuple[object, ...]]]:
    """For each feature, the command lines that use it."""
    scripts, results = tmp_path / "s", tmp_path / "r"
    run = ("run", scripts, "--device", "cpu", "--no-history", "--results-dir", tmp_path / "new-results")
    return {
        "report": [(*run, "--report"), ("report", results)],
        "ray": [(*run, "--backend", "ray")],
        "slurm": [(*run, "--backend", "slurm")],
        "mcp": [("mcp", "--root", tmp_path)],
        "postgres": [("history", "--history", "postgresql://jaxrun:pw@127.0.0.1:1/history"),
                     ("history", "--changes", "--history", "postgresql://jaxrun:pw@127.0.0.1:1/history")],
    }


def test_every_extra_is_checked_or_changes_no_outcome() -> None:
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert declared == {e.extra for e in EXTRAS.values()} | DEGRADE, declared


def _broken(tmp_path: Path, module: str, how: str) -> dict[str, str]:
    """The environment of a jaxrun whose ``module`` cannot be imported (``how``: broken or missing)."""
    import os

    folder = tmp_path / f"{how}-{module}"
    if how == "broken":
        write(folder / module, "__init__.py", "raise ImportError('broken on purpose for the test')\n")
    else:
        write(folder, "sitecustomize.py", f"""\
            import sys

            class _Hide:
                def find_spec(self, name, path=None, target=None):
                    if name == {module!r} or name.startswith({module!r} + "."):
                        raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                    return None

            sys.meta_path.insert(0, _Hide())
            """)
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
@pytest.mark.parametrize("how", ["broken", "missing"])
@pytest.mark.parametrize("feature", sorted(EXTRAS))
def test_a_feature_whose_package_cannot_be_imported_is_refused_first(tmp_path: Path, feature: str, how: str) -> None:
    commands = _commands(tmp_path)
    assert set(commands) == set(EXTRAS)  # a new extra gets its command lines here
    write(tmp_path / "s", "s.py", f"if False:\n    import jax\nopen({str(tmp_path / 's' / MARK)!r}, 'w').write('ran')\n")
    done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    (tmp_path / "s" / MARK).unlink()
    need = EXTRAS[feature]
    env = _broken(tmp_path, need.module, how)
    for args in commands[feature]:
        done = jaxrun(*args, env=env, timeout=120)
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, (args, done.stderr)
        assert lines[0].startswith("jaxrun: error: ") and f"pip install 'jaxrun[{need.extra}]'" in lines[0], lines
        assert ("broken on purpose" in lines[0]) if how == "broken" else ("is not installed" in lines[0]), lines
        assert not (tmp_path / "s" / MARK).exists(), args  # no script ran
        assert not (tmp_path / "new-results").exists() and not (tmp_path / "r" / "report.html").exists()


def test_a_config_files_report_setting_is_checked_first_too(tmp_path: Path) -> None:
    write(tmp_path / "s", "s.py", f"if False:\n    import jax\nopen({str(tmp_path / MARK)!r}, 'w').write('ran')\n")
    write(tmp_path / "s", "jaxrun.toml", "report = true\n")
    done = jaxrun("run", tmp_path / "s", "--device", "cpu", "--no-history", "--results-dir", tmp_path / "r",
                  env=_broken(tmp_path, "plotly", "broken"))
    assert done.returncode == 2 and "pip install 'jaxrun[report]'" in done.stderr, done.stderr
    assert not (tmp_path / MARK).exists() and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_with_the_packages_there_the_check_passes() -> None:
    for feature in ("report", "mcp"):
        pytest.importorskip(EXTRAS[feature].module)
        from jaxrun.core.extras import require

        assert require(feature).__name__ == EXTRAS[feature].module
    assert sys.modules.get("plotly") is not None


def test_the_apis_report_is_checked_first_too(tmp_path: Path) -> None:
    """run_jax_scripts(report=True) asks for the same sink as --report: refused before any script runs."""
    import os
    import subprocess

    write(tmp_path / "s", "s.py", f"if False:\n    import jax\nopen({str(tmp_path / MARK)!r}, 'w').write('ran')\n")
    code = ("import sys\nfrom jaxrun import run_jax_scripts\nfrom jaxrun.errors import UsageError\n"
            f"try:\n    run_jax_scripts({str(tmp_path / 's')!r}, results_dir={str(tmp_path / 'r')!r}, history=False, "
            "report=True)\nexcept UsageError as exc:\n    print(exc)\n    sys.exit(2)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **_broken(tmp_path, "plotly", "missing")})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'jaxrun[report]'" in done.stdout and "is not installed" in done.stdout, done.stdout
    assert not (tmp_path / MARK).exists() and not (tmp_path / "r").exists()
