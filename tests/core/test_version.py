"""``jaxrun --version`` / ``-V`` and ``jaxrun.__version__``: the installed distribution's version
(``importlib.metadata``), and never a version borrowed from an install of other code.

Each case is a real layout the interpreter imports from: a copy of the package with the metadata an
installer writes beside it (``jaxrun-X.dist-info``: METADATA, RECORD), an editable install's
metadata (``direct_url.json`` naming the checkout), a source checkout that is not installed, and a
checkout run in front of an installed copy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "jaxrun"


def _copy_package(into: Path) -> Path:
    shutil.copytree(PACKAGE, into / "jaxrun", ignore=shutil.ignore_patterns("__pycache__"))
    return into


def _dist_info(site: Path, version: str, editable_of: Path | None = None) -> None:
    info = site / f"jaxrun-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jaxrun\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    files = [] if editable_of else [p.relative_to(site).as_posix() for p in (site / "jaxrun").rglob("*.py")]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{info.name}/METADATA"]))
    if editable_of is not None:
        (info / "direct_url.json").write_text(json.dumps({"url": editable_of.as_uri(), "dir_info": {"editable": True}}))


def _checkout(root: Path, version: str) -> Path:
    """A source checkout: src/jaxrun and the pyproject.toml that declares its version."""
    _copy_package(root / "src")
    (root / "pyproject.toml").write_text(f'[project]\nname = "jaxrun"\nversion = "{version}"\n')
    return root


def _ask(pythonpath: list[Path], *args: str) -> list[str]:
    """``python -m jaxrun ARGS`` and ``jaxrun.__version__`` with only ``pythonpath`` in front of the
    interpreter's own paths."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    said = []
    for command in ([sys.executable, "-m", "jaxrun", *args],
                    [sys.executable, "-c", "import jaxrun; print(jaxrun.__version__, jaxrun.__file__)"]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=pythonpath[0], timeout=120)
        assert done.returncode == 0 and done.stderr == "", (command, done.stdout, done.stderr)
        said.append(done.stdout.strip())
    return said


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_an_installed_copy_says_its_distributions_version(tmp_path: Path, flag: str) -> None:
    site = _copy_package(tmp_path / "site")
    _dist_info(site, "7.8.9")
    line, api = _ask([site], flag)
    assert line == "jaxrun 7.8.9"
    assert api == f"7.8.9 {site / 'jaxrun' / '__init__.py'}"


def test_an_editable_install_says_its_distributions_version(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "checkout", "7.8.9")
    site = tmp_path / "site"
    _dist_info(site, "7.8.9", editable_of=checkout)
    line, api = _ask([checkout / "src", site], "--version")
    assert line == "jaxrun 7.8.9"
    assert api.split()[0] == "7.8.9"


def test_a_checkout_that_is_not_installed_says_so(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "checkout", "7.8.9")
    line, api = _ask([checkout / "src"], "-V")
    assert line == f"jaxrun 7.8.9+source (the source checkout at {checkout}, not installed)"
    assert api.split()[0] == "7.8.9+source"


def test_a_checkout_in_front_of_an_installed_copy_does_not_borrow_its_version(tmp_path: Path) -> None:
    site = _copy_package(tmp_path / "site")
    _dist_info(site, "1.0.0")
    other = tmp_path / "other"
    _dist_info(other, "2.0.0", editable_of=tmp_path / "elsewhere")  # an editable install of another folder
    checkout = _checkout(tmp_path / "checkout", "7.8.9")
    line, api = _ask([checkout / "src", site, other], "--version")
    assert line == f"jaxrun 7.8.9+source (the source checkout at {checkout}, not installed)"
    assert api == f"7.8.9+source {checkout / 'src' / 'jaxrun' / '__init__.py'}"


def test_a_copy_with_neither_metadata_nor_a_checkout_says_unknown(tmp_path: Path) -> None:
    site = _copy_package(tmp_path / "bare")
    line, api = _ask([site], "--version")
    assert line == f"jaxrun unknown (not installed: {site / 'jaxrun'})"
    assert api.split()[0] == "unknown"
