"""The Slurm settings as a user writes them: a [slurm] table, flags, JAXRUN_SLURM_* variables and
extra sbatch options (config/slurm_options.py), and the sbatch flags jaxrun makes of them
(executors/slurm.py). The backend itself runs against a real Slurm in
tests/executors/test_slurm_backend.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write

from jaxrun.config.options import BatchOptions
from jaxrun.config.settings import resolve_batch_options
from jaxrun.errors import UsageError
from jaxrun.executors.backends import check_backend
from jaxrun.executors.slurm import memory_request, sbatch_flags, time_limit_minutes


def resolved(folder: Path, given: dict | None = None, environ: dict | None = None) -> BatchOptions:
    options = resolve_batch_options([folder], given or {}, environ=environ or {}).options
    check_backend(options)  # what `jaxrun run` and `jaxrun config` check before anything runs
    return options


def test_a_slurm_table_sets_the_slurm_options_and_says_where(tmp_path: Path) -> None:
    write(tmp_path, "s/a.py", "import jax\n")
    write(tmp_path, "jaxrun.toml", 'backend = "slurm"\n\n[slurm]\npartition = "gpu"\naccount = "proj"\n'
                                   'options = ["--mail-type=END", "exclusive"]\nsetup = ["module load cuda"]\ntimeout = 5\n')
    options = resolved(tmp_path / "s")
    assert (options.slurm_partition, options.slurm_account) == ("gpu", "proj")
    assert options.slurm_options == ("mail-type=END", "exclusive") and options.slurm_setup == ("module load cuda",)
    assert options.slurm_timeout == 5.0
    assert options.source_of("slurm_partition") == "config"
    assert options.origin_of("slurm_partition") == f"{tmp_path / 'jaxrun.toml'}:4"
    # The same from a variable, which wins over the file.
    assert resolved(tmp_path / "s", environ={"JAXRUN_SLURM_PARTITION": "debug"}).slurm_partition == "debug"


def test_a_slurm_table_stays_valid_when_a_run_picks_another_backend(tmp_path: Path) -> None:
    write(tmp_path, "s/a.py", "import jax\n")
    write(tmp_path, "jaxrun.toml", '[slurm]\npartition = "gpu"\n')
    assert resolved(tmp_path / "s", {"backend": "local"}).backend == "local"
    with pytest.raises(UsageError, match=r"^--slurm-partition needs the slurm backend \(--backend slurm\)$"):
        resolved(tmp_path / "s", {"slurm_partition": "gpu"})


@pytest.mark.parametrize(("text", "said"), [
    ('[slurm]\npartiton = "gpu"\n', r"jaxrun.toml:2: unknown key 'partiton' in \[slurm\]: did you mean 'partition'"),
    ('[slurm]\npartition = "two words"\n', r"jaxrun.toml:2: \[slurm\] partition: slurm_partition must be one name"),
    ('[slurm]\noptions = ["array=0-3"]\n', r"array is set by jaxrun from --jobs"),
    ('[slurm]\noptions = ["--output=x"]\n', r"output cannot be changed: jaxrun's job array needs its own"),
    ('[slurm]\noptions = ["no such"]\n', r"'no such' is not an sbatch option"),
    ('slurm = "gpu"\n', r"\[slurm\] must be a table of Slurm settings"),
])
def test_a_mistake_in_the_slurm_table_names_the_line_and_the_fix(tmp_path: Path, text: str, said: str) -> None:
    write(tmp_path, "s/a.py", "import jax\n")
    (tmp_path / "jaxrun.toml").write_text(text)
    with pytest.raises(UsageError, match=said):
        resolved(tmp_path / "s")


def test_the_sbatch_flags_follow_the_options() -> None:
    options = BatchOptions.build(paths=["s"], backend="slurm", timeout=600, retries=1, memory_limit="2GiB",
                                 slurm_partition="gpu", slurm_options=["mail-type=END", "exclusive"])
    run = options.run
    # Every run and attempt at its timeout, plus the start-up margin: (1 run x 2 attempts x 600 s + 120 s) / 60.
    assert time_limit_minutes(run, gpu=False) == 22
    # On a GPU a fallback to the CPU is one more attempt: (3 x 600 + 120) / 60.
    assert time_limit_minutes(run, gpu=True) == 32
    assert time_limit_minutes(run.evolve(timeout=None), gpu=False) is None
    assert memory_request(2 * 2**30) == "2560M" and memory_request(2 * 2**30, 2) == "5120M"
    assert memory_request(None) is None
    assert sbatch_flags({"partition": "gpu", "time": 22, "mem": "2560M", "gpus_per_node": None,
                         "additional_parameters": {"mail-type": "END", "exclusive": True}}) == [
        "--partition=gpu", "--time=22", "--mem=2560M", "--mail-type=END", "--exclusive"]
