"""Issue 14 end to end on a real Slurm, through the CLI: borrowing across nodes, reclaim with SIGTERM,
checkpoint and resume; a 16-GPU gang over two whole nodes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.e2e.slurm.conftest import SlurmPlatform

pytestmark = pytest.mark.slow


def test_borrowing_across_nodes_then_reclaim_with_sigterm_and_resume_from_the_checkpoint(
    slurm_platform: Callable[..., SlurmPlatform], tmp_path: Path
) -> None:
    p = slurm_platform()
    journal = tmp_path / "journal.jsonl"
    # 30 s of work: a's tasks must outlive b's arrival. With 12 s, a loaded CI machine let one of
    # them finish first; the victim came back on the freed node, min-runtime protected it, and b's
    # second task reclaimed a third task of a (CI, 7 December 2026, third session).
    script = p.task_script(journal, 300, 0.1, 0.01)
    a = [p.submit("--team", "a", "--gpus", "8", "--checkpoint", "on-signal", "--", *script)]
    a += [p.submit_api("a", 8, *script, checkpoint="on-signal") for _ in range(3)]

    def nodes_running_a() -> set[object]:
        return {n["node"] for n in p.journal(journal) if n["event"] == "start"}

    # Team a borrows b's idle 16 GPUs: its four 8-GPU tasks run on the four nodes at once.
    p.wait(lambda: nodes_running_a() == {"n1", "n2", "n3", "n4"}, what="a's tasks on every node")
    # b's two tasks end only once both have started: with a fixed `sleep 1`, a slow machine submitted
    # the second after the first had ended, a's first victim was back by then, and b reclaimed from
    # a third task (CI, 7 December 2026).
    started = tmp_path / "b-started"
    started.mkdir(mode=0o777)
    both = (
        f"mktemp -p {started} >/dev/null; n=0; "
        f"until [ $(ls {started} | wc -l) -ge 2 ] || [ $n -ge 600 ]; do sleep 0.1; n=$((n+1)); done"
    )
    b = [
        p.submit("--team", "b", "--gpus", "8", "--", "sh", "-c", both),
        p.submit_api("b", 8, "sh", "-c", both),
    ]
    p.wait(
        lambda: {p.states()[t] for t in [*a, *b]} == {"succeeded"}, timeout=150, what="every task to succeed"
    )

    events = p.journal(journal)
    saved = [n for n in events if n["event"] == "sigterm-saved"]
    assert len({n["task"] for n in saved}) == 2, (
        f"b reclaimed exactly its 16 GPUs: two of a's tasks; {events}"
    )
    for stop in saved:
        resumed = [
            n for n in events if n["task"] == stop["task"] and n["event"] == "start" and n["restart"] == 1
        ]
        assert len(resumed) == 1 and resumed[0]["step"] == stop["step"] > 0, "resumed where it saved"
        assert p.task(str(stop["task"]))["restart_count"] == 1
    assert sorted(n["task"] for n in events if n["event"] == "done") == sorted(a)
    queue = p.cli("tasks", "--team", "a").stdout
    assert "succeeded" in queue


def test_a_16_gpu_gang_is_one_job_over_two_whole_nodes_each_seeing_its_own_gpus(
    slurm_platform: Callable[..., SlurmPlatform], tmp_path: Path
) -> None:
    p = slurm_platform()
    journal = tmp_path / "journal.jsonl"
    task = p.submit("--team", "a", "--gpus", "16", "--", *p.task_script(journal, 1))
    p.wait(lambda: p.states()[task] == "succeeded", timeout=30, what="the gang to succeed")
    starts = [n for n in p.journal(journal) if n["event"] == "start"]
    assert len(starts) == 2 and len({n["node"] for n in starts}) == 2, starts
    assert {n["gpus"] for n in starts} == {"0,1,2,3,4,5,6,7"}, "each node gives its own 8 GPUs"
    assert len({n["job"] for n in starts}) == 1, "one Slurm job"
    assert "attempt 0 of" in p.cli("logs", task).stdout
