"""Tests for jaxrun.results.result_files (atomic writes, reads, JSON Schemas) and the models behind them."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from jaxrun.results import result_files
from jaxrun.results.batch_summary import performance_metrics, performance_summary
from jaxrun.results.models import (
    ERROR_CLASSES,
    SCHEMA_VERSION,
    BatchMetadata,
    BatchResult,
    CompileStats,
    DeviceInfo,
    ScriptResult,
)


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def script_result(name: str = "demo", **fields) -> ScriptResult:
    base = dict(
        script_name=name, script_path=f"/x/{name}.py", success=True, device_requested="auto",
        device_used="cpu", started_at="2024-01-01T00:00:00+00:00", finished_at="2024-01-01T00:00:02+00:00",
        execution_time=2.0, memory_peak=120.0, compile_count=1, jit_compile_time=0.1,
        compiles={"<lambda>": CompileStats(count=1, trace_time=0.01, lower_time=0.02, compile_time=0.07)},
        results={"loss": 0.25, "curve": [1.0, 0.5]},
    )
    base.update(fields)
    return ScriptResult(**base)


def device_info() -> DeviceInfo:
    return DeviceInfo.model_validate(
        {
            "jax_available": True, "jax_version": "0.10.2", "python_version": "3.11",
            "python_executable": "/usr/bin/python3", "probed_at": "2024-01-01T00:00:00+0000",
            "platforms": {
                "cpu": {"name": "cpu", "available": True, "backend": "cpu",
                        "devices": [{"id": 0, "platform": "cpu", "device_kind": "cpu"}]},
                "gpu": {"name": "gpu", "available": False, "error": "no CUDA backend"},
            },
        }
    )


def batch_result(results: list[ScriptResult]) -> BatchResult:
    meta = BatchMetadata(
        jaxrun_version="0.1.0", device_requested="auto", device_used="cpu", jax_version="0.10.2",
        execution_timestamp="2024-01-01T00:00:00+00:00", scripts_found=len(results),
        scripts_executed=len(results), scripts_successful=sum(r.success for r in results),
        scripts_failed=sum(not r.success for r in results), search_paths=["/x"], results_dir="/r",
        host="h", python_version="3.11", complete=True,
    )
    return BatchResult(
        metadata=meta, device_info=device_info(), performance_summary=performance_summary(results),
        script_results=results,
    )


def current_umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------- atomic writes


def test_atomic_write_replaces_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "file.json"  # missing parents are created
    result_files.atomic_write_text(target, "first")
    assert target.read_text() == "first"
    inode = target.stat().st_ino
    result_files.atomic_write_text(target, "second, longer content")
    assert target.read_text() == "second, longer content"
    assert target.stat().st_ino != inode  # replaced by a new file, not rewritten in place
    assert entries(target.parent) == ["file.json"]


def test_written_files_get_the_usual_permissions(tmp_path: Path) -> None:
    # Not mkstemp's private 0600: result files are shared with teammates and CI jobs.
    target = tmp_path / "r.json"
    result_files.write_json(target, {"a": 1})
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~current_umask()


def test_a_failed_write_keeps_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    result_files.atomic_write_text(target, '{"good": true}\n')
    # A lone surrogate cannot be encoded as UTF-8: the write fails half-way through.
    with pytest.raises(UnicodeEncodeError):
        result_files.atomic_write_text(target, '{"bad": "\ud800"}')
    assert target.read_text() == '{"good": true}\n'
    assert entries(tmp_path) == ["result.json"]  # the temporary file was removed


def test_a_model_that_cannot_be_serialized_keeps_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "demo_result.json"
    good = script_result()
    result_files.write_model(target, good)
    bad = script_result(results={"handle": object()})  # results accept Any, JSON does not
    with pytest.raises(TypeError, match="object cannot be written as JSON"):
        result_files.write_model(target, bad)
    assert result_files.read_model(target, ScriptResult) == good
    assert entries(tmp_path) == ["demo_result.json"]


def test_writing_under_a_file_fails_cleanly(tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(OSError):
        result_files.write_model(blocker / "jax_device_info.json", device_info())
    assert blocker.read_text() == "a file where a folder should be"
    assert entries(tmp_path) == ["results"]


# --------------------------------------------------------------------------- reads and writes


def test_models_round_trip_through_files(tmp_path: Path) -> None:
    results = [script_result("a"), script_result("b", success=False, error_class="timeout", execution_time=None)]
    cases = [
        (result_files.EXECUTION_RESULTS, batch_result(results)),
        (result_files.PERFORMANCE_METRICS, performance_metrics(results)),
        (result_files.DEVICE_INFO, device_info()),
        ("a_result.json", results[0]),
    ]
    for name, model in cases:
        path = tmp_path / name
        result_files.write_model(path, model)
        text = path.read_text()
        assert text.endswith("\n") and text.startswith("{\n  ")  # indented, one document
        assert json.loads(text)["schema_version"] == SCHEMA_VERSION
        assert result_files.read_model(path, type(model)) == model


def test_unknown_numbers_are_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    result_files.write_model(path, script_result(device_memory_peak=None, device_utilization=None))
    doc = json.loads(path.read_text())
    assert doc["device_memory_peak"] is None and doc["device_utilization"] is None
    assert doc["cpu_time"] is None and doc["body_time"] is None


def test_write_json_stringifies_what_json_cannot_hold(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    result_files.write_json(path, {"path": Path("/a/b"), "n": 1})
    assert json.loads(path.read_text()) == {"path": "/a/b", "n": 1}


def test_script_result_path() -> None:
    assert result_files.script_result_path(Path("/r"), "gnn__jax__model") == Path(
        "/r/script_results/gnn__jax__model_result.json"
    )


def test_reading_a_file_with_an_unknown_field_fails(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    doc = json.loads(result_files.dump_model(script_result()))
    doc["surprise"] = 1
    path.write_text(json.dumps(doc))
    with pytest.raises(result_files.DamagedFileError, match=r"r\.json' is damaged: does not match ScriptResult: "
                                                          "surprise: Extra inputs are not permitted$"):
        result_files.read_model(path, ScriptResult)


def test_batch_files_written_one_result_at_a_time_are_the_same_bytes(tmp_path: Path) -> None:
    """result_files.write_model_chunks (the batch files sink's writes): the bytes of dumping the
    whole model, a list's items and a dict's entries written one at a time, valid against the schema."""
    from jaxrun.results.batch_summary import (
        latest_by_name,
        performance_metrics_head,
        script_metrics,
    )

    results = [script_result("a"), script_result("bé \"q\"", success=False, error_class="timeout",
                                                 execution_time=None, results={"nan": float("nan")}, compiles={}),
               script_result("c", device_requested="gpu"), script_result("a", device_requested="gpu")]
    for listed in (results, results[:1], []):
        batch = batch_result(listed)
        path = tmp_path / result_files.EXECUTION_RESULTS
        result_files.write_model_chunks(path, batch.model_copy(update={"script_results": []}), "script_results", listed)
        assert path.read_text() == result_files.dump_model(batch)
        Draft202012Validator(result_files.json_schema("execution_results")).validate(json.loads(path.read_text()))
        whole = performance_metrics(listed)
        head = performance_metrics_head(listed).model_copy(update={"generated_at": whole.generated_at})
        path = tmp_path / result_files.PERFORMANCE_METRICS
        result_files.write_model_chunks(path, head, "scripts",
                                       ((name, script_metrics(r)) for name, r in latest_by_name(listed)))
        assert path.read_text() == result_files.dump_model(whole)  # "a" twice: its first place, its last result
        Draft202012Validator(result_files.json_schema("performance_metrics")).validate(json.loads(path.read_text()))
    assert entries(tmp_path) == sorted([result_files.EXECUTION_RESULTS, result_files.PERFORMANCE_METRICS])
    with pytest.raises(ValueError, match="no empty top-level field"):
        list(result_files.dump_model_chunks(batch_result(results), "script_results", results))


# --------------------------------------------------------------------------- JSON Schemas


def test_schema_names_match_the_result_files() -> None:
    assert set(result_files.SCHEMAS) == {
        "execution_results", "performance_metrics", "device_info", "script_result", "benchmark_results",
        "comparison", "pytest_benchmarks", "memory_profile", "timing_profile",
    }


@pytest.mark.parametrize("name", sorted(result_files.SCHEMAS))
def test_every_schema_is_valid_draft_2020_12(name: str) -> None:
    schema = result_files.json_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert "schema_version" in schema["properties"]
    assert schema.get("additionalProperties") is False  # a misspelt field is an error


def test_written_files_validate_against_their_schemas(tmp_path: Path) -> None:
    results = [
        script_result("ok"),
        script_result("failed", success=False, error_class="out_of_memory", error_message="OOM",
                      exit_code=1, execution_time=None, memory_peak=None),
    ]
    documents = {
        "execution_results": batch_result(results),
        "performance_metrics": performance_metrics(results),
        "device_info": device_info(),
        "script_result": results[1],
    }
    for name, model in documents.items():
        path = tmp_path / f"{name}.json"
        result_files.write_model(path, model)
        Draft202012Validator(result_files.json_schema(name)).validate(json.loads(path.read_text()))


def test_schema_rejects_an_unknown_error_class() -> None:
    schema = result_files.json_schema("script_result")
    doc = json.loads(result_files.dump_model(script_result(success=False, error_class="script_error")))
    Draft202012Validator(schema).validate(doc)
    doc["error_class"] = "gremlins"
    assert list(Draft202012Validator(schema).iter_errors(doc))
    assert set(ERROR_CLASSES) == {
        "device_unavailable", "out_of_memory", "compilation_failed", "numerical_instability",
        "timeout", "import_error", "syntax_error", "script_error", "crashed", "node_lost", "interrupted",
    }


# --------------------------------------------------------------------------- mapping access


def test_models_read_like_the_seed_dicts() -> None:
    r = script_result()
    assert r["success"] is True and r["script_name"] == "demo"
    assert r["compiles"]["<lambda>"]["count"] == 1
    assert "execution_time" in r and "not_a_field" not in r
    assert r.get("not_a_field") is None and r.get("device_used") == "cpu"
    with pytest.raises(KeyError):
        r["not_a_field"]
    assert list(r.keys())[:3] == ["schema_version", "script_name", "script_path"]
    batch = batch_result([r])
    assert batch["metadata"]["framework"] == "jax"
    assert batch["script_results"][0]["success"] is True
    assert batch.success is True


def test_an_incomplete_batch_is_not_a_success() -> None:
    batch = batch_result([script_result()])
    cut_off = batch.model_copy(update={"metadata": batch.metadata.model_copy(update={"complete": False})})
    assert cut_off.success is False
