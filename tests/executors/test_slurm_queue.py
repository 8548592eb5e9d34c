"""How jaxrun reads Slurm's answers (executors/slurm_queue.py). The lines are Slurm 22.05's own,
recorded from the test cluster (tests/slurm_cluster.py) except PREEMPTED and OUT_OF_MEMORY, which
that cluster cannot produce (no preemption configured; memory kept by sampling, not cgroups): those
are the same format with the state a cgroup or preempting cluster writes. The states the test
cluster does produce are also met end to end in tests/executors/test_slurm_backend.py."""

from __future__ import annotations

import pytest

from jaxrun.core.failures import HINTS
from jaxrun.executors.slurm_queue import ENDED, ended, parse_oneliner

TIMED_OUT = ("JobId=3 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 Nice=0 Account=(null) "
             "QOS=(null) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 "
             "Reboot=0 ExitCode=0:15 RunTime=00:01:26 TimeLimit=00:01:00 SubmitTime=2026-11-27T16:48:59 "
             "StartTime=2026-11-27T16:49:03 EndTime=2026-11-27T16:50:29 NodeList=vm Command=(null) "
             "Comment=two words here WorkDir=/tmp")
ARRAY_TASK = ("JobId=7 ArrayJobId=6 ArrayTaskId=0 JobName=jaxrun-1a2b JobState=FAILED Reason=NonZeroExitCode "
              "ExitCode=3:0 NodeList=vm SubmitTime=2026-11-27T16:48:59 StartTime=2026-11-27T16:49:07 "
              "EndTime=2026-11-27T16:49:07")


def test_a_oneliner_is_read_key_by_key_with_spaces_in_values() -> None:
    fields = parse_oneliner(TIMED_OUT)
    assert fields["JobState"] == "TIMEOUT" and fields["Reason"] == "TimeLimit" and fields["ExitCode"] == "0:15"
    assert fields["Comment"] == "two words here" and fields["WorkDir"] == "/tmp"
    assert fields["UserId"] == "root(0)" and fields["TimeLimit"] == "00:01:00"
    assert parse_oneliner(ARRAY_TASK)["ArrayTaskId"] == "0"


@pytest.mark.parametrize(("state", "error_class"), [
    ("TIMEOUT", "timeout"), ("OUT_OF_MEMORY", "out_of_memory"), ("NODE_FAIL", "node_lost"),
    ("PREEMPTED", "node_lost"), ("BOOT_FAIL", "node_lost"), ("CANCELLED", "interrupted"), ("FAILED", "crashed"),
    ("DEADLINE", "timeout"), ("SPECIAL_EXIT", "crashed"),
])
def test_each_end_state_is_its_class_with_slurms_words(state: str, error_class: str) -> None:
    fields = parse_oneliner(TIMED_OUT.replace("JobState=TIMEOUT", f"JobState={state}"))
    got, line, hint = ended(fields)
    assert got == error_class
    assert f"(JobState={state}, Reason=TimeLimit, ExitCode=0:15, NodeList=vm)" in line
    if state in ENDED:
        assert line.startswith(ENDED[state].what)
    # A cancel Slurm reports is someone else's (jaxrun says its own, on Ctrl-C): never the Ctrl-C hint.
    assert (hint == HINTS[error_class]) == (state != "CANCELLED"), hint
    assert "Ctrl-C" not in hint


def test_a_memory_kill_by_sampling_is_out_of_memory_whatever_the_state_says() -> None:
    log = ("srun: error: vm: task 0: Killed\n"
           "slurmstepd: error: StepId=12.0 exceeded memory limit (620348 > 409600), being killed\n")
    got, line, _ = ended(parse_oneliner(ARRAY_TASK), log)
    assert got == "out_of_memory"
    assert "(StepId=12.0 exceeded memory limit (620348 > 409600); JobState=FAILED, ExitCode=3:0, NodeList=vm)" in line
    assert ended(parse_oneliner(ARRAY_TASK), "nothing about memory")[0] == "crashed"


def test_a_task_slurm_forgot_says_so() -> None:
    got, line, _ = ended(None)
    assert got == "crashed" and "Slurm no longer knows how it ended" in line
