"""The Workload watch loop against the recorded fake: list, then a watch stream, into a ledger sink."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from k8s_client_helpers import EXAMPLE, fake_cluster

from gpucommons.backends.kubernetes.observe import ClusterNames, LedgerState
from gpucommons.backends.kubernetes.watch import watch_workloads
from gpucommons.ledger import EndReason, UsageInterval
from gpucommons.policy import load_policy

RECORDING = Path(__file__).parent / "recordings" / "workload_preempted_then_finished.json"
NOW = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
pytestmark = pytest.mark.timeout(60)


def _names() -> ClusterNames:
    return ClusterNames.from_policy(load_policy(EXAMPLE))


def test_a_watch_stream_feeds_the_ledger_the_preempted_and_the_finished_run(tmp_path: Path) -> None:
    events = json.loads(RECORDING.read_text())["events"]
    written: list[UsageInterval] = []
    with fake_cluster(tmp_path) as (fake, api):
        fake.watch_events = [{"type": e["type"], "object": e["object"]} for e in events]
        state = watch_workloads(api, _names(), written.append, clock=lambda: NOW, once=True)
        watch = fake.requests[-1]
    assert [(i.start.hour, i.end.hour, i.end_reason) for i in written] == [
        (10, 11, EndReason.PREEMPTED),
        (11, 13, EndReason.SUCCEEDED),
    ]
    assert state.holds == {}
    assert watch.path == "/apis/kueue.x-k8s.io/v1beta2/workloads"
    assert watch.param("watch") == "1" and watch.param("resourceVersion") == "1000"


def test_the_list_bills_a_run_that_finished_before_the_watcher_started(tmp_path: Path) -> None:
    finished = json.loads(RECORDING.read_text())["events"][-1]["object"]
    written: list[UsageInterval] = []
    with fake_cluster(tmp_path) as (fake, api):
        fake.objects[
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-nlp/workloads/" + finished["metadata"]["name"]
        ] = finished
        watch_workloads(api, _names(), written.append, clock=lambda: NOW, once=True)
    assert [(i.task_id, i.gpus, i.end_reason) for i in written] == [("t0a1b2c3d4e", 8, EndReason.SUCCEEDED)]


def test_a_hold_whose_workload_vanished_while_unwatched_ends_at_the_relist(tmp_path: Path) -> None:
    admitted = json.loads(RECORDING.read_text())["events"][1]["object"]
    with fake_cluster(tmp_path) as (fake, api):
        path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-nlp/workloads/" + admitted["metadata"]["name"]
        fake.objects[path] = admitted
        state = watch_workloads(api, _names(), lambda _: None, clock=lambda: NOW, once=True)
        del fake.objects[path]
        written: list[UsageInterval] = []
        state = watch_workloads(api, _names(), written.append, clock=lambda: NOW, state=state, once=True)
    assert [(i.end, i.end_reason) for i in written] == [(NOW, EndReason.CANCELLED)]
    assert state == LedgerState()


def test_an_expired_watch_ends_the_stream_quietly_and_the_next_round_lists_again(tmp_path: Path) -> None:
    gone = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 410}
    gone.update(reason="Expired", message="too old resource version: 1000 (2000)")
    with fake_cluster(tmp_path) as (fake, api):
        fake.watch_events = [{"type": "ERROR", "object": gone}]
        state = watch_workloads(api, _names(), lambda _: None, clock=lambda: NOW, once=True)
        watch_workloads(api, _names(), lambda _: None, clock=lambda: NOW, state=state, once=True)
        lists = [r for r in fake.requests if r.path.endswith("/workloads") and r.param("watch") is None]
    assert len(lists) == 2 and state == LedgerState()
