"""A task's state read from the recorded Kueue shapes (tests/data/kueue/shapes, Kueue v0.19.2):
track A of sequences.json step by step, Kueue's pending messages in the policy's words, and the
worker's rules for stepping through the transition table and ignoring stale views."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpucommons.backends.kubernetes.observe import ClusterNames
from gpucommons.backends.kubernetes.task_state import pending_sentence, view_task
from gpucommons.domain.task import TaskState
from gpucommons.server.workers.cluster_steps import external_task_id, progress, steps
from gpucommons.testing.repo_data import KUEUE_DATA

SHAPES = KUEUE_DATA / "shapes"
NAMES = ClusterNames(
    teams_by_namespace={"team-nlp": "nlp"},
    pools_by_flavor={"h100": "h100"},
    classes_by_name={"training": "training"},
)
JOB = "commons-t0a1b2c3d4e"


def shape(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SHAPES / name).read_text())
    return data


def view(
    workload: str | None, pods: tuple[str, ...] = (), job: str | None = "job-running.json", **kw: Any
) -> Any:
    return view_task(
        "team-nlp",
        JOB,
        shape(job) if job else None,
        shape(workload) if workload else None,
        [shape(p) for p in pods],
        NAMES,
        **kw,
    )


def test_a_job_without_a_workload_yet_waits() -> None:
    seen = view(None, job="job-suspended.json")
    assert seen.state is TaskState.PENDING and seen.task_id == "t0a1b2c3d4e" and seen.team == "nlp"
    assert seen.ref == f"team-nlp/{JOB}"


def test_kueues_pending_message_is_said_with_the_policys_names() -> None:
    seen = view("02-pending-insufficient-quota.json", job="job-suspended.json")
    assert seen.state is TaskState.PENDING
    assert seen.message.startswith(
        "team nlp and its cohort have too little unused quota in pool h100: 8 more GPUs"
    )
    assert "(Kueue: couldn't assign flavors" in seen.message


def test_admitted_then_running_once_a_container_runs() -> None:
    admitted = view("04-admitted.json")
    assert admitted.state is TaskState.ADMITTED and (admitted.pool, admitted.gpus) == ("h100", 8)
    assert admitted.priority == "training"
    running = view("04b-admitted-podsready.json", pods=("pod-succeeded.json",))
    # a pod whose container has finished before the Workload is marked Finished is still the run
    assert running.state is TaskState.RUNNING


def test_an_eviction_is_preempting_while_the_quota_is_held_then_pending() -> None:
    evicted = view("05-evicted-preempted.json", job="job-suspended-after-eviction.json")
    assert evicted.state is TaskState.PREEMPTING and evicted.attempt == 1
    assert evicted.preempt_reason == "within_team"
    assert evicted.preempted_by_job_uid == "b2d4f6a8-0c1e-4a3b-8d5f-7e9a1c3b5d70"
    requeued = view("06-requeued.json", job="job-suspended-after-eviction.json")
    assert requeued.state is TaskState.PENDING and requeued.attempt == 1
    readmitted = view("07-readmitted.json")
    assert readmitted.state is TaskState.ADMITTED and readmitted.attempt == 1


def test_finished_tasks_say_how_with_the_pods_exit_code() -> None:
    done = view("08-finished-succeeded.json", pods=("pod-succeeded.json",))
    assert done.state is TaskState.SUCCEEDED and done.exit_code == 0
    failed = view("09-finished-failed.json", job="job-failed.json")
    assert failed.state is TaskState.FAILED


def test_a_workload_seen_before_its_job_waits_and_a_deleted_job_is_a_cancel() -> None:
    assert view("04-admitted.json", job=None, job_deleted=False) is None
    gone = view("04-admitted.json", job=None, job_deleted=True)
    assert gone.state is TaskState.CANCELLED and "deleted" in gone.message
    assert view("08-finished-succeeded.json", job=None, finished_before=True).state is TaskState.SUCCEEDED


def test_a_rejected_admission_check_deactivates_the_task() -> None:
    deactivated = view("12-deactivated-admission-check-rejected.json", job="job-suspended.json")
    assert deactivated.state is TaskState.CANCELLED and deactivated.message.startswith("Kueue deactivated it")


def test_outside_team_namespaces_there_is_no_task() -> None:
    assert view_task("kube-system", JOB, shape("job-running.json"), None, [], NAMES) is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
            "h100, previously considered podsets requests (0) + current podset request (24) > "
            "maximum capacity (16)",
            "more GPUs than team nlp may ever hold in pool h100 (at most 16 with borrowing)",
        ),
        ("something new", "Kueue: something new"),
    ],
)
def test_pending_sentences(message: str, expected: str) -> None:
    assert pending_sentence(message, "nlp", NAMES).startswith(expected)


def test_steps_take_the_legal_way_and_progress_orders_attempts() -> None:
    assert steps(TaskState.PENDING, TaskState.RUNNING) == [TaskState.ADMITTED, TaskState.RUNNING]
    assert steps(TaskState.RUNNING, TaskState.PENDING) == [TaskState.PREEMPTING, TaskState.PENDING]
    assert steps(TaskState.PENDING, TaskState.SUCCEEDED) == [
        TaskState.ADMITTED,
        TaskState.RUNNING,
        TaskState.SUCCEEDED,
    ]
    # the eviction ending attempt 0 arrives with Kueue's count 1 already
    assert progress(TaskState.PREEMPTING, 1, True) == progress(TaskState.PREEMPTING, 0, False)
    assert progress(TaskState.ADMITTED, 0, True) < progress(TaskState.RUNNING, 0, False)
    assert progress(TaskState.ADMITTED, 1, True) > progress(TaskState.PREEMPTING, 0, False)
    assert external_task_id("uid-1") == external_task_id("uid-1") != external_task_id("uid-2")
