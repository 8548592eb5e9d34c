"""The options of a run, validated once: :class:`RunOptions` shapes one script's run (it travels
to the runner, the Ray worker and, as environment and probe flags, to the child);
:class:`BatchOptions` shapes a batch (what to run, where, how many at once, where results go).

Both are immutable and picklable (:class:`~jaxrun.config.option_spec.OptionSet`: plain Python, no
validation library on the way to the first script). Each option is declared once, on its field
(:func:`jaxrun.config.option_spec.option`: default, help, flag); the CLI's flags, the API's keywords,
the MCP tools' schemas and the config-file keys are made from it. Every option has one name from
the CLI flag to the child, and each value remembers where it came from (``source_of``): its default, the CLI, the
Python API (the config file and environment join later). Bad values raise :class:`UsageError`
with a message that names the option and says what is valid. docs/ARCHITECTURE.md says how to
add an option.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Optional, Tuple, TypeVar, Union

import msgspec

from jaxrun.config.option_spec import Flag, OptionSet, checks, option, part
from jaxrun.config.sweeps import parse_point, parse_sweep, points
from jaxrun.core.aliases import resolve_option_aliases
from jaxrun.core.defaults import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    DEFAULT_RAY_CONNECT_TIMEOUT,
    DEFAULT_RESULTS_DIR,
    DEFAULT_SLURM_TIMEOUT,
    DEFAULT_TIMEOUT,
)
from jaxrun.core.formatting import shorten_middle
from jaxrun.core.paths import compile_cache_dir, history_path
from jaxrun.core.validate import (
    DEVICE_FORMS,
    MAX_RUNS,
    NO_TIMEOUT,
    SIZE_UNITS_HELP,
    parse_effect,
    parse_size,
    shown_value,
    validate_device,
    validate_matmul_precision,
    validate_memory_limit,
    validate_non_negative,
    validate_optional_positive,
    validate_runs,
    validate_timeout,
)
from jaxrun.discover.compile_cache import DEFAULT_COMPILE_CACHE_MAX_SIZE
from jaxrun.errors import UsageError, closest
from jaxrun.results.figures import DEFAULT_GATE, metrics_text

# Where a value came from, lowest precedence first: see jaxrun.config.settings for the layering.
Source = Literal["default", "config", "script", "env", "api", "cli"]
O = TypeVar("O", bound="_Options")

DEFAULT_WARM_CALLS = 10


class _Options(OptionSet):
    # Beside the values: where each came from (its source, see jaxrun.config.settings for the layering)
    # and where exactly it was set ("pyproject.toml:12", "JAXRUN_TIMEOUT", "--timeout", ...).

    @classmethod
    def build(
        cls: type[O], source: Source = "api", /, sources: Mapping[str, Source] | None = None,
        origins: Mapping[str, str] | None = None, **given: Any,
    ) -> O:
        """Validate ``given`` (option name -> value) into options. Each given value is recorded
        as coming from ``source``, unless ``sources`` names another source for it (``origins``:
        where exactly). The executor API's names (``timeout_seconds``, ``profile``, ...:
        :mod:`jaxrun.core.aliases`) work too."""
        given = resolve_option_aliases(given, {n: f.default for n, f in cls.fields.items()})
        unknown = sorted(set(given) - set(cls.fields))
        if unknown:
            raise unknown_option(unknown[0], cls.fields)
        options = cls.__new__(cls)
        options._fill(given)
        # Noted before the checks between options, so that their messages name each option as it was given.
        options._note({name: (sources or {}).get(name, source) for name in given},
                      {name: where for name, where in (origins or {}).items() if name in given})
        options._consistent()
        return options

    def _note(self, sources: dict[str, str], origins: dict[str, str]) -> None:
        self.__dict__["_sources"], self.__dict__["_origins"] = sources, origins

    @property
    def _sources(self) -> dict[str, str]:  # type: ignore[override]
        return self.__dict__.get("_sources", {})

    @property
    def _origins(self) -> dict[str, str]:  # type: ignore[override]
        return self.__dict__.get("_origins", {})

    @classmethod
    def check_value(cls, name: str, value: Any) -> None:
        """Raise :class:`UsageError` if ``value`` is not valid for option ``name`` on its own
        (checks between options wait for the whole set)."""
        if name not in cls.fields:
            raise unknown_option(name, cls.fields)
        cls._check_field(name, value)

    def source_of(self, name: str) -> Source:
        """Where the value of option ``name`` came from ("default" when nobody set it)."""
        if name not in type(self).fields:
            raise UsageError(f"unknown option {name!r}: valid options are {', '.join(type(self).fields)}")
        return self._sources.get(name, "default")  # type: ignore[return-value]

    def origin_of(self, name: str) -> str | None:
        """Where exactly option ``name`` was set (a file and line, a variable, a flag), if known."""
        return self._origins.get(name)

    def given(self, name: str) -> bool:
        """Whether option ``name`` was given on the command line, in the environment or through
        the API: then it wins over per-script settings (jaxrun.config.settings)."""
        return self.source_of(name) in ("env", "api", "cli")

    @property
    def sources(self) -> dict[str, Source]:
        given = self._sources  # what source_of reads, without its check of each name (every result)
        return {name: given.get(name, "default") for name in type(self).fields}  # type: ignore[misc]

    def evolve(self: O, **changes: Any) -> O:
        """A copy with ``changes`` (jaxrun's own decisions, such as the device after a fallback),
        keeping every other value's source."""
        copy = self._replaced(changes, check=False)
        copy._note(dict(self._sources), dict(self._origins))
        return copy

    def overlay(self: O, values: Mapping[str, Any], source: Source, origins: Mapping[str, str]) -> O:
        """A copy where ``values`` replace what only a default or the config file set: a value
        given on the command line, in the environment or through the API wins over them
        (per-script settings sit between the config file and the environment)."""
        taken = {k: v for k, v in values.items() if not self.given(k)}
        if "env" in values and "env" not in taken and values["env"]:
            # Variables merge one by one: a stronger layer's --env KEY=... wins for its keys only.
            taken["env"] = {**dict(values["env"]), **(getattr(self, "env") or {})}
        elif "env" in taken and getattr(self, "env"):
            taken["env"] = {**getattr(self, "env"), **dict(values["env"] or {})}
        if not taken:
            return self
        copy = self._replaced(taken, check=True)
        copy._note({**self._sources, **{k: source for k in taken}},
                   {**self._origins, **{k: origins[k] for k in taken if k in origins}})
        copy._consistent()
        return copy

    def named(self, name: str, medium: Source | None = None) -> str:
        """Option ``name`` as its user gave it, for a message that names each option once: the
        flag (``--host-devices``), the variable (``JAXRUN_HOST_DEVICES``), the key and where it is
        written (``host_devices (jaxrun.toml:3)``), the keyword (``host_devices``). An option
        nobody set is named as ``medium`` (the source of the option it clashes with: see
        :meth:`medium`) would set it."""
        return self._spelled(name, None, medium)

    def said(self, name: str, value: Any, medium: Source | None = None) -> str:
        """Option ``name`` with ``value``, as :meth:`named` names it: ``--host-devices 4``,
        ``JAXRUN_HOST_DEVICES=4``, ``host_devices = 4 (jaxrun.toml:3)``, ``host_devices=4``. A
        value other than the one given (one to set instead) is written as ``medium`` takes it."""
        return self._spelled(name, (value,), medium)

    def medium(self, *names: str) -> Source:
        """Where the first of ``names`` that someone set came from: the way to name the others."""
        return next((s for s in map(self.source_of, names) if s != "default"), "api")

    def _spelled(self, name: str, value: tuple[Any, ...] | None, medium: Source | None) -> str:
        from jaxrun.config.option_spec import env_name, flag_name

        field = (RunOptions.fields | BatchOptions.fields)[name]
        own = self.source_of(name)
        held = self.__dict__[name] if name in type(self).fields else getattr(self, "run").__dict__[name]
        # The value given (or a part of it: one of several devices), or another one to set instead.
        given = own != "default" and (value is None or value[0] == held
                                      or isinstance(held, tuple) and value[0] in held)
        source = own if given else medium or own
        if source == "default":
            source = "api"
        origin = self.origin_of(name) if given else None
        shown = "" if value is None else value[0]
        if source == "cli" and flag_name(field):
            flag = origin if origin and origin.startswith("-") else flag_name(field)
            switch = value is None or field.flag.sets is not None or isinstance(shown, bool)  # type: ignore[union-attr]
            return flag if switch else f"{flag} {_text(shown)}"  # type: ignore[return-value]
        if source == "env":
            return env_name(name) if value is None else f"{env_name(name)}={_text(shown)}"
        if source in ("config", "script"):
            import json

            written = name if value is None else f"{name} = {json.dumps(_plain(shown), default=str)}"
            return f"{written} ({origin})" if origin else written
        return name if value is None else f"{name}={shown!r}"


def _text(value: Any) -> str:
    """A value as a flag or a variable takes it: a list comma-separated."""
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else os.fspath(value) if isinstance(value, os.PathLike) else value


def unknown_option(name: str, names: Iterable[str]) -> UsageError:
    """``unknown option 'timout': did you mean 'timeout'?``, or the valid names when none is close
    (as the config file's unknown keys say it)."""
    valid = [n for n in names if n not in ("run", "rules", "config_file")]
    return UsageError(f"unknown option {name!r}: {closest(name, valid, 'options')}")


class RunOptions(_Options):
    """What shapes one script's run. Passed whole from the batch to the runner and the Ray worker."""

    # The batch's --device gives each job its device (BatchOptions.device): no flag of its own.
    device: str = option("auto", "auto, cpu, gpu or tpu, or one device of a platform: gpu:1, cpu:0, tpu:0.", flag=None)
    timeout: Optional[float] = option(DEFAULT_TIMEOUT, f"Seconds per script before it is stopped ({NO_TIMEOUT}: no limit).",
                                      Flag(metavar="SECONDS", text=True), words={NO_TIMEOUT: None})
    retries: int = option(0, "Retries of transient failures (missing device, accelerator OOM).", Flag(metavar="N"))
    fallback: bool = option(True, "Re-run a script that failed on an accelerator on CPU.",
                            Flag(names=("--no-fallback",), sets=False, help="Do not re-run failed accelerator scripts on CPU."))
    debug_nans: bool = option(False, "Run with jax_debug_nans: a NaN is an error.")
    debug_infs: bool = option(False, "Run with jax_debug_infs: an Inf is an error.")
    check_tracer_leaks: bool = option(False, "Run with jax_check_tracer_leaks: a tracer kept past its "
                                      "transformation (appended to a global list, say) is an error.")
    xla_analysis: bool = option(
        True, "Read XLA's cost and memory analysis and the fingerprints of every program a script compiles.",
        Flag(names=("--no-xla-analysis",), sets=False,
             help="Do not read XLA's analyses of each program (they cost ~1 ms a compilation)."))
    env: Optional[dict[str, str]] = option(None, "Variables set in each script's environment.",
                                           Flag(metavar="KEY=VALUE", help="KEY=VALUE set in each script's environment (repeatable)."))
    # The script's sys.argv[1:]: on the command line, what follows `--`.
    args: Optional[Tuple[str, ...]] = option(None, "The script's command-line arguments (sys.argv[1:]).", flag=None)
    # A parameter sweep (config/sweeps.py): each script runs once per point, as a job of its own;
    # the plan turns it into each job's ``params``.
    sweep: Optional[Tuple[Any, ...]] = option(
        None, "Run each script once per point of a parameter sweep: NAME=V1,V2,... per parameter, the cartesian "
        "product of all (a table in the config file: batch = [32, 64]; a list of tables: the points of each). Each "
        "point is a job named like train.py[batch=64,devices=2]; the script reads its values with jaxrun.params(), "
        "JAXRUN_PARAMS (JSON) or JAXRUN_PARAM_<NAME>, and {NAME} in its arguments and --env values is replaced. "
        "jaxrun applies devices (simulated CPU devices, or the first N GPUs), device, x64, matmul_precision, "
        "xla_flags and python itself.",
        Flag(names=("--param",), metavar="NAME=V1,V2", help="A parameter to sweep and its values, NAME=V1,V2,... "
             "(repeatable: the cartesian product of all; --zip pairs them instead). Each point is a job of its own, "
             "train.py[batch=64]; the script reads jaxrun.params(), JAXRUN_PARAM_<NAME> or {NAME} in its "
             "arguments. devices, device, x64, matmul_precision, xla_flags and python are applied by jaxrun."))
    sweep_zip: bool = option(False, "Pair the sweep's values one by one (the first of each, the second of each, ...) "
                             "instead of taking their cartesian product.", Flag(names=("--zip",)))
    # One point of a sweep: what the script's run passes it (probe/sweep_point.py).
    params: Optional[dict[str, Any]] = option(
        None, "The parameters of this run (one point of a sweep), passed to the script as JAXRUN_PARAMS and "
        "jaxrun.params().", flag=None)
    entry: Optional[str] = option(None, "Warm mode: the function called repeatedly in one process (like 'main').",
                                  Flag(names=("--warm",), sets="main", help="Call the script's main() repeatedly in one process."))
    warm_calls: int = option(DEFAULT_WARM_CALLS, "Calls of the entry function per process in warm mode.", Flag(metavar="N"))
    benchmark_runs: int = option(0, f"Counted process runs per script (0: run once; at most {MAX_RUNS:,}).",
                                 Flag(metavar="N"))
    warmup_runs: int = option(0, f"Uncounted process runs before the counted ones (at most {MAX_RUNS:,}).",
                              Flag(metavar="N"))
    host_devices: Optional[int] = option(None, "Simulated CPU devices per script (for sharding code).", Flag(metavar="N"))
    # The persistent compilation cache folder, resolved; None: no cache. Given as None/True (the
    # default folder), False (none) or a path.
    compile_cache: Optional[Path] = option(
        None, "Persistent compilation cache folder (false: none).",
        Flag(metavar="PATH", off="--no-compile-cache", off_help="Run without JAX's persistent compilation cache."),
        show_default="jaxrun's cache", words={"false": False})
    cold_cache: bool = option(False, "Each run (each benchmark run too) starts with an empty compilation cache.")
    # JAX's bound on the persistent compilation cache, in bytes: past it the least recently used
    # executables are deleted (jaxrun/discover/compile_cache.py). None: no bound. Given as a size ("4GiB").
    compile_cache_max_size: Optional[int] = option(
        DEFAULT_COMPILE_CACHE_MAX_SIZE, "Bound of the compilation cache, e.g. 1GiB (none: unbounded); JAX deletes "
        f"the least recently used executables past it. {SIZE_UNITS_HELP}.", Flag(metavar="SIZE", text=True),
        show_default="4GiB", words={"none": None, "unbounded": None})
    enable_profiling: bool = option(False, "Profile each script: jax.profiler trace, memory and timing profiles "
                                    "in jax_profiling/.", Flag(names=("--profile",)))
    verbose: bool = option(
        False, "Log (logger 'jaxrun', INFO) the batch's header, each failed attempt that is retried or moved to "
        "another device, and a performance line per script.",
        Flag(names=("--verbose", "-v"), help="Print jaxrun's log on stderr (the batch's header, each failed attempt "
             "that is retried or moved to another device, a performance line per script) with plain progress lines "
             "instead of the live view; after the summary, tables of every program XLA compiled (FLOPs, bytes, "
             "memory, fingerprint), of implicit transfers and live arrays, and of each notebook cell's seconds."))
    log_compiles: bool = option(False, "JAX logs every compilation (jax_log_compiles) to the script's stderr log.")
    memory_limit: Optional[int] = option(
        None, "Host memory per script, e.g. 4GiB or 512MiB (MiB, 2^20 bytes: memory_peak's unit): over it the script "
        f"is stopped (out_of_memory). {SIZE_UNITS_HELP}.", Flag(metavar="SIZE", text=True))
    max_processes: Optional[int] = option(
        None, "Processes each script's tree may hold at once (fork bombs): over it the script is stopped.", Flag(metavar="N"))
    randomize_setup: bool = option(
        False, "Pad each process run's environment by a random size (0-4 KiB, recorded as environment.setup_padding) "
        "so that a memory-layout bias of one environment size is averaged out over runs, not baked into them "
        "(jaxrun ab: on unless --same-setup). Such runs start a process of their own, never the spare.")
    # Multi-process scripts (run/process/process_group.py, run/reading/job_run.py): one job, N cooperating probes, one result.
    processes: int = option(1, "Run each script as N cooperating processes (jax.distributed.initialize() with no "
                            "arguments finds a coordinator on localhost); 1: one process.", Flag(metavar="N"))
    # Numerics (recorded in each result: runs with other numerics are not compared silently).
    x64: bool = option(False, "Run with jax_enable_x64 (64-bit floats and ints).")
    matmul_precision: Optional[str] = option(
        None, "jax_default_matmul_precision: default, high, highest, bfloat16, tensorfloat32, float32, or a dot "
        "algorithm like BF16_BF16_F32 (none: JAX's default).", Flag(metavar="PRECISION"), words={"none": None})
    disable_jit: bool = option(False, "Run with jax_disable_jit (op by op), to debug a failing script.")
    xla_flags: Optional[str] = option(None, "XLA flags added to XLA_FLAGS (a flag set both ways takes this value).",
                                      Flag(metavar="FLAGS"))
    # Another interpreter for the scripts (a second virtual environment, another jax/jaxlib):
    # its path as given, symbolic links kept (jaxrun/core/interpreters.py). None: jaxrun's own.
    python: Optional[str] = option(
        None, "Run the scripts under this Python interpreter (another environment's bin/python, with its own "
        "jax/jaxlib); its device facts and versions are recorded.", Flag(metavar="PATH"),
        show_default="jaxrun's own interpreter")
    # How each script's process starts (run/process/prestart.py); auto is resolved per run (plan_start).
    prestart: str = option(
        "auto", "How each script's process starts: none (a new interpreter each: exec), probe (forked from a "
        "prestarted interpreter that has imported jaxrun's probe), jax (forked from one that has also imported jax; "
        "a script whose JAX environment could differ is exec'd, saying why), or auto: probe for a local batch, none "
        "for benchmark runs, --warm, --profile, --processes N, --python, --randomize-setup, jaxrun ab and bisect, "
        "and remote backends. Each result's start_mode says what it was.",
        Flag(metavar="MODE"))
    isolate_env: bool = option(False, "Scripts get a minimal environment (PATH, HOME, locale, JAX_*, XLA_*, CUDA_*...) "
                               "instead of all of yours (run/process/environment.py says which).")
    xfail: Optional[str] = option(None, "Expected to fail, and why: the script's failure does not fail the batch "
                                  "(a per-script setting).", flag=None)
    # Notebooks (.ipynb programs; probe/notebook.py): the executed copy with each cell's outputs.
    save_notebooks: bool = option(False, "Write each notebook, executed, with its cells' outputs, to "
                                  "notebooks/<name>.ipynb in the results folder (the notebook itself is never changed).")

    @checks("sweep")
    def _sweep(value: Any, name: str) -> tuple[Any, ...] | None:
        return parse_sweep(value)

    @checks("params")
    def _params(value: Any, name: str) -> dict[str, Any] | None:
        return parse_point(value)

    @checks("prestart")
    def _prestart(value: Any, name: str) -> str:
        modes = ("auto", "none", "probe", "jax")
        text = str(value).strip().lower() if isinstance(value, str) else value
        if text not in modes:
            raise UsageError(f"{name} must be one of {', '.join(modes)}, got {value!r}")
        return text  # type: ignore[return-value]

    @checks("matmul_precision")
    def _matmul_precision(value: Any, name: str) -> str | None:
        return validate_matmul_precision(value)

    @checks("xla_flags", "xfail")
    def _text(value: Any, name: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            what = "XLA flags like '--xla_cpu_enable_fast_math=false'" if name == "xla_flags" else "a reason"
            raise UsageError(f"{name} must be a non-empty string ({what}), got {value!r}")
        return value.strip()

    @checks("python")
    def _python(value: Any, name: str) -> str | None:
        from jaxrun.core.interpreters import validate_python

        return validate_python(value)

    @checks("memory_limit")
    def _memory_limit(value: Any, name: str) -> int | None:
        return validate_memory_limit(value)

    @checks("compile_cache_max_size")
    def _cache_size(value: Any, name: str) -> int | None:
        if value is None:
            return None
        return parse_size(value, "compile_cache_max_size", 1)  # JAX would read 0 as "no caching"

    @checks("device")
    def _device(value: Any, name: str) -> str:
        return validate_device(value)

    @checks("timeout")
    def _timeout(value: Any, name: str) -> float | None:
        return validate_timeout(value)

    @checks("retries")
    def _counts(value: Any, name: str) -> int:
        return validate_non_negative(name, value)

    @checks("benchmark_runs", "warmup_runs")
    def _runs(value: Any, name: str) -> int:
        return validate_runs(name, value)

    @checks("host_devices", "max_processes")
    def _optional_positive(value: Any, name: str) -> int | None:
        note = " (the script's own process counts)" if name == "max_processes" else ""
        return validate_optional_positive(name, value, note)

    @checks("processes")
    def _processes(value: Any, name: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"processes must be a whole number >= 1 (1: one process; N: N cooperating processes "
                             f"of one multi-process program), got {value!r}")
        return value

    @checks("compile_cache")
    def _compile_cache(value: Any, name: str) -> Path | None:
        if value is not None and not isinstance(value, (bool, str, os.PathLike)):
            raise UsageError(f"compile_cache must be a folder path, True or False, got {value!r}")
        return compile_cache_dir(value)

    @checks("args")
    def _args(value: Any, name: str) -> tuple[str, ...] | None:
        if value is None:
            return None
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            raise UsageError(f"args must be a list of strings (the script's sys.argv[1:]), got {value!r}")
        return tuple(str(a) for a in value)

    @checks("env")
    def _env(value: Any, name: str) -> dict[str, str] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise UsageError(f"env must be a mapping of environment variable names to strings, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}

    def _consistent(self) -> None:
        if self.warmup_runs and not self.benchmark_runs:
            how = self.medium("warmup_runs")
            raise UsageError(f"{self.said('warmup_runs', self.warmup_runs)} needs {self.named('benchmark_runs', how)} "
                             "> 0 (warm-ups precede counted runs)")
        if self.processes > 1 and ":" in self.device and not self.device.startswith("cpu:"):
            # Each process of a job takes the GPU of its own id (probe/cluster.py); one chosen GPU cannot hold N.
            how = self.medium("processes", "device")
            raise UsageError(f"{self.said('processes', self.processes)} gives each process a device of its own; "
                             f"{self.said('device', self.device)} is one device: ask for its platform, "
                             f"{self.said('device', self.device.split(':')[0], how)}")
        if self.sweep is not None:
            points(self.sweep, self.sweep_zip)  # --zip's lengths, the number of points: before anything runs
        if self.entry is not None:
            if not isinstance(self.entry, str) or not self.entry.isidentifier():
                raise UsageError(f"entry must be the name of a function in the script (like 'main'), got {self.entry!r}")
            calls = self.warm_calls
            if not isinstance(calls, int) or isinstance(calls, bool) or calls < 2:
                raise UsageError(f"{self.named('warm_calls', self.medium('entry'))} must be at least 2 (one first "
                                 f"call, then steady-state calls), got {calls!r}")

    @property
    def key(self) -> str:
        """A fingerprint of these options: a result of other options is not this run's (--resume).
        Worked out once (the options do not change; a changed copy is made without it)."""
        known = self.__dict__.get("_key")
        if known is None:
            known = self.__dict__["_key"] = self._fingerprint()
        return known

    def _fingerprint(self) -> str:
        import hashlib
        import json

        # An option at the value that means "as before" stays out: earlier results keep their key.
        # How a process started (--prestart) changes no figure's meaning: never in the key.
        same_as_before = {n for n, plain in (("prestart", True), ("processes", self.processes == 1),
                                             ("randomize_setup", not self.randomize_setup),
                                             ("sweep", self.sweep is None), ("sweep_zip", not self.sweep_zip),
                                             ("params", self.params is None)) if plain} or None
        text = json.dumps(self.to_json(exclude=same_as_before), ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def mode(self) -> str:
        """How the script is measured: "process", or "warm:<entry>x<calls>"; a sweep's point adds
        its parameters ("process[batch=64]")."""
        from jaxrun.probe.sweep_point import point_text

        mode = f"warm:{self.entry}x{self.warm_calls}" if self.entry else "process"
        # A sweep's point is measured apart: its history is its own, never another point's.
        return f"{mode}[{point_text(self.params)}]" if self.params else mode


class ScriptRule(msgspec.Struct, frozen=True):
    """Settings for some scripts: a per-script table of the config file (``pattern``, a glob
    relative to ``base``, as ``--include`` matches) or a per-device table (``device``)."""

    table: str  # its TOML header, for messages: [tool.jaxrun.scripts."sims/*.py"]
    pattern: Optional[str] = None
    device: Optional[str] = None
    base: Path = Path(".")
    values: dict[str, Any] = msgspec.field(default_factory=dict)
    origins: dict[str, str] = msgspec.field(default_factory=dict)  # key -> "pyproject.toml:12"


class BatchOptions(_Options):
    """What shapes a batch: which scripts, on which devices, how many at once, where results go.
    ``run`` holds the options of each script's run."""

    paths: Tuple[Path, ...] = option(..., "Folders of JAX scripts, or .py files.", flag=None)
    recursive: bool = option(True, "Search sub-folders.")
    include: Optional[Tuple[str, ...]] = option(None, "Only scripts matching these globs.",
                                                Flag(metavar="GLOB", help="Only scripts matching this glob (repeatable)."))
    exclude: Optional[Tuple[str, ...]] = option(None, "Skip scripts matching these globs.",
                                                Flag(metavar="GLOB", help="Skip scripts matching this glob (repeatable)."))
    device: Tuple[str, ...] = option(("auto",), "auto, cpu, gpu or tpu, or one device: gpu:1 (JAX's id, as `jaxrun devices --json` lists them); "
                                     "a list (cpu,gpu:1) runs each script on each.",
                                     Flag(names=("--device", "-d"), metavar="DEVICE", text=True), show_default="auto")
    jobs: int = option(1, "Scripts run at once (each CPU job gets its share of the cores).", Flag(names=("--jobs", "-j"), metavar="N"))
    gpus_per_job: int = option(1, "GPUs given to each job.", Flag(metavar="N"))
    jobs_per_gpu: int = option(1, "Jobs sharing one GPU (each gets a memory fraction).", Flag(metavar="N"))
    # The backends are declared by executors/backends.py, which checks the name and what each
    # backend allows before anything runs (a package may install more).
    backend: str = option("local", "Where scripts run: local, ray (each script a Ray task) or slurm (each script a "
                          "task of a Slurm job array).", Flag(metavar="BACKEND"))
    ray_address: Optional[str] = option(None, "Address of an existing Ray cluster.", Flag(metavar="ADDRESS"))
    ray_connect_timeout: float = option(
        DEFAULT_RAY_CONNECT_TIMEOUT, "Seconds jaxrun waits for Ray to answer: to reach the cluster at --ray-address, "
        "to hand over a finished script's result, to show it is still there while no script finishes, to "
        "disconnect; past it jaxrun stops waiting and says so in one line.", Flag(metavar="SECONDS"))
    slurm_partition: Optional[str] = option(
        None, "Slurm partition of the job array (sbatch --partition); default: the cluster's default partition.",
        Flag(metavar="NAME"))
    slurm_account: Optional[str] = option(None, "Slurm account charged for the job array (sbatch --account).",
                                          Flag(metavar="NAME"))
    slurm_qos: Optional[str] = option(None, "Slurm quality of service of the job array (sbatch --qos).", Flag(metavar="NAME"))
    slurm_constraint: Optional[str] = option(None, "Node features the tasks need (sbatch --constraint).",
                                             Flag(metavar="FEATURES"))
    slurm_cpus_per_task: Optional[int] = option(
        None, "Cores Slurm gives each task (sbatch --cpus-per-task); default: the cluster's (often 1).", Flag(metavar="N"))
    slurm_options: Optional[Tuple[str, ...]] = option(
        None, "More sbatch options, each NAME=VALUE or NAME (exclusive, mail-type=END, gres=gpu:a100:1).",
        Flag(names=("--slurm-option",), metavar="NAME[=VALUE]", help="One more sbatch option, NAME=VALUE or NAME "
             "(repeatable): --slurm-option mail-type=END."))
    slurm_setup: Optional[Tuple[str, ...]] = option(
        None, "Shell lines each task runs before jaxrun on its node (module load ..., source venv/bin/activate).",
        Flag(metavar="LINE", help="A shell line each task runs before jaxrun on its node (repeatable)."))
    nodes: int = option(
        1, "--backend slurm: the nodes a multi-process job (--processes N) spans, N/nodes processes on each.",
        Flag(metavar="N"))
    slurm_timeout: float = option(
        DEFAULT_SLURM_TIMEOUT, "Seconds jaxrun waits for each Slurm command (sbatch, squeue, scontrol, scancel) to "
        "answer; past it jaxrun stops waiting and says so in one line.", Flag(metavar="SECONDS"))
    results_dir: Path = option(Path(DEFAULT_RESULTS_DIR), "Where result files are written.", Flag(metavar="DIR"),
                               show_default=DEFAULT_RESULTS_DIR)
    allow_other_files: bool = option(
        False, "Write into a results folder that holds files jaxrun did not write: they are kept, never deleted "
        "or overwritten (without it such a folder is refused).")
    # The history database, resolved; None: keep no history. Given as None/True (the default
    # database), False (none), a path, or a PostgreSQL URL (held as given: text, never a Path).
    history: Optional[Union[Path, str]] = option(
        None, "History database of benchmarks and of what each run compiled: an SQLite file, or "
        "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE for a team's (jaxrun[postgres]; PGPASSWORD and ~/.pgpass "
        "work) (false: none).",
        Flag(metavar="PATH", off="--no-history", off_help="Do not use the history (benchmarks, what each run compiled, why the cache missed)."),
        show_default="$JAXRUN_HISTORY or ./.jaxrun/history.sqlite", words={"false": False})
    markdown: Optional[Path] = option(
        None, "Also write the summary as Markdown tables to this file (and to $GITHUB_STEP_SUMMARY when set).",
        Flag(names=("--markdown", "--export-markdown"), metavar="FILE"))
    export_json: Optional[Path] = option(
        None, "Also write each script's figures with every raw sample as JSON (hyperfine's names: mean, median, "
        "times...).", Flag(metavar="FILE"))
    export_csv: Optional[Path] = option(None, "Also write one CSV row per script.", Flag(metavar="FILE"))
    junit_xml: Optional[Path] = option(
        None, "Also write the batch as JUnit XML (pytest's format: a testcase per script), for CI test reports.",
        Flag(metavar="FILE"))
    report: bool = option(False, "Also write the HTML report (RESULTS_DIR/report.html; see jaxrun report).")
    json: bool = option(False, "Print the batch result (as in jax_execution_results.json) on stdout when the batch "
                        "ends, and nothing else there (a batch stopped early: metadata.complete is false).")
    resume: bool = option(False, "Continue the batch in the results folder: keep the scripts that finished there "
                          "(same content and options), run the rest.")
    strict_xfail: bool = option(False, "A script marked xfail that passes fails the batch.")
    allow_mismatch: bool = option(False, "Check regressions against history runs with other numerics too.")
    fail_on_regression: bool = option(
        False, "Exit 1 when the history judges a benchmarked script slower (without it a regression is "
        "reported, and the run's exit status says only whether the scripts succeeded).")
    rules: Tuple[ScriptRule, ...] = option((), "Per-script and per-device settings of the config file.", flag=None)
    config_file: Optional[Path] = option(None, "The config file these options were read from.", flag=None)
    run: RunOptions = part(RunOptions, "The options of each script's run.")

    @classmethod
    def build(
        cls, source: Source = "api", /, sources: Mapping[str, Source] | None = None,
        origins: Mapping[str, str] | None = None, **given: Any,
    ) -> "BatchOptions":
        """Batch options from a flat mapping: the names of :class:`RunOptions` go to ``run``."""
        defaults = {n: f.default for n, f in (RunOptions.fields | cls.fields).items()}
        given = resolve_option_aliases(given, defaults)
        run_names = set(RunOptions.fields) - {"device"}
        run_given = {k: given.pop(k) for k in list(given) if k in run_names}
        unknown = sorted(set(given) - set(cls.fields) - {"run"})
        if unknown:
            raise unknown_option(unknown[0], set(cls.fields) | set(RunOptions.fields))
        if "device" in given:
            given["device"] = parse_devices(given["device"])
        if "device" in given:
            # Each script's run gets its device from the batch (run_for); the first one stands here.
            run_given["device"] = given["device"][0]
        run = RunOptions.build(source, sources, origins, **run_given)
        options = super().build(source, sources, origins, run=run, **given)
        options._sources.pop("run", None)
        return options

    def origin_of(self, name: str) -> str | None:
        if name in RunOptions.fields and name not in type(self).fields:
            return self.run.origin_of(name)
        return super().origin_of(name)

    def source_of(self, name: str) -> Source:
        """Where option ``name`` (of the batch, or of each script's run) came from."""
        if name in RunOptions.fields and name not in type(self).fields:
            return self.run.source_of(name)
        return super().source_of(name)

    @property
    def sources(self) -> dict[str, Source]:
        return {**self.run.sources, **{n: self.source_of(n) for n in type(self).fields if n != "run"}}

    @checks("paths")
    def _paths(value: Any, name: str) -> tuple[Path, ...]:
        items = [value] if isinstance(value, (str, os.PathLike)) else list(value or ())
        if not items:
            raise UsageError("no path given: pass a folder of JAX scripts or .py files")
        return tuple(Path(p) for p in items)

    @checks("device")
    def _devices(value: Any, name: str) -> tuple[str, ...]:
        return parse_devices(value)

    @checks("include", "exclude")
    def _globs(value: Any, name: str) -> tuple[str, ...] | None:
        # The patterns themselves are checked by discovery, which names the culprit.
        if value is None or isinstance(value, str):
            return None if value is None else (value,)
        items = _listed(value, name, "globs (text)")
        if not all(isinstance(item, str) for item in items):
            raise UsageError(f"{name} must be globs (text), got {shown_value(value)}")
        return items

    @checks("jobs", "gpus_per_job", "jobs_per_gpu", "nodes")
    def _at_least_one(value: Any, name: str) -> int:
        if validate_non_negative(name, value) < 1:
            raise UsageError(f"{name} must be >= 1, got {value}")
        return value

    @checks("backend")
    def _backend(value: Any, name: str) -> str:
        # Which names exist is the executors' to say (executors/backends.py), before anything runs.
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", value.strip()):
            raise UsageError(f"{name} must be the name of a backend (up to 64 letters, digits, '_', '-' or '.'), "
                             f"got {shorten_middle(repr(value), 60)}")
        return value.strip()

    @checks("ray_connect_timeout", "slurm_timeout")
    def _remote_wait(value: Any, name: str) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if isinstance(value, bool) or not (math.isfinite(seconds) and seconds > 0):
            what = "Ray" if name.startswith("ray") else "Slurm"
            raise UsageError(f"{name} must be a number of seconds > 0 (a wait on {what} always ends), got {value!r}")
        return seconds

    @checks("slurm_partition", "slurm_account", "slurm_qos", "slurm_constraint")
    def _slurm_name(value: Any, name: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
            raise UsageError(f"{name} must be one name without spaces (as sbatch takes it), got {value!r}")
        return value.strip()

    @checks("slurm_cpus_per_task")
    def _slurm_cpus(value: Any, name: str) -> int | None:
        if value is not None and validate_non_negative(name, value) < 1:
            raise UsageError(f"{name} must be >= 1, got {value}")
        return value

    @checks("slurm_options")
    def _slurm_options(value: Any, name: str) -> tuple[str, ...] | None:
        from jaxrun.config.slurm_options import (
            sbatch_option,  # only when some are given
        )

        if value is None:
            return None
        items = [value] if isinstance(value, str) else _listed(value, name, "sbatch options (NAME=VALUE texts)")
        return tuple(sbatch_option(item) for item in items)

    @checks("slurm_setup")
    def _slurm_setup(value: Any, name: str) -> tuple[str, ...] | None:
        if value is None:
            return None
        items = [value] if isinstance(value, str) else _listed(value, name, "shell lines (text, one line each)")
        if not all(isinstance(item, str) and item.strip() and "\n" not in item for item in items):
            raise UsageError(f"{name} must be shell lines (text, one line each), got {value!r}")
        return tuple(items)

    @checks("results_dir")
    def _results_dir(value: Any, name: str) -> Path:
        return Path(value if value is not None else DEFAULT_RESULTS_DIR).expanduser().resolve()

    @checks("history")
    def _history(value: Any, name: str) -> Path | str | None:
        return history_path(value)

    @checks("markdown", "export_json", "export_csv", "junit_xml")
    def _markdown(value: Any, name: str) -> Path | None:
        return None if value is None else Path(value).expanduser().resolve()

    def _consistent(self) -> None:
        if self.nodes > 1 and self.run.processes % self.nodes:
            how = self.medium("processes", "nodes")
            raise UsageError(f"{self.said('processes', self.run.processes, how)} must be a multiple of "
                             f"{self.said('nodes', self.nodes, how)}: each node runs as many of the job's processes")
        if self.gpus_per_job > 1 and self.jobs_per_gpu > 1:
            # Checked here, not only when GPU slots are built: the batch must not drop one silently.
            how = self.medium("gpus_per_job", "jobs_per_gpu")
            raise UsageError(f"use either {self.named('gpus_per_job', how)} or {self.named('jobs_per_gpu', how)}, "
                             "not both")

    def run_for(self, device: str) -> RunOptions:
        """The run options of one job on ``device`` (one of ``self.device``)."""
        return self.run if device == self.run.device else self.run.evolve(device=device)

    def options_for(self, job: Any) -> RunOptions:
        """The run options of ``job`` (a :class:`~jaxrun.plan.job.Job`): its own, when per-script
        settings gave it some, else the batch's for its device."""
        return job.run_options if job.run_options is not None else self.run_for(job.device)


METRIC_HELP = (f"The one metric that decides a regression: {metrics_text()} (default: "
               f"{' and '.join(DEFAULT_GATE)}, the code's own phases; every phase is judged).")


class VerdictOptions(_Options):
    """How NEW is judged against BASE, phase by phase (jaxrun.judge.verdicts): by ``jaxrun compare``,
    ``jaxrun history``, the pytest plugin and :func:`jaxrun.compare_results`."""

    metric: Optional[str] = option(None, METRIC_HELP, Flag(metavar="METRIC"))
    alpha: float = option(DEFAULT_ALPHA, "Significance level: a change counts only when the test's p-value is below it.",
                          Flag(metavar="P"))
    # A fraction; given as one ("0.05") or a percentage ("5%").
    min_effect: float = option(DEFAULT_MIN_EFFECT, "Smallest change that counts, e.g. 5% or 0.05.", Flag(metavar="EFFECT", text=True),
                               show_default="5%")
    allow_mismatch: bool = option(False, "Judge runs with other numerics (x64, matmul precision, debug or XLA "
                                  "flags), or of other machines, against each other too.")
    # Many scripts judged at once: at alpha 0.01, an A/A of 50 scripts would call one "slower" in
    # four folders out of ten without it.
    correction: str = option("holm", "How the p-values of many scripts judged at once are corrected: holm "
                             "(Holm-Bonferroni: the chance of any false alarm stays below alpha), bh "
                             "(Benjamini-Hochberg: the expected share of false alarms does), none.",
                             Flag(choices=("holm", "bh", "none")))

    @checks("metric")
    def _metric(value: Any, name: str) -> str | None:
        from jaxrun.results.benchmark_result import (
            resolve_metric,  # the models: only when a metric is named
        )

        return None if value is None else resolve_metric(value)

    @checks("min_effect")
    def _min_effect(value: Any, name: str) -> float:
        return parse_effect(value) if isinstance(value, str) else value

    @checks("correction")
    def _correction(value: Any, name: str) -> str:
        if value not in ("holm", "bh", "none"):
            raise UsageError(f"{name} must be holm, bh or none, got {shown_value(value)}")
        return value

    def _consistent(self) -> None:
        alpha, effect = self.alpha, self.min_effect
        if not 0 < alpha < 1:
            raise UsageError(f"alpha must be between 0 and 1 (exclusive), got {alpha!r}; 0.01 is usual")
        if not (math.isfinite(effect) and effect >= 0):
            raise UsageError(f"minimum effect must be a fraction >= 0, got {effect!r}; 0.05 means 5%")


def verdict_options(options: "VerdictOptions | None", given: Mapping[str, Any]) -> VerdictOptions:
    """``options``, or the keywords ``given`` (metric, alpha, min_effect, allow_mismatch) validated
    into them: what an API function that judges takes."""
    if options is not None and given:
        raise UsageError(f"pass either options or {', '.join(given)}, not both")
    return options if options is not None else VerdictOptions.build("api", **given)


def _listed(value: Any, name: str, what: str) -> tuple[Any, ...]:
    """``value`` as a tuple when it is a list (a tuple, a list, not a table or a word): else one line."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise UsageError(f"{name} must be a list of {what}, got {shown_value(value)}")


def parse_devices(device: str | Iterable[str]) -> tuple[str, ...]:
    """``"cpu,gpu"`` or ``["cpu", "gpu"]`` -> validated names in order, without repeats."""
    items = device.split(",") if isinstance(device, str) else list(_listed(device, "device", "devices"))
    names = [validate_device(item) for item in items if str(item).strip()]
    if not names:
        raise UsageError(f"no device given: choose one or more of {DEVICE_FORMS} (comma-separated)")
    return tuple(dict.fromkeys(names))
