"""``jaxrun history --changes``: change points over a real history's runs (an SQLite file, then a
database of a real PostgreSQL: the ``history_at`` fixture), through the CLI.
The runs are recorded with known medians (a step of 15 % at a known commit), so what the table,
the JSON and the exit status say is checked against what was recorded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from helpers import jaxrun, make_run, markdown_tables

from jaxrun.judge.history import HistoryStore
from jaxrun.judge.history_changes import history_changes


def _record(history: Path | str, levels: list[float], *, host: str = "hostA", seed: int = 0) -> list[int]:
    """One run a commit (c00, c01, ...) at each level: 5 samples around it (1 % noise)."""
    rng = np.random.default_rng(seed)
    ids = []
    with HistoryStore(history) as store:
        for i, level in enumerate(levels):
            walls = [float(w) for w in rng.normal(level, level * 0.01, 5)]
            ids.append(store.record(make_run(walls, commit=f"c{i:02d}", host=host,
                                             at=f"2026-11-{1 + i:02d}T00:00:00+00:00")))
    return ids


def test_a_step_is_one_change_at_its_commit(history_at: Path | str) -> None:
    ids = _record(history_at, [1.0] * 7 + [1.15] * 5)  # c07 made it 15 % slower
    with HistoryStore(history_at, create=False) as store:
        (change,) = history_changes(store, metric="wall_time")
        runs = store.runs()
    assert (change.last_before.git_commit, change.first_after.git_commit) == ("c06", "c07")
    assert (change.last_before.run_id, change.first_after.run_id) == (ids[6], ids[7])
    medians = [float(np.median([s.wall_time for s in r.samples if not s.warmup])) for r in runs]
    assert change.before == np.mean(medians[:7]) and change.after == np.mean(medians[7:])
    assert change.change_low <= change.change <= change.change_high and abs(change.change - 0.15) < 0.01
    assert (change.runs_before, change.runs_after, change.runs_since) == (7, 5, 5)

    changes = ("history", "--changes", "--history", history_at, "--metric", "wall_time")
    done = jaxrun(*changes)
    assert done.returncode == 0, done.stderr
    assert "run 7 c06" in done.stdout and "run 8 c07" in done.stdout and "+15." in done.stdout
    done = jaxrun(*changes, "--json")
    document = json.loads(done.stdout)
    assert [c["first_after"]["git_commit"] for c in document["changes"]] == ["c07"]
    assert document["changes"][0]["p_value"] == change.p_value
    # The API says the same: jaxrun.HistoryStore(...).changes(), its changes jaxrun.SeriesChange's.
    import jaxrun as api_module

    with api_module.HistoryStore(history_at, create=False) as store:
        (api,) = store.changes(metric="wall_time")
    assert isinstance(api, api_module.SeriesChange) and api.model_dump(mode="json") == document["changes"][0]

    # The change is 5 runs old: within the newest 5, not within the newest 4.
    assert jaxrun(*changes, "--fail-on-change", "5").returncode == 1
    assert jaxrun(*changes, "--fail-on-change", "4").returncode == 0
    # Since c08: the runs left are all slow, no change.
    done = jaxrun(*changes, "--since", "2026-11-09")
    assert done.returncode == 0 and "no change in wall_time" in done.stdout


def test_markdown_is_the_terminals_table(tmp_path: Path, history_at: Path | str, monkeypatch) -> None:
    from jaxrun.present.view.changes_view import (
        CHANGE_COLUMNS,
        SERIES_COLUMNS,
        change_cells,
        series_cells,
    )

    _record(history_at, [1.0] * 6 + [0.8] * 6)  # c06 made it 20 % faster
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step's text\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    done = jaxrun("history", "--changes", "--history", history_at, "--metric", "wall_time",
                  "--markdown", tmp_path / "changes.md")
    assert done.returncode == 0, done.stderr
    with HistoryStore(history_at, create=False) as store:
        (series,) = store.series(metric="wall_time")
    (change,) = series.changes
    table, noise = markdown_tables((tmp_path / "changes.md").read_text())
    assert table == [[header for header, _, _ in CHANGE_COLUMNS], change_cells(change)]
    assert table[1][4] == f"run {change.first_after.run_id} c06" and table[1][7].startswith("-")
    # Each series' noise and the smallest step its change points find, as the terminal says them.
    assert noise == [[header for header, _, _ in SERIES_COLUMNS], series_cells(series.summary)]
    assert noise[1][3:] == ["12", f"{series.summary.noise * 100:.1f} %", f"{series.summary.smallest_step * 100:.1f} %",
                            "1", "0"]
    for cell in change_cells(change) + series_cells(series.summary):  # the terminal's tables hold the same cells
        assert cell in done.stdout
    assert summary.read_text() == "earlier step's text\n" + (tmp_path / "changes.md").read_text() + "\n"
    # A Markdown file needs --changes, and a folder that exists.
    assert jaxrun("history", "--history", history_at, "--markdown", tmp_path / "m.md").returncode == 2
    done = jaxrun("history", "--changes", "--history", history_at, "--markdown", tmp_path / "nowhere" / "m.md")
    assert done.returncode == 2 and "does not exist" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_no_step_no_change_and_each_host_is_its_own_series(history_at: Path | str) -> None:
    _record(history_at, [1.0] * 12)
    _record(history_at, [2.0] * 6, host="hostB", seed=1)  # another machine, twice as slow: not a change
    with HistoryStore(history_at, create=False) as store:
        assert history_changes(store, metric="wall_time") == []
    done = jaxrun("history", "--changes", "--history", history_at, "--metric", "wall_time", "--fail-on-change", "3")
    assert done.returncode == 0 and "no change in wall_time" in done.stdout


def test_each_machine_is_its_own_series(history_at: Path | str) -> None:
    from jaxrun.results.machine import Machine

    rng = np.random.default_rng(5)
    small, large = Machine(cpu_model="A", cpus=2), Machine(cpu_model="A", cpus=16)
    with HistoryStore(history_at) as store:  # one host, its CPUs changed halfway: not a change of the code
        for i in range(12):
            machine, level = (small, 1.0) if i < 6 else (large, 0.5)
            run = make_run([float(w) for w in rng.normal(level, level * 0.01, 5)], commit=f"c{i:02d}")
            store.record(run.model_copy(update={"machine": machine}))
        assert history_changes(store, metric="wall_time") == []
        for i in range(12, 18):  # then the code made the large machine's runs 20 % slower
            run = make_run([float(w) for w in rng.normal(0.6, 0.006, 5)], commit=f"c{i:02d}")
            store.record(run.model_copy(update={"machine": large}))
        (change,) = history_changes(store, metric="wall_time")
    assert change.machine_id == large.fingerprint and change.first_after.git_commit == "c12"


def test_the_flags_of_changes_go_with_it(history_at: Path | str) -> None:
    _record(history_at, [1.0] * 3)
    done = jaxrun("history", "--history", history_at, "--since", "2026-11-01")
    assert done.returncode == 2 and "--since, --fail-on-change, --markdown and --confirm go with --changes" in done.stderr


def test_a_step_too_small_for_the_series_is_a_candidate_that_alarms_only_once_confirmed(history_at: Path | str) -> None:
    from jaxrun.results.models import ChangeCheck

    rng = np.random.default_rng(4)
    levels = [float(x) for x in rng.normal(1.0, 0.03, 12)]  # 3 % noise between runs
    levels = levels[:6] + [x * 1.09 for x in levels[6:]]  # a 9 % step at c06: below the 13 % 12 runs at 3 % prove
    _record(history_at, levels)
    with HistoryStore(history_at, create=False) as store:
        (series,) = store.series(metric="wall_time")
        assert history_changes(store, metric="wall_time") == []  # at the series' bar: no change
    (candidate,) = series.changes
    assert candidate.candidate and candidate.first_after.git_commit == "c06" and 0.001 <= candidate.p_value < 0.05
    assert series.summary.smallest_step > 0.09 and (series.summary.changes, series.summary.candidates) == (0, 1)
    args = ("history", "--changes", "--history", history_at, "--metric", "wall_time", "--fail-on-change", "6")
    done = jaxrun(*args)
    assert done.returncode == 0 and "candidate" in done.stdout, done.stdout  # a candidate alone never alarms
    with HistoryStore(history_at, create=False) as store:
        store.record_check(candidate, ChangeCheck(script_path=candidate.script_path, metric="wall_time",
                                                  before_commit="c05", after_commit="c06", verdict="confirmed"))
    assert jaxrun(*args).returncode == 1  # confirmed by its duet, it does
