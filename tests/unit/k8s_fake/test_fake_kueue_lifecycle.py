"""The Kueue and kubelet emulators reproduce the recorded lifecycles (tests/data/kueue/shapes,
sequences.json): each recorded Workload, Job and Pod state appears, in the recorded order, among
the objects the fake cluster writes, equal to the recording but for uids, times and names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_k8s_helpers import (
    JOB,
    NAMESPACE,
    SHAPES,
    job_from_shape,
    normalise,
    setup_nlp,
    shape,
    without,
)

from gpucommons.testing.fake_k8s import FakeCluster

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(time_scale=0) as fake:
        yield fake


def _states(cluster: FakeCluster, kind: str, name_part: str) -> list[dict[str, Any]]:
    return [
        obj
        for event, obj in cluster.history(kind)
        if name_part in obj["metadata"]["name"] and event != "DELETED"
    ]


def _assert_in_order(states: list[dict[str, Any]], files: list[str], ignore: tuple[str, ...] = ()) -> None:
    """Each recorded file matches a written state, later than the previous file's match."""
    normalised = [normalise(without(s, *ignore)) for s in states]
    position = 0
    for name in files:
        wanted = normalise(without(shape(name), *ignore))
        found = next((i for i in range(position, len(normalised)) if normalised[i] == wanted), None)
        if found is None:
            closest = min(
                normalised[position:] or [{}], key=lambda s: len(json.dumps(s)) * 0 + _distance(s, wanted)
            )
            raise AssertionError(
                f"{name}: no written state matches after #{position}; closest differs by\n"
                + _diff(closest, wanted)
            )
        position = found + 1


def _distance(a: Any, b: Any) -> int:
    return len(set(_flat(a).items()) ^ set(_flat(b).items()))


def _flat(obj: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(obj, dict):
        out: dict[str, str] = {}
        for k, v in obj.items():
            out.update(_flat(v, f"{prefix}.{k}"))
        return out
    if isinstance(obj, list):
        out = {}
        for i, v in enumerate(obj):
            out.update(_flat(v, f"{prefix}[{i}]"))
        return out
    return {prefix: json.dumps(obj)}


def _diff(got: Any, wanted: Any) -> str:
    a, b = _flat(got), _flat(wanted)
    lines = [
        f"  {k}: written {a.get(k)} recorded {b.get(k)}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]
    return "\n".join(lines[:40])


def _steps(track: str) -> list[str]:
    sequences = json.loads((SHAPES / "sequences.json").read_text())
    return [step["file"] for step in sequences["tracks"][track]["steps"]]


def _preempted_story(cluster: FakeCluster, exit_code: int = 0) -> None:
    """The recorded scenario: the queue full of an equal-priority job, so our job waits (02); it
    is admitted and runs; a higher-priority job of the same queue preempts it (InClusterQueue);
    it is readmitted and ends."""
    setup_nlp(cluster)
    cluster.program(NAMESPACE, "commons-blocker", run_seconds=60)
    cluster.create(job_from_shape(job="commons-blocker", gpus=32))
    cluster.advance(1)
    cluster.program(NAMESPACE, JOB, run_seconds=600, exit_code=exit_code)
    cluster.create(job_from_shape())
    cluster.advance(120)
    preemptor = job_from_shape(job="commons-preemptor", gpus=32)
    preemptor["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    cluster.program(NAMESPACE, "commons-preemptor", run_seconds=100)
    cluster.create(preemptor)
    cluster.advance(200)
    cluster.advance(700)


def test_track_a_workload_states_match_the_recorded_sequence(cluster: FakeCluster) -> None:
    _preempted_story(cluster)
    files = [f for f in _steps("A-preempted-readmitted-succeeded") if not f.startswith(("job-", "pod-"))]
    assert files[0] == "01-created.json" and files[-1] == "08-finished-succeeded.json"
    states = _states(cluster, "Workload", JOB)
    _assert_in_order(states, files)
    evicted = next(s for s in states if s.get("status", {}).get("schedulingStats"))
    message = next(c["message"] for c in evicted["status"]["conditions"] if c["type"] == "Evicted")
    preemptor = cluster.workload_of(NAMESPACE, "commons-preemptor")
    assert preemptor is not None and preemptor["metadata"]["uid"] in message
    assert message.endswith(
        "due to prioritization in the ClusterQueue; preemptor path: /gpucommons/nlp; "
        "preemptee path: /gpucommons/nlp"
    )


def test_track_a_job_states_match_the_recorded_sequence(cluster: FakeCluster) -> None:
    _preempted_story(cluster)
    states = _states(cluster, "Job", JOB)
    files = [f for f in _steps("A-preempted-readmitted-succeeded") if f.startswith("job-")]
    assert files == [
        "job-suspended.json",
        "job-running.json",
        "job-suspended-after-eviction.json",
        "job-running.json",
        "job-complete.json",
    ]
    _assert_in_order(states, files[:3], ignore=())
    _assert_in_order(states, files[3:], ignore=("metadata.generation",))
    # created 1, started +1, stopped +2 (suspend, then the template restored), started again +1
    assert {s["metadata"]["generation"] for s in states if s.get("status", {}).get("succeeded")} == {5}


def test_track_a_pods_end_as_recorded_143_when_preempted_and_0_when_done(cluster: FakeCluster) -> None:
    _preempted_story(cluster)
    pods = _states(cluster, "Pod", JOB)
    _assert_in_order(pods, ["pod-terminated-preempted.json"])
    _assert_in_order(pods, ["pod-succeeded.json"], ignore=("spec", "metadata.deletionTimestamp"))
    preempted = next(p for p in pods if p["status"].get("phase") == "Failed")
    assert preempted["metadata"]["deletionGracePeriodSeconds"] == 30
    terminated = preempted["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (143, "Error")


def test_track_a_failed_ends_with_the_recorded_failed_states(cluster: FakeCluster) -> None:
    _preempted_story(cluster, exit_code=1)
    assert [f for f in _steps("A-failed") if f != "07-readmitted.json"] == [
        "job-failed.json",
        "09-finished-failed.json",
    ]
    _assert_in_order(_states(cluster, "Workload", JOB), ["07-readmitted.json", "09-finished-failed.json"])
    _assert_in_order(_states(cluster, "Job", JOB), ["job-failed.json"], ignore=("metadata.generation",))


def _check_patch(cluster: FakeCluster, name: str, state: str, message: str, **extra: Any) -> None:
    """The external controller's write: a JSON merge patch of the Workload's status, through the
    real kubernetes client (`application/merge-patch+json`, as Kueue's docs advise for CRDs)."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = cluster.url
    configuration.api_key = {"BearerToken": cluster.token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    api = client.CustomObjectsApi(client.ApiClient(configuration))
    entry = {
        "name": "gpucommons-governance",
        "state": state,
        "message": message,
        "lastTransitionTime": cluster.now_text(),
        **extra,
    }
    api.patch_namespaced_custom_object_status(
        "kueue.x-k8s.io",
        "v1beta2",
        NAMESPACE,
        "workloads",
        name,
        {"status": {"admissionChecks": [entry]}},
        _content_type="application/merge-patch+json",
    )


def _track_b(cluster: FakeCluster) -> str:
    setup_nlp(cluster, with_check=True)
    cluster.create(job_from_shape())
    cluster.advance(1)
    workload = cluster.workload_of(NAMESPACE, JOB)
    assert workload is not None
    return str(workload["metadata"]["name"])


def test_track_b_an_approved_check_admits_and_starts_the_job_with_its_pod_set_updates(
    cluster: FakeCluster,
) -> None:
    name = _track_b(cluster)
    _check_patch(
        cluster,
        name,
        "Pending",
        "waiting for GPU Commons governance review of 8 x nvidia.com/gpu (h100) for team-nlp",
    )
    cluster.advance(1)
    _check_patch(
        cluster,
        name,
        "Ready",
        "approved: grant g-20260901-0042",
        podSetUpdates=[{"name": "main", "annotations": {"gpucommons.example.com/grant": "g-20260901-0042"}}],
    )
    cluster.advance(5)
    files = _steps("B-admission-check-approved")
    _assert_in_order(_states(cluster, "Workload", JOB), files, ignore=("status.conditions.0",))
    job = cluster.get("Job", JOB, NAMESPACE)
    assert job is not None and job["spec"]["suspend"] is False
    assert (
        job["spec"]["template"]["metadata"]["annotations"]["gpucommons.example.com/grant"]
        == "g-20260901-0042"
    )


def test_track_b_a_rejected_check_deactivates_the_workload_as_recorded(cluster: FakeCluster) -> None:
    name = _track_b(cluster)
    _check_patch(
        cluster,
        name,
        "Pending",
        "waiting for GPU Commons governance review of 8 x nvidia.com/gpu (h100) for team-nlp",
    )
    cluster.advance(1)
    _check_patch(cluster, name, "Rejected", "denied: team-nlp has no h100 GPU-hour budget left this period")
    cluster.advance(5)
    _assert_in_order(_states(cluster, "Workload", JOB), _steps("B-admission-check-rejected"))
    job = cluster.get("Job", JOB, NAMESPACE)
    assert job is not None and job["spec"]["suspend"] is True and not cluster.pods_of(NAMESPACE, JOB)


def test_a_retry_check_releases_the_quota_and_requeues(cluster: FakeCluster) -> None:
    name = _track_b(cluster)
    _check_patch(cluster, name, "Retry", "budget service unreachable")
    cluster.advance(1)
    states = _states(cluster, "Workload", JOB)
    evicted = [
        s
        for s in states
        if any(
            c["type"] == "Evicted" and c["status"] == "True"
            for c in s.get("status", {}).get("conditions", [])
        )
    ]
    assert evicted, "the Retry evicts"
    reason = next(c for c in evicted[0]["status"]["conditions"] if c["type"] == "Evicted")
    assert (reason["reason"], reason["message"]) == (
        "AdmissionCheck",
        'Evicted due to AdmissionCheck in Retry state: "gpucommons-governance" (budget service unreachable)',
    )
    check = evicted[0]["status"]["admissionChecks"][0]
    assert (check["state"], check["message"], check["retryCount"]) == (
        "Pending",
        "Reset to Pending after eviction. Previously: Retry",
        1,
    )
    final = states[-1]["status"]
    assert final.get("admission") is not None, "requeued (BackoffFinished) and its quota reserved again"
    requeued = next(c for c in final["conditions"] if c["type"] == "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("True", "BackoffFinished")


def test_a_job_past_its_active_deadline_fails_and_its_workload_finishes(cluster: FakeCluster) -> None:
    setup_nlp(cluster)
    job = job_from_shape()
    job["spec"]["activeDeadlineSeconds"] = 60
    cluster.create(job)
    cluster.advance(120)
    failed = cluster.get("Job", JOB, NAMESPACE)
    assert failed is not None
    reasons = {c["type"]: c["reason"] for c in failed["status"]["conditions"]}
    assert reasons["Failed"] == "DeadlineExceeded"
    workload = cluster.workload_of(NAMESPACE, JOB)
    assert workload is not None
    finished = next(c for c in workload["status"]["conditions"] if c["type"] == "Finished")
    assert (finished["reason"], finished["message"]) == (
        "Failed",
        "Job was active longer than specified deadline",
    )


def test_a_user_deactivated_workload_stops_and_waits_until_reactivated(cluster: FakeCluster) -> None:
    setup_nlp(cluster)
    cluster.create(job_from_shape())
    cluster.advance(5)
    workload = cluster.workload_of(NAMESPACE, JOB)
    assert workload is not None
    name = workload["metadata"]["name"]
    cluster.patch("Workload", name, {"spec": {"active": False}}, NAMESPACE)
    cluster.advance(31)
    stopped = cluster.get("Workload", name, NAMESPACE)
    assert stopped is not None
    conditions = {c["type"]: c for c in stopped["status"]["conditions"]}
    assert (conditions["Evicted"]["reason"], conditions["Evicted"]["message"]) == (
        "Deactivated",
        "The workload is deactivated",
    )
    assert (conditions["Requeued"]["status"], conditions["Requeued"]["reason"]) == ("False", "Deactivated")
    assert "admission" not in stopped["status"] and cluster.pods_of(NAMESPACE, JOB) == []
    cluster.patch("Workload", name, {"spec": {"active": True}}, NAMESPACE)
    cluster.advance(5)
    again = cluster.get("Workload", name, NAMESPACE)
    assert again is not None
    conditions = {c["type"]: c for c in again["status"]["conditions"]}
    assert conditions["Admitted"]["status"] == "True"
    assert conditions["Evicted"]["message"] == "Previously: The workload is deactivated"
