"""What `jaxrun compare` and `jaxrun ab` say of each program: the heading it stands under is true of
it (its JSON's ``moved``), in the terminal and in the Markdown read by markdown-it-py; and what a
run did to build it (compiled, loaded from the persistent cache, neither) is said as it happened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    crafted_batch,
    crafted_benchmark,
    jaxrun,
    noisy_times,
    with_programs,
    write_results_dir,
)

from jaxrun.judge.compare import PROGRAMS_MOVED, PROGRAMS_NOT_MOVED, compile_text
from jaxrun.outputs.exports import comparison_markdown
from jaxrun.results.models import (
    ComparisonReport,
    PhaseComparison,
    ProgramComparison,
    ScriptComparison,
)


def markdown_lists(text: str) -> dict[str, list[str]]:
    """Each bullet list as markdown-it-py reads it, under the paragraph just above it."""
    from markdown_it import MarkdownIt

    found: dict[str, list[str]] = {}
    paragraph, items, in_paragraph, in_list = "", [], False, 0
    for token in MarkdownIt("commonmark").parse(text):
        if token.type == "paragraph_open":
            in_paragraph = True
        elif token.type == "inline" and in_paragraph:
            if in_list:
                items.append(token.content)
            else:
                paragraph = token.content
        elif token.type == "paragraph_close":
            in_paragraph = False
        elif token.type == "bullet_list_open":
            in_list, items = in_list + 1, []
        elif token.type == "bullet_list_close":
            in_list -= 1
            found[paragraph] = items
    return found


def _slower_with_programs(tmp_path: Path) -> tuple[Path, Path]:
    """A script judged slower, whose programs: jit(moved) compiled 3x longer, jit(loaded) loaded
    from the cache on both sides, jit(same) compiled as long on both: only jit(moved) moved."""
    same = dict(fingerprint="f", input_fingerprint="i")
    base = with_programs("m", **{"jit(moved)": dict(same, count=1, compile_time=0.10),
                                  "jit(loaded)": dict(same, cache_hits=1, cache_load_time=0.004),
                                  "jit(same)": dict(same, count=1, compile_time=0.10)})
    new = with_programs("m", **{"jit(moved)": dict(same, count=1, compile_time=0.30),
                                 "jit(loaded)": dict(same, cache_hits=1, cache_load_time=0.005),
                                 "jit(same)": dict(same, count=1, compile_time=0.101)})
    return (write_results_dir(tmp_path / "b", crafted_batch([base], [crafted_benchmark("m", noisy_times(1))])),
            write_results_dir(tmp_path / "n", crafted_batch([new], [crafted_benchmark("m", noisy_times(2, scale=2.0))])))


@pytest.mark.slow
def test_compare_lists_each_program_under_the_heading_its_json_states(tmp_path: Path) -> None:
    base, new = _slower_with_programs(tmp_path)
    done = jaxrun("compare", base, new, "--export-markdown", tmp_path / "m.md")
    assert done.returncode == 0, done.stderr
    as_json = json.loads(jaxrun("compare", base, new, "--json").stdout)
    (script,) = as_json["scripts"]
    assert script["verdict"] == "slower"
    moved = {p["program"]: p["moved"] for p in script["programs"]}
    assert moved == {"jit(moved)": True, "jit(loaded)": False, "jit(same)": False}
    lists = markdown_lists((tmp_path / "m.md").read_text())
    under = {heading: [item.split(" ")[1] for item in items] for heading, items in lists.items()}
    assert under == {f"{PROGRAMS_MOVED}:": ["jit(moved)"], f"{PROGRAMS_NOT_MOVED}:": ["jit(loaded)", "jit(same)"]}
    for heading, programs in under.items():
        assert all(moved[p] is (heading == f"{PROGRAMS_MOVED}:") for p in programs)
    # The terminal says the same, under the same headings.
    lines = done.stdout.splitlines()
    start = lines.index(PROGRAMS_MOVED[0].lower() + PROGRAMS_MOVED[1:] + ":")
    assert lines[start + 1].startswith("  m.py: jit(moved) compiled in 0.100 s -> compiled in 0.300 s")
    assert lines[start + 2] == PROGRAMS_NOT_MOVED[0].lower() + PROGRAMS_NOT_MOVED[1:] + ":"
    assert lines[start + 3] == ("  m.py: jit(loaded) loaded from the persistent cache in 0.004 s -> loaded from the "
                                "persistent cache in 0.005 s: same program")
    assert "not compiled" not in done.stdout + (tmp_path / "m.md").read_text()


def test_ab_s_markdown_lists_each_program_under_the_heading_its_json_states() -> None:
    """jaxrun ab lists every program compiled on both sides; its Markdown is compare's."""
    def program(name: str, base: float, new: float, moved: bool) -> ProgramComparison:
        return ProgramComparison(program=name, base_compile_time=base, new_compile_time=new, base_count=1,
                                 new_count=1, moved=moved, change="same program", compile_ratio=new / base)

    phase = PhaseComparison(metric="run_time", base_n=20, new_n=20, base_median=1.0, new_median=1.3, ratio=1.3,
                            verdict="slower")
    report = ComparisonReport(
        base="BASE", new="NEW", paired=True, pairs=20, metrics=["run_time"], gate=["run_time"], alpha=0.05,
        min_effect=0.02, regressions=["s"], scripts=[ScriptComparison(
            script_name="s", path="s.py", device="cpu", verdict="slower", gate=["run_time"], slower=["run_time"],
            phases={"run_time": phase},
            programs=[program("jit(step)", 0.1, 0.3, True), program("jit(f)", 0.1, 0.1, False)])])
    lists = markdown_lists(comparison_markdown(report))
    assert {h: [i.split(" ")[1] for i in items] for h, items in lists.items()} == {
        f"{PROGRAMS_MOVED}:": ["jit(step)"], f"{PROGRAMS_NOT_MOVED}:": ["jit(f)"]}


@pytest.mark.parametrize(("count", "loads", "load_time", "said"), [
    (1, 0, None, "compiled in 0.120 s"),
    (0, 1, 0.004, "loaded from the persistent cache in 0.004 s"),
    (0, 2, None, "loaded from the persistent cache"),  # the history keeps no load time
    (1, 2, 0.01, "compiled in 0.120 s (2 more loaded from the persistent cache in 0.010 s)"),
    (0, 0, None, "not compiled (traced inside another program, or never run)"),
])
def test_a_program_s_build_is_said_as_it_happened(count: int, loads: int, load_time: float | None,
                                                  said: str) -> None:
    assert compile_text(0.12 if count else 0.0, count, loads, load_time) == said


@pytest.mark.parametrize(("verdict", "run_verdict", "listed"), [
    ("slower", "slower", True), ("faster", "faster", True),
    ("no significant change", "slower", True),  # gated on another metric (--metric): its run time changed
    ("no significant change", "no significant change", False),
    ("too few runs to judge", "too few runs to judge", False),
    ("not comparable", "not comparable", False),
])
def test_a_program_that_did_not_move_is_listed_only_for_a_script_whose_time_changed(
        verdict: str, run_verdict: str, listed: bool) -> None:
    """jaxrun ab keeps every program compiled on both sides; a script judged no change listed its
    unmoved ones under "did not move (shown for a script whose time changed)". The terminal (the
    sections compare and ab print) and the Markdown say only what the heading says."""
    from jaxrun.judge.compare import program_sections

    def program(name: str, base: float, new: float, moved: bool) -> ProgramComparison:
        return ProgramComparison(program=name, base_compile_time=base, new_compile_time=new, base_count=1,
                                 new_count=1, moved=moved, change="same program", compile_ratio=new / base)

    phase = PhaseComparison(metric="run_time", base_n=20, new_n=20, base_median=1.0, new_median=1.0, ratio=1.0,
                            verdict=run_verdict)
    report = ComparisonReport(
        base="BASE", new="NEW", paired=True, pairs=20, metrics=["run_time"], gate=["run_time"], alpha=0.05,
        min_effect=0.02, scripts=[ScriptComparison(
            script_name="s", path="s.py", device="cpu", verdict=verdict, gate=["run_time"], phases={"run_time": phase},
            programs=[program("jit(step)", 0.1, 0.3, True), program("jit(f)", 0.1, 0.1, False)])])
    expected = {f"{PROGRAMS_MOVED}:": ["jit(step)"], **({f"{PROGRAMS_NOT_MOVED}:": ["jit(f)"]} if listed else {})}
    lists = markdown_lists(comparison_markdown(report))
    assert {h: [i.split(" ")[1] for i in items] for h, items in lists.items()} == expected
    sections = {heading + ":": [line.split(" ")[1] for line in lines] for heading, lines in program_sections(report)}
    assert sections == expected
