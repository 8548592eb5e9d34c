"""Profiling inside the child (``--profile DIR``): a ``jax.profiler`` trace from the moment the
script imports jax to its end, device memory sampled over time, and a device memory profile
(pprof) at the end.

Nothing here initialises a backend: device memory is sampled only once the script itself has
used a device, so a script that configures JAX after importing it is not disturbed. The trace is
JAX's own profiler (what XProf and Perfetto read); it records, it does not change what runs.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from jaxrun.probe import events
from jaxrun.probe.channel import EventWriter

SAMPLE_INTERVAL = 0.1
MAX_SAMPLES = 20_000  # per device; beyond it every other sample is dropped (the series halves)


class Profiler:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.trace_started = False
        self.trace_error: str | None = None
        self.samples: dict[str, list[tuple[float, float]]] = {}
        self.interval = SAMPLE_INTERVAL
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- start: when the script imports jax -------------------------------------------------------

    def on_jax_loaded(self) -> None:
        import jax

        try:
            os.makedirs(self.directory, exist_ok=True)
            # No create_perfetto_trace: the <host>.trace.json.gz JAX writes anyway is a JSON trace
            # that ui.perfetto.dev opens, and the extra conversion costs seconds (3.7 s of 5 s of
            # export for 40 small compilations here).
            jax.profiler.start_trace(self.directory)
            self.trace_started = True
        except Exception as exc:  # another trace already running (the script's own), ...
            self.trace_error = f"jax.profiler.start_trace failed: {exc}"
        self._thread = threading.Thread(target=self._sample_loop, name="jaxrun-device-memory", daemon=True)
        self._thread.start()

    def _sample_loop(self) -> None:
        import jax

        from jaxrun.probe.jax_internals import backends_initialized

        while not self._stop.wait(self.interval):
            if not backends_initialized():
                continue
            now = time.perf_counter()
            try:
                devices = jax.local_devices()
            except Exception:
                continue
            for device in devices:
                try:
                    stats = device.memory_stats()
                except Exception:
                    stats = None
                if not stats or "bytes_in_use" not in stats:
                    continue
                series = self.samples.setdefault(f"{device.platform}:{device.id}", [])
                series.append((now, stats["bytes_in_use"] / 1048576))
                if len(series) > MAX_SAMPLES:
                    del series[::2]
                    self.interval *= 2

    # -- finish: when the script body has ended ---------------------------------------------------

    def finish(self, writer: EventWriter) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval + 1)
        memory_profile, memory_reason = self._save_memory_profile()
        if self.trace_started:
            try:
                import jax

                jax.profiler.stop_trace()
            except Exception as exc:
                self.trace_error = f"jax.profiler.stop_trace failed: {exc}"
        writer.send(events.Profile(
            type=events.PROFILE,
            trace_dir=self.directory if self.trace_started and self.trace_error is None else None,
            trace_reason=self.trace_error if self.trace_error else (None if self.trace_started else
                                                                    "the script never imported jax"),
            device_samples={k: [[t, mb] for t, mb in v] for k, v in self.samples.items()},
            interval=self.interval,
            memory_profile=memory_profile,
            memory_profile_reason=memory_reason,
        ))

    def _save_memory_profile(self) -> tuple[str | None, str | None]:
        if "jax" not in sys.modules:
            return None, "the script never imported jax"
        from jaxrun.probe.jax_internals import backends_initialized

        if not backends_initialized():
            return None, "the script imported jax but never used a device"
        import jax

        path = os.path.join(self.directory, "device_memory.prof")
        try:
            os.makedirs(self.directory, exist_ok=True)
            jax.profiler.save_device_memory_profile(path)
        except Exception as exc:
            return None, f"jax.profiler.save_device_memory_profile failed: {exc}"
        return path, None
