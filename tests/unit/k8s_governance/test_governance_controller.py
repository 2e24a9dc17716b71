"""The governance controller against the fake cluster over HTTP: Jobs created as a kubectl user
creates them, Kueue's admission-check emulation, the real `kubernetes` client underneath."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from governance_helpers import SPENT, policy

from gpucommons.backends.kubernetes import checked_render
from gpucommons.backends.kubernetes.admission_check import FIELD_MANAGER, GovernanceController
from gpucommons.backends.kubernetes.connection import connect
from gpucommons.backends.kubernetes.governance import CheckState
from gpucommons.backends.kubernetes.jobs import JobOptions, JobTask, task_job
from gpucommons.domain.model import Policy
from gpucommons.testing.fake_k8s import FakeCluster

pytest.importorskip("kubernetes")
pytestmark = pytest.mark.timeout(60)

KEY = b"shared by the server and the controller"
CHECK = "gpucommons-governance"


class Setup:
    """The rendered policy on a fake cluster, and a controller whose policy and spend a test sets."""

    def __init__(self, cluster: FakeCluster, tmp: Path) -> None:
        self.cluster = cluster
        self.policy = policy()
        self.spend: dict[str, int] = {}
        cluster.apply_objects(checked_render(self.policy))
        self.controller = GovernanceController(
            connect(cluster.kubeconfig(tmp)),
            lambda: self.policy,
            lambda: self.spend,
            cluster.now,
            grant_key=KEY,
            resync_s=1,
            backoff_s=0.05,
        )

    def workload(self, job: str, namespace: str = "team-nlp") -> dict[str, Any]:
        found = self.cluster.workload_of(namespace, job)
        assert found is not None, f"no Workload for {namespace}/{job}"
        return found

    def check(self, job: str, namespace: str = "team-nlp") -> dict[str, Any]:
        entries = self.workload(job, namespace)["status"]["admissionChecks"]
        return next(e for e in entries if e["name"] == CHECK)

    def condition(self, job: str, kind: str, namespace: str = "team-nlp") -> dict[str, Any]:
        conditions = self.workload(job, namespace)["status"]["conditions"]
        return next((c for c in conditions if c["type"] == kind), {})

    def admitted(self, job: str, namespace: str = "team-nlp") -> bool:
        return self.condition(job, "Admitted", namespace).get("status") == "True"


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    with FakeCluster(time_scale=0) as cluster:
        yield Setup(cluster, tmp_path)


def kubectl_job(name: str, cls: str | None = "training", namespace: str = "team-nlp", gpus: int = 4) -> dict:
    """A Job as a team member writes it for `kubectl create -f`: the queue label, a class label."""
    labels = {"kueue.x-k8s.io/queue-name": "default"}
    if cls is not None:
        labels["kueue.x-k8s.io/priority-class"] = cls
    container = {
        "name": "train",
        "image": "ghcr.io/acme/train:1",
        "command": ["python", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": gpus}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


def _reserved(setup: Setup, job: str, namespace: str = "team-nlp") -> None:
    """Kueue reserved quota and added our check as Pending: the moment the controller answers."""
    setup.cluster.advance(1)
    workload = setup.workload(job, namespace)
    assert workload["status"].get("admission"), "Kueue reserved quota"
    assert setup.check(job, namespace)["state"] == "Pending"


def test_the_controller_marks_the_check_active(setup: Setup) -> None:
    assert setup.controller.reconcile_once() == []
    check = setup.cluster.get("AdmissionCheck", CHECK)
    assert check is not None
    (active,) = check["status"]["conditions"]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Active")
    assert setup.controller.checks == {CHECK}
    writes = len(setup.cluster.writes())
    setup.controller.reconcile_once()
    assert len(setup.cluster.writes()) == writes, "an active check is not written again"


def test_a_job_within_the_rules_is_admitted(setup: Setup) -> None:
    setup.cluster.create(kubectl_job("train-ok"))
    _reserved(setup, "train-ok")
    assert not setup.admitted("train-ok"), "Kueue waits for the check"
    [answer] = setup.controller.reconcile_once()
    assert (answer.state, answer.name) == (CheckState.READY, setup.workload("train-ok")["metadata"]["name"])
    setup.cluster.advance(1)
    assert setup.admitted("train-ok")
    assert (
        setup.check("train-ok")["message"] == "approved by GPU Commons: priority class 'training', team nlp"
    )
    job = setup.cluster.get("Job", "train-ok", "team-nlp")
    assert job is not None and job["spec"]["suspend"] is False
    patch = next(r for r in setup.cluster.requests if r.path.endswith("/status") and r.method == "PATCH")
    assert patch.param("fieldManager") == FIELD_MANAGER
    assert patch.headers["content-type"] == "application/merge-patch+json"


def test_a_spent_hard_budget_holds_a_kubectl_job_until_the_spend_drops(setup: Setup) -> None:
    setup.spend = {"nlp": SPENT}
    setup.cluster.create(kubectl_job("train-held"))
    _reserved(setup, "train-held")
    [answer] = setup.controller.reconcile_once()
    assert answer.state is CheckState.RETRY
    assert answer.message.startswith("held by GPU Commons: team nlp has spent 1,000.00 USD of its hard")
    assert setup.check("train-held")["requeueAfterSeconds"] == 60
    setup.cluster.advance(1)  # Kueue evicts it, releases the quota and backs off
    evicted = setup.condition("train-held", "Evicted")
    assert (evicted["status"], evicted["reason"]) == ("True", "AdmissionCheck")
    assert evicted["message"] == f'Evicted due to AdmissionCheck in Retry state: "{CHECK}" ({answer.message})'
    assert not setup.workload("train-held")["status"].get("admission") and not setup.admitted("train-held")
    # While it waits, the Pending check says why (Kueue's own message would be "Reset to Pending ...").
    setup.controller.reconcile_once()
    assert setup.check("train-held")["message"] == answer.message
    setup.cluster.advance(120)  # back from the backoff: reserved, asked again, held again
    [again] = setup.controller.reconcile_once()
    assert again.state is CheckState.RETRY
    assert setup.check("train-held")["requeueAfterSeconds"] == 120, "Kueue counted the retry: backoff doubles"
    setup.cluster.advance(1)
    setup.controller.reconcile_once()
    assert setup.check("train-held")["message"] == again.message
    setup.spend = {"nlp": SPENT - 1}
    setup.controller.reconcile_once()
    assert setup.check("train-held")["message"] == "", "the note goes once the budget allows"
    setup.cluster.advance(180)
    [ready] = setup.controller.reconcile_once()
    assert ready.state is CheckState.READY
    setup.cluster.advance(1)
    assert setup.admitted("train-held")


def test_a_raised_budget_releases_the_held_job_as_well(setup: Setup) -> None:
    setup.spend = {"nlp": SPENT}
    setup.cluster.create(kubectl_job("train-raise"))
    _reserved(setup, "train-raise")
    assert [a.state for a in setup.controller.reconcile_once()] == [CheckState.RETRY]
    setup.policy = _with_budget(setup.policy, "nlp", Decimal(2000))
    setup.cluster.advance(61)
    assert [a.state for a in setup.controller.reconcile_once()] == [CheckState.READY]
    setup.cluster.advance(1)
    assert setup.admitted("train-raise")


def _with_budget(old: Policy, team: str, monthly: Decimal) -> Policy:
    teams = tuple(
        replace(t, budget=replace(t.budget, monthly=monthly)) if t.name == team and t.budget else t
        for t in old.teams
    )
    return replace(old, teams=teams, _index={})


def test_a_budget_exempt_class_runs_on_a_spent_budget(setup: Setup) -> None:
    setup.spend = {"nlp": 10 * SPENT}
    setup.cluster.create(kubectl_job("hotfix", cls="hotfix"))
    _reserved(setup, "hotfix")
    assert [a.state for a in setup.controller.reconcile_once()] == [CheckState.READY]
    setup.cluster.advance(1)
    assert setup.admitted("hotfix")


def test_a_class_closed_to_the_team_is_rejected_and_the_workload_deactivated(setup: Setup) -> None:
    setup.cluster.create(kubectl_job("sneaky", cls="vision-only"))
    setup.cluster.advance(1)
    [answer] = setup.controller.reconcile_once()
    sentence = "priority class 'vision_only' is reserved for team vision; team 'nlp' may not use it"
    assert (answer.state, answer.message) == (CheckState.REJECTED, sentence)
    setup.cluster.advance(5)
    workload = setup.workload("sneaky")
    assert workload["spec"]["active"] is False
    evicted = setup.condition("sneaky", "Evicted")
    assert (evicted["reason"], evicted["message"]) == (
        "DeactivatedDueToAdmissionCheck",
        f'The workload is deactivated due to AdmissionCheck in Rejected state: "{CHECK}" ({sentence})',
    )
    job = setup.cluster.get("Job", "sneaky", "team-nlp")
    assert (
        job is not None and job["spec"]["suspend"] is True and not setup.cluster.pods_of("team-nlp", "sneaky")
    )
    assert setup.controller.reconcile_once() == [], "a deactivated Workload is left alone"


def test_a_roles_class_admits_the_servers_signed_job_and_rejects_a_kubectl_one(setup: Setup) -> None:
    task = JobTask("t1", "recsys", ("serve",), "ghcr.io/acme/serve:1", 4, "production")
    setup.cluster.create(task_job(setup.policy, task, JobOptions(grant_key=KEY)))
    setup.cluster.create(kubectl_job("by-hand", cls="production", namespace="team-recsys"))
    setup.cluster.advance(1)
    answers = {a.name.split("-")[1]: a for a in setup.controller.reconcile_once()}
    assert answers["commons"].state is CheckState.READY
    assert answers["by"].state is CheckState.REJECTED
    assert "a Job created outside GPU Commons carries no identity" in answers["by"].message
    setup.cluster.advance(5)
    assert setup.admitted("commons-t1", "team-recsys")
    assert setup.workload("by-hand", "team-recsys")["spec"]["active"] is False


def test_a_workload_waiting_for_quota_gets_the_note_and_no_answer(setup: Setup) -> None:
    setup.spend = {"nlp": SPENT}
    setup.cluster.create(kubectl_job("big", gpus=32))  # more than the pool has: never reserved
    setup.cluster.advance(1)
    assert not setup.workload("big")["status"].get("admission")
    [answer] = setup.controller.reconcile_once()
    assert answer.state is CheckState.PENDING and answer.message.startswith("held by GPU Commons:")
    assert setup.check("big")["state"] == "Pending"
    assert setup.controller.reconcile_once() == [], "the same note is not written twice"


def _answered(setup: Setup, job: str) -> bool:
    workload = setup.cluster.workload_of("team-nlp", job)
    entries = ((workload or {}).get("status") or {}).get("admissionChecks") or []
    return any(e["name"] == CHECK and e["state"] == "Ready" for e in entries)


def test_run_answers_from_the_watch_through_dropped_and_expired_watches_and_5xx(setup: Setup) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=setup.controller.run, args=(stop,))
    thread.start()
    try:
        cluster = setup.cluster
        cluster.wait_for(lambda: any(r.param("watch") == "1" for r in cluster.requests), "the watch")
        cluster.create(kubectl_job("first"))
        cluster.advance(1)
        cluster.wait_for(lambda: _answered(setup, "first"), "the first answer, from the watch")

        cluster.faults.expire_next_watches(1)  # the next watch: ERROR 410 Gone → list again
        cluster.faults.drop_watches(abrupt=True)
        lists = len(
            [r for r in cluster.requests if r.path.endswith("/workloads") and r.param("watch") is None]
        )
        cluster.wait_for(
            lambda: (
                len(
                    [
                        r
                        for r in cluster.requests
                        if r.path.endswith("/workloads") and r.param("watch") is None
                    ]
                )
                > lists
            ),
            "a re-list after the 410",
        )
        cluster.faults.fail_next("patch", "workloads/status", n=2, code=503)
        cluster.create(kubectl_job("second"))
        cluster.advance(1)
        cluster.wait_for(lambda: _answered(setup, "second"), "the second answer, after two 503s", timeout=20)
        assert cluster.faults.fired.count(("patch", "workloads/status", "status")) == 2
        cluster.advance(1)
        assert setup.admitted("first") and setup.admitted("second")
    finally:
        stop.set()
        setup.cluster.faults.drop_watches()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_run_keeps_going_when_the_api_server_fails_and_comes_back(setup: Setup) -> None:
    setup.cluster.faults.fail_next("list", "admissionchecks", n=2, code=500)
    stop = threading.Event()
    thread = threading.Thread(target=setup.controller.run, args=(stop,))
    thread.start()
    try:
        setup.cluster.create(kubectl_job("later"))
        setup.cluster.advance(1)
        setup.cluster.wait_for(lambda: _answered(setup, "later"), "an answer after the 500s", timeout=20)
    finally:
        stop.set()
        setup.cluster.faults.drop_watches()
        thread.join(timeout=10)
    assert not thread.is_alive()
