"""Benchmark: the history views on a month of ledger, and the engine replay behind a start estimate.

    python bench/history.py [--intervals 100000] [--teams 10] [--repeat 5]

Seeds a fresh SQLite store (in a temporary directory) with N finished tasks spread over the last 30
days across T teams of a 256-GPU pool (one ledger interval and three task events each), then times,
in-process (no HTTP), median of the repeats:
  baseline       services.ledger.usage_intervals over 30 days: the read every history view starts with
  gpus 24h/7d/30d services.history.gpu_history for each window (read + bucketed integrals)
  waits 14d      services.history.wait_history (events → admissions → p50/p95 per team and day)
and, without the store, planning.start_estimate.estimate_start for the last of P pending tasks
behind R running ones (three engine replays). Prints each figure and its ratio to the baseline.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import insert

from gpucommons.domain.resources import Resources
from gpucommons.engine.types import TaskRequest
from gpucommons.planning.start_estimate import RunTimes, estimate_start
from gpucommons.policy import parse_policy
from gpucommons.server.services import history, ledger
from gpucommons.store.db import Database
from gpucommons.store.migrate import upgrade
from gpucommons.store.models import PolicyRow, TaskEventRow, TaskRow, UsageIntervalRow
from gpucommons.testing.builders import make_state

DAY = 86400.0


def policy_text(teams: int) -> str:
    quota = 256 // teams
    lines = [
        "cluster:",
        "  name: bench",
        "  pools:",
        "    - {name: gpu, gpu_type: H100, nodes: 32, gpus_per_node: 8, price_per_gpu_hour: 2.50}",
        "priority_classes:",
        "  - {name: normal, value: 100}",
        "default_priority_class: normal",
        "teams:",
    ]
    for t in range(teams):
        lines += [f"  - name: t{t}", f"    quota: {{gpu: {{gpus: {quota}}}}}"]
    return "\n".join(lines) + "\n"


def seed(db: Database, text: str, intervals: int, teams: int, now: float) -> None:
    rng = random.Random(7)
    tasks, events, rows = [], [], []
    for i in range(intervals):
        start = now - 30 * DAY + rng.random() * 30 * DAY
        duration = rng.expovariate(1 / 3600)
        wait = rng.expovariate(1 / 600)
        team, gpus, tid = f"t{i % teams}", rng.choice((1, 2, 4, 8)), f"b{i:08d}"
        tasks.append(
            dict(id=tid, seq=i + 1, name="", team=team, state="succeeded", priority_class="normal",
                 priority_value=100, command=["true"], gpus=gpus, submitted_at=start - wait,
                 queued_at=start - wait, message="", placement=[], gpu_indices=[])
        )  # fmt: skip
        events += [
            dict(task_id=tid, at=start - wait, kind="submitted", to_state="pending", message=""),
            dict(task_id=tid, at=start, kind="transition", from_state="pending", to_state="admitted",
                 message=""),
            dict(task_id=tid, at=start + duration, kind="transition", from_state="running",
                 to_state="succeeded",
                 message=""),
        ]  # fmt: skip
        rows.append(
            dict(task_id=tid, team=team, pool="gpu", gpus=gpus, start=start, end=min(now, start + duration),
                 priority="normal", borrowed_gpus=0, end_reason="succeeded", lost_gpu_seconds=0.0)
        )  # fmt: skip
    with db.session() as session:
        session.add(PolicyRow(applied_at=now - 40 * DAY, applied_by="bench", cluster_name="bench", text=text))
        for table, values in ((TaskRow, tasks), (TaskEventRow, events), (UsageIntervalRow, rows)):
            for first in range(0, len(values), 20_000):
                session.execute(insert(table), values[first : first + 20_000])


def median_ms(action: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return 1000 * statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--intervals", type=int, default=100_000)
    parser.add_argument("--teams", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--running", type=int, default=200)
    parser.add_argument("--pending", type=int, default=500)
    args = parser.parse_args()
    now = time.time()
    text = policy_text(args.teams)
    policy = parse_policy(text, "bench")
    teams = frozenset(policy.team_names)
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'commons.db'}")
        upgrade(db)
        started = time.perf_counter()
        seed(db, text, args.intervals, args.teams, now)
        print(f"seeded {args.intervals:,} tasks over 30 days in {time.perf_counter() - started:.1f} s")

        def read() -> object:
            with db.session() as s:
                return ledger.usage_intervals(s, teams, now - 30 * DAY, now, now)

        def gpus(window: str) -> Callable[[], object]:
            def run() -> object:
                with db.session() as s:
                    return history.gpu_history(s, policy, teams, window, now)

            return run

        def waits() -> object:
            with db.session() as s:
                return history.wait_history(s, teams, 14, now)

        base = median_ms(read, args.repeat)
        print(f"{'baseline (read 30 days)':28} {base:9.1f} ms   1.00x")
        for name, action in (
            ("gpus 24h", gpus("24h")),
            ("gpus 7d", gpus("7d")),
            ("gpus 30d", gpus("30d")),
            ("waits 14d", waits),
        ):
            ms = median_ms(action, args.repeat)
            print(f"{name:28} {ms:9.1f} ms   {ms / base:5.2f}x")
        db.dispose()

    rng = random.Random(11)
    state = make_state(policy)
    for i in range(args.running):
        task = TaskRequest(f"r{i}", f"t{i % args.teams}", Resources(1), 100, "normal", i, now - 3600)
        state.running(task, "gpu", at=now - rng.random() * 7200)
    for i in range(args.pending):
        state.pending(TaskRequest(f"p{i}", f"t{i % args.teams}", Resources(rng.choice((1, 2))), 100, "normal",
                                  10_000 + i, now - 100 + i * 0.01))  # fmt: skip
    live = state.obj()
    running, pending = list(live.iter_running()), list(live.iter_pending())
    times = RunTimes.of([rng.expovariate(1 / 3600) for _ in range(1000)])
    target = pending[-1].id
    ms = median_ms(
        lambda: estimate_start(policy, running, pending, target, times, now), max(1, args.repeat // 2)
    )
    print(f"{'estimate (last of ' + str(args.pending) + ' pending)':28} {ms:9.1f} ms   {ms / base:5.2f}x")


if __name__ == "__main__":
    main()
