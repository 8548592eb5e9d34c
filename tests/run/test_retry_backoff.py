"""The backoff between retries is really waited: read from the attempts of a real run.

A script that always fails with "Unable to initialize backend 'cuda'" is classified
``device_unavailable``, which is transient, so with ``retries=2`` it runs 3 times on the CPU (no
fallback from the CPU). Each attempt records when it started (``started_at``, ISO with
milliseconds) and how long its process ran (``execution_time``); between the end of one attempt and
the start of the next the runner must have slept the backoff.
"""

from __future__ import annotations

import textwrap
from datetime import datetime
from pathlib import Path

import pytest

import jaxrun

# jaxrun's backoff before retry k (k = 1, 2, ...) is RETRY_BACKOFF_BASE * 2**(k-1): 1.0 s, then
# 2.0 s (base 1.0 s, capped at 30 s). Hard-coded here because the modules that hold the constant
# and backoff_seconds move between releases; a change of the policy should show up in this test.
BACKOFF_BEFORE_RETRY = (1.0, 2.0)

# started_at is written with millisecond precision, truncated: the next attempt's start can read up
# to 1 ms early. The tolerance allows that and small wall-clock adjustments, nothing more; a
# missing sleep leaves gaps of a few milliseconds, far below 1.0 - 0.01 s.
TIMESTAMP_TOLERANCE = 0.01

ALWAYS_NO_DEVICE = """\
raise RuntimeError("Unable to initialize backend 'cuda': no visible devices")
"""


@pytest.mark.slow
def test_retries_wait_the_backoff_between_attempts(tmp_path: Path) -> None:
    script = tmp_path / "no_device.py"
    script.write_text(textwrap.dedent(ALWAYS_NO_DEVICE))

    result = jaxrun.execute_jax_script(script, device="cpu", retries=2, results_dir=tmp_path / "results", timeout=120)

    assert result.success is False and result.error_class == "device_unavailable", result.error_message
    attempts = result.attempts
    assert [a.number for a in attempts] == [1, 2, 3]
    assert [(a.device, a.error_class, a.success) for a in attempts] == [("cpu", "device_unavailable", False)] * 3
    assert all(a.exit_code == 1 for a in attempts)  # each attempt was a real process that ran
    assert all(a.execution_time is not None and a.execution_time > 0 for a in attempts)

    starts = [datetime.fromisoformat(a.started_at) for a in attempts]
    for k, backoff in enumerate(BACKOFF_BEFORE_RETRY):
        ended = starts[k].timestamp() + attempts[k].execution_time
        gap = starts[k + 1].timestamp() - ended
        # Lower bounds only: a sleep is never shorter than asked, but may be longer on a busy box.
        assert gap >= backoff - TIMESTAMP_TOLERANCE, (
            f"only {gap:.3f} s between attempt {k + 1} and {k + 2}; the backoff is {backoff} s"
        )
