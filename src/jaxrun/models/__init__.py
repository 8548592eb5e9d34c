"""The data model: every result jaxrun returns or writes is one of these pydantic models.

Field names follow the seed documents and are fixed (docs/ARCHITECTURE.md, "Results folder"), so
tools and tests can rely on them.
Unknown numbers are ``None`` (serialized as JSON ``null``), never 0. Serialization to files lives
in :mod:`jaxrun.resultfiles`; this package only describes the shapes, one module per subject.
"""

from __future__ import annotations

from .base import ERROR_CLASSES, SCHEMA_VERSION, ErrorClass, MappingModel
from .benchmarks import (
    METRIC_ALIASES,
    RESULT_FIELDS,
    SAMPLE_METRICS,
    BenchmarkingSection,
    BenchmarkResults,
    DeviceSpeedup,
    RunSample,
    ScriptBenchmark,
    Statistics,
    WarmCall,
    WarmSummary,
)
from .comparisons import (
    ABSide,
    ComparisonReport,
    HistoryRun,
    PhaseComparison,
    ProgramComparison,
    RegressionCheck,
    ScriptComparison,
    Verdict,
)
from .devices import AvailableDevice, DeviceEntry, DeviceInfo, NvmlInfo, PlatformInfo
from .profiles import (
    MemoryProfile,
    ScriptMemoryProfile,
    ScriptProfile,
    ScriptTimingProfile,
    TimelineEvent,
    TimingProfile,
)
from .results import (
    MAX_RECOMPILE_REASONS, Attempt, CellTiming, CompileEnvironment, CompileStats, Numerics, Outcome, ProcessResult,
    ProgramCost, ProgramMemory, RunEnvironment, ScriptResult, TransferStats, Transfers,
)

# Models that name models of other modules (imported under TYPE_CHECKING there, to avoid import
# cycles) find them in their own module once it is loaded: pydantic builds every model on first
# use (defer_build, models/base.py) and resolves such names from the model's module then.
from . import benchmarks as _benchmarks, results as _results  # noqa: E402

_results.ScriptBenchmark, _results.WarmSummary, _results.ScriptProfile = ScriptBenchmark, WarmSummary, ScriptProfile
_benchmarks.RegressionCheck, _benchmarks.Numerics = RegressionCheck, Numerics

from .batch import BatchMetadata, BatchResult, PerformanceMetrics, PerformanceSummary, ScriptMetrics, SkippedScript  # noqa: E402

__all__ = [
    "ABSide", "ERROR_CLASSES", "MAX_RECOMPILE_REASONS", "METRIC_ALIASES", "RESULT_FIELDS", "SAMPLE_METRICS", "SCHEMA_VERSION",
    "Attempt", "AvailableDevice", "ProcessResult", "CellTiming", "BatchMetadata", "BatchResult", "BenchmarkResults", "BenchmarkingSection", "CompileEnvironment",
    "CompileStats",    "ComparisonReport", "DeviceEntry", "DeviceInfo", "DeviceSpeedup", "ErrorClass", "HistoryRun",
    "MappingModel", "MemoryProfile", "Numerics", "NvmlInfo", "Outcome", "PerformanceMetrics", "PerformanceSummary", "PhaseComparison",
    "PlatformInfo", "ProgramComparison", "ProgramCost", "ProgramMemory", "RegressionCheck", "RunEnvironment", "RunSample", "ScriptBenchmark",
    "ScriptComparison", "ScriptMetrics", "TransferStats", "Transfers",
    "ScriptMemoryProfile", "ScriptProfile", "ScriptResult", "SkippedScript", "ScriptTimingProfile", "Statistics",
    "TimelineEvent", "TimingProfile", "Verdict", "WarmCall", "WarmSummary",
]
