"""`commons up --backend kubernetes` as a real subprocess against the fake cluster, on PostgreSQL.

The fake cluster (gpucommons.testing.fake_k8s, docs/testing-kubernetes.md) runs Kueue, the Job
controller and a kubelet emulated from recorded shapes; its clock starts at the real time and runs
at real speed, so the ledger, the server's clock and the invoices share one timeline.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.e2e.server.conftest import Platform

from gpucommons.testing.fake_k8s import FakeCluster
from gpucommons.testing.postgres import fresh_database

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

IMAGE = "ghcr.io/acme/train:1.0"

TWO_TEAMS_K8S = """
cluster:
  name: k8s-e2e
  pools:
    - {name: gpu, gpu_type: H100, nodes: 4, gpus_per_node: 4, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 2s}
default_priority_class: normal
teams:
  - name: a
    quota:
      gpu: {gpus: 8}
    preemption: {reclaim: any, within_team: lower_priority}
  - name: b
    quota:
      gpu: {gpus: 8}
    preemption: {reclaim: any, within_team: lower_priority}
"""


def workload_holds(cluster: FakeCluster, namespace: str) -> list[tuple[str, str, str]]:
    """(job, admitted at, released at) for every admission the Workload versions show: a hold starts
    when `Admitted` turns True and ends when the quota is released (`QuotaReserved` False) or the
    Workload finishes."""
    out = []
    holds: dict[str, str] = {}
    for _, workload in cluster.history("Workload", namespace=namespace):
        job = workload["metadata"]["ownerReferences"][0]["name"]
        conditions = {c["type"]: c for c in (workload.get("status") or {}).get("conditions") or []}
        admitted = conditions.get("Admitted", {})
        finished = conditions.get("Finished", {})
        if admitted.get("status") == "True" and job not in holds:
            holds[job] = admitted["lastTransitionTime"]
        elif job in holds and finished.get("status") == "True":
            out.append((job, holds.pop(job), finished["lastTransitionTime"]))
        elif job in holds and admitted.get("status") != "True":
            out.append((job, holds.pop(job), admitted["lastTransitionTime"]))
    return out


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def whole_seconds(text: str) -> str:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(start=datetime.now(UTC), time_scale=1.0, pod_start_seconds=0.5) as fake:
        yield fake


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_database() as url:
        yield url


class KubePlatform(Platform):
    """`commons up --backend kubernetes` on the fake cluster; the CLI pointed at it."""

    def __init__(
        self, home: Path, policy: Path, cluster: FakeCluster, database_url: str, name: str = "server"
    ) -> None:
        super().__init__(home, policy, name=name)
        self.cluster = cluster
        kubeconfig = cluster.kubeconfig(home.parent)
        self.extra_args = [
            "--backend",
            "kubernetes",
            "--kubeconfig",
            str(kubeconfig),
            "--image",
            IMAGE,
            "--apply-policy",
        ]
        self.extra_env = {
            "COMMONS_DATABASE_URL": database_url,
            "COMMONS_LOG_LEVEL": "debug",
            "COMMONS_BUDGET_INTERVAL_S": "1",
            # Replicas sign their Jobs' class grants with one key, as the deployment's Secret gives.
            "COMMONS_GRANT_KEY": "e2e-grant-key",
        }

    def start(self, timeout: float = 90.0) -> None:
        """A longer wait than the local platform's: start-up applies the policy to the cluster."""
        super().start(timeout)


@pytest.fixture
def k8s_platform(tmp_path: Path, cluster: FakeCluster, pg_url: str) -> Iterator[Callable[..., KubePlatform]]:
    made: list[KubePlatform] = []

    def make(policy: str = TWO_TEAMS_K8S) -> KubePlatform:
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(policy)
        (tmp_path / "home").mkdir(exist_ok=True)
        platform = KubePlatform(tmp_path / "home", policy_file, cluster, pg_url)
        made.append(platform)
        platform.start()
        return platform

    yield make
    for p in made:
        p.stop()
