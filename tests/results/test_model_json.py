"""The result models' JSON (results/model_json.py): NaN and infinities are written as the strings
"NaN", "Infinity" and "-Infinity" wherever they sit (msgspec itself would write null, a value not
measured), numpy's scalars as numbers, and what reads them back gets the floats again; and what
reading a result works out about its types can be worked out ahead (``prepare``)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import child_env

from jaxrun.results import model_json, result_files
from jaxrun.results.models import CompileStats, RunSample, ScriptResult

TAGS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def result(**fields) -> ScriptResult:
    return ScriptResult(script_name="s", script_path="/s.py", success=True, device_requested="cpu",
                        started_at="2026-01-01T00:00:00.000+00:00", finished_at="2026-01-01T00:00:01.000+00:00",
                        **fields)


def _placed(value: float) -> list[tuple[object, list[object]]]:
    """A model with ``value`` in each kind of place, and the path to it in the JSON."""
    return [
        (result(cpu_time=value), ["cpu_time"]),
        (result(results={"loss": value}), ["results", "loss"]),
        (result(results={"curve": [1.0, value]}), ["results", "curve", 1]),
        (result(results={"deep": {"x": (value, 2)}}), ["results", "deep", "x", 0]),
        (result(results={"np": np.float32(value)}), ["results", "np"]),
        (result(compiles={"jit(f)": CompileStats(trace_time=value)}), ["compiles", "jit(f)", "trace_time"]),
        (RunSample(index=1, warmup=False, success=True, wall_time=value), ["wall_time"]),
    ]


@pytest.mark.parametrize("kind", list(TAGS))
def test_a_non_finite_float_is_written_as_its_string_wherever_it_sits(kind: str) -> None:
    value = float(kind)
    for model, path in _placed(value):
        for text in (result_files.dump_model(model), model.model_dump_json(), json.dumps(model.to_dict())):
            got = json.loads(text)
            for key in path:
                got = got[key]
            assert got == TAGS[kind], (path, text[:200])


def test_finite_numbers_and_numpy_scalars_are_written_as_numbers() -> None:
    model = result(cpu_time=1.5, results={"a": np.float64(0.25), "b": np.int64(3), "c": [np.float32(0.5)]})
    data = json.loads(result_files.dump_model(model))
    assert data["cpu_time"] == 1.5 and data["results"] == {"a": 0.25, "b": 3, "c": [0.5]}


def test_a_figure_written_as_nan_reads_back_as_nan() -> None:
    back = ScriptResult.model_validate_json(result_files.dump_model(result(cpu_time=math.nan, memory_peak=-math.inf)))
    assert math.isnan(back.cpu_time) and back.memory_peak == -math.inf
    assert model_json.exact_json_text(result(results={"x": math.inf})) is not None


def test_prepare_works_out_every_type_that_reading_a_result_needs() -> None:
    """batch/put_off.py prepares the result models while the first script runs: reading a whole
    batch file back then evaluates no annotation (msgspec's nor ours). A fresh interpreter: this
    one has read results already."""
    batch_file = next((Path(__file__).parent / "data").glob("*/jax_execution_results.json"))
    code = f"""
import typing
import msgspec._utils
from jaxrun.results import model_json
from jaxrun.results.models import BatchResult
if {{prepared}}:
    model_json.prepare(BatchResult)
def worked_out_again(*args, **kwargs):
    raise AssertionError("worked out again")
msgspec._utils.get_class_annotations = typing.get_type_hints = worked_out_again
batch = model_json.decoded(open({str(batch_file)!r}).read(), BatchResult)
print(len(batch.script_results))
"""
    prepared = subprocess.run([sys.executable, "-c", code.format(prepared=True)], capture_output=True, text=True,
                              env=child_env(), timeout=120)
    assert prepared.returncode == 0 and prepared.stdout.strip() == "1", prepared.stderr
    # The check sees what it is for: unprepared, reading works the types out.
    unprepared = subprocess.run([sys.executable, "-c", code.format(prepared=False)], capture_output=True, text=True,
                                env=child_env(), timeout=120)
    assert "worked out again" in unprepared.stderr, unprepared.stderr
