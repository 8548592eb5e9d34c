"""pytest plugin: the ``jax_benchmark`` fixture, a JSON file of results, and baseline comparison.

    def test_matmul(jax_benchmark):
        x = jnp.ones((1024, 1024))
        m = jax_benchmark(lambda a: a @ a, x)      # a jaxrun.bench.measure(...) Measurement
        assert m.flops == 2 * 1024**3

    pytest --jax-benchmark-json bench.json                       # save the measurements
    pytest --jax-benchmark-compare bench.json --jax-benchmark-fail-on-regression

Each measurement is attached to its test's ``user_properties`` (so it reaches junit XML and JSON
report plugins) and collected from the test reports, which also works under pytest-xdist. With a
baseline, each test is judged against the baseline's as ``jaxrun compare`` judges a script
(:func:`jaxrun.judge.verdicts.judge_script`): its run phase (the steady-state samples; Mann-Whitney U and a
minimum effect) and its compile phase (one trace + lower + compile per side: shown, never tested).
Too few steady-state samples for the test to reach p < alpha give "too few runs to judge": shown,
never a regression.

pytest loads entry-point plugins in every session of the environment, so this module imports
neither jax nor the result models: they are imported when a benchmark runs or a file is read or written.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Callable

import pytest

from jaxrun.core.defaults import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    DEFAULT_MIN_SAMPLES,
    DEFAULT_TIME_BUDGET,
)
from jaxrun.core.formatting import plural
from jaxrun.core.timestamps import now_iso
from jaxrun.errors import UsageError

PROPERTY = "jax_benchmark"
TIME_BUDGET_INI = "jax_benchmark_time_budget"
_PLUGIN_NAME = "jaxrun-benchmark-session"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jax-benchmark", "JAX benchmarks (jaxrun)")
    group.addoption("--jax-benchmark-json", metavar="PATH", default=None,
                    help="Write every jax_benchmark measurement (raw samples included) to PATH as JSON.")
    group.addoption("--jax-benchmark-compare", metavar="BASELINE_JSON", default=None,
                    help="Compare each benchmark with the same test in a file written by --jax-benchmark-json.")
    # Validated as jaxrun.config.options.VerdictOptions, whose defaults these are (imported only when used:
    # the options' declarations would add to every pytest start-up).
    group.addoption("--jax-benchmark-min-effect", type=float, default=DEFAULT_MIN_EFFECT, metavar="FRACTION",
                    help=f"Smallest change in the median counted as slower/faster (default {DEFAULT_MIN_EFFECT}).")
    group.addoption("--jax-benchmark-alpha", type=float, default=DEFAULT_ALPHA, metavar="P",
                    help=f"Significance level of the Mann-Whitney U test (default {DEFAULT_ALPHA}).")
    group.addoption("--jax-benchmark-fail-on-regression", action="store_true", default=False,
                    help="Exit with status 1 when a benchmark is significantly slower than the baseline.")
    group.addoption("--jax-benchmark-time-budget", "--jax-benchmark-min-time", type=float, default=None,
                    metavar="SECONDS", dest="jax_benchmark_time_budget",
                    help=f"Seconds of steady-state timing per benchmark: as many samples as fit, at least "
                    f"{DEFAULT_MIN_SAMPLES} (default: the {TIME_BUDGET_INI} ini value, else {DEFAULT_TIME_BUDGET}; "
                    "--jax-benchmark-min-time is its older name).")
    parser.addini(TIME_BUDGET_INI, default=None,
                  help=f"Seconds of steady-state timing per jax_benchmark (default {DEFAULT_TIME_BUDGET}); "
                  "--jax-benchmark-time-budget overrides it.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "jax_benchmark: a test that measures a JAX function with jax_benchmark")
    baseline = config.getoption("--jax-benchmark-compare")
    if baseline and not Path(baseline).is_file():
        raise pytest.UsageError(f"--jax-benchmark-compare: baseline file {baseline!r} does not exist")
    written = config.getoption("--jax-benchmark-json")
    if written:  # a file that could not be written at the session's end is refused before any test runs
        from jaxrun.results.result_files import check_output_file

        try:
            check_output_file(Path(written), "the benchmarks file (--jax-benchmark-json)")
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    try:
        if (config.getoption("--jax-benchmark-alpha"), config.getoption("--jax-benchmark-min-effect")) != (
                DEFAULT_ALPHA, DEFAULT_MIN_EFFECT):
            _verdict_options(config)
    except UsageError as exc:
        raise pytest.UsageError(f"--jax-benchmark-alpha / --jax-benchmark-min-effect: {exc}") from None
    time_budget(config)  # a bad budget stops the session before any test runs
    config.pluginmanager.register(_Session(config), _PLUGIN_NAME)


def time_budget(config: pytest.Config) -> float:
    """Seconds of timing per benchmark: the command line's, else the ini file's, else the default."""
    value: Any = config.getoption("jax_benchmark_time_budget")
    where = "--jax-benchmark-time-budget"
    if value is None:
        value, where = config.getini(TIME_BUDGET_INI), f"ini value {TIME_BUDGET_INI}"
    if value in (None, ""):
        return DEFAULT_TIME_BUDGET
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise pytest.UsageError(f"{where} must be a number of seconds > 0, like 0.5, got {value!r}")
    return seconds


def _verdict_options(config: pytest.Config) -> Any:
    from jaxrun.config.options import VerdictOptions

    return VerdictOptions.build("cli", alpha=config.getoption("--jax-benchmark-alpha"),
                                min_effect=config.getoption("--jax-benchmark-min-effect"))


class _Session:
    """Collects measurements from test reports; writes, compares and summarises at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, dict[str, Any]] = {}
        self.comparisons: list[Any] = []
        self.written: Path | None = None
        self.error: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY and isinstance(value, dict) and "key" in value:
                data = dict(value)
                self.results[data.pop("key")] = data

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):  # an xdist worker: the controller writes the file
            return
        out = self.config.getoption("--jax-benchmark-json")
        baseline = self.config.getoption("--jax-benchmark-compare")
        if not self.results or not (out or baseline):
            return
        try:
            benchmarks_file = self._benchmarks_file(baseline)
            if out:
                from jaxrun.results.result_files import atomic_write_text

                atomic_write_text(Path(out), benchmarks_file.model_dump_json(indent=2) + "\n")
                self.written = Path(out)
        except Exception as exc:  # a bad baseline must not hide the test results
            self.error = f"{type(exc).__name__}: {exc}"
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        slower = [c for c in self.comparisons if c.verdict == "slower"]
        if slower and self.config.getoption("--jax-benchmark-fail-on-regression") and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _benchmarks_file(self, baseline: str | None) -> Any:
        from jaxrun.core.version import __version__
        from jaxrun.bench.records import Measurement, PytestBenchmarks

        benchmarks = {key: Measurement.model_validate(data) for key, data in self.results.items()}
        jax_version = next((m.jax_version for m in benchmarks.values() if m.jax_version), None)
        if baseline:
            self.comparisons = _compare(self.config, benchmarks, Path(baseline))
        return PytestBenchmarks(
            generated_at=now_iso(),
            host=socket.gethostname(),
            jaxrun_version=__version__,
            jax_version=jax_version,
            benchmarks=benchmarks,
            baseline=str(baseline) if baseline else None,
            comparisons=self.comparisons,
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.results:
            return
        tr = terminalreporter
        tr.section("jax benchmarks")
        for key, data in self.results.items():
            steady = data.get("steady") or {}
            median, low, high = steady.get("median"), steady.get("ci_low"), steady.get("ci_high")
            ci = f" [{_ms(low)}, {_ms(high)}]" if low is not None and high is not None else ""
            extra = ""
            if data.get("fraction_of_peak_flops") is not None:
                # What the peak is, said each time: a measured matmul, or the function's own fastest call.
                source = f"peak: {data['peak_flops_source']}; " if data.get("peak_flops_source") else ""
                extra = f", {data['fraction_of_peak_flops']:.1%} of peak FLOP/s ({source}{data.get('bound')}-bound)"
            taken = ""
            if data.get("num_samples") is not None and data.get("sampling_time") is not None:
                taken = (f", {data['num_samples']} samples x {data.get('inner_loops')} calls in "
                         f"{data['sampling_time']:.2f} s")
            tr.write_line(f"{key}: median {_ms(median)}{ci}, compile {_ms(data.get('compile_time'))}{taken}{extra}")
        from jaxrun.judge.verdicts import describe_gate, too_few_note
        from jaxrun.results.comparisons import TOO_FEW

        for c in self.comparisons:
            judged = describe_gate(c)
            notes = [n for n in (c.note, too_few_note(c) if c.verdict == TOO_FEW else None) if n]
            note = f" ({'; '.join(notes)})" if notes else ""
            tr.write_line(f"{c.verdict.upper()}: {c.script_name}{' ' + judged if judged else ''}{note}",
                          red=c.verdict == "slower", green=c.verdict == "faster", yellow=c.verdict == TOO_FEW)
        if self.written:
            tr.write_line(f"jax benchmark results written to {self.written}")
        if self.error:
            tr.write_line(f"jax benchmark results could not be written or compared: {self.error}", red=True)
        too_few = [c.script_name for c in self.comparisons if c.verdict == TOO_FEW]
        if too_few:
            tr.write_line(f"{plural(len(too_few), 'benchmark')} with too few samples to judge against the baseline (not a "
                          "regression): take more with min_samples= or --jax-benchmark-min-time", yellow=True)
        slower = [c.script_name for c in self.comparisons if c.verdict == "slower"]
        if slower and self.config.getoption("--jax-benchmark-fail-on-regression"):
            tr.write_line(f"{plural(len(slower), 'benchmark')} slower than the baseline: failing the session", red=True)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4g} ms"


def _phases(m: Any) -> dict[str, list[float]]:
    """A measurement's phases: run (steady-state seconds per call, sampled) and compile (one value)."""
    return {"run_time": list(m.samples), "compile_time": [m.trace_time + m.lower_time + m.compile_time]}


def _compare(config: pytest.Config, benchmarks: dict[str, Any], path: Path) -> list[Any]:
    from jaxrun.bench.records import PytestBenchmarks
    from jaxrun.judge.verdicts import DEFAULT_GATE, judge_script
    from jaxrun.results import result_files
    from jaxrun.results.models import ScriptComparison

    try:
        base = result_files.read_model(path, PytestBenchmarks)
    except result_files.DamagedFileError as exc:  # one line that says where, as every reader says it
        raise ValueError(f"baseline {exc} (expected a --jax-benchmark-json file)") from None
    except OSError as exc:
        raise ValueError(f"baseline {path} cannot be read: {exc}") from None
    options = _verdict_options(config)
    out = []
    for key, new in benchmarks.items():
        old = base.benchmarks.get(key)
        if old is None or old.device != new.device:
            note = "not in the baseline" if old is None else f"baseline ran on {old.device}"
            out.append(ScriptComparison(script_name=key, device=new.device, verdict="not comparable",
                                        gate=list(DEFAULT_GATE), note=note))
            continue
        out.append(judge_script(key, new.device, _phases(old), _phases(new), options))
    return out


class _Benchmark:
    """The ``jax_benchmark`` fixture's value: call it like :func:`jaxrun.bench.measure`."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self.measurements: list[Any] = []

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from jaxrun.bench import measure

        if "time_budget" not in kwargs and "min_time" not in kwargs:
            kwargs["time_budget"] = time_budget(self._request.config)
        m = measure(fn, *args, **kwargs)
        node = self._request.node
        taken = {value.get("key") for name, value in node.user_properties if name == PROPERTY and isinstance(value, dict)}
        key = node.nodeid if node.nodeid not in taken else f"{node.nodeid}::{m.name}"
        suffix = 2
        while key in taken:
            key, suffix = f"{node.nodeid}::{m.name}#{suffix}", suffix + 1
        node.user_properties.append((PROPERTY, {"key": key, **m.model_dump(mode="json")}))
        self.measurements.append(m)
        return m


@pytest.fixture
def jax_benchmark(request: pytest.FixtureRequest) -> _Benchmark:
    """Measure a JAX function: ``jax_benchmark(fn, *args, **kwargs)`` returns a Measurement.

    Takes :func:`jaxrun.bench.measure`'s options (``static_argnums``, ``time_budget``, ``samples``,
    ``peaks``...); ``time_budget`` defaults to ``--jax-benchmark-time-budget``, else the
    ``jax_benchmark_time_budget`` ini value, else 1 s.
    The first measurement of a test is stored under the test's node id, further ones under
    ``<node id>::<function name>``.
    """
    return _Benchmark(request)
