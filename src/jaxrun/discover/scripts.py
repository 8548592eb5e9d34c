"""Find the JAX scripts in a folder, and give each one a stable, unique name.

A ``.py`` file is a *JAX script* when its syntax tree imports JAX or a JAX library
(:data:`JAX_MODULES`): ``import jax``, ``import jax.numpy as jnp``, ``from flax import linen``,
``import optax``, imports nested in functions or ``try`` blocks, ``importlib.import_module("jax")``.
Relative imports and look-alikes (``jaxrun``, ``jax_utils``, ``myjax``) do not count. A cheap
byte-level pre-filter runs first, so only files that mention one of those names are parsed; a
file that mentions JAX but does not parse is kept, so its syntax error becomes a result.

Work is bounded: only a file of at most :data:`PARSE_LIMIT` bytes is parsed (``ast`` needs some
hundred times a file's size in memory: a 50 MiB data literal took 55 s and 7.9 GB). A larger file
is decided by a textual scan of its first :data:`SCAN_LIMIT` bytes, read in chunks: it is a JAX
script when a line imports a JAX library (``import jax.numpy as jnp``, ``import os, optax``,
``from flax import linen``, indented or not) or calls ``importlib.import_module("jax")``.

A Jupyter notebook (``.ipynb``) is a JAX script by the same rule applied to its code cells
(their IPython lines set aside: probe/notebook_cells.py). Its outputs (images in base64, long
printed text) are most of a large notebook and never decide: the notebook is read for its code
cells alone (probe/notebook_json.py: memory is a chunk and the code), in time bounded by
:data:`NOTEBOOK_SIZE_LIMIT` bytes read, and at most :data:`NOTEBOOK_CODE_LIMIT` bytes of code
kept (what the textual scan above would read). A notebook that is not valid JSON, or past
either bound without a JAX import, is listed with what could not be read, one line saying why;
so is a ``.py`` file past :data:`SCAN_LIMIT` whose scanned part imports no JAX library.
Nothing a bound leaves out goes unsaid.

This module uses only the standard library and never imports jax.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import BinaryIO

import msgspec

from jaxrun.core.formatting import fmt_bytes
from jaxrun.errors import ScriptNotFoundError, UsageError
from jaxrun.probe import notebook_cells

__all__ = [
    "JAX_MODULES",
    "PARSE_LIMIT",
    "SCAN_LIMIT",
    "ScriptSearch",
    "find_jax_scripts",
    "search_jax_scripts",
    "is_jax_script",
    "imports_jax",
    "defines_name",
    "script_display_name",
    "ScriptNames",
    "unique_names",
]

#: Top-level modules whose import makes a file a JAX script.
JAX_MODULES = frozenset({"jax", "jaxlib", "flax", "optax", "equinox", "pymdp"})

# Folder names never descended into (hidden folders, starting with ".", are skipped as well).
_PRUNED_DIRS = frozenset({"__pycache__", "site-packages", "dist-packages", "node_modules"})
# A folder holding one of these is a Python environment (venv / virtualenv / conda): skipped.
_ENV_MARKERS = ("pyvenv.cfg", "conda-meta")
# A folder holding one of these is a jaxrun results folder (batch/folder_lock.py's lock, the batch file):
# skipped, so the executed copies of notebooks (--save-notebooks) are never programs of a later run.
_RESULTS_MARKERS = (".jaxrun.lock", "jax_execution_results.json")

#: Source of at most this many bytes is parsed with ``ast``; larger source is scanned as text.
PARSE_LIMIT = 1 << 20
#: A file larger than :data:`PARSE_LIMIT` is scanned up to this many bytes, in :data:`_CHUNK`\ s.
SCAN_LIMIT = 64 << 20
_CHUNK = 1 << 20
_GROWN = 1 << 16  # read at a time past a file's size when it was opened
#: A notebook of more bytes than this is not read (reported): reading one takes about 1 s a GB
#: for a notebook of images, up to 1 s per 100 MB for one of millions of short output lines.
NOTEBOOK_SIZE_LIMIT = 256 << 20
#: A notebook's code cells are kept up to this many bytes (the textual scan's bound).
NOTEBOOK_CODE_LIMIT = SCAN_LIMIT
_NOTEBOOK = notebook_cells.SUFFIX
_PROGRAM_SUFFIXES = (".py", _NOTEBOOK)
# A partial line longer than this at a chunk's end is dropped (no import line is that long).
_CARRY_LIMIT = 1 << 16

_NAMES = rb"(?:jax|jaxlib|flax|optax|equinox|pymdp)"
_MENTION_RE = re.compile(rb"\b" + _NAMES + rb"\b")
_DYNAMIC_IMPORT = (b"import_module", b"__import__")
# The textual scan: an import statement at a line's start ...
_IMPORT_LINE_RE = re.compile(
    rb"[ \t]*(?:import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*" + _NAMES + rb"(?![\w])"
    rb"|from[ \t]+" + _NAMES + rb"(?:\.[\w.]*)?[ \t]+import\b)"
)
# ... or importlib.import_module("jax...") / __import__("jax...") anywhere in a line.
_DYNAMIC_RE = re.compile(
    rb"\b(?:import_module|__import__)\([ \t]*[rRbBuU]?['\"]" + _NAMES + rb"(?:\.[\w.]*)?['\"]"
)


# --------------------------------------------------------------------------- JAX detection


def _is_jax_module(name: str | None) -> bool:
    return bool(name) and name.partition(".")[0] in JAX_MODULES


def _mentions_jax(data: bytes) -> bool:
    """Cheap pre-filter: fast substring tests ("jaxlib" contains "jax"), then a word-boundary regex.

    Substring tests run several times faster than the regex on the typical file that mentions
    none of the names; the regex then drops look-alikes such as ``jax_utils`` or ``myjax``.
    """
    return (
        b"jax" in data or b"flax" in data or b"optax" in data or b"equinox" in data
        or b"pymdp" in data
    ) and _MENTION_RE.search(data) is not None


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, nested ones included (function, class, if/try/with/for/match bodies)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        for attr in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, attr, None)
            if children:
                stack.extend(reversed(children))


def _tree_imports_jax(tree: ast.Module, dynamic: bool) -> bool:
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            if any(_is_jax_module(alias.name) for alias in node.names):
                return True
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _is_jax_module(node.module):
                return True
    if dynamic:  # importlib.import_module("jax") / __import__("jax")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                arg = node.args[0]
                if (
                    name in ("import_module", "__import__")
                    and isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and _is_jax_module(arg.value)
                ):
                    return True
    return False


def imports_jax(source: bytes) -> bool:
    """Whether Python *source* imports JAX or a JAX library (see :data:`JAX_MODULES`).

    Source that mentions one of those names but cannot be parsed counts as importing JAX, so that
    a broken JAX script is reported rather than silently dropped. Source longer than
    :data:`PARSE_LIMIT` bytes is not parsed: the textual scan decides (see the module's notes).
    """
    if len(source) > PARSE_LIMIT:
        return bool(_scan_chunks(_split(source)))
    if not _mentions_jax(source):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning / DeprecationWarning from odd escapes
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # UnicodeDecodeError ⊂ ValueError
        return True
    return _tree_imports_jax(tree, dynamic=any(s in source for s in _DYNAMIC_IMPORT))


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _set_keys(node: ast.AST) -> Iterator[str | None]:
    """The variable names a statement's node sets in the environment (None: one not written out)."""
    def key(expr: ast.AST | None) -> str | None:
        return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None

    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            if isinstance(target, ast.Subscript) and _is_environ(target.value):
                yield key(target.slice)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        func = node.func
        if _is_environ(func.value) and func.attr in ("setdefault", "__setitem__"):
            yield key(node.args[0]) if node.args else None
        elif _is_environ(func.value) and func.attr == "update":
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    yield from (key(k) for k in arg.keys)
                else:
                    yield None
            yield from (k.arg for k in node.keywords)
        elif func.attr == "putenv" and isinstance(func.value, ast.Name) and func.value.id == "os":
            yield key(node.args[0]) if node.args else None


def sets_jax_variables(path: str | os.PathLike[str]) -> str | None:
    """The first variable jax reads as it is imported that the script sets itself
    (``os.environ["XLA_FLAGS"] = ...``, ``os.environ.setdefault``, ``update``, ``os.putenv``),
    named as the script writes it; ``os.environ[...]`` for a name the syntax does not spell out;
    None when it sets none. ``--prestart jax`` execs such a script: the prestarted interpreter
    imported jax before the script could set it. A notebook or an unreadable, unparsable or huge
    file that mentions the environment counts as setting one."""
    from jaxrun.probe.fork_server import JAX_PREFIXES

    try:
        with open(path, "rb") as file:
            source = file.read(PARSE_LIMIT + 1)
    except OSError:
        return None  # the run says why it cannot be read
    mentions = b"environ" in source or b"putenv" in source
    if not mentions:
        return None
    if len(source) > PARSE_LIMIT or not str(path).endswith(".py"):
        return "os.environ[...]"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "os.environ[...]"
    for node in ast.walk(tree):
        for name in _set_keys(node):
            if name is None:
                return "os.environ[...]"
            if name.startswith(JAX_PREFIXES):
                return name
    return None


# Names that can bind a module's globals out of the syntax tree's sight: a script using one may
# define any function, so the static check of warm mode's entry leaves it to the run.
_DYNAMIC_GLOBALS = frozenset({"exec", "eval", "globals", "vars", "locals", "setattr", "__import__", "__dict__"})


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round): a block warm mode never runs."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, *test.comparators]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and \
        any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides)


def _top_level_names(body: list[ast.stmt]) -> Iterator[str]:
    """The names the statements of a module's top level bind (in blocks of if/try/with/for too,
    not inside functions or classes, nor in an ``if __name__ == "__main__":`` block)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield alias.asname or alias.name.partition(".")[0]
            continue
        for target in _targets(node):
            yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            yield from _top_level_names(node.orelse)
            continue
        for attr in ("body", "orelse", "finalbody", "handlers"):
            yield from _top_level_names(getattr(node, attr, None) or [])
        for case in getattr(node, "cases", None) or []:
            yield from _top_level_names(case.body)


def _targets(node: ast.stmt) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    if isinstance(node, ast.Expr):  # a walrus at the top level: (main := make())
        return [n.target for n in ast.walk(node) if isinstance(n, ast.NamedExpr)]
    return []


def defines_name(path: str | os.PathLike[str], name: str) -> bool | None:
    """Whether the ``.py`` script at *path* binds ``name`` at its top level, as warm mode loads it
    (its ``if __name__ == "__main__":`` block left out); None when the syntax tree cannot say: a
    file too large to parse or that does not parse, a ``from m import *``, or code that binds globals
    another way (``globals()[...]``, ``exec``)."""
    try:
        with open(path, "rb") as handle:
            source = handle.read(PARSE_LIMIT + 1)
    except OSError:
        return None
    if len(source) > PARSE_LIMIT:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # its run says what is wrong with it
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            return None
        named = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if named in _DYNAMIC_GLOBALS:
            return None
    return name in set(_top_level_names(tree.body))


def _scan_lines(data: bytes) -> bool:
    """The textual scan of whole lines *data*: a line that imports a JAX library, or a dynamic
    import of one. Only the lines holding the word ``import`` are looked at, each once, and
    only when *data* mentions a JAX library: linear work."""
    if not _mentions_jax(data):
        return False
    line_end = -1  # the end of the last line looked at
    at = data.find(b"import")
    while at >= 0:
        start = data.rfind(b"\n", line_end + 1, at) + 1 or line_end + 1
        line_end = data.find(b"\n", at)
        if line_end < 0:
            line_end = len(data)
        if _IMPORT_LINE_RE.match(data, start, line_end) or _DYNAMIC_RE.search(data, start, line_end):
            return True
        at = data.find(b"import", line_end)
    return False


class NotRead(Exception):
    """A bound of discovery left the file undecided: its message says which (one line)."""


def _scan_chunks(chunks: Iterable[bytes]) -> bool | None:
    """The textual scan over *chunks* (consecutive pieces of one source), at most
    :data:`SCAN_LIMIT` bytes of them, holding at most one chunk and a short partial line; None
    when it stopped there without finding an import (what follows was not read)."""
    carry, seen = b"", 0
    chunks = iter(chunks)
    for chunk in chunks:
        seen += len(chunk)
        cut = chunk.rfind(b"\n") + 1
        if cut:
            if _scan_lines(carry + chunk[:cut]):
                return True
            carry = chunk[cut:]
        else:
            carry += chunk
        if len(carry) > _CARRY_LIMIT:
            carry = b"#"  # still inside a long line: what follows cannot start an import
        if seen >= SCAN_LIMIT:
            if _scan_lines(carry):
                return True
            return None if next(chunks, b"") else False  # more follows, unread: undecided
    return _scan_lines(carry)


def _split(source: bytes) -> Iterator[bytes]:
    for start in range(0, len(source), _CHUNK):
        yield source[start:start + _CHUNK]


def _size(count: int) -> str:
    return fmt_bytes(count, 4)  # 4 figures: a file just past a bound does not read as the bound


_RUN_IT_ANYWAY = "pass it by name to run it, or --exclude it"


def _head(f: BinaryIO, limit: int) -> bytes:
    """Up to ``limit`` bytes from the start of the unbuffered file ``f``, read into a buffer of
    its size (a buffer of ``limit`` bytes, 1 MiB, was a fifth of a small script's scan), then
    on to its end, should it have grown since."""
    head = f.read(min(os.fstat(f.fileno()).st_size + 1, limit))
    while len(head) < limit:
        more = f.read(min(_GROWN, limit - len(head)))
        if not more:
            break
        head += more
    return head


def _file_imports_jax(path: str | os.PathLike[str]) -> bool:
    """:func:`imports_jax` of the file at *path*, reading at most :data:`PARSE_LIMIT` bytes at
    once; raises :class:`OSError` when it cannot be read, :class:`NotRead` when the scan's
    bound left it undecided."""
    with open(path, "rb", buffering=0) as f:
        head = _head(f, PARSE_LIMIT + 1)
        if len(head) <= PARSE_LIMIT:
            return imports_jax(head)

        def chunks() -> Iterator[bytes]:
            yield head
            while chunk := f.read(_CHUNK):
                yield chunk

        found = _scan_chunks(chunks())
    if found is None:
        raise NotRead(f"no JAX import in its first {_size(SCAN_LIMIT)}, and discovery reads no further: {_RUN_IT_ANYWAY}")
    return found


def _notebook_imports_jax(path: str | os.PathLike[str]) -> bool:
    """Whether the notebook at *path*'s code cells import JAX (see the module's notes); raises
    :class:`OSError` when it cannot be read, ``notebook_cells.NotebookError`` when it is not a
    notebook, :class:`NotRead` when a bound left it undecided."""
    path = os.fspath(path)
    with open(path, "rb", buffering=0) as f:
        if os.fstat(f.fileno()).st_size <= PARSE_LIMIT and not _mentions_jax(_head(f, PARSE_LIMIT)):
            return False  # the cheap pre-filter, for the many small files
    try:
        notebook = notebook_cells.load(path, size_limit=NOTEBOOK_SIZE_LIMIT, code_limit=NOTEBOOK_CODE_LIMIT)
    except notebook_cells.NotebookTooLarge as exc:
        size = f"{_size(exc.size)}: " if exc.size is not None else ""
        raise NotRead(f"{size}more than the {_size(exc.limit)} discovery reads of a notebook: {_RUN_IT_ANYWAY}") from None
    code = notebook_cells.code_text(notebook.data).encode("utf-8", "surrogateescape")
    found = _scan_chunks(_split(code)) if len(code) > PARSE_LIMIT else imports_jax(code)
    if found:
        return True
    if found is None or notebook.code_cut:
        raise NotRead(f"no JAX import in the first {_size(NOTEBOOK_CODE_LIMIT)} of its code cells, and discovery reads "
                      f"no further: {_RUN_IT_ANYWAY}")
    return False


def _program_imports_jax(path: str) -> bool:
    return _notebook_imports_jax(path) if path.endswith(_NOTEBOOK) else _file_imports_jax(path)


def is_jax_script(path: str | os.PathLike[str]) -> bool:
    """Whether the file at *path* (a ``.py`` script or an ``.ipynb`` notebook) imports JAX;
    ``False`` when it cannot be read."""
    try:
        return _program_imports_jax(os.fspath(path))
    except (OSError, notebook_cells.NotebookError, NotRead):
        return False


# --------------------------------------------------------------------------- include / exclude


def _patterns(value: str | Iterable[str] | None, option: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value) if isinstance(value, Iterable) else None
    if items is None or not all(isinstance(p, str) for p in items):
        raise UsageError(
            f"{option} must be a glob string or a list of glob strings, got {value!r} "
            f"(e.g. {option}='workloads/*' or {option}=['*.py', '**/model.py'])"
        )
    out: list[str] = []
    for pattern in items:
        pattern = pattern.replace("\\", "/").strip()
        while pattern.startswith("./"):
            pattern = pattern[2:]
        pattern = pattern.rstrip("/")
        if not pattern:
            continue
        out.append(pattern)
        # "**/" also matches zero folders: "**/model.py" matches "model.py", "a/**/b" matches "a/b".
        variant = pattern
        while variant.startswith("**/"):
            variant = variant[3:]
            out.append(variant)
        if "/**/" in variant:
            out.append(variant.replace("/**/", "/"))
        if variant.endswith("/**"):
            out.append(variant[:-3])
    return tuple(dict.fromkeys(out))


def _matches(rel: str, patterns: tuple[str, ...]) -> bool:
    """True when a pattern matches *rel*, its name, or any parent folder's path or name."""
    if not patterns:
        return False
    parts = rel.split("/")
    candidates = {rel, parts[-1]}
    for i in range(1, len(parts)):
        candidates.add("/".join(parts[:i]))
        candidates.add(parts[i - 1])
    return any(fnmatchcase(c, p) for p in patterns for c in candidates)


def path_matches(rel: str, pattern: str) -> bool:
    """Whether ``pattern`` matches the posix path ``rel`` as an ``--include`` glob would."""
    return _matches(rel, _patterns(pattern, "pattern"))


# --------------------------------------------------------------------------- the walk


def _is_pruned_name(name: str) -> bool:
    return name.startswith(".") or name in _PRUNED_DIRS


def _is_not_a_program(name: str) -> bool:
    """pytest files, and package ``__init__.py`` files, which import jax but are not programs."""
    if name.endswith(_NOTEBOOK):
        return False
    if name in ("conftest.py", "__init__.py"):
        return True
    return name.startswith("test_") or name.endswith("_test.py")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _walk_python_files(
    root: str, recursive: bool, exclude: tuple[str, ...], unreadable: list[tuple[str, str]] | None = None,
) -> Iterator[str]:
    """Yield the relative posix paths of candidate ``.py`` files under the real folder *root*;
    sub-folders that cannot be listed are skipped and appended to *unreadable* (path, reason).

    Real folders are walked first; symlinked folders are followed afterwards, only when they
    resolve inside *root*, and each real folder (by ``(st_dev, st_ino)``) is visited once, so a
    folder reachable both directly and through a link keeps its direct path and loops terminate.
    """
    st = os.stat(root)
    visited = {(st.st_dev, st.st_ino)}
    stack: list[str] = [""]  # folders to scan, relative to root ("" is the root)
    deferred: list[str] = []  # symlinked folders, followed once the real tree is done
    while stack or deferred:
        if not stack:
            deferred.sort(reverse=True)
            rel_link = deferred.pop()
            target = os.path.realpath(os.path.join(root, rel_link))
            if not _inside(target, root) or not os.path.isdir(target):
                continue
            target_rel = os.path.relpath(target, root)
            if target_rel != "." and any(_is_pruned_name(p) for p in Path(target_rel).parts):
                continue  # a link into a skipped folder does not bring it back
            try:
                tst = os.stat(target)
            except OSError:
                continue
            if (tst.st_dev, tst.st_ino) in visited:
                continue
            visited.add((tst.st_dev, tst.st_ino))
            stack.append(rel_link)
        rel_dir = stack.pop()
        abs_dir = os.path.join(root, rel_dir) if rel_dir else root
        try:
            with os.scandir(abs_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if not rel_dir:
                raise
            if unreadable is not None:
                unreadable.append((rel_dir + "/", exc.strerror or str(exc)))
            continue  # an unreadable sub-folder is skipped, and reported
        if rel_dir and any(e.name in _ENV_MARKERS or e.name in _RESULTS_MARKERS for e in entries):
            continue  # a virtual environment or conda env, or a jaxrun results folder
        subdirs: list[str] = []
        for entry in entries:
            name = entry.name
            rel = f"{rel_dir}/{name}" if rel_dir else name
            try:
                if entry.is_symlink():
                    if entry.is_dir():  # follows the link
                        if recursive and not _is_pruned_name(name) and not _matches(rel, exclude):
                            deferred.append(rel)
                    elif (
                        name.endswith(_PROGRAM_SUFFIXES)
                        and entry.is_file()
                        and _inside(os.path.realpath(entry.path), root)
                    ):
                        yield rel
                elif entry.is_dir(follow_symlinks=False):
                    if recursive and not _is_pruned_name(name) and not _matches(rel, exclude):
                        dst = entry.stat(follow_symlinks=False)
                        key = (dst.st_dev, dst.st_ino)
                        if key not in visited:
                            visited.add(key)
                            subdirs.append(rel)
                elif name.endswith(_PROGRAM_SUFFIXES) and entry.is_file(follow_symlinks=False):
                    yield rel
            except OSError:
                continue  # vanished or unreadable entry
        stack.extend(reversed(subdirs))


class ScriptSearch(msgspec.Struct, frozen=True):
    """What a search found: the scripts, and what it could not read (``(path relative to the
    searched folder, reason)``: sub-folders it could not list, ``.py`` files it could not open)."""

    scripts: list[Path]
    unreadable: list[tuple[str, str]] = msgspec.field(default_factory=list)


def find_jax_scripts(
    search_dir: str | os.PathLike[str],
    recursive: bool = True,
    *,
    include: str | Iterable[str] | None = None,
    exclude: str | Iterable[str] | None = None,
) -> list[Path]:
    """Return the JAX scripts under *search_dir*, as sorted absolute paths (what
    :func:`search_jax_scripts` finds, without the list of what it could not read).
    """
    return search_jax_scripts(search_dir, recursive, include=include, exclude=exclude).scripts


def search_jax_scripts(
    search_dir: str | os.PathLike[str],
    recursive: bool = True,
    *,
    include: str | Iterable[str] | None = None,
    exclude: str | Iterable[str] | None = None,
) -> ScriptSearch:
    """The JAX scripts under *search_dir*, as sorted absolute paths, and what could not be read.

    A ``.py`` file is returned when it imports JAX or a JAX library (see :func:`imports_jax`;
    files that mention JAX but do not parse are returned too). Skipped: hidden folders (``.x``),
    ``__pycache__``, ``site-packages``, ``dist-packages``, ``node_modules``, any folder holding a
    ``pyvenv.cfg`` or ``conda-meta`` (virtual / conda environments), jaxrun results folders (holding
    ``.jaxrun.lock`` or ``jax_execution_results.json``), pytest files (``test_*.py``,
    ``*_test.py``, ``conftest.py``); unreadable files or sub-folders are skipped and listed in
    ``unreadable``. Symlinked folders and
    files are followed only when they resolve inside *search_dir*; each real folder is visited
    once, so symlink loops terminate. With ``recursive=False`` only the top folder is searched.

    ``include`` / ``exclude`` take a glob or a list of globs (``fnmatch``, case-sensitive, ``*``
    also crosses ``/``). A pattern matches a file when it matches the file's posix path relative
    to *search_dir*, its file name, or the relative path or name of any folder above it; a
    leading ``**/`` may also match no folder. So ``include="workloads/*"`` keeps everything
    under ``workloads/``, ``include="**/model.py"`` or ``"model.py"`` keeps every ``model.py``,
    ``exclude="legacy"`` drops any folder named ``legacy``. With ``include`` a file must match
    one of its patterns; a file matching any ``exclude`` pattern is dropped.

    The result is sorted by the relative posix path; each path is the resolved *search_dir*
    joined with that relative path (a symlinked file inside the folder keeps its in-folder
    path). When *search_dir* is a ``.py`` file or a notebook it is returned alone, resolved,
    whatever it imports; a notebook that is not one (not JSON, no cells) or another file is a
    :class:`~jaxrun.errors.UsageError`. Found in a folder, such a notebook is in ``unreadable``
    with the reason, as is a file a bound of discovery left undecided (see the module's notes).

    Raises :class:`~jaxrun.errors.ScriptNotFoundError` when *search_dir* does not exist or
    cannot be read, and :class:`~jaxrun.errors.UsageError` for malformed ``include`` /
    ``exclude``.
    """
    search = prepare_search(search_dir, recursive, include=include, exclude=exclude)
    scripts = list(search.scripts())
    return ScriptSearch(scripts, sorted(search.unreadable))


class PreparedSearch(msgspec.Struct):
    """A search with its folder checked and its candidate ``.py`` files listed, in the order of
    :func:`search_jax_scripts` (listing 10,000 files takes ~10 ms: no file is read yet).
    :meth:`scripts` reads them one at a time, so a batch can start its first script while the
    rest of a large folder is read (plan/batch_plan.py)."""

    root: Path
    candidates: list[str]  # posix paths relative to root, sorted; [""]: root is the script itself
    unreadable: list[tuple[str, str]]  # grows as scripts() finds files it cannot read

    def base_names(self) -> list[str]:
        """Each candidate's :func:`script_display_name` (from its relative path: no file is read)."""
        if self.candidates == [""]:
            return [script_display_name(self.root, self.root.parent)]
        return [_joined_name(rel.split("/")) for rel in self.candidates]

    def scripts(self) -> Iterator[Path]:
        """The JAX scripts among the candidates, in order."""
        if self.candidates == [""]:
            yield self.root
            return
        root_str = str(self.root)
        for rel in self.candidates:
            try:
                is_jax = _program_imports_jax(os.path.join(root_str, rel))
            except OSError as exc:
                self.unreadable.append((rel, exc.strerror or str(exc)))
                continue
            except notebook_cells.NotebookError as exc:  # "<path>: not a valid notebook: ..."
                self.unreadable.append((rel, str(exc).removeprefix(os.path.join(root_str, rel) + ": ")))
                continue
            except NotRead as exc:
                self.unreadable.append((rel, str(exc)))
                continue
            if is_jax:
                yield self.root / rel  # a relative posix path: the same Path as its parts joined


def check_notebook(path: str | os.PathLike[str], given: str | None = None) -> None:
    """A notebook named to run (not found in a folder: there it is listed with what could not be
    read): one Jupyter could not open is a :class:`~jaxrun.errors.UsageError`, one line naming
    it (``given``: as the user wrote it), before anything runs. Read whole, whatever its size:
    its code's size bounds the memory (probe/notebook_json.py)."""
    try:
        notebook_cells.load(os.fspath(path), name=given)
    except OSError as exc:
        raise ScriptNotFoundError(f"cannot read file {given or os.fspath(path)!r}: {exc.strerror or exc}") from None
    except notebook_cells.NotebookError as exc:
        raise UsageError(str(exc)) from None


def prepare_search(
    search_dir: str | os.PathLike[str],
    recursive: bool = True,
    *,
    include: str | Iterable[str] | None = None,
    exclude: str | Iterable[str] | None = None,
) -> PreparedSearch:
    """Check *search_dir* and list its candidate files (see :func:`search_jax_scripts`, which
    raises the same errors)."""
    try:
        given = os.fspath(search_dir)
    except TypeError:
        raise UsageError(
            f"search_dir must be a path (str or os.PathLike), got {type(search_dir).__name__}: "
            f"{search_dir!r} — pass a folder of JAX scripts or a .py file"
        ) from None
    includes = _patterns(include, "include")
    excludes = _patterns(exclude, "exclude")
    path = Path(given).expanduser()
    if not path.exists():
        raise ScriptNotFoundError(
            f"no such file or folder: {given!r} — pass a folder of JAX scripts or a .py file"
        )
    root = path.resolve()
    if root.is_file() and root.suffix not in _PROGRAM_SUFFIXES:
        # Run as Python it would fail with a NameError or a syntax error, reported as the script's.
        raise UsageError(f"not a Python script or notebook: {given!r} — pass a folder of JAX scripts or a .py file "
                         "(or an .ipynb notebook)")
    if root.is_file():
        try:
            with open(root, "rb"):
                pass
        except OSError as exc:
            raise ScriptNotFoundError(
                f"cannot read file {given!r}: {exc.strerror or exc} — check its permissions"
            ) from None
        if root.suffix == _NOTEBOOK:
            check_notebook(root, given)
        return PreparedSearch(root, [""], [])
    if not root.is_dir():
        raise ScriptNotFoundError(
            f"not a regular file or folder: {given!r} — pass a folder of JAX scripts or a .py file"
        )
    candidates: list[str] = []
    unreadable: list[tuple[str, str]] = []
    try:
        for rel in _walk_python_files(str(root), recursive, excludes, unreadable):
            name = rel.rpartition("/")[2]
            if _is_not_a_program(name):
                continue
            if includes and not _matches(rel, includes):
                continue
            if excludes and _matches(rel, excludes):
                continue
            candidates.append(rel)
    except OSError as exc:  # only the top folder re-raises; sub-folders are skipped
        raise ScriptNotFoundError(
            f"cannot read folder {given!r}: {exc.strerror or exc} — check its permissions"
        ) from None
    candidates.sort()
    return PreparedSearch(root, candidates, unreadable)


# --------------------------------------------------------------------------- names


def _under(path: str, base: str) -> tuple[str, ...] | None:
    if path == base:
        return ()
    prefix = base if base.endswith(os.sep) else base + os.sep
    return tuple(path[len(prefix):].split(os.sep)) if path.startswith(prefix) else None


def _relative_parts(script: Path, root: Path) -> tuple[str, ...] | None:
    """*script*'s parts relative to *root*: lexically first, then with symlinks resolved (strings,
    not pathlib: this runs once per script of a batch, 10,000 times in a large one)."""
    script_abs, root_abs = os.path.abspath(script), os.path.abspath(root)
    parts = _under(script_abs, root_abs)
    if parts is not None:
        return parts
    try:
        root_real = os.path.realpath(root_abs)
        parts = _under(script_abs, root_real)
        return parts if parts is not None else _under(os.path.realpath(script_abs), root_real)
    except (OSError, RuntimeError):
        return None


def script_display_name(script: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """The ``<name>`` of a script in a batch (docs/ARCHITECTURE.md, "Results folder"): *script* relative to *root*, ``"__"``-joined, without ``.py``.
    A notebook keeps its ``.ipynb``: ``train.py`` and ``train.ipynb`` are ``train`` and ``train.ipynb``.

    ``gnn/jax/model.py`` under *root* gives ``"gnn__jax__model"``; a script not under *root*
    (or *root* being the script itself) gives the file stem.
    """
    script = Path(script)
    parts = _relative_parts(script, Path(root))
    if not parts:
        return script.name if script.suffix == _NOTEBOOK else script.stem or script.name
    return _joined_name(parts)


def _joined_name(parts: Iterable[str]) -> str:
    name = "__".join(parts)
    return name[:-3] if name.endswith(".py") and len(name) > 3 else name


class ScriptNames:
    """Names unique in a batch (case-insensitively), given one script at a time in batch order:
    a script keeps its own base name unless an earlier script has it; a clash gets the first
    ``_2``, ``_3``, ... that no script has, nor is any ``reserved`` name (the base names of the
    scripts still to come: a script's own name is never taken from it by an earlier clash)."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._reserved = {name.casefold() for name in reserved}
        self._taken: set[str] = set()

    def take(self, base: str) -> str:
        name, n = base, 2
        if name.casefold() in self._taken:
            while (name := f"{base}_{n}").casefold() in self._taken or name.casefold() in self._reserved:
                n += 1
        self._taken.add(name.casefold())
        return name


def unique_names(
    scripts: Iterable[str | os.PathLike[str]], root: str | os.PathLike[str]
) -> dict[Path, str]:
    """Map each script to a display name unique in the batch (case-insensitively).

    Each script's first-come base name is kept; later collisions get ``_2``, ``_3``, ... (skipping
    names already taken by another script), so ``a/model.py`` and ``b/model.py`` never share
    ``outputs/<name>/`` even on a case-insensitive file system.
    """
    paths = list(dict.fromkeys(Path(s) for s in scripts))
    bases = [script_display_name(p, root) for p in paths]
    names = ScriptNames(reserved=bases)
    return {path: names.take(base) for path, base in zip(paths, bases)}
