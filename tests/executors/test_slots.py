"""The slot logic, driven with plain device lists (this machine has no GPU, so no real CUDA here)."""

from __future__ import annotations

import threading
import time

import pytest

from jaxrun.errors import UsageError
from jaxrun.executors.slots import Slot, SlotPool, cpu_slots, gpu_slots, merge_xla_flags


def test_one_gpu_per_job():
    slots = gpu_slots([0, 1, 2, 3])
    assert [s.gpus for s in slots] == [(0,), (1,), (2,), (3,)]
    assert slots[2].env() == {"CUDA_VISIBLE_DEVICES": "2", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def test_several_gpus_per_job_leave_no_partial_group():
    slots = gpu_slots([0, 1, 2, 3, 4], gpus_per_job=2)
    assert [s.gpus for s in slots] == [(0, 1), (2, 3)]
    assert slots[1].env()["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_shared_gpu_gets_a_memory_fraction_and_spreads_first():
    slots = gpu_slots([0, 1], jobs_per_gpu=2)
    # The first jobs land on different GPUs; sharing starts only when every GPU has a job.
    assert [s.gpus for s in slots] == [(0,), (1,), (0,), (1,)]
    assert all(s.memory_fraction == pytest.approx(0.45) for s in slots)
    assert slots[0].env()["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.450"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gpus_per_job": 0}, "must be >= 1"),
        ({"gpus_per_job": 3}, "needs at least 3 GPUs"),
        ({"gpus_per_job": 2, "jobs_per_gpu": 2}, "not both"),
    ],
)
def test_bad_gpu_layouts_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message):
        gpu_slots([0, 1], **kwargs)


def test_cpu_cores_are_divided_without_overlap():
    slots = cpu_slots(2, cores=[0, 1, 2, 3])
    assert [s.cpus for s in slots] == [(0, 2), (1, 3)]
    assert slots[0].env()["OMP_NUM_THREADS"] == "2"
    single = cpu_slots(2, cores=[0, 1])
    assert [s.cpus for s in single] == [(0,), (1,)]
    # Thread counts only: an XLA flag would change JAX's compilation cache key under --jobs N.
    assert single[0].env() == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def test_more_jobs_than_cores_share_cores():
    slots = cpu_slots(3, cores=[0, 1])
    assert [s.cpus for s in slots] == [(0,), (1,), (0,)]


def test_merge_xla_flags_keeps_the_users_settings():
    merged = merge_xla_flags("--xla_cpu_multi_thread_eigen=true --foo=1", ["--xla_cpu_multi_thread_eigen=false", "--bar=2"])
    assert merged == "--xla_cpu_multi_thread_eigen=true --foo=1 --bar=2"
    assert merge_xla_flags(None, ["--a=1"]) == "--a=1"


def test_pool_waits_for_a_free_slot():
    pool = SlotPool(gpu_slots([0]))
    first = pool.acquire()
    assert first is not None and pool.free == 0
    assert pool.acquire(timeout=0.05) is None
    got: list[Slot | None] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=5)))
    waiter.start()
    time.sleep(0.05)
    pool.release(first)
    waiter.join(5)
    assert got == [first]


def test_pool_avoids_the_gpus_that_ran_out_of_memory():
    pool = SlotPool(gpu_slots([0, 1]))
    on_zero = pool.acquire()
    assert on_zero is not None and on_zero.gpus == (0,)
    pool.release(on_zero)
    other = pool.acquire(avoid_gpus=on_zero.gpus)
    assert other is not None and other.gpus == (1,)
    # With only GPU 0 there is nowhere else to go: None at once, not a wait forever.
    single = SlotPool(gpu_slots([0]))
    assert single.acquire(avoid_gpus=[0], timeout=None) is None


def test_release_of_a_foreign_slot_is_refused():
    pool = SlotPool(cpu_slots(1, cores=[0]))
    slot = pool.acquire()
    assert slot is not None
    pool.release(slot)
    with pytest.raises(ValueError, match="not taken"):
        pool.release(slot)
    with pytest.raises(UsageError):
        SlotPool([])
