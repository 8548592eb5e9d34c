"""One word, one meaning (docs/ARCHITECTURE.md, "Words"): these tests fail when a word goes back to a
second meaning in jaxrun's identifiers, or a user's script is called a program in the docs.

Each check reads the source as text (ast, tokenize): nothing of jaxrun is imported.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "jaxrun"

# "report" is the HTML report. Where a module, class or function may say it: the report's own
# package and output, and the kept public names (the comparison's record; the MCP tools' output
# schemas, titled by their class names).
# The verb stays English ("reported": a result handed to the batch, slurm/tasks.jsonl's key).
REPORT_MODULES = ("present/reports/", "outputs/html_report.py")
REPORT_NAMES = {"ComparisonReport", "BatchReport", "BenchmarkReport"}
REPORT_COMMAND = ("interfaces/cli/analysis.py", "report")  # the `jaxrun report` command's function
A_REPORT = re.compile(r"report(?!ed|ing)", re.IGNORECASE)

# "launch" is starting one process: process_watch.launch and its _launch, and whether a process
# was started (next_action's ``launched``, run/reading/result.py's ``_launched``).
LAUNCH_NAMES = {"launch", "_launch", "launched", "_launched"}
LAUNCH_OLD_NAMES = {("batch/pipeline.py", "launcher")}  # run_batch's old keyword for its pool, still accepted

# What holds device facts is called ``facts``: never these.
FACTS_TYPES = re.compile(r"\b(DeviceFacts|Facts|DeviceInfo)\b")
NOT_FACTS_NAMES = {"info", "device_info", "_info"}

# A user's file is a script: these phrases call it a program.
PROGRAM_PHRASES = [
    re.compile(r"\bJAX programs\b"),
    re.compile(r"\bexample programs?\b", re.IGNORECASE),
    re.compile(r"\bmulti-process programs\b", re.IGNORECASE),
    re.compile(r"`jax\.distributed` program\b"),
    re.compile(r"\byour (JAX )?program\b", re.IGNORECASE),
    re.compile(r"\buser's program\b", re.IGNORECASE),
]


def _modules() -> list[tuple[str, ast.Module, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found.append((path.relative_to(SRC).as_posix(), ast.parse(text), text))
    return found


def _defined(tree: ast.Module) -> list[tuple[str, int]]:
    """Every class and function name defined in ``tree``, with its line."""
    return [(node.name, node.lineno) for node in ast.walk(tree)
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]


def report_misuses(modules: list[tuple[str, ast.Module, str]]) -> list[str]:
    found = []
    for rel, tree, _ in modules:
        if rel.startswith(REPORT_MODULES):
            continue
        if "report" in Path(rel).name.lower():
            found.append(f"{rel}: a module named 'report' outside the HTML report")
        for name, line in _defined(tree):
            if A_REPORT.search(name) and name not in REPORT_NAMES and (rel, name) != REPORT_COMMAND \
                    and not name.startswith("pytest_"):
                found.append(f"{rel}:{line}: {name}")
    return found


def launch_misuses(modules: list[tuple[str, ast.Module, str]]) -> list[str]:
    found = []
    for rel, _, text in modules:
        if "launch" in Path(rel).name.lower():
            found.append(f"{rel}: a module named 'launch'")
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NAME and "launch" in token.string.lower() and token.string not in LAUNCH_NAMES \
                    and (rel, token.string) not in LAUNCH_OLD_NAMES:
                found.append(f"{rel}:{token.start[0]}: {token.string}")
    return found


def _annotation(node: ast.expr | None) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def facts_misuses(modules: list[tuple[str, ast.Module, str]]) -> list[str]:
    found = []
    for rel, tree, _ in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and node.arg in NOT_FACTS_NAMES and FACTS_TYPES.search(_annotation(node.annotation)):
                found.append(f"{rel}:{node.lineno}: parameter {node.arg}: {_annotation(node.annotation)}")
            if isinstance(node, ast.AnnAssign) and FACTS_TYPES.search(_annotation(node.annotation)):
                target = node.target
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name in NOT_FACTS_NAMES and not (rel.startswith("results/") and name == "device_info"):
                    found.append(f"{rel}:{node.lineno}: {name}: {_annotation(node.annotation)}")
    return found


# Kept: two descriptions of result fields say "Multi-process programs" (ProcessResult's docstring,
# ScriptResult.processes): they are the JSON Schema's text, which `jaxrun schema` prints unchanged
# (and docs/reference/results.md copies).
SCHEMA_TEXT = {"src/jaxrun/results/script_result.py", "docs/reference/results.md"}


def _doc_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "mkdocs.yml", ROOT / "pyproject.toml", *sorted((ROOT / "docs").rglob("*.md"))]


def program_misuses(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        if path.relative_to(ROOT).as_posix() in SCHEMA_TEXT:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for phrase in PROGRAM_PHRASES:
                if phrase.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {phrase.search(line).group(0)!r}")
    return found


def test_report_is_the_html_report_only() -> None:
    assert report_misuses(_modules()) == []


def test_launch_is_starting_one_process() -> None:
    assert launch_misuses(_modules()) == []


def test_what_holds_device_facts_is_called_facts() -> None:
    assert facts_misuses(_modules()) == []


def test_a_users_file_is_a_script_not_a_program() -> None:
    assert program_misuses([*_doc_files(), *sorted(SRC.rglob("*.py"))]) == []


def test_each_check_finds_the_word_back_in_its_second_meaning() -> None:
    """Each check, given a reintroduction of the old meaning, says where it is."""
    code = '''
class ProbeReport: ...
def launch_attempt(job, info: "Facts | None", device_info: "DeviceInfo"): ...
class Context:
    def __init__(self) -> None:
        self.info: "DeviceInfo | None" = None
Launcher = object
'''
    module = [("run/probe_report.py", ast.parse(code), code)]
    assert report_misuses(module) == ["run/probe_report.py: a module named 'report' outside the HTML report",
                                      "run/probe_report.py:2: ProbeReport"]
    assert [m.split(": ")[-1] for m in launch_misuses(module)] == ["launch_attempt", "Launcher"]
    assert [m.split(": ")[1] for m in facts_misuses(module)] == ["parameter info", "parameter device_info", "info"]
    assert report_misuses([("present/reports/html_page.py", ast.parse("def render_report(): ..."), "")]) == []


def test_the_words_section_says_each_word() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Words\n", 1)[1].split("\n## ", 1)[0]
    for word in ("**script**", "**program**", "**run**", "**batch**", "**launch**", "**device facts**", "**report**"):
        assert word in section, word
    for kept in REPORT_NAMES:
        assert f"`{kept}`" in section, kept
