"""Benchmark: what publishing the scheduler's read view costs per cycle (docs/decisions/0012).

The scheduler swaps in a `ReadView` at the end of every cycle and after every command, where it used
to build only a `UsageView` (the rest was read under its lock). Both are built `--repeat` times over
a state with N pending tasks (two teams, one pool, every task with a reason); the figures are the CPU
time of this process per publication, and the ratio of the new view to the old one measured in the
same run. Run: `python bench/read_view.py [--pending 1000 3000 10000] [--repeat 200]`.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial

from gpucommons.domain.resources import Resources
from gpucommons.engine.requests import task_request
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Pending, PendingCode
from gpucommons.policy import parse_policy
from gpucommons.server.workers.outputs import ReadView, UsageView

POLICY = """
cluster:
  name: bench
  pools:
    - {name: gpu, gpu_type: H100, nodes: 1, gpus_per_node: 4, price_per_gpu_hour: 2.00}
priority_classes:
  - {name: normal, value: 100, grace_period: 2s}
default_priority_class: normal
teams:
  - {name: a, groups: [team-a], quota: {gpu: {gpus: 2}}}
  - {name: b, groups: [team-b], quota: {gpu: {gpus: 2}}}
"""


def _cpu_ms(build: Callable[[], object], repeat: int) -> float:
    started = time.process_time()
    for _ in range(repeat):
        build()
    return (time.process_time() - started) / repeat * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pending", nargs="+", type=int, default=[1000, 3000, 10000])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    policy = parse_policy(POLICY, "bench policy")
    print(f"# load average {os.getloadavg()[0]:.2f} (1 min)")
    print("| pending | UsageView.of ms CPU | ReadView.of ms CPU | ratio |")
    print("|---|---|---|---|")
    for n in args.pending:
        state = ClusterState(policy)
        for i in range(n):
            request = task_request(
                f"t{i}", "ab"[i % 2], Resources(gpus=1), "normal", 100,
                seq=i, queued_at=float(i), pool=None, policy=policy,
            )  # fmt: skip
            state.add_pending(request)
        reasons = {f"t{i}": Pending(PendingCode.BUDGET_EXHAUSTED, "waits") for i in range(n)}
        old = _cpu_ms(partial(UsageView.of, state), args.repeat)
        new = _cpu_ms(partial(ReadView.of, state, reasons), args.repeat)
        print(f"| {n:,} | {old:.3f} | {new:.3f} | {new / old:.2f} |")


if __name__ == "__main__":
    main()
