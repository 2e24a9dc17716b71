"""Jobs made with kubectl on a cluster GPU Commons governs: shown as tasks of their namespace's team,
billed like any other, and held by the governance AdmissionCheck to the same budget and class rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.kubernetes.conftest import KubePlatform, csv_rows

from gpucommons.testing.fake_k8s import FakeCluster

GOVERNED = """
cluster:
  name: governed
  pools:
    - {name: gpu, gpu_type: H100, nodes: 4, gpus_per_node: 4, price_per_gpu_hour: 1000.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 2s}
  - {name: reserved, value: 500, grace_period: 2s, teams: [a]}
default_priority_class: normal
teams:
  - name: a
    quota:
      gpu: {gpus: 8}
  - name: c
    quota:
      gpu: {gpus: 8}
    budget: {monthly: 1, enforce: hard}
"""


def kubectl_job(
    namespace: str, name: str, gpus: int, seconds: int, priority: str | None = None
) -> dict[str, Any]:
    """A Job as a person writes it for Kueue: the queue label, no GPU Commons labels."""
    labels = {"kueue.x-k8s.io/queue-name": "default"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "ghcr.io/acme/train:1.0",
                            "command": ["sleep", str(seconds)],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                }
            },
        },
    }


def _task_of(platform: KubePlatform, ref: str) -> dict[str, Any] | None:
    tasks = json.loads(platform.cli("tasks", "--json", "--limit", "1000").stdout)
    found = [t for t in tasks if t.get("cluster_ref") == ref]
    return found[0] if found else None


def _check(cluster: FakeCluster, namespace: str, job: str) -> dict[str, Any]:
    workload = cluster.workload_of(namespace, job) or {}
    checks = (workload.get("status") or {}).get("admissionChecks") or [{}]
    return dict(checks[0])


def test_a_kubectl_job_is_shown_and_billed_to_its_namespaces_team(
    k8s_platform: Callable[..., KubePlatform], cluster: FakeCluster, tmp_path: Path
) -> None:
    platform = k8s_platform(GOVERNED)
    cluster.create(kubectl_job("team-a", "notebook-run", gpus=4, seconds=2))
    platform.wait(
        lambda: (_task_of(platform, "team-a/notebook-run") or {}).get("state") == "succeeded",
        what="the kubectl Job to be seen and finish",
        timeout=60,
    )
    task = _task_of(platform, "team-a/notebook-run")
    assert task is not None
    assert task["origin"] == "cluster" and task["team"] == "a" and task["gpus"] == 4
    assert task["submitted_by"] == "kubernetes" and task["exit_code"] == 0
    usage = tmp_path / "usage.csv"
    platform.cli("usage", "export", "--out", str(usage))
    rows = [r for r in csv_rows(usage) if r["task_id"] == task["id"]]
    assert len(rows) == 1 and rows[0]["team"] == "a" and rows[0]["gpus"] == "4"
    assert rows[0]["end_reason"] == "succeeded"


def test_the_governance_check_holds_kubectl_jobs_to_budgets_and_class_rules(
    k8s_platform: Callable[..., KubePlatform], cluster: FakeCluster
) -> None:
    platform = k8s_platform(GOVERNED)
    # c spends past its $1 budget with a task of its own (4 GPUs × 2 s at $1,000 per GPU-hour)
    spent = platform.submit("--team", "c", "--gpus", "4", "--", "sleep", "2")
    platform.wait(lambda: platform.task(spent)["state"] == "succeeded", what="c's first task", timeout=60)

    def exhausted() -> bool:
        budgets = platform.api("/api/v1/budgets")
        assert isinstance(budgets, list)
        return any(b["team"] == "c" and b["spent_cents"] >= b["budget_cents"] for b in budgets)

    platform.wait(exhausted, what="c's budget to be spent", timeout=60)

    # a kubectl Job of team c is held by the check with the budget's sentence, and never runs
    cluster.create(kubectl_job("team-c", "over-budget", gpus=4, seconds=2))
    platform.wait(
        lambda: (
            _check(cluster, "team-c", "over-budget").get("state") == "Retry"
            or "budget" in _check(cluster, "team-c", "over-budget").get("message", "")
        ),
        what="the check to hold the Job",
        timeout=60,
    )
    assert "budget" in _check(cluster, "team-c", "over-budget")["message"]
    held = _task_of(platform, "team-c/over-budget")
    assert held is not None and held["origin"] == "cluster" and held["started_at"] is None
    assert cluster.pods_of("team-c", "over-budget") == []

    # a class closed to team c: Rejected, Kueue deactivates the Workload, the task ends cancelled
    cluster.create(kubectl_job("team-c", "wrong-class", gpus=4, seconds=2, priority="reserved"))
    platform.wait(
        lambda: (_task_of(platform, "team-c/wrong-class") or {}).get("state") == "cancelled",
        what="the closed class to be refused",
        timeout=60,
    )
    refused = _task_of(platform, "team-c/wrong-class")
    assert refused is not None and "reserved for team a" in refused["message"]
    assert cluster.pods_of("team-c", "wrong-class") == []


def test_cancel_deletes_the_job_and_policy_apply_reaches_the_cluster(
    k8s_platform: Callable[..., KubePlatform], cluster: FakeCluster, tmp_path: Path
) -> None:
    platform = k8s_platform(GOVERNED)
    task = platform.submit("--team", "a", "--gpus", "4", "--", "sleep", "120")
    platform.wait(lambda: platform.task(task)["state"] == "running", what="the task to run", timeout=60)
    platform.cli("cancel", task)
    platform.wait(lambda: platform.task(task)["state"] == "cancelled", what="the cancel", timeout=60)
    assert cluster.get("Job", f"commons-{task}", "team-a") is None

    raised = tmp_path / "raised.yaml"
    raised.write_text(GOVERNED.replace("gpu: {gpus: 8}\n  - name: c", "gpu: {gpus: 6}\n  - name: c"))
    platform.cli("policy", "apply", str(raised))
    queue = cluster.get("ClusterQueue", "a") or {}
    quota = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert str(quota) == "6"
