"""jaxrun ab and jaxrun bisect: interleaved A/B runs of real scripts in real processes,
two folders, two revisions of a real git repository (temporary worktrees, the user's tree left as
it was), and a bisect that names the commit that added a known sleep.

The scripts differ by a known sleep, so the verdicts have a ground truth; they import no JAX (a
run is ~0.1 s) but are JAX scripts to discovery (``if False: import jax``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import git_commit, git_in, jaxrun, jaxrun_command, survivors, write

from jaxrun.ab import ABOptions, BisectOptions, run_ab
from jaxrun.ab.bisect import bisect
from jaxrun.config.options import VerdictOptions

SLEEPS = "if False:\n    import jax\nimport time\ntime.sleep({seconds})\n"
LENIENT = VerdictOptions(alpha=0.05)  # 6 pairs can reach p < 0.05 (exact Wilcoxon: 2/2^6)


def _repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git_in(repo, "init", "-q")
    return repo


@pytest.mark.slow
def test_two_folders_a_known_slowdown_is_slower_and_the_pairs_alternate(tmp_path: Path) -> None:
    write(tmp_path / "A", "s.py", SLEEPS.format(seconds=0.05))
    write(tmp_path / "B", "s.py", SLEEPS.format(seconds=0.10))
    write(tmp_path / "B", "extra.py", SLEEPS.format(seconds=0))
    report = run_ab(tmp_path / "A", tmp_path / "B", tmp_path / "r",
                    ABOptions(pairs=6, warmup_pairs=1, verdict=LENIENT, duet=False))  # --alternate
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

    from jaxrun.outputs.exports import comparison_markdown
    from jaxrun.present.reports import write_report

    tokens = MarkdownIt().enable("table").parse(comparison_markdown(report))
    heading = next(t.content for i, t in enumerate(tokens) if i and tokens[i - 1].type == "heading_open")
    assert heading.startswith("jaxrun ab:") and "Wilcoxon signed-rank" in comparison_markdown(report)
    page = write_report(tmp_path / "r").read_text()
    assert "Against the baseline" in page and "data-compared='s'" in page and "slower" in page.split("data-compared='s'")[1][:300]


@pytest.mark.slow
def test_the_same_script_on_both_sides_is_no_change(tmp_path: Path) -> None:
    write(tmp_path, "old.py", SLEEPS.format(seconds=0.05))
    write(tmp_path, "new.py", SLEEPS.format(seconds=0.05))
    # Two files are one pair whatever their names.
    report = run_ab(tmp_path / "old.py", tmp_path / "new.py", tmp_path / "r", ABOptions(pairs=8, warmup_pairs=1))
    assert report.scripts[0].verdict == "no significant change" and not report.regressions


@pytest.mark.slow
def test_two_revisions_in_temporary_worktrees_leave_the_users_tree_alone(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    fast = git_commit(repo, "fast", {"s/s.py": SLEEPS.format(seconds=0.05)})
    slow = git_commit(repo, "slow", {"s/s.py": SLEEPS.format(seconds=0.10)})
    (repo / "s" / "s.py").write_text("# the user's uncommitted edit\n")  # must survive untouched
    done = jaxrun("ab", repo / "s", "--base-rev", fast, "--new-rev", "HEAD", "--pairs", "6", "--alpha", "0.05",
                  "--results-dir", tmp_path / "r", "--json", "-q")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["scripts"][0]["verdict"] == "slower"
    assert report["sides"]["BASE"]["commit"] == fast and report["sides"]["NEW"]["commit"] == slow
    assert (repo / "s" / "s.py").read_text() == "# the user's uncommitted edit\n"
    assert git_in(repo, "worktree", "list").count("\n") == 0  # only the user's own tree
    assert not Path(report["sides"]["BASE"]["root"]).exists()  # the temporary worktree is gone


@pytest.mark.slow
def test_bisect_names_the_commit_that_added_the_sleep(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    good = git_commit(repo, "first", {"s.py": SLEEPS.format(seconds=0.02)})
    git_commit(repo, "docs", {"README": "words\n"})
    culprit = git_commit(repo, "add a sleep", {"s.py": SLEEPS.format(seconds=0.12)})
    git_commit(repo, "more docs", {"README": "more words\n"})
    found = bisect(repo / "s.py", BisectOptions(good=good, bad="HEAD", results_dir=tmp_path / "r", pairs=6,
                                                warmup_pairs=0, verdict=LENIENT))
    assert found.first_slower == culprit and found.subject == "add a sleep"
    assert [s.verdict for s in found.steps][0] == "slower"  # the bad end is judged first
    assert git_in(repo, "worktree", "list").count("\n") == 0


@pytest.mark.slow
def test_bisect_says_when_bad_is_not_slower(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    good = git_commit(repo, "first", {"s.py": SLEEPS.format(seconds=0.02)})
    git_commit(repo, "docs", {"README": "words\n"})
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
    git_commit(repo, "first", {"s.py": SLEEPS.format(seconds=0)})
    done = jaxrun("ab", *[str(repo) if a == "ONLY" else a for a in args], "--results-dir", tmp_path / "r")
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("settings, says", [
    ('entry = "main"\n', "it defines no main() at its top level"),  # warm mode's entry, which the script lacks
    ('device = "cpu:7"\n', "cpu:7"),  # one device that is not here
])
def test_what_a_batch_checks_before_a_run_ab_checks_before_its_first_pair(tmp_path: Path, settings: str,
                                                                           says: str) -> None:
    """A/B runs each script as a batch would, and refuses what a batch refuses before it runs."""
    for side in ("a", "b"):
        write(tmp_path / side, "s.py", SLEEPS.format(seconds=0))
        write(tmp_path / side, "jaxrun.toml", settings)
    done = jaxrun("ab", tmp_path / "a", tmp_path / "b", "--pairs", "1", "--results-dir", tmp_path / "r")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert says in line, line
    assert not list((tmp_path / "r").glob("**/*_result.json"))  # no pair ran


@pytest.mark.parametrize("flags", [["--duet", "--alternate"], ["--alternate", "--duet"]])
def test_duet_and_alternate_together_are_refused_in_one_line_before_anything_runs(tmp_path: Path,
                                                                                   flags: list[str]) -> None:
    """Both were accepted and the last one silently won (ab and bisect alike)."""
    write(tmp_path / "a", "s.py", SLEEPS.format(seconds=0))
    write(tmp_path / "b", "s.py", SLEEPS.format(seconds=0))
    for command in (["ab", tmp_path / "a", tmp_path / "b"], ["bisect", tmp_path / "a" / "s.py", "--good", "HEAD~1",
                                                              "--bad", "HEAD"]):
        done = jaxrun(*command, *flags, "--results-dir", tmp_path / "r")
        assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("jaxrun: error: --duet and --alternate exclude each other"), line
        assert not (tmp_path / "r").exists()


def test_ab_help_says_how_pairs_run_in_both_modes() -> None:
    """`--pairs` said the pairs alternate, while a duet (at the same time) is the default."""
    import re

    text = " ".join(jaxrun("ab", "--help", env={"COLUMNS": "100"}).stdout.split())
    pairs = re.search(r"--pairs INTEGER RANGE (.*?)\[default", text).group(1)  # type: ignore[union-attr]
    assert "at the same time in a duet" in pairs and "alternating order, with --alternate" in pairs, pairs
    for flag, said in (("--duet", "The default where the machine splits fairly"),
                       ("--alternate", "The default where the machine cannot be split fairly")):
        assert re.search(rf"{flag} [^-]*{said}", text), (flag, text)


def test_the_flags_of_ab_and_bisect_are_made_from_their_declarations(tmp_path: Path) -> None:
    """One declaration per option (config/ab_options.py): its flag's default is the API's, and a
    bad value is refused by the declaration's check in the same line, from the command line (exit
    2, before anything runs) and from Python."""
    from jaxrun.config.ab_options import ABOptions, BisectOptions
    from jaxrun.errors import UsageError

    for command, options in (("ab", ABOptions), ("bisect", BisectOptions)):
        text = " ".join(jaxrun(command, "--help", env={"COLUMNS": "200"}).stdout.split())
        assert f"[default: {options.fields['pairs'].default}; x>=1]" in text, text
        assert f"[default: {options.fields['results_dir'].default}]" in text, text
    write(tmp_path / "a", "s.py", SLEEPS.format(seconds=0))
    for flags, keywords in ((["--pairs", "0"], {"pairs": 0}), (["--precision", "0"], {"precision": 0}),
                            (["--warmup-pairs", "-1"], {"warmup_pairs": -1})):
        done = jaxrun("ab", tmp_path / "a", tmp_path / "a", *flags, "--results-dir", tmp_path / "r")
        with pytest.raises(UsageError) as raised:
            ABOptions(**keywords)
        assert done.returncode == 2 and done.stderr.strip() == f"jaxrun: error: {raised.value}", done.stderr
        assert not (tmp_path / "r").exists()


def _worktrees(repo: Path) -> set[Path]:
    """The worktrees the repository lists, its own tree left out."""
    listed = [Path(line.split(" ", 1)[1]).resolve() for line in git_in(repo, "worktree", "list", "--porcelain").splitlines()
              if line.startswith("worktree ")]
    return set(listed[1:])


def _started_ab(repo: Path, base: str, results: Path, env: dict[str, str]) -> tuple[subprocess.Popen, set[Path]]:
    """`jaxrun ab repo/s --base-rev base` running (Ctrl-C can stop it), once its two checkouts are
    registered and its first pair has run; with the checkouts it added."""
    before = _worktrees(repo)
    proc = subprocess.Popen(
        jaxrun_command("ab", repo / "s", "--base-rev", base, "--new-rev", "HEAD", "--pairs", "5000",
                       "--results-dir", results, "-q", interruptible=True),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        added = _worktrees(repo) - before
        if len(added) == 2 and list(results.glob("*/pair001")):
            return proc, added
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(proc.communicate())


@pytest.mark.slow
def test_a_later_ab_removes_the_checkouts_of_a_killed_one_and_nothing_else(tmp_path: Path) -> None:
    """``kill -9`` of a real ``jaxrun ab --base-rev`` leaves its two worktrees registered and its
    checkouts in jaxrun's cache folder; the next ``jaxrun ab`` (of two revisions, or of any two
    folders) removes them, and leaves the user's own worktrees (one in use, one whose folder the
    user deleted) and those of an ab still running."""
    repo = _repository(tmp_path)
    base = git_commit(repo, "one", {"s/s.py": SLEEPS.format(seconds=0.05)})
    git_commit(repo, "two", {"s/s.py": SLEEPS.format(seconds=0.06)})
    git_in(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "mine"), "HEAD")
    git_in(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "gone"), "HEAD")
    shutil.rmtree(tmp_path / "gone")  # git lists it as prunable: still the user's to prune
    users = {(tmp_path / "mine").resolve(), (tmp_path / "gone").resolve()}
    assert _worktrees(repo) == users
    cache = tmp_path / "cache"
    env = {**os.environ, "JAXRUN_CACHE_DIR": str(cache)}
    write(tmp_path / "A", "s.py", SLEEPS.format(seconds=0))
    write(tmp_path / "B", "s.py", SLEEPS.format(seconds=0))

    def kill(proc: subprocess.Popen, trees: set[Path]) -> tuple[Path, str]:
        proc.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
        (folder,) = {p.parent for p in trees}
        deadline = time.monotonic() + 30
        while survivors(str(folder)) and time.monotonic() < deadline:  # its scripts follow it (their lifeline)
            time.sleep(0.2)
        return folder, stderr

    def folders_ab(results: str) -> list[str]:
        done = jaxrun("ab", tmp_path / "A", tmp_path / "B", "--pairs", "1", "--warmup-pairs", "0",
                      "--results-dir", tmp_path / results, "-q", env={"JAXRUN_CACHE_DIR": str(cache)})
        assert done.returncode == 0, done.stderr
        return done.stderr.strip().splitlines()

    def said(folder: Path) -> str:
        return f"removed the temporary checkouts a killed jaxrun ab left in {folder} (2 worktrees of {repo.resolve()})"

    first, first_trees = _started_ab(repo, base, tmp_path / "r1", env)
    first_folder, _ = kill(first, first_trees)
    assert _worktrees(repo) == users | first_trees  # what the kill left: registered, and in jaxrun's cache
    assert first_folder.parent == (cache / "ab-checkouts").resolve() and all(p.is_dir() for p in first_trees)

    second, second_trees = _started_ab(repo, base, tmp_path / "r2", env)  # a later ab of two revisions
    assert _worktrees(repo) == users | second_trees and not first_folder.exists()
    assert folders_ab("r3") == []  # the second ab is alive: its checkouts are its own
    assert _worktrees(repo) == users | second_trees and all(p.is_dir() for p in second_trees)
    second_folder, second_said = kill(second, second_trees)
    assert said(first_folder) in second_said.splitlines(), second_said

    assert folders_ab("r4") == [said(second_folder)]  # a later ab of two folders
    assert _worktrees(repo) == users  # the user's own, untouched
    assert list((cache / "ab-checkouts").iterdir()) == []
    assert (tmp_path / "mine" / "s" / "s.py").is_file()


@pytest.mark.slow
def test_an_ab_stopped_by_ctrl_c_removes_its_own_checkouts_and_only_those(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    base = git_commit(repo, "one", {"s/s.py": SLEEPS.format(seconds=0.05)})
    git_commit(repo, "two", {"s/s.py": SLEEPS.format(seconds=0.06)})
    git_in(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "gone"), "HEAD")
    shutil.rmtree(tmp_path / "gone")  # `git worktree prune` would unregister it: jaxrun never runs it
    env = {**os.environ, "JAXRUN_CACHE_DIR": str(tmp_path / "cache")}
    running, trees = _started_ab(repo, base, tmp_path / "r", env)
    running.send_signal(signal.SIGINT)
    running.communicate(timeout=120)
    assert _worktrees(repo) == {(tmp_path / "gone").resolve()}
    assert not any(p.exists() for p in trees) and list((tmp_path / "cache" / "ab-checkouts").iterdir()) == []


def test_cache_clear_all_leaves_the_checkouts_of_ab_to_ab(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    write(cache, "devices-x.json", "{}")
    write(cache, "xla_compilation_cache/k-cache", "x")
    owner = write(cache, "ab-checkouts/1-abc/owner.json", "{}")
    checked_out = write(cache, "ab-checkouts/1-abc/base/s.py", "print(1)\n")
    done = jaxrun("cache", "clear", "--all", env={"JAXRUN_CACHE_DIR": str(cache)})
    assert done.returncode == 0 and "deleted 2 files" in done.stdout, done.stdout + done.stderr
    assert owner.is_file() and checked_out.is_file()
    assert not (cache / "devices-x.json").exists() and not (cache / "xla_compilation_cache" / "k-cache").exists()


@pytest.mark.slow
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


def test_the_old_import_path_is_the_new_package() -> None:
    """docs/guide/ab.md once named jaxrun.interfaces.ab: code that imports it gets jaxrun.ab's names."""
    import jaxrun.ab
    from jaxrun.interfaces.ab import ABOptions as Old
    from jaxrun.interfaces.ab import run_ab as old_run_ab

    assert old_run_ab is jaxrun.ab.run_ab and Old is jaxrun.ab.ABOptions and Old(duet=True).duet is True
