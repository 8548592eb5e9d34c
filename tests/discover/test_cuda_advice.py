"""What jaxrun advises installing for a GPU is one function of the CUDA version the NVIDIA driver
supports (13.x or newer: cuda13; 12.x: cuda12; older: update the driver), as the README picks
it, and every place that gives advice uses it: `jaxrun devices` and `jaxrun check` once said
`jax[cuda12]` and `jaxrun[gpu]` on a driver of CUDA 13. No GPU here: the driver's versions are
recorded facts; the function that reads the real one runs too (None where there is no driver)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import REPO_ROOT, jaxrun

import jaxrun as jaxrun_api
from jaxrun.discover.devices import with_install_advice
from jaxrun.discover.nvml import CUDA_BUILDS, cuda_build, cuda_install_advice, driver_cuda_version
from jaxrun.results.models import DeviceInfo

NOT_INSTALLED = "no CUDA or ROCm backend is installed"


@pytest.mark.parametrize(("version", "build"), [
    ((13, 0), "cuda13"), ((13, 2), "cuda13"), ((14, 0), "cuda13"),  # a newer driver runs the newest build
    ((12, 0), "cuda12"), ((12, 9), "cuda12"),
    ((11, 8), None), (None, None),
])
def test_the_build_is_a_function_of_the_drivers_cuda_version(version, build) -> None:
    assert cuda_build(version) == build
    advice = cuda_install_advice(version)
    if build is not None:
        assert advice == f"pip install 'jax[{build}]': the NVIDIA driver supports CUDA {version[0]}.{version[1]}"
        assert re.findall(r"cuda\d+", advice) == [build]  # one build named, never both
    elif version is not None:
        assert advice.startswith("the NVIDIA driver supports CUDA 11.8, older than") and "update the driver" in advice
        assert "pip install" not in advice
    else:  # no driver: each build with the driver it needs
        assert "'jax[cuda13]' for 13.x or newer, 'jax[cuda12]' for 12.x" in advice and "nvidia-smi" in advice


def _facts(installed: bool | None, error: str | None) -> DeviceInfo:
    return DeviceInfo.model_validate({
        "jax_available": True, "python_version": "3.11", "python_executable": "python", "probed_at": "2026-01-01T00:00:00Z",
        "platforms": {"cpu": {"name": "cpu", "available": True, "installed": True, "backend": "cpu"},
                      "gpu": {"name": "gpu", "available": False, "installed": installed, "error": error}}})


@pytest.mark.parametrize("version", [(13, 0), (12, 4), (11, 8), None])
def test_the_device_facts_of_a_machine_without_a_gpu_backend_carry_the_advice_for_its_driver(version) -> None:
    gpu = with_install_advice(_facts(False, NOT_INSTALLED), version).platforms["gpu"]
    assert gpu.error == f"{NOT_INSTALLED} ({cuda_install_advice(version)})"
    # An installed backend that did not start says its own words, with no advice to install anything.
    broken = _facts(True, "CUDA_ERROR_NO_DEVICE")
    assert with_install_advice(broken, version) == broken


def test_the_real_facts_advise_for_the_real_driver() -> None:
    found = driver_cuda_version()
    assert found is None or (isinstance(found, tuple) and found[0] >= 1)
    gpu = jaxrun_api.get_jax_device_info(refresh=True).platforms["gpu"]
    if gpu.installed is False:
        assert gpu.error == f"{NOT_INSTALLED} ({cuda_install_advice(found)})"


def test_no_other_place_names_a_cuda_build() -> None:
    """Advice that names a CUDA build (or the gpu extra, which is cuda12) comes from the function:
    no string of src/jaxrun but its table names one (docstrings aside)."""
    named = re.compile(r"cuda1\d|\[gpu\]|jax\[cuda")
    found = []
    for path in sorted((REPO_ROOT / "src" / "jaxrun").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                    and named.search(node.value):
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {node.value!r}")
    assert found == [f"src/jaxrun/discover/nvml.py:{line}: {build!r}" for line, build in _table_lines()], found
    assert [build for _, build in CUDA_BUILDS] == ["cuda13", "cuda12"]


def _table_lines() -> list[tuple[int, str]]:
    source = (REPO_ROOT / "src" / "jaxrun" / "discover" / "nvml.py").read_text(encoding="utf-8")
    return [(number, build) for number, line in enumerate(source.splitlines(), 1) if line.startswith("CUDA_BUILDS")
            for build in re.findall(r'"(cuda\d+)"', line)]


@pytest.mark.slow
def test_jaxrun_devices_and_check_give_the_advice(tmp_path: Path) -> None:
    advice = cuda_install_advice(driver_cuda_version())
    installed = jaxrun_api.get_jax_device_info().platforms["gpu"].installed
    for command in (("devices", "--refresh", "--json"), ("devices",), ("check",)):
        done = jaxrun(*command)
        shown = " ".join(done.stdout.replace("│", " ").split())  # a table's cell, wrapped over lines
        assert advice in shown or installed, done.stdout
        assert not re.search(r"cuda1\d|\[gpu\]", shown.replace(advice, "")), done.stdout
