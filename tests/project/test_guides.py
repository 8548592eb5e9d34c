"""Every runnable example of the guide (docs/guide/*.md) and of README.md runs here, as written.

The convention, which the pages follow:

* a fenced block whose info string is `bash` or `python` is run; every other block (`text`,
  `toml`, `json`, `output`, ...) is not;
* a run block preceded by `<!-- not run: REASON -->` is not run (a GPU, a Ray cluster, minutes of
  work): the reason is the page's promise to its reader, so it is required;
* a run block preceded by `<!-- exit: N -->` must end with status N; any other must end with 0;
* an `output` block right after a run block holds lines its output (stdout and stderr) must
  contain: numbers may differ (timings, sizes, counts are rewritten as `#` on both sides, and so
  is a program's fingerprint, 12 hex digits, which changes with the JAX and XLA version), spaces
  between words may differ (table columns), and a line `...` stands for lines left out;
* a block that shows what jaxrun prints (a `warning:` or `note:` line, one of its tables) is such
  an `output` block, checked against a real run; one that cannot be (what a GPU prints, say) is
  preceded by `<!-- not run: REASON -->`.

The blocks of a page run in order in one fresh folder, so a block may use the files an earlier
one wrote; the repository's `examples/` is copied there. `bash` blocks run with `bash -euo
pipefail`, `python` blocks with this interpreter, both with this checkout's `src` first on
PYTHONPATH and a `jaxrun` command that runs this checkout (`python -m jaxrun`), whatever jaxrun
is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide"
RUN = {"bash", "python"}
NOT_RUN = re.compile(r"<!--\s*not run:\s*(\S.*?)\s*-->", re.DOTALL)
EXIT = re.compile(r"<!--\s*exit:\s*(\d+)\s*-->")
# What varies from run to run: a number with its unit, when it has one (1.23 s, 12.3 ms, 175 MiB).
NUMBER = re.compile(r"\d[\d,.]*(\s*(ms|µs|us|s|B|KiB|MiB|GiB|%)(?![\w]))?")
FINGERPRINT = re.compile(r"\b[0-9a-f]{12}\b")  # a program's fingerprint as the tables show it (present/view/program_rows.py)


@dataclass
class Block:
    line: int  # 1-based, where the fence opens
    lang: str
    code: str
    exit: int = 0
    skip: str | None = None
    expect: list[str] = field(default_factory=list)


def blocks(path: Path) -> list[Block]:
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    found: list[Block] = []
    comment = ""  # the HTML comment right before the next block, if any
    last: Block | None = None  # the run block an `output` block would belong to
    for token in tokens:
        if token.type == "html_block":
            comment = token.content
            continue
        if token.type != "fence":
            if token.type.endswith("_open") and token.level == 0:
                comment, last = "", None
            continue
        lang = token.info.split()[0] if token.info.strip() else ""
        line = token.map[0] + 1 if token.map else 0
        if lang == "output":
            assert last is not None, f"{path.name}:{line}: an output block follows no run block"
            last.expect = [ln for ln in token.content.splitlines() if ln.strip()]
            last = None
        elif lang in RUN:
            skip = NOT_RUN.search(comment)
            code = EXIT.search(comment)
            last = Block(line, lang, token.content, int(code.group(1)) if code else 0, skip and skip.group(1))
            found.append(last)
        else:
            last = None
        comment = ""
    return found


def _norm(text: str) -> str:
    return " ".join(NUMBER.sub("#", FINGERPRINT.sub("#", text)).split())


def _workdir(tmp: Path) -> dict[str, str]:
    shutil.copytree(ROOT / "examples", tmp / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    bin_dir = tmp.parent / f"{tmp.name}-bin"
    bin_dir.mkdir()
    shim = bin_dir / "jaxrun"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m jaxrun "$@"\n')
    shim.chmod(0o755)
    # The reader's own JAXRUN_* settings would change what the examples print.
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXRUN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run_page(path: Path, tmp: Path, skip_code: str | None = None, more_env: dict[str, str] | None = None) -> None:
    env = {**_workdir(tmp), **(more_env or {})}
    for block in blocks(path):
        if block.skip or (skip_code and skip_code in block.code):
            continue
        command = ["bash", "-euo", "pipefail", "-c", block.code] if block.lang == "bash" else [sys.executable, "-c", block.code]
        done = subprocess.run(command, check=False, cwd=tmp, env=env, capture_output=True, text=True, timeout=240)
        where = f"{path.name}:{block.line}"
        output = done.stdout + done.stderr
        assert done.returncode == block.exit, f"{where} exited {done.returncode}, not {block.exit}:\n{output}"
        seen = _norm(output)
        for expected in block.expect:
            if expected.strip() != "...":
                assert _norm(expected) in seen, f"{where}: its output lacks {expected!r}:\n{output}"


PAGES = sorted(GUIDE.glob("*.md"))
SLOW = {"running.md", "benchmarking.md", "ab.md", "bench.md", "slurm.md"}  # each over 5 s on 2 cores
# Pages whose examples run on the test suite's single-node Slurm (the `slurm` fixture).
ON_SLURM = {"slurm.md"}


def test_the_guide_checks_output() -> None:
    page = GUIDE / "running.md"
    found = blocks(page)
    assert found and all(b.lang in RUN for b in found)
    assert any(b.expect for b in found), "running.md checks no output"


@pytest.mark.slow
def test_a_page_that_says_what_its_block_does_not_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\necho took 1.5 s\n```\n\n```output\ntook 2.25 s\n```\n\n"
                    "<!-- exit: 3 -->\n\n```bash\nexit 3\n```\n\n"
                    "<!-- not run: it would fail -->\n\n```python\nraise SystemExit(1)\n```\n")
    found = blocks(page)
    assert [(b.lang, b.exit, b.skip, b.expect) for b in found] == [
        ("bash", 0, None, ["took 2.25 s"]), ("bash", 3, None, []), ("python", 0, "it would fail", [])]
    run_page(page, tmp_path / "work")  # numbers may differ
    page.write_text("```bash\necho took 1.5 s\n```\n\n```output\nslept 1.5 s\n```\n")
    with pytest.raises(AssertionError, match="lacks 'slept"):
        run_page(page, tmp_path / "work2")


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name in SLOW else []) for p in PAGES])
def test_each_guide_example_runs_as_written(page: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    run_page(page, tmp_path / "work", more_env=request.getfixturevalue("slurm").env if page.name in ON_SLURM else None)


@pytest.mark.slow
def test_the_readme_examples_run_as_written(tmp_path: Path) -> None:
    # The Quickstart's two set-up commands install the checkout (into the environment running this
    # test) and run the whole test suite: the first would repoint the installed jaxrun, the second
    # would run this test again. CI runs them from the README itself.
    # A compilation cache of its own: the output shown is a first run's (every program compiled).
    run_page(ROOT / "README.md", tmp_path / "work", skip_code="pip install",
             more_env={"JAXRUN_CACHE_DIR": str(tmp_path / "cache")})


# What marks a line as jaxrun's own output: the prefixes of its messages and the first cells of its
# tables' headers (interfaces/cli/tables.py).
PRINTED = re.compile(r"^(warning|note|hint|failed|slowest|skipped|jaxrun): |^jaxrun results\b"
                     r"|^script\s{2,}(status|program|host to device|device|runs)\b|^programs: |^implicit transfers ")


def shown_output(path: Path) -> list[tuple[int, str]]:
    """Each block of ``path`` that shows what jaxrun prints without being checked: neither a run
    block nor an ``output`` block, and not marked `<!-- not run: REASON -->`."""
    found, comment = [], ""
    for token in MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8")):
        if token.type == "html_block":
            comment = token.content
            continue
        if token.type == "fence":
            lang = token.info.split()[0] if token.info.strip() else ""
            printed = [ln for ln in token.content.splitlines() if PRINTED.search(ln.strip())]
            if lang not in RUN | {"output"} and printed and not NOT_RUN.search(comment):
                found.append((token.map[0] + 1 if token.map else 0, printed[0]))
        comment = ""
    return found


def test_every_page_shows_only_output_it_checks() -> None:
    """Docs that show output must be the output: a block that shows what jaxrun prints is the
    `output` block of a run block, checked against a real run (test_each_guide_example_runs_as_written)."""
    unchecked = [f"{page.relative_to(ROOT)}:{line}: {text}" for page in [*PAGES, ROOT / "README.md"]
                 for line, text in shown_output(page)]
    assert not unchecked, "shown as text, never checked against a run:\n" + "\n".join(unchecked)


def test_a_text_block_of_jaxruns_output_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```text\nwarning: a.py: jit(f) compiled 2 times\n```\n\n```text\njaxrun run x.py\n```\n\n"
                    "<!-- not run: what a GPU prints -->\n\n```text\nscript  status  device\n```\n\n"
                    "```text\nscript    program   built\n```\n")
    assert shown_output(page) == [(1, "warning: a.py: jit(f) compiled 2 times"), (15, "script    program   built")]


def test_every_page_of_the_guide_is_in_the_site_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES:
        assert f"guide/{page.name}" in nav, page.name
