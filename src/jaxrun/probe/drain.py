"""After the script's last line: wait until the devices have done the work it dispatched.

JAX dispatches asynchronously, so a script that never blocks on its last results leaves device
work running after its body; under ``python script.py`` that work still runs, while the
interpreter shuts down. It is the script's run time. Waiting on ``jax.live_arrays()`` is not
enough: the outputs the script dropped are not live, but their computations still run.

A device runs the programs dispatched to it in order (a GPU's compute stream; the CPU client's
queue), so a tiny program dispatched now finishes after everything dispatched before it. The
probe builds one such program per backend the script used (over all its local devices), runs
it and blocks. XLA compiles it once per JAX build and device set (~40 ms on CPU); jaxrun keeps it
serialized in its cache folder, and later scripts load it (~5 ms), while the devices keep working:
device work still running after that is counted up to its end; work that ended meanwhile, up to the
end of the kept arrays' work. Its compile events are not the script's (``jax_hooks.ignore_compiles``).
"""

from __future__ import annotations

import os
import sys
import time

from jaxrun.probe import jax_hooks

TYPE_CHECKING = False  # typing is not imported at run time (probe/events.py says why)
if TYPE_CHECKING:
    from typing import Any

# A freshly built program's first run costs more than its next ones (~1 ms on CPU): a first run
# within this of the build found the devices idle.
_FIRST_RUN = 0.002


def _used_clients() -> list[Any]:
    """The PJRT clients the script put work on: initialized backends that hold an executable."""
    from jaxrun.probe.jax_internals import backends, backends_initialized

    if not backends_initialized():
        return []  # nothing was dispatched; asking would start a backend (ms on CPU, s on a GPU)
    clients = []
    for client in backends().values():
        try:
            if client.live_executables():
                clients.append(client)
        except Exception:  # an older client without the call: drain it to be safe
            clients.append(client)
    return clients


def _barrier(client: Any) -> Any:
    """A compiled ``v + 1`` over every local device of ``client``, and its argument."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = client.local_devices()
    sharding = NamedSharding(Mesh(np.array(devices), ("d",)), PartitionSpec("d"))
    argument = jax.device_put(np.zeros(len(devices), np.float32), sharding)
    return _load(client, devices, argument) or _build(client, devices, argument), argument


def _cache_file(client: Any, devices: list[Any]) -> str:
    """Where the barrier for these devices is kept, serialized: XLA compiles even ``v + 1`` in
    ~40 ms on a CPU; loading it takes ~5 ms. One file per JAX build, platform and device set."""
    import hashlib

    import jax
    import jaxlib

    from jaxrun.core.paths import cache_dir

    key = repr((jax.__version__, getattr(jaxlib, "__version__", None), client.platform, client.platform_version,
                [(d.id, d.device_kind) for d in devices]))
    return os.path.join(str(cache_dir()), "drain", hashlib.sha256(key.encode()).hexdigest()[:24] + ".xla")


def _load(client: Any, devices: list[Any], argument: Any) -> Any:
    """The barrier from jaxrun's cache, or None (none yet, another JAX, a damaged file)."""
    try:
        import jax
        from jax.experimental import serialize_executable

        with open(_cache_file(client, devices), "rb") as file:
            serialized = file.read()
        program = serialize_executable.deserialize_and_load(
            serialized, jax.tree_util.tree_structure(((argument,), {})), jax.tree_util.tree_structure(argument),
            backend=client, execution_devices=devices)
        program(argument)  # a mismatch (shape, devices) raises here, not after the script's work
        return program
    except Exception:  # noqa: BLE001 - any failure: build it anew
        return None


def _build(client: Any, devices: list[Any], argument: Any) -> Any:
    """Compile the barrier and keep it for the next scripts (an atomic write; failures ignored)."""
    import jax

    # Never stored in the script's persistent compilation cache: it is jaxrun's, kept apart below.
    min_seconds = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1e9)
    try:
        program = jax.jit(lambda v: v + 1).lower(argument).compile()
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds)
    temporary = None
    try:
        from jax.experimental import serialize_executable

        path = _cache_file(client, devices)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as file:
            file.write(serialize_executable.serialize(program)[0])
        os.replace(temporary, path)
    except Exception:  # noqa: BLE001 - a read-only or full disk: the next script compiles it again
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass
    return program


def drain(body_end: float) -> tuple[float, float]:
    """Wait for the script's device work; return ``(when it ended, seconds waited for it)``:
    ``body_end`` itself when the devices were idle."""
    if "jax" not in sys.modules:
        return body_end, 0.0
    kept_done = body_end
    try:
        clients = _used_clients()
        if not clients:
            return body_end, 0.0
        import jax

        jax.block_until_ready(jax.live_arrays())  # what the script kept: its exact end
        kept_done = time.perf_counter()
        jax_hooks.ignore_compiles(True)
        try:
            barriers = [_barrier(client) for client in clients]
        finally:
            jax_hooks.ignore_compiles(False)
        built = time.perf_counter()
        jax.block_until_ready([program(argument) for program, argument in barriers])
        first = time.perf_counter()
        jax.block_until_ready([program(argument) for program, argument in barriers])
        own = time.perf_counter() - first  # the barrier's cost on idle devices
    except Exception:
        # A failed computation is the script's error, reported when it is read, not here; a
        # backend that cannot build the barrier leaves the kept arrays' end as the best known.
        return kept_done, kept_done - body_end
    if first - built > _FIRST_RUN + 2 * own:
        ended = first - own  # the devices were still busy with the script's work after the build
    else:
        ended = kept_done
    return ended, ended - body_end
