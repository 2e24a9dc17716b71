"""`commons up --workers N` on PostgreSQL: N processes serve one port, the first leads, and each
scrape of /metrics counts every process; a worker that dies is started again; none outlives
`commons up`, even after kill -9 of it. On SQLite it refuses."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.e2e.server.conftest import TWO_TEAMS, Platform, free_port

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def children(pid: int) -> set[int]:
    """The live child processes of `pid` (Linux: /proc/PID/task/*/children)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update(int(c) for c in (task / "children").read_text().split())
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def worker_pids(platform: Platform) -> list[int]:
    line = next(x for x in platform.server_log().splitlines() if x.startswith("api workers:"))
    return [int(p) for p in re.findall(r"\b(\d{2,})\b", re.split(r"\bpids? ", line, maxsplit=1)[1])]


def roles_seen(platform: Platform, tries: int = 300) -> set[str]:
    """Roles answering /healthz over fresh connections (each may land on another process)."""
    seen: set[str] = set()
    for _ in range(tries):
        with httpx.Client(timeout=5) as client:  # a new connection every time
            seen.add(client.get(platform.url + "/healthz").json()["role"])
        if seen == {"leader", "follower"}:
            break
    return seen


def admissions_counted(platform: Platform) -> float:
    """`commons_admitted_tasks_total` summed over its labels, from one scrape on a fresh connection."""
    with httpx.Client(timeout=5, headers={"Authorization": f"Bearer {platform.token}"}) as client:
        text = client.get(platform.url + "/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("commons_admitted_tasks_total{")
    )


def test_three_workers_share_the_port_work_reaches_the_leader_and_a_dead_worker_comes_back(
    tmp_path: Path, postgres_url: str
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(TWO_TEAMS)
    server = Platform(tmp_path / "home", policy, database_url=postgres_url)
    server.extra_args = ["--workers", "3"]
    server.start()
    try:
        assert server.proc is not None
        pids = worker_pids(server)
        assert len(pids) == 2 and set(pids) <= children(server.proc.pid), (pids, server.server_log())
        assert "role: leader" in server.server_log()
        assert roles_seen(server) == {"leader", "follower"}, "followers answer on the same port"

        # Submissions over fresh connections land on every process; all run (the leader takes in
        # what followers stored) and each once.
        ids = [server.submit("--team", "a", "--gpus", "1", "--", "sleep", "0.2") for _ in range(12)]
        server.wait(
            lambda: all(server.states().get(i) == "succeeded" for i in ids),
            timeout=60,
            what="12 tasks to run",
        )
        assert len(set(ids)) == 12
        # Only the leader admits, yet every process's /metrics counts the 12 admissions: the
        # counters of all processes are added up at each scrape.
        for _ in range(10):
            assert admissions_counted(server) == 12

        # kill -9 of a worker: it is started again, and the port keeps answering.
        victim = pids[0]
        os.kill(victim, signal.SIGKILL)
        server.wait(
            lambda: len(children(server.proc.pid) - set(pids)) == 1,  # type: ignore[union-attr]
            timeout=20,
            what="the killed worker to be started again",
        )
        assert f"API worker 1 (pid {victim}) exited with -9" in server.server_log()
        assert server.health()["status"] == "ok"

        # kill -9 of `commons up` itself: the workers go too (they must not serve on alone).
        workers = children(server.proc.pid)
        server.kill9()
        server.wait(lambda: not any(alive(p) for p in workers), timeout=15, what="the workers to exit")
    finally:
        server.stop()


def test_a_stop_ends_every_worker(tmp_path: Path, postgres_url: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(TWO_TEAMS)
    server = Platform(tmp_path / "home", policy, database_url=postgres_url)
    server.extra_args = ["--workers", "2"]
    server.start()
    assert server.proc is not None
    workers = children(server.proc.pid)
    assert len(workers) == 1
    server.stop()
    assert server.proc.returncode == 0, server.server_log()
    assert not any(alive(p) for p in workers)


def test_workers_on_sqlite_are_refused_with_the_reason(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(TWO_TEAMS)
    env = {k: v for k, v in os.environ.items() if k not in ("COMMONS_DATABASE_URL", "COMMONS_HOME")}
    argv = [sys.executable, "-m", "gpucommons", "up", "--policy", str(policy), "--home", str(tmp_path / "h")]
    done = subprocess.run(
        [*argv, "--port", str(free_port()), "--workers", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode != 0
    assert "--workers 2 (COMMONS_WORKERS) needs PostgreSQL" in done.stderr
    assert "a SQLite database serves one server process" in done.stderr
