"""Entry points read once per environment: what importlib.metadata found is kept in jaxrun's cache
folder, keyed by sys.path's folders and their times, and read again once an install changed one
(a package installed, or removed, between two batches is seen by the second)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import SRC

READ = "import json; from jaxrun.core.entry_points import named; print(json.dumps(named('jaxrun.test_group')))"


def _named(site: Path, cache: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(site)]), "JAXRUN_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", READ], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _install(site: Path, name: str, points: str) -> None:
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(points)


def test_an_install_between_two_reads_is_seen_and_an_unchanged_environment_is_read_from_the_cache(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    site.mkdir()
    assert _named(site, cache) == {}
    assert (cache / "entry_points.json").is_file()
    _install(site, "one_plugin", "[jaxrun.test_group]\none = one_plugin:THING\n")
    assert _named(site, cache) == {"one": "one_plugin:THING"}
    # Unchanged: the cache answers (a package whose metadata changed in place is not read again).
    (site / "one_plugin-0.1.dist-info" / "entry_points.txt").write_text("[jaxrun.test_group]\nother = x:Y\n")
    assert _named(site, cache) == {"one": "one_plugin:THING"}
    # Removed: its folder's time changed.
    for path in (site / "one_plugin-0.1.dist-info").iterdir():
        path.unlink()
    (site / "one_plugin-0.1.dist-info").rmdir()
    assert _named(site, cache) == {}


def test_a_damaged_or_unwritable_cache_costs_only_a_read(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    site.mkdir()
    _install(site, "two_plugin", "[jaxrun.test_group]\ntwo = two_plugin:THING\n")
    cache.mkdir()
    (cache / "entry_points.json").write_text("{not json")
    assert _named(site, cache) == {"two": "two_plugin:THING"}
    assert json.loads((cache / "entry_points.json").read_text())["groups"]["jaxrun.test_group"] == {
        "two": "two_plugin:THING"}
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    assert _named(site, blocked) == {"two": "two_plugin:THING"}
