"""`commons backup` while real servers run and take submissions (SQLite: one `commons up`; PostgreSQL:
two replicas), `commons restore` into a fresh database: the snapshot is consistent (every submission
acknowledged before the backup began is in it, each task's state agrees with its events and the
ledger), the restored rows are the snapshot's rows, and a quiet database restores row for row with
its tokens still valid on a server started on the copy."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.e2e.server.conftest import Platform
from tests.integration.server.rows import snapshot_url, table_rows

from gpucommons.testing.postgres import fresh_database

pytestmark = [pytest.mark.slow]

TERMINAL = {"succeeded", "failed", "cancelled"}


@dataclass
class Load:
    """Submits short tasks, in turn to each server, until stopped; remembers what was acknowledged."""

    servers: list[Platform]
    acknowledged: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        turn = 0
        headers = {"Authorization": f"Bearer {self.servers[0].token}"}
        with httpx.Client(timeout=10, headers=headers) as http:
            while not self.stop.is_set():
                server = self.servers[turn % len(self.servers)]
                body = {"team": "ab"[turn % 2], "gpus": 1, "command": ["sleep", "0.2"]}
                answer = http.post(server.url + "/api/v1/tasks", json=body)
                assert answer.status_code == 201, answer.text
                self.acknowledged.append(str(answer.json()["id"]))
                turn += 1
                self.stop.wait(0.1)


@pytest.fixture
def load() -> Iterator[Callable[[list[Platform]], Load]]:
    started: list[tuple[Load, threading.Thread]] = []

    def start(servers: list[Platform]) -> Load:
        work = Load(servers)
        thread = threading.Thread(target=work.run, daemon=True)
        thread.start()
        started.append((work, thread))
        return work

    yield start
    for work, thread in started:
        work.stop.set()
        thread.join(15)


def check_consistent(rows: dict[str, list[tuple[Any, ...]]], before: list[str]) -> None:
    """What one transaction at a time keeps true holds in the snapshot as a whole."""
    states = {row[0]: row[4] for row in rows["tasks"]}  # id, seq, name, team, state, ...
    assert set(before) <= set(states), "a submission acknowledged before the backup began is missing"
    last_transition: dict[str, str] = {}
    for _id, task_id, _at, _kind, _from, to_state, _message in rows["task_events"]:
        if to_state is not None:
            last_transition[task_id] = to_state
    assert {t: s for t, s in states.items() if t in last_transition} == {
        t: last_transition[t] for t in states if t in last_transition
    }, "a task's state and its last event disagree"
    held = {row[2] for row in rows["gpu_allocations"]}
    open_intervals = {row[1] for row in rows["usage_intervals"] if row[6] is None}
    assert not {t for t in held | open_intervals if states[t] in TERMINAL}, "a finished task holds GPUs"


def check_columns(rows: dict[str, list[tuple[Any, ...]]]) -> None:
    """The column order check_consistent reads (fails loudly should the tables change)."""
    from gpucommons.store.models import GpuAllocationRow, TaskEventRow, TaskRow, UsageIntervalRow

    assert [c.name for c in TaskRow.__table__.columns][:5] == ["id", "seq", "name", "team", "state"]
    assert [c.name for c in TaskEventRow.__table__.columns] == [
        "id",
        "task_id",
        "at",
        "kind",
        "from_state",
        "to_state",
        "message",
    ]
    assert [c.name for c in GpuAllocationRow.__table__.columns][2] == "task_id"
    assert [c.name for c in UsageIntervalRow.__table__.columns][6] == "end"


def wait_quiet(server: Platform, load: Load) -> None:
    load.stop.set()
    server.wait(
        lambda: set(load.acknowledged) <= {t for t, s in server.states().items() if s in TERMINAL},
        timeout=90,
        what="every acknowledged task to finish",
    )


def test_backup_of_a_busy_sqlite_server_and_restore_into_a_fresh_home(
    platform_factory: Callable[..., Platform], load: Callable[[list[Platform]], Load], tmp_path: Path
) -> None:
    server = platform_factory()
    work = load([server])
    time.sleep(2.0)
    before = list(work.acknowledged)
    snap = tmp_path / "busy.db"
    done = server.cli("backup", str(snap), "--home", str(server.home))
    assert f"to {snap}: " in done.stdout and "consistent as of" in done.stdout
    time.sleep(1.0)
    assert len(work.acknowledged) > len(before), "the server kept taking submissions"
    snapshot = table_rows(snapshot_url(snap))
    check_columns(snapshot)
    check_consistent(snapshot, before)
    assert any(row[4] not in TERMINAL for row in snapshot["tasks"]), "taken with tasks under way"

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    put = server.cli("restore", str(snap), "--home", str(fresh))
    assert "restored" in put.stdout
    assert table_rows(f"sqlite:///{fresh / 'commons.db'}") == snapshot
    refused = server.cli("restore", str(snap), "--home", str(server.home), "--force", check=False)
    assert refused.returncode == 1 and "a server is running on" in refused.stderr

    # Quiet and stopped: the copy is the database, row for row, and serves the same tokens.
    wait_quiet(server, work)
    server.stop()
    quiet = tmp_path / "quiet.db"
    server.cli("backup", str(quiet), "--home", str(server.home))
    server.cli("restore", str(quiet), "--home", str(fresh), "--force")
    source = table_rows(f"sqlite:///{server.home / 'commons.db'}")
    assert table_rows(f"sqlite:///{fresh / 'commons.db'}") == source
    copy = Platform(fresh, server.policy, name="restored")
    copy.start()
    try:
        old_token = {"Authorization": f"Bearer {server.token}"}
        tasks = httpx.get(copy.url + "/api/v1/tasks?limit=10000", headers=old_token, timeout=10)
        assert tasks.status_code == 200
        assert {t["id"]: t["state"] for t in tasks.json()} == {row[0]: row[4] for row in source["tasks"]}
    finally:
        copy.stop()


@pytest.mark.postgres
def test_backup_of_two_busy_postgresql_replicas_and_restore_into_a_fresh_database(
    replicas: Callable[..., list[Platform]], load: Callable[[list[Platform]], Load], tmp_path: Path
) -> None:
    servers = replicas(2)
    url = servers[0].database_url
    assert url
    work = load(servers)
    time.sleep(2.0)
    before = list(work.acknowledged)
    snap = tmp_path / "busy.db"
    done = servers[1].cli("backup", str(snap), "--database-url", url)
    assert "PostgreSQL database" in done.stdout and "consistent as of" in done.stdout
    time.sleep(1.0)
    assert len(work.acknowledged) > len(before), "the replicas kept taking submissions"
    snapshot = table_rows(snapshot_url(snap))
    check_consistent(snapshot, before)

    refused = servers[1].cli("restore", str(snap), "--database-url", url, "--force", check=False)
    assert refused.returncode == 1 and "a server is running on PostgreSQL database" in refused.stderr
    with fresh_database() as other:
        put = servers[1].cli("restore", str(snap), "--database-url", other)
        assert "restored" in put.stdout
        assert table_rows(other) == snapshot

        wait_quiet(servers[0], work)
        for server in servers:
            server.stop()
        quiet = tmp_path / "quiet.db"
        servers[0].cli("backup", str(quiet), "--database-url", url)
        servers[0].cli("restore", str(quiet), "--database-url", other, "--force")
        assert table_rows(other) == table_rows(url)
