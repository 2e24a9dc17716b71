"""Benchmark: `commons k8s apply` round trips, and the Workload observer's throughput.

apply: a generated policy with N teams (bench/policy.py's generator) applied through the real
kubernetes client to the fake cluster on loopback (gpucommons.testing.fake_k8s). Reports the
objects, the HTTP requests, and the wall time of the first apply (dry run + create), of a second
apply (everything unchanged) and of a dry run. Against a real API server each request costs a network
round trip (typically 2-10 ms), so requests × RTT is the figure to expect there.
observe: the recorded admit / preempt / readmit / finish sequence replayed for W distinct Workloads
through `observe` (pure), in events per second.
Run:  python bench/k8s_apply.py [--teams 10 100] [--workloads 20000]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.policy import policy_text  # noqa: E402

from gpucommons.backends.kubernetes import checked_render  # noqa: E402
from gpucommons.backends.kubernetes.apply import ApplyOptions, apply_manifests  # noqa: E402
from gpucommons.backends.kubernetes.connection import connect  # noqa: E402
from gpucommons.backends.kubernetes.observe import ClusterNames, replay  # noqa: E402
from gpucommons.policy import parse_policy  # noqa: E402
from gpucommons.testing.fake_k8s import FakeCluster  # noqa: E402

RECORDING = REPO / "tests" / "unit" / "k8s_client" / "recordings" / "workload_preempted_then_finished.json"


def bench_apply(teams: int) -> None:
    objects = checked_render(parse_policy(policy_text(teams)))
    with tempfile.TemporaryDirectory() as tmp, FakeCluster() as fake:
        api = connect(fake.kubeconfig(Path(tmp)))
        rows = []
        for label, options in (
            ("first apply", ApplyOptions()),
            ("unchanged apply", ApplyOptions()),
            ("dry run", ApplyOptions(dry_run=True)),
        ):
            before = len(fake.requests)
            started = time.perf_counter()
            apply_manifests(api, objects, options)
            rows.append((label, len(fake.requests) - before, time.perf_counter() - started))
    for label, requests, seconds in rows:
        print(
            f"teams={teams} objects={len(objects)} {label}: {requests} requests, {seconds:.2f} s "
            f"({1000 * seconds / requests:.2f} ms/request)"
        )


def bench_observe(workloads: int) -> None:
    recorded = json.loads(RECORDING.read_text())["events"]
    policy = parse_policy((REPO / "examples" / "commons.yaml").read_text())
    names = ClusterNames.from_policy(policy)
    events = []
    for i in range(workloads):
        for event in recorded:
            obj = copy.deepcopy(event["object"])
            obj["metadata"]["uid"] = f"uid-{i}"
            seen = datetime.fromisoformat(event["seen"].replace("Z", "+00:00")).astimezone(UTC)
            events.append((event["type"], obj, seen))
    started = time.perf_counter()
    _, intervals = replay(events, names)
    seconds = time.perf_counter() - started
    print(
        f"observe: {len(events)} events of {workloads} workloads → {len(intervals)} intervals in "
        f"{seconds:.2f} s ({len(events) / seconds:,.0f} events/s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--workloads", type=int, default=20_000)
    args = parser.parse_args()
    for teams in args.teams:
        bench_apply(teams)
    bench_observe(args.workloads)


if __name__ == "__main__":
    main()
