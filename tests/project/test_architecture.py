"""The layout of docs/ARCHITECTURE.md, checked: no import cycles, and no lower layer importing an
upper one. Every kind of import counts: at module level, inside functions (lazy) and under
``if TYPE_CHECKING:`` (a type checker follows those too, and a cycle there is a knot all the same)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "jaxrun"

# The layers, lowest first: a module's layer is its top-level package (or, at the root, the
# public entry point it is), or the sub-package of it named here (``run.process`` below
# ``run.reading`` below the rest of ``run``). A module may import its own layer and the ones below
# it. The root package (``jaxrun/__init__.py``, the public API) is the top: it may import any
# layer, and no module imports it.
ORDER = ["errors core", "probe", "results", "discover", "config", "judge", "plan", "run.process", "run.reading", "run",
         "executors", "present", "outputs", "batch ab", "interfaces __main__", "bench pytest_plugin"]
LAYERS: dict[str, int] = {f"jaxrun.{name}": i for i, names in enumerate(ORDER) for name in names.split()}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(name: str) -> int:
    """The layer of module ``name``: that of the longest name in ``LAYERS`` it is, or is inside."""
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    raise AssertionError(f"{name} is in no layer: the root holds only the public entry points (ORDER)")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path) -> tuple[set[str], set[str], set[str]]:
    """(module-level, lazy, typing-only) jaxrun modules imported by ``path``: lazy inside a
    function, typing-only under ``if TYPE_CHECKING:`` (at module level)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    top: set[str] = set()
    lazy: set[str] = set()
    typing: set[str] = set()

    def visit(node: ast.AST, in_function: bool, for_types: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for part in child.body:
                    visit_node(part, in_function, True)
                for part in child.orelse:  # what runs (an ``else:`` beside it) is imported as anywhere
                    visit_node(part, in_function, for_types)
            else:
                visit_node(child, in_function, for_types)

    def visit_node(node: ast.AST, in_function: bool, for_types: bool) -> None:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        for target in targets:
            if target == "jaxrun" or target.startswith("jaxrun."):
                resolved = _existing(target)
                if resolved and resolved != name:
                    (lazy if in_function else typing if for_types else top).add(resolved)
        visit(node, in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)), for_types)

    visit(tree, False, False)
    return top, lazy, typing


def _existing(target: str) -> str | None:
    """The module a dotted import name refers to (``from x import name`` may name a function)."""
    parts = target.split(".")
    while parts:
        candidate = PACKAGE.parent.joinpath(*parts)
        if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return None


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: imports(path) for name, path in MODULES.items()}


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        if name != "jaxrun":
            layer(name)


def test_no_import_cycles_of_any_kind() -> None:
    """No module reaches itself through imports of any kind: at module level, inside functions or
    for type checking (a knot of lazy imports is a knot, only one that fails later)."""
    edges = {n: {t for t in top | lazy | typing if t != n} for n, (top, lazy, typing) in GRAPH.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            walk(node)


def test_no_lower_layer_imports_an_upper_one() -> None:
    wrong = []
    for name, (top, lazy, typing) in GRAPH.items():
        if name == "jaxrun":  # the public API, the top: it re-exports from every layer, lazily
            continue
        for target in top | lazy | typing:
            if target == "jaxrun":
                wrong.append(f"{name} imports the root package jaxrun, the top (jaxrun.core.version has the version)")
            elif layer(target) > layer(name):
                wrong.append(f"{name} (layer {ORDER[layer(name)]}) imports {target} (layer {ORDER[layer(target)]})")
    assert not wrong, "\n".join(wrong)


def test_the_graph_sees_imports() -> None:
    """The checks above would pass vacuously if the parser missed imports of any kind."""
    top, lazy, typing = GRAPH["jaxrun.batch.pipeline"]
    assert {"jaxrun.config.options", "jaxrun.executors.base", "jaxrun.run.execute", "jaxrun.run.batch_pool"} <= top
    assert "jaxrun.batch.pipeline" in GRAPH["jaxrun.interfaces.cli.run_command"][1]
    top, lazy, typing = GRAPH["jaxrun.run.runner"]
    assert {"jaxrun.run.attempt", "jaxrun.run.process.placement", "jaxrun.run.reading.attempt_run"} <= top
    assert {"jaxrun.run.reading.classify", "jaxrun.run.reading.result"} <= lazy
    assert "jaxrun.results.models" in typing
    assert "jaxrun.run.process.process_watch" in GRAPH["jaxrun.run.reading.classify"][2]
    # The sub-layers of run/: the process below what reads it, below the attempt loop.
    assert layer("jaxrun.run.process.spare") < layer("jaxrun.run.reading.result") < layer("jaxrun.run.runner") \
        == layer("jaxrun.run") < layer("jaxrun.executors.local")


def test_no_function_outside_the_cli_takes_more_than_twelve_parameters() -> None:
    """Options travel as one validated object; a long parameter list is a missing one."""
    long = []
    for name, path in MODULES.items():
        if name.startswith("jaxrun.interfaces.cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) - int(bool(a.args) and a.args[0].arg in ("self", "cls"))
                if count > 12:
                    long.append(f"{name}.{node.name}: {count} parameters")
    assert not long, "\n".join(long)


ARCHITECTURE = PACKAGE.parents[1] / "docs" / "ARCHITECTURE.md"


def test_architecture_md_has_a_paragraph_per_package_and_names_only_files_that_exist() -> None:
    """docs/ARCHITECTURE.md is the map a newcomer reads: every package of ORDER has its heading,
    and a path it names in backquotes (`run/runner.py`, `tests/test_options.py`) is a file."""
    import re

    text = ARCHITECTURE.read_text(encoding="utf-8")
    packages = [n for names in ORDER for n in names.split() if (PACKAGE / n).is_dir()]
    missing = [p for p in packages if f"### `{p}/`" not in text]
    assert not missing, f"no section for {missing} in docs/ARCHITECTURE.md"
    root = PACKAGE.parents[1]
    named = set(re.findall(r"`((?:[\w.]+/)+[\w.]+\.py)", text))
    gone = sorted(p for p in named if not any((base / p).is_file() for base in (PACKAGE, root)))
    # In a package's own section a module may go by its file name alone (`defaults.py`).
    sections = re.split(r"^### `(\w+)/`$", text, flags=re.M)
    bare = 0
    for package, body in zip(sections[1::2], sections[2::2]):
        body = body.split("\n## ")[0]
        for name in set(re.findall(r"`([\w]+\.py)`", body)):
            bare += 1
            if not any((PACKAGE / package).rglob(name)) and not (PACKAGE / name).is_file():
                gone.append(f"{package}/ {name}")
    assert len(named) + bare > 100  # the check would pass vacuously on a page that names none
    assert not gone, "docs/ARCHITECTURE.md names files that do not exist: " + ", ".join(gone)


def test_architecture_md_names_every_module() -> None:
    """A module the map does not name is one a newcomer cannot find: each module of a package is
    named in its package's section (by its file name, `runner.py`, or its path), each module at
    the root anywhere."""
    import re

    text = ARCHITECTURE.read_text(encoding="utf-8")
    sections = re.split(r"^### `(\w+)/`$", text, flags=re.M)
    bodies = {package: body.split("\n## ")[0] for package, body in zip(sections[1::2], sections[2::2])}
    unnamed = []
    for module in sorted(PACKAGE.rglob("*.py")):
        relative = module.relative_to(PACKAGE)
        if module.name == "__init__.py" or "__pycache__" in relative.parts:
            continue
        where = text if len(relative.parts) == 1 else bodies.get(relative.parts[0], "")
        if not re.search(rf"`(?:[\w.]+/)*{re.escape(module.name)}`", where):
            unnamed.append(relative.as_posix())
    assert len(list(PACKAGE.rglob("*.py"))) > 100  # the package was found
    assert not unnamed, "docs/ARCHITECTURE.md does not name: " + ", ".join(unnamed)


def test_no_package_exports_a_name_that_is_also_one_of_its_modules() -> None:
    """Once ``pkg.x`` is imported, the attribute ``pkg.x`` is the module: a function ``x`` that
    ``pkg`` re-exports lazily (by ``__getattr__``) would then be shadowed by it. (An eager
    ``from .x import x`` in the package rebinds the name after the import: jaxrun.bench's.)"""
    import importlib

    clashes = []
    for init in PACKAGE.rglob("__init__.py"):
        name = module_name(init)
        if "def __getattr__" not in init.read_text(encoding="utf-8"):
            continue
        exported = set(getattr(importlib.import_module(name), "__all__", ()))
        modules = {p.stem for p in init.parent.glob("*.py")} | {p.name for p in init.parent.iterdir()
                                                                 if (p / "__init__.py").is_file()}
        clashes += [f"{name}.{n}" for n in sorted(exported & modules)]
    assert not clashes, "exported names that are also modules: " + ", ".join(clashes)


def test_every_name_looked_up_by_text_resolves() -> None:
    """Modules named in text (lazy re-exports, the CLI's commands, the report sinks, the backends,
    the result files' models) are found where the text says: a module moved without its entry
    would fail only when that one thing is asked for."""
    import importlib

    from jaxrun.executors.backends import BUILT_IN
    from jaxrun.interfaces.cli import COMMANDS
    from jaxrun.outputs.declarations import OUTPUTS
    from jaxrun.results.result_files import SCHEMAS, schema_model

    for package in ("jaxrun", "jaxrun.present.view"):
        module = importlib.import_module(package)
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{package}.{name}"
    for command, (module_name, attr) in COMMANDS.items():
        assert callable(getattr(importlib.import_module(f"jaxrun.interfaces.cli.{module_name}"), attr)), command
    for output in OUTPUTS:
        module_name, attr = output.make.split(":")
        assert callable(getattr(importlib.import_module(module_name), attr)), output.name
    for backend in BUILT_IN.values():
        module_name, attr = backend.executor.split(":")
        assert isinstance(getattr(importlib.import_module(module_name), attr), type), backend.name
    for kind in SCHEMAS:
        assert isinstance(schema_model(kind), type), kind


def test_the_root_holds_only_the_public_entry_points_and_no_module_name_repeats() -> None:
    """A module's name says which one it is without its folder: ``history.py`` is the history's
    store and nothing else is called that; the root holds what users import or run by name."""
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert root == ["__init__.py", "__main__.py", "errors.py", "pytest_plugin.py"]
    seen: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            seen.setdefault(path.stem, []).append(module_name(path))
    repeated = {name: where for name, where in seen.items() if len(where) > 1}
    assert not repeated, repeated
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    clash = packages & set(seen)
    assert not clash, f"modules named as a top-level package: {clash}"


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) - int(bool(a.args) and a.args[0].arg in ("self", "cls"))


def test_the_batch_reads_in_a_page() -> None:
    """``run_batch`` is the data flow on one screen, and nothing along the batch's path (its own
    modules and the outputs it makes) takes more than five parameters: more is a missing object."""
    tree = ast.parse(MODULES["jaxrun.batch.pipeline"].read_text(encoding="utf-8"))
    run_batch = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_batch")
    assert run_batch.end_lineno - run_batch.lineno + 1 <= 40
    long = [f"{name}.{node.name}: {_parameters(node)}" for name, path in MODULES.items()
            if name.startswith(("jaxrun.batch.", "jaxrun.outputs."))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _parameters(node) > 5]
    assert not long, "\n".join(long)
    assert any(name.startswith("jaxrun.outputs.") for name in MODULES)  # the path was found


def test_no_module_outside_the_executors_names_a_backend() -> None:
    """A backend is declared once (executors/backends.py); everything else reads its traits. A
    comparison with a backend's name, or a list of names, outside executors/ would be a second
    declaration that a new backend must find and edit."""
    from jaxrun.executors.backends import BUILT_IN

    named = []
    for name, path in MODULES.items():
        if name.startswith("jaxrun.executors."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                values = [node.left, *node.comparators]
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                values = list(node.elts)
            elif isinstance(node, ast.Dict):
                values = [k for k in node.keys if k is not None]
            else:
                continue
            for value in values:
                for inner in ast.walk(value):
                    if isinstance(inner, ast.Constant) and inner.value in BUILT_IN:
                        named.append(f"{name}:{inner.lineno}: {inner.value!r}")
    assert not named, "\n".join(named)
