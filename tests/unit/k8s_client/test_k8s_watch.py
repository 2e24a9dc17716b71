"""The Workload watch loop against the fake cluster: list, then a watch stream, into a ledger sink.

The recorded Workload states are stored one after the other (`FakeCluster.put`, the emulators
off), so the watcher sees them as a real API server would send them: ADDED, then MODIFIED events.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from k8s_client_helpers import EXAMPLE, fake_cluster

from gpucommons.backends.kubernetes.connection import KubeApi
from gpucommons.backends.kubernetes.observe import ClusterNames, LedgerState
from gpucommons.backends.kubernetes.watch import watch_workloads
from gpucommons.ledger import EndReason, UsageInterval
from gpucommons.policy import load_policy
from gpucommons.testing.fake_k8s import FakeCluster

RECORDING = Path(__file__).parent / "recordings" / "workload_preempted_then_finished.json"
NOW = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
pytestmark = pytest.mark.timeout(60)


def _names() -> ClusterNames:
    return ClusterNames.from_policy(load_policy(EXAMPLE))


def _recorded() -> list[dict[str, Any]]:
    return [e["object"] for e in json.loads(RECORDING.read_text())["events"]]


@contextmanager
def _watching(
    fake: FakeCluster, api: KubeApi, sink: Any, state: LedgerState | None = None
) -> Iterator[dict[str, LedgerState]]:
    """Run one list + watch round in a thread; yield once its watch is open; end it on exit."""
    result: dict[str, LedgerState] = {}
    seen = len(fake.requests)

    def run() -> None:
        result["state"] = watch_workloads(api, _names(), sink, clock=lambda: NOW, state=state, once=True)

    thread = threading.Thread(target=run)
    thread.start()
    fake.wait_for(lambda: any(r.param("watch") == "1" for r in fake.requests[seen:]), "the watch request")
    try:
        yield result
    finally:
        fake.faults.drop_watches()
        thread.join(timeout=10)
        assert not thread.is_alive()


def test_a_watch_stream_feeds_the_ledger_the_preempted_and_the_finished_run(tmp_path: Path) -> None:
    written: list[UsageInterval] = []
    with fake_cluster(tmp_path, emulate=False) as (fake, api):
        with _watching(fake, api, written.append) as result:
            for obj in _recorded():
                fake.put(obj)
            fake.wait_for(lambda: len(written) == 2, "two intervals")
        watch = next(r for r in fake.requests if r.param("watch") == "1")
    assert [(i.start.hour, i.end.hour, i.end_reason) for i in written] == [
        (10, 11, EndReason.PREEMPTED),
        (11, 13, EndReason.SUCCEEDED),
    ]
    assert result["state"].holds == {}
    assert watch.path == "/apis/kueue.x-k8s.io/v1beta2/workloads"
    assert watch.param("resourceVersion") == "1000" and watch.param("allowWatchBookmarks") == "true"


def test_the_list_bills_a_run_that_finished_before_the_watcher_started(tmp_path: Path) -> None:
    written: list[UsageInterval] = []
    with fake_cluster(tmp_path, emulate=False) as (fake, api):
        fake.put(_recorded()[-1])
        with _watching(fake, api, written.append):
            pass
    assert [(i.task_id, i.gpus, i.end_reason) for i in written] == [("t0a1b2c3d4e", 8, EndReason.SUCCEEDED)]


def test_a_hold_whose_workload_vanished_while_unwatched_ends_at_the_relist(tmp_path: Path) -> None:
    admitted = _recorded()[1]
    written: list[UsageInterval] = []
    with fake_cluster(tmp_path, emulate=False) as (fake, api):
        fake.put(admitted)
        with _watching(fake, api, lambda _: None) as first:
            pass
        fake.faults.drop_watches()
        fake.remove("Workload", "team-nlp", admitted["metadata"]["name"])
        with _watching(fake, api, written.append, state=first["state"]) as second:
            pass
    assert [(i.end, i.end_reason) for i in written] == [(NOW, EndReason.CANCELLED)]
    assert second["state"] == LedgerState()


def test_an_expired_watch_ends_the_stream_quietly_and_the_next_round_lists_again(tmp_path: Path) -> None:
    with fake_cluster(tmp_path, emulate=False) as (fake, api):
        fake.faults.expire_next_watches(1)
        state = watch_workloads(api, _names(), lambda _: None, clock=lambda: NOW, once=True)
        with _watching(fake, api, lambda _: None, state=state):
            pass
        lists = [r for r in fake.requests if r.path.endswith("/workloads") and r.param("watch") is None]
    assert len(lists) == 2 and state == LedgerState()
    assert fake.faults.fired == [("watch", "workloads", "expired")]


def test_a_watch_that_breaks_off_mid_stream_ends_quietly_and_the_next_round_lists_again(
    tmp_path: Path,
) -> None:
    with fake_cluster(tmp_path, emulate=False) as (fake, api):
        result: dict[str, LedgerState] = {}
        seen = len(fake.requests)
        thread = threading.Thread(
            target=lambda: result.update(
                state=watch_workloads(api, _names(), lambda _: None, clock=lambda: NOW, once=True)
            )
        )
        thread.start()
        fake.wait_for(lambda: any(r.param("watch") == "1" for r in fake.requests[seen:]), "the watch")
        fake.faults.drop_watches(abrupt=True)
        thread.join(timeout=10)
    assert not thread.is_alive() and result["state"] == LedgerState()
