"""Benchmark: 1,000 one-second jobs on the 4-node test Slurm (32 fake GPUs), straight and governed.

Starts the test cluster (gpucommons.testing.slurm_cluster: munge, slurmctld, four slurmd × 8 fake
GPUs on this machine), submits N jobs of one GPU that sleep D seconds straight to Slurm with `sbatch`,
one after the other as a script would, and reports:
  makespan         first submit → last job's end (ideal: N × D / 32 GPUs, plus submission)
  submit → start   per job, from just before its sbatch call to the first line its batch script runs
                   (both read from this machine's clock, to the millisecond), p50 / p99 / max
  submission       how long the N sbatch calls took (they overlap the running jobs)

Then the same N tasks through GPU Commons onto the same cluster (`commons up --backend slurm`, tasks
submitted one after the other over HTTP), measured the same way, and the ratio of the two makespans
(issue 14's goal: GPU Commons adds ≤ 20 %).

Run (as root, Slurm installed: scripts/setup.sh --dev):  python bench/slurm_throughput.py [--jobs 1000]
(`PYTHONPATH=src` to measure this checkout rather than the installed package.)
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gpucommons.testing.slurm_cluster import SlurmCluster, SlurmUnavailable, slurm_cluster, wait_until


@dataclass(frozen=True)
class Run:
    """One way of getting N jobs through the cluster, measured."""

    jobs: int
    makespan_s: float
    submit_to_start_s: list[float]
    submission_s: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def straight_to_slurm(cluster: SlurmCluster, jobs: int, duration_s: float) -> Run:
    """N `sbatch --gres=gpu:1` jobs submitted one after the other; times come from the jobs themselves."""
    out = cluster.root / "bench-direct"
    out.mkdir()
    script = (
        "#!/bin/sh\n"
        f'echo "start $(date +%s.%N)" > {out}/$SLURM_JOB_ID\n'
        f"sleep {duration_s}\n"
        f'echo "end $(date +%s.%N)" >> {out}/$SLURM_JOB_ID\n'
    )
    submitted: dict[str, float] = {}
    first = time.time()
    for _ in range(jobs):
        at = time.time()
        done = subprocess.run(
            ["sbatch", "--parsable", "--gres=gpu:1", "--output=/dev/null", f"--chdir={out}"],
            input=script, capture_output=True, text=True, env=cluster.env, timeout=60, check=True,
        )  # fmt: skip
        submitted[done.stdout.strip().split(";")[0]] = at
    submission = time.time() - first

    def finished() -> int:
        return sum(1 for job in submitted if "end" in _read(out / job))

    wait_until(f"{jobs} jobs to end", lambda: finished() == jobs, timeout=max(600.0, jobs * duration_s))
    starts, ends = {}, {}
    for job in submitted:
        times = dict(line.split() for line in _read(out / job).splitlines())
        starts[job], ends[job] = float(times["start"]), float(times["end"])
    return Run(
        jobs=jobs,
        makespan_s=max(ends.values()) - first,
        submit_to_start_s=[starts[job] - submitted[job] for job in submitted],
        submission_s=submission,
    )


POLICY = """
cluster:
  name: bench
  pools:
    - {{name: gpu, gpu_type: H100, nodes: {nodes}, gpus_per_node: {gpus}, price_per_gpu_hour: 2.00}}
priority_classes:
  - {{name: normal, value: 100, grace_period: 10s}}
default_priority_class: normal
teams:
  - {{name: bench, quota: {{gpu: {{gpus: {total}}}}}}}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def through_gpucommons(cluster: SlurmCluster, jobs: int, duration_s: float, tick_s: float) -> Run:
    """The same N one-GPU tasks submitted one after the other to `commons up --backend slurm` on
    `cluster` (HTTP, as `commons submit` does, without a CLI process per task), timed the same way:
    from just before each submit request to the first line the task runs, on this machine's clock."""
    import httpx

    import gpucommons

    root = cluster.root / "bench-commons"
    out = root / "out"
    out.mkdir(parents=True)
    shape = cluster.shape
    policy = root / "policy.yaml"
    policy.write_text(
        POLICY.format(nodes=shape.nodes, gpus=shape.gpus_per_node, total=shape.nodes * shape.gpus_per_node)
    )
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    src = str(Path(gpucommons.__file__).resolve().parents[1])
    env = {**cluster.env, "PYTHONPATH": src, "COMMONS_ISOLATION": "logical"}
    env.pop("COMMONS_HOME", None)
    env.pop("COMMONS_DATABASE_URL", None)
    argv = [sys.executable, "-m", "gpucommons", "up", "--backend", "slurm", "--slurm-conf", str(cluster.conf)]
    argv += [
        "--policy",
        str(policy),
        "--home",
        str(root / "home"),
        "--port",
        str(port),
        "--tick",
        str(tick_s),
    ]
    with (root / "server.log").open("wb") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until("commons up to answer", lambda: _healthy(url), timeout=60)
        token = (root / "home" / "admin-token").read_text().strip()
        script = (
            f'echo "start $(date +%s.%N)" > {out}/$COMMONS_TASK_ID; sleep {duration_s}; '
            f'echo "end $(date +%s.%N)" >> {out}/$COMMONS_TASK_ID'
        )
        submitted: dict[str, float] = {}
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            first = time.time()
            for _ in range(jobs):
                at = time.time()
                response = client.post(
                    "/api/v1/tasks", json={"team": "bench", "gpus": 1, "command": ["sh", "-c", script]}
                )
                response.raise_for_status()
                submitted[response.json()["id"]] = at
            submission = time.time() - first

        def finished() -> int:
            return sum(1 for task in submitted if "end" in _read(out / task))

        wait_until(f"{jobs} tasks to end", lambda: finished() == jobs, timeout=max(600.0, jobs * duration_s))
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
    starts, ends = {}, {}
    for task in submitted:
        times = dict(line.split() for line in _read(out / task).splitlines())
        starts[task], ends[task] = float(times["start"]), float(times["end"])
    return Run(
        jobs=jobs,
        makespan_s=max(ends.values()) - first,
        submit_to_start_s=[starts[t] - submitted[t] for t in submitted],
        submission_s=submission,
    )


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def report(name: str, run: Run, ideal_s: float, unit: str = "sbatch") -> list[str]:
    waits = run.submit_to_start_s
    return [
        f"{name}: {run.jobs} jobs, makespan {run.makespan_s:.1f} s (ideal {ideal_s:.1f} s, "
        f"{run.makespan_s / ideal_s:.2f}×); submission took {run.submission_s:.1f} s "
        f"({run.jobs / run.submission_s:.0f} {unit}/s)",
        f"{name}: submit → start p50 {statistics.median(waits):.2f} s, p99 {percentile(waits, 0.99):.2f} s, "
        f"max {max(waits):.2f} s",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="number of jobs (default 1000)")
    parser.add_argument("--duration", type=float, default=1.0, help="seconds each job sleeps (default 1)")
    parser.add_argument("--tick", type=float, default=0.1, help="the server's --tick (default 0.1 s)")
    args = parser.parse_args()
    load = os.getloadavg()
    try:
        started = time.monotonic()
        with slurm_cluster() as cluster:
            gpus = cluster.shape.nodes * cluster.shape.gpus_per_node
            ideal = args.jobs * args.duration / gpus
            print(
                f"cluster: {cluster.shape.nodes} nodes × {cluster.shape.gpus_per_node} GPUs, started in "
                f"{time.monotonic() - started:.2f} s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
            )
            direct = straight_to_slurm(cluster, args.jobs, args.duration)
            for line in report("straight to Slurm", direct, ideal):
                print(line, flush=True)
            cluster.wait_nodes_idle()
            governed = through_gpucommons(cluster, args.jobs, args.duration, args.tick)
            for line in report("through GPU Commons", governed, ideal, "submits"):
                print(line, flush=True)
            stopping = time.monotonic()
        print(f"cluster: stopped in {time.monotonic() - stopping:.2f} s")
    except SlurmUnavailable as exc:
        print(f"slurm_throughput: cannot start the test cluster: {exc}", file=sys.stderr)
        return 1
    ratio = governed.makespan_s / direct.makespan_s
    verdict = "met" if ratio <= 1.2 else "not met"
    d, g = direct.submit_to_start_s, governed.submit_to_start_s
    print(
        f"slurm_throughput: makespan direct {direct.makespan_s:.1f} s, through GPU Commons "
        f"{governed.makespan_s:.1f} s, ratio {ratio:.2f} (goal ≤ 1.20: {verdict}); submit→start p50 "
        f"{statistics.median(d):.2f} s vs {statistics.median(g):.2f} s, p99 {percentile(d, 0.99):.2f} s vs "
        f"{percentile(g, 0.99):.2f} s; load average after " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
