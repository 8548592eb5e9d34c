"""Result files an earlier jaxrun wrote (a benchmarked jit script, written by the commit before
the package was cut into layers: tests/results/data/written_before_the_package_move/) still read
as the models of this one, through the one reader of result files, and match its JSON Schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxrun.results import result_files

FOLDER = Path(__file__).resolve().parent / "data" / "written_before_the_package_move"
FILES = {
    "execution_results": "jax_execution_results.json",
    "performance_metrics": "jax_performance_metrics.json",
    "device_info": "jax_device_info.json",
    "benchmark_results": "jax_benchmark_results.json",
    "script_result": "script_results/s_result.json",
}


@pytest.mark.parametrize("kind", sorted(FILES))
def test_a_file_an_earlier_version_wrote_reads_as_this_versions_model(kind: str) -> None:
    path = FOLDER / FILES[kind]
    model = result_files.schema_model(kind)
    read = result_files.read_model(path, model)
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    # Nothing it held is lost or changed: every field of the file is read back as it was (fields
    # added since are written with their defaults, beside them).
    again = json.loads(read.model_dump_json())
    assert _missing_or_changed(on_disk, again) == []


def _missing_or_changed(old: object, new: object, where: str = "$") -> list[str]:
    """Where ``new`` lost or changed what ``old`` held (dicts may have gained keys)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [problem for key, value in old.items()
                for problem in (_missing_or_changed(value, new[key], f"{where}.{key}") if key in new
                                else [f"{where}.{key} lost"])]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new)) for p in _missing_or_changed(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where}: {old!r} became {new!r}"]


def test_the_earlier_files_hold_what_the_run_measured() -> None:
    """The data is a real run, not an empty shell the checks above would pass vacuously on."""
    batch = result_files.read_model(FOLDER / FILES["execution_results"], result_files.schema_model("execution_results"))
    (result,) = batch.script_results
    assert result.success and result.benchmark is not None
    assert len([s for s in result.benchmark.samples if not s.warmup]) == 2
    assert result.compiles and result.execution_time > 0
