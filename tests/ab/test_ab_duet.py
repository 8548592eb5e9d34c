"""jaxrun ab --duet: BASE and NEW of each pair at the same time, each process pinned to its own half
of the cores, the halves swapped every pair; refused in one line where the machine cannot be split.

The scripts print the CPU affinity their own process has (``os.sched_getaffinity(0)``): the ground
truth for where jaxrun pinned them. This machine has no GPU: the GPU rules (two GPUs needed, one
each) are tested on the slot choice given a list of GPU ids, and through the CLI's refusal."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest
from helpers import jaxrun, write

from jaxrun.config.options import VerdictOptions
from jaxrun.errors import UsageError
from jaxrun.ab import ABOptions, run_ab
from jaxrun.ab.duet import duet_halves, machine_halves
from jaxrun.run.process.placement import Slot, pinned_cpus

# Prints its affinity; sleeps so that the two runs of a pair would overlap even if started apart.
AFFINITY = ("if False:\n    import jax\nimport os, time\nprint('AFFINITY', sorted(os.sched_getaffinity(0)))\n"
            "time.sleep(0.3)\n")
LENIENT = VerdictOptions(alpha=0.05)  # 6 pairs can reach p < 0.05 (exact Wilcoxon: 2/2^6)
CPUS = sorted(os.sched_getaffinity(0))
needs_two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="duet runs need 2 CPUs; this process may use one")


def _run(results: Path, side: str, pair: int) -> tuple[dict, list[int]]:
    """A run's result and the affinity its script printed."""
    folder = results / side / f"pair{pair:03d}"
    result = json.loads((folder / "script_results" / "s_result.json").read_text())
    line = next(l for l in (folder / "logs" / "s.stdout.log").read_text().splitlines() if l.startswith("AFFINITY"))
    return result, json.loads(line.split(" ", 1)[1])


@pytest.mark.slow
@needs_two_cpus
def test_duet_pairs_overlap_each_pinned_to_its_half_swapped_every_pair(tmp_path: Path) -> None:
    write(tmp_path / "A", "s.py", AFFINITY)
    write(tmp_path / "B", "s.py", AFFINITY)
    report = run_ab(tmp_path / "A", tmp_path / "B", tmp_path / "r",
                    ABOptions(pairs=6, warmup_pairs=1, verdict=LENIENT, duet=True))
    size = len(CPUS) // 2
    halves = [CPUS[:size], CPUS[size:2 * size]]
    assert report.duet is not None and [h.cpus for h in report.duet] == halves and all(not h.gpus for h in report.duet)
    for pair in range(7):  # the warm-up pair 0 included
        (base, base_cpus), (new, new_cpus) = _run(tmp_path / "r", "base", pair), _run(tmp_path / "r", "new", pair)
        # Where the kernel ran each process: BASE on the first half in even pairs, the second in odd ones.
        assert base_cpus == halves[pair % 2] and new_cpus == halves[1 - pair % 2], (pair, base_cpus, new_cpus)
        assert base["environment"]["cpus"] == base_cpus and new["environment"]["cpus"] == new_cpus
        # At the same time: each run started before the other ended.
        spans = [(datetime.fromisoformat(r["started_at"]), datetime.fromisoformat(r["finished_at"])) for r in (base, new)]
        assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], (pair, spans)
    # A/A: the same script on both sides is no change, judged on the per-pair ratios as ever.
    (script,) = report.scripts
    assert report.paired and script.verdict == "no significant change" and script.phases["run_time"].pairs == 6
    written = json.loads((tmp_path / "r" / "ab_comparison.json").read_text())
    assert written["duet"] == [{"cpus": h, "gpus": []} for h in halves]
    from jaxrun.outputs.exports import comparison_markdown

    assert "6 duet pairs (both runs at once, on two halves of the machine)" in comparison_markdown(report)


def test_alternating_runs_are_not_pinned_and_the_report_says_no_duet(tmp_path: Path) -> None:
    write(tmp_path / "A", "s.py", AFFINITY.replace("0.3", "0"))
    report = run_ab(tmp_path / "A", tmp_path / "A", tmp_path / "r", ABOptions(pairs=1, warmup_pairs=0, duet=False))
    result, cpus = _run(tmp_path / "r", "base", 0)
    assert report.duet is None and result["environment"]["cpus"] is None and cpus == CPUS
    assert report.alternating_reason is None  # asked for: no reason to give


@pytest.mark.slow
@needs_two_cpus
def test_the_cli_says_it_ran_a_duet_and_a_one_cpu_process_is_refused_in_one_line(tmp_path: Path) -> None:
    write(tmp_path / "A", "s.py", AFFINITY.replace("0.3", "0"))
    done = jaxrun("ab", tmp_path / "A", tmp_path / "A", "--duet", "--pairs", "1", "--warmup-pairs", "0", "-q",
                  "--no-config", "--results-dir", tmp_path / "r")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"duet: BASE and NEW at the same time on CPUs {CPUS[0]} and {CPUS[1]}" in done.stdout, done.stdout
    # The same command in a process the kernel lets use one core only.
    one = jaxrun("ab", tmp_path / "A", tmp_path / "A", "--duet", "--pairs", "1", "--no-config",
                 "--results-dir", tmp_path / "r1", preexec_fn=lambda: os.sched_setaffinity(0, {CPUS[0]}))
    assert one.returncode == 2 and "Traceback" not in one.stderr, one.stderr
    (line,) = one.stderr.strip().splitlines()
    assert f"--duet needs at least 2 CPUs, one half for each side; this process may use 1 ({CPUS[0]}," in line, line
    assert not (tmp_path / "r1").exists()  # refused before anything ran


@pytest.mark.slow
@needs_two_cpus
def test_duet_on_a_gpu_without_two_gpus_is_refused_in_one_line(tmp_path: Path) -> None:
    # This machine has no GPU: --device gpu finds 0 of the 2 a duet needs.
    write(tmp_path / "A", "s.py", AFFINITY)
    done = jaxrun("ab", tmp_path / "A", tmp_path / "A", "--duet", "--device", "gpu", "--no-config",
                  "--results-dir", tmp_path / "r")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "--duet on a GPU needs 2 GPUs" in done.stderr, done.stderr
    with pytest.raises(UsageError, match="not one device"):
        machine_halves({"device": "gpu:1"})


def test_the_halves_split_the_cores_evenly_and_give_each_side_its_own_gpu() -> None:
    # No GPU here: the slot choice is tested on GPU ids as the device facts would list them.
    two = duet_halves([3, 0, 1, 2, 4], "gpu", [0, 1, 2, 3])
    assert [(s.cpus, s.gpus) for s in two.slots] == [((0, 1), (0,)), ((2, 3), (1,))]  # core 4 left to jaxrun
    on_gpu = two.placement(1)
    assert on_gpu.slot("gpu") == Slot(1, gpus=(1,), cpus=(2, 3)) and on_gpu.slot("cpu") == Slot(1, cpus=(2, 3))
    # A GPU run's host threads keep to its half; a CPU fallback of it too.
    assert pinned_cpus(on_gpu.slot("gpu"), "gpu") == (2, 3) and pinned_cpus(on_gpu.slot("cpu"), "cpu") == (2, 3)
    assert not on_gpu.has_other_gpu() and not on_gpu.move_to_other_gpu()
    cpu = duet_halves({0, 1}, "cpu", [0, 1])
    assert [(s.cpus, s.gpus) for s in cpu.slots] == [((0,), ()), ((1,), ())]
    assert cpu.placement(0).slot("gpu") is None


@pytest.mark.parametrize("cpus, platform, gpus, processes, says", [
    ([0], "cpu", [], 1, "--duet needs at least 2 CPUs, one half for each side; this process may use 1 (0,"),
    ([0, 1], "gpu", [], 1, "--duet on a GPU needs 2 GPUs, one for each side; this machine has 0"),
    ([0, 1], "gpu", [0], 1, "--duet on a GPU needs 2 GPUs, one for each side; this machine has 1"),
    ([0, 1], "tpu", [], 1, "runs on tpu cannot be split"),
    ([0, 1], "cpu", [], 2, "--processes 2 would put several on each half"),
])
def test_a_machine_duet_cannot_split_fairly_is_refused(cpus: list[int], platform: str, gpus: list[int],
                                                      processes: int, says: str) -> None:
    with pytest.raises(UsageError) as refused:
        duet_halves(cpus, platform, gpus, processes)
    assert says in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.slow
@needs_two_cpus
def test_a_duet_is_the_default_where_the_machine_splits_and_alternation_with_its_reason_where_not(
        tmp_path: Path) -> None:
    write(tmp_path / "A", "s.py", AFFINITY.replace("0.3", "0"))
    done = jaxrun("ab", tmp_path / "A", tmp_path / "A", "--pairs", "1", "--warmup-pairs", "0", "-q", "--no-config",
                  "--results-dir", tmp_path / "r", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["duet"] == [{"cpus": [CPUS[0]], "gpus": []}, {"cpus": [CPUS[1]], "gpus": []}]
    assert report["alternating_reason"] is None
    # One core: the pairs alternate, and the terminal and the report say why.
    one = jaxrun("ab", tmp_path / "A", tmp_path / "A", "--pairs", "1", "--warmup-pairs", "0", "--no-config",
                 "--results-dir", tmp_path / "r1", preexec_fn=lambda: os.sched_setaffinity(0, {CPUS[0]}))
    assert one.returncode == 0, one.stderr
    why = f"a duet needs at least 2 CPUs, one half for each side; this process may use 1 ({CPUS[0]},"
    assert f"alternating pairs: {why}" in one.stdout, one.stdout
    written = json.loads((tmp_path / "r1" / "ab_comparison.json").read_text())
    assert written["duet"] is None and written["alternating_reason"].startswith(why)
    # --alternate asks for alternation: no reason to give, and no duet on a machine that could run one.
    alternate = jaxrun("ab", tmp_path / "A", tmp_path / "A", "--alternate", "--pairs", "1", "--warmup-pairs", "0",
                       "-q", "--no-config", "--results-dir", tmp_path / "r2", "--json")
    assert alternate.returncode == 0, alternate.stderr
    assert json.loads(alternate.stdout)["duet"] is None and json.loads(alternate.stdout)["alternating_reason"] is None
