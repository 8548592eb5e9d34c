"""One failure table, one path: a GPU out-of-memory is handled the same way by every executor.

There is no GPU here, so the attempt and the device facts are fakes (tests/fake_gpu.py); the rest
is real: the options, the runner's policy loop over the failure table, the sequential, local
parallel and Ray executors (a real local Ray), the sinks. The same job, with the same options,
must end with the same attempts, device and fallback reason on all three.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import fake_gpu
import pytest
from fake_gpu import FakeAttempt, GpuFacts
from helpers import Recorder

from jaxrun.config.options import BatchOptions
from jaxrun.executors.base import make_executor
from jaxrun.plan.job import Job
from jaxrun.results.models import ScriptResult
from jaxrun.run.execute import run_job


def _jobs(tmp_path: Path, platform: str) -> list[Job]:
    script = tmp_path / "model.py"
    script.write_text("import jax\n")  # never launched: the attempt is a fake
    return [Job(index=0, script=script, name="model", file_name="model", device="gpu", platform=platform,
                results_dir=tmp_path / "r")]


def _run(backend: str, jobs: int, tmp_path: Path, *, retries: int, fallback: bool = True) -> tuple[ScriptResult, FakeAttempt]:
    options = BatchOptions.build("api", paths=[tmp_path], device="gpu", backend=backend, jobs=jobs,
                                 retries=retries, fallback=fallback, results_dir=tmp_path / "r")
    executor = make_executor(options, GpuFacts(1)())  # local parallel: a pool of one (fake) GPU
    fake = FakeAttempt({0: "out_of_memory"})
    # Ray would ask the cluster for a GPU it does not have here, so its job is planned on none;
    # the worker's runner still starts on the (fake) GPU the device facts report.
    planned = None if backend == "ray" else "gpu"
    sink = Recorder()
    executor.run(_jobs(tmp_path, planned), functools.partial(run_job, attempt=fake, read_facts=GpuFacts(1)), sink)
    assert sink.started == ["model"]
    (result,) = sink.results.values()
    # run_job on a Ray worker calls a copy of the fake: its calls are not seen here.
    return result, fake


def _path(result: ScriptResult) -> list[tuple[str, str | None]]:
    return [(a.device, a.error_class) for a in result.attempts]


BACKENDS = [("sequential", "local", 1), ("local parallel", "local", 2), ("ray", "ray", 1)]
# The Ray cases start a local Ray instance (~15 s): slow.
PARAMS = [pytest.param(b, marks=pytest.mark.slow) if b[1] == "ray" else b for b in BACKENDS]


@pytest.fixture(scope="module")
def ray_for_this_module():  # type: ignore[no-untyped-def]
    ray = pytest.importorskip("ray")
    # The fakes live in a test module the Ray workers cannot import: ship them by value.
    ray.cloudpickle.register_pickle_by_value(fake_gpu)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(params=PARAMS, ids=[b[0] for b in BACKENDS])
def backend(request):  # type: ignore[no-untyped-def]
    if request.param[1] == "ray":
        request.getfixturevalue("ray_for_this_module")
    return request.param[1:]


def test_gpu_oom_falls_back_to_cpu_on_every_backend(backend, tmp_path: Path) -> None:
    """No GPU here: fake attempt and facts. Same attempts, device and reason on all three."""
    name, jobs = backend
    result, fake = _run(name, jobs, tmp_path, retries=0)
    assert _path(result) == [("gpu", "out_of_memory"), ("cpu", None)]
    assert result.success and result.device_used == "cpu" and result.device_requested == "gpu"
    assert result.fallback_reason == "gpu failed with out_of_memory: RESOURCE_EXHAUSTED: out of memory on gpu"
    if name != "ray":
        assert [c[0] for c in fake.calls] == ["gpu", "cpu"]


def test_gpu_oom_is_retried_before_the_fallback_on_every_backend(backend, tmp_path: Path) -> None:
    """No GPU here: fake attempt and facts. One retry on the GPU, then the CPU, everywhere."""
    name, jobs = backend
    result, _ = _run(name, jobs, tmp_path, retries=1)
    assert _path(result) == [("gpu", "out_of_memory"), ("gpu", "out_of_memory"), ("cpu", None)]
    assert result.success and result.device_used == "cpu"


def test_gpu_oom_without_fallback_is_a_failure_on_every_backend(backend, tmp_path: Path) -> None:
    """No GPU here: fake attempt and facts. --no-fallback leaves the out-of-memory as the result."""
    name, jobs = backend
    result, _ = _run(name, jobs, tmp_path, retries=0, fallback=False)
    assert _path(result) == [("gpu", "out_of_memory")]
    assert not result.success and result.error_class == "out_of_memory" and result.device_used == "gpu"
    assert result.fallback_reason is None
