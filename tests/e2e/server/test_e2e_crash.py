"""Done-when of issue 4: kill -9 of the server under load, restart: no task lost, no GPU handed out
twice, ledger intervals closed when the processes really ended."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from tests.e2e.server.conftest import Platform

SCRIPT = str(Path(__file__).parent.parent / "task_script.py")
CAPACITY = 4

NO_PREEMPTION = """
cluster:
  name: crash
  pools:
    - {name: gpu, gpu_type: H100, nodes: 1, gpus_per_node: 4, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 3s}
default_priority_class: normal
teams:
  - {name: a, quota: {gpu: {gpus: 2}}}
  - {name: b, quota: {gpu: {gpus: 2}}}
"""

pytestmark = pytest.mark.slow


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def max_concurrent_gpus(rows: list[dict[str, str]]) -> int:
    points = sorted(
        [(ts(r["start"]), int(r["gpus"])) for r in rows] + [(ts(r["end"]), -int(r["gpus"])) for r in rows]
    )
    held = peak = 0
    for _, delta in sorted(points, key=lambda p: (p[0], p[1])):
        held += delta
        peak = max(peak, held)
    return peak


def test_kill_9_under_load_loses_nothing_and_double_allocates_nothing(
    platform_factory: object, tmp_path: Path
) -> None:
    platform: Platform = platform_factory(NO_PREEMPTION)  # type: ignore[operator]
    notes = tmp_path / "journal.jsonl"
    submitted = []
    for i in range(10):
        team = "ab"[i % 2]
        gpus = 1 + i % 2
        steps = 15 + 5 * (i % 4)  # 1.5 s to 3 s of work each
        submitted.append(
            platform.submit(
                "--team", team, "--gpus", str(gpus), "--", sys.executable, SCRIPT, str(notes), str(steps)
            )
        )
    platform.wait(
        lambda: (
            sum(1 for line in notes.read_text().splitlines() if '"start"' in line) >= 3
            if notes.exists()
            else False
        ),
        what="some tasks to start",
    )

    platform.kill9()
    down_at = time.time()
    time.sleep(3.5)  # tasks that were running finish while nobody watches
    platform.start()

    platform.wait(
        lambda: set(platform.states().values()) == {"succeeded"},
        timeout=90,
        what="every task to succeed after the restart",
    )
    journal = [json.loads(line) for line in notes.read_text().splitlines()]
    done_at = {n["task"]: float(n["at"]) for n in journal if n["event"] == "done"}
    assert set(done_at) == set(submitted), "every task ran to completion exactly once"
    starts = [n["task"] for n in journal if n["event"] == "start"]
    assert sorted(starts) == sorted(submitted), "no task was started twice (re-adopted, not relaunched)"

    out = tmp_path / "usage.csv"
    platform.cli("usage", "export", "--out", str(out))
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert sorted(r["task_id"] for r in rows) == sorted(submitted), "one ledger interval per task"
    assert all(r["end_reason"] == "succeeded" for r in rows)
    assert max_concurrent_gpus(rows) <= CAPACITY, "no GPU was held twice at any moment"
    ended_while_down = [r for r in rows if down_at < done_at[r["task_id"]] < down_at + 3.5]
    assert ended_while_down, "the test must kill the server while tasks are running"
    for row in rows:
        # The interval ends when the process ended, not when the restarted server noticed.
        assert done_at[row["task_id"]] - 0.5 <= ts(row["end"]) <= done_at[row["task_id"]] + 1.0, row

    # CUDA_VISIBLE_DEVICES of tasks running at the same time never share a GPU.
    spans = [(ts(r["start"]), ts(r["end"]), r["task_id"]) for r in rows]
    gpus = {n["task"]: set(str(n["gpus"]).split(",")) for n in journal if n["event"] == "start"}
    for s1, e1, t1 in spans:
        for s2, e2, t2 in spans:
            if t1 < t2 and s1 < e2 and s2 < e1:
                assert not gpus[t1] & gpus[t2], f"{t1} and {t2} shared a GPU"

    db = sqlite3.connect(platform.home / "commons.db")
    assert db.execute("select count(*) from gpu_allocations").fetchone() == (0,)
    assert db.execute("select count(*) from usage_intervals where end is null").fetchone() == (0,)
