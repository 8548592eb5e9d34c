"""Child that reads device facts: ``python -m jaxrun.probe.devices_child OUT.json``.

Runs with ``JAX_PLATFORMS`` unset so JAX tries every backend it knows, and records for each of
cpu / gpu / tpu either its devices or the reason it did not initialise.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..timestamps import now_iso

_GPU_BACKENDS = ("cuda", "rocm")


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
                "backend": backend,
                "devices": [_device_entry(d) for d in devices],
            }
    reasons = [f"{b}: {backend_errors[b]}" for b in backends if b in backend_errors]
    if not reasons:
        if name == "gpu":
            reasons = ["no CUDA or ROCm backend is installed (pip install 'jax[cuda12]' on an NVIDIA machine)"]
        else:
            reasons = [f"no {name} backend is installed"]
    return {"name": name, "available": False, "backend": None, "devices": [], "error": "; ".join(reasons)}


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
    from jax._src import xla_bridge

    try:
        xla_bridge.backends()
    except Exception as exc:  # every backend failed; per-platform reasons follow
        facts["error"] = f"no JAX backend initialised: {exc}"
    errors = dict(getattr(xla_bridge, "_backend_errors", {}) or {})
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
