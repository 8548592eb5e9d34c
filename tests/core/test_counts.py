"""A count said with a noun agrees with it in number: "1 other reason", "2 other reasons", never
"and 1 other reasons" (a cut list's tail) nor the hedge "script(s)". core/formatting.py's
`plural` (a noun in the singular) and `counted` (a plural phrase, as `listed` and `left_out`
take it) say every one; the source is read for counts said another way."""

from __future__ import annotations

import ast
import re

import pytest
from helpers import REPO_ROOT

from jaxrun.core.formatting import counted, left_out, listed, plural

SRC = REPO_ROOT / "src" / "jaxrun"


@pytest.mark.parametrize(("word", "one", "two"), [
    ("script", "1 script", "2 scripts"), ("process", "1 process", "2 processes"), ("GPU", "1 GPU", "2 GPUs"),
    ("earlier run", "1 earlier run", "2 earlier runs"), ("match", "1 match", "2 matches"), ("box", "1 box", "2 boxes"),
])
def test_plural_agrees_in_number(word: str, one: str, two: str) -> None:
    assert (plural(1, word), plural(2, word), plural(0, word)) == (one, two, two.replace("2", "0", 1))
    assert plural(1, "leaf", "leaves") == "1 leaf" and plural(3, "leaf", "leaves") == "3 leaves"


@pytest.mark.parametrize(("what", "one", "two"), [
    ("more", "1 more", "2 more"),
    ("other reasons", "1 other reason", "2 other reasons"),
    ("earlier lines", "1 earlier line", "2 earlier lines"),
    ("more processes", "1 more process", "2 more processes"),
    ("more entries", "1 more entry", "2 more entries"),
    ("more, not shown here", "1 more, not shown here", "2 more, not shown here"),
    ("more programs, not shown", "1 more program, not shown", "2 more programs, not shown"),
])
def test_a_cut_list_says_what_it_left_out_in_number(what: str, one: str, two: str) -> None:
    assert (counted(1, what), counted(2, what)) == (one, two)
    assert listed(["a", "b", "c"], 2, what=what) == f"a, b and {one}"
    assert listed(["a", "b", "c", "d"], 2, what=what) == f"a, b and {two}"
    assert listed(list("abcdef"), 4, " -> ", last=2, what=what) == f"a -> b -> ({two}) -> e -> f"
    assert listed(list("abcde"), 4, " -> ", last=2, what=what) == f"a -> b -> ({one}) -> d -> e"
    assert left_out(1, what) == f" and {one}" and left_out(0, what) == ""


def _python_files() -> list:
    return sorted(SRC.rglob("*.py"))


def test_every_phrase_given_to_a_cut_list_is_a_plural_that_agrees() -> None:
    """Each ``what=`` of listed / left_out in the source: said of one, its noun loses its plural."""
    phrases = set()
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("listed", "left_out"):
                given = [k.value for k in node.keywords if k.arg == "what"]
                given += node.args[1:2] if getattr(node.func, "id", None) == "left_out" else []
                phrases |= {g.value for g in given if isinstance(g, ast.Constant) and isinstance(g.value, str)}
    assert {"other reasons", "earlier lines"} <= phrases, phrases
    for what in phrases:
        assert "(s)" not in what, what
        noun = what.partition(",")[0].split()[-1]
        assert noun == "more" or counted(1, what) != counted(2, what).replace("2", "1", 1), what


# A number said with a noun in the plural, or with the hedge "(s)": a count that may be 1 must go
# through plural(). Recognised as counts: len(...), sum(...) and names that hold one.
_COUNT_NAMES = re.compile(r"^(n|total|other|found|ran|executed|leftovers|oom_kills|refused_forks|traces|variants|"
                          r"entries|runs|samples|pairs|calls|counted|\w*count\w*)$")
_PLURAL_NOUN = re.compile(r" (?:[a-z]+ )?([A-Za-z][A-Za-z-]*(?:\(e?s\)|s))(?![\w(])")
_NOT_NOUNS = {"is", "was", "has", "as", "does", "vs", "its", "this"}
# Counts that are never one: a sweep past MAX_POINTS points; several arguments changed at once and
# an argument that took several values (each said only when more than one did). And a value that is
# no count: a folder's name before a function's (``no jaxrun results in 'r': run run_jax_scripts``).
NEVER_ONE = {"config/sweeps.py: points", "run/reading/compiles.py: arguments", "run/reading/compiles.py: values"}
NO_COUNT = {"interfaces/mcp_server.py: scripts"}


def _counts_said_with_a_noun() -> set[str]:
    found = set()
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.JoinedStr):
                continue
            for value, after in zip(node.values, node.values[1:]):
                if not (isinstance(value, ast.FormattedValue) and isinstance(after, ast.Constant)
                        and isinstance(after.value, str)):
                    continue
                match = _PLURAL_NOUN.match(after.value)
                if match is None or match.group(1) in _NOT_NOUNS:
                    continue
                said = value.value
                name = getattr(said, "attr", getattr(said, "id", None))
                is_count = (isinstance(said, ast.Call) and getattr(said.func, "id", None) in ("len", "sum")) or \
                    bool(name and _COUNT_NAMES.match(name))
                if is_count or "(" in match.group(1):
                    found.add(f"{path.relative_to(SRC).as_posix()}: {match.group(1)}")
    return found


def test_no_count_is_said_with_a_noun_that_may_disagree() -> None:
    found = _counts_said_with_a_noun()
    assert found <= NEVER_ONE | NO_COUNT, sorted(found - NEVER_ONE - NO_COUNT)
