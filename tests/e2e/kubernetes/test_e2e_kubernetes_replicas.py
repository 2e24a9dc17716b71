"""Two `commons up --backend kubernetes` replicas on one PostgreSQL database, as the deployment runs
them: both serve the API, the leader watches the cluster and writes the ledger; kill -9 of the
leader mid-story and the other takes over within 15 s, no ledger row lost or written twice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.e2e.kubernetes.conftest import TWO_TEAMS_K8S, KubePlatform
from tests.e2e.kubernetes.test_e2e_kubernetes_faults import expected, ledger

from gpucommons.testing.fake_k8s import FakeCluster

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def role(platform: KubePlatform) -> str:
    return str(platform.health()["role"])


def test_the_leader_killed_mid_story_hands_over_and_the_ledger_stays_exact(
    cluster: FakeCluster, pg_url: str, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(TWO_TEAMS_K8S)
    replicas = []
    for i in range(2):
        home = tmp_path / f"home{i}"  # each pod has its own home; the database is shared
        home.mkdir()
        replicas.append(KubePlatform(home, policy, cluster, pg_url, name=f"replica{i}"))
    try:
        for replica in replicas:
            replica.start()
        first, second = replicas
        assert (role(first), role(second)) == ("leader", "follower")

        # Submitted through the follower: the leader creates the Jobs and mirrors them.
        a = second.submit("--team", "a", "--gpus", "12", "--pool", "gpu", "--", "sleep", "8")
        second.wait(lambda: second.task(a)["state"] == "running", what="a to run", timeout=60)
        b = second.submit("--team", "b", "--gpus", "8", "--pool", "gpu", "--", "sleep", "3")
        second.wait(lambda: second.task(a)["state"] in ("preempting", "pending"), what="a evicted")

        first.kill9()
        killed = time.monotonic()
        second.wait(lambda: role(second) == "leader", what="the follower to lead", timeout=15)
        took_over = time.monotonic() - killed
        assert took_over <= 15, took_over

        second.wait(lambda: second.task(b)["state"] == "succeeded", what="b to finish", timeout=90)
        second.wait(lambda: second.task(a)["state"] == "succeeded", what="a to finish", timeout=90)
        assert second.task(a)["restart_count"] == 1
        got = ledger(second, tmp_path)
        assert [(t, s, e) for t, s, e, _ in got] == expected(cluster, {"team-a": a, "team-b": b})
    finally:
        for replica in replicas:
            replica.stop()
