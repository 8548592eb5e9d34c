"""Device facts for the parent, read by a short-lived child and cached (the parent never imports jax).

The cache lives in memory for the process and on disk (``$JAXRUN_CACHE_DIR`` or
``~/.cache/jaxrun``) keyed by everything that can change the answer: the Python interpreter, the
installed jax/jaxlib versions, the host, and the environment variables that select devices.
Under another interpreter (``--python``) the child is that interpreter's, importing jaxrun alone
(jaxrun/core/interpreters.py), and the key holds its path and what marks its environment's installs.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any, Union

from jaxrun.core.defaults import AUTO_PREFERENCE
from jaxrun.core.formatting import listed
from jaxrun.core.host import host_memory_bytes
from jaxrun.core.paths import cache_dir, make_jaxrun_importable
from jaxrun.core.validate import split_device, validate_device
from jaxrun.errors import DeviceProbeError, InvalidDeviceError
from jaxrun.results.result_files import DamagedFileError, atomic_write_text, read_json

if TYPE_CHECKING:
    from jaxrun.results.models import DeviceInfo

# What the way to the first script reads of the facts (whether JAX imports, each platform's
# availability, backend, error and device ids) is read from their JSON as it is; the validated
# model is made when a result needs it (DeviceFacts.record).
SCHEMA = 2  # results/base_model.py's SCHEMA_VERSION of the facts cached here; another is probed again


class PlatformFacts:
    __slots__ = ("name", "available", "backend", "error", "device_ids")

    def __init__(self, data: dict[str, Any]) -> None:
        self.name, self.available = data["name"], data["available"]
        self.backend, self.error = data.get("backend"), data.get("error")
        self.device_ids = [d["id"] for d in data.get("devices") or ()]
        if not (isinstance(self.available, bool) and all(type(i) is int for i in self.device_ids)):
            raise ValueError("not a platform's facts")


class DeviceFacts:
    """The device facts of one interpreter, as cached: ``jax_available``, ``jax_version``,
    ``python_version``, ``default_backend``, ``error`` and ``platforms`` (name ->
    :class:`PlatformFacts`) as :class:`~jaxrun.results.models.DeviceInfo` names them; ``record``: that
    model, the facts as the results hold them."""

    __slots__ = ("data", "jax_available", "jax_version", "python_version", "default_backend", "error", "platforms",
                 "_record")

    def __init__(self, data: dict[str, Any], record: "DeviceInfo | None" = None) -> None:
        if data.get("schema_version") != SCHEMA or not isinstance(data.get("jax_available"), bool):
            raise ValueError("not device facts of this version")
        self.data, self._record = data, record
        self.jax_available = data["jax_available"]
        self.jax_version, self.python_version = data.get("jax_version"), data.get("python_version")
        self.default_backend, self.error = data.get("default_backend"), data.get("error")
        self.platforms = {name: PlatformFacts(p) for name, p in (data.get("platforms") or {}).items()}

    @property
    def record(self) -> "DeviceInfo":
        """The facts as the results hold them (validated once, on first use)."""
        if self._record is None:
            from msgspec import ValidationError

            from jaxrun.results.model_json import misfit
            from jaxrun.results.models import DeviceInfo

            try:
                self._record = DeviceInfo.model_validate(self.data)
            except ValidationError as exc:
                raise DeviceProbeError(f"the cached device facts cannot be read ({misfit(exc)}); "
                                       "`jaxrun devices --refresh` reads them again") from None
        return self._record


Facts = Union[DeviceFacts, "DeviceInfo"]  # what the plan and each launch read: either has what they need

CACHE_TTL_SECONDS = 6 * 3600
PROBE_TIMEOUT_SECONDS = 180.0
_DEVICE_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "TPU_VISIBLE_CHIPS",
    "XLA_FLAGS",
    "JAX_NUM_CPU_DEVICES",
)
_memo: dict[str, DeviceFacts] = {}


_INSTALLED_FOR = 2.0  # seconds an answer of _installed stands: a batch asks at every script
_installed_memo: dict[str, tuple[float, str]] = {}


def _installed(name: str) -> str:
    """Where package ``name`` is installed and when its version file was written: it changes with
    any install, upgrade or reinstall, and is read without importing the package (nor
    importlib.metadata, whose import and lookups cost ~20 ms of every `jaxrun run`). Looked up
    again after _INSTALLED_FOR seconds (a long-lived process sees a new install)."""
    now = time.monotonic()
    known = _installed_memo.get(name)
    if known is not None and now - known[0] < _INSTALLED_FOR:
        return known[1]
    answer = _look_up_installed(name)
    _installed_memo[name] = (now, answer)
    return answer


def _look_up_installed(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "not installed"
    folder = os.path.dirname(spec.origin)
    for candidate in (os.path.join(folder, "version.py"), spec.origin):
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        return f"{candidate}:{st.st_mtime_ns}:{st.st_size}"
    return spec.origin


def _cache_key(python: str | None = None) -> str:
    # "facts-5": keyed on the installed files rather than the versions they declare; platforms say
    # whether their backend is installed, with a short reason (and, for a GPU backend, what to install).
    if python is None:
        parts = ["facts-5", sys.executable, _host(), _installed("jax"), _installed("jaxlib")]
    else:
        from jaxrun.core.interpreters import installed_marks

        parts = ["facts-5", "python", _host(), installed_marks(python)]
    parts += [f"{name}={os.environ.get(name, '')}" for name in _DEVICE_ENV]
    return _sha256("\n".join(parts).encode()).hexdigest()[:16]


def _host() -> str:
    return os.uname().nodename  # socket.gethostname()'s answer (gethostname(2)), without importing socket


def _sha256(data: bytes) -> "Any":
    """hashlib's sha256, from CPython's own module where it has one: hashlib loads OpenSSL
    (~3 ms of every `jaxrun run`) for a digest of a few hundred bytes."""
    return _sha256_maker()(data)


@functools.cache
def _sha256_maker() -> "Any":
    # Found once: an import that fails (``_sha2`` before Python 3.12) searches every folder of sys.path again each time.
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python >= 3.12
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef]  # Python 3.10, 3.11
        except ImportError:
            from hashlib import sha256
    return sha256


def _probe_child(python: str | None = None) -> "DeviceInfo":
    env = dict(os.environ)
    env.pop("JAX_PLATFORMS", None)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if python is None:
        make_jaxrun_importable(env)
    else:
        from jaxrun.core.interpreters import importable_by

        importable_by(env, python)  # that environment's jax, never this one's
    with tempfile.TemporaryDirectory(prefix="jaxrun-devices-") as tmp:
        out = os.path.join(tmp, "facts.json")
        try:
            proc = subprocess.run(
                [python or sys.executable, "-m", "jaxrun.probe.devices_child", out],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=PROBE_TIMEOUT_SECONDS,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise DeviceProbeError(
                f"reading device facts took longer than {PROBE_TIMEOUT_SECONDS:.0f} s; "
                "check that the accelerator driver is responsive (nvidia-smi)"
            ) from None
        if not os.path.exists(out):
            lines = proc.stderr.decode(errors="replace").strip().splitlines()
            raise DeviceProbeError(  # its last lines say why; how many earlier ones were left out too
                f"the device probe exited with status {proc.returncode}: "
                f"{listed(lines, 3, ' | ', last=3, what='earlier lines') or 'no output'}"
            )
        with open(out, encoding="utf-8") as handle:
            data = json.load(handle)
    from msgspec import ValidationError

    from jaxrun.results.model_json import misfit
    from jaxrun.results.models import DeviceInfo

    try:
        facts = DeviceInfo.model_validate(data)
    except ValidationError as exc:
        raise DeviceProbeError(f"the device probe returned facts jaxrun cannot read: {misfit(exc)}") from None
    return _with_available_devices(with_install_advice(facts))


def with_install_advice(facts: "DeviceInfo", version: "tuple[int, int] | None | bool" = True) -> "DeviceInfo":
    """``facts`` whose GPU platform, when JAX has no GPU backend installed, says what to install for
    this machine's NVIDIA driver (``version``: the CUDA it supports, as
    :func:`~jaxrun.discover.nvml.driver_cuda_version` reads it; True: read it here)."""
    gpu = facts.platforms.get("gpu")
    if gpu is None or gpu.installed is not False:
        return facts
    from jaxrun.discover.nvml import cuda_install_advice, driver_cuda_version

    found = driver_cuda_version() if version is True else version
    reason = gpu.error or "no CUDA or ROCm backend is installed"
    said = f"{reason} ({cuda_install_advice(found)})"  # type: ignore[arg-type]
    return facts.model_copy(update={"platforms": {**facts.platforms, "gpu": gpu.model_copy(update={"error": said})}})


_GIB = 1024**3


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"


def _with_available_devices(facts: "DeviceInfo") -> "DeviceInfo":
    """The executor API's device list (names, GiB, driver), added in the parent: the host's RAM and CPU
    name and the NVIDIA driver (NVML) are read here, not in the jax child."""
    driver, gpu_total = None, None
    gpu = facts.platforms.get("gpu")
    if gpu is not None and gpu.available and gpu.backend == "cuda":
        from jaxrun.discover.nvml import gpu_memory_totals, nvml_status

        driver = nvml_status().driver_version
        # JAX's bytes_limit is its allocator's share (75% by default), not the card's memory.
        # NVML's order need not be JAX's: only GPUs all of one size get NVML's figure.
        totals = gpu_memory_totals() or []
        if totals and len(set(totals)) == 1:
            gpu_total = totals[0]
    from jaxrun.results.models import AvailableDevice

    host, cpu = host_memory_bytes(), _cpu_name()
    devices = []
    for platform in facts.platforms.values():
        if not platform.available:
            continue
        for d in platform.devices:
            memory = host if d.platform == "cpu" else (gpu_total if d.platform == "gpu" and gpu_total else d.memory_bytes)
            devices.append(AvailableDevice(
                name=cpu if d.platform == "cpu" else d.device_kind, platform=d.platform, id=d.id,
                memory_gb=None if memory is None else memory / _GIB, compute_capability=d.compute_capability,
                driver_version=driver if d.platform == "gpu" else None,
            ))
    facts = facts.model_copy(update={"available_devices": devices})
    return facts.describing(facts.default_backend)


def get_jax_device_info(refresh: bool = False, *, python: str | None = None) -> "DeviceInfo":
    """Return the JAX device facts of this machine (jax versions, platforms, devices, failures),
    as seen by ``python`` (another environment's interpreter; None: jaxrun's own)."""
    return device_facts(refresh, python=python).record


def device_facts(refresh: bool = False, *, python: str | None = None) -> DeviceFacts:
    """:func:`get_jax_device_info`'s facts, read without building their model (the plan and each
    launch read these; their ``record`` is a result's)."""
    if python is not None:
        from jaxrun.core.interpreters import is_other, validate_python

        python = validate_python(python)
        if not is_other(python):
            python = None
    key = _cache_key(python)
    if not refresh and key in _memo:
        return _memo[key]
    path = cache_dir() / f"devices-{key}.json"
    if not refresh and path.is_file() and time.time() - path.stat().st_mtime < CACHE_TTL_SECONDS:
        try:
            found = DeviceFacts(read_json(path))
            _memo[key] = found
            return found
        except (OSError, DamagedFileError, ValueError, TypeError, KeyError, AttributeError):
            pass  # a damaged, stale or foreign cache file is simply probed again
    probed = _probe_child(python)
    try:
        atomic_write_text(path, probed.model_dump_json(indent=2))
    except OSError:
        pass  # a read-only home must not stop a run
    found = DeviceFacts(probed.model_dump(mode="json"), probed)
    _memo[key] = found
    return found


def resolve_device(device: str, facts: Facts) -> tuple[str | None, str | None]:
    """Map a requested device to a present platform: ``(platform, None)`` or ``(None, reason)``.
    One device of a platform (``gpu:1``) resolves as its platform does (whether that id exists is
    :func:`check_device_id`'s, once before the batch); the reason names what was asked."""
    asked = validate_device(device)
    device = split_device(asked)[0]
    if not facts.jax_available:
        if device in ("auto", "cpu"):
            # A script that never imports jax runs as it would with `python`; one that does fails
            # with its own ImportError (import_error), the real reason, not a missing device.
            return "cpu", None
        return None, facts.error or "jax is not installed (pip install jax)"
    if device == "auto":
        for name in AUTO_PREFERENCE:
            platform = facts.platforms.get(name)
            if platform is not None and platform.available:
                return name, None
        return None, facts.error or "no JAX platform initialised on this machine"
    platform = facts.platforms.get(device)
    if platform is not None and platform.available:
        return device, None
    reason = platform.error if platform is not None and platform.error else f"no {device} platform"
    return None, f"{asked} is not available: {reason}"


def device_ids(platform: str, facts: Facts, cpu_count: int | None = None) -> list[int]:
    """The ids of ``platform``'s devices here (``cpu_count``: the simulated CPU devices a run asks
    for with --host-devices, which the device facts, read without it, do not show)."""
    if platform == "cpu" and cpu_count is not None:
        return list(range(cpu_count))
    found = facts.platforms.get(platform)
    if found is None or not found.available:
        return []
    return list(found.device_ids) if isinstance(found, PlatformFacts) else [d.id for d in found.devices]


def check_device_id(device: str, facts: Facts | None, cpu_count: int | None = None) -> None:
    """Raise a usage error when ``device`` names one device (``gpu:3``) that this machine lacks,
    listing the ones it has. A platform absent altogether is no usage error: the run is
    ``device_unavailable`` and falls back to the CPU as ``--device gpu`` does (README)."""
    platform, index = split_device(device)
    if index is None or facts is None or not facts.jax_available:
        return
    ids = device_ids(platform, facts, cpu_count)
    if not ids and platform != "cpu":
        return  # no such platform here: the fallback rule decides, with the reason
    if index not in ids:
        has = ", ".join(f"{platform}:{i}" for i in ids) or f"no {platform} device"
        more = "; --host-devices N simulates N CPU devices" if platform == "cpu" else ""
        raise InvalidDeviceError(f"unknown device {device}: this machine has {has} "
                                 f"(choose one, or {platform} for any{more})")


def is_jax_available(device: str = "cpu") -> bool:
    """True when JAX is installed and ``device`` ("cpu", "gpu", "tpu" or "auto") can be used."""
    device = validate_device(device)
    try:
        facts = device_facts()
    except DeviceProbeError:
        return False
    platform, _ = resolve_device(device, facts)
    return facts.jax_available and platform is not None
