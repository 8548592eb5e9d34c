"""Shared fixtures: every test reads device facts from a private cache, probed once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Subprocesses (`python -m jaxrun ...`) must run this checkout's code, like the tests themselves do
# (pyproject's pytest `pythonpath`), whichever way jaxrun was installed.
_SRC = str(Path(__file__).resolve().parents[1] / "src")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH", "")) if p)


@pytest.fixture(scope="session")
def jaxrun_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One folder for the whole session: the device probe costs ~1 s, so tests share its answer,
    # while the user's ~/.cache/jaxrun is never read or written.
    return tmp_path_factory.mktemp("jaxrun-cache")


@pytest.fixture(autouse=True)
def _isolated_device_cache(jaxrun_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JAXRUN_CACHE_DIR", str(jaxrun_cache_dir))
    return jaxrun_cache_dir
