"""Benchmark: what this machine and this client allow a Python web server at all (issue 12's bound).

    python bench/api_ceiling.py                      # 32 and 128 clients, three servers
    python bench/api_ceiling.py --clients 32 --seconds 10

`bench/api_load.py` measures GPU Commons; this measures, with the very same client (its `drive`), three
stand-in servers on the same uvicorn settings as `commons up` (uvloop, httptools, no access log):

  bare        a pure ASGI callable that answers every POST with a fixed 201 body: uvicorn alone
  fastapi     FastAPI validating the submission body with a pydantic model like ours and answering
              the task back (no database, no authentication)
  fastapi+db  the same, and each submission inserted into a SQLite table in its own transaction
              (WAL, synchronous=NORMAL, as our store), in FastAPI's thread pool

Printed per server and client count: submissions/s, p50 / p99 latency, and CPU per request of the
client and of the server. On a 2-core machine the client and the server share the cores, so the
submissions/s of `bare` is the most any server can reach with this client here, and its client CPU
per request says how much of the machine the client alone takes at a given rate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_load import Server, drive, free_port, percentile, stop_server, wait_healthy

SERVERS = ("bare", "fastapi", "fastapi+db")

#: The stand-in servers, run as `python -c` in a child process; `{db}` is the SQLite file.
APP_SOURCE = r"""
import json, sqlite3, sys, threading, uuid
import uvicorn

kind, port, db = sys.argv[1], int(sys.argv[2]), sys.argv[3]

if kind == "bare":
    BODY = json.dumps({"id": "t0", "state": "pending"}).encode()

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        status = 200 if scope["path"] == "/healthz" else 201
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": BODY})
else:
    from fastapi import FastAPI
    from pydantic import BaseModel, ConfigDict, Field

    class TaskSubmit(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        team: str = Field(min_length=1, max_length=63)
        gpus: int = Field(ge=0, le=4096)
        command: list[str] = Field(min_length=1, max_length=1024)
        name: str = Field(default="", max_length=200)

    class Task(TaskSubmit):
        id: str
        state: str

    app = FastAPI()
    local = threading.local()

    def connection():
        if not hasattr(local, "c"):
            c = sqlite3.connect(db, isolation_level=None, timeout=10)
            c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL")
            local.c = c
        return local.c

    if kind == "fastapi+db":
        connection().execute("CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, body TEXT)")

    @app.get("/healthz")
    async def healthz():
        return {"ok": True}

    if kind == "fastapi":
        @app.post("/api/v1/tasks", status_code=201, response_model=Task)
        async def submit(body: TaskSubmit) -> Task:
            return Task(**body.model_dump(), id=uuid.uuid4().hex[:11], state="pending")
    else:
        @app.post("/api/v1/tasks", status_code=201, response_model=Task)
        def submit(body: TaskSubmit) -> Task:
            task = Task(**body.model_dump(), id=uuid.uuid4().hex[:11], state="pending")
            c = connection()
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO tasks VALUES (?, ?)", (task.id, task.model_dump_json()))
            c.execute("COMMIT")
            return task

uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, timeout_keep_alive=75)
"""


@contextlib.contextmanager
def stand_in(kind: str, workdir: Path) -> Iterator[Server]:
    port = free_port()
    log = workdir / f"{kind}.log"
    argv = [sys.executable, "-c", APP_SOURCE, kind, str(port), str(workdir / f"{kind}.db")]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log, 30)
        yield Server(proc, url, "unused", log)
    finally:
        stop_server(proc, 10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", nargs="+", choices=SERVERS, default=list(SERVERS))
    parser.add_argument("--clients", nargs="+", type=int, default=[32, 128])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window per cell (s)")
    parser.add_argument("--warmup", type=float, default=2.0)
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  load average {os.getloadavg()[0]:.2f}")
    print(
        "| server | clients | requests | errors | submits/s | p50 ms | p99 ms"
        " | client CPU ms/req | server CPU ms/req |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="api-ceiling-") as tmp:
        for kind in args.servers:
            for clients in args.clients:
                with stand_in(kind, Path(tmp)) as server:
                    load = asyncio.run(
                        drive(server, clients, "submit", args.warmup, args.seconds, 10**9, ["t0"])
                    )
                n = len(load.samples)
                client_ms, server_ms = (
                    1000 * cpu / max(n, 1) for cpu in (load.client_cpu_s, load.server_cpu_s)
                )
                latencies = sorted(s.latency_s * 1000 for s in load.samples)
                errors = sum(load.errors.values())
                print(
                    f"| {kind} | {clients} | {n} | {errors} | {n / load.window_s:,.0f} "
                    f"| {percentile(latencies, 0.5):.1f} | {percentile(latencies, 0.99):.1f} "
                    f"| {client_ms:.2f} | {server_ms:.2f} |",
                    flush=True,
                )
    print(f"# load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
