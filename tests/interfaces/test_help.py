"""Every command's --help says what the code does: no text rendered with printf-style escapes
(``95%% CI``), and a statistical test it names is the one its command judges with, computed
as that test computes it (checked against scipy). Real `python -m jaxrun ... --help` output."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import jaxrun
from scipy import stats as scipy_stats

from jaxrun.config.options import VerdictOptions
from jaxrun.interfaces.cli import app
from jaxrun.judge import change_points, paired, stats
from jaxrun.judge.verdicts import judge_script

# Every test a help text could name; a help that names one must name its command's.
TEST_NAMES = ("Mann-Whitney", "Wilcoxon", "t-test", "Student", "Welch", "Kolmogorov", "Kruskal", "permutation test")


def _commands(group=app, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """Every command and sub-command, with its click object."""
    import click

    found: list[tuple[tuple[str, ...], object]] = [(path, group)]
    if isinstance(group, click.Group):  # its commands as `jaxrun` finds them (imported when asked for)
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            found += _commands(group.get_command(ctx, name), (*path, name))
    return found


def _named_tests(text: str) -> set[str]:
    flat = " ".join(text.split())
    return {name for name in TEST_NAMES if name.lower() in flat.lower()}


def _judging_module(command: object) -> str | None:
    helps = getattr(command, "helps", None)
    return getattr(helps, "module", None)


@pytest.mark.slow
def test_every_help_is_rendered_text_and_names_the_test_its_command_uses() -> None:
    commands = _commands()
    names = {path for path, _ in commands}
    assert {("run",), ("config",), ("ab",), ("bisect",), ("compare",), ("history",), ("report",),
            ("cache", "info")} <= names
    judged = {}
    for path, command in commands:
        done = jaxrun(*path, "--help", env={"COLUMNS": "200"})  # words, not where a line wraps ("signed-|rank")
        assert done.returncode == 0, (path, done.stderr)
        text = done.stdout
        assert "%%" not in text, (path, [line for line in text.splitlines() if "%%" in line])
        module = _judging_module(command)
        if module is None:
            assert not _named_tests(text), (path, _named_tests(text))
            continue
        test = __import__(f"jaxrun.judge.{module}", fromlist=["TEST_NAME"]).TEST_NAME
        judged[path] = test
        # history --changes cuts series with change_points' test (checked against scipy there).
        also = _named_tests(change_points.TEST_NAME) if path == ("history",) else set()
        assert _named_tests(text) == _named_tests(test) | also, (path, _named_tests(text), test)
        alpha = " ".join(text.split("--alpha", 1)[1].split("[default")[0].split())
        assert test in alpha, (path, alpha)
    # compare and history judge two samples, ab and bisect pairs.
    assert judged == {("compare",): stats.TEST_NAME, ("history",): stats.TEST_NAME,
                      ("ab",): paired.TEST_NAME, ("bisect",): paired.TEST_NAME}


@pytest.mark.slow
def test_the_pytest_plugins_help_names_the_test_it_judges_with() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "jaxrun.pytest_plugin", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "%%" not in done.stdout
    alpha = " ".join(done.stdout.split("--jax-benchmark-alpha", 1)[1].split("--jax-benchmark-fail")[0].split())
    assert stats.TEST_NAME in alpha and _named_tests(alpha) == _named_tests(stats.TEST_NAME), alpha


@pytest.mark.parametrize("seed", range(5))
def test_the_named_tests_are_the_ones_computed(seed: int) -> None:
    """stats' test is scipy's Mann-Whitney U, paired's scipy's Wilcoxon signed-rank (exact, no
    ties), through the functions that judge compare and ab."""
    rng = np.random.default_rng(seed)
    base, new = list(rng.normal(1.0, 0.05, 7)), list(rng.normal(1.06, 0.05, 6))
    judged = judge_script("s", "cpu", {"run_time": base}, {"run_time": new}, VerdictOptions(metric="run_time"))
    expected = scipy_stats.mannwhitneyu(base, new, alternative="two-sided", method="exact").pvalue
    assert judged.phases["run_time"].p_value == pytest.approx(expected, rel=1e-9)
    assert "Mann-Whitney U" in stats.TEST_NAME
    pairs_base, pairs_new = list(rng.normal(1.0, 0.05, 9)), list(rng.normal(1.05, 0.05, 9))
    phase = paired.judge_paired_phase("run_time", pairs_base, pairs_new, alpha=0.01, min_effect=0.05)
    d = np.log(np.array(pairs_new) / np.array(pairs_base))
    assert phase.p_value == pytest.approx(scipy_stats.wilcoxon(d, method="exact").pvalue, rel=1e-9)
    assert "Wilcoxon signed-rank" in paired.TEST_NAME


def test_verbose_help_says_what_it_prints() -> None:
    text = " ".join(jaxrun("run", "--help").stdout.split())
    said = text.split("-v, --verbose", 1)[1].split(" --")[0] if "-v, --verbose" in text else \
        text.split("--verbose", 1)[1].split(" --")[0]
    for what in ("log", "attempt", "live view", "program", "transfers", "cell"):
        assert what in said, said
    assert not re.fullmatch(r"\s*Log each attempt\.\s*", said)
