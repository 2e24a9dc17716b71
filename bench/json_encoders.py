"""Benchmark: pydantic-core's JSON encoder against orjson for the answers the dashboard polls.

    pip install orjson && python bench/json_encoders.py

FastAPI (0.165) serialises a route's response model with pydantic-core straight to bytes; an orjson
response needs pydantic's `dump_python(mode="json")` first, then `orjson.dumps`. In-process, CPU time,
median of `--repeat` runs, for 200 `Task`s (a task-list page) and 1,000 `QueueEntry`s (a long queue);
both encodings are checked to decode to the same JSON. orjson is not a dependency of the project:
this script exists to show why (docs/benchmarks.md, "Control plane under load").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from gpucommons.api import schemas


def median_ms(action: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.process_time()
        action()
        samples.append(time.process_time() - start)
    return 1000 * statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    try:
        import orjson
    except ImportError:
        print("orjson is not installed (pip install orjson): it is not a dependency of the project")
        return 1
    now = datetime.now(UTC)
    tasks = [
        schemas.Task(
            id=f"t{i:010d}",
            seq=i,
            name="train",
            team="nlp",
            state="pending",
            priority="experiment",
            priority_value=100,
            command=["python", "train.py", "--lr", "0.1"],
            gpus=1,
            cpu_milli=0,
            memory_mib=0,
            submitted_at=now,
            queued_at=now,
            message="waiting for the scheduler",
            submitted_by="admin",
        )
        for i in range(200)
    ]
    entries = [
        schemas.QueueEntry(
            task_id=f"t{i:010d}",
            name="train",
            team="nlp",
            priority="experiment",
            gpus=1,
            position=i,
            team_position=i,
            waiting_seconds=1.5 + i,
            queued_at=now,
            reason_code="quota_exhausted",
            reason="team nlp uses 16/16 H100 GPUs and has reached its borrow limit",
        )
        for i in range(1000)
    ]
    cases: list[tuple[str, list[Any], TypeAdapter[Any]]] = [
        ("200 tasks", tasks, TypeAdapter(list[schemas.Task])),
        ("1,000 queue entries", entries, TypeAdapter(list[schemas.QueueEntry])),
    ]
    print("| answer | pydantic dump_json ms | orjson over dump_python(mode=json) ms | ratio |")
    print("|---|---|---|---|")
    for label, values, adapter in cases:
        assert orjson.loads(adapter.dump_json(values)) == orjson.loads(
            orjson.dumps(adapter.dump_python(values, mode="json"))
        )
        fast = median_ms(lambda a=adapter, v=values: a.dump_json(v), args.repeat)
        other = median_ms(
            lambda a=adapter, v=values: orjson.dumps(a.dump_python(v, mode="json")), args.repeat
        )
        print(f"| {label} | {fast:.2f} | {other:.2f} | {other / fast:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
