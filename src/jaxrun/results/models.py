"""The data model: every result jaxrun returns or writes is one of these models
(msgspec structs: results/base_model.py).

Field names follow the executor API and are fixed (docs/ARCHITECTURE.md, "Results folder"), so
tools and tests can rely on them.
Unknown numbers are ``None`` (serialized as JSON ``null``), never 0. Serialization to files lives
in :mod:`jaxrun.results.result_files`; these modules only describe the shapes, one per subject.
"""

from __future__ import annotations

from jaxrun.results.base_model import (
    ERROR_CLASSES,
    SCHEMA_VERSION,
    ErrorClass,
    MappingModel,
)
from jaxrun.results.batch_result import (
    BatchMetadata,
    BatchResult,
    PerformanceMetrics,
    PerformanceSummary,
    ScriptMetrics,
    SkippedScript,
)
from jaxrun.results.benchmark_result import (
    METRIC_ALIASES,
    RESULT_FIELDS,
    SAMPLE_METRICS,
    BenchmarkingSection,
    BenchmarkResults,
    DeviceSpeedup,
    ScriptBenchmark,
)
from jaxrun.results.comparisons import (
    ABSide,
    ChangeCheck,
    ComparisonReport,
    DuetHalf,
    HistoryRun,
    PhaseComparison,
    ProgramComparison,
    RegressionCheck,
    RunMark,
    ScriptComparison,
    SeriesChange,
    SeriesSummary,
    Verdict,
)
from jaxrun.results.device_info import (
    AvailableDevice,
    DeviceEntry,
    DeviceInfo,
    NvmlInfo,
    PlatformInfo,
)
from jaxrun.results.numerics import Numerics
from jaxrun.results.profile_result import (
    MemoryProfile,
    ScriptMemoryProfile,
    ScriptProfile,
    ScriptTimingProfile,
    TimelineEvent,
    TimingProfile,
)
from jaxrun.results.run_samples import RunSample, Statistics, WarmCall, WarmSummary
from jaxrun.results.script_result import (
    MAX_RECOMPILE_REASONS,
    Attempt,
    CellTiming,
    CompileEnvironment,
    CompileStats,
    Outcome,
    ProcessResult,
    ProgramCost,
    ProgramMemory,
    RunEnvironment,
    ScriptResult,
    Transfers,
    TransferStats,
)

__all__ = [
    "ABSide", "ERROR_CLASSES", "MAX_RECOMPILE_REASONS", "METRIC_ALIASES", "RESULT_FIELDS", "SAMPLE_METRICS", "SCHEMA_VERSION",
    "Attempt", "AvailableDevice", "ProcessResult", "CellTiming", "BatchMetadata", "BatchResult", "BenchmarkResults", "BenchmarkingSection", "CompileEnvironment",
    "CompileStats",    "ComparisonReport", "DeviceEntry", "DeviceInfo", "DeviceSpeedup", "DuetHalf", "ErrorClass", "HistoryRun",
    "MappingModel", "MemoryProfile", "Numerics", "NvmlInfo", "Outcome", "PerformanceMetrics", "PerformanceSummary", "PhaseComparison",
    "PlatformInfo", "ProgramComparison", "ProgramCost", "ProgramMemory", "RegressionCheck", "RunMark", "SeriesChange", "SeriesSummary", "ChangeCheck", "RunEnvironment", "RunSample", "ScriptBenchmark",
    "ScriptComparison", "ScriptMetrics", "TransferStats", "Transfers",
    "ScriptMemoryProfile", "ScriptProfile", "ScriptResult", "SkippedScript", "ScriptTimingProfile", "Statistics",
    "TimelineEvent", "TimingProfile", "Verdict", "WarmCall", "WarmSummary",
]
