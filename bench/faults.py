"""Benchmark: kill -9 of the leader, again and again, with two replicas on one PostgreSQL database.

    python bench/faults.py                    # 20 kills, the figures docs/benchmarks.md records
    python bench/faults.py --kills 5 --rate 3

Two real `commons up` processes (local executor: every task a real process) share a fresh PostgreSQL
database on 127.0.0.1:5432 (dropped afterwards) and one home (one machine, so a new leader can re-adopt
the processes the old one started). A client thread submits short tasks continuously, in turn to both
replicas (`--rate` per second; a refused connection — the killed one — goes to the other). Each task is
`sh -c` that appends "start ID GPUS TIME" to a journal, sleeps 0.3 to 2 s, and appends "done ID TIME".

Each round: wait a moment under load, kill -9 the leader, time how long until the other replica says
`role: leader` with its scheduler running on /healthz (the takeover), restart the killed one (it comes
back as a follower). After the last round the client stops, every acknowledged task is waited for, and
the store and the journal are checked:

  lost          acknowledged submissions (201) missing from the store, or not `succeeded` at the end
  duplicated    a task started twice (two journal starts) or with two overlapping ledger intervals
  ledger_diffs  ledger intervals left open, GPU allocations left over, two tasks on one GPU at the same
                time (journal), more GPUs in use at one instant than the pool has (ledger)

Printed: a table per round (which replica was killed, takeover seconds, tasks acknowledged so far), the
totals, and the last line `faults lost=… duplicated=… ledger_diffs=… takeover_max_s=…`.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

from gpucommons.testing.postgres import PostgresUnavailable, connect_admin, scratch_database

GPUS = 8
POLICY = f"""
cluster:
  name: faults
  pools:
    - {{name: gpu, gpu_type: H100, nodes: 1, gpus_per_node: {GPUS}, price_per_gpu_hour: 2.00}}
priority_classes:
  - {{name: normal, value: 100, grace_period: 3s}}
default_priority_class: normal
teams:
  - {{name: a, quota: {{gpu: {{gpus: 4}}}}}}
  - {{name: b, quota: {{gpu: {{gpus: 4}}}}}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Replica:
    def __init__(self, name: str, home: Path, policy: Path, database_url: str) -> None:
        self.name = name
        self.home = home
        self.policy = policy
        self.database_url = database_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 180.0) -> None:
        self.starts += 1
        env = dict(os.environ, COMMONS_DATABASE_URL=self.database_url, COMMONS_ISOLATION="logical")
        env.pop("COMMONS_HOME", None)
        log = (self.home.parent / f"{self.name}-{self.starts}.log").open("wb")
        argv = [sys.executable, "-m", "gpucommons", "up", "--policy", str(self.policy)]
        argv += ["--home", str(self.home), "--port", str(self.port), "--tick", "0.2"]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode}")
            if self.health() is not None:
                return
            time.sleep(0.1)
        raise SystemExit(f"{self.name} did not answer /healthz within {timeout:.0f} s")

    def health(self) -> dict[str, object] | None:
        try:
            answer = httpx.get(self.url + "/healthz", timeout=2)
        except httpx.HTTPError:
            return None
        return dict(answer.json()) if answer.status_code == 200 else None

    def leads(self) -> bool:
        health = self.health()
        return health is not None and health["role"] == "leader" and health["scheduler"] == "running"

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@dataclass
class Client:
    """Submits short tasks in turn to every replica until stopped."""

    replicas: list[Replica]
    token: str
    journal: Path
    rate: float
    acknowledged: list[str] = field(default_factory=list)
    refused: int = 0
    failed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        rng = random.Random(7)
        turn = 0
        with httpx.Client(timeout=10, headers={"Authorization": f"Bearer {self.token}"}) as http:
            while not self.stop.is_set():
                duration = round(rng.uniform(0.3, 2.0), 2)
                script = (
                    f'echo "start $COMMONS_TASK_ID $CUDA_VISIBLE_DEVICES $(date +%s.%N)" >> {self.journal};'
                    f' sleep {duration}; echo "done $COMMONS_TASK_ID $(date +%s.%N)" >> {self.journal}'
                )
                body = {"team": "ab"[turn % 2], "gpus": 1 + (turn % 3 == 0), "command": ["sh", "-c", script]}
                for attempt in range(len(self.replicas)):
                    replica = self.replicas[(turn + attempt) % len(self.replicas)]
                    try:
                        answer = http.post(replica.url + "/api/v1/tasks", json=body)
                    except httpx.HTTPError:
                        self.refused += 1
                        continue
                    if answer.status_code == 201:
                        self.acknowledged.append(str(answer.json()["id"]))
                    else:
                        self.failed += 1
                    break
                turn += 1
                self.stop.wait(1.0 / self.rate)


def ts_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def check(database_url: str, acknowledged: list[str], journal: Path) -> dict[str, int]:
    conn = psycopg.connect(database_url.replace("postgresql+psycopg", "postgresql"), autocommit=True)
    with conn:
        states = dict(conn.execute("SELECT id, state FROM tasks").fetchall())
        intervals = conn.execute('SELECT task_id, start, "end", gpus FROM usage_intervals').fetchall()
        leftover = conn.execute("SELECT count(*) FROM gpu_allocations").fetchone()
    missing = [t for t in acknowledged if states.get(t) != "succeeded"]
    lost = len(missing)
    for task_id in missing[:10]:
        with psycopg.connect(database_url.replace("postgresql+psycopg", "postgresql")) as c:
            events = c.execute(
                "SELECT at, kind, from_state, to_state, message FROM task_events"
                " WHERE task_id = %s ORDER BY id",
                (task_id,),
            ).fetchall()
        print(f"not succeeded: {task_id} ({states.get(task_id, 'missing')})")
        for event in events:
            print("   ", *event)
    starts: dict[str, list[tuple[float, set[str]]]] = {}
    dones: dict[str, float] = {}
    for line in journal.read_text().splitlines():
        parts = line.split()
        if parts[0] == "start" and len(parts) == 4:
            starts.setdefault(parts[1], []).append((float(parts[3]), set(parts[2].split(","))))
        elif parts[0] == "done":
            dones[parts[1]] = float(parts[2])
    by_task: dict[str, list[tuple[float, float]]] = {}
    for task_id, start, end, _gpus in intervals:
        if end is not None and end > start:
            by_task.setdefault(task_id, []).append((start, end))
    twice = {t for t, s in starts.items() if len(s) > 1}
    for task_id in sorted(twice):
        print(f"started twice: {task_id} at {[round(s[0], 2) for s in starts[task_id]]}")
    twice |= {
        t
        for t, spans in by_task.items()
        if any(ts_overlap(a, b) for i, a in enumerate(spans) for b in spans[i + 1 :])
    }
    open_intervals = sum(1 for i in intervals if i[2] is None)
    spans = [(s[0][0], dones.get(t, s[0][0]), s[0][1], t) for t, s in starts.items()]
    shared = sum(
        1
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if ts_overlap((a[0], a[1]), (b[0], b[1])) and a[2] & b[2]
    )
    points = sorted(
        [(s, g) for _, s, e, g in intervals if e is not None] + [(e, -g) for _, s, e, g in intervals if e]
    )
    held = peak = 0
    for _, delta in sorted(points, key=lambda p: (p[0], p[1])):
        held += delta
        peak = max(peak, held)
    over = int(peak > GPUS)
    return {
        "acknowledged": len(acknowledged),
        "stored": len(states),
        "lost": lost,
        "duplicated": len(twice),
        "open_intervals": open_intervals,
        "leftover_allocations": int(leftover[0]) if leftover else 0,
        "shared_gpu": shared,
        "over_capacity": over,
        "ledger_diffs": open_intervals + (int(leftover[0]) if leftover else 0) + shared + over,
        "peak_gpus": peak,
    }


def _run(args: argparse.Namespace, url: str) -> tuple[list[float], Client, dict[str, int]]:
    """Two replicas on the database at `url`, `--kills` leader kills under load, then the check."""
    work = Path(tempfile.mkdtemp(prefix="commons-faults-"))
    policy = work / "policy.yaml"
    policy.write_text(POLICY)
    journal = work / "journal.txt"
    journal.touch()
    replicas = [Replica(f"replica{i}", work / "home", policy, url) for i in range(2)]
    client: Client | None = None
    try:
        for replica in replicas:
            replica.start()
        token = (work / "home" / "admin-token").read_text().strip()
        client = Client(replicas, token, journal, args.rate)
        thread = threading.Thread(target=client.run, daemon=True)
        thread.start()
        rng = random.Random(11)
        takeovers = []
        print(f"{'round':>5}  {'killed':<9} {'takeover_s':>10}  {'acknowledged':>12}")
        for round_ in range(1, args.kills + 1):
            time.sleep(rng.uniform(1.0, 2.5))  # tasks start and end under the leader
            leader = next((r for r in replicas if r.leads()), None)
            if leader is None:
                raise SystemExit("no leader before the kill")
            other = next(r for r in replicas if r is not leader)
            leader.kill9()
            killed_at = time.monotonic()
            while not other.leads():
                if time.monotonic() - killed_at > 60:
                    raise SystemExit(f"round {round_}: no takeover within 60 s")
                time.sleep(0.02)
            takeovers.append(time.monotonic() - killed_at)
            print(
                f"{round_:>5}  {leader.name:<9} {takeovers[-1]:>10.2f}  {len(client.acknowledged):>12}",
                flush=True,
            )
            leader.start()
        client.stop.set()
        thread.join(15)
        deadline = time.monotonic() + args.settle
        leader = next(r for r in replicas if r.leads())
        with httpx.Client(timeout=10, headers={"Authorization": f"Bearer {token}"}) as http:
            while time.monotonic() < deadline:
                tasks = http.get(leader.url + "/api/v1/tasks", params={"limit": 10000}).json()
                if all(t["state"] in ("succeeded", "failed", "cancelled") for t in tasks):
                    break
                time.sleep(1)
        result = check(url, client.acknowledged, journal)
    finally:
        if client is not None:
            client.stop.set()
        for replica in replicas:
            replica.stop()
    assert client is not None  # (set before the first kill; any failure before that has raised)
    return takeovers, client, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--rate", type=float, default=4.0, help="submissions per second")
    parser.add_argument("--settle", type=float, default=90.0, help="longest wait for the last tasks (s)")
    args = parser.parse_args()
    try:
        admin = connect_admin(connect_timeout=3)
    except PostgresUnavailable as exc:
        raise SystemExit(str(exc)) from None
    with scratch_database("commons_faults", admin) as url:
        takeovers, client, result = _run(args, url)
    p50 = statistics.median(takeovers)
    print()
    print(f"{'kills':<22}{len(takeovers)}")
    print(f"{'takeover p50 / max':<22}{p50:.2f} s / {max(takeovers):.2f} s")
    print(f"{'submissions acked':<22}{result['acknowledged']} (refused connections: {client.refused})")
    print(f"{'tasks stored':<22}{result['stored']}")
    print(f"{'lost':<22}{result['lost']}")
    print(f"{'duplicated runs':<22}{result['duplicated']}")
    print(
        f"{'ledger diffs':<22}{result['ledger_diffs']} (open intervals {result['open_intervals']}, "
        f"left allocations {result['leftover_allocations']}, shared GPU {result['shared_gpu']}, "
        f"over capacity {result['over_capacity']}; peak {result['peak_gpus']}/{GPUS} GPUs)"
    )
    print(
        f"faults lost={result['lost']} duplicated={result['duplicated']} "
        f"ledger_diffs={result['ledger_diffs']} takeover_max_s={max(takeovers):.2f}"
    )


if __name__ == "__main__":
    main()
