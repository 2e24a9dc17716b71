"""The borrow-reclaim story on a real cluster with Kueue: only with COMMONS_K8S_LIVE=1.

It writes: namespaces team-a and team-b with their queues (`--apply-policy`), and Jobs in them. Point
KUBECONFIG (and optionally COMMONS_K8S_CONTEXT) at a test cluster with Kueue v0.19+ and at least
16 schedulable `nvidia.com/gpu` on 4-GPU nodes labelled `gpucommons.io/pool=gpu` (a fake device
plugin will do); COMMONS_K8S_LIVE_IMAGE names an image with `sleep` (default busybox:1.36).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.e2e.kubernetes.conftest import TWO_TEAMS_K8S, csv_rows
from tests.e2e.server.conftest import Platform

from gpucommons.testing.postgres import fresh_database

pytestmark = [pytest.mark.k8s_live, pytest.mark.postgres, pytest.mark.timeout(900)]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Platform]:
    if os.environ.get("COMMONS_K8S_LIVE") != "1":
        pytest.skip("the live story runs only with COMMONS_K8S_LIVE=1 (and a kubeconfig for a test cluster)")
    with fresh_database() as url:
        policy = tmp_path / "policy.yaml"
        policy.write_text(TWO_TEAMS_K8S)
        (tmp_path / "home").mkdir()
        platform = Platform(tmp_path / "home", policy)
        platform.extra_args = ["--backend", "kubernetes", "--apply-policy"]
        platform.extra_args += ["--image", os.environ.get("COMMONS_K8S_LIVE_IMAGE", "busybox:1.36")]
        if os.environ.get("KUBECONFIG"):
            platform.extra_args += ["--kubeconfig", os.environ["KUBECONFIG"]]
        if os.environ.get("COMMONS_K8S_CONTEXT"):
            platform.extra_args += ["--context", os.environ["COMMONS_K8S_CONTEXT"]]
        platform.extra_env = {"COMMONS_DATABASE_URL": url}
        platform.start(timeout=120)
        try:
            yield platform
        finally:
            platform.stop()


def test_the_story_on_a_real_cluster(live: Platform, tmp_path: Path) -> None:
    a = live.submit(
        "--team", "a", "--gpus", "12", "--pool", "gpu", "--checkpoint", "on-signal", "--", "sleep", "60"
    )
    live.wait(lambda: live.task(a)["state"] == "running", what="a to run", timeout=300)
    b = live.submit("--team", "b", "--gpus", "8", "--pool", "gpu", "--", "sleep", "20")
    live.wait(lambda: live.task(a)["state"] in ("preempting", "pending"), what="a evicted", timeout=300)
    live.wait(lambda: live.task(b)["state"] == "succeeded", what="b to finish", timeout=300)
    live.wait(lambda: live.task(a)["state"] == "succeeded", what="a to finish", timeout=600)
    assert live.task(a)["restart_count"] >= 1
    usage = tmp_path / "usage.csv"
    live.cli("usage", "export", "--out", str(usage))
    rows = csv_rows(usage)
    assert sorted(r["end_reason"] for r in rows if r["task_id"] == a)[-1] == "succeeded"
    last_end = max(datetime.fromisoformat(r["end"].replace("Z", "+00:00")) for r in rows)
    time.sleep(max(0.0, math.floor(last_end.timestamp()) + 1.05 - time.time()))
    month = datetime.now(UTC).strftime("%Y-%m")
    out = tmp_path / "costs.json"
    live.cli(
        "chargeback",
        "--policy",
        str(live.policy),
        "--usage",
        str(usage),
        "--period",
        month,
        "--out",
        str(out),
    )
    served = json.loads(live.cli("invoice", "--month", month).stdout)
    from_file = json.loads(out.read_text())
    for team in ("a", "b"):
        assert served["teams"][team]["gpu_hours"] == from_file["teams"][team]["gpu_hours"] > 0
