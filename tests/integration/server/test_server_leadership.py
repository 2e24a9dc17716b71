"""The leadership lock on both databases (store.leadership), the election thread around it, the
shared submission sequence, and a leader's intake of what another replica stored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from tests.integration.server.conftest import Harness

from gpucommons.domain.election import ElectionTiming, Role, Sharing
from gpucommons.server.workers.election import ElectionWorker, LeadershipRefused
from gpucommons.store.db import Database
from gpucommons.store.leadership import FileLeadership, Leadership, PostgresLeadership, leadership_for
from gpucommons.store.migrate import upgrade
from gpucommons.store.models import TaskRow
from gpucommons.store.sequence import seq_allocator

HOLDER = """
import sys, time
from gpucommons.store.db import Database
from gpucommons.store.leadership import leadership_for
lock = leadership_for(Database(sys.argv[1]))
assert lock.try_acquire()
print("held", flush=True)
time.sleep(600)
"""


def locks(url: str, n: int = 2) -> list[Leadership]:
    return [leadership_for(Database(url)) for _ in range(n)]


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_the_lock_is_exclusive_and_passes_on_when_released(database_url: str) -> None:
    a, b = locks(database_url)
    assert isinstance(a, FileLeadership if database_url.startswith("sqlite") else PostgresLeadership)
    assert a.try_acquire() and a.is_leader
    assert a.try_acquire(), "taking a held lock again is a no-op"
    assert not b.try_acquire() and not b.is_leader
    assert a.still_held() and not b.still_held()
    assert b.holder() is not None and f"pid {os.getpid()}" in str(b.holder())
    a.release()
    assert not a.is_leader and not a.still_held()
    assert b.try_acquire() and b.still_held()
    assert not a.try_acquire()
    b.release()
    b.release()  # twice is harmless


def test_kill_9_of_the_holder_frees_the_lock_at_once(database_url: str, tmp_path: Path) -> None:
    (waiter,) = locks(database_url, 1)
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, database_url], stdout=subprocess.PIPE, env=dict(os.environ)
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"held"
        assert not waiter.try_acquire()
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        took = wait_for(waiter.try_acquire, timeout=5)
        assert took < 2, took
    finally:
        if child.poll() is None:
            child.kill()
        waiter.release()


def test_a_leader_notices_it_lost_the_lock(database_url: str) -> None:
    (lock,) = locks(database_url, 1)
    assert lock.try_acquire()
    if isinstance(lock, PostgresLeadership):
        # The database ends the session that holds the lock (an admin, a failover, a network cut).
        admin = psycopg.connect(database_url.replace("postgresql+psycopg", "postgresql"), autocommit=True)
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"%pid {os.getpid()})",),
        )
        admin.close()
    else:
        assert isinstance(lock, FileLeadership)
        lock.path.unlink()  # a lock on a file no one else can find any more is no lock
    wait_for(lambda: not lock.still_held(), timeout=5)
    assert not lock.is_leader
    lock.release()


def test_the_election_starts_the_duties_of_the_leader_and_reports_a_lost_lock(database_url: str) -> None:
    first_lock, second_lock = locks(database_url)
    started: list[str] = []
    lost: list[str] = []
    timing = ElectionTiming(retry_s=0.1, check_s=0.1, backoff_max_s=1.0)
    sharing = Sharing.SINGLE if database_url.startswith("sqlite") else Sharing.SHARED
    first = ElectionWorker(first_lock, sharing=sharing, timing=timing, on_lost=lost.append)
    first.add_duty("one", lambda: started.append("one"), lambda: started.append("-one"))
    assert first.start() is Role.LEADER and started == ["one"]
    first.add_duty("two", lambda: started.append("two"), lambda: started.append("-two"))
    assert started == ["one", "two"], "a duty added while leading starts at once"
    if sharing is Sharing.SINGLE:
        with pytest.raises(LeadershipRefused, match="SQLite database serves one `commons up`"):
            ElectionWorker(second_lock, sharing=sharing, timing=timing).start()
    else:
        follows: list[int] = []
        second = ElectionWorker(
            second_lock,
            sharing=sharing,
            timing=timing,
            on_lost=lost.append,
            while_following=lambda: follows.append(1),
            follow_every_s=0.1,
        )
        taken = threading.Event()
        second.add_duty("second", taken.set, lambda: None)
        assert second.start() is Role.FOLLOWER
        wait_for(lambda: len(follows) >= 2)
        first.stop()  # releases: the follower takes over within a retry
        assert started[-2:] == ["-two", "-one"], "duties stop in reverse order"
        assert taken.wait(5) and second.role is Role.LEADER
        assert second.leader_since is not None
        second.stop()
        return
    # Deposed: the lock vanishes under the leader, which reports it (the server's default exits).
    first_lock.release()
    wait_for(lambda: bool(lost))
    assert "lost the leadership" in lost[0]
    first.stop()


def test_replicas_number_submissions_from_one_sequence(database_url: str) -> None:
    db = Database(database_url)
    upgrade(db)
    allocators = [seq_allocator(db), seq_allocator(db)]
    if db.is_sqlite:
        pytest.skip("SQLite: one process per database, numbers from memory")
    numbers = []
    with db.session() as session:
        for _ in range(5):
            for allocator in allocators:
                numbers.append(allocator.next(session))
    assert len(set(numbers)) == 10 and numbers == sorted(numbers)
    with db.session() as session:  # a row stored past the sequence (tests seed rows by hand)
        session.execute(text("SELECT setval('task_seq', 1, false)"))
    allocators[0].catch_up(db)
    with db.session() as session:
        assert allocators[1].next(session) == 1, "nothing stored yet: nothing to catch up with"
    db.dispose()


def test_the_leader_takes_in_what_another_replica_stored(
    make_harness: Callable[..., Harness], database_url: str
) -> None:
    """Two servers on one PostgreSQL database, cycles by hand: the one cycling is the leader."""
    if database_url.startswith("sqlite"):
        pytest.skip("several replicas need PostgreSQL")
    leader = make_harness(leadership="shared")
    follower = make_harness(leadership="shared")
    leader.ctx.scheduler.reconcile_s = 0.0
    quick = follower.submit(team="a", gpus=1, command=["sleep", "0.2"])
    leader.cycle()
    assert leader.task(str(quick["id"]))["state"] in ("admitted", "running")
    follower.submit(team="b", gpus=2, command=["sleep", "600"])
    for _ in range(2):
        follower.submit(team="a", gpus=1, command=["sleep", "600"])
    waiting = follower.submit(team="a", gpus=2, command=["sleep", "600"])  # the pool is full
    leader.cycle()
    assert leader.ctx.scheduler.state.pending(str(waiting["id"])) is not None
    assert (
        follower.http.post(f"/api/v1/tasks/{waiting['id']}/cancel", headers=follower.admin).status_code == 200
    )
    leader.cycle()
    assert leader.ctx.scheduler.state.pending(str(waiting["id"])) is None, "the pending cancel reached it"
    with leader.ctx.db.session() as session:
        seqs = sorted(r.seq for r in session.query(TaskRow))
    assert len(set(seqs)) == len(seqs) == 5


def test_a_follower_rebuilds_its_view_only_when_the_store_changed(
    make_harness: Callable[..., Harness], database_url: str
) -> None:
    """A follower's mirror reads every task and decides over them: while nothing changes it is
    skipped, after two looks at an unchanged store; any new task or event brings it back."""
    if database_url.startswith("sqlite"):
        pytest.skip("several replicas need PostgreSQL")
    leader = make_harness(leadership="shared")
    follower = make_harness(leadership="shared")
    mirror = follower.ctx.scheduler
    mirror.mirror()
    mirror.mirror()
    skipped = mirror.mirrors_skipped
    for _ in range(3):
        mirror.mirror()
    assert mirror.mirrors_skipped == skipped + 3, "nothing changed: no rebuild"

    task = leader.submit(team="a", gpus=1, command=["sleep", "600"])  # through the other replica
    mirror.mirror()
    assert mirror.mirrors_skipped == skipped + 3
    assert any(t.id == task["id"] for t in mirror.view.pending), "the follower's view has it"
    leader.cycle()  # admitted: a transition event, no new task
    mirror.mirror()
    assert mirror.view.usage.running_tasks["a"] == 1
    mirror.mirror()  # the second look after a change still rebuilds
    mirror.mirror()
    assert mirror.mirrors_skipped == skipped + 4
