"""Names of the events on the probe's private channel, shared by the child (writer) and the parent
(reader), so neither side spells one by hand.

Each event is one JSON object per line with ``type`` set to one of the names below; the fields each
carries are listed beside it. docs/ARCHITECTURE.md describes the channel itself.
"""

from __future__ import annotations

TYPE = "type"

START = "start"  # pid, python, [cgroup_joined, cgroup_error, spare_ready_at]: the probe is running (its absence:
# it never started)
JAX_LOADED = "jax_loaded"  # the script imported jax and the listeners are attached
# One jax.monitoring duration: phase (trace | lower | compile), fun (the program key, e.g.
# "jit(grad(loss))"), s, at (perf_counter when it ended), and when known source ("path:line"),
# reason (a trace: why JAX traced again), cached (a compile: the executable was loaded from the
# persistent cache).
COMPILE = "compile"
CACHE_SAVED = "cache_saved"  # s: compile seconds the cache saved (JAX's lower bound)
RECORD = "record"  # values: what the script passed to jaxrun.record
CALL = "call"  # index, seconds, compile_time: one call of the entry function in warm mode
EXCEPTION = "exception"  # exc_type, exc_module, exc_mro, message, traceback
EXIT = "exit"  # code, [message]: the script called sys.exit (message: sys.exit("text") printed it, status 1)
BODY = "body"  # pid, at (perf_counter): the script's first line is about to run
PROBE_WARNING = "probe_warning"  # message: the probe could not do something (listeners, ...)
# body_time, import_time, compile_wall_time, run_time (a partition of the body: probe/phases.py),
# phases_notes (what could not be told apart), drain_time (s waited after the last line for the
# device work the script dispatched), ended_by (return | exception | sys.exit | os._exit(N) | a
# signal the script sent itself), cpu_time, peak_rss_kb, device, exit_code, compile_cache
# ({enabled, misses} or null without jax), body_start (perf_counter), and when profiling imports
# ([[start, end], ...] perf_counter of the union of the imports)
END = "end"
# --profile: trace_dir | trace_reason, device_samples ({"gpu:0": [[perf_counter, MB], ...]}),
# interval, memory_profile (pprof path) | memory_profile_reason
PROFILE = "profile"

# Phases of a COMPILE event.
PHASE_TRACE, PHASE_LOWER, PHASE_COMPILE = "trace", "lower", "compile"
