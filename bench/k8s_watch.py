"""Benchmark: 10,000 Workloads through the fake cluster into the ledger (issue 16).

    python bench/k8s_watch.py                        # 10,000 Jobs, the figures docs/benchmarks.md records
    python bench/k8s_watch.py --workloads 1000       # a quicker look

A real `commons up --backend kubernetes` process on a fresh PostgreSQL database (127.0.0.1:5432,
dropped afterwards) watches the fake cluster of `gpucommons.testing.fake_k8s` (Kueue, the Job
controller and a kubelet emulated from recorded shapes), which runs in a child process of this script
so that neither shares an interpreter lock with the server. The child creates N Jobs the way `kubectl`
users do (one GPU each, the queue label, no GPU Commons labels) in the namespaces of `--teams` teams,
as fast as its API server takes them; Kueue admits them as quota frees, the governance AdmissionCheck
(served by the GPU Commons process) passes them, each pod runs `--run-seconds` and succeeds.

What GPU Commons must do for each: see the Workload, Job and pod events on its three watches, make the
task row of a Job it did not create, follow it through admitted → running → succeeded, and write its
usage interval. Measured:

  events/s        watch events (ADDED/MODIFIED/DELETED of Workloads, Jobs and Pods) the API server
                  sent per second between the first Job created and the last ledger interval closed —
                  the rate the watcher kept up with (it saw every one: the ledger is complete)
  ledger lag      per Job, from the instant its Workload turned Finished in the cluster to the instant
                  its closed interval was readable in PostgreSQL (polled every --poll seconds; the
                  figures are upper bounds by that much): p50 / p99 / max
  complete        closed intervals in the ledger / Jobs created, and their GPU-seconds against the
                  Workloads' own admitted → finished spans (whole seconds, as Kueue writes them)

The last line is machine-readable: `k8s_watch workloads=… events_per_s=… lag_p50_s=… lag_p99_s=…`.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

from gpucommons.testing.fake_k8s import RUN_SECONDS, FakeCluster
from gpucommons.testing.postgres import PostgresUnavailable, scratch_database

WATCHED = {"Workload", "Job", "Pod"}


def policy_text(teams: int, nodes: int, gpus_per_node: int) -> str:
    total = nodes * gpus_per_node
    share = total // teams
    lines = [
        "cluster:",
        "  name: watch-bench",
        "  pools:",
        f"    - {{name: gpu, gpu_type: H100, nodes: {nodes}, gpus_per_node: {gpus_per_node},"
        " price_per_gpu_hour: 2.00}",
        "priority_classes:",
        "  - {name: normal, value: 100, grace_period: 2s}",
        "default_priority_class: normal",
        "teams:",
    ]
    for i in range(teams):
        lines.append(f"  - {{name: t{i:02d}, quota: {{gpu: {{gpus: {share}}}}}}}")
    return "\n".join(lines) + "\n"


def kubectl_job(namespace: str, name: str, run_seconds: float) -> dict[str, Any]:
    """A Job as a person writes it for Kueue: the queue label, one GPU, no GPU Commons labels."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "default"},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS: str(run_seconds)}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "ghcr.io/acme/train:1.0",
                            "command": ["sleep", str(run_seconds)],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


# --- the child: the fake cluster ----------------------------------------------------------------------


def cluster_main(conn: multiprocessing.connection.Connection, work: str, options: dict[str, Any]) -> None:
    """Run the fake cluster; on "go", create the Jobs; on "report", send what the cluster saw."""
    finished_at: dict[str, float] = {}
    spans: dict[str, float] = {}
    events = [0]

    cluster = FakeCluster(
        start=datetime.now(UTC),
        time_scale=1.0,
        pod_start_seconds=options["pod_start_seconds"],
        journal=False,
        history=options["history"],
    )

    def on_write(event: Any) -> None:
        kind = event.obj.get("kind")
        if kind not in WATCHED:
            return
        events[0] += 1
        if kind != "Workload" or event.type == "DELETED":
            return
        conditions = {c["type"]: c for c in (event.obj.get("status") or {}).get("conditions") or []}
        if conditions.get("Finished", {}).get("status") != "True":
            return
        job = event.obj["metadata"]["ownerReferences"][0]["name"]
        if job in finished_at:
            return
        finished_at[job] = time.time()
        admitted = conditions.get("Admitted", {}).get("lastTransitionTime")
        done = conditions["Finished"]["lastTransitionTime"]
        if admitted:
            spans[job] = (_seconds(done) - _seconds(admitted)) * 1.0

    cluster.store.on_write(on_write)
    with cluster:
        conn.send(str(cluster.kubeconfig(Path(work))))
        assert conn.recv() == "go"
        created_at = time.time()
        teams, in_flight = options["teams"], options["in_flight"]
        for i in range(options["workloads"]):
            while i - len(finished_at) >= in_flight:
                time.sleep(0.05)  # a sweep that keeps this many Jobs in the cluster at a time
            namespace = f"team-t{i % teams:02d}"
            cluster.create(kubectl_job(namespace, f"sweep-{i:05d}", options["run_seconds"]))
        created_s = time.time() - created_at
        conn.send(("created", created_at, created_s))
        while True:
            message = conn.recv()
            if message == "report":
                conn.send((dict(finished_at), dict(spans), events[0], list(cluster.errors)[:3]))
            elif message == "stop":
                break


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# --- the parent: the server and the ledger -------------------------------------------------------------


def closed_intervals(db: psycopg.Connection[Any]) -> dict[str, tuple[float, float, int]]:
    """Job name → (start, end, gpus) of every closed usage interval of a kubectl-made task."""
    rows = db.execute(
        'SELECT t.cluster_ref, u.start, u."end", u.gpus'
        " FROM usage_intervals u JOIN tasks t ON t.id = u.task_id"
        ' WHERE u."end" IS NOT NULL AND t.cluster_ref IS NOT NULL'
    ).fetchall()
    return {str(ref).rsplit("/", 1)[-1]: (float(s), float(e), int(g)) for ref, s, e, g in rows}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--teams", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--run-seconds", type=float, default=1.0)
    parser.add_argument("--pod-start-seconds", type=float, default=0.2)
    parser.add_argument("--history", type=int, default=10_000, help="events the API server keeps for watches")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=600,
        help="Jobs created but not finished at most (the fake Kueue's cycle grows with the pending ones)",
    )
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between looks at the ledger")
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()
    try:
        with scratch_database("commons_k8s_watch", connect_timeout=3) as database_url:
            return run(args, database_url)
    except PostgresUnavailable as exc:
        raise SystemExit(str(exc)) from None


def run(args: argparse.Namespace, database_url: str) -> int:
    """The benchmark on a fresh database (`database_url`)."""
    work = Path(tempfile.mkdtemp(prefix="commons-k8s-watch-"))
    server: subprocess.Popen[bytes] | None = None
    child: multiprocessing.process.BaseProcess | None = None
    try:
        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe()
        options = {
            "workloads": args.workloads,
            "teams": args.teams,
            "run_seconds": args.run_seconds,
            "pod_start_seconds": args.pod_start_seconds,
            "history": args.history,
            "in_flight": args.in_flight,
        }
        child = ctx.Process(target=cluster_main, args=(child_conn, str(work), options), daemon=True)
        child.start()
        kubeconfig = parent_conn.recv()
        policy = work / "policy.yaml"
        policy.write_text(policy_text(args.teams, args.nodes, args.gpus_per_node))
        port = _free_port()
        env = dict(os.environ, COMMONS_DATABASE_URL=database_url)
        env.pop("COMMONS_HOME", None)
        log = (work / "server.log").open("wb")
        argv = [sys.executable, "-m", "gpucommons", "up", "--policy", str(policy)]
        argv += ["--home", str(work / "home")]
        argv += ["--port", str(port), "--backend", "kubernetes", "--kubeconfig", kubeconfig]
        argv += ["--image", "ghcr.io/acme/train:1.0", "--apply-policy"]
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        _wait_healthy(server, f"http://127.0.0.1:{port}", work / "server.log")
        print(
            f"k8s_watch: {args.workloads:,} Jobs of 1 GPU × {args.run_seconds:g} s, {args.teams} teams, "
            f"{args.nodes * args.gpus_per_node} GPUs; server log {work / 'server.log'}",
            flush=True,
        )

        db = psycopg.connect(env["COMMONS_DATABASE_URL"].replace("+psycopg", ""), autocommit=True)
        parent_conn.send("go")
        cpu_before = _cpu_seconds(server.pid)
        seen_at: dict[str, float] = {}
        started = time.time()
        created: tuple[str, float, float] | None = None
        last_print = 0.0
        while len(seen_at) < args.workloads:
            if time.time() - started > args.timeout:
                raise SystemExit(f"timed out: {len(seen_at):,} of {args.workloads:,} intervals closed")
            if server.poll() is not None:
                raise SystemExit(f"commons up exited with {server.returncode}; see {work / 'server.log'}")
            if created is None and parent_conn.poll():
                created = parent_conn.recv()
            now = time.time()
            for job in closed_intervals(db):
                seen_at.setdefault(job, now)
            if now - last_print > 10:
                print(f"  {now - started:6.0f} s: {len(seen_at):,} intervals closed", flush=True)
                last_print = now
            time.sleep(args.poll)
        done = time.time()
        server_cpu = _cpu_seconds(server.pid) - cpu_before
        if created is None:
            created = parent_conn.recv()
        parent_conn.send("report")
        finished_at, spans, events, errors = parent_conn.recv()
        ledger = closed_intervals(db)
        db.close()

        _, created_at, created_s = created
        lags = [seen_at[job] - at for job, at in finished_at.items() if job in seen_at]
        ledger_s = sum(e - s for s, e, _ in ledger.values())
        kueue_s = sum(spans.values())
        elapsed = done - created_at
        print(f"  Jobs created in {created_s:.1f} s ({args.workloads / created_s:,.0f}/s)")
        rate = events / elapsed
        print(f"  watch events (Workloads, Jobs, Pods): {events:,} in {elapsed:.1f} s = {rate:,.0f}/s")
        print(
            f"  ledger lag after Finished: p50 {statistics.median(lags):.2f} s, "
            f"p99 {percentile(lags, 0.99):.2f} s, "
            f"max {max(lags):.2f} s (polled every {args.poll:g} s)"
        )
        print(
            f"  complete: {len(ledger):,} closed intervals for {args.workloads:,} Jobs; "
            f"{ledger_s:,.0f} GPU-s in the ledger vs {kueue_s:,.0f} GPU-s admitted→finished in the Workloads"
        )
        busy = server_cpu / elapsed
        print(
            f"  the GPU Commons process used {server_cpu:.0f} CPU-s in those {elapsed:.0f} s "
            f"({busy:.0%} of a core): about {rate / max(busy, 1e-9):,.0f} events/s per core"
        )
        if errors:
            print(f"  fake cluster errors: {errors}")
        print(
            f"k8s_watch workloads={args.workloads} events_per_s={events / elapsed:.0f} "
            f"lag_p50_s={statistics.median(lags):.2f} lag_p99_s={percentile(lags, 0.99):.2f} "
            f"intervals={len(ledger)} gpu_s_ledger={ledger_s:.0f} gpu_s_workloads={kueue_s:.0f} "
            f"server_core={busy:.2f}"
        )
        return 0
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
        if child is not None and child.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                parent_conn.send("stop")
            child.join(10)
            if child.is_alive():
                child.kill()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(server: subprocess.Popen[bytes], url: str, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            text = log.read_text(errors="replace")
            raise SystemExit(f"commons up exited with {server.returncode}:\n{text}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"commons up did not answer /healthz within {timeout:.0f} s; see {log}")


if __name__ == "__main__":
    raise SystemExit(main())
