"""The Kubernetes backend under faults: watches dropped and expired (410 Gone) mid-story, API server
errors and timeouts, GPU Commons killed with -9 and restarted mid-story, Jobs deleted by hand. In
each, the tasks end as the cluster says and the ledger holds exactly the Workloads' holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.e2e.kubernetes.conftest import KubePlatform, csv_rows, whole_seconds, workload_holds

from gpucommons.testing.fake_k8s import FakeCluster


def ledger(platform: KubePlatform, tmp_path: Path) -> list[tuple[str, str, str, str]]:
    usage = tmp_path / f"usage-{platform.starts}.csv"
    platform.cli("usage", "export", "--out", str(usage))
    return sorted(
        (r["task_id"], whole_seconds(r["start"]), whole_seconds(r["end"]), r["end_reason"])
        for r in csv_rows(usage)
    )


def expected(cluster: FakeCluster, tasks: dict[str, str]) -> list[tuple[str, str, str]]:
    """What the Workload versions imply, for tasks {namespace: task id}."""
    out = []
    for namespace, task in tasks.items():
        for job, start, end in workload_holds(cluster, namespace):
            assert job == f"commons-{task}"
            out.append((task, start, end))
    return sorted(out)


def reclaim_story(platform: KubePlatform, a_seconds: int = 6, b_seconds: int = 3) -> tuple[str, str]:
    a = platform.submit("--team", "a", "--gpus", "12", "--pool", "gpu", "--", "sleep", str(a_seconds))
    platform.wait(lambda: platform.task(a)["state"] == "running", what="a to run", timeout=60)
    b = platform.submit("--team", "b", "--gpus", "8", "--pool", "gpu", "--", "sleep", str(b_seconds))
    return a, b


def test_watches_dropped_and_expired_mid_story_lose_and_repeat_nothing(
    k8s_platform: Callable[..., KubePlatform], cluster: FakeCluster, tmp_path: Path
) -> None:
    platform = k8s_platform()
    a, b = reclaim_story(platform)
    cluster.faults.drop_watches(abrupt=True)
    cluster.faults.expire_next_watches(3)
    cluster.store.compact()
    platform.wait(lambda: platform.task(a)["state"] in ("preempting", "pending"), what="a evicted")
    cluster.faults.drop_watches()
    platform.wait(lambda: platform.task(a)["state"] == "succeeded", what="a to finish", timeout=90)
    platform.wait(lambda: platform.task(b)["state"] == "succeeded", what="b to finish", timeout=30)
    got = ledger(platform, tmp_path)
    assert [(t, s, e) for t, s, e, _ in got] == expected(cluster, {"team-a": a, "team-b": b})
    assert platform.task(a)["restart_count"] == 1


def test_api_server_errors_and_timeouts_are_retried(
    k8s_platform: Callable[..., KubePlatform], cluster: FakeCluster, tmp_path: Path
) -> None:
    platform = k8s_platform()
    cluster.faults.fail_next("create", "jobs", 2, 503)
    a = platform.submit("--team", "a", "--gpus", "4", "--", "sleep", "3")
    cluster.faults.fail_next("list", "*", 3, 500)
    cluster.faults.hang_next("watch", "workloads", 1, 5.0)
    cluster.faults.drop_watches()
    platform.wait(lambda: platform.task(a)["state"] == "succeeded", what="a to finish", timeout=90)
    fired = [f for f in cluster.faults.fired]
    assert len(fired) >= 3, fired
    events = platform.api(f"/api/v1/tasks/{a}/events")
    assert isinstance(events, list)
    assert [e["to_state"] for e in events if e["kind"] == "transition"] == [
        "admitted",
        "running",
        "succeeded",
    ]
    got = ledger(platform, tmp_path)
    assert [(t, s, e) for t, s, e, _ in got] == expected(cluster, {"team-a": a})


def test_killed_and_restarted_mid_story_loses_and_repeats_nothing(
    k8s_platform: Callable[..., KubePlatform], cluster: FakeCluster, tmp_path: Path
) -> None:
    platform = k8s_platform()
    a, b = reclaim_story(platform, a_seconds=5, b_seconds=20)
    platform.wait(lambda: platform.task(a)["state"] in ("preempting", "pending"), what="a evicted")
    platform.kill9()  # while a is evicted and b takes its GPUs
    platform.start(timeout=90)
    platform.wait(lambda: platform.task(b)["state"] == "succeeded", what="b to finish", timeout=90)
    platform.wait(lambda: platform.task(a)["state"] == "running", what="a to run again", timeout=60)
    platform.kill9()  # while a runs its second attempt, which ends before the server is back
    cluster.wait_for(
        lambda: any(
            c["type"] == "Finished" and c["status"] == "True"
            for c in ((cluster.workload_of("team-a", f"commons-{a}") or {}).get("status") or {}).get(
                "conditions", []
            )
        ),
        "a to finish while GPU Commons is down",
        timeout=60,
    )
    platform.start(timeout=90)
    platform.wait(lambda: platform.task(a)["state"] == "succeeded", what="a seen finished", timeout=60)
    task = platform.task(a)
    assert task["restart_count"] == 1 and task["exit_code"] == 0
    got = ledger(platform, tmp_path)
    assert [(t, s, e) for t, s, e, _ in got] == expected(cluster, {"team-a": a, "team-b": b})
    assert [r for _, _, _, r in got].count("succeeded") == 2


def test_a_job_deleted_by_hand_cancels_its_task_whether_or_not_anyone_watched(
    k8s_platform: Callable[..., KubePlatform], cluster: FakeCluster, tmp_path: Path
) -> None:
    platform = k8s_platform()
    watched = platform.submit("--team", "a", "--gpus", "4", "--", "sleep", "60")
    unwatched = platform.submit("--team", "b", "--gpus", "4", "--", "sleep", "60")
    for task in (watched, unwatched):
        platform.wait(
            lambda t=task: platform.task(t)["state"] == "running", what=f"{task} to run", timeout=60
        )
    cluster.delete_object("Job", f"commons-{watched}", "team-a", propagation="Background")
    platform.wait(lambda: platform.task(watched)["state"] == "cancelled", what="the watched cancel")
    assert "deleted" in str(platform.task(watched)["message"])

    platform.kill9()
    cluster.delete_object("Job", f"commons-{unwatched}", "team-b", propagation="Background")
    cluster.wait_for(
        lambda: cluster.workload_of("team-b", f"commons-{unwatched}") is None,
        "the Workload to go",
        timeout=60,
    )
    platform.start(timeout=90)
    platform.wait(lambda: platform.task(unwatched)["state"] == "cancelled", what="the unwatched cancel")
    assert "not watching" in str(platform.task(unwatched)["message"])
    reasons = {t: r for t, _, _, r in ledger(platform, tmp_path)}
    assert reasons == {watched: "cancelled", unwatched: "cancelled"}
