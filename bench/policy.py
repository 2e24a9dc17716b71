"""Benchmark: reading, refusing, writing and compiling large policy files.

The policy is read at every `commons policy check`, `simulate`, `up` and `policy apply`; a platform
with hundreds of teams must not wait on it. Generates a policy with N teams in 10 cohorts over two
pools (each team: two quota entries with limits), then times (p50 / max over R runs):
  parse    parse_policy on a valid file (YAML → schema → cross-checks → domain.Policy)
  refuse   parse_policy on the same file with one error per team (every error reported)
  dump     dump_policy (Policy → YAML)
  render   k8s render (Policy → Kubernetes objects + Kueue rule checks)
Run:  python bench/policy.py [--teams N] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from gpucommons.backends.kubernetes import checked_render
from gpucommons.policy import PolicyError, dump_policy, parse_policy


def policy_text(teams: int) -> str:
    cohorts = "\n".join(f"  - {{name: dept-{i}}}" for i in range(10))
    lines = "\n".join(
        f"  - {{name: team-{i}, cohort: dept-{i % 10}, groups: [g-{i}],"
        f" quota: {{h100: {{gpus: 8, borrow_limit: 8, lend_limit: 4}}, a100: {{gpus: 8, borrow_limit: 16}}}},"
        f" preemption: {{reclaim: any, within_team: lower_priority}}}}"
        for i in range(teams)
    )
    return f"""cluster:
  name: bench
  pools:
    - {{name: h100, gpu_type: H100, nodes: {teams}, gpus_per_node: 8, price_per_gpu_hour: 2.50}}
    - {{name: a100, gpu_type: A100, nodes: {teams}, gpus_per_node: 8, price_per_gpu_hour: 1.60}}
priority_classes:
  - {{name: production, value: 1000, preemptible: false}}
  - {{name: experiment, value: 100, grace_period: 1m}}
cohorts:
{cohorts}
teams:
{lines}
"""


def timed(action: Callable[[], object], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), max(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    good = policy_text(args.teams)
    bad = good.replace("lend_limit: 4}", "lend_limit: 9}")  # lend limit above nominal in every team
    policy = parse_policy(good)

    def refuse() -> None:
        try:
            parse_policy(bad)
        except PolicyError as error:
            assert len(error.issues) == args.teams
        else:
            raise AssertionError("the broken policy was accepted")

    results = {
        "parse": timed(lambda: parse_policy(good), args.repeat),
        "refuse": timed(refuse, args.repeat),
        "dump": timed(lambda: dump_policy(policy), args.repeat),
        "render": timed(lambda: checked_render(policy), args.repeat),
    }
    print(f"teams={args.teams} file={len(good.encode()) // 1024} KiB repeat={args.repeat}")
    for name, (p50, worst) in results.items():
        print(f"  {name:7s} p50_ms={p50:8.1f} max_ms={worst:8.1f}")
    p50, _ = results["parse"]
    print(f"policy parse teams={args.teams} p50_ms={p50:.1f}")


if __name__ == "__main__":
    main()
