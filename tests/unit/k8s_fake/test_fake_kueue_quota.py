"""Kueue's quota arithmetic in the fake cluster, on the objects `commons k8s render` makes of
examples/commons.yaml and the Jobs `task_job` makes: borrowing idle cohort quota up to the
borrowing limit, and the lender reclaiming it (InCohortReclamation)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucommons.backends.kubernetes import RenderOptions, checked_render
from gpucommons.backends.kubernetes.jobs import JobTask, task_job
from gpucommons.domain.task import CheckpointMode, CheckpointSpec
from gpucommons.policy import load_policy
from gpucommons.testing.fake_k8s import FakeCluster

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "commons.yaml"
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(time_scale=0) as fake:
        # Quota alone: no governance controller answers the admission check here.
        fake.apply_objects(checked_render(load_policy(EXAMPLE), RenderOptions(governance_check=False)))
        yield fake


def _job(
    task_id: str, team: str, gpus: int, pool: str = "h100", priority: str = "training"
) -> dict[str, Any]:
    task = JobTask(
        task_id,
        team,
        ("python", "train.py"),
        "ghcr.io/acme/train:1",
        gpus,
        priority,
        pool,
        checkpoint=CheckpointSpec(CheckpointMode.EVERY, 600),
    )
    return task_job(load_policy(EXAMPLE), task)


def _conditions(cluster: FakeCluster, team: str, task_id: str) -> dict[str, dict[str, Any]]:
    workload = cluster.workload_of(f"team-{team}", f"commons-{task_id}")
    assert workload is not None
    return {c["type"]: c for c in workload.get("status", {}).get("conditions", [])}


def test_a_team_borrows_idle_quota_and_the_lender_reclaims_it(cluster: FakeCluster) -> None:
    cluster.program("team-vision", "commons-v1", run_seconds=3600)
    cluster.create(_job("v1", "vision", 16))
    cluster.advance(5)
    assert _conditions(cluster, "vision", "v1")["Admitted"]["status"] == "True", "8 nominal + 8 borrowed"
    cluster.create(_job("n1", "nlp", 16))
    cluster.advance(1)
    evicted = _conditions(cluster, "vision", "v1")["Preempted"]
    assert evicted["reason"] == "InCohortReclamation"
    assert evicted["message"].endswith(
        "due to reclamation within the cohort; preemptor path: /company/research/nlp; "
        "preemptee path: /company/research/vision"
    )
    messages = [
        c["message"]
        for _, w in cluster.history("Workload", namespace="team-nlp")
        for c in w.get("status", {}).get("conditions", [])
        if c["type"] == "QuotaReserved"
    ]
    # nlp sees its 4 unlent H100s plus what the cohort tree still has idle (recsys lends 4 via
    # company): 12 of the 16, so 4 more are needed
    assert messages[0] == (
        "couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity, "
        "insufficient unused quota for nvidia.com/gpu in flavor h100, 4 more needed. "
        "Pending the preemption of 1 workload(s)"
    )
    # Kueue releases the quota once the Job has no active pod, while the pod still uses its grace period
    assert _conditions(cluster, "nlp", "n1")["Admitted"]["status"] == "True"
    stopping = cluster.pods_of("team-vision", "commons-v1")  # an Indexed Job of two 8-GPU pods
    assert len(stopping) == 2
    assert all(p["metadata"]["deletionTimestamp"] and p["status"]["phase"] == "Running" for p in stopping)
    requeued = _conditions(cluster, "vision", "v1")
    assert requeued["QuotaReserved"]["status"] == "False" and requeued["Requeued"]["status"] == "True"
    cluster.advance(300)  # the training class's 5-minute grace period
    assert cluster.pods_of("team-vision", "commons-v1") == []


def test_borrowing_stops_at_the_borrowing_limit(cluster: FakeCluster) -> None:
    cluster.create(_job("v2", "vision", 24))
    cluster.advance(1)
    pending = _conditions(cluster, "vision", "v2")["QuotaReserved"]
    assert pending["status"] == "False" and pending["message"] == (
        "couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity, "
        "insufficient quota for nvidia.com/gpu in flavor h100, "
        "previously considered podsets requests (0) + current podset request (24) > maximum capacity (16)"
    )


def test_lower_priority_work_of_the_same_team_waits_behind_higher(cluster: FakeCluster) -> None:
    for task_id, priority in (("r1", "experiment"), ("r2", "experiment"), ("r3", "production")):
        cluster.create(_job(task_id, "recsys", 8, priority=priority))
        cluster.advance(1)
    admitted = {
        t: _conditions(cluster, "recsys", t).get("Admitted", {}).get("status") for t in ("r1", "r2", "r3")
    }
    assert admitted["r3"] == "True" and admitted["r2"] != "True"
    assert _conditions(cluster, "recsys", "r1").get("Preempted", {}).get("reason") == "InClusterQueue"
