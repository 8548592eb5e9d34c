"""Comparing runs: per-phase verdicts, the comparison's record (`ComparisonReport`, the one
model whose name says "report" without being the HTML report: kept, it is public), the history's
runs and checks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from jaxrun.core.defaults import (
    MIN_HISTORY_RUNS,
    TOO_FEW,  # noqa: F401 - the verdict's word, read from here by the views
)
from jaxrun.results.base_model import SCHEMA_VERSION, MappingModel
from jaxrun.results.figures import METRIC_ALIASES
from jaxrun.results.machine import Machine
from jaxrun.results.numerics import Numerics
from jaxrun.results.run_samples import RunSample

Verdict = Literal["faster", "slower", "no significant change", "too few runs to judge", "not comparable"]


class PhaseComparison(MappingModel):
    """One metric (phase) of one script, NEW judged against BASE."""

    metric: str
    base_n: int
    new_n: int
    base_median: Annotated[float | None, Meta(description=(
        "BASE's median: seconds, or MiB (2^20 bytes) for memory_peak"
    ))]
    new_median: Annotated[float | None, Meta(description="NEW's median, in the same unit")]
    ratio: Annotated[float | None, Meta(description=(
        "new median / base median (> 1 is slower, or larger for memory); with pairs: the paired "
        "estimate, exp(median of the pairs' log(new / base)), the median pair's ratio"
    ))] = None
    ratio_ci_low: Annotated[float | None, Meta(description=(
        "95% bootstrap CI of the ratio; with pairs: the distribution-free CI of the median pair's "
        "ratio (order statistics; with fewer than 6 pairs the widest, [min, max], which covers less)"
    ))] = None
    ratio_ci_high: float | None = None
    p_value: Annotated[float | None, Meta(description=(
        "Two-sided Mann-Whitney U (exact with ties and small samples); with pairs: the two-sided "
        "Wilcoxon signed-rank test of the pairs' log ratios (exact with ties and zeros); null without a test"
    ))] = None
    pairs: Annotated[int | None, Meta(description=(
        "Judged pair by pair (jaxrun ab): the pairs used; null: two independent samples (compare)"
    ))] = None
    verdict: Annotated[Verdict, Meta(description=(
        "slower / faster need p < alpha and a ratio beyond 1 +- min_effect; too few runs to "
        "judge when the sample sizes cannot give p < alpha whatever the data (3 vs 3: p >= 0.1; the note "
        "says how many runs each side needs); not comparable without at least 2 samples per side"
    ))]
    note: str | None = None
    detectable: Annotated[float | None, Meta(description=(
        "jaxrun ab: the smallest relative change these pairs could have found (4 times in 5, at alpha, given the "
        "spread of their log ratios), never below min_effect: a 'no significant change' rules out changes this "
        "large, not smaller ones; null when no test can reach alpha with these pairs"
    ))] = None


ProgramChange = Literal["same program", "the program changed", "XLA's output changed (same input: compiler or flags)"]


class ProgramComparison(MappingModel):
    """One program (``jit(loss)``) in both runs of a script: its compile time, and whether it is
    the same program (jaxrun.judge.cache_misses.program_change)."""

    program: str
    base_compile_time: Annotated[float, Meta(description=(
        "Seconds of XLA compilation in BASE (cache loads not included)"
    ))]
    new_compile_time: Annotated[float, Meta(description="Seconds of XLA compilation in NEW")]
    base_count: Annotated[int, Meta(description="Compilations in BASE")]
    new_count: Annotated[int, Meta(description="Compilations in NEW")]
    base_cache_loads: Annotated[int, Meta(description=(
        "Executables of it BASE loaded from the persistent compilation cache "
        "(not compilations: base_compile_time does not count them)"
    ))] = 0
    new_cache_loads: Annotated[int, Meta(description=(
        "Executables of it NEW loaded from the persistent compilation cache"
    ))] = 0
    base_cache_load_time: Annotated[float | None, Meta(description=(
        "Seconds BASE spent loading them; null: unknown (the history keeps no load time)"
    ))] = None
    new_cache_load_time: Annotated[float | None, Meta(description="Seconds NEW spent loading them")] = None
    moved: Annotated[bool, Meta(description="Its compile time moved by more than 20% and 10 ms")]
    change: Annotated[ProgramChange | None, Meta(description=(
        "same program (same fingerprints); the program changed (the StableHLO JAX handed XLA "
        "differs); XLA's output changed (same input, another optimized program: the compiler or its flags); "
        "null: unknown, a side lacks a fingerprint"
    ))] = None
    reason: Annotated[str | None, Meta(description="Why change is null")] = None
    # jaxrun ab: each figure the median over the pairs' runs, and the phases apart.
    base_trace_time: Annotated[float | None, Meta(description=(
        "jaxrun ab: seconds of tracing in BASE (median)"
    ))] = None
    new_trace_time: float | None = None
    base_lower_time: Annotated[float | None, Meta(description=(
        "jaxrun ab: seconds of lowering in BASE (median)"
    ))] = None
    new_lower_time: float | None = None
    compile_ratio: Annotated[float | None, Meta(description=(
        "jaxrun ab: new / base compile time (null: base is 0)"
    ))] = None


class ScriptComparison(MappingModel):
    """One script: every phase judged on its own, and the verdict of the phases in its gate."""

    script_name: str
    path: Annotated[str | None, Meta(description=(
        "The script as the NEW run's summary names it: its path relative "
        "to the folder searched, with '/' (' @device' when it ran on several); null: unknown"
    ))] = None
    device: str | None
    verdict: Annotated[Verdict, Meta(description=(
        "Over the gate's phases: slower if one is slower, else faster if one is faster, "
        "else not comparable when no gate phase could be tested, else too few runs to judge when a "
        "gate phase had too few samples for the test to be significant, else no significant change"
    ))]
    gate: Annotated[list[str], Meta(description=(
        "The phases that decide the verdict: the chosen metric, or run_time and "
        "compile_time (the code's own phases), or wall_time when neither was measured on both sides"
    ))]
    slower: Annotated[list[str], Meta(description="Phases judged slower (larger), gate or not")] = []
    faster: Annotated[list[str], Meta(description="Phases judged faster (smaller), gate or not")] = []
    phases: Annotated[dict[str, PhaseComparison], Meta(description=(
        "Per metric: wall, import, compile, run, memory"
    ))] = {}
    p_adjusted: Annotated[float | None, Meta(description=(
        "The p-value that decided the verdict (the smallest of a changed gate phase's, else of the gate's); with "
        "several scripts judged at once, times the gate phases tested and corrected over the scripts (the "
        "comparison's correction); null: no gate phase was tested"
    ))] = None
    programs: Annotated[list[ProgramComparison], Meta(description=(
        "The programs in both runs whose compile time moved (by more than 20% and 10 ms), every "
        "program in both when the script's verdict or its run time's is a change; empty when neither run kept "
        "per-program figures (a benchmark file alone)"
    ))] = []
    note: str | None = None

    @classmethod
    def _older(cls, data: dict[str, Any]) -> dict[str, Any]:
        # Files written before per-phase verdicts judged one metric, flat in the script's entry.
        if "metric" in data and "phases" not in data:
            data = dict(data)
            metric = METRIC_ALIASES.get(data["metric"], data["metric"])
            phase = {k: data.pop(k) for k in list(data) if k in PhaseComparison.__struct_fields__}
            phase["metric"] = metric
            data["phases"] = {metric: phase}
            data["gate"] = [metric]
            data["verdict"] = phase.get("verdict", "not comparable")
            if data["verdict"] in ("slower", "faster"):
                data[data["verdict"]] = [metric]
        return data

    def phase(self, metric: str) -> PhaseComparison | None:
        """The judgement of one metric (an old name such as ``steady_time`` works too)."""
        return self.phases.get(METRIC_ALIASES.get(metric, metric))


class ABSide(MappingModel):
    """One side of a ``jaxrun ab`` comparison: where its scripts were and what ran them."""

    label: str
    given: Annotated[str, Meta(description="What was named: a folder, a revision, an interpreter")]
    root: Annotated[str, Meta(description=(
        "The folder its scripts ran from (a revision's temporary worktree, removed since)"
    ))]
    commit: Annotated[str | None, Meta(description=(
        "The revision checked out (its full hash); null: a folder as it is"
    ))] = None
    python: Annotated[str | None, Meta(description="The interpreter (null: jaxrun's own)")] = None
    jax_version: Annotated[str | None, Meta(description=(
        "As the scripts' processes imported it (null: no script used JAX)"
    ))] = None
    jaxlib_version: str | None = None


class DuetHalf(MappingModel):
    """One half of the machine in a ``jaxrun ab --duet`` comparison."""

    cpus: Annotated[list[int], Meta(description="The CPU cores a run on this half was pinned to")]
    gpus: Annotated[list[int], Meta(description="The GPU it was given (empty: runs on the CPU)")] = []


class ComparisonReport(MappingModel):
    schema_version: int = SCHEMA_VERSION
    base: str
    new: str
    paired: Annotated[bool, Meta(description=(
        "jaxrun ab: the two sides ran in alternating pairs and each phase was "
        "judged on the per-pair ratios (jaxrun compare: two independent samples)"
    ))] = False
    pairs: Annotated[int | None, Meta(description="jaxrun ab: the counted pairs asked for per script")] = None
    warmup_pairs: int | None = None
    sides: Annotated[dict[str, ABSide], Meta(description="jaxrun ab: BASE and NEW")] = {}
    duet: Annotated[list[DuetHalf] | None, Meta(description=(
        "jaxrun ab --duet: the two of each pair ran at the same time, each on its half of the "
        "machine (BASE on the first half in even pairs, warm-ups counted, on the second in odd ones); an absolute "
        "time is a half machine's, only the ratios are meant. Null: the two ran one after the other"
    ))] = None
    alternating_reason: Annotated[str | None, Meta(description=(
        "Why the pairs alternated where a duet was the default (this machine could not be split "
        "fairly: one CPU, one GPU); null when they ran as a duet or --alternate asked for alternation"
    ))] = None
    metrics: Annotated[list[str], Meta(description="The phases judged for every script")]
    gate: Annotated[list[str], Meta(description=(
        "The phases that decide regressions (per script, see scripts[].gate)"
    ))]
    alpha: float
    min_effect: float
    correction: Annotated[str, Meta(description=(
        "How the scripts' p-values were corrected for comparing them at once: holm (Holm-Bonferroni: the chance "
        "of any false alarm stays below alpha), bh (Benjamini-Hochberg: the expected share of false alarms among "
        "them does), none"))] = "none"
    scripts: list[ScriptComparison] = []
    only_in_base: Annotated[list[str], Meta(description=(
        "Scripts of BASE only, as its summary names them (path relative to the folder searched; the "
        "<name> when the file does not say where a script was)"
    ))] = []
    only_in_new: Annotated[list[str], Meta(description="Scripts of NEW only, named the same way")] = []
    geometric_mean_ratio: Annotated[dict[str, float | None], Meta(description=(
        "Per phase: geometric mean of the scripts' ratios (NEW/BASE)"
    ))] = {}
    regressions: Annotated[list[str], Meta(description="Scripts whose verdict is slower")] = []
    improvements: Annotated[list[str], Meta(description="Scripts whose verdict is faster")] = []
    numerics_mismatch: Annotated[list[str], Meta(description=(
        "Scripts whose two sides started with other numerics: not judged unless allow_mismatch"
    ))] = []
    machine_mismatch: Annotated[list[str], Meta(description=(
        "What differs between the machines BASE and NEW ran on (\"cpu_model: 'x' vs 'y'\", NEW's first): "
        "compared only with allow_mismatch; empty when the same machine or unknown"
    ))] = []
    allow_mismatch: Annotated[bool, Meta(description=(
        "Scripts with other numerics were judged anyway (--allow-mismatch)"
    ))] = False
    fail_on_regression: Annotated[bool, Meta(description=(
        "The command was given --fail-on-regression: it exits 1 when a script is slower (or, "
        "unless allow_mismatch, could not be judged for other numerics); what the report of its folder says too"
    ))] = False

    def shown(self, names: list[str]) -> list[str]:
        """``regressions``' (or another list's) entries as the summary names the scripts: their paths."""
        paths = {c.script_name: c.path for c in self.scripts if c.path}
        return [paths.get(name, name) for name in names]


class HistoryRun(MappingModel):
    """One benchmarked run of one script, as stored in the history database."""

    id: int | None = None
    recorded_at: str
    script_name: str
    script_path: str
    content_hash: str
    git_commit: str | None = None
    git_dirty: bool | None = None
    host: str
    device_requested: str
    device_used: str | None
    jax_version: str | None = None
    jaxlib_version: str | None = None
    jaxrun_version: str
    samples: list[RunSample] = []
    median_wall_time: float | None = None
    mode: Annotated[str, Meta(description='"process", or "warm:<entry>x<calls>" for warm mode')] = "process"
    numerics: Annotated[Numerics | None, Meta(description="The numerics the run started with (null: unknown)")] = None
    git_commit_time: Annotated[str | None, Meta(description="When git_commit was committed (ISO); null: unknown")] = None
    machine: Annotated[Machine | None, Meta(description=(
        "The machine it was measured on (results/machine.py); null: recorded before jaxrun kept it"))] = None
    machine_id: Annotated[str | None, Meta(description="The machine's fingerprint (12 hex digits); null: unknown")] = None
    run_key: Annotated[str | None, Meta(description=(
        "The run's own key (32 hex digits, given when it was measured): a history keeps a run once under it, "
        "whoever writes it again (--resume, an import)"))] = None


JUDGED_VERDICTS = ("slower", "faster", "no significant change")


class RunMark(MappingModel):
    """A run of a series over commits, as a change point names it."""

    run_id: int
    recorded_at: str
    git_commit: str | None = None
    git_dirty: bool | None = None


CheckVerdict = Literal["confirmed", "refuted", "undecided"]


class ChangeCheck(MappingModel):
    """A change point re-run as a duet of its two commits (``jaxrun history --changes --confirm``,
    ab/confirm.py): the script at the last commit before (BASE) against the first after (NEW), in
    pairs, judged on the change's metric."""

    script_path: str
    metric: str
    before_commit: Annotated[str, Meta(description="The commit of the last run before the change (BASE)")]
    after_commit: Annotated[str, Meta(description="The commit of the first run after it (NEW)")]
    verdict: Annotated[CheckVerdict, Meta(description=(
        "confirmed: the pairs show a change the same way, at p < alpha and at least the smallest effect; "
        "refuted: they do not (kept: a refuted change never alarms again); undecided: no judgement (see reason)"))]
    reason: Annotated[str | None, Meta(description="Why it is undecided, or what the pairs showed instead")] = None
    ratio: Annotated[float | None, Meta(description="The paired estimate of after / before (the median pair's ratio)")] = None
    ratio_ci_low: Annotated[float | None, Meta(description="Its 95% CI, low end (order statistics of the pairs)")] = None
    ratio_ci_high: Annotated[float | None, Meta(description="Its 95% CI, high end")] = None
    p_value: Annotated[float | None, Meta(description="Wilcoxon signed-rank test of the pairs' log ratios")] = None
    alpha: float | None = None
    min_effect: Annotated[float | None, Meta(description=(
        "The smallest change that counted: the verdict options' minimum effect, or half the change point's "
        "size where that is smaller"))] = None
    pairs: Annotated[int, Meta(description="Counted pairs")] = 0
    duet: Annotated[bool | None, Meta(description="Both runs of a pair at once on halves of the machine (false: alternating)")] = None
    checked_at: str | None = None
    results_dir: Annotated[str | None, Meta(description="Where the pairs' runs are (ab_comparison.json, base/, new/)")] = None
    first_slower: Annotated[str | None, Meta(description=(
        "--bisect: the first commit between the two judged slower than the commit before the change"))] = None
    first_slower_subject: str | None = None
    bisect_note: Annotated[str | None, Meta(description="--bisect: why it named no commit, or did not run")] = None


class SeriesChange(MappingModel):
    """Where a script's series of runs in the history changed level (judge/history_changes.py):
    one metric's median a run, runs of one script, device, host, mode and numerics, in the order
    they were recorded."""

    script_path: str
    script_name: str
    metric: str
    device: str | None
    host: str
    machine_id: Annotated[str | None, Meta(description="The fingerprint of the machine the series ran on (null: runs recorded before jaxrun kept it, a series per host)")]
    mode: str
    last_before: Annotated[RunMark, Meta(description="The last run before the change")]
    first_after: Annotated[RunMark, Meta(description="The first run at the new level")]
    before: Annotated[float, Meta(description="The mean of the runs' medians from the change before (s)")]
    after: Annotated[float, Meta(description="The mean of the runs' medians to the change after (s)")]
    change: Annotated[float | None, Meta(description="after / before - 1 (null: before is 0)")]
    change_low: Annotated[float | None, Meta(description="The change's confidence interval, low end (Welch's)")]
    change_high: Annotated[float | None, Meta(description="The change's confidence interval, high end")]
    confidence: float
    p_value: Annotated[float, Meta(description=(
        "Student's t-test of the runs before against the runs after, times the places the change "
        "was chosen among (Bonferroni)"))]
    runs_before: int
    runs_after: int
    runs_since: Annotated[int, Meta(description="Runs of the series from the first after to the newest")]
    candidate: Annotated[bool, Meta(description=(
        "Found only at the lower bar (p below 0.05, not 0.001): too small for the series' noise to prove, "
        "for --confirm to decide; it alarms only once confirmed"))] = False
    check: Annotated[ChangeCheck | None, Meta(description=(
        "Its confirmation by a duet of its two commits (--confirm), the newest kept in the history; null: not checked"))] = None


class SeriesSummary(MappingModel):
    """One series of the history (``jaxrun history --changes``): what its noise lets the change
    points see."""

    script_path: str
    script_name: str
    metric: str
    device: str | None
    host: str
    machine_id: str | None
    mode: str
    runs: Annotated[int, Meta(description="Runs of the series with the metric (one point each: their median)")]
    noise: Annotated[float | None, Meta(description=(
        "The points' spread around their level relative to its median (a standard deviation from successive "
        "differences: a step does not count); null below 3 runs"))]
    smallest_step: Annotated[float | None, Meta(description=(
        "The smallest relative step the change points find about 4 times in 5 with this many runs at this noise "
        "(a step in the middle of the series); null with too few runs. Smaller ones show as candidates at best"))]
    changes: int = 0
    candidates: int = 0


class RegressionCheck(MappingModel):
    """The newest run of a script judged against its earlier comparable runs in the history."""

    script_path: str
    device: str | None
    host: str
    gate: Annotated[list[str], Meta(description="The phases that decide the regression")]
    newest_run_id: Annotated[int | None, Meta(description=(
        "The run judged; null when it could not be recorded (history unreadable)"
    ))]
    previous_runs: Annotated[int, Meta(description=(
        "Earlier comparable runs (same numerics) found: the baseline when judged"
    ))]
    min_previous_runs: Annotated[int, Meta(description=(
        "Earlier comparable runs of the same numerics a judgement needs (jaxrun.core.defaults.MIN_HISTORY_RUNS)"
    ))] = MIN_HISTORY_RUNS
    other_numerics: Annotated[int, Meta(description="Earlier runs left out of the baseline for other numerics")] = 0
    other_machines: Annotated[int, Meta(description=(
        "Earlier runs left out of the baseline as measured on another machine (another fingerprint)"))] = 0
    judged: Annotated[bool, Meta(description=(
        "Whether the run was judged: false with fewer than min_previous_runs earlier runs (no "
        "comparison then), or when the comparison reached no verdict (too few runs to judge, not comparable); "
        "regression is then false, and reason says why"
    ))] = True
    reason: Annotated[str | None, Meta(description=(
        "Why the run was not judged, e.g. 'not judged: 1 earlier run, needs 3'; null when judged"
    ))] = None
    note: str | None = None
    comparison: ScriptComparison | None = None
    regression: bool

    @classmethod
    def _older(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "metric" in data and "gate" not in data:  # an older file
            data = {k: v for k, v in data.items() if k != "metric"} | {"gate": [data["metric"]]}
        if "judged" not in data:  # written before judged existed
            comparison = data.get("comparison")
            verdict = comparison.get("verdict") if isinstance(comparison, dict) else getattr(comparison, "verdict", None)
            data = {**data, "judged": verdict in JUDGED_VERDICTS}
        return data
