"""--randomize-setup: each process run's environment padded by a random size (JAXRUN_SETUP_PADDING),
recorded in its result and its benchmark sample; on by default for jaxrun ab. The ground truth is
what each run's script itself finds in its environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load, write

from jaxrun.ab import ABOptions, run_ab

# Each run appends the length of the padding it was given (-1: none) to a file of its own.
SEES = """\
import os
import jax
with open({seen!r}, "a") as f:
    f.write(str(len(os.environ["JAXRUN_SETUP_PADDING"])) if "JAXRUN_SETUP_PADDING" in os.environ else "-1")
    f.write("\\n")
"""


def seen_by_the_script(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_each_benchmark_run_gets_and_records_its_own_padding(tmp_path: Path, jaxrun_cli) -> None:
    seen = tmp_path / "seen"
    write(tmp_path / "s", "sees.py", SEES.format(seen=str(seen)))
    done = jaxrun_cli.run("run", tmp_path / "s", "--device", "cpu", "--benchmark-runs", "5", "--warmup-runs", "1",
                          "--randomize-setup", "--results-dir", tmp_path / "r", "--no-history", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    bench = load(tmp_path / "r" / "jax_benchmark_results.json")["benchmarks"][0]
    recorded = [s["setup_padding"] for s in bench["warmups"] + bench["samples"]]
    assert recorded == seen_by_the_script(seen)  # what each run really had, in run order
    assert all(0 <= p <= 4096 for p in recorded) and len(set(recorded)) > 1  # random: 6 equal draws are ~1/4097^5
    result = load(tmp_path / "r" / "script_results" / "sees_result.json")
    assert result["environment"]["setup_padding"] == recorded[-1]
    # Without the flag: no padding, and none recorded.
    seen.unlink()
    done = jaxrun_cli.run("run", tmp_path / "s", "--device", "cpu", "--benchmark-runs", "2", "--results-dir",
                          tmp_path / "plain", "--no-history", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plain = load(tmp_path / "plain" / "jax_benchmark_results.json")["benchmarks"][0]
    assert [s["setup_padding"] for s in plain["samples"]] == [None, None] and seen_by_the_script(seen) == [-1, -1]


@pytest.mark.slow
@pytest.mark.parametrize("randomize", [True, False])
def test_ab_randomizes_the_setup_unless_told_not_to(tmp_path: Path, randomize: bool, jaxrun_cli) -> None:
    seen = tmp_path / "seen"
    for side in ("A", "B"):
        write(tmp_path / side, "sees.py", SEES.format(seen=str(seen)))
    if randomize:  # the API's default
        run_ab(tmp_path / "A", tmp_path / "B", tmp_path / "r", ABOptions(pairs=3, warmup_pairs=0))
    else:  # the command's flag
        done = jaxrun_cli.run("ab", tmp_path / "A", tmp_path / "B", "--pairs", "3", "--warmup-pairs", "0",
                              "--same-setup", "--results-dir", tmp_path / "r", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    paddings = seen_by_the_script(seen)
    recorded = [json.loads(p.read_text())["environment"]["setup_padding"]
                for p in (tmp_path / "r").glob("*/pair*/script_results/*_result.json")]
    assert len(paddings) == len(recorded) == 6
    if randomize:
        assert all(p >= 0 for p in paddings) and sorted(paddings) == sorted(recorded)
    else:
        assert paddings == [-1] * 6 and recorded == [None] * 6
