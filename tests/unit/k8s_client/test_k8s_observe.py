"""Kueue Workloads → ledger intervals, from a recorded admit / preempt / readmit / finish sequence."""

from __future__ import annotations

import copy
import io
import json
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_client_helpers import EXAMPLE

from gpucommons.backends.kubernetes.observe import (
    ClusterNames,
    LedgerState,
    observe,
    open_intervals,
    replay,
)
from gpucommons.ledger import EndReason, UsageInterval, write_usage_csv
from gpucommons.policy import load_policy
from gpucommons.testing.repo_data import KUEUE_DATA

RECORDING = Path(__file__).parent / "recordings" / "workload_preempted_then_finished.json"
CRD = KUEUE_DATA / "crds" / "kueue.x-k8s.io_workloads.yaml"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _events() -> list[tuple[str, dict[str, Any], datetime]]:
    recorded = json.loads(RECORDING.read_text())["events"]
    return [(e["type"], e["object"], _at(e["seen"])) for e in recorded]


def _names() -> ClusterNames:
    return ClusterNames.from_policy(load_policy(EXAMPLE))


def _interval(start: str, end: str, reason: EndReason) -> UsageInterval:
    return UsageInterval("t0a1b2c3d4e", "nlp", "h100", 8, _at(start), _at(end), "training", end_reason=reason)


PREEMPTED = _interval("2026-11-30T10:05:00Z", "2026-11-30T11:00:30Z", EndReason.PREEMPTED)
SUCCEEDED = _interval("2026-11-30T11:20:00Z", "2026-11-30T13:20:00Z", EndReason.SUCCEEDED)


@cache
def _workload_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def test_the_recorded_workloads_match_kueues_v1beta2_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    if not CRD.exists():
        pytest.skip(f"Kueue CRDs not found at {CRD}")
    for _, obj, _ in _events():
        jsonschema.validate(obj, _workload_schema())


def test_preempted_then_readmitted_then_finished_gives_two_exact_intervals() -> None:
    state, intervals = replay(_events(), _names())
    assert intervals == [PREEMPTED, SUCCEEDED]
    assert state.holds == {}


def test_the_hold_ends_when_the_pods_are_gone_not_at_the_eviction() -> None:
    events = _events()
    state, written = replay(events[:3], _names())  # evicted, pods still terminating
    assert written == []
    [running] = open_intervals(state, _at("2026-11-30T11:00:10Z"))
    assert running.end_reason is EndReason.RUNNING and running.gpus == 8
    _, written = replay(events[3:4], _names(), state)
    assert written == [PREEMPTED]


def test_replaying_every_event_again_writes_nothing_twice() -> None:
    state, first = replay(_events(), _names())
    _, again = replay(_events(), _names(), state)
    assert first and again == []


def test_a_watcher_that_starts_after_the_end_still_bills_the_last_run() -> None:
    _, finished, seen = _events()[-1]
    _, intervals = replay([("ADDED", finished, seen)], _names())
    assert intervals == [SUCCEEDED]


def test_a_missed_release_ends_the_old_interval_at_the_eviction() -> None:
    events = _events()
    skipped = [events[1], events[4], events[5]]  # admitted, (evicted + released unseen), readmitted, finished
    _, intervals = replay(skipped, _names())
    assert intervals == [
        _interval("2026-11-30T10:05:00Z", "2026-11-30T11:20:00Z", EndReason.PREEMPTED),
        SUCCEEDED,
    ]


def test_a_deleted_job_while_running_is_cancelled_when_seen() -> None:
    events = _events()
    state, _ = replay(events[:2], _names())
    _, obj, _ = events[1]
    _, intervals = replay([("DELETED", obj, _at("2026-11-30T10:30:00Z"))], _names(), state)
    assert intervals == [_interval("2026-11-30T10:05:00Z", "2026-11-30T10:30:00Z", EndReason.CANCELLED)]


def test_a_failed_job_and_a_deactivated_workload_keep_their_reasons() -> None:
    events = _events()
    failed = copy.deepcopy(events[5][1])
    failed["status"]["conditions"][-1].update(
        reason="Failed", message="Job has reached the specified backoff limit"
    )
    _, intervals = replay([events[4], ("MODIFIED", failed, events[5][2])], _names())
    assert [i.end_reason for i in intervals] == [EndReason.FAILED]
    deactivated = copy.deepcopy(events[3][1])
    for condition in deactivated["status"]["conditions"]:
        if condition["type"] == "Evicted":
            condition["reason"] = "Deactivated"
    _, intervals = replay([events[1], ("MODIFIED", deactivated, events[3][2])], _names())
    assert [i.end_reason for i in intervals] == [EndReason.CANCELLED]


def test_workloads_outside_team_namespaces_are_not_billed() -> None:
    event, obj, seen = _events()[1]
    elsewhere = copy.deepcopy(obj)
    elsewhere["metadata"]["namespace"] = "kube-system"
    state = LedgerState()
    assert observe(state, event, elsewhere, seen, _names()) == []
    assert state == LedgerState()


def test_a_job_we_did_not_create_is_billed_under_its_workload_name() -> None:
    events = _events()
    foreign = []
    for event, obj, seen in [events[1], events[5]]:
        obj = copy.deepcopy(obj)
        obj["metadata"]["ownerReferences"][0]["name"] = "someones-job"
        foreign.append((event, obj, seen))
    _, [interval] = replay(foreign, _names())
    assert interval.task_id == "team-nlp/job-commons-t0a1b2c3d4e-5b2c1" and interval.team == "nlp"


def test_the_observed_intervals_are_contract_4_rows() -> None:
    _, intervals = replay(_events(), _names())
    out = io.StringIO()
    write_usage_csv(intervals, out)
    assert out.getvalue().splitlines() == [
        "task_id,team,pool,gpus,start,end,priority,borrowed_gpus,end_reason",
        "t0a1b2c3d4e,nlp,h100,8,2026-11-30T10:05:00Z,2026-11-30T11:00:30Z,training,0,preempted",
        "t0a1b2c3d4e,nlp,h100,8,2026-11-30T11:20:00Z,2026-11-30T13:20:00Z,training,0,succeeded",
    ]
