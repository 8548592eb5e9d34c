"""Tests for jaxrun.discover.devices, the device-facts child and the public API around them.

The parent must never import jax (docs/ARCHITECTURE.md): API calls run in a fresh subprocess that reports
what it saw, including whether ``jax`` ended up in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from helpers import child_env

import jaxrun
from jaxrun.discover.devices import resolve_device
from jaxrun.discover.nvml import nvml_status
from jaxrun.errors import InvalidDeviceError
from jaxrun.results.models import DeviceInfo


def run_python(code: str, cache_dir: Path, *args: str, extra_env: dict | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON document as its last line."""
    env = child_env({"JAXRUN_CACHE_DIR": str(cache_dir), **(extra_env or {})}, without=("JAX_PLATFORMS",))
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True, text=True, env=env, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


JAX_MODULES_LOADED = (
    "sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib'))"
)

DEVICE_INFO_CALL = f"""\
    import json, sys
    import jaxrun
    info = jaxrun.get_jax_device_info(refresh=len(sys.argv) > 1 and sys.argv[1] == "refresh")
    print(json.dumps({{"probed_at": info["probed_at"], "jax": {JAX_MODULES_LOADED},
                      "cpu_devices": len(info["platforms"]["cpu"]["devices"])}}))
"""


def cache_files(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("devices-*.json"))


# --------------------------------------------------------------------------- public API, no jax


def test_public_api_works_without_importing_jax(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    (scripts / "sub").mkdir(parents=True)
    (scripts / "a.py").write_text("import jax\n")
    (scripts / "sub" / "b.py").write_text("from jax import numpy as jnp\n")
    (scripts / "plain.py").write_text("print('no jax')\n")
    report = run_python(
        f"""\
        import json, sys
        import jaxrun
        root = sys.argv[1]
        out = {{
            "found": [str(p) for p in jaxrun.find_jax_scripts(root)],
            "top_only": [str(p) for p in jaxrun.find_jax_scripts(root, recursive=False)],
        }}
        info = jaxrun.get_jax_device_info()
        out["type"] = type(info).__name__
        out["jax_version"] = info["jax_version"]
        out["has_key"] = "jax_version" in info
        out["cpu_available"] = info["platforms"]["cpu"]["available"]
        out["get_default"] = info.get("no_such_field", "fallback")
        try:
            info["no_such_field"]
        except KeyError:
            out["key_error"] = True
        for device in ("cpu", "gpu", "tpu", "auto"):
            out[device] = jaxrun.is_jax_available(device)
        out["default"] = jaxrun.is_jax_available()
        try:
            jaxrun.is_jax_available("xpu")
        except jaxrun.InvalidDeviceError as exc:
            out["xpu_error"] = str(exc)
            out["xpu_is_base"] = isinstance(exc, jaxrun.JAXExecutionError)
        out["jax_modules"] = {JAX_MODULES_LOADED}
        print(json.dumps(out))
        """,
        tmp_path / "cache",
        str(scripts),
    )
    root = scripts.resolve()
    assert report["found"] == [str(root / "a.py"), str(root / "sub" / "b.py")]
    assert report["top_only"] == [str(root / "a.py")]
    assert report["type"] == "DeviceInfo"
    assert report["jax_version"] == metadata.version("jax")
    assert report["has_key"] and report["cpu_available"] and report["key_error"]
    assert report["get_default"] == "fallback"
    if jaxrun.get_jax_device_info().platforms["gpu"].available:  # the session's own device facts
        assert (report["cpu"], report["gpu"], report["tpu"], report["auto"]) == (True, True, False, True)
    else:
        assert (report["cpu"], report["gpu"], report["tpu"], report["auto"]) == (True, False, False, True)
    assert report["default"] is True
    assert "'xpu'" in report["xpu_error"] and "auto, cpu, gpu, tpu" in report["xpu_error"]
    assert report["xpu_is_base"] is True
    assert report["jax_modules"] == []  # the parent never imported jax


@pytest.mark.slow
def test_device_facts_are_cached_on_disk_and_refresh_reprobes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = run_python(DEVICE_INFO_CALL, cache)
    assert first["jax"] == [] and first["cpu_devices"] >= 1
    [path] = cache_files(cache)
    assert json.loads(path.read_text())["probed_at"] == first["probed_at"]

    # A fresh process with the same cache folder answers from the file: prove it by marking it.
    facts = json.loads(path.read_text())
    facts["probed_at"] = "from-the-cache-file"
    path.write_text(json.dumps(facts))
    before = path.stat()
    second = run_python(DEVICE_INFO_CALL, cache)
    assert second["probed_at"] == "from-the-cache-file"
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten

    # refresh=True probes again and replaces the file (atomically: a new inode).
    third = run_python(DEVICE_INFO_CALL, cache, "refresh")
    assert third["probed_at"] != "from-the-cache-file"
    assert third["jax"] == []
    assert cache_files(cache) == [path]
    assert json.loads(path.read_text())["probed_at"] == third["probed_at"]
    assert path.stat().st_ino != before.st_ino
    assert not list(cache.glob("*.tmp")) and not list(cache.glob(".*"))


@pytest.mark.slow
@pytest.mark.parametrize("damage", [b"{ this is not json", b"\xff\xfe not UTF-8 \x80", b'{"jax_version": 3}'])
def test_a_corrupt_cache_file_is_reprobed(tmp_path: Path, damage: bytes) -> None:
    # Garbled bytes (not UTF-8) were a UnicodeDecodeError traceback: the cache is read through
    # resultfiles.read_model, and any damage means probing again.
    cache = tmp_path / "cache"
    run_python(DEVICE_INFO_CALL, cache)
    [path] = cache_files(cache)
    path.write_bytes(damage)
    again = run_python(DEVICE_INFO_CALL, cache)
    assert again["cpu_devices"] >= 1
    rewritten = DeviceInfo.model_validate_json(path.read_text())
    assert rewritten.probed_at == again["probed_at"]


@pytest.mark.slow
def test_device_environment_is_part_of_the_cache_key(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    plain = run_python(DEVICE_INFO_CALL, cache)
    forced = run_python(
        DEVICE_INFO_CALL, cache, extra_env={"XLA_FLAGS": "--xla_force_host_platform_device_count=3"}
    )
    # Simulated CPU devices are seen by the probe, and cached apart from the plain answer.
    assert forced["cpu_devices"] == 3
    assert plain["cpu_devices"] != 3
    assert len(cache_files(cache)) == 2


@pytest.mark.slow
def test_cli_devices_refresh_rewrites_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = dict(os.environ, JAXRUN_CACHE_DIR=str(cache))
    cmd = [sys.executable, "-m", "jaxrun", "devices", "--json"]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
    assert first.returncode == 0, first.stderr
    [path] = cache_files(cache)
    inode = path.stat().st_ino
    cached = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
    assert json.loads(cached.stdout) == json.loads(first.stdout)
    assert path.stat().st_ino == inode
    fresh = subprocess.run([*cmd, "--refresh"], capture_output=True, text=True, env=env, timeout=180)
    assert fresh.returncode == 0, fresh.stderr
    assert path.stat().st_ino != inode
    assert json.loads(path.read_text()) == json.loads(fresh.stdout)


# --------------------------------------------------------------------------- the probe child


def test_devices_child_writes_valid_facts_atomically(tmp_path: Path) -> None:
    out = tmp_path / "facts.json"
    env = dict(os.environ)
    env.pop("JAX_PLATFORMS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun.probe.devices_child", str(out)],
        capture_output=True, text=True, env=env, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # facts go to the file, never to stdout
    info = DeviceInfo.model_validate_json(out.read_text())
    assert info.jax_available and info.jax_version == metadata.version("jax")
    assert info.python_executable == sys.executable
    assert set(info.platforms) == {"cpu", "gpu", "tpu"}
    if jaxrun.get_jax_device_info().platforms["gpu"].available:  # the session's own device facts
        gpu = info.platforms["gpu"]
        assert info.available_platforms == ["cpu", "gpu"]
        assert gpu.backend in ("cuda", "rocm") and gpu.error is None
        assert len(gpu.devices) >= 1 and all(d.platform == "gpu" for d in gpu.devices)
        assert info.device_count == len(info.platforms["cpu"].devices) + len(gpu.devices)
        assert info.platforms["tpu"].error, "tpu is unavailable without a reason"
    else:
        assert info.available_platforms == ["cpu"]
        assert info.device_count == len(info.platforms["cpu"].devices) >= 1
        for name in ("gpu", "tpu"):
            assert info.platforms[name].error, f"{name} is unavailable without a reason"
    assert info.probe_seconds is not None and info.probe_seconds > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["facts.json"]  # no .tmp left


def test_devices_child_ignores_jax_platforms_of_its_environment(tmp_path: Path) -> None:
    # Even when the caller's environment pins JAX to one platform, every platform is examined.
    out = tmp_path / "facts.json"
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun.probe.devices_child", str(out)],
        capture_output=True, text=True, env=dict(os.environ, JAX_PLATFORMS="tpu"), timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    info = DeviceInfo.model_validate_json(out.read_text())
    assert info.platforms["cpu"].available is True


def test_devices_child_usage(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrun.probe.devices_child"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "usage: python -m jaxrun.probe.devices_child OUT.json" in proc.stderr


# --------------------------------------------------------------------------- resolve_device


def _facts(**platforms: dict) -> DeviceInfo:
    return DeviceInfo.model_validate(
        {
            "jax_available": True, "jax_version": "0.0", "python_version": "3", "python_executable": "py",
            "probed_at": "now",
            "platforms": {
                name: {"name": name, **spec} for name, spec in platforms.items()
            },
        }
    )


CPU_ONLY = _facts(
    cpu={"available": True, "backend": "cpu", "devices": [{"id": 0, "platform": "cpu", "device_kind": "cpu"}]},
    gpu={"available": False, "error": "no CUDA or ROCm backend is installed"},
    tpu={"available": False, "error": "libtpu.so not found"},
)
WITH_GPU = _facts(
    cpu={"available": True, "backend": "cpu"},
    gpu={"available": True, "backend": "cuda", "devices": [{"id": 0, "platform": "gpu", "device_kind": "H100"}]},
)


def test_resolve_device_on_a_cpu_only_machine() -> None:
    assert resolve_device("cpu", CPU_ONLY) == ("cpu", None)
    assert resolve_device("auto", CPU_ONLY) == ("cpu", None)
    assert resolve_device(" CPU ", CPU_ONLY) == ("cpu", None)
    platform, reason = resolve_device("gpu", CPU_ONLY)
    assert platform is None and reason == "gpu is not available: no CUDA or ROCm backend is installed"
    platform, reason = resolve_device("tpu", CPU_ONLY)
    assert platform is None and "libtpu.so" in reason
    with pytest.raises(InvalidDeviceError, match="auto, cpu, gpu, tpu"):
        resolve_device("xpu", CPU_ONLY)


def test_resolve_device_auto_prefers_an_accelerator() -> None:
    assert resolve_device("auto", WITH_GPU) == ("gpu", None)
    platform, reason = resolve_device("tpu", WITH_GPU)
    assert platform is None and reason == "tpu is not available: no tpu platform"


def test_resolve_device_without_jax() -> None:
    info = DeviceInfo(
        jax_available=False, python_version="3", python_executable="py", probed_at="now",
        error="jax cannot be imported",
    )
    # The script runs on CPU: one that imports jax fails with its own ImportError (import_error).
    assert resolve_device("cpu", info) == ("cpu", None)
    assert resolve_device("auto", info) == ("cpu", None)
    assert resolve_device("gpu", info) == (None, "jax cannot be imported")


# --------------------------------------------------------------------------- NVML


def test_nvml_is_unusable_with_a_reason_unless_a_gpu_is_here() -> None:
    status = nvml_status()
    gpu = jaxrun.get_jax_device_info().platforms["gpu"]
    if gpu.available and status.usable:
        # NVML needs the NVIDIA driver's library and nvidia-ml-py (the optional `gpu` extra); where
        # it starts it sees every GPU, also those CUDA_VISIBLE_DEVICES hides from JAX.
        assert status.error is None and status.driver_version
        assert status.gpu_count >= (len(gpu.devices) if gpu.backend == "cuda" else 1)
        return
    assert status.usable is False
    assert status.error
    assert status.driver_version is None and status.gpu_count is None


def test_reinstalling_jax_or_jaxlib_changes_the_cache_key(tmp_path: Path) -> None:
    """The key names the installed files, read without importing them: the real jax, a stand-in
    'jax' package ahead of it on the path, then the stand-in reinstalled (its version file
    rewritten). Each key comes from a fresh interpreter, as jaxrun's parent never imports jax."""
    package = tmp_path / "site" / "jax"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('imported')\n")
    (package / "version.py").write_text("__version__ = '0.0.1'\n")
    code = "import sys; from jaxrun.discover import devices; print(devices._cache_key()); assert 'jax' not in sys.modules"

    def key(*path: Path) -> str:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, path), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    real = key()
    installed = key(tmp_path / "site")
    os.utime(package / "version.py", ns=(1, 1))  # what a reinstall does to the file's time
    reinstalled = key(tmp_path / "site")
    assert len({real, installed, reinstalled}) == 3


def test_the_facts_read_without_the_model_say_what_the_model_says() -> None:
    """The plan and the launch read the cached facts' JSON as it is (devices.DeviceFacts); the
    validated model (DeviceInfo) is made later: both read one file the same way."""
    from jaxrun.discover.devices import SCHEMA, DeviceFacts, device_facts, device_ids
    from jaxrun.results.base_model import SCHEMA_VERSION

    assert SCHEMA == SCHEMA_VERSION  # a cache of another version is probed again, never misread
    facts = device_facts()
    record = DeviceFacts(json.loads(facts.record.model_dump_json())).record
    assert record == facts.record
    for name, platform in facts.record.platforms.items():
        read = facts.platforms[name]
        assert (read.available, read.backend, read.error) == (platform.available, platform.backend, platform.error)
        assert device_ids(name, facts) == device_ids(name, facts.record)
    assert (facts.jax_available, facts.jax_version, facts.python_version) == \
        (facts.record.jax_available, facts.record.jax_version, facts.record.python_version)
