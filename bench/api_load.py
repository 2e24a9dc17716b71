"""Benchmark: the control plane's REST API under many concurrent clients (issue 12, item 1).

    python bench/api_load.py                                  # the full table: 2 stores × 2 sizes × 2 mixes
    python bench/api_load.py --db sqlite --clients 32 --mix submit          # one cell
    python bench/api_load.py --count-sql                      # SQL statements per request, by route
    python bench/api_load.py --profile /tmp/prof              # py-spy of the server, top frames

Each cell starts a real `commons up --executor timer` subprocess on a loopback port with a fresh store
(SQLite in a temporary home, or a new PostgreSQL database on 127.0.0.1:5432, dropped afterwards), fills
its cluster (256 one-GPU `sleep 3600` tasks: every GPU busy, nothing ends), queues a backlog of
`--backlog` more, then lets N concurrent clients (asyncio tasks, each with its own httpx client and
one keep-alive connection) send requests back to back for `--seconds` after `--warmup` seconds
that are not counted, or until `--max-requests`, whichever comes first. It then stops the server by
itself. The mixes:

  submit   every request is `POST /api/v1/tasks` (one GPU, `sleep 3600`: it joins the queue)
  mixed    1 submit : 4 reads, the reads being what the dashboard polls, in turn:
           `GET /api/v1/tasks?limit=200`, `GET /api/v1/queue` (`?limit=N` with `--queue-limit N`),
           `GET /api/v1/teams`,
           `GET /api/v1/tasks/{id}` (a task this client submitted); with `--etag` each client sends
           back the ETag of its last answer for that path (`If-None-Match`), as a browser does
  reads    the same four reads and no submission: dashboards polling a cluster where nothing
           changes (with `--etag`, what answering 304 saves)

Because the cluster is full and nothing ends, the queue only grows (by what the cell submits), the
scheduler decides over the whole queue after each submission, and every figure depends only on the
code, the store and the machine. All clients present the bootstrap admin token.

Printed per cell: requests, errors (any answer but 2xx), requests/s and submissions/s over the measured
window, latency p50 / p99 overall and for submissions and reads, the pending tasks at the end, and CPU
per request of the client (this process) and of the server (from /proc). A second table breaks reads
down per endpoint. The last line is `api submits_per_s=… p99_ms=…` of the first store's submit-only
cell at 32 clients (the issue's first goal row), or of the first submit-only cell run.

`--count-sql` runs the server through `bench/api_load_sqlcount.py`, which counts SQL statements per
request route (SQLAlchemy cursor events, attributed by a context variable an outer ASGI wrapper sets)
and those the scheduler and other threads run outside any request; the counts are printed after each
cell. Counting costs time, so throughput figures come from runs without it.

`--baseline-src DIR` runs each cell twice, with the server's code from DIR (another checkout's src/)
and with this one, alternating which goes first, and prints the ratios; the client does the same work
per request for both, so its CPU per request is the control: when it differs between the two, the
machine's load changed between them.

`--profile DIR` (needs `pip install py-spy`) samples the server with `py-spy record --gil` (the thread
holding the GIL, 100 Hz; native frames too with `--native`) during each measured window, writes the
raw collapsed stacks to DIR, and prints the share of samples per area of the server (scheduler
thread, event loop, each route, authentication, audit, ...) and the frames with the most own samples.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from gpucommons.testing.postgres import PostgresUnavailable, connect_admin, scratch_database

BENCH = Path(__file__).resolve().parent
NODES, GPUS_PER_NODE, TEAMS = 32, 8, 8
CAPACITY = NODES * GPUS_PER_NODE
READS = ("tasks", "queue", "teams", "task")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def policy_yaml() -> str:
    """One pool of 256 GPUs, 8 teams of 32 GPUs nominal each (borrowing allowed), one priority class."""
    teams = "\n".join(
        f"  - {{name: team{i}, groups: [g{i}], quota: {{gpu: {{gpus: {CAPACITY // TEAMS}}}}}}}"
        for i in range(TEAMS)
    )
    return f"""cluster:
  name: api-load
  pools:
    - {{name: gpu, gpu_type: H100, nodes: {NODES}, gpus_per_node: {GPUS_PER_NODE}, price_per_gpu_hour: 2.0}}
priority_classes:
  - {{name: normal, value: 100, grace_period: 1s}}
default_priority_class: normal
teams:
{teams}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its reaped children, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime, stime, cutime, cstime are fields 14-17.
    return sum(int(x) for x in fields[11:15]) / CLK_TCK


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (Linux: /proc/PID/task/*/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def tree_cpu_s(pid: int) -> float:
    """`process_cpu_s` of a process and of every live descendant (`commons up --workers N`'s worker
    processes are its children); one that exits in between counts what it had."""
    total = 0.0
    stack = [pid]
    while stack:
        one = stack.pop()
        with contextlib.suppress(OSError):
            total += process_cpu_s(one)
            stack += children(one)
    return total


@contextlib.contextmanager
def fresh_database(kind: str, workdir: Path) -> Iterator[str | None]:
    """None for SQLite (the server's default file under its home), else a new PostgreSQL database."""
    if kind == "sqlite":
        yield None
        return
    try:
        admin = connect_admin(connect_timeout=3)
    except PostgresUnavailable as exc:
        raise SystemExit(f"{exc}; pass --db sqlite") from None
    with scratch_database("commons_api_load", admin) as url:
        yield url


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    token: str
    log: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, seconds: float) -> None:
    """Until `url`/healthz answers 200; a clear exit if the server dies or stays silent."""
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}; see {log}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"the server did not answer within {seconds:.0f} s; see {log}")
        time.sleep(0.1)


@contextlib.contextmanager
def running_server(
    workdir: Path,
    database_url: str | None,
    tick: float,
    count_sql: bool,
    src: Path | None = None,
    workers: int = 1,
) -> Iterator[Server]:
    home = workdir / "home"
    policy = workdir / "policy.yaml"
    policy.write_text(policy_yaml())
    env = {**os.environ, "COMMONS_ISOLATION": "logical", "COMMONS_BUDGET_INTERVAL_S": "3600"}
    if database_url:
        env["COMMONS_DATABASE_URL"] = database_url
    if src is not None:  # another checkout's code (the baseline), ahead of the installed package
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))
    port = free_port()
    entry = [str(BENCH / "api_load_sqlcount.py")] if count_sql else ["-m", "gpucommons"]
    argv = [sys.executable, *entry, "up", "--policy", str(policy), "--home", str(home), "--port", str(port)]
    argv += ["--executor", "timer", "--tick", str(tick)]
    if workers > 1:
        argv += ["--workers", str(workers)]
    log = workdir / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log, 60)
        token = (home / "admin-token").read_text().strip()
        yield Server(proc, url, token, log)
    finally:
        stop_server(proc, 30)


def stop_server(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Ctrl-C, as a person would; killed if it has not exited within `grace_s`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def task_body(team: int, name: str) -> dict[str, Any]:
    return {"team": f"team{team}", "gpus": 1, "command": ["sleep", "3600"], "name": name}


def prepare(server: Server, backlog: int) -> list[str]:
    """Fill every GPU, queue `backlog` tasks behind them, wait until the scheduler has seen them all."""
    ids: list[str] = []
    bodies = [task_body(i % TEAMS, f"fill-{i}") for i in range(CAPACITY)]
    bodies += [task_body(i % TEAMS, f"backlog-{i}") for i in range(backlog)]
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=120) as client:
        for start in range(0, len(bodies), 1000):
            response = client.post("/api/v1/tasks/batch", json={"tasks": bodies[start : start + 1000]})
            response.raise_for_status()
            ids += [t["id"] for t in response.json()]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            teams = client.get("/api/v1/teams").json()
            if (
                sum(t["used_gpus"] for t in teams) == CAPACITY
                and sum(t["pending_tasks"] for t in teams) == backlog
            ):
                return ids[CAPACITY:]
            time.sleep(0.2)
    raise SystemExit(f"the cluster did not fill within 120 s; see {server.log}")


@dataclass
class Sample:
    kind: str
    latency_s: float
    ok: bool


@dataclass
class Load:
    """What the clients recorded in the measured window."""

    samples: list[Sample] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    window_s: float = 0.0
    not_modified: int = 0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0


async def drive(
    server: Server,
    clients: int,
    mix: str,
    warmup: float,
    seconds: float,
    max_requests: int,
    seeds: list[str],
    etag: bool = False,
    queue_limit: int | None = None,
) -> Load:
    """`clients` workers send requests back to back; only those started inside the window count."""
    load = Load()
    # One client (and pool) per worker, each of one keep-alive connection: httpcore's pool scans
    # all its connections on every request, so one shared pool of N connections costs the client
    # O(N) per request (2 ms of CPU per request at 32, 6 ms at 128: the client, not the server,
    # was the limit; bench/api_ceiling.py measures it).
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    counter = itertools.count()
    async with contextlib.AsyncExitStack() as stack:
        pool = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=120, limits=limits)
            )
            for _ in range(clients)
        ]
        loop = asyncio.get_running_loop()
        begin = loop.time() + warmup
        end = begin + seconds

        async def worker(w: int) -> None:
            http = pool[w]
            mine = list(seeds[w::clients][:4]) or list(seeds[:1])
            held: dict[str, str] = {}  # path -> the ETag of the answer this client last got
            for k in itertools.count():
                started = loop.time()
                if started >= end:
                    return
                measured = started >= begin
                if measured and next(counter) >= max_requests:
                    return
                step = (k + w) % 5 if mix == "mixed" else 1 + (k + w) % 4 if mix == "reads" else 0
                if step == 0:
                    kind = "submit"
                    request = http.post("/api/v1/tasks", json=task_body((w + k) % TEAMS, f"load-{w}-{k}"))
                else:
                    kind = READS[step - 1]
                    path = {
                        "tasks": "/api/v1/tasks?limit=200",
                        "queue": f"/api/v1/queue?limit={queue_limit}" if queue_limit else "/api/v1/queue",
                        "teams": "/api/v1/teams",
                    }
                    url = path.get(kind) or f"/api/v1/tasks/{mine[k % len(mine)]}"
                    sent = {"If-None-Match": held[url]} if etag and url in held else {}
                    request = http.get(url, headers=sent)
                try:
                    response = await request
                    ok = response.is_success or response.status_code == 304
                    if response.status_code == 304 and measured:
                        load.not_modified += 1
                    if etag and kind != "submit" and "etag" in response.headers:
                        held[url] = response.headers["etag"]
                    if not ok and measured:
                        load.errors[f"{kind} {response.status_code}"] += 1
                    elif ok and kind == "submit":
                        mine.append(response.json()["id"])
                        if len(mine) > 8:
                            mine.pop(0)
                except httpx.HTTPError as exc:
                    ok = False
                    if measured:
                        load.errors[f"{kind} {type(exc).__name__}"] += 1
                if measured:
                    load.samples.append(Sample(kind, loop.time() - started, ok))

        tasks = [asyncio.create_task(worker(w)) for w in range(clients)]
        await asyncio.sleep(max(0.0, begin - loop.time()))
        cpu_begin, server_begin = time.process_time(), tree_cpu_s(server.proc.pid)
        await asyncio.gather(*tasks)
        last_end = loop.time()
        load.window_s = min(last_end, end) - begin if last_end > begin else 0.0
        load.window_s = max(load.window_s, 1e-9)
        load.client_cpu_s = time.process_time() - cpu_begin
        load.server_cpu_s = tree_cpu_s(server.proc.pid) - server_begin
    return load


@dataclass
class Cell:
    code: str
    workers: int
    db: str
    clients: int
    mix: str
    requests: int
    errors: dict[str, int]
    window_s: float
    req_per_s: float
    submits_per_s: float
    p50_ms: float
    p99_ms: float
    submit_p50_ms: float
    submit_p99_ms: float
    read_p50_ms: float
    read_p99_ms: float
    by_read: dict[str, tuple[int, float, float]]
    pending_end: int
    not_modified: int
    client_cpu_ms_per_req: float
    server_cpu_ms_per_req: float
    sql: dict[str, Any] | None = None
    profile: dict[str, list[tuple[str, int]]] | None = None


def summarise(code: str, workers: int, db: str, clients: int, mix: str, load: Load, pending_end: int) -> Cell:
    ms = [s.latency_s * 1000 for s in load.samples]
    submits = [s.latency_s * 1000 for s in load.samples if s.kind == "submit"]
    reads = [s.latency_s * 1000 for s in load.samples if s.kind != "submit"]
    by_read = {}
    for kind in READS:
        one = [s.latency_s * 1000 for s in load.samples if s.kind == kind]
        if one:
            by_read[kind] = (len(one), percentile(one, 0.5), percentile(one, 0.99))
    n = max(1, len(load.samples))
    ok_submits = sum(1 for s in load.samples if s.kind == "submit" and s.ok)
    return Cell(
        code=code,
        workers=workers,
        db=db,
        clients=clients,
        mix=mix,
        requests=len(load.samples),
        errors=dict(load.errors),
        window_s=load.window_s,
        req_per_s=len(load.samples) / load.window_s,
        submits_per_s=ok_submits / load.window_s,
        p50_ms=percentile(ms, 0.5),
        p99_ms=percentile(ms, 0.99),
        submit_p50_ms=percentile(submits, 0.5),
        submit_p99_ms=percentile(submits, 0.99),
        read_p50_ms=percentile(reads, 0.5),
        read_p99_ms=percentile(reads, 0.99),
        by_read=by_read,
        pending_end=pending_end,
        not_modified=load.not_modified,
        client_cpu_ms_per_req=1000 * load.client_cpu_s / n,
        server_cpu_ms_per_req=1000 * load.server_cpu_s / n,
    )


def pending_now(server: Server) -> int:
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=120) as client:
        return sum(t["pending_tasks"] for t in client.get("/api/v1/teams").json())


@contextlib.contextmanager
def profiling(pid: int, out: Path | None, seconds: float, native: bool) -> Iterator[None]:
    """py-spy record of the server for `seconds` (none without `out`)."""
    if out is None:
        yield
        return
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    argv = [py_spy, "record", "-p", str(pid), "-d", str(max(1, round(seconds))), "-r", "100", "-f", "raw"]
    argv += ["-o", str(out), "--gil"] + (["--native"] if native else [])
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield
    finally:
        try:
            proc.wait(seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


#: Where a sampled stack's time goes, checked in this order (a frame name containing the marker).
AREAS = (
    ("Scheduler._run", "scheduler thread (cycle: take in, engine, store writes, published view)"),
    ("TimerExecutor", "timer executor thread"),
    ("AuditMiddleware._record", "audit row written after the answer"),
    ("current_principal", "authentication (token → principal)"),
    ("serialize_response", "response validation and JSON (FastAPI)"),
    ("gpucommons/server/routers/", "route: {}"),
    ("_run_sync_endpoint", "route body, other"),
    ("WorkerThread", "thread pool, other"),
    ("Runner.run", "event loop: HTTP, routing, middleware, dependencies"),
)


def _area(frames: list[str]) -> str:
    for marker, area in AREAS:
        for frame in frames:
            if marker in frame:
                return area.format(frame.split(" (")[0]) if "{}" in area else area
    return "other"


def top_frames(raw: Path, n: int = 15) -> dict[str, list[tuple[str, int]]]:
    """From py-spy's collapsed stacks (GIL holder only): the share of each area of the server, and the
    frames with most own samples. With the GIL as the limit, these shares are the server's CPU split."""
    own: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = stack.split(";")
        own[frames[-1]] += samples
        areas[_area(frames)] += samples
    return {"total": [("samples", total)], "areas": areas.most_common(), "own": own.most_common(n)}


def fetch_sql_counts(server: Server) -> dict[str, Any]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        data: dict[str, Any] = client.get("/_bench/sql").json()
        return data


def reset_sql_counts(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        client.post("/_bench/sql/reset")


def run_cell(
    db: str, clients: int, mix: str, args: argparse.Namespace, src: Path | None, workers: int = 1
) -> Cell:
    workdir = Path(tempfile.mkdtemp(prefix="commons-api-load-"))
    code = "baseline" if src is not None else "this"
    try:
        with (
            fresh_database(db, workdir) as url,
            running_server(workdir, url, args.tick, args.count_sql, src, workers) as server,
        ):
            seeds = prepare(server, args.backlog)
            if args.count_sql:
                reset_sql_counts(server)
            raw = args.profile / f"{code}-w{workers}-{db}-{clients}-{mix}.txt" if args.profile else None

            async def measured() -> Load:
                task = asyncio.create_task(
                    drive(
                        server,
                        clients,
                        mix,
                        args.warmup,
                        args.seconds,
                        args.max_requests,
                        seeds,
                        args.etag,
                        args.queue_limit,
                    )
                )
                await asyncio.sleep(args.warmup)
                with profiling(server.proc.pid, raw, args.seconds, args.native):
                    return await task

            load = asyncio.run(measured())
            cell = summarise(code, workers, db, clients, mix, load, pending_now(server))
            if args.count_sql:
                cell.sql = fetch_sql_counts(server)
            if raw is not None and raw.exists():
                cell.profile = top_frames(raw)
            return cell
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def fmt_errors(errors: dict[str, int]) -> str:
    return ", ".join(f"{k}×{v}" for k, v in sorted(errors.items())) or "0"


def print_tables(cells: list[Cell]) -> None:
    head = (
        "| code | workers | db | clients | mix | requests | errors | req/s | submits/s | p50 ms | p99 ms "
        "| submit p50 / p99 ms | read p50 / p99 ms | pending at end | client CPU ms/req | server CPU ms/req |"
    )
    print(head)
    print("|" + "---|" * head.count(" | ") + "---|")
    for c in cells:
        print(
            f"| {c.code} | {c.workers} | {c.db} | {c.clients} | {c.mix} | {c.requests} "
            f"| {fmt_errors(c.errors)} | {c.req_per_s:.0f} "
            f"| {c.submits_per_s:.0f} | {c.p50_ms:.1f} | {c.p99_ms:.1f} "
            f"| {c.submit_p50_ms:.1f} / {c.submit_p99_ms:.1f} "
            f"| {c.read_p50_ms:.1f} / {c.read_p99_ms:.1f} | {c.pending_end} "
            f"| {c.client_cpu_ms_per_req:.2f} | {c.server_cpu_ms_per_req:.2f} |"
        )
    mixed = [c for c in cells if c.by_read]
    if mixed:
        print()
        print("| code | workers | db | clients | read | requests | p50 ms | p99 ms |")
        print("|---|---|---|---|---|---|---|---|")
        for c in mixed:
            for kind, (n, p50, p99) in c.by_read.items():
                print(
                    f"| {c.code} | {c.workers} | {c.db} | {c.clients} | {kind} | {n} "
                    f"| {p50:.1f} | {p99:.1f} |"
                )
        if any(c.not_modified for c in mixed):
            print(
                "\n"
                + ", ".join(
                    f"{c.code} {c.db} {c.clients}: {c.not_modified} reads answered 304" for c in mixed
                )
            )
    print_worker_ratios(cells)
    baselines = {(c.db, c.clients, c.mix): c for c in cells if c.code == "baseline"}
    pairs = [(baselines[(t.db, t.clients, t.mix)], t) for t in cells if (t.db, t.clients, t.mix) in baselines]
    pairs = [(b, t) for b, t in pairs if t.code == "this"]
    if pairs:
        print()
        print(
            "| db | clients | mix | req/s this ÷ baseline | p99 this ÷ baseline "
            "| server CPU/req this ÷ baseline | client CPU/req this ÷ baseline (same work: the control) |"
        )
        print("|---|---|---|---|---|---|---|")
        for b, t in pairs:
            print(
                f"| {t.db} | {t.clients} | {t.mix} | {t.req_per_s / max(b.req_per_s, 1e-9):.2f} "
                f"| {t.p99_ms / max(b.p99_ms, 1e-9):.2f} "
                f"| {t.server_cpu_ms_per_req / max(b.server_cpu_ms_per_req, 1e-9):.2f} "
                f"| {t.client_cpu_ms_per_req / max(b.client_cpu_ms_per_req, 1e-9):.2f} |"
            )
    for c in cells:
        if c.sql:
            print(
                f"\nSQL statements, {c.code} code, {c.db} {c.clients} clients {c.mix} "
                "(per request of each route):"
            )
            for route, (requests, statements) in sorted(c.sql["routes"].items()):
                each = statements / max(1, requests)
                print(f"  {route:<40} {requests:>7} requests  {each:6.2f} statements each")
            print(f"  {'outside requests (scheduler, etc.)':<40} {c.sql['background']:>7} statements")
            for text, count in c.sql["top"][:8]:
                print(f"    {count:>7}  {text}")
            gcs = ", ".join(f"gen {g}: {n:.0f} in {s:.2f} s" for g, (n, s) in sorted(c.sql["gc"].items()))
            print(f"  garbage collections in the window: {gcs} (of {c.window_s:.1f} s)")
        if c.profile:
            total = c.profile["total"][0][1]
            print(
                f"\nserver profile, {c.code} code, {c.db} {c.clients} clients {c.mix}: "
                f"{total} samples (py-spy, 100 Hz, GIL holder)"
            )
            for title in ("areas", "own"):
                print(f"  by {title} samples:")
                for frame, samples in c.profile[title]:
                    print(f"    {100 * samples / max(1, total):5.1f} %  {frame}")


def print_worker_ratios(cells: list[Cell]) -> None:
    """Each cell with several API worker processes against the same cell with one, same run."""
    one = {(c.code, c.db, c.clients, c.mix): c for c in cells if c.workers == 1}
    pairs = [
        (one[(c.code, c.db, c.clients, c.mix)], c)
        for c in cells
        if c.workers > 1 and (c.code, c.db, c.clients, c.mix) in one
    ]
    if not pairs:
        return
    print()
    print(
        "| code | db | clients | mix | workers | req/s ÷ 1 worker | p99 ÷ 1 worker "
        "| server CPU/req ÷ 1 worker | client CPU/req ÷ 1 worker (the control) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for b, c in pairs:
        print(
            f"| {c.code} | {c.db} | {c.clients} | {c.mix} | {c.workers} "
            f"| {c.req_per_s / max(b.req_per_s, 1e-9):.2f} | {c.p99_ms / max(b.p99_ms, 1e-9):.2f} "
            f"| {c.server_cpu_ms_per_req / max(b.server_cpu_ms_per_req, 1e-9):.2f} "
            f"| {c.client_cpu_ms_per_req / max(b.client_cpu_ms_per_req, 1e-9):.2f} |"
        )


def last_line(cells: list[Cell]) -> str:
    cells = [c for c in cells if c.code == "this"]
    submit = [c for c in cells if c.mix == "submit"]
    if not submit:
        return f"api req_per_s={cells[0].req_per_s:.0f} p99_ms={cells[0].p99_ms:.1f}"
    preferred = [c for c in submit if c.clients == 32 and c.db == submit[0].db]
    cell = (preferred or submit)[0]
    return f"api submits_per_s={cell.submits_per_s:.0f} p99_ms={cell.p99_ms:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    parser.add_argument("--clients", nargs="+", type=int, default=[32, 128])
    parser.add_argument("--mix", nargs="+", choices=["submit", "mixed", "reads"], default=["submit", "mixed"])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window per cell (s)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load before the window")
    parser.add_argument(
        "--max-requests", type=int, default=50_000, help="measured requests per cell, at most"
    )
    parser.add_argument("--backlog", type=int, default=1000, help="pending tasks queued before the load")
    parser.add_argument("--tick", type=float, default=0.5, help="the scheduler's longest pause (s)")
    parser.add_argument("--count-sql", action="store_true", help="count SQL statements per request route")
    parser.add_argument("--profile", type=Path, help="py-spy the server into this folder")
    parser.add_argument("--native", action="store_true", help="with --profile: include native frames")
    parser.add_argument("--json", type=Path, help="also write every figure as JSON here")
    parser.add_argument(
        "--etag",
        action="store_true",
        help="readers send back the ETag of their last answer per path (If-None-Match), as the dashboard",
    )
    parser.add_argument(
        "--queue-limit",
        type=int,
        help="read the queue a page at a time, `GET /api/v1/queue?limit=N` (default: all of it)",
    )
    parser.add_argument(
        "--workers",
        nargs="+",
        type=int,
        default=[1],
        help="API processes of the server (`commons up --workers N`; PostgreSQL cells only, SQLite "
        "cells run with 1); several counts run each PostgreSQL cell once per count and print the ratios",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="also run each cell, just before, with the server's code from this src/ folder "
        "(e.g. `git archive main src | tar -x -C /tmp/base`, then /tmp/base/src); prints the ratios",
    )
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  load average {os.getloadavg()[0]:.2f} (1 min)")
    cells: list[Cell] = []
    for db in args.db:
        for clients in args.clients:
            for mix in args.mix:
                codes: list[Path | None] = [args.baseline_src, None] if args.baseline_src else [None]
                counts = args.workers if db == "postgres" else [1]
                runs = [(src, n) for src in codes for n in counts]
                if len(cells) % 4 == 2:
                    runs.reverse()  # every other group runs in reverse: drift in the load cancels
                for src, workers in runs:
                    cell = run_cell(db, clients, mix, args, src, workers)
                    cells.append(cell)
                    print(
                        f"# {cell.code} w{workers} {db} {clients} clients {mix}: {cell.req_per_s:.0f} req/s, "
                        f"p99 {cell.p99_ms:.1f} ms, load average {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
    print()
    print_tables(cells)
    if args.json:
        args.json.write_text(json.dumps([c.__dict__ for c in cells], indent=2, default=list) + "\n")
    print()
    print(last_line(cells))


if __name__ == "__main__":
    main()
