"""Scheduling through the live server: borrowing, reclaim, queue reasons, policy changes, checkpoints,
metrics — in-process, with real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import pytest
from tests.integration.server.conftest import SMALL_POLICY, Harness

from gpucommons.backends.clock import ManualClock
from gpucommons.backends.fake import FakeExecutor
from gpucommons.engine.types import PendingCode

PY = sys.executable
#: Saves nothing and ignores nothing: exits on SIGTERM like most programs.
SLEEPER = [PY, "-c", "import time; time.sleep(60)"]


def test_owner_reclaims_borrowed_gpus_and_the_victim_is_requeued(harness: Harness) -> None:
    big = harness.submit(team="a", gpus=4, command=SLEEPER)
    running = harness.wait_state(str(big["id"]), "running")
    assert running["borrowed_gpus"] == 2
    owner = harness.submit(team="b", gpus=2, command=SLEEPER)
    victim = harness.wait_state(str(big["id"]), "pending", timeout=20)
    assert victim["restart_count"] == 1 and victim["preemptions"] == 1
    assert float(str(victim["lost_gpu_seconds"])) > 0  # it declared no checkpoint: its work is lost
    harness.wait_state(str(owner["id"]), "running")
    queue = harness.http.get("/api/v1/queue", headers=harness.admin).json()
    assert [(q["task_id"], q["position"]) for q in queue] == [(big["id"], 1)]
    assert queue[0]["reason_code"] and queue[0]["reason"]
    usage = harness.http.get("/api/v1/usage", headers=harness.admin).json()
    first = next(u for u in usage if u["task_id"] == big["id"])
    assert (first["gpus"], first["borrowed_gpus"], first["end_reason"]) == (4, 2, "preempted")
    for task in (big, owner):
        harness.http.post(f"/api/v1/tasks/{task['id']}/cancel", headers=harness.admin)
    harness.wait_state(str(owner["id"]), "cancelled")


def test_pending_task_says_why_it_waits(harness: Harness) -> None:
    hog = harness.submit(team="b", gpus=4, command=SLEEPER)
    harness.wait_state(str(hog["id"]), "running")
    # b may hold at most what the pool has; its next task waits for its own running one.
    waiting = harness.submit(team="b", gpus=2, command=["true"])
    harness.cycle()
    (entry,) = harness.http.get("/api/v1/queue", headers=harness.admin).json()
    assert entry["task_id"] == waiting["id"]
    assert entry["reason_code"] in {c.value for c in PendingCode} and entry["reason"]
    harness.http.post(f"/api/v1/tasks/{hog['id']}/cancel", headers=harness.admin)
    harness.wait_state(str(waiting["id"]), "succeeded", timeout=20)


def test_policy_apply_keeps_running_tasks_and_next_cycle_uses_new_quotas(harness: Harness) -> None:
    running = harness.submit(team="a", gpus=2, command=SLEEPER)
    harness.wait_state(str(running["id"]), "running")
    bigger = SMALL_POLICY.replace("nodes: 1, gpus_per_node: 4", "nodes: 1, gpus_per_node: 8").replace(
        "gpu: {gpus: 2}\n    preemption: {reclaim: any, within_team: lower_priority}\n  - name: b",
        "gpu: {gpus: 6}\n    preemption: {reclaim: any, within_team: lower_priority}\n  - name: b",
    )
    response = harness.http.put("/api/v1/policy", json={"text": bigger}, headers=harness.admin)
    assert response.status_code == 200, response.text
    assert harness.task(str(running["id"]))["state"] == "running"
    more = harness.submit(team="a", gpus=4, command=["true"])  # above the old pool size: valid only now
    harness.wait_state(str(more["id"]), "succeeded")
    teams = {t["name"]: t for t in harness.http.get("/api/v1/teams", headers=harness.admin).json()}
    assert teams["a"]["nominal_gpus"] == 6
    assert harness.task(str(running["id"]))["state"] == "running"
    harness.http.post(f"/api/v1/tasks/{running['id']}/cancel", headers=harness.admin)


def test_policy_apply_refuses_a_bad_policy_with_every_issue(harness: Harness) -> None:
    bad = SMALL_POLICY.replace("gpus: 2}", "gpus: 9}")
    response = harness.http.put("/api/v1/policy", json={"text": bad}, headers=harness.admin)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "policy_invalid"
    assert error["details"]["issues"] and all(i["path"] for i in error["details"]["issues"])
    member = harness.member_token("a")
    assert harness.http.put("/api/v1/policy", json={"text": SMALL_POLICY}, headers=member).status_code == 403


def test_policy_apply_refuses_to_drop_a_team_that_has_tasks(harness: Harness) -> None:
    harness.submit(team="b", gpus=1, command=SLEEPER)
    only_a = SMALL_POLICY.split("  - name: b")[0]
    response = harness.http.put("/api/v1/policy", json={"text": only_a}, headers=harness.admin)
    assert response.status_code == 409
    assert response.json()["error"]["details"]["teams"] == ["b"]


def test_checkpoint_reports_are_recorded_and_silence_past_twice_the_interval_warns(harness: Harness) -> None:
    task = harness.submit(team="a", gpus=1, checkpoint="every:1s", command=SLEEPER)
    harness.wait_state(str(task["id"]), "running")
    # A member of another team may not report for it; the admin may.
    other = harness.member_token("b")
    assert (
        harness.http.post(f"/api/v1/tasks/{task['id']}/checkpoint", json={}, headers=other).status_code == 404
    )
    ok = harness.http.post(
        f"/api/v1/tasks/{task['id']}/checkpoint", json={"path": "/ckpt/1"}, headers=harness.admin
    )
    assert ok.status_code == 200 and ok.json()["last_checkpoint_at"]
    # Declared every:1s: after 2 s without a report the task gets a warning event.
    deadline = time.monotonic() + 10
    warned: list[dict[str, object]] = []
    while not warned and time.monotonic() < deadline:
        harness.cycle()
        time.sleep(0.2)
        events = harness.http.get(f"/api/v1/tasks/{task['id']}/events", headers=harness.admin).json()
        warned = [e for e in events if e["kind"] == "warning"]
    assert warned and "every:1s" in str(warned[0]["message"])
    harness.http.post(f"/api/v1/tasks/{task['id']}/cancel", headers=harness.admin)
    harness.wait_state(str(task["id"]), "cancelled")
    refused = harness.http.post(f"/api/v1/tasks/{task['id']}/checkpoint", json={}, headers=harness.admin)
    assert refused.status_code == 409


def test_metrics_report_use_borrowing_queue_and_cycle_latency(harness: Harness) -> None:
    big = harness.submit(team="a", gpus=3, command=SLEEPER)
    harness.wait_state(str(big["id"]), "running")
    harness.submit(team="a", gpus=2, command=["true"])
    harness.cycle()
    assert harness.http.get("/metrics").status_code == 401  # it labels usage by team
    assert harness.http.get("/metrics", headers=harness.member_token("a")).status_code == 403
    text = harness.http.get("/metrics", headers=harness.admin).text
    assert 'commons_gpus_used{pool="gpu",team="a"} 3.0' in text
    assert 'commons_gpus_borrowed{pool="gpu",team="a"} 1.0' in text
    assert 'commons_gpus_idle_quota{pool="gpu",team="b"} 2.0' in text
    assert 'commons_pool_gpus_idle{pool="gpu"} 1.0' in text
    assert 'commons_queue_length{team="a"} 1.0' in text
    assert 'commons_admissions_total{borrowing="yes",pool="gpu",team="a"} 1.0' in text
    assert "commons_scheduling_cycle_seconds_bucket" in text
    health = harness.http.get("/healthz").json()
    assert health["status"] == "ok" and health["executor"] == "local"
    harness.http.post(f"/api/v1/tasks/{big['id']}/cancel", headers=harness.admin)


def test_a_restart_in_the_middle_of_a_preemption_finishes_it(make_harness: Callable[..., Harness]) -> None:
    """The server dies while a victim ignores its SIGTERM: the restarted server re-adopts the
    process, SIGKILLs it when the grace period it started runs out, requeues it, admits the owner."""
    first = make_harness()
    stubborn = [
        PY,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
        "time.sleep(60)",
    ]
    big = str(first.submit(team="a", gpus=4, command=stubborn)["id"])
    first.run_until(
        lambda: "ready" in first.http.get(f"/api/v1/tasks/{big}/logs", headers=first.admin).text,
        what="the stubborn task to ignore SIGTERM",
    )
    owner = str(first.submit(team="b", gpus=2, command=SLEEPER)["id"])
    first.run_until(lambda: first.task(big)["state"] == "preempting", what="the preemption")

    second = make_harness()  # a new server on the same store and home; the processes kept running
    victim = second.wait_state(big, "pending", timeout=20)
    assert victim["restart_count"] == 1
    events = second.http.get(f"/api/v1/tasks/{big}/events", headers=second.admin).json()
    assert [e["kind"] for e in events].count("killed") == 1
    second.wait_state(owner, "running")
    for task in (big, owner):
        second.http.post(f"/api/v1/tasks/{task}/cancel", headers=second.admin)
    second.wait_state(owner, "cancelled")


def test_a_restarted_server_remembers_how_often_a_task_was_preempted(
    make_harness: Callable[..., Harness],
) -> None:
    """The engine gives a task that was preempted min-runtime protection before the next preemption;
    after a restart the count comes from the store, not from zero."""
    first = make_harness()
    big = str(first.submit(team="a", gpus=4, command=SLEEPER)["id"])
    first.wait_state(big, "running")
    owner = str(first.submit(team="b", gpus=2, command=SLEEPER)["id"])
    assert first.wait_state(big, "pending", timeout=20)["preemptions"] == 1

    second = make_harness()
    second.ctx.scheduler.rebuild()
    assert second.ctx.scheduler.state.preemption_count(big) == 1
    for task in (big, owner):
        second.http.post(f"/api/v1/tasks/{task}/cancel", headers=second.admin)
    second.wait_state(owner, "cancelled")


def test_a_restarted_server_remembers_who_used_the_cluster_lately(
    make_harness: Callable[..., Harness],
) -> None:
    """With a usage half-life, fair-share order weighs who used the cluster lately. The store keeps
    no decayed figure: the restarted server rebuilds it from the ledger, and the team that just
    held every GPU still waits behind the one that did not, though its task is older."""
    policy = SMALL_POLICY + "scheduling: {mode: fair_share, usage_half_life: 10m}\n"
    clock = ManualClock(1_800_000_000.0)
    executor = FakeExecutor(clock)
    first = make_harness(policy=policy, executor=executor, clock=clock)
    hog = str(first.submit(team="a", gpus=4, command=["train"])["id"])
    first.cycle()
    clock.advance(1800)
    executor.finish(hog)
    first.cycle()
    assert first.task(hog)["state"] == "succeeded"
    clock.advance(60)
    first.ctx.scheduler.state.advance_usage(clock.now())
    _, remembered = first.ctx.scheduler.state.usage_memory()

    second = make_harness(policy=policy, executor=executor.restarted(), clock=clock)
    second.ctx.scheduler.rebuild()
    at, rebuilt = second.ctx.scheduler.state.usage_memory()
    assert at == clock.now()
    assert rebuilt["a"] == pytest.approx(remembered["a"]) and rebuilt["a"][0] > 3
    assert rebuilt["b"] == (0.0, 0.0, 0.0)
    older = str(second.submit(team="a", gpus=4, command=["train"])["id"])
    newer = str(second.submit(team="b", gpus=4, command=["train"])["id"])
    second.cycle()
    assert (second.task(newer)["state"], second.task(older)["state"]) == ("running", "pending")
