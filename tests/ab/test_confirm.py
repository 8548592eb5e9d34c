"""``jaxrun history --changes --confirm``: each change point of a real SQLite history re-run as
pairs of its two commits of a real git repository, in real processes, and labelled.

The history's runs are recorded with known levels at known commits (a step the code made, and a
step the code did not make: only a README changed), and the scripts at those commits sleep for
known times, so the label each change gets is known: the pairs see the sleep, not the history."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
from helpers import git_commit, git_in, jaxrun

from jaxrun.ab.confirm import confirm_changes
from jaxrun.config.ab_options import ConfirmOptions
from jaxrun.config.options import VerdictOptions
from jaxrun.judge.history import HistoryStore
from jaxrun.results.machine import Machine, this_machine
from jaxrun.results.models import HistoryRun, RunSample

SLEEPS = "if False:\n    import jax\nimport time\ntime.sleep({seconds})\n"
LENIENT = VerdictOptions(alpha=0.05)  # 6 pairs can reach p < 0.05 (exact Wilcoxon: 2/2^6)


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """c0 sleeps 0.1 s; c1 changes a README; c2 makes the sleep 0.25 s; c3 changes the README."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git_in(repo, "init", "-q")
    commits = [git_commit(repo, "first", {"s.py": SLEEPS.format(seconds=0.1)}),
               git_commit(repo, "docs", {"README": "words\n"}),
               git_commit(repo, "sleep longer", {"s.py": SLEEPS.format(seconds=0.25)}),
               git_commit(repo, "more docs", {"README": "more words\n"})]
    return repo, commits


def _here() -> Machine:
    from jaxrun.discover.devices import device_facts

    return this_machine(device_facts().record)


def _record(db: Path, script: Path, points: list[tuple[str | None, float]], *, dirty: bool = False,
            machine: Machine | None = None) -> None:
    """One run a point (its commit, its level of run_time): 5 samples at 1 % noise."""
    rng = np.random.default_rng(0)
    machine = machine or _here()
    with HistoryStore(db) as store:
        for i, (commit, level) in enumerate(points):
            samples = [RunSample(index=k, warmup=False, success=True, run_time=float(v), wall_time=float(v) + 0.5)
                       for k, v in enumerate(rng.normal(level, level * 0.01, 5))]
            store.record(HistoryRun(
                recorded_at=f"2026-11-{1 + i:02d}T00:00:00+00:00", script_name="s.py", script_path=str(script.resolve()),
                content_hash="h" * 64, git_commit=commit, git_dirty=dirty if commit else None, host=socket.gethostname(),
                device_requested="cpu", device_used="cpu", jaxrun_version="t", samples=samples, machine=machine))


def _options(tmp_path: Path, **given: object) -> ConfirmOptions:
    return ConfirmOptions(confirm=True, pairs=8, warmup_pairs=0, verdict=LENIENT, results_dir=tmp_path / "confirm",
                          **given)


@pytest.mark.slow
def test_a_slowdown_is_confirmed_and_bisected_and_a_step_no_commit_made_is_refuted(tmp_path: Path, repo) -> None:
    root, (c0, c1, c2, c3) = repo
    db = tmp_path / "history.sqlite"
    # The history says c3 is slower than c0 (it is: c2 between them) ...
    _record(db, root / "s.py", [(c0, 0.1)] * 4 + [(c3, 0.25)] * 4)
    heard: list[str] = []
    with HistoryStore(db, create=False) as store:
        (change,) = store.changes(metric="run_time")
        assert (change.last_before.git_commit, change.first_after.git_commit, change.check) == (c0, c3, None)
        (checked,) = confirm_changes(store, [change], _options(tmp_path, bisect=True),
                                     on_run=lambda key, side, pair, warmup, result: heard.append(side.label))
        check = checked.check
        assert check.verdict == "confirmed" and check.pairs >= 6 and 2.0 < check.ratio < 3.0, check
        assert check.ratio_ci_low > 1 and check.p_value < 0.05 and check.duet is not None
        # ... and the bisect names c2, the commit that made the sleep longer.
        assert check.first_slower == c2 and check.first_slower_subject == "sleep longer", check
        assert json.loads((Path(check.results_dir) / "ab_comparison.json").read_text())["paired"] is True
        # Kept: the next --changes shows it, and confirming again runs nothing.
        (again,) = store.changes(metric="run_time")
        assert again.check == check
        heard.clear()
        confirm_changes(store, [again], _options(tmp_path, bisect=True),
                        on_run=lambda key, side, pair, warmup, result: heard.append(side.label))
        assert heard == []
    assert git_in(root, "worktree", "list").count("\n") == 0  # only the user's own tree

    # A step between c0 and c1 (a README): the pairs of the two commits show none.
    other = tmp_path / "other.sqlite"
    _record(other, root / "s.py", [(c0, 0.1)] * 4 + [(c1, 0.12)] * 4)  # a 20 % step in the history
    alarm = ("history", "--changes", "--history", other, "--metric", "run_time", "--fail-on-change", "4")
    assert jaxrun(*alarm).returncode == 1  # before it is refuted, it alarms
    # Up to 20 pairs: with 8 the CI of the median pair's ratio is [min, max], and one run that a load
    # spike slowed by 5 % keeps it from shutting out a change of 5 %.
    done = jaxrun(*alarm, "--confirm", "--confirm-pairs", "20", "--alpha", "0.05", "--confirm-dir", tmp_path / "c2",
                  "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr  # refuted: it alarms no more
    (found,) = json.loads(done.stdout)["changes"]
    assert found["check"]["verdict"] == "refuted" and found["check"]["ratio_ci_low"] < 1.2, found["check"]
    assert "[confirm] s.py, run 4" in done.stderr and "refuted" in done.stderr
    done = jaxrun(*alarm)  # kept in the history: never alarms again, and the table says why
    assert done.returncode == 0 and "refuted" in done.stdout, done.stdout


def test_what_cannot_be_rerun_is_undecided_and_not_kept(tmp_path: Path, repo) -> None:
    root, (c0, c1, c2, c3) = repo
    cases = {
        "no commit": ([(None, 0.1)] * 4 + [(None, 0.25)] * 4, {}, "have no git commit"),
        "dirty": ([(c0, 0.1)] * 4 + [(c3, 0.25)] * 4, {"dirty": True}, "uncommitted changes"),
        "one commit": ([(c0, 0.1)] * 4 + [(c0, 0.25)] * 4, {}, "both runs are of commit"),
        "another machine": ([(c0, 0.1)] * 4 + [(c3, 0.25)] * 4,
                            {"machine": Machine(cpu_model="a far machine", cpus=512, memory_gib=2048.0)},
                            "ran on another machine (cpu_model:"),
    }
    for name, (points, given, said) in cases.items():
        db = tmp_path / f"{name}.sqlite"
        _record(db, root / "s.py", points, **given)  # type: ignore[arg-type]
        with HistoryStore(db, create=False) as store:
            (change,) = store.changes(metric="run_time")
            (checked,) = confirm_changes(store, [change], _options(tmp_path))
            assert checked.check.verdict == "undecided" and said in checked.check.reason, (name, checked.check)
            assert store.changes(metric="run_time")[0].check is None  # not kept: tried again next time
    assert not (tmp_path / "confirm").exists()  # nothing ran


def test_the_options_of_confirm_go_with_it(tmp_path: Path, repo) -> None:
    root, (c0, *_, c3) = repo
    db = tmp_path / "history.sqlite"
    _record(db, root / "s.py", [(c0, 0.1)] * 4 + [(c3, 0.25)] * 4)
    done = jaxrun("history", "--changes", "--history", db, "--bisect")
    assert done.returncode == 2 and "--bisect goes with --confirm" in done.stderr
    done = jaxrun("history", "--history", db, "--confirm")
    assert done.returncode == 2 and "go with --changes" in done.stderr
    done = jaxrun("history", "--changes", "--history", db, "--confirm", "--confirm-pairs", "0")
    assert done.returncode == 2 and "--confirm-pairs" in done.stderr and "Traceback" not in done.stderr
