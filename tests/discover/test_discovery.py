"""Tests for jaxrun.discover.scripts: real files in tmp_path, a real subprocess for the no-jax rule."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jaxrun.discover.scripts import (
    find_jax_scripts,
    imports_jax,
    script_display_name,
    unique_names,
)
from jaxrun.errors import ScriptNotFoundError, UsageError

SRC_DIR = Path(__file__).resolve().parents[2] / "src"


def write(root: Path, rel: str, text: str = "import jax\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def rels(paths: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root.resolve()).as_posix() for p in paths]


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    "source",
    [
        "import jax\n",
        "import jax.numpy as jnp\n",
        "from jax import numpy\n",
        "from jax.numpy import zeros\n",
        "import os, jax\n",
        "import optax\n",
        "from flax import linen as nn\n",
        "import flax.linen\n",
        "import equinox as eqx\n",
        "from pymdp import utils\n",
        "import jaxlib\n",
        "def f():\n    import jax\n    return jax\n",
        "try:\n    import jax\nexcept ImportError:\n    jax = None\n",
        "class A:\n    def m(self):\n        if True:\n            from jax import lax\n",
        "import importlib\njnp = importlib.import_module('jax.numpy')\n",
        "# -*- coding: latin-1 -*-\nimport jax\ns = 'caf\xe9'\n",
    ],
)
def test_imports_jax_detects(source: str) -> None:
    encoding = "latin-1" if "latin-1" in source else "utf-8"
    assert imports_jax(source.encode(encoding))


@pytest.mark.parametrize(
    "source",
    [
        "# this file has nothing to do with jax\nx = 1\n",
        "s = 'import jax'\n",
        '"""\nimport jax\n"""\n',
        "import jaxrun\n",
        "from jaxrun import record\n",
        "import jax_utils\n",
        "import myjax\n",
        "from . import jax\n",
        "from .jax import thing\n",
        "import numpy as np\n",
    ],
)
def test_imports_jax_rejects(source: str) -> None:
    assert not imports_jax(source.encode())


def test_finds_each_jax_library(tmp_path: Path) -> None:
    write(tmp_path, "a_plain.py", "import jax\n")
    write(tmp_path, "b_from.py", "from jax import numpy\n")
    write(tmp_path, "c_optax.py", "import optax\n")
    write(tmp_path, "d_flax.py", "from flax import linen\n")
    write(tmp_path, "e_equinox.py", "import equinox as eqx\n")
    write(tmp_path, "f_pymdp.py", "import pymdp\n")
    write(tmp_path, "g_nested.py", "def main():\n    import jax.numpy as jnp\n    return jnp\n")
    write(tmp_path, "h_comment.py", "# jax is great\nx = 'jax'\n")
    write(tmp_path, "i_jaxrun.py", "import jaxrun\njaxrun.record(x=1)\n")
    write(tmp_path, "j_numpy.py", "import numpy\n")
    write(tmp_path, "notes.txt", "import jax\n")
    assert rels(find_jax_scripts(tmp_path), tmp_path) == [
        "a_plain.py",
        "b_from.py",
        "c_optax.py",
        "d_flax.py",
        "e_equinox.py",
        "f_pymdp.py",
        "g_nested.py",
    ]


def test_syntax_error_that_mentions_jax_is_kept(tmp_path: Path) -> None:
    write(tmp_path, "broken.py", "import jax\ndef f(:\n")
    write(tmp_path, "broken_nojax.py", "def f(:\n")
    (tmp_path / "nullbyte.py").write_bytes(b"import jax\x00\n")
    (tmp_path / "badutf8.py").write_bytes(b"import jax\nx = '\xff\xfe'\n")
    assert rels(find_jax_scripts(tmp_path), tmp_path) == [
        "badutf8.py",
        "broken.py",
        "nullbyte.py",
    ]


# --------------------------------------------------------------------------- what is skipped


def test_skips_hidden_cache_envs_and_pytest_files(tmp_path: Path) -> None:
    write(tmp_path, "keep.py")
    write(tmp_path, "pkg/keep2.py")
    write(tmp_path, ".hidden/x.py")
    write(tmp_path, "pkg/.git/hooks/y.py")
    write(tmp_path, "__pycache__/z.py")
    write(tmp_path, "venv/lib/v.py")
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    write(tmp_path, "myenv/w.py")
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    write(tmp_path, ".venv/lib/u.py")
    write(tmp_path, "env_without_cfg/kept.py")
    write(tmp_path, "lib/python3.11/site-packages/jaxpkg/core.py")
    write(tmp_path, "web/node_modules/pkg/n.py")
    write(tmp_path, "test_model.py")
    write(tmp_path, "model_test.py")
    write(tmp_path, "conftest.py")
    write(tmp_path, "tests/test_other.py")
    assert rels(find_jax_scripts(tmp_path), tmp_path) == [
        "env_without_cfg/kept.py",
        "keep.py",
        "pkg/keep2.py",
    ]


def test_root_itself_may_be_hidden(tmp_path: Path) -> None:
    root = tmp_path / ".work"
    write(root, "a.py")
    assert rels(find_jax_scripts(root), root) == ["a.py"]


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root ignores file permissions")
def test_unreadable_file_and_subfolder_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "ok.py")
    secret = write(tmp_path, "secret.py")
    locked = tmp_path / "locked"
    write(locked, "inner.py")
    secret.chmod(0)
    locked.chmod(0)
    try:
        assert rels(find_jax_scripts(tmp_path), tmp_path) == ["ok.py"]
    finally:
        locked.chmod(0o755)
        secret.chmod(0o644)


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root ignores file permissions")
def test_unreadable_root_raises(tmp_path: Path) -> None:
    root = tmp_path / "locked"
    write(root, "a.py")
    root.chmod(0)
    try:
        with pytest.raises(ScriptNotFoundError, match="cannot read folder"):
            find_jax_scripts(root)
    finally:
        root.chmod(0o755)


# --------------------------------------------------------------------------- symlinks


def test_symlink_to_folder_outside_root_is_not_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    write(root, "inside.py")
    write(outside, "elsewhere.py")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "escape_file.py").symlink_to(outside / "elsewhere.py")
    assert rels(find_jax_scripts(root), root) == ["inside.py"]


def test_symlink_loop_terminates(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "a/b/deep.py")
    (root / "a" / "b" / "up").symlink_to(root / "a", target_is_directory=True)
    (root / "a" / "self").symlink_to(".", target_is_directory=True)
    (root / "to_root").symlink_to(root, target_is_directory=True)
    (root / "x").symlink_to(root / "y")
    (root / "y").symlink_to(root / "x")  # a dangling loop of file links
    assert rels(find_jax_scripts(root), root) == ["a/b/deep.py"]


def test_symlink_inside_root_is_followed_once_and_keeps_in_root_path(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "real/model.py")
    write(root, "shared_src/lib.py")
    # "aaa" sorts before "real": the real folder still wins, each real folder is visited once
    (root / "aaa").symlink_to(root / "real", target_is_directory=True)
    (root / "alias.py").symlink_to(root / "real" / "model.py")
    assert rels(find_jax_scripts(root), root) == [
        "alias.py",
        "real/model.py",
        "shared_src/lib.py",
    ]
    # with the real folder excluded, the link is followed and keeps its in-root path
    assert rels(find_jax_scripts(root, exclude="real"), root) == ["aaa/model.py", "alias.py",
                                                                  "shared_src/lib.py"]


def test_symlink_into_skipped_folder_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "kept.py")
    write(root, ".store/hidden.py")
    write(root, "__pycache__/cached.py")
    (root / "store").symlink_to(root / ".store", target_is_directory=True)
    (root / "cache").symlink_to(root / "__pycache__", target_is_directory=True)
    assert rels(find_jax_scripts(root), root) == ["kept.py"]


def test_symlinked_root_is_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write(real, "a.py")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    assert find_jax_scripts(link) == [real.resolve() / "a.py"]


# --------------------------------------------------------------------------- options


def test_recursive_false_looks_only_at_top_folder(tmp_path: Path) -> None:
    write(tmp_path, "top.py")
    write(tmp_path, "sub/below.py")
    assert rels(find_jax_scripts(tmp_path, recursive=False), tmp_path) == ["top.py"]
    assert rels(find_jax_scripts(tmp_path, True), tmp_path) == ["sub/below.py", "top.py"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel in [
        "model.py",
        "train.py",
        "workloads/arc.py",
        "workloads/deep/surrogate.py",
        "gnn/jax/model.py",
        "legacy/old.py",
    ]:
        write(tmp_path, rel)
    return tmp_path


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        (None, None, ["gnn/jax/model.py", "legacy/old.py", "model.py", "train.py",
                      "workloads/arc.py", "workloads/deep/surrogate.py"]),
        ("workloads/*", None, ["workloads/arc.py", "workloads/deep/surrogate.py"]),
        ("workloads", None, ["workloads/arc.py", "workloads/deep/surrogate.py"]),
        ("**/model.py", None, ["gnn/jax/model.py", "model.py"]),
        ("model.py", None, ["gnn/jax/model.py", "model.py"]),
        (["train.py", "gnn/**"], None, ["gnn/jax/model.py", "train.py"]),
        ("*.py", "legacy", ["gnn/jax/model.py", "model.py", "train.py", "workloads/arc.py",
                            "workloads/deep/surrogate.py"]),
        (None, ["legacy/*", "**/deep/*", "model.py"], ["train.py", "workloads/arc.py"]),
        ("workloads/**/*.py", "surrogate.py", ["workloads/arc.py"]),
        ("nothing_*", None, []),
    ],
)
def test_include_exclude(tree: Path, include, exclude, expected: list[str]) -> None:
    assert rels(find_jax_scripts(tree, include=include, exclude=exclude), tree) == expected


def test_bad_patterns_raise_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="include must be a glob"):
        find_jax_scripts(tmp_path, include=3)
    with pytest.raises(UsageError, match="exclude must be a glob"):
        find_jax_scripts(tmp_path, exclude=["ok", None])


def test_sorted_and_deterministic(tmp_path: Path) -> None:
    names = ["zeta.py", "alpha.py", "Beta.py", "m/a.py", "m/b/c.py", "m_z.py", "a/z.py"]
    for name in reversed(names):
        write(tmp_path, name)
    first = find_jax_scripts(tmp_path)
    assert rels(first, tmp_path) == sorted(rels(first, tmp_path))
    assert len(first) == len(names)
    assert all(find_jax_scripts(str(tmp_path)) == first for _ in range(3))


# --------------------------------------------------------------------------- paths


def test_file_path_given_directly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = write(tmp_path, "no_jax_here.py", "print('hi')\n")
    monkeypatch.chdir(tmp_path)
    assert find_jax_scripts("no_jax_here.py") == [plain.resolve()]
    assert find_jax_scripts(plain, include="nothing") == [plain.resolve()]


def test_missing_path_raises(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ScriptNotFoundError, match="no such file or folder") as info:
        find_jax_scripts(missing)
    assert "pass a folder of JAX scripts or a .py file" in str(info.value)
    assert isinstance(info.value, UsageError)
    assert isinstance(info.value, FileNotFoundError)


def test_non_path_raises_usage_error() -> None:
    with pytest.raises(UsageError, match="search_dir must be a path"):
        find_jax_scripts(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- names


def test_script_display_name(tmp_path: Path) -> None:
    script = write(tmp_path, "gnn/jax/model.py")
    assert script_display_name(script, tmp_path) == "gnn__jax__model"
    assert script_display_name(tmp_path / "top.py", tmp_path) == "top"
    assert script_display_name(Path("/elsewhere/thing.py"), tmp_path) == "thing"
    assert script_display_name(script, script) == "model"


def test_unique_names_for_two_model_py(tmp_path: Path) -> None:
    write(tmp_path, "a/model.py")
    write(tmp_path, "b/model.py")
    write(tmp_path, "model.py")
    scripts = find_jax_scripts(tmp_path)
    names = unique_names(scripts, tmp_path)
    assert list(names.values()) == ["a__model", "b__model", "model"]
    assert len(set(names.values())) == len(scripts)


def test_unique_names_suffixes_collisions() -> None:
    root = Path("/r")
    scripts = [root / "a" / "model.py", root / "a__model.py", root / "a__model_2.py",
               root / "A__Model.py"]
    names = unique_names(scripts, root)
    assert names == {
        root / "a" / "model.py": "a__model",
        root / "a__model.py": "a__model_3",  # a__model_2 is another script's own name
        root / "a__model_2.py": "a__model_2",
        root / "A__Model.py": "A__Model_4",  # case-insensitive file systems
    }


def test_a_batch_names_its_scripts_by_the_same_rule(tmp_path: Path) -> None:
    # The batch names scripts one at a time as its plan reads the folder (plan/batch_plan.py): a
    # script's own name is still never given to an earlier clash.
    from jaxrun.plan.batch_plan import discover

    for rel in ("a/model.py", "a__model.py", "a__model_2.py", "b__model_2.py"):
        write(tmp_path / "x", rel)
    write(tmp_path / "y", "a__model.py")
    found, _ = discover((tmp_path / "x", tmp_path / "y"), True, None, None)
    within = unique_names([s for s, _ in found[:4]], tmp_path / "x")
    assert [n for _, n in found[:4]] == list(within.values()) == ["a__model", "a__model_3", "a__model_2",
                                                                   "b__model_2"]
    assert found[4][1] == "a__model_4"  # across the folders given: first come, first served


# --------------------------------------------------------------------------- no jax import


def test_discovery_does_not_import_jax(tmp_path: Path) -> None:
    write(tmp_path, "a.py", "import jax\nimport jax.numpy as jnp\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    code = textwrap.dedent(
        f"""
        import sys
        import jaxrun.discover.scripts as d
        found = d.find_jax_scripts({str(tmp_path)!r})
        assert [p.name for p in found] == ["a.py"], found
        print("jax" in sys.modules, any(m.startswith("jax.") for m in sys.modules))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


# --------------------------------------------------------------------------- huge files


_HUGE_CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
def peak_mb():  # VmHWM: ru_maxrss would carry the launching process's peak across exec
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
import jaxrun.discover.scripts as d
found = d.find_jax_scripts(sys.argv[1])
print(json.dumps({"found": [p.name for p in found],
                  "maxrss_mb": peak_mb()}))
"""


def _huge(path: Path, head: bytes, megabytes: int = 50) -> None:
    # A list literal of ~50 MB: what makes ast.parse take many GB.
    with open(path, "wb") as f:
        f.write(head + b"data = [\n")
        line = b"1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,\n"
        for _ in range(megabytes):
            f.write(line * ((1 << 20) // len(line)))
        f.write(b"]\n")


def test_huge_file_is_decided_without_parsing_it(tmp_path: Path) -> None:
    """A 50 MB ``.py`` is decided by a bounded textual scan, under a 1 GB address-space limit,
    with a small peak RSS; a huge file that only mentions JAX (no import line) is not kept."""
    _huge(tmp_path / "big_jax.py", b'"""A generated table."""\nimport os\nimport jax.numpy as jnp\n')
    _huge(tmp_path / "big_mention.py", b"# computed once with jax, pasted here\n")
    write(tmp_path, "small.py", "import jax\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    proc = subprocess.run([sys.executable, "-c", _HUGE_CHILD, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = __import__("json").loads(proc.stdout)
    assert out["found"] == ["big_jax.py", "small.py"]
    assert out["maxrss_mb"] < 400, out  # parsing it in-process takes GBs (MemoryError at 1 GB)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"import jax\n", True),
        (b"  import jax.numpy as jnp\n", True),
        (b"import os, optax\n", True),
        (b"from flax import linen\n", True),
        (b"\tfrom jax.numpy import zeros\n", True),
        (b"m = importlib.import_module('jax.numpy')\n", True),
        (b"import jaxrun\n", False),
        (b"from jax_utils import x\n", False),
        (b"from . import jax\n", False),
        (b"import myjax\n", False),
        (b"# import jax is what we would do\n", False),
        (b"x = 'jax'\n", False),
    ],
)
def test_large_source_uses_the_textual_scan(text: bytes, expected: bool) -> None:
    # Above the parse limit, the decision is the textual scan's: one import line is enough.
    filler = b"x = 1\n" * (2 * (1 << 20) // 6)
    assert imports_jax(filler + text + filler) is expected
