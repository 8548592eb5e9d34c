"""The values every layer starts from: defaults of the options, limits and intervals, the unit of
memory figures, and the words a verdict or a note uses. Validators of what a user types are
core/validate.py's; jaxrun's folders are core/paths.py's."""

from __future__ import annotations

VALID_DEVICES: tuple[str, ...] = ("auto", "cpu", "gpu", "tpu")
# "auto" prefers the fastest platform that is actually present.
AUTO_PREFERENCE: tuple[str, ...] = ("tpu", "gpu", "cpu")
# What JAX_PLATFORMS must say for each platform; "gpu" lets JAX pick CUDA or ROCm.
JAX_PLATFORMS_VALUE: dict[str, str] = {"cpu": "cpu", "gpu": "cuda,rocm", "tpu": "tpu"}
DEFAULT_TIMEOUT = 300.0
# Seconds jaxrun waits for a Ray cluster to answer (executors/ray.py): long enough for a cluster
# across a slow network, short enough that an address where nothing answers is said at once.
DEFAULT_RAY_CONNECT_TIMEOUT = 30.0
# Seconds jaxrun waits for one Slurm command (executors/slurm_queue.py): a busy controller answers
# sbatch in seconds; one that is down makes the commands retry for minutes.
DEFAULT_SLURM_TIMEOUT = 60.0
# How a verdict judges (jaxrun.config.options.VerdictOptions): significance level, smallest change that counts.
DEFAULT_ALPHA = 0.01
DEFAULT_MIN_EFFECT = 0.05
DEFAULT_RESULTS_DIR = "jaxrun_results"
# jaxrun.bench and the pytest plugin's jax_benchmark: seconds of steady-state timing per function
# (calibration and samples), and the fewest samples whatever the budget: 10 give a distribution-free
# 95% CI of the median narrower than [min, max] (6 is the least that reaches 95% at all).
DEFAULT_TIME_BUDGET = 1.0
DEFAULT_MIN_SAMPLES = 10
DEFAULT_MAX_SAMPLES = 200
# The unit of every memory figure jaxrun reports (memory_peak, peak_memory_mb, ...): a MiB, 2^20 bytes.
MiB = 2**20
DEFAULT_LOG_CAP_BYTES = 50 * MiB
# Seconds between SIGTERM and SIGKILL when a script is stopped.
KILL_GRACE_SECONDS = 3.0
# Seconds between samples of the process tree (RSS peak, descendants to reap).
MONITOR_INTERVAL = 0.05
HISTORY_ENV = "JAXRUN_HISTORY"
# A batch's history_problem that starts with this: the history could not be opened for a run that
# only used JAX (a folder, a file that is no history): nothing is damaged, it was not used.
HISTORY_NOT_USED = "not used"
# The verdict when no test could reach p < alpha with the sample sizes: nothing was learnt, which is
# not "no change" (results/comparisons.py's Verdict).
TOO_FEW = "too few runs to judge"
# The history's regression check judges a run only against at least this many earlier comparable
# runs of the same numerics (against one, a single slow minute of the machine reads as a regression);
# it pools up to HISTORY_WINDOW of them.
MIN_HISTORY_RUNS = 3
HISTORY_WINDOW = 5
