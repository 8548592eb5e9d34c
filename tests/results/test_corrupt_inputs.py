"""Every reader of result files, fed corrupted files (truncated, bytes flipped, values replaced):
one clear UsageError, never a traceback (property-based, hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from helpers import write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxrun import run_jax_scripts
from jaxrun.errors import UsageError
from jaxrun.judge.compare import compare_results
from jaxrun.results import result_files


@pytest.fixture(scope="module")
def good_results(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    root = tmp_path_factory.mktemp("good")
    write(root / "s", "a.py", "import jax\nprint(1)\n")
    assert run_jax_scripts(root / "s", device="cpu", results_dir=root / "r", history=False, benchmark_runs=2)
    return (root / "r" / result_files.EXECUTION_RESULTS).read_bytes()


def _corruptions(original: bytes) -> st.SearchStrategy[bytes]:
    truncated = st.integers(0, len(original) - 1).map(lambda n: original[:n])
    flipped = st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(0, 255)), min_size=1, max_size=8).map(
        lambda edits: bytes(b if i not in dict(edits) else dict(edits)[i] for i, b in enumerate(original)))
    junk = st.sampled_from([b"", b"null", b"[]", b"{}", b"\xff\xfe", b'{"script_results": 3}',
                            b'{"benchmarks": {"x": 1}}', b"NaN"])
    return st.one_of(truncated, flipped, junk)


def _check(read, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / result_files.EXECUTION_RESULTS
        path.write_bytes(data)
        try:
            read(path)
        except UsageError as exc:
            assert "\n" not in str(exc) and str(exc)
            assert "validation error" not in str(exc)
        # A corruption that still parses into a valid file is fine: it is a valid file.


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_compare_reads_a_corrupted_results_file_or_says_why(good_results: bytes, data: st.DataObject) -> None:
    corrupted = data.draw(_corruptions(good_results))
    _check(lambda path: compare_results(path, path), corrupted)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_resume_reads_a_corrupted_results_file_or_says_why(good_results: bytes, data: st.DataObject,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    corrupted = data.draw(_corruptions(good_results))
    root = tmp_path_factory.mktemp("resume")
    write(root / "s", "a.py", "print(1)\nif False:\n    import jax\n")  # quick: no jax to import
    (root / "r").mkdir()
    (root / "r" / ".jaxrun.manifest").write_text("")  # the folder an earlier run made (results/ownership.py)
    (root / "r" / result_files.EXECUTION_RESULTS).write_bytes(corrupted)
    # Whatever the damage, --resume runs (what no script file holds runs again).
    assert run_jax_scripts(root / "s", device="cpu", results_dir=root / "r", history=False, resume=True)
