"""The seed story on a Kueue cluster, through the real CLI and HTTP: team a borrows, team b
reclaims, a is evicted and requeued, readmitted and finishes; the ledger holds exactly the
intervals the Workloads imply, and the server's invoice equals `commons chargeback` on the export."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.e2e.kubernetes.conftest import KubePlatform, csv_rows, whole_seconds, workload_holds

from gpucommons.testing.fake_k8s import FakeCluster


def test_borrow_reclaim_requeue_and_bill_on_kueue(
    k8s_platform: Callable[..., KubePlatform], cluster: FakeCluster, tmp_path: Path
) -> None:
    platform = k8s_platform()
    # a borrows: 12 GPUs (three whole 4-GPU nodes) on a quota of 8 while b is idle
    a = platform.submit(
        "--team", "a", "--gpus", "12", "--pool", "gpu", "--checkpoint", "on-signal", "--", "sleep", "8"
    )
    platform.wait(lambda: platform.task(a)["state"] == "running", what="a to run", timeout=60)
    assert platform.task(a)["borrowed_gpus"] == 4
    assert platform.task(a)["cluster_ref"] == f"team-a/commons-{a}"

    # b reclaims its quota: Kueue evicts a, releases the quota once its pods are gone, admits b
    b = platform.submit("--team", "b", "--gpus", "8", "--pool", "gpu", "--", "sleep", "3")
    platform.wait(lambda: platform.task(a)["state"] in ("preempting", "pending"), what="a evicted")
    platform.wait(lambda: platform.task(a)["state"] == "pending", what="a requeued")
    queue = json.loads(platform.cli("queue", "--json").stdout)
    waiting = {q["task_id"]: q for q in queue}
    assert a in waiting and waiting[a]["reason_code"] == "cluster_admission"
    assert "Kueue" in waiting[a]["reason"] and waiting[a]["position"] >= 1

    platform.wait(lambda: platform.task(b)["state"] == "succeeded", what="b to finish", timeout=60)
    platform.wait(lambda: platform.task(a)["state"] == "succeeded", what="a to finish", timeout=90)
    task_a = platform.task(a)
    assert task_a["restart_count"] == 1 and task_a["preemptions"] == 1 and task_a["exit_code"] == 0
    events = platform.api(f"/api/v1/tasks/{a}/events")
    assert isinstance(events, list)
    steps = [e["to_state"] for e in events if e["kind"] == "transition"]
    assert steps == ["admitted", "running", "preempting", "pending", "admitted", "running", "succeeded"]
    # the evicted pods were told to save their state (their downward-API annotations file) ...
    requested = [
        pod
        for _, pod in cluster.history("Pod", namespace="team-a")
        if "gpucommons.io/checkpoint-requested" in (pod["metadata"].get("annotations") or {})
    ]
    assert requested, "the evicted task's pods carry the checkpoint request"
    # ... and the preemption names the team that took the GPUs back
    timeline = platform.api(f"/api/v1/tasks/{a}/timeline")
    assert isinstance(timeline, dict)
    first = timeline["attempts"][0]
    assert first["outcome"] == "preempted", (timeline, events)
    assert first["preempted_by"]["team"] == "b"
    assert first["preempted_by"]["task_id"] == b
    # the task's output comes from its pods' logs
    assert platform.cli("logs", b).stdout.strip()
    preempting = next(e for e in events if e["to_state"] == "preempting")
    assert "Preempted" in preempting["message"] or "reclamation" in preempting["message"]

    # the ledger: exactly the holds the Workload versions imply, nothing twice
    usage = tmp_path / "usage.csv"
    platform.cli("usage", "export", "--out", str(usage))
    rows = csv_rows(usage)
    got = sorted(
        (r["task_id"], whole_seconds(r["start"]), whole_seconds(r["end"]), r["end_reason"]) for r in rows
    )
    expected = []
    for namespace, task in (("team-a", a), ("team-b", b)):
        for job, start, end in workload_holds(cluster, namespace):
            assert job == f"commons-{task}"
            expected.append((task, start, end))
    assert [(t, s, e) for t, s, e, _ in got] == sorted(expected)
    reasons = {(t, s): r for t, s, _, r in got}
    assert sorted(reasons.values()) == ["preempted", "succeeded", "succeeded"]
    assert {r["team"] for r in rows} == {"a", "b"} and all(r["pool"] == "gpu" for r in rows)

    # the server's invoice agrees with the chargeback of the exported file
    last_end = max(datetime.fromisoformat(r["end"].replace("Z", "+00:00")) for r in rows)
    time.sleep(max(0.0, math.floor(last_end.timestamp()) + 1.05 - time.time()))
    month = datetime.now(UTC).strftime("%Y-%m")
    out = tmp_path / "costs.json"
    platform.cli(
        "chargeback",
        "--policy",
        str(platform.policy),
        "--usage",
        str(usage),
        "--period",
        month,
        "--out",
        str(out),
    )
    from_file: dict[str, Any] = json.loads(out.read_text())
    served = json.loads(platform.cli("invoice", "--month", month).stdout)
    for team in ("a", "b"):
        assert served["teams"][team]["gpu_hours"] == from_file["teams"][team]["gpu_hours"] > 0
        assert served["teams"][team]["direct_cents"] == from_file["teams"][team]["direct_cents"]
