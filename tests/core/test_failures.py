"""Unit tests of jaxrun.core.failures (the failure table): what to do after an attempt, and how long to wait first."""

from __future__ import annotations

import itertools
import re

import pytest

from jaxrun.core.failures import (
    HINTS,
    RETRY_BACKOFF_BASE,
    RETRY_BACKOFF_MAX,
    as_sentences,
    backoff_seconds,
    cause_hints,
    hint_for,
    next_action,
)
from jaxrun.probe.memory_fit import FIT_MARKER, with_fit_evidence
from jaxrun.results.models import ERROR_CLASSES

PLATFORMS = ("cpu", "gpu", "tpu", "auto")


def act(error_class, platform, *, retries_left=0, fallback=True, launched=True):
    return next_action(error_class, platform, retries_left=retries_left, fallback=fallback, launched=launched)


@pytest.mark.parametrize(
    ("error_class", "platform", "retries_left", "fallback", "launched", "expected"),
    [
        # a missing accelerator that was launched and failed: retry while retries last, then CPU
        ("device_unavailable", "gpu", 2, True, True, "retry"),
        ("device_unavailable", "gpu", 1, False, True, "retry"),
        ("device_unavailable", "gpu", 0, True, True, "fallback"),
        ("device_unavailable", "gpu", 0, False, True, "stop"),
        # the device facts already said it is absent: waiting will not install a driver
        ("device_unavailable", "gpu", 3, True, False, "fallback"),
        ("device_unavailable", "tpu", 3, True, False, "fallback"),
        ("device_unavailable", "gpu", 3, False, False, "stop"),
        ("device_unavailable", "auto", 0, True, False, "fallback"),
        # on CPU there is nowhere to fall back to; a launched CPU run may still be retried
        ("device_unavailable", "cpu", 1, True, True, "retry"),
        ("device_unavailable", "cpu", 0, True, True, "stop"),
        ("device_unavailable", "cpu", 3, True, False, "stop"),
        # accelerator OOM is transient, host OOM is not
        ("out_of_memory", "gpu", 1, True, True, "retry"),
        ("out_of_memory", "gpu", 0, True, True, "fallback"),
        ("out_of_memory", "tpu", 0, False, True, "stop"),
        ("out_of_memory", "cpu", 3, True, True, "stop"),
    ],
)
def test_transient_truth_table(error_class, platform, retries_left, fallback, launched, expected):
    assert act(error_class, platform, retries_left=retries_left, fallback=fallback, launched=launched) == expected


@pytest.mark.parametrize(
    ("platform", "retries_left", "fallback", "launched"),
    list(itertools.product(PLATFORMS, (0, 1, 5), (True, False), (True, False))),
)
def test_success_and_permanent_failures_always_stop(platform, retries_left, fallback, launched):
    for error_class in (None, *ERROR_CLASSES):
        if error_class in ("device_unavailable", "out_of_memory", "node_lost"):
            continue
        assert act(error_class, platform, retries_left=retries_left, fallback=fallback, launched=launched) == "stop", error_class


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_lost_node_is_run_again_while_retries_are_left_and_never_falls_back(platform):
    for retries_left, fallback in itertools.product((0, 1, 5), (True, False)):
        action = act("node_lost", platform, retries_left=retries_left, fallback=fallback, launched=True)
        assert action == ("retry" if retries_left else "stop"), (retries_left, fallback)


def test_never_falls_back_from_cpu_and_never_retries_unlaunched():
    for error_class, platform, retries_left, fallback, launched in itertools.product(
        (None, *ERROR_CLASSES), PLATFORMS, (0, 1, 5), (True, False), (True, False)
    ):
        action = act(error_class, platform, retries_left=retries_left, fallback=fallback, launched=launched)
        if platform == "cpu":
            assert action != "fallback"
        if not launched:
            assert action != "retry"
        if retries_left == 0:
            assert action != "retry"
        if not fallback:
            assert action != "fallback"


def test_backoff_doubles_and_is_capped():
    assert [backoff_seconds(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff_seconds(1) == RETRY_BACKOFF_BASE
    assert backoff_seconds(100) == RETRY_BACKOFF_MAX


def test_backoff_custom_base_and_cap():
    assert [backoff_seconds(n, base=0.5, cap=3.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_backoff_before_first_retry_is_the_base():
    # retry numbers start at 1; 0 (or less) must not give a shorter wait than the first retry
    assert backoff_seconds(0) == RETRY_BACKOFF_BASE
    assert backoff_seconds(-3) == RETRY_BACKOFF_BASE


def _reads_as_sentences(text: str) -> bool:
    """Each sentence after the first starts with a capital (or a flag, a name in backquotes); no
    sentence ends twice."""
    return not re.search(r"(?<!\.\.)\.\s+[a-z]", text) and not re.search(r"(?<!\.)\.\.(?!\.)", text)


@pytest.mark.parametrize(("error_class", "cause", "hint"), cause_hints())
def test_every_hint_joined_after_another_text_reads_as_sentences(error_class: str, cause: str, hint: str) -> None:
    """Hints start in lower case (they follow "hint: "); joined after a message or the compile-time
    memory warning (probe/memory_fit.py, the one place hints are joined) they start a sentence."""
    assert hint_for(error_class, cause or None) == hint
    assert hint.strip()
    warning = ("jit(f) needs 4 TiB on cpu:0 (outputs 4 TiB; beyond its 0 B of inputs) but the device has 1 GiB free "
               "(--memory-limit: 1 GiB - 0 B in use): it " + FIT_MARKER)
    joined = with_fit_evidence(hint, [warning])
    assert joined == f"jaxrun warned at compile time: {warning}. {hint[0].upper()}{hint[1:]}"
    assert _reads_as_sentences(joined), joined
    assert _reads_as_sentences(as_sentences(f"{warning}.", hint, "")), as_sentences(f"{warning}.", hint)
    assert with_fit_evidence(hint, ["a warning that is no fit warning"]) == hint


def test_texts_join_as_sentences_with_one_period_each() -> None:
    assert as_sentences("it stopped.", "raise the limit", None, "  ") == "it stopped. Raise the limit"
    assert as_sentences("--memory-limit was met", "`scancel 12` stops it") == "--memory-limit was met. `scancel 12` stops it"
    assert as_sentences("", "alone") == "alone"


def test_a_hint_for_a_cause_the_table_lacks_is_an_error_not_a_guess() -> None:
    with pytest.raises(KeyError):
        hint_for("interrupted", "no such cause")
    assert hint_for("interrupted") == HINTS["interrupted"]
    assert "Ctrl-C" not in hint_for("interrupted", "cancelled") + hint_for("interrupted", "controller_gone")


def test_a_failure_class_is_declared_once_and_the_result_models_take_it_from_the_table() -> None:
    """One declaration: the result models' ErrorClass is the table's names in its order (the JSON
    Schema of the result files lists the same names, sorted as msgspec writes an enum), and a
    second row of a name is refused, not a silent override."""
    from typing import get_args

    from jaxrun.core import failures
    from jaxrun.results.models import ErrorClass, ScriptResult

    assert get_args(ErrorClass) == tuple(failures.TABLE) == ERROR_CLASSES
    schema = ScriptResult.model_json_schema()["properties"]["error_class"]["anyOf"][0]
    assert schema["enum"] == sorted(failures.TABLE)
    rows = (failures.FailureClass("timeout", "one"), failures.FailureClass("crashed", "two"),
            failures.FailureClass("timeout", "three"))
    with pytest.raises(ValueError, match="'timeout' has two rows"):
        failures.one_row_each(rows)
