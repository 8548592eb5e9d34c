"""Issue 24, item 4: a results folder whose files were damaged (cut off, garbled, fields missing).
`--resume` rebuilds the batch from the per-script files that survived; every reader (report,
compare, --resume, the MCP monitor tool) names the damaged file and says what is wrong in one
line; compare falls back from a damaged jax_benchmark_results.json to jax_execution_results.json."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import jaxrun, load, write

from jaxrun.results import result_files
from jaxrun.results.models import BatchResult

QUICK = "if False:\n    import jax\nprint('{name}')\n"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, jaxrun_cache_dir: Path) -> Path:
    """A finished, benchmarked batch of a.py and b.py (folders s/ and r/)."""
    root = tmp_path_factory.mktemp("finished")
    for name in ("a", "b"):
        write(root / "s", f"{name}.py", QUICK.format(name=name))
    with pytest.MonkeyPatch.context() as env:  # as the tests' own runs have it: the same run options
        env.setenv("JAXRUN_CACHE_DIR", str(jaxrun_cache_dir))
        done = jaxrun("run", "s", "--device", "cpu", "--results-dir", "r", "--no-history",
                       "--benchmark-runs", "2", "--warmup-runs", "0", cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    return root


def _copy(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished / "s", tmp_path / "s")
    shutil.copytree(finished / "r", tmp_path / "r")
    return tmp_path


def _cut(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "--resume:" in line]


@pytest.mark.slow
def test_resume_rebuilds_a_cut_off_batch_file_from_the_script_files(finished: Path, tmp_path: Path) -> None:
    root = _copy(finished, tmp_path)
    _cut(root / "r" / result_files.EXECUTION_RESULTS)
    _cut(root / "r" / "script_results" / "b_result.json", 0.3)
    resumed = jaxrun("run", "s", "--device", "cpu", "--results-dir", "r", "--no-history",
                      "--benchmark-runs", "2", "--warmup-runs", "0", "--resume", cwd=root, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    said = _warnings(resumed.stderr)
    assert len(said) == 1, resumed.stderr
    assert "jax_execution_results.json' is damaged: not valid JSON at line " in said[0]
    assert "rebuilt the batch from 1 per-script result file (a_result.json)" in said[0]
    assert "damaged, so their scripts run again: b_result.json (not valid JSON at line " in said[0]
    # a is kept, b ran again, and the folder ends as one run would have left it.
    batch = result_files.read_model(root / "r" / result_files.EXECUTION_RESULTS, BatchResult)
    assert [(r.script_name, r.kept, r.success) for r in batch.script_results] == [("a", True, True), ("b", False, True)], resumed.stderr
    assert batch.metadata.complete
    assert load(root / "r" / "script_results" / "b_result.json")["success"] is True


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["missing metadata", "not JSON", "missing"])
def test_resume_rebuilds_a_batch_file_missing_fields_not_json_or_gone(finished: Path, tmp_path: Path,
                                                                      damage: str) -> None:
    root = _copy(finished, tmp_path)
    path = root / "r" / result_files.EXECUTION_RESULTS
    if damage == "missing metadata":
        doc = load(path)
        del doc["metadata"]
        path.write_text(json.dumps(doc))
    elif damage == "not JSON":
        path.write_bytes(b"\x00\xff garbage")
    else:
        path.unlink()
    resumed = jaxrun("run", "s", "--device", "cpu", "--results-dir", "r", "--no-history",
                      "--benchmark-runs", "2", "--warmup-runs", "0", "--resume", cwd=root, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    said = _warnings(resumed.stderr)
    assert len(said) == 1, resumed.stderr
    assert {"missing metadata": "is damaged: does not match BatchResult: metadata: Field required",
            "not JSON": "is damaged: not valid JSON", "missing": "is missing"}[damage] in said[0]
    assert "rebuilt the batch from 2 per-script result files (a_result.json, b_result.json)" in said[0]
    batch = result_files.read_model(path, BatchResult)
    assert [(r.script_name, r.kept) for r in batch.script_results] == [("a", True), ("b", True)]


def test_report_says_where_a_cut_off_file_stops_being_json(finished: Path, tmp_path: Path) -> None:
    root = _copy(finished, tmp_path)
    path = root / "r" / result_files.EXECUTION_RESULTS
    _cut(path)
    path.write_text(path.read_text().rstrip())  # it stops on its last line
    lines = path.read_text().splitlines()
    done = jaxrun("report", "r", cwd=root, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "validation error" not in done.stderr, done.stderr
    assert f"jax_execution_results.json' is damaged: not valid JSON at line {len(lines)} column " in done.stderr
    assert "cut off" in done.stderr


def test_report_names_the_field_that_does_not_match(finished: Path, tmp_path: Path) -> None:
    root = _copy(finished, tmp_path)
    path = root / "r" / result_files.EXECUTION_RESULTS
    doc = load(path)
    del doc["script_results"][0]["success"]
    path.write_text(json.dumps(doc))
    done = jaxrun("report", "r", cwd=root, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "is damaged: does not match BatchResult: script_results.0.success: Field required" in done.stderr


@pytest.mark.slow
def test_compare_falls_back_from_a_damaged_benchmark_file(finished: Path, tmp_path: Path) -> None:
    root = _copy(finished, tmp_path)
    _cut(root / "r" / result_files.BENCHMARK_RESULTS)
    done = jaxrun("compare", str(finished / "r"), "r", "--json", cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    assert {s["script_name"] for s in json.loads(done.stdout)["scripts"]} == {"a", "b"}
    notes = [line for line in done.stderr.splitlines() if "damaged" in line]
    assert len(notes) == 1 and "jax_benchmark_results.json' is damaged: not valid JSON at line " in notes[0], done.stderr
    assert "read jax_execution_results.json instead" in notes[0]
    # Both damaged: one line naming both, exit 2.
    _cut(root / "r" / result_files.EXECUTION_RESULTS)
    done = jaxrun("compare", str(finished / "r"), "r", cwd=root, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "jax_benchmark_results.json' is damaged: not valid JSON" in done.stderr
    assert "jax_execution_results.json' is damaged: not valid JSON" in done.stderr


@pytest.mark.slow
def test_mcp_monitor_says_what_report_says(finished: Path, tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    root = tmp_path / "root"
    shutil.copytree(finished / "r", root / "r")
    _cut(root / "r" / result_files.EXECUTION_RESULTS)
    report = jaxrun("report", "r", cwd=root, timeout=120)
    said = report.stderr.strip().partition("jax_execution_results.json' ")[2]  # the path is as each was given
    texts: list[str] = []

    async def body() -> None:
        server = StdioServerParameters(command=sys.executable, args=["-m", "jaxrun", "mcp", "--root", str(root)],
                                       env=dict(os.environ), cwd=str(root))
        with open(os.devnull, "w") as quiet:
            async with stdio_client(server, errlog=quiet) as (read, write_stream):
                async with ClientSession(read, write_stream) as session:
                    await session.initialize()
                    called = await session.call_tool("execute.monitor_jax_performance", {"results_dir": "r"})
                    failed = called.model_dump(by_alias=True, mode="json")  # whatever the SDK's field names
                    assert failed["isError"], failed
                    texts.extend(c.get("text", "") for c in failed["content"])

    anyio.run(body)
    assert said.startswith("is damaged: not valid JSON at line"), report.stderr
    assert any(text.endswith("jax_execution_results.json' " + said) for text in texts), (said, texts)


def _not_regular(path: Path, kind: str) -> str:
    """``path`` replaced by a FIFO, or by a link to a character device; what readers must say."""
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
        return "is not a regular file but a FIFO (named pipe)"
    path.symlink_to("/dev/zero")
    return "is not a regular file but a character device"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_in_a_result_files_place_is_never_opened(finished: Path, tmp_path: Path, kind: str) -> None:
    """Every reader of result files (report, compare, --resume, the per-script files) says what is
    there in one line instead of waiting for a writer (a FIFO) or reading forever (/dev/zero)."""
    root = _copy(finished, tmp_path)
    said = _not_regular(root / "r" / result_files.EXECUTION_RESULTS, kind)
    done = jaxrun("report", "r", cwd=root, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"jax_execution_results.json' {said}: jaxrun reads its results only from regular files" in done.stderr
    _not_regular(root / "r" / result_files.BENCHMARK_RESULTS, kind)
    done = jaxrun("compare", str(finished / "r"), "r", cwd=root, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"jax_benchmark_results.json' {said}" in done.stderr and f"jax_execution_results.json' {said}" in done.stderr
    # --resume: rebuilt from the per-script files, one of which is not a file either (not read, said).
    _not_regular(root / "r" / "script_results" / "b_result.json", kind)
    done = jaxrun("run", "s", "--device", "cpu", "--results-dir", "r", "--no-history", "--resume",
                   "--benchmark-runs", "2", "--warmup-runs", "0", cwd=root, timeout=120)
    if kind == "device":  # a link to the device: jaxrun neither reads nor replaces a link at one of its names
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "holds a symbolic link at 'jax_execution_results.json' (to '/dev/zero')" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    warnings = _warnings(done.stderr)
    assert warnings and f"jax_execution_results.json' {said}; rebuilt the batch from 1 per-script result file" \
        in warnings[0], done.stderr
    assert "b_result.json" in " ".join(warnings) and said.removeprefix("is ") in " ".join(warnings), warnings
    doc = load(root / "r" / result_files.EXECUTION_RESULTS)  # written in its place, a regular file again
    assert [(r["script_name"], r["kept"]) for r in doc["script_results"]] == [("a", True), ("b", False)]
    assert not (root / "r" / result_files.EXECUTION_RESULTS).is_symlink()


@pytest.mark.slow
def test_report_shows_a_failed_scripts_log_tail_and_never_opens_a_fifo_in_its_place(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    write(tmp_path / "s", "bad.py", "if False:\n    import jax\nimport sys\nsys.stderr.write('x' * 300_000 + '\\n')\n"
          "sys.stderr.write('the last words\\n')\nraise SystemExit(3)\n")
    done = jaxrun("run", "s", "--device", "cpu", "--results-dir", "r", "--no-history", cwd=tmp_path, timeout=120)
    assert done.returncode == 1, done.stderr
    done = jaxrun("report", "r", "-o", "one.html", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "one.html").read_text()
    assert "the last words" in page and "x" * 300_000 not in page  # the log's end, not all of it
    log = tmp_path / "r" / "logs" / "bad.stderr.log"
    log.unlink()
    os.mkfifo(log)
    done = jaxrun("report", "r", "-o", "two.html", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(the log is not a regular file but a FIFO (named pipe): not read)" in (tmp_path / "two.html").read_text()


# --- every reader of a results folder: a folder that is not there, a file cut anywhere -------------


def _readers(folder: str, other: str) -> dict[str, tuple[str, ...]]:
    """Every command that reads a results folder, reading ``folder`` (``other``: a good one)."""
    return {
        "report": ("report", folder),
        "report --baseline": ("report", other, "--baseline", folder),
        "compare BASE": ("compare", folder, other),
        "compare NEW": ("compare", other, folder),
    }


@pytest.mark.slow
def test_every_reader_says_a_missing_folder_does_not_exist(finished: Path, tmp_path: Path) -> None:
    """It once said "jax_execution_results.json is missing" of a folder that is not there."""
    root = _copy(finished, tmp_path)
    write(root, "a_file.txt", "not a folder\n")
    for missing, said in (("nodir", ("no such folder 'nodir'", "'nodir' does not exist")),
                          ("a_file.txt", ("'a_file.txt' is not a folder",))):
        for reader, args in _readers(missing, "r").items():
            if missing == "a_file.txt" and reader != "report":
                continue  # compare reads a results JSON file as well as a folder
            done = jaxrun(*args, cwd=root, timeout=120)
            assert done.returncode == 2 and done.stderr.count("\n") == 1, (reader, done.stderr)
            assert done.stderr.startswith("jaxrun: error: ") and any(s in done.stderr for s in said), (reader, done.stderr)
            assert "is missing" not in done.stderr, (reader, done.stderr)


def _cut_at(text: str, how: str) -> str:
    """``text`` (a results file) cut: inside a string, inside a literal (null, true), after a comma, or emptied."""
    if how == "inside a string":
        at = text.index('"script_name": "') + len('"script_name": "')  # just after the opening quote
    elif how == "inside a literal":
        at = max(text.rfind(": null", 0, len(text) // 2), text.rfind(": true", 0, len(text) // 2)) + 4
    elif how == "after a comma":
        at = text.index(",", len(text) // 2) + 1
    else:
        at = 0
    return text[:at]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["inside a string", "inside a literal", "after a comma", "empty"])
def test_every_reader_says_where_a_cut_file_stops_being_json(finished: Path, tmp_path: Path, how: str) -> None:
    """Line and column, with json's reason worded to point back at them (it once read "(Unterminated
    string starting at)", the position it named missing), and that the file looks cut off."""
    root = _copy(finished, tmp_path)
    shutil.copytree(root / "r", root / "cut")
    text = _cut_at((root / "cut" / result_files.EXECUTION_RESULTS).read_text(), how)
    for name in (result_files.EXECUTION_RESULTS, result_files.BENCHMARK_RESULTS):
        (root / "cut" / name).write_text(text)  # compare reads the benchmark file first
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"not valid JSON at line {exc.lineno} column {exc.colno} ("
    for reader, args in _readers("cut", "r").items():
        done = jaxrun(*args, cwd=root, timeout=120)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (reader, done.stderr)
        assert where in done.stderr and ("cut off?" in done.stderr or "empty" in done.stderr), (reader, done.stderr)
        assert not any(dangling in done.stderr for dangling in (" at)", " at;", "starting at")), (reader, done.stderr)
    # --resume reads it too: it goes on from the per-script files, and says where the batch file broke.
    (root / "cut" / result_files.BENCHMARK_RESULTS).unlink()
    resumed = jaxrun("run", "s", "--device", "cpu", "--results-dir", "cut", "--no-history",
                      "--benchmark-runs", "2", "--warmup-runs", "0", "--resume", cwd=root, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert any(where in line for line in _warnings(resumed.stderr)), resumed.stderr
