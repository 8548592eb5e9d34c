"""Implicit transfers (JAX's transfer guard in its logging mode) and live array bytes: the line
parser and the stderr filter on their own, then real scripts run by jaxrun with real JAX on CPU
(where device-to-host copies do not exist: that direction is null there)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from helpers import write
from jsonschema import Draft202012Validator

from jaxrun import execute_jax_script
from jaxrun.judge.benchmark_runs import warm_summary
from jaxrun.results import result_files
from jaxrun.results.models import ScriptResult, WarmCall
from jaxrun.run.process.process_watch import _LogCopy
from jaxrun.run.process.transfers import SCRIPT_SET_GUARD, GuardLog, guard_log, parse_line

HEADER = "W1124 06:05:00.907168   19672 guard_lib.cc:125] "
SHARDING = ", dst_sharding=SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)"


def guard_line(description: str, direction: str = "host-to-device") -> bytes:
    return f"{HEADER}{direction} transfer: {description}".encode()


# --- the line parser ------------------------------------------------------------------------------


@pytest.mark.parametrize("description, size", [
    ("aval=ShapedArray(float32[256])" + SHARDING, 1024),
    ("aval=ShapedArray(int32[], weak_type=True)" + SHARDING, 4),
    ("aval=ShapedArray(bool[4])" + SHARDING, 4),
    ("aval=ShapedArray(bfloat16[3,5])" + SHARDING, 30),
    ("aval=ShapedArray(float8_e4m3fn[2,8])" + SHARDING, 16),
    ("aval=ShapedArray(complex128[10])" + SHARDING, 160),
])
def test_a_guard_line_gives_its_direction_and_bytes(description: str, size: int) -> None:
    assert parse_line(guard_line(description)) == ("host_to_device", size, None)


def test_what_a_line_does_not_say_is_unknown_and_why() -> None:
    direction, size, why = parse_line(guard_line(""))  # type: ignore[misc]
    assert (direction, size) == ("host_to_device", None) and "C++ dispatch path" in why
    _, size, why = parse_line(guard_line("aval=ShapedArray(float128[4])"))  # type: ignore[misc]
    assert size is None and "float128" in why
    assert parse_line(guard_line("aval=ShapedArray(float32[8])", "device-to-device"))[:2] == ("device_to_device", 32)
    assert parse_line(b"host-to-device transfer: aval=ShapedArray(float32[8])") is None  # not JAX's line
    assert parse_line(b"print('W1124 host-to-device transfer: ')") is None


# --- the filter on the script's stderr ------------------------------------------------------------

STREAM = (b"hello\n" + guard_line("aval=ShapedArray(float32[100])" + SHARDING) + b"\n"
          + b"world W1124 x\n" + guard_line("") + b"\n" + b"W1124 06:05 not a guard line\nno newline at the end")
THE_SCRIPTS_OWN = b"hello\nworld W1124 x\nW1124 06:05 not a guard line\nno newline at the end"


def feed(log: GuardLog, data: bytes, size: int) -> bytes:
    return b"".join(log.feed(data[i:i + size]) for i in range(0, len(data), size)) + log.flush()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 16, 61, 1000])
def test_guard_lines_split_across_reads_are_counted_and_left_out(size: int) -> None:
    log = GuardLog(strip=True)
    assert feed(log, STREAM, size) == THE_SCRIPTS_OWN
    assert log.counts["host_to_device"] == 2 and log.bytes["host_to_device"] == 400
    assert log.undescribed["host_to_device"] == 1 and len(log.examples) == 2


@pytest.mark.parametrize("size", [1, 2, 3, 9, 64, 1000])
def test_a_guard_line_after_the_scripts_unfinished_line_leaves_that_part(size: int) -> None:
    bar = b"\r 10%|#   |\r 20%|##  |" + guard_line("aval=ShapedArray(float32[2])") + b"\n\r 30%|### |\n"
    log = GuardLog(strip=True)
    assert feed(log, bar, size) == b"\r 10%|#   |\r 20%|##  |\r 30%|### |\n"
    assert log.counts["host_to_device"] == 1 and log.bytes["host_to_device"] == 8
    assert log.examples[0].startswith("W1124 ")


@pytest.mark.parametrize("size", [1, 4, 33])
def test_the_users_own_guard_lines_are_counted_and_kept(size: int) -> None:
    log = GuardLog(strip=False)
    assert feed(log, STREAM, size) == STREAM
    assert log.counts["host_to_device"] == 2


def test_other_output_is_never_held_back() -> None:
    log = GuardLog(strip=True)
    assert log.feed(b"progress 50%") == b"progress 50%"  # no newline, not a guard line: passed on at once
    assert log.feed(b"\nWarning: x") == b"\nWarning: x"
    assert log.feed(b"\nEpoch 1: loss W") == b"\nEpoch 1: loss "  # a W at the end may start JAX's line
    assert log.feed(b"ell") == b"Well"  # it did not
    assert log.feed(b"\nW1124 06:0") == b"\n"  # may be JAX's line: held until the rest arrives
    assert log.feed(b"5:00.1 12 other.cc:3] something else\n") == b"W1124 06:05:00.1 12 other.cc:3] something else\n"
    assert log.feed(b"W1124 06:05:00.1 12 a.cc:3] host-to") == b""
    assert log.flush() == b"W1124 06:05:00.1 12 a.cc:3] host-to"  # the end: a cut line is the script's


def test_only_the_guard_levels_set_to_log_are_counted() -> None:
    assert guard_log({}) is None
    assert guard_log({"JAX_TRANSFER_GUARD": "disallow"}) is None
    own = guard_log({"JAX_TRANSFER_GUARD": "log", "JAXRUN_TRANSFER_GUARD": "1"})
    assert own is not None and own.strip
    users = guard_log({"JAX_TRANSFER_GUARD": "log", "JAX_TRANSFER_GUARD_DEVICE_TO_DEVICE": "allow"})
    assert users is not None and not users.strip and users.counted == ("host_to_device", "device_to_host")


def test_guard_lines_do_not_count_against_the_log_cap(tmp_path: Path) -> None:
    read, write_end = os.pipe()
    own = b"x" * 50 + b"\n"
    data = (guard_line("aval=ShapedArray(float32[4])" + SHARDING) + b"\n") * 200 + own
    pump = _LogCopy(os.fdopen(read, "rb"), tmp_path / "err.log", cap=len(own), guard=GuardLog(strip=True))
    pump.start()
    writer = threading.Thread(target=lambda: (os.write(write_end, data), os.close(write_end)))
    writer.start()
    writer.join()
    pump.join(10)
    assert (tmp_path / "err.log").read_bytes() == own and not pump.truncated
    assert pump.guard.counts["host_to_device"] == 200  # type: ignore[union-attr]


# --- real scripts ---------------------------------------------------------------------------------


def run(path: Path, tmp_path: Path, **kwargs) -> ScriptResult:
    kwargs.setdefault("timeout", 120)
    result = execute_jax_script(path, "cpu", results_dir=tmp_path / "results", compile_cache=False, **kwargs)
    return result


KNOWN = """\
    import sys
    import numpy as np, jax
    # explicit: not counted
    a = jax.device_put(np.zeros((256,), np.float32))
    b = jax.device_put(np.zeros((512,), np.float32))
    c = jax.device_put(np.zeros((128,), np.float32))
    for x in (a, b, c):
        y = x + np.ones(x.shape, np.float32)  # one implicit host-to-device copy each
    np.asarray(y); float(y.sum())  # device-to-host: no copy on CPU (y[0] would copy its index over)
    print("the script's own line", file=sys.stderr)
    kept = jax.device_put(np.zeros((1000, 1000), np.float32))
    del a, b, c, x, y
"""


@pytest.mark.slow
def test_implicit_transfers_counted_exactly_and_kept_out_of_the_log(tmp_path: Path) -> None:
    result = run(write(tmp_path, "known.py", KNOWN), tmp_path)
    assert result.success, result.error_message
    transfers = result.transfers
    assert transfers is not None
    assert (transfers.host_to_device.count, transfers.host_to_device.bytes) == (3, 1024 + 2048 + 512)
    assert transfers.device_to_host is None and "on CPU" in transfers.reason
    assert (transfers.device_to_device.count, transfers.device_to_device.bytes) == (0, 0)
    assert len(transfers.examples) == 3 and "float32[512]" in transfers.examples[1]
    log = Path(result.stderr_log).read_text()
    assert "the script's own line" in log and "transfer:" not in log
    assert result.live_array_bytes == 4_000_000  # the one array the script kept
    written = json.loads((tmp_path / "results" / "script_results" / "known_result.json").read_text())
    Draft202012Validator(result_files.json_schema("script_result")).validate(written)
    assert written["transfers"]["host_to_device"] == {"count": 3, "bytes": 3584} and written["live_array_bytes"] == 4_000_000


@pytest.mark.slow
def test_a_transfer_jax_logs_without_its_array_makes_the_bytes_unknown(tmp_path: Path) -> None:
    script = write(tmp_path, "same.py", """\
        import numpy as np, jax
        x = jax.device_put(np.zeros((256,), np.float32))
        for _ in range(3):
            y = x + np.ones((256,), np.float32)  # the second and third take JAX's C++ path
    """)
    transfers = run(script, tmp_path).transfers
    assert transfers is not None and transfers.host_to_device.count == 3
    assert transfers.host_to_device.bytes is None
    assert "2 of the 3" in transfers.reason and "at least 1024 bytes" in transfers.reason


@pytest.mark.slow
def test_the_users_own_guard_setting_is_kept_in_the_log(tmp_path: Path) -> None:
    script = write(tmp_path, "users.py", "import numpy as np, jax\nx = jax.device_put(np.zeros(8, np.float32)) + np.ones(8, np.float32)\n")
    result = run(script, tmp_path, env={"JAX_TRANSFER_GUARD": "log"})
    assert result.transfers.host_to_device.count == 1 and result.transfers.host_to_device.bytes == 32
    assert "host-to-device transfer: aval=ShapedArray(float32[8])" in Path(result.stderr_log).read_text()

    allowed = run(script, tmp_path, env={"JAX_TRANSFER_GUARD": "allow"}).transfers
    assert allowed.host_to_device is None and "JAX_TRANSFER_GUARD=allow" in allowed.reason


@pytest.mark.slow
def test_a_script_that_sets_the_guard_itself(tmp_path: Path) -> None:
    allows = write(tmp_path, "allows.py", """\
        import numpy as np, jax
        jax.config.update("jax_transfer_guard", "allow")
        x = jax.device_put(np.zeros(8, np.float32)) + np.ones(8, np.float32)
    """)
    transfers = run(allows, tmp_path).transfers
    assert transfers.host_to_device is None and transfers.device_to_device is None
    assert SCRIPT_SET_GUARD in transfers.reason and "'allow'" in transfers.reason

    disallows = write(tmp_path, "disallows.py", """\
        import numpy as np, jax
        x = jax.device_put(np.zeros(8, np.float32))
        with jax.transfer_guard("disallow"):
            x + np.ones(8, np.float32)
    """)
    result = run(disallows, tmp_path)
    assert not result.success and "Disallowed host-to-device transfer" in result.error_message  # as without jaxrun
    assert SCRIPT_SET_GUARD in result.transfers.reason and "jax.transfer_guard('disallow')" in result.transfers.reason


def test_without_jax_both_are_unknown(tmp_path: Path) -> None:
    result = run(write(tmp_path, "plain.py", "print(1)\n"), tmp_path)
    assert result.success and result.transfers is None and result.live_array_bytes is None


# --- warm mode: live arrays growing over steady calls ---------------------------------------------


@pytest.mark.slow
def test_an_entry_that_keeps_arrays_alive_is_warned_of(tmp_path: Path) -> None:
    leaks = write(tmp_path, "leaks.py", """\
        import jax.numpy as jnp
        kept = []
        def main():
            kept.append(jnp.zeros((250,), jnp.float32))  # 1,000 bytes a call, never let go
            return jnp.ones(3) * 2
    """)
    warm = run(leaks, tmp_path, entry="main", warm_calls=5).warm
    assert warm is not None and warm.live_array_growth == 4_000
    assert [c.live_array_bytes - warm.calls[0].live_array_bytes for c in warm.calls] == [0, 1000, 2000, 3000, 4000]
    assert any("grew by 4,000 over 4 steady calls of main() (1,000 per call)" in w for w in warm.warnings), warm.warnings

    steady = write(tmp_path, "steady.py", """\
        import jax.numpy as jnp
        state = {}
        def main():
            state["last"] = jnp.zeros((250,), jnp.float32)  # replaced each call: no growth
            return jnp.ones(3) * 2
    """)
    warm = run(steady, tmp_path, entry="main", warm_calls=5).warm
    assert warm.live_array_growth == 0 and not any("leak" in w for w in warm.warnings), warm.warnings


def test_growth_is_judged_on_every_steady_call_not_on_noise() -> None:
    def calls(live: list[int], run: int = 1) -> list[WarmCall]:
        return [WarmCall(run=run, index=i, seconds=0.01, live_array_bytes=b) for i, b in enumerate(live, 1)]

    def leak(summary) -> bool:  # type: ignore[no-untyped-def]
        return any("possible leak" in w for w in summary.warnings)

    assert leak(warm_summary("main", calls([10, 20, 30, 40])))
    assert not leak(warm_summary("main", calls([10, 10, 50, 50, 50])))  # a cache filled once
    assert not leak(warm_summary("main", calls([10, 20, 15, 30])))  # went down once
    assert not leak(warm_summary("main", calls([10, 20])))  # one steady call: nothing to judge
    assert not leak(warm_summary("main", calls([10, 20, 30]) + calls([10, 10, 10], run=2)))  # not in every run
    both = warm_summary("main", calls([10, 20, 30]) + calls([10, 20, 30], run=2))
    assert leak(both) and "in each of the 2 runs" in both.warnings[-1]
    unknown = warm_summary("main", [WarmCall(index=i, seconds=0.01) for i in (1, 2, 3)])
    assert unknown.live_array_growth is None and not leak(unknown)


def test_a_script_that_changes_the_guard_variable_before_importing_jax(tmp_path: Path) -> None:
    script = write(tmp_path, "environ.py", """\
        import os
        os.environ["JAX_TRANSFER_GUARD"] = "allow"
        import numpy as np, jax
        x = jax.device_put(np.zeros(8, np.float32)) + np.ones(8, np.float32)
    """)
    transfers = run(script, tmp_path).transfers
    assert transfers.host_to_device is None and "JAX_TRANSFER_GUARD=allow" in transfers.reason  # never a false 0


@pytest.mark.slow
def test_a_log_level_that_hides_the_guards_lines_makes_the_counts_unknown(tmp_path: Path) -> None:
    script = write(tmp_path, "quiet.py", "import numpy as np, jax\nx = jax.device_put(np.zeros(8, np.float32)) + np.ones(8, np.float32)\n")
    transfers = run(script, tmp_path, env={"TF_CPP_MIN_LOG_LEVEL": "2"}).transfers
    assert transfers.host_to_device is None and "TF_CPP_MIN_LOG_LEVEL=2" in transfers.reason

    inside = write(tmp_path, "quiet_inside.py", "import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n" + script.read_text())
    transfers = run(inside, tmp_path).transfers
    assert transfers.host_to_device is None and "TF_CPP_MIN_LOG_LEVEL=3" in transfers.reason
    assert "before importing jax" in transfers.reason


@pytest.mark.slow
def test_processes_the_script_starts_after_importing_jax_get_no_guard(tmp_path: Path) -> None:
    script = write(tmp_path, "spawns.py", """\
        import os, subprocess, sys
        import jax
        code = "import numpy as np, jax; jax.device_put(np.zeros(8, np.float32)) + np.ones(8, np.float32)"
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        print(repr(os.environ.get("JAX_TRANSFER_GUARD")), "transfer:" in child.stderr)
    """)
    result = run(script, tmp_path)
    assert Path(result.stdout_log).read_text() == "None False\n"  # as without jaxrun
    assert result.transfers.host_to_device.count == 0
