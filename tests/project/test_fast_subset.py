"""The fast subset (``pytest -m "not slow"``) reaches every module of src/jaxrun.

Read from the sources, not measured: a module counts as reached when a test file with at least one
test not marked slow imports it, or when it is imported (at module level or inside a function) by
a module so reached. A file that runs the CLI (tests/helpers.py: jaxrun, jaxrun_command, the
jaxrun_cli fixture) reaches ``jaxrun.__main__``; one that runs a script (the CLI, run_batch,
``run_jax_scripts``, ``execute_jax_script``) reaches the probe, which runs in the script's process,
and the device-facts child."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "jaxrun"
TESTS = ROOT / "tests"

RUNS_THE_CLI = ("jaxrun_cli", "jaxrun_command", "jaxrun(", "run_cli(", "StdioServerParameters")
RUNS_A_SCRIPT = ("run_jax_scripts", "execute_jax_script", "run_batch", "benchmark_jax_script", *RUNS_THE_CLI)
CHILDREN = ("jaxrun.probe.__main__", "jaxrun.probe.devices_child")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST, package: str) -> set[str]:
    """Every jaxrun module a source file imports, ``from jaxrun.x import y`` naming jaxrun.x.y too,
    and every module it names to import later (lazy tables: "jaxrun.x.y:Name", or a module of its
    own package by its name, "html_report:HtmlReportSink", ("run_command", "command"))."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isascii():
            name = node.value.split(":")[0]
            if name.replace(".", "").replace("_", "").isalnum():
                found |= {name} if name.startswith("jaxrun.") else ({f"{package}.{name}"} if package else set())
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("jaxrun")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's own package
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.startswith("jaxrun"):
                found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return found


def _not_slow(tree: ast.Module) -> bool:
    """Whether the file holds a test that is not marked slow (a ``pytestmark`` marks them all)."""
    def slow(decorators: list[ast.expr]) -> bool:
        return any("mark.slow" in ast.unparse(d) for d in decorators)

    if any(isinstance(n, ast.Assign) and "pytestmark" in ast.unparse(n.targets[0]) and "slow" in ast.unparse(n.value)
           for n in tree.body):
        return False
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
               and not slow(n.decorator_list) for n in tree.body)


def test_every_module_is_reached_by_a_test_that_is_not_slow() -> None:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = {m for m in _imports(ast.parse(path.read_text(encoding="utf-8")), package) if m in modules}
    reached: set[str] = set()
    fast_files = 0
    for path in TESTS.rglob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        if not _not_slow(tree):
            continue
        fast_files += 1
        reached |= {m for m in _imports(tree, "") if m in modules}
        if any(word in text for word in RUNS_THE_CLI):
            reached.add("jaxrun.__main__")
        if any(word in text for word in RUNS_A_SCRIPT):
            reached |= set(CHILDREN)
    assert fast_files > 20
    todo = list(reached)
    while todo:
        for imported in graph[todo.pop()] - reached:
            reached.add(imported)
            todo.append(imported)
    # A module's package is loaded with it.
    reached |= {".".join(m.split(".")[:i]) for m in reached for i in range(1, m.count(".") + 1)}
    missed = sorted(set(modules) - reached)
    assert not missed, f"no test outside the slow ones reaches {missed}: add one, or leave one of its tests unmarked"
