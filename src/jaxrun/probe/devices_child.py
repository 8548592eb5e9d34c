"""Child that reads device facts: ``python -m jaxrun.probe.devices_child OUT.json``.

Runs with ``JAX_PLATFORMS`` unset so JAX tries every backend it knows, and records for each of
cpu / gpu / tpu either its devices or the reason it did not initialise, in a few words: a backend
whose library is missing is "not installed" (``installed: false``), never XLA's raw
``INTERNAL: Failed to open libtpu.so: ...``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

from jaxrun.core.timestamps import now_iso

_GPU_BACKENDS = ("cuda", "rocm")
# XLA's status codes that start a backend's error ("INTERNAL: Failed to open libtpu.so: ...").
_STATUS = re.compile(r"^(?:[A-Z][A-Z_]+): ")
_NOT_INSTALLED = {
    "tpu": "libtpu is not installed (pip install 'jax[tpu]' on a TPU machine)",
    # Which CUDA build to install depends on the driver: the parent adds it (discover/devices.py).
    "gpu": "no CUDA or ROCm backend is installed",
}


def _missing_library(backend: str, message: str) -> bool:
    """Whether a backend failed because it is not installed: JAX always tries tpu, and without
    libtpu that fails with "INTERNAL: Failed to open libtpu.so: ... cannot open shared object
    file". (A CUDA plugin that cannot open libcuda is installed: its driver is what is missing.)"""
    return backend == "tpu" and "libtpu" in message and (
        "Failed to open" in message or "cannot open shared object file" in message)


def _reason(message: str) -> str:
    """A backend's error in a few words: its first line, without XLA's status code."""
    first = (str(message).strip().splitlines() or [""])[0]
    return _STATUS.sub("", first)


def _device_entry(device: object) -> dict:
    memory = None
    try:
        stats = device.memory_stats()  # type: ignore[attr-defined]
        if stats and "bytes_limit" in stats:
            memory = int(stats["bytes_limit"])
    except Exception:
        pass
    capability = getattr(device, "compute_capability", None)
    return {
        "id": int(device.id),  # type: ignore[attr-defined]
        "platform": str(device.platform),  # type: ignore[attr-defined]
        "device_kind": str(device.device_kind),  # type: ignore[attr-defined]
        "process_index": int(getattr(device, "process_index", 0)),
        "memory_bytes": memory,
        "compute_capability": None if capability is None else str(capability),
    }


def _platform(jax: object, name: str, backend_errors: dict) -> dict:
    backends = _GPU_BACKENDS if name == "gpu" else (name,)
    for backend in backends:
        try:
            devices = jax.devices(backend)  # type: ignore[attr-defined]
        except RuntimeError:
            continue
        if devices:
            return {
                "name": name,
                "available": True,
                "installed": True,
                "backend": backend,
                "devices": [_device_entry(d) for d in devices],
            }
    failed = {b: str(backend_errors[b]) for b in backends if b in backend_errors}
    broken = {b: message for b, message in failed.items() if not _missing_library(b, message)}
    if not broken:  # no backend tried, or each one's library is missing
        reason = _NOT_INSTALLED.get(name, f"no {name} backend is installed")
        return {"name": name, "available": False, "installed": False, "backend": None, "devices": [], "error": reason}
    # Installed but it did not start (no device, a driver mismatch): the backend's own words.
    reasons = [_reason(message) if name == b else f"{b}: {_reason(message)}" for b, message in broken.items()]
    return {"name": name, "available": False, "installed": True, "backend": None, "devices": [],
            "error": "; ".join(reasons)}


def collect() -> dict:
    started = time.perf_counter()
    facts: dict = {
        "jax_available": False,
        "python_version": sys.version.split()[0],
        "python_executable": sys.executable,
        "probed_at": now_iso(),
    }
    try:
        import jax
        import jaxlib
    except Exception as exc:
        facts["error"] = f"jax cannot be imported in {sys.executable}: {exc} (pip install jax)"
        return facts
    facts.update(jax_available=True, jax_version=jax.__version__, jaxlib_version=jaxlib.__version__)
    from jaxrun.probe import jax_internals

    try:
        jax_internals.backends()
    except Exception as exc:  # every backend failed; per-platform reasons follow
        facts["error"] = f"no JAX backend initialised: {exc}"
    errors = jax_internals.backend_errors()
    facts["platforms"] = {name: _platform(jax, name, errors) for name in ("cpu", "gpu", "tpu")}
    try:
        facts["default_backend"] = jax.default_backend()
    except Exception:
        facts["default_backend"] = None
    facts["probe_seconds"] = time.perf_counter() - started
    return facts


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m jaxrun.probe.devices_child OUT.json", file=sys.stderr)
        return 2
    os.environ.pop("JAX_PLATFORMS", None)
    facts = collect()
    tmp = argv[0] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(facts, handle)
    os.replace(tmp, argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
