"""Every write of a batch can fail: a full disk or an I/O error on a log, a result or a
batch file is one line naming the file and the errno, never a traceback, a hang or a lost batch.

Real batches of tiny scripts into a results folder that cannot take everything: a 2 MB tmpfs (a
real "No space left on device", where this machine lets the tests mount one) or a file-size limit
on jaxrun (RLIMIT_FSIZE: a real "File too large" on the one big log, everything else written).
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import RunResult, jaxrun, survivors, write

# Far below the scripts' default --timeout (300 s): a script blocked on a pipe nobody reads fails here.
HANG_GUARD = 90

SMALL = "if False:\n    import jax\nprint('x' * 100)\n"


def _big(megabytes: int) -> str:
    return ("if False:\n    import jax\nimport sys\n"
            f"for _ in range({megabytes * 10}):\n    sys.stdout.write('y' * 100000 + '\\n')\n")


def _jaxrun(tmp_path: Path, *args: object, preexec=None) -> RunResult:
    """``jaxrun run`` to completion; a hang is a failure, with every process it left stopped."""
    try:
        return jaxrun("run", *args, "--device", "cpu", "--no-history", cwd=tmp_path, timeout=HANG_GUARD,
                      preexec_fn=preexec)
    except subprocess.TimeoutExpired:
        for line in survivors(str(tmp_path)):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        pytest.fail(f"jaxrun hung (over {HANG_GUARD} s) on a results folder that could not be written")


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("jaxrun: error:")]


def _tmpfs(folder: Path, size: str):
    """A tmpfs of ``size`` mounted at ``folder`` for the test, unmounted after it."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 2 MB tmpfs at tmp_path/r."""
    yield from _tmpfs(tmp_path / "r", "2m")


@pytest.fixture
def one_mib_disk(tmp_path: Path):
    """A 1 MiB tmpfs at tmp_path/r."""
    yield from _tmpfs(tmp_path / "r", "1m")


@pytest.mark.slow
def test_a_full_disk_stops_the_batch_in_one_line_and_resume_finishes_it(tmp_path: Path, tiny_disk: Path) -> None:
    scripts = tmp_path / "s"
    for i in range(1, 7):
        write(scripts, f"s{i}.py", _big(3) if i == 3 else SMALL)  # s3's output fills the disk

    done = _jaxrun(tmp_path, scripts, "--results-dir", tiny_disk)

    assert "Traceback" not in done.stderr, done.stderr
    errors = _errors(done.stderr)
    assert len(errors) == 1, done.stderr
    assert re.fullmatch(rf"jaxrun: error: cannot write {re.escape(str(tiny_disk))}/\S+: "
                        r"\[Errno 28\] No space left on device", errors[0]), errors
    assert done.returncode == 2, done.stderr
    assert survivors(str(tmp_path)) == []
    batch = json.loads((tiny_disk / "jax_execution_results.json").read_text())
    assert batch["metadata"]["complete"] is False

    # Space again (the log that filled the disk removed, the script tamed): --resume runs the rest.
    (tiny_disk / "logs" / "s3.stdout.log").unlink()
    write(scripts, "s3.py", SMALL)
    again = _jaxrun(tmp_path, scripts, "--results-dir", tiny_disk, "--resume")
    assert again.returncode == 0, again.stderr
    batch = json.loads((tiny_disk / "jax_execution_results.json").read_text())
    assert batch["metadata"]["complete"] is True
    results = {Path(r["script_path"]).name: r for r in batch["script_results"]}
    assert sorted(results) == [f"s{i}.py" for i in range(1, 7)]
    assert all(r["success"] for r in results.values())
    assert results["s1.py"]["kept"] and results["s2.py"]["kept"]
    assert not results["s4.py"]["kept"]


# Writes 400 KB into its outputs folder, and one line to the file ``ran`` beside the results
# folder each time its process starts.
FILLS = ("if False:\n    import jax\nimport os, sys\n"
         "open(os.path.join(os.environ['RAN_LOG'], os.path.basename(sys.argv[0])), 'a').write('ran\\n')\n"
         "open(os.path.join(os.environ['JAXRUN_OUTPUT_DIR'], 'big.bin'), 'wb').write(b'x' * 400_000)\n")


@pytest.mark.slow
def test_a_full_disk_keeps_every_result_that_finished_and_resume_never_runs_one_again(
        tmp_path: Path, one_mib_disk: Path) -> None:
    """Four scripts of 400 KB each on a 1 MiB disk: the batch stops in one line, and every script
    that finished is in the batch file (those whose own result file could not be written too),
    which lists every result file there is; --resume runs none of them again."""
    scripts, ran = tmp_path / "s", tmp_path / "ran"
    ran.mkdir()
    for i in range(4):
        write(scripts, f"w{i}.py", FILLS)
    env = {"RAN_LOG": str(ran)}

    done = jaxrun("run", scripts, "--device", "cpu", "--no-history", "--results-dir", one_mib_disk, cwd=tmp_path,
                  env=env, timeout=HANG_GUARD)

    assert done.returncode == 2 and len(_errors(done.stderr)) == 1, done.stderr
    assert "No space left on device" in _errors(done.stderr)[0] and "Traceback" not in done.stderr
    batch = json.loads((one_mib_disk / "jax_execution_results.json").read_text())
    listed = {r["script_name"]: r for r in batch["script_results"]}
    assert sorted(listed) == ["w0", "w1", "w2", "w3"], done.stderr  # each run or marked not run
    on_disk = {p.name.removesuffix("_result.json") for p in (one_mib_disk / "script_results").glob("*_result.json")}
    assert on_disk <= set(listed)
    finished = {name for name, r in listed.items() if r["error_class"] != "interrupted"}
    assert "w0" in finished and finished <= {p.name.removesuffix(".py") for p in ran.iterdir()}
    assert not (one_mib_disk / ".jaxrun.reserve").exists()

    again = jaxrun("run", scripts, "--device", "cpu", "--no-history", "--results-dir", one_mib_disk, "--resume",
                   cwd=tmp_path, env=env, timeout=HANG_GUARD)
    assert "Traceback" not in again.stderr, again.stderr
    for name in finished:
        assert (ran / f"{name}.py").read_text() == "ran\n", (name, again.stderr)


def _file_size_limit(limit: int):
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), kills nothing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


def test_a_log_that_cannot_be_written_does_not_stop_the_batch(tmp_path: Path) -> None:
    scripts = tmp_path / "s"
    for i in range(1, 4):
        write(scripts, f"s{i}.py", _big(3) if i == 2 else SMALL)
    results = tmp_path / "r"
    limit = 1024 * 1024  # every result file fits; s2's 3 MB of output does not

    done = _jaxrun(tmp_path, scripts, "--results-dir", results, preexec=_file_size_limit(limit))

    assert "Traceback" not in done.stderr, done.stderr
    assert _errors(done.stderr) == [], done.stderr
    assert done.returncode == 0, done.stderr
    assert survivors(str(tmp_path)) == []
    batch = json.loads((results / "jax_execution_results.json").read_text())
    assert batch["metadata"]["complete"] is True
    by_name = {Path(r["script_path"]).name: r for r in batch["script_results"]}
    assert all(r["success"] for r in by_name.values())
    s2 = by_name["s2.py"]
    assert s2["stdout_truncated"] is True
    log = results / "logs" / "s2.stdout.log"
    assert any(w.startswith(f"s2.stdout.log is incomplete: cannot write {log}: [Errno 27] File too large")
               for w in s2["warnings"]), s2["warnings"]
    assert log.stat().st_size <= limit
    assert by_name["s3.py"]["stdout_truncated"] is False
    assert (results / "logs" / "s3.stdout.log").read_text() == "x" * 100 + "\n"


# The script makes its own result file's path a folder that is not empty: writing that one file
# fails (os.replace: "Is a directory"), every other file of the batch can be written.
SPOILS_ITS_RESULT = """if False:
    import jax
import os
from pathlib import Path
results = Path(os.environ["JAXRUN_OUTPUT_DIR"]).parents[1]
(results / "script_results" / "s2_result.json" / "in-the-way").mkdir(parents=True)
print("done")
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_result_file_that_cannot_be_written_stops_the_batch_cleanly(tmp_path: Path, jobs: str) -> None:
    scripts = tmp_path / "s"
    # With --jobs 2 the first script is still running (far from its timeout) when s2's result fails.
    write(scripts, "s1.py", SMALL if jobs == "1" else "if False:\n    import jax\nimport time\ntime.sleep(250)\n")
    write(scripts, "s2.py", SPOILS_ITS_RESULT)
    for i in (3, 4):
        write(scripts, f"s{i}.py", SMALL)
    results = tmp_path / "r"

    done = _jaxrun(tmp_path, scripts, "--results-dir", results, "--jobs", jobs)

    assert "Traceback" not in done.stderr, done.stderr
    assert _errors(done.stderr) == [
        f"jaxrun: error: cannot write {results}/script_results/s2_result.json: [Errno 21] Is a directory"], done.stderr
    assert done.returncode == 2, done.stderr
    assert survivors(str(tmp_path)) == []
    # What could be written was: the batch files, with every script, say the batch did not end.
    batch = json.loads((results / "jax_execution_results.json").read_text())
    assert batch["metadata"]["complete"] is False
    by_name = {Path(r["script_path"]).name: r for r in batch["script_results"]}
    assert sorted(by_name) == ["s1.py", "s2.py", "s3.py", "s4.py"]
    assert by_name["s2.py"]["success"] is True
    assert by_name["s4.py"]["error_class"] == "interrupted"
    if jobs == "1":
        assert by_name["s1.py"]["success"] is True
        assert json.loads((results / "script_results" / "s1_result.json").read_text())["success"] is True
    else:
        assert by_name["s1.py"]["error_class"] == "interrupted"  # stopped, not waited for


def test_a_results_folder_full_from_the_start_is_one_line_and_keeps_no_lock(tmp_path: Path, tiny_disk: Path) -> None:
    scripts = tmp_path / "s"
    write(scripts, "s1.py", SMALL)
    (tiny_disk / "other").mkdir()  # beside the results folder: jaxrun refuses a folder holding files not its own
    filler = tiny_disk / "other" / "filler"
    with open(filler, "wb") as handle:  # the whole disk
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass

    results = tiny_disk / "results"
    done = _jaxrun(tmp_path, scripts, "--results-dir", results)
    assert "Traceback" not in done.stderr, done.stderr
    assert _errors(done.stderr) == [
        f"jaxrun: error: cannot write the results folder {str(results)!r}: [Errno 28] No space left on device; "
        "pass a folder you can write to --results-dir"], done.stderr
    assert done.returncode == 2

    # In one process (the API), the failed batch does not keep the folder's lock: once there is
    # room, the next batch runs there.
    from helpers import run_batch

    from jaxrun.errors import UsageError

    with pytest.raises(UsageError, match=r"\[Errno 28\] No space left on device"):
        run_batch(scripts, results)
    filler.unlink()
    assert run_batch(scripts, results).metadata.scripts_successful == 1
