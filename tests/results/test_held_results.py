"""A batch's results held compactly until its end (jaxrun/results/held_results.py): read back equal, the
batch files written from them byte for byte as from the models, a few hundred bytes a result,
and the writing's own structure (one file write a result, the manifest opened once)."""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import random
import tracemalloc
from pathlib import Path

import pytest
from helpers import write

from jaxrun.judge.benchmark_runs import benchmarking_section, script_benchmark
from jaxrun.results import model_json, result_files
from jaxrun.results.batch_summary import (
    assemble_batch,
    figures_of,
    latest_by_name,
    performance_metrics_head,
    script_metrics,
)
from jaxrun.results.held_results import HeldList, HeldResults, having, round_trips
from jaxrun.results.models import (
    Attempt,
    BatchMetadata,
    BatchResult,
    CellTiming,
    CompileStats,
    Numerics,
    RunEnvironment,
    RunSample,
    ScriptMemoryProfile,
    ScriptProfile,
    ScriptResult,
    ScriptTimingProfile,
)


def result(name: str, **fields) -> ScriptResult:
    """A result shaped as a real tiny script's (its texts, its sub-models)."""
    base = dict(
        script_name=name, script_path=f"/work/scripts/{name}.py", success=True, device_requested="auto",
        device_used="cpu", exit_code=0, started_at="2026-11-27T08:45:56.797+00:00",
        finished_at="2026-11-27T08:45:57.124+00:00", execution_time=0.19185387200013793, body_time=0.0059312689991202205,
        import_time=0.0005231470022408757, run_time=0.005408121996879345, drain_time=0.0, ended_by="return",
        cpu_time=0.07430569000000001, cpu_method="the run's cgroup's count (cpuacct.usage) + the script's start-up",
        memory_peak=14.73828125, memory_method="max of the script process's own peak RSS and samples",
        device_memory_reason="the script did not import jax", outcome="passed",
        attempts=[Attempt(number=1, device="cpu", success=True, exit_code=0, execution_time=0.19,
                          started_at="2026-11-27T08:45:56.797+00:00")],
        command=["/usr/bin/python3", "-m", "jaxrun.probe", "--events", "/tmp/ev/events.jsonl", "--", f"/work/scripts/{name}.py"],
        numerics=Numerics(), environment=RunEnvironment(mode="inherited", variables=52),
        content_hash="20fa07ed7760c1d8369414ad17b38458259e983da2aee0ec47ddba8c0d5ce287", options_key="d857f249858f5e44",
        stdout_log=f"/r/logs/{name}.stdout.log", stderr_log=f"/r/logs/{name}.stderr.log",
    )
    base.update(fields)
    return ScriptResult(**base)


def assorted() -> list[ScriptResult]:
    """Results of every shape a batch holds: some read back from their JSON, some held as they are."""
    sample = RunSample(index=1, warmup=False, success=True, wall_time=0.5)
    benchmarked = result("bench")
    benchmarked = benchmarked.model_copy(update={"benchmark": script_benchmark(benchmarked, [sample], [], 1, 0, None)})
    profile = ScriptProfile(memory=ScriptMemoryProfile(interval=0.05, host=[(0.0, 1.0)]),
                            timing=ScriptTimingProfile(execution_time=1.0))
    return [
        result("plain"),
        result("failed", success=False, error_class="script_error", outcome="failed", execution_time=None,
               error_message="ValueError: boom\nand more", traceback='File "/work/scripts/failed.py", line 3\n'),
        result("compiled", compile_count=2, jit_compile_time=0.25, cache_hits=1,
               compiles={"jit(f)": CompileStats(count=2, trace_time=0.01)}),
        result("recorded", results={"loss": 0.25, "curve": [1.0, 0.5], "meta": {"k": "v", "n": None}}),
        result("nan_recorded", results={"nan": float("nan")}),  # JSON would give "NaN" back: held as it is
        result("tuple_recorded", results={"pair": (1, 2)}),  # JSON would give a list back: held as it is
        result("nan_figure", memory_peak=float("nan")),
        result("notebook", cells=[CellTiming(index=1, source="x = 1", outcome="ok").model_copy(
            update={"outputs": [("stdout", "hi\n")]})]),
        result("profiled", performance_metrics={"trace_dir": "/r/traces/profiled"}).model_copy(update={"profile": profile}),
        result("not_unicode\udcff", script_path="/work/scripts/not_unicode\udcff.py"),
        result("ünïcødé", warnings=["a program compiled 3 times"]),
        benchmarked,
        result("plain", device_requested="gpu", device_used="gpu", device_index=1),  # a name twice: two devices
    ]


def same(a: ScriptResult, b: ScriptResult) -> bool:
    """Equal, NaN equal to NaN: the same JSON, the same fields not written in it."""
    return (result_files.dump_model(a) == result_files.dump_model(b) and a.profile == b.profile
            and [c.outputs for c in a.cells or ()] == [c.outputs for c in b.cells or ()]
            and json.dumps(a.results, default=repr) == json.dumps(b.results, default=repr))


def meta(n: int) -> BatchMetadata:
    return BatchMetadata(
        jaxrun_version="0.1.0", device_requested="auto", device_used="cpu", jax_version=None,
        execution_timestamp="2026-11-27T08:45:56.000+00:00", scripts_found=n, scripts_executed=0,
        scripts_successful=0, scripts_failed=0, search_paths=["/work/scripts"], results_dir="/r", host="h",
        python_version="3.11")


def test_held_results_read_back_as_they_were_and_write_the_same_bytes(tmp_path: Path) -> None:
    results = assorted()
    held = HeldResults()
    order = list(range(len(results)))
    random.Random(3).shuffle(order)  # results come in as scripts finish; they are read in batch order
    for i in order:
        held.add(i, results[i])
    listed = held.results()
    assert isinstance(listed, HeldList) and len(listed) == len(results) == len(held)
    assert all(same(a, b) for a, b in zip(listed, results))
    finite = HeldResults()
    for i, r in enumerate(r for r in results if r.script_name != "nan_figure"):  # NaN is never equal to NaN
        finite.add(i, r)
    assert finite.results() == [r for r in results if r.script_name != "nan_figure"]
    assert same(listed[-1], results[-1]) and all(same(a, b) for a, b in zip(listed[2:5], results[2:5]))
    # What is not written in a result file, or would not read back from it, is the model itself.
    kept = {r.script_name for r in results if not round_trips(r)}
    assert kept == {"nan_recorded", "tuple_recorded", "notebook", "profiled"}
    for a, b in zip([figures_of(r) for r in results], listed.figures()):
        assert a == b or (math.isnan(a.memory_peak) and a._replace(memory_peak=0) == b._replace(memory_peak=0))
    assert [b.script_name for b in listed.benchmarks()] == ["bench"]
    for names in (("cells",), ("warm",), ("performance_metrics",), ("compiles", "benchmark")):
        assert [(i, r.script_name) for i, r in having(listed, *names)] == \
               [(i, r.script_name) for i, r in having(results, *names)]

    # The batch files of held results, written from the texts and figures held, are the bytes
    # of the batch of the models.
    def judged(benchmarks):  # type: ignore[no-untyped-def]
        return benchmarking_section(list(benchmarks), 1, 0, ["cpu"])

    whole = assemble_batch(meta(len(results)), None, results, complete=False,
                           benchmarking=judged(r.benchmark for r in results if r.benchmark is not None))
    lean = assemble_batch(meta(len(results)), None, listed, complete=False, benchmarking=judged(listed.benchmarks()),
                          figures=listed.figures())
    assert isinstance(lean.script_results, HeldList)
    path, before = tmp_path / result_files.EXECUTION_RESULTS, tmp_path / "from_models.json"
    result_files.write_model_chunks(path, lean.model_copy(update={"script_results": []}), "script_results",
                                   listed.texts())
    result_files.write_model_chunks(before, whole.model_copy(update={"script_results": []}), "script_results", results)
    assert path.read_bytes() == before.read_bytes()
    # Dumped whole, a batch with a text that is not valid Unicode is escaped whole (json, not pydantic:
    # its NaN unquoted): the same bytes without it.
    valid = [r for r in results if "\udcff" not in r.script_name]
    listed_valid = HeldResults()
    for i, r in enumerate(valid):
        listed_valid.add(i, r)
    lean_valid = assemble_batch(meta(len(valid)), None, listed_valid.results(), complete=False,
                                benchmarking=judged(listed_valid.results().benchmarks()),
                                figures=listed_valid.results().figures())
    result_files.write_model_chunks(path, lean_valid.model_copy(update={"script_results": []}), "script_results",
                                   listed_valid.results().texts())
    whole_valid = assemble_batch(meta(len(valid)), None, valid, complete=False,
                                 benchmarking=judged(r.benchmark for r in valid if r.benchmark is not None))
    assert path.read_text() == result_files.dump_model(whole_valid) == result_files.dump_model(lean_valid)
    figures = listed.figures()
    head = performance_metrics_head(figures, lean.performance_summary)
    result_files.write_model_chunks(path, head, "scripts", ((n, script_metrics(f)) for n, f in latest_by_name(figures)))
    whole_head = performance_metrics_head(results).model_copy(update={"generated_at": head.generated_at})
    result_files.write_model_chunks(before, whole_head, "scripts", ((n, script_metrics(r)) for n, r in latest_by_name(results)))
    assert path.read_bytes() == before.read_bytes()
    # A copy, a pickle, a dump of a batch of held results: a list of its results.
    for other in (pickle.loads(pickle.dumps(lean_valid)), copy.deepcopy(lean_valid)):
        assert type(other.script_results) is list and result_files.dump_model(other) == result_files.dump_model(whole_valid)
    assert BatchResult.model_validate_json(lean_valid.model_dump_json()).script_results[0] == results[0]
    assert lean_valid.to_dict()["script_results"][1]["script_name"] == "failed"


def test_a_result_held_is_a_few_hundred_bytes() -> None:
    """What a batch holds a result as, against ~5 KB a model (<= 2 KB of RSS a result: benchmarks/README.md).
    tracemalloc counts the bytes Python allocates: deterministic, not a timing."""
    held = HeldResults()
    made = [result(f"script_{i:05d}", execution_time=0.1 + i * 1e-4, started_at=f"2026-11-27T08:{i // 60 % 60:02d}:"
                   f"{i % 60:02d}.{i % 1000:03d}+00:00", content_hash=f"{i * 7919:064x}") for i in range(2000)]
    held.add(0, made[0])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, r in enumerate(made[1:], 1):
            held.add(i, r)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    per_result = grown / (len(made) - 1)
    assert per_result <= 400, per_result  # ~300 (a model: ~5,000)


RESULT_LINE = "import jax\n"


def instant(job, options, **_):  # type: ignore[no-untyped-def]
    """A finished script's result, without running it: what is measured is jaxrun's own writing."""
    return result(job.name, script_path=str(job.script), device_requested=job.device,
                  stdout_log=str(job.stdout_log), stderr_log=str(job.stderr_log),
                  execution_time=0.1 + job.index * 1e-3, memory_peak=10.0 + job.index, results={"index": job.index})


def instant_or_nan(job, options, **_):  # type: ignore[no-untyped-def]
    """:func:`instant`, every third one with a NaN recorded (a result held as its model)."""
    made = instant(job, options)
    return made if job.index % 3 else made.model_copy(update={"results": {"nan": float("nan")}})


def run_instant_batch(scripts: Path, results: Path, run_job=instant):  # type: ignore[no-untyped-def]
    from jaxrun.batch.pipeline import run_batch
    from jaxrun.config.options import BatchOptions

    options = BatchOptions.build("api", paths=[scripts], results_dir=results, history=False, device="cpu")
    return run_batch(options, run_job=run_job)


def test_a_batchs_files_are_its_results_and_each_is_written_once(tmp_path: Path, monkeypatch) -> None:
    """The real batch on stand-in scripts: the batch file holds exactly what each script's file
    holds and what the batch returns; each result is one file write, never fsynced on its own,
    and the manifest is opened once for the batch's claims (not once a script)."""
    n = 40
    for i in range(n):
        write(tmp_path / "s", f"s{i:03d}.py", RESULT_LINE)
    opened: list[str] = []
    synced: list[int] = []
    real_open, real_fsync = os.open, os.fsync

    def counting_open(path, flags, *args, **kw):  # type: ignore[no-untyped-def]
        if flags & os.O_WRONLY:
            opened.append(os.fspath(path))
        return real_open(path, flags, *args, **kw)

    def counting_fsync(fd):  # type: ignore[no-untyped-def]
        synced.append(fd)
        return real_fsync(fd)

    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(os, "fsync", counting_fsync)
    batch = run_instant_batch(tmp_path / "s", tmp_path / "r", instant_or_nan)
    monkeypatch.undo()

    out = tmp_path / "r"
    assert sum(Path(p).name == ".jaxrun.manifest" for p in opened) == 1
    own = [p for p in opened if Path(p).parent.name == result_files.SCRIPT_RESULTS_DIR]
    assert len(set(own)) == n and len(own) <= n + 1  # one write of each script's file (+1: the folder made)
    batch_writes = sum(result_files.EXECUTION_RESULTS in Path(p).name for p in opened)
    assert len(synced) <= 3 * batch_writes + 1, (len(synced), batch_writes)  # the batch files' writes only

    on_disk = result_files.read_model(out / result_files.EXECUTION_RESULTS, BatchResult)
    assert (out / result_files.EXECUTION_RESULTS).read_text() == result_files.dump_model(batch)
    assert len(on_disk.script_results) == len(batch.script_results) == n
    for listed, returned in zip(on_disk.script_results, batch.script_results):
        own_file = result_files.script_result_path(out, returned.script_name)
        assert own_file.read_text() == result_files.dump_model(returned) == result_files.dump_model(listed)
    assert sum(isinstance(r.results.get("nan"), float) for r in batch.script_results) == n // 3 + 1  # read as it was


def _interning_lines() -> list[int]:
    """The lines of pathlib that intern each part of a path it parses."""
    import pathlib

    with open(pathlib.__file__, encoding="utf-8") as source:
        return [i for i, line in enumerate(source, 1) if "sys.intern(" in line]


@pytest.mark.slow
@pytest.mark.parametrize("n", [2000])
def test_a_batch_holds_a_few_hundred_bytes_a_result(tmp_path: Path, n: int) -> None:
    """The real batch on stand-in scripts: what it holds at its end (its returned batch included),
    a result, measured by tracemalloc (deterministic) between a batch of n/10 and one of n
    results; it held each result's model (~3.4 KB) before. Not counted: the interpreter's table
    of interned texts (each new file name a Path parses is interned), which grows in steps of
    up to a few MB at once, whatever holds the names."""
    import pathlib

    interning = [tracemalloc.Filter(False, pathlib.__file__, lineno=line) for line in _interning_lines()]
    small = n // 10
    held = {}
    for i in range(10):
        write(tmp_path / "warm", f"s{i}.py", RESULT_LINE)
    run_instant_batch(tmp_path / "warm", tmp_path / "r_warm")  # what a first batch imports and builds
    for count in (small, n):
        for i in range(count):
            write(tmp_path / f"s{count}", f"d{i // 500}/s{i:05d}.py", RESULT_LINE)
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot().filter_traces(interning)
            batch = run_instant_batch(tmp_path / f"s{count}", tmp_path / f"r{count}")
            after = tracemalloc.take_snapshot().filter_traces(interning)
        finally:
            tracemalloc.stop()
        held[count] = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        assert len(batch.script_results) == count
        del batch
    per_result = (held[n] - held[small]) / (n - small)
    assert per_result <= 600, per_result  # ~300 measured (a model a result before: ~3,400)


def test_each_result_is_serialized_once(tmp_path: Path, monkeypatch) -> None:
    """Its own file is written with the text the batch holds it as, and the batch files are
    written from that text: one serialization a result (a rewrite of the batch files serialized
    every result again)."""
    n = 30
    for i in range(n):
        write(tmp_path / "s", f"s{i:03d}.py", RESULT_LINE)
    dumped: list[str] = []
    real = model_json.exact_json_text

    def counting(model, *args, **kw):  # type: ignore[no-untyped-def]
        if isinstance(model, ScriptResult):
            dumped.append(model.script_name)
        return real(model, *args, **kw)

    monkeypatch.setattr(model_json, "exact_json_text", counting)
    batch = run_instant_batch(tmp_path / "s", tmp_path / "r")
    monkeypatch.undo()
    assert sorted(dumped) == sorted(r.script_name for r in batch.script_results)
