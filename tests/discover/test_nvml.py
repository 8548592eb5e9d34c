"""NVML utilisation sampling. This machine has no NVIDIA GPU, so the sampler is driven with a
stand-in for the pynvml module that replays recorded utilisation readings (recorded fixtures
stand in where the real thing cannot run); the real module is exercised only for its absence here."""

from __future__ import annotations

import time

import pytest
from fake_gpu import RecordedNvml

from jaxrun.discover.nvml import UtilizationSampler, nvml_status, visible_gpus


@pytest.mark.parametrize(
    "value, expected",
    [(None, None), ("0", ["0"]), ("1,3", ["1", "3"]), ("", []), ("-1", []), ("2,-1,3", ["2"]),
     ("GPU-abc, 1", ["GPU-abc", "1"])],
)
def test_visible_gpus_follows_cuda_rules(value, expected):
    assert visible_gpus(value) == expected


def test_sampler_averages_over_samples_and_only_the_jobs_gpus():
    nvml = RecordedNvml({0: [100, 100, 100, 100], 1: [40, 60, 40, 60]})
    sampler = UtilizationSampler(["1"], interval=0.01, nvml=nvml).start()
    time.sleep(0.15)
    sampler.stop()
    value, reason = sampler.result()
    assert reason is None
    assert 0.40 <= value <= 0.60  # GPU 0's 100% must not leak into this job's figure
    assert set(nvml.queried) == {1}
    assert nvml.initialised and nvml.shut_down


def test_sampler_by_uuid_and_all_gpus():
    nvml = RecordedNvml({0: [20], 1: [80]}, uuids={"GPU-xyz": 1})
    by_uuid = UtilizationSampler(["GPU-xyz"], interval=0.01, nvml=nvml).start()
    time.sleep(0.05)
    by_uuid.stop()
    assert by_uuid.result() == (pytest.approx(0.8), None)
    every = UtilizationSampler(None, interval=0.01, nvml=RecordedNvml({0: [20], 1: [80]})).start()
    time.sleep(0.05)
    every.stop()
    assert every.result() == (pytest.approx(0.5), None)


def test_no_gpu_or_no_sample_is_null_with_a_reason():
    hidden = UtilizationSampler([], interval=0.01, nvml=RecordedNvml({0: [50]})).start()
    time.sleep(0.03)
    hidden.stop()
    assert hidden.result() == (None, "the job could see no GPU")

    class Broken(RecordedNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("Driver Not Loaded")

    broken = UtilizationSampler(None, nvml=Broken({0: [50]})).start()
    broken.stop()
    value, reason = broken.result()
    assert value is None and "Driver Not Loaded" in reason


def test_real_nvml_status_says_why_it_is_unusable():
    status = nvml_status()
    if status.usable:  # on a machine with an NVIDIA driver
        assert status.gpu_count is not None and status.driver_version
    else:
        assert status.error and status.gpu_count is None
