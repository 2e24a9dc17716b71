"""Several `commons up` on one PostgreSQL database: every one serves the API, one leads (runs the
scheduler); work given to a follower reaches the leader; kill -9 of the leader hands the lead to a
follower within 10 s, which re-adopts the running task processes: nothing lost, nothing run twice, no
GPU held twice, every ledger interval closed once. And SQLite: a second server refuses, saying why."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from tests.e2e.server.conftest import Platform

SCRIPT = str(Path(__file__).parent.parent / "task_script.py")

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

#: Team a may hold one GPU and borrow none; b two; 4 GPUs in all.
NARROW = """
cluster:
  name: replicas
  pools:
    - {name: gpu, gpu_type: H100, nodes: 1, gpus_per_node: 4, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 3s}
default_priority_class: normal
teams:
  - {name: a, quota: {gpu: {gpus: 1, borrow_limit: 0}}}
  - {name: b, quota: {gpu: {gpus: 2, borrow_limit: 1}}}
"""

Replicas = Callable[..., list[Platform]]


def leader_and_follower(servers: list[Platform]) -> tuple[Platform, Platform]:
    roles = {s.name: s.health()["role"] for s in servers}
    leaders = [s for s in servers if roles[s.name] == "leader"]
    assert len(leaders) == 1, roles
    follower = next(s for s in servers if s is not leaders[0])
    return leaders[0], follower


def pg(platform: Platform) -> psycopg.Connection[tuple[object, ...]]:
    assert platform.database_url
    return psycopg.connect(platform.database_url.replace("postgresql+psycopg", "postgresql"), autocommit=True)


def state(platform: Platform, task_id: str) -> str:
    return str(platform.task(task_id)["state"])


def test_two_replicas_serve_the_api_one_leads_and_the_follower_s_work_reaches_the_leader(
    replicas: Replicas, tmp_path: Path
) -> None:
    first, second = replicas(2, NARROW)
    leader, follower = leader_and_follower([first, second])
    assert leader is first, "the first to start leads"
    for server in (leader, follower):
        health = server.health()
        assert health["status"] == "ok", health
        assert server.api("/api/v1/teams"), "both answer the API"
    assert follower.health()["scheduler"] == "stopped" and leader.health()["scheduler"] == "running"
    assert "role: follower" in follower.server_log() and "role: leader" in leader.server_log()

    # A task submitted to the follower runs (the leader finds it in the store).
    quick = follower.submit("--team", "b", "--gpus", "1", "--", "sleep", "0.5")
    follower.wait(
        lambda: state(follower, quick) == "succeeded", timeout=20, what="the follower's task to run"
    )

    # Cancel through the follower: a running task (the leader stops its process) and a pending one.
    running = follower.submit("--team", "a", "--gpus", "1", "--", "sleep", "600")
    follower.wait(lambda: state(leader, running) == "running", timeout=20, what="a running task")
    waiting = follower.submit("--team", "a", "--gpus", "1", "--", "sleep", "600")
    time.sleep(1.0)
    assert state(leader, waiting) == "pending", "team a may hold one GPU only"
    queue = leader.api("/api/v1/queue")
    assert waiting in json.dumps(queue), "the leader queues the follower's task"
    follower.cli("cancel", waiting)
    assert state(leader, waiting) == "cancelled"
    leader.wait(lambda: waiting not in json.dumps(leader.api("/api/v1/queue")), timeout=10, what="dequeue")
    pid = int(str(leader.task(running)["message"]).split("pid ")[1].rstrip(")"))
    follower.cli("cancel", running)
    leader.wait(lambda: state(leader, running) == "cancelled", timeout=20, what="the running task to stop")
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)

    # A policy applied through the follower is the leader's within seconds: team a may now hold 2.
    held = [follower.submit("--team", "a", "--gpus", "1", "--", "sleep", "600") for _ in range(2)]
    leader.wait(lambda: sorted(state(leader, t) for t in held) == ["pending", "running"], timeout=20)
    wider = tmp_path / "wider.yaml"
    wider.write_text(NARROW.replace("gpus: 1, borrow_limit: 0", "gpus: 2, borrow_limit: 0"))
    follower.cli("policy", "apply", str(wider))
    leader.wait(
        lambda: all(state(leader, t) == "running" for t in held),
        timeout=15,
        what="the leader to admit under the follower's new policy",
    )
    for task in held:
        follower.cli("cancel", task)


def test_kill_9_of_the_leader_hands_the_lead_to_the_follower_which_re_adopts_the_tasks(
    replicas: Replicas, tmp_path: Path
) -> None:
    first, second = replicas(2, NARROW)
    leader, follower = leader_and_follower([first, second])
    notes = tmp_path / "journal.jsonl"
    submitted = []
    for i in range(6):
        target = (leader, follower)[i % 2]  # submissions through both replicas
        team = "ab"[i % 2]
        steps = 30 + 5 * i  # 3 s to 5.5 s of work each
        submitted.append(
            target.submit("--team", team, "--gpus", "1", "--", sys.executable, SCRIPT, str(notes), str(steps))
        )
    follower.wait(
        lambda: notes.exists() and sum('"start"' in line for line in notes.read_text().splitlines()) >= 3,
        what="some tasks to start",
    )
    leader.kill9()
    killed_at = time.monotonic()

    def leads() -> bool:
        health = follower.health()
        return health["role"] == "leader" and health["scheduler"] == "running"

    follower.wait(leads, timeout=10, what="the follower to lead and run the scheduler")
    takeover = time.monotonic() - killed_at
    assert takeover < 10, takeover

    leader.start()  # the killed server comes back, as a follower
    assert leader.health()["role"] == "follower"
    follower.wait(
        lambda: all(state(follower, t) == "succeeded" for t in submitted),
        timeout=90,
        what="every task to succeed under the new leader",
    )
    journal = [json.loads(line) for line in notes.read_text().splitlines()]
    starts = sorted(n["task"] for n in journal if n["event"] == "start")
    assert starts == sorted(submitted), "each task started once: re-adopted, not relaunched"
    assert sorted(n["task"] for n in journal if n["event"] == "done") == sorted(submitted)
    with pg(follower) as db:
        intervals = db.execute(
            'SELECT task_id, start, "end", end_reason FROM usage_intervals ORDER BY start'
        ).fetchall()
        assert sorted(str(r[0]) for r in intervals) == sorted(submitted), "one ledger interval per task"
        assert all(r[2] is not None and r[3] == "succeeded" for r in intervals), intervals
        assert db.execute("SELECT count(*) FROM gpu_allocations").fetchone() == (0,)
    gpus = {n["task"]: set(str(n["gpus"]).split(",")) for n in journal if n["event"] == "start"}
    spans = [(float(str(r[1])), float(str(r[2])), str(r[0])) for r in intervals]
    for s1, e1, t1 in spans:
        for s2, e2, t2 in spans:
            if t1 < t2 and s1 < e2 and s2 < e1:
                assert not gpus[t1] & gpus[t2], f"{t1} and {t2} shared a GPU"


def test_a_second_server_on_a_sqlite_home_refuses_and_says_why(
    platform_factory: Callable[..., Platform], tmp_path: Path
) -> None:
    first = platform_factory()
    assert first.health()["role"] == "leader"
    second = Platform(first.home, first.policy, name="second")
    done = subprocess.run(
        [sys.executable, "-m", "gpucommons", "up", "--home", str(first.home), "--port", str(second.port)],
        capture_output=True,
        text=True,
        env=second.env(),
        timeout=60,
    )
    assert done.returncode != 0
    assert "already runs on this database" in done.stderr, done.stderr
    assert "a SQLite database serves one `commons up` at a time" in done.stderr
    assert f"pid {first.proc.pid if first.proc else ''}" in done.stderr, "it names the process in the way"
    assert first.health()["status"] == "ok", "the first one is untouched"
