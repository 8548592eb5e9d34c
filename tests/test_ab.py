"""jaxrun ab and jaxrun bisect (issue 26): interleaved A/B runs of real scripts in real processes,
two folders, two revisions of a real git repository (temporary worktrees, the user's tree left as
it was), and a bisect that names the commit that added a known sleep.

The scripts differ by a known sleep, so the verdicts have a ground truth; they import no JAX (a
run is ~0.1 s) but are JAX scripts to discovery (``if False: import jax``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jaxrun.ab import ABOptions, run_ab
from jaxrun.ab.bisect import bisect
from jaxrun.options import VerdictOptions

from helpers import jaxrun, write

SLEEPS = "if False:\n    import jax\nimport time\ntime.sleep({seconds})\n"
LENIENT = VerdictOptions(alpha=0.05)  # 6 pairs can reach p < 0.05 (exact Wilcoxon: 2/2^6)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    return repo


def _commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for name, text in files.items():
        write(repo, name, text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def test_two_folders_a_known_slowdown_is_slower_and_the_pairs_alternate(tmp_path: Path) -> None:
    write(tmp_path / "A", "s.py", SLEEPS.format(seconds=0.05))
    write(tmp_path / "B", "s.py", SLEEPS.format(seconds=0.10))
    write(tmp_path / "B", "extra.py", SLEEPS.format(seconds=0))
    report = run_ab(tmp_path / "A", tmp_path / "B", tmp_path / "r", ABOptions(pairs=6, warmup_pairs=1, verdict=LENIENT))
    (script,) = report.scripts
    assert report.paired and script.verdict == "slower" and report.shown(report.regressions) == ["s.py"]
    run = script.phases["run_time"]
    assert run.pairs == 6 and 1.5 < run.ratio < 2.5 and run.p_value <= 2 / 2**6
    assert report.only_in_new == ["extra.py"]
    # BASE first in even pairs, NEW first in odd ones (warm-up pair 0 included).
    for number in range(7):
        started = {side: json.loads((tmp_path / "r" / side / f"pair{number:03d}" / "script_results" / "s_result.json")
                                    .read_text())["started_at"] for side in ("base", "new")}
        assert (started["base"] < started["new"]) == (number % 2 == 0), (number, started)
    # The comparison file, and each side as a results folder jaxrun report reads.
    written = json.loads((tmp_path / "r" / "ab_comparison.json").read_text())
    assert written["paired"] is True and written["scripts"][0]["verdict"] == "slower"
    assert json.loads((tmp_path / "r" / "new" / "jax_execution_results.json").read_text())[
        "script_results"][0]["benchmark"]["runs_completed"] == 6
    # The exports and the report say it was paired, with the paired verdict.
    from markdown_it import MarkdownIt

    from jaxrun.reports import write_report
    from jaxrun.sinks.exports import comparison_markdown

    tokens = MarkdownIt().enable("table").parse(comparison_markdown(report))
    heading = next(t.content for i, t in enumerate(tokens) if i and tokens[i - 1].type == "heading_open")
    assert heading.startswith("jaxrun ab:") and "Wilcoxon signed-rank" in comparison_markdown(report)
    page = write_report(tmp_path / "r").read_text()
    assert "Against the baseline" in page and "data-compared='s'" in page and "slower" in page.split("data-compared='s'")[1][:300]


def test_the_same_script_on_both_sides_is_no_change(tmp_path: Path) -> None:
    write(tmp_path, "old.py", SLEEPS.format(seconds=0.05))
    write(tmp_path, "new.py", SLEEPS.format(seconds=0.05))
    # Two files are one pair whatever their names.
    report = run_ab(tmp_path / "old.py", tmp_path / "new.py", tmp_path / "r", ABOptions(pairs=8, warmup_pairs=1))
    assert report.scripts[0].verdict == "no significant change" and not report.regressions


def test_two_revisions_in_temporary_worktrees_leave_the_users_tree_alone(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    fast = _commit(repo, "fast", {"s/s.py": SLEEPS.format(seconds=0.05)})
    slow = _commit(repo, "slow", {"s/s.py": SLEEPS.format(seconds=0.10)})
    (repo / "s" / "s.py").write_text("# the user's uncommitted edit\n")  # must survive untouched
    done = jaxrun("ab", repo / "s", "--base-rev", fast, "--new-rev", "HEAD", "--pairs", "6", "--alpha", "0.05",
                  "--results-dir", tmp_path / "r", "--json", "-q")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["scripts"][0]["verdict"] == "slower"
    assert report["sides"]["BASE"]["commit"] == fast and report["sides"]["NEW"]["commit"] == slow
    assert (repo / "s" / "s.py").read_text() == "# the user's uncommitted edit\n"
    assert _git(repo, "worktree", "list").count("\n") == 0  # only the user's own tree
    assert not Path(report["sides"]["BASE"]["root"]).exists()  # the temporary worktree is gone


def test_bisect_names_the_commit_that_added_the_sleep(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    good = _commit(repo, "first", {"s.py": SLEEPS.format(seconds=0.02)})
    _commit(repo, "docs", {"README": "words\n"})
    culprit = _commit(repo, "add a sleep", {"s.py": SLEEPS.format(seconds=0.12)})
    _commit(repo, "more docs", {"README": "more words\n"})
    found = bisect(repo / "s.py", good, "HEAD", tmp_path / "r", ABOptions(pairs=6, warmup_pairs=0, verdict=LENIENT))
    assert found.first_slower == culprit and found.subject == "add a sleep"
    assert [s.verdict for s in found.steps][0] == "slower"  # the bad end is judged first
    assert _git(repo, "worktree", "list").count("\n") == 0


def test_bisect_says_when_bad_is_not_slower(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    good = _commit(repo, "first", {"s.py": SLEEPS.format(seconds=0.02)})
    _commit(repo, "docs", {"README": "words\n"})
    done = jaxrun("bisect", repo / "s.py", "--good", good, "--bad", "HEAD", "--pairs", "6", "--alpha", "0.05",
                  "--results-dir", tmp_path / "r", "-q")
    assert done.returncode == 1 and "is not judged slower than" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("args, says", [
    (["ONLY"], "give two folders to compare"),
    (["ONLY", "--base-rev", "no-such-rev"], "no commit 'no-such-rev'"),
    (["ONLY", "--base-python", "/no/python"], "--base-python: no such interpreter '/no/python'"),
])
def test_a_bad_ab_command_is_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    repo = _repository(tmp_path)
    _commit(repo, "first", {"s.py": SLEEPS.format(seconds=0)})
    done = jaxrun("ab", *[str(repo) if a == "ONLY" else a for a in args], "--results-dir", tmp_path / "r")
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_cli_and_the_api_default_to_the_same_pairs() -> None:
    from jaxrun.ab.session import DEFAULT_PAIRS
    from jaxrun.cli import ab

    assert ab._PAIRS == DEFAULT_PAIRS


@pytest.mark.parametrize("gate", [True, False])
def test_the_report_of_an_ab_folder_states_the_exit_status_the_command_gave(tmp_path: Path, gate: bool) -> None:
    """With --fail-on-regression `jaxrun ab` exits 1 on a regression, and the report of its folder
    says exit 1 for that reason; without it, both say 0 and the report says why the regression does
    not count (compare.exit_reasons: one place for both)."""
    pytest.importorskip("plotly")
    write(tmp_path / "A", "s.py", SLEEPS.format(seconds=0.05))
    write(tmp_path / "B", "s.py", SLEEPS.format(seconds=0.10))
    done = jaxrun("ab", tmp_path / "A", tmp_path / "B", "--pairs", "6", "--warmup-pairs", "0", "--alpha", "0.05",
                  "--results-dir", tmp_path / "r", "-q", *(["--fail-on-regression"] if gate else []))
    assert done.returncode == (1 if gate else 0), done.stdout + done.stderr
    assert json.loads((tmp_path / "r" / "ab_comparison.json").read_text())["fail_on_regression"] is gate
    assert jaxrun("report", tmp_path / "r", "-o", tmp_path / "r.html").returncode == 0
    page = (tmp_path / "r.html").read_text()
    card = page.split("exit status</div>")[0].rsplit("<b>", 1)[1]
    assert card == f"{done.returncode}</b>", card
    if gate:
        assert "— exit 1: slower than the baseline (s.py), with --fail-on-regression</p>" in page
        assert "does not count it" not in page
    else:
        assert " — exit 1" not in page and "slower than the baseline: s.py (reported; the exit status does not count it)" in page
