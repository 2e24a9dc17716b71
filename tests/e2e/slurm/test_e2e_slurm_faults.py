"""Issue 14's faults on a real Slurm: GPU Commons killed with -9 mid-flight and restarted (nothing lost,
nothing run twice, the ledger exact), one slurmd killed (its tasks requeued or failed, the queue
says why, the node comes back), and a node drained for maintenance."""

from __future__ import annotations

import csv
import io
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from tests.e2e.slurm.conftest import SlurmPlatform

from gpucommons.testing.slurm_cluster import ClusterShape, SlurmCluster, SlurmUnavailable, slurm_cluster

pytestmark = pytest.mark.slow

ONE_TEAM = """
cluster:
  name: slurm-faults
  pools:
    - {name: gpu, gpu_type: H100, nodes: 4, gpus_per_node: 8, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 5s}
default_priority_class: normal
teams:
  - {name: a, quota: {gpu: {gpus: 32}}}
"""


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_kill_9_mid_flight_and_restart_loses_nothing_runs_nothing_twice_and_the_ledger_is_exact(
    slurm_platform: Callable[..., SlurmPlatform], tmp_path: Path
) -> None:
    p = slurm_platform(ONE_TEAM)
    journal = tmp_path / "journal.jsonl"
    # 6 tasks of 8 GPUs on 32: four run, two wait; 2.5 s to 4 s of work each.
    tasks = [p.submit("--team", "a", "--gpus", "8", "--", *p.task_script(journal, 25))]
    tasks += [p.submit_api("a", 8, *p.task_script(journal, 25 + 5 * (i % 4))) for i in range(1, 6)]
    p.wait(
        lambda: sum(1 for n in p.journal(journal) if n["event"] == "start") >= 4, what="four tasks to start"
    )
    p.kill9()
    down_at = time.time()
    time.sleep(4.5)  # the running tasks end while nobody watches
    p.start()
    p.wait(
        lambda: set(p.states().values()) == {"succeeded"},
        timeout=60,
        what="every task to succeed after the restart",
    )

    events = p.journal(journal)
    done_at = {str(n["task"]): float(n["at"]) for n in events if n["event"] == "done"}  # type: ignore[arg-type]
    assert sorted(done_at) == sorted(tasks), "every task ran to completion"
    starts = [n["task"] for n in events if n["event"] == "start"]
    assert sorted(starts) == sorted(tasks), "no task started twice: the jobs were re-adopted by id"
    assert any(down_at < at < down_at + 4.5 for at in done_at.values()), (
        "tasks must end while the server is down"
    )

    out = tmp_path / "usage.csv"
    p.cli("usage", "export", "--out", str(out))
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert sorted(r["task_id"] for r in rows) == sorted(tasks), "one ledger interval per task"
    assert {r["end_reason"] for r in rows} == {"succeeded"}
    for row in rows:
        # Closed at the job's end as Slurm recorded it (whole seconds), not when the server noticed.
        assert done_at[row["task_id"]] - 1.5 <= ts(row["end"]) <= done_at[row["task_id"]] + 1.5, row
    # No (node, GPU) was given to two tasks at once.
    spans = {r["task_id"]: (ts(r["start"]), ts(r["end"])) for r in rows}
    held = {str(n["task"]): (n["node"], str(n["gpus"])) for n in events if n["event"] == "start"}
    for t1, (s1, e1) in spans.items():
        for t2, (s2, e2) in spans.items():
            if t1 < t2 and s1 < e2 - 1 and s2 < e1 - 1:
                assert held[t1][0] != held[t2][0], f"{t1} and {t2} overlapped on node {held[t1][0]}"
    db = sqlite3.connect(p.home / "commons.db")
    assert db.execute("select count(*) from gpu_allocations").fetchone() == (0,)
    assert db.execute("select count(*) from usage_intervals where end is null").fetchone() == (0,)


def test_a_killed_slurmd_takes_its_node_out_its_tasks_requeued_or_failed_and_the_queue_says_why(
    slurm_platform: Callable[..., SlurmPlatform], tmp_path: Path
) -> None:
    try:
        with slurm_cluster(shape=ClusterShape(slurmd_timeout_s=6)) as cluster:
            p = slurm_platform(ONE_TEAM, cluster)
            journal = tmp_path / "journal.jsonl"
            # Both 4-GPU tasks land on the same node (best fit); one can resume, the other cannot.
            resumable = p.submit(
                "--team",
                "a",
                "--gpus",
                "4",
                "--checkpoint",
                "on-signal",
                "--",
                *p.task_script(journal, 300, 0.1, 0.01),
            )
            fragile = p.submit_api("a", 4, *p.task_script(journal, 300))
            p.wait(
                lambda: sum(1 for n in p.journal(journal) if n["event"] == "start") == 2, what="both to start"
            )
            nodes = {n["node"] for n in p.journal(journal)}
            assert len(nodes) == 1
            node = str(nodes.pop())
            cluster.kill_node(node)

            p.wait(
                lambda: p.states()[fragile] == "failed",
                timeout=60,
                what="the task without checkpoint to fail",
            )
            assert node in str(p.task(fragile)["message"])
            p.wait(
                lambda: p.states()[resumable] == "succeeded", timeout=30, what="the other to run elsewhere"
            )
            again = [n for n in p.journal(journal) if n["task"] == resumable and n["event"] == "start"]
            assert [n["restart"] for n in again] == [0, 1] and again[1]["node"] != node

            # 32 GPUs do not fit on three nodes: the queue says which node is out and why.
            whole = p.submit_api("a", 32, "true")
            p.wait(lambda: node in p.queue_text(), timeout=20, what="the queue to name the node")
            queue = p.cli("queue").stdout
            assert "out of service" in queue and node in queue, queue
            cluster.start_node(node)
            p.wait(lambda: p.states()[whole] == "succeeded", timeout=60, what="the node to come back")
            p.stop()
    except SlurmUnavailable as exc:
        pytest.skip(str(exc))


def test_a_drained_node_sends_its_resumable_task_elsewhere_and_lets_the_other_finish(
    slurm_platform: Callable[..., SlurmPlatform], slurm: SlurmCluster, tmp_path: Path
) -> None:
    """`scontrol update state=drain`: the node takes no new work; the task that can resume gets the
    class's signal, checkpoints and runs again on another node; the one that cannot runs to its end
    there (a drain lets running work finish); the queue names the node."""
    p = slurm_platform(ONE_TEAM)
    journal = tmp_path / "journal.jsonl"
    work = p.task_script(journal, 60, 0.1, 0.01)
    resumable = p.submit("--team", "a", "--gpus", "4", "--checkpoint", "on-signal", "--", *work)
    steady = p.submit_api("a", 4, *p.task_script(journal, 60, 0.1))
    p.wait(lambda: sum(1 for n in p.journal(journal) if n["event"] == "start") == 2, what="both to start")
    nodes = {n["node"] for n in p.journal(journal)}
    assert len(nodes) == 1, "both 4-GPU tasks on one node (best fit)"
    node = str(nodes.pop())
    slurm.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=maintenance")

    def starts(task: str) -> list[dict[str, object]]:
        return [n for n in p.journal(journal) if n["task"] == task and n["event"] == "start"]

    try:
        p.wait(lambda: len(starts(resumable)) == 2, timeout=60, what="the resumable task to start again")
        again = starts(resumable)
        assert [n["restart"] for n in again] == [0, 1] and again[1]["node"] != node
        events = p.api(f"/api/v1/tasks/{resumable}/events")
        assert isinstance(events, list)
        messages = " ".join(str(e["message"]) for e in events)
        assert f"{node} draining: maintenance" in messages and "requeued" in messages, messages
        # The other stayed where it was and ran to its end.
        p.wait(lambda: p.states()[steady] == "succeeded", timeout=60, what="the other task to end")
        assert [n["node"] for n in starts(steady)] == [node]
        p.wait(lambda: p.states()[resumable] == "succeeded", timeout=60, what="the resumed task to end")
        # Work for the whole cluster waits, and the queue says which node is out and why.
        whole = p.submit_api("a", 32, "true")
        p.wait(lambda: "maintenance" in p.queue_text(), timeout=20, what="the queue to name the drain")
        assert node in p.queue_text()
    finally:
        slurm.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
    p.wait(lambda: p.states()[whole] == "succeeded", timeout=60, what="the node to come back")
