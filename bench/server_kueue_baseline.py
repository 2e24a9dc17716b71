"""Benchmark: Kueue's scheduler benchmark through the live server, over HTTP.

    python bench/server_kueue_baseline.py --executor timer            # 15,000 tasks
    python bench/server_kueue_baseline.py --executor local --scale 0.1  # real processes

Starts `commons up` (a subprocess, SQLite under a temporary home) with the benchmark's policy
(`gpucommons.sim.workloads`: 5 cohorts × 6 teams, 20 CPUs nominal each, borrow limit 100, reclaim
any), replays the 15,000 submissions at their times (`submit_s` after the start) from several client
threads, and waits until every task has ended. `--executor timer` runs each task as an in-process
timer of its runtime (the control plane alone); `--executor local` as a real `sleep` process through
the local executor. Reports, beside Kueue's published figures: wall time to drain, average time to
admission per class (first admission − submission, from the ledger), quota usage, the sustained
submission rate, and API latency (submissions, and reads of /api/v1/teams while the run goes on);
where the quota went (CPU-seconds held per class against the work, attempts per class), the
scheduler's cycles (from its `/metrics` histogram), and the makespan the simulator gives the same
jobs under each job model (`simulated_makespan_s`: `restarts_from_zero` is this run's bound, since
a preempted `sleep N` starts over, as an evicted workload does in Kueue's own benchmark runner).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from gpucommons.policy import dump_policy
from gpucommons.sim import SimConfig, simulate, with_default_checkpoint_interval
from gpucommons.sim.jobs import SimJob
from gpucommons.sim.report import build_report
from gpucommons.sim.workloads import KUEUE_PUBLISHED, kueue_baseline_jobs, kueue_baseline_policy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scaled_jobs(scale: float) -> list[SimJob]:
    """Every team's first `scale` share of each class (scale 1 = Kueue's 15,000)."""
    jobs = kueue_baseline_jobs()
    if scale >= 1:
        return jobs
    keep = []
    for job in jobs:
        n = int(job.job_id.rsplit("-", 1)[1])
        count = {"small": 350, "medium": 100, "large": 50}[job.priority_class]
        if n < max(1, round(count * scale)):
            keep.append(job)
    return keep


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class Sent:
    job: SimJob
    sent_at: float
    latency_s: float
    task_id: str | None
    status: int


@dataclass
class Run:
    sent: list[Sent] = field(default_factory=list)
    requests: list[float] = field(default_factory=list)
    read_latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def start_server(home: Path, port: int, executor: str, tick: float) -> subprocess.Popen[bytes]:
    policy = home.parent / "kueue-baseline.yaml"
    policy.write_text(dump_policy(kueue_baseline_policy()))
    env = {**os.environ, "COMMONS_ISOLATION": "logical", "COMMONS_BUDGET_INTERVAL_S": "3600"}
    argv = [sys.executable, "-m", "gpucommons", "up", "--policy", str(policy), "--home", str(home)]
    argv += ["--port", str(port), "--executor", executor, "--tick", str(tick)]
    log = (home.parent / "server.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("the server did not start; see " + str(home.parent / "server.log"))


def task_body(job: SimJob) -> dict[str, Any]:
    return {
        "team": job.team,
        "cpu_milli": job.resources.cpu_milli,
        "command": ["sleep", f"{job.duration_s:g}"],
        "name": job.job_id,
        "priority": job.priority_class,
    }


def post(client: httpx.Client, path: str, body: dict[str, Any], attempts: int = 5) -> httpx.Response:
    """POST, retrying what the server asks to retry (503) a few times; the latency includes retries."""
    for _ in range(attempts - 1):
        response = client.post(path, json=body)
        if response.status_code != 503:
            return response
        time.sleep(float(response.headers.get("retry-after", "1")))
    return client.post(path, json=body)


def submitter(url: str, token: str, work: queue.Queue[list[SimJob] | None], run: Run) -> None:
    """POST each job (a list of one), or each list as one batch request (`--batch`)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        while (jobs := work.get()) is not None:
            start = time.perf_counter()
            sent_at = time.time()
            if len(jobs) == 1:
                response = post(client, "/api/v1/tasks", task_body(jobs[0]))
                ids = [response.json().get("id")] if response.status_code == 201 else [None]
            else:
                response = post(client, "/api/v1/tasks/batch", {"tasks": [task_body(j) for j in jobs]})
                ids = (
                    [t["id"] for t in response.json()] if response.status_code == 201 else [None] * len(jobs)
                )
            latency = time.perf_counter() - start
            with run.lock:
                run.requests.append(latency)
                for job, task_id in zip(jobs, ids, strict=True):
                    run.sent.append(Sent(job, sent_at, latency, task_id, response.status_code))


def reader(url: str, token: str, stop: threading.Event, run: Run) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        while not stop.is_set():
            start = time.perf_counter()
            client.get("/api/v1/teams")
            run.read_latencies.append(time.perf_counter() - start)
            stop.wait(0.1)


def schedule(jobs: list[SimJob], window: float) -> list[list[SimJob]]:
    """Jobs grouped by due time: each instant's jobs, or (with a window) each window's, ≤ 1,000."""
    groups: list[list[SimJob]] = []
    for job in jobs:
        if groups:
            head = groups[-1][0].submit_s
            same = job.submit_s == head if window <= 0 else job.submit_s < head + window
            if same and len(groups[-1]) < 1000:
                groups[-1].append(job)
                continue
        groups.append([job])
    return groups


def drained(client: httpx.Client) -> bool:
    teams = client.get("/api/v1/teams").json()
    return all(t["pending_tasks"] == 0 and t["running_tasks"] == 0 for t in teams)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--executor", choices=["timer", "local"], default="timer")
    parser.add_argument("--scale", type=float, default=1.0, help="share of each team's tasks (1 = 15,000)")
    parser.add_argument("--submitters", type=int, default=8, help="client threads submitting")
    parser.add_argument("--tick", type=float, default=0.05, help="the scheduler's longest pause (s)")
    parser.add_argument(
        "--batch",
        type=float,
        default=0.0,
        help="send the jobs due in each window of this many seconds as one batch request (0: one by one)",
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()

    jobs = scaled_jobs(args.scale)
    workdir = Path(tempfile.mkdtemp(prefix="commons-bench-"))
    home = workdir / "home"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(home, port, args.executor, args.tick)
    token = (home / "admin-token").read_text().strip()
    run = Run()
    try:
        work: queue.Queue[list[SimJob] | None] = queue.Queue()
        threads = [
            threading.Thread(target=submitter, args=(url, token, work, run)) for _ in range(args.submitters)
        ]
        for t in threads:
            t.start()
        stop_reading = threading.Event()
        read_thread = threading.Thread(target=reader, args=(url, token, stop_reading, run))
        read_thread.start()
        t0 = time.time()
        for group in schedule(jobs, args.batch):  # replay the submissions at their times
            delay = t0 + group[0].submit_s - time.time()
            if delay > 0:
                time.sleep(delay)
            if args.batch:
                work.put(group)
            else:
                for job in group:
                    work.put([job])
        for _ in threads:
            work.put(None)
        for t in threads:
            t.join()
        submitted_by = time.time()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
            while not drained(client):
                time.sleep(0.5)
            stop_reading.set()
            read_thread.join()
            tasks: list[dict[str, Any]] = []
            for team in {j.team for j in jobs}:
                tasks += client.get("/api/v1/tasks", params={"team": team, "limit": 10000}).json()
            usage = client.get("/api/v1/usage").json()
            cycles = cycle_figures(client.get("/metrics").text)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()

    figures = summarise(jobs, run, tasks, usage, t0, submitted_by)
    figures["scheduler_cycles"] = cycles
    figures["simulated_makespan_s"] = simulated_makespans(jobs)
    figures["executor"] = args.executor
    figures["scale"] = args.scale
    figures["batch_window_s"] = args.batch
    print(json.dumps(figures, indent=2))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


def simulated_makespans(jobs: list[SimJob]) -> dict[str, float]:
    """The same jobs through the simulator (the same engine, no control-plane latency), under the two
    job models: a preempted task that saved its work on the stop signal (what the 66 s capacity
    bound assumes), and one that runs its whole time again, as Kueue's benchmark runner does with an
    evicted workload (its admission time is forgotten) and as the timer executor does with `sleep N`.
    The second is the bound this live run can reach."""
    policy = kueue_baseline_policy()
    out: dict[str, float] = {}
    for name, model in (
        ("saves_on_stop", jobs),
        ("restarts_from_zero", with_default_checkpoint_interval(jobs, 1e9)),
    ):
        outcome = simulate(policy, model, SimConfig(engine="commons"))
        out[name] = build_report(outcome, None)["summary"]["makespan_s"]
    return out


def cycle_figures(metrics: str) -> dict[str, float]:
    """How many scheduling cycles ran and their mean duration, from the server's histogram."""
    values = {}
    for line in metrics.splitlines():
        name, _, value = line.partition(" ")
        if name in ("commons_scheduling_cycle_seconds_count", "commons_scheduling_cycle_seconds_sum"):
            values[name.rsplit("_", 1)[1]] = float(value)
    count, total = values.get("count", 0.0), values.get("sum", 0.0)
    mean_ms = round(1000 * total / count, 2) if count else 0.0
    return {"count": count, "mean_ms": mean_ms, "busy_s": round(total, 1)}


def summarise(
    jobs: list[SimJob],
    run: Run,
    tasks: list[dict[str, Any]],
    usage: list[dict[str, Any]],
    t0: float,
    submitted_by: float,
) -> dict[str, Any]:
    by_id = {t["id"]: t for t in tasks}
    first_start: dict[str, float] = {}
    held_cpu_s = 0.0
    held_by_class: dict[str, float] = defaultdict(float)
    attempts_by_class: dict[str, int] = defaultdict(int)
    for interval in usage:
        start, end = ts(interval["start"]), ts(interval["end"])
        task = by_id.get(interval["task_id"])
        if task is None:
            continue
        first_start[task["id"]] = min(first_start.get(task["id"], start), start)
        held = task["cpu_milli"] / 1000 * (end - start)
        held_cpu_s += held
        held_by_class[task["priority"]] += held
        attempts_by_class[task["priority"]] += 1
    work_by_class: dict[str, float] = defaultdict(float)
    for job in jobs:
        work_by_class[job.priority_class] += job.resources.cpu_milli / 1000 * job.duration_s
    submitted = [ts(t["submitted_at"]) for t in tasks]
    finished = [ts(t["finished_at"]) for t in tasks if t["finished_at"]]
    makespan = max(finished) - min(submitted)
    admission: dict[str, list[float]] = defaultdict(list)
    for t in tasks:
        if t["id"] in first_start:
            admission[t["priority"]].append(first_start[t["id"]] - ts(t["submitted_at"]))
    states: dict[str, int] = defaultdict(int)
    for t in tasks:
        states[t["state"]] += 1
    return {
        "tasks": len(jobs),
        "accepted": sum(1 for s in run.sent if s.status == 201),
        "states": dict(states),
        "makespan_s": round(makespan, 1),
        "time_to_admission_s": {k: round(statistics.fmean(v), 2) for k, v in sorted(admission.items())},
        "time_to_admission_p99_s": {k: round(percentile(v, 0.99), 2) for k, v in sorted(admission.items())},
        "quota_usage": round(held_cpu_s / (600 * makespan), 3),
        "preemptions": sum(t["preemptions"] for t in tasks),
        # CPU-seconds held (every attempt's interval) against the work itself, and attempts, per
        # class: where the quota went beyond the work (latency around each run, restarts).
        "held_cpu_s_by_class": {k: round(v) for k, v in sorted(held_by_class.items())},
        "work_cpu_s_by_class": {k: round(v) for k, v in sorted(work_by_class.items())},
        "attempts_by_class": dict(sorted(attempts_by_class.items())),
        "submission_window_s": round(submitted_by - t0, 1),
        "submissions_per_s": round(len(run.sent) / (submitted_by - t0), 1),
        "requests": len(run.requests),
        "submit_latency_ms": {
            "p50": round(percentile(run.requests, 0.5) * 1000, 1),
            "p99": round(percentile(run.requests, 0.99) * 1000, 1),
        },
        "read_latency_ms": {
            "p50": round(percentile(run.read_latencies, 0.5) * 1000, 1),
            "p99": round(percentile(run.read_latencies, 0.99) * 1000, 1),
        },
        "kueue_published": KUEUE_PUBLISHED,
    }


if __name__ == "__main__":
    main()
