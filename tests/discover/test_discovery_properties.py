"""Property-based tests of discovery over generated folder trees (hypothesis).

Each example builds a real tree on disk: nested folders with awkward names (spaces, unicode,
names that are skipped), files that import JAX in one of several ways or do not, and symlinks
(to folders inside the tree, up to their own parents, to files, dangling). Discovery must never
raise, and must return exactly the files an independent model of its rules expects, inside the
root, sorted, with batch-unique names.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxrun.discover.scripts import find_jax_scripts, unique_names

JAX_SOURCES = ["import jax\n", "import jax.numpy as jnp\n", "from flax import linen as nn\n",
               "def f():\n    import optax\n", "try:\n    import equinox\nexcept ImportError:\n    pass\n",
               "x = (\n"]  # mentions nothing: a syntax error without jax is not a JAX script
OTHER_SOURCES = ["import numpy\n", "import jaxrun\n", "# jax in a comment\nimport os\n", "import myjax\n", ""]
PRUNED = {"__pycache__", "site-packages", "node_modules", ".hidden"}

names = st.one_of(
    st.sampled_from(["a", "B", "with space", "ünï", "模型", "x" * 60, "v1.2", "__pycache__", ".hidden",
                     "site-packages", "node_modules"]),
    st.text(alphabet="abcXYZ_- é", min_size=1, max_size=12).filter(lambda n: n.strip(" ") == n and n not in (".", "..")),
)


@dataclass(frozen=True)
class File:
    folder: tuple[str, ...]
    name: str
    jax: bool
    source: str


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[tuple[str, ...]], list[File], list[tuple[tuple[str, ...], str, str]]]:
    folders: list[tuple[str, ...]] = [()]
    for _ in range(draw(st.integers(0, 6))):
        parent = draw(st.sampled_from(folders))
        if len(parent) < 4:
            folders.append((*parent, draw(names)))
    files = []
    for _ in range(draw(st.integers(0, 14))):
        is_jax = draw(st.booleans())
        stem = draw(st.one_of(names, st.sampled_from(["test_model", "model_test", "conftest", "__init__"])))
        files.append(File(draw(st.sampled_from(folders)), stem + ".py", is_jax,
                          draw(st.sampled_from(JAX_SOURCES if is_jax else OTHER_SOURCES))))
    # Symlinks: (folder holding it, link name, target relative to the root or "../outside").
    links = [(draw(st.sampled_from(folders)), draw(names) + draw(st.sampled_from(["", ".py"])),
              draw(st.sampled_from(["/".join(f) or "." for f in folders] + ["../outside", "missing"])))
             for _ in range(draw(st.integers(0, 3)))]
    return folders, files, links


def _expected(root: Path, files: list[File]) -> set[Path]:
    """The model: .py files in no skipped folder, not test files, whose source imports JAX."""
    found = set()
    for f in files:
        path = root.joinpath(*f.folder, f.name)
        if not path.is_file() or path.is_symlink():
            continue  # a later file or folder of the same name took its place
        if any(part in PRUNED or part.startswith(".") for part in f.folder):
            continue
        if f.name in ("conftest.py", "__init__.py") or f.name.startswith("test_") or f.name.endswith("_test.py"):
            continue
        if path.read_text() in JAX_SOURCES[:-1]:
            found.add(path)
    return found


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_discovery_over_generated_trees(tree) -> None:  # type: ignore[no-untyped-def]
    folders, files, links = tree
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp).resolve()
        root = base / "root"
        (base / "outside").mkdir()
        (base / "outside" / "elsewhere.py").write_text("import jax\n")
        for folder in folders:
            path = root.joinpath(*folder)
            if not path.exists() or path.is_dir():
                path.mkdir(parents=True, exist_ok=True)
        for f in files:
            path = root.joinpath(*f.folder, f.name)
            if path.parent.is_dir() and not path.exists():
                path.write_text(f.source)
        for folder, name, target in links:
            link = root.joinpath(*folder, name)
            if link.parent.is_dir() and not os.path.lexists(link):
                link.symlink_to(os.path.relpath(root / target, link.parent))

        found = find_jax_scripts(root)

        assert found == sorted(found, key=lambda p: p.relative_to(root).as_posix())
        assert len(set(found)) == len(found)
        for path in found:
            assert path.is_relative_to(root) and path.is_file()
            assert os.path.realpath(path).startswith(str(root) + os.sep)  # never out of the root
        # Every link here points to a folder (inside the root, up the tree, outside it) or nowhere:
        # real folders are walked by their own path once, so links add nothing and loops end.
        assert set(found) == _expected(root, files)
        top_level = find_jax_scripts(root, recursive=False)
        assert set(top_level) <= set(found) and all(p.parent == root for p in top_level)
        batch_names = list(unique_names(found, root).values())
        assert len({n.casefold() for n in batch_names}) == len(batch_names)
