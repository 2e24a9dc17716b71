"""Benchmark: 1,000 one-second jobs on the 4-node test Slurm (32 fake GPUs) — the baseline half.

Starts the test cluster (gpucommons.testing.slurm_cluster: munge, slurmctld, four slurmd × 8 fake
GPUs on this machine), submits N jobs of one GPU that sleep D seconds straight to Slurm with `sbatch`,
one after the other as a script would, and reports:
  makespan         first submit → last job's end (ideal: N × D / 32 GPUs, plus submission)
  submit → start   per job, from just before its sbatch call to the first line its batch script runs
                   (both read from this machine's clock, to the millisecond), p50 / p99 / max
  submission       how long the N sbatch calls took (they overlap the running jobs)

Issue 14 asks for the same N tasks through GPU Commons onto the same cluster in the same run, and
their ratio (goal: GPU Commons adds ≤ 20 % to the makespan). That half needs the Slurm adapter of the
backend port, which is not written yet: `through_gpucommons` is where it goes, and this script says
so on its last line instead of printing a figure it did not measure.

Run (as root, Slurm installed: scripts/setup.sh --dev):  python bench/slurm_throughput.py [--jobs 1000]
"""

from __future__ import annotations

import argparse
import os
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


def through_gpucommons(cluster: SlurmCluster, jobs: int, duration_s: float) -> Run:
    """The other half of issue 14's benchmark: the same N tasks submitted to a GPU Commons server that
    runs `commons up --backend slurm` on `cluster`, timed the same way. It needs the Slurm adapter of
    the backend port; until that exists there is nothing to measure."""
    raise NotImplementedError("needs `commons up --backend slurm` (the Slurm adapter of the backend port)")


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def report(name: str, run: Run, ideal_s: float) -> list[str]:
    waits = run.submit_to_start_s
    return [
        f"{name}: {run.jobs} jobs, makespan {run.makespan_s:.1f} s (ideal {ideal_s:.1f} s, "
        f"{run.makespan_s / ideal_s:.2f}×); submission took {run.submission_s:.1f} s "
        f"({run.jobs / run.submission_s:.0f} sbatch/s)",
        f"{name}: submit → start p50 {statistics.median(waits):.2f} s, p99 {percentile(waits, 0.99):.2f} s, "
        f"max {max(waits):.2f} s",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="number of jobs (default 1000)")
    parser.add_argument("--duration", type=float, default=1.0, help="seconds each job sleeps (default 1)")
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
                print(line)
            stopping = time.monotonic()
        print(f"cluster: stopped in {time.monotonic() - stopping:.2f} s")
    except SlurmUnavailable as exc:
        print(f"slurm_throughput: cannot start the test cluster: {exc}", file=sys.stderr)
        return 1
    waits = direct.submit_to_start_s
    print(
        f"slurm_throughput: direct makespan {direct.makespan_s:.1f} s, submit→start p50 "
        f"{statistics.median(waits):.2f} s p99 {percentile(waits, 0.99):.2f} s; "
        "through GPU Commons: not measured (needs the Slurm adapter, see through_gpucommons)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
