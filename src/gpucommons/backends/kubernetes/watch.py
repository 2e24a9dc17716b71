"""The thin I/O loop around `observe`: list Kueue Workloads, then watch them, feeding a ledger sink.

The usual Kubernetes list-then-watch: a LIST gives every Workload and a resourceVersion; a WATCH from
that version streams changes (one JSON event per line). When the server says the version is too old
(an `ERROR` event with code 410 Gone) or the connection drops, we list again; `LedgerState` makes the
re-list harmless (nothing is written twice). All decisions live in `observe`; this module only moves
bytes and reads the clock it is given.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime

from gpucommons.backends.kubernetes.connection import ApiStatus, KubeApi, Unreachable
from gpucommons.backends.kubernetes.kinds import KINDS
from gpucommons.backends.kubernetes.observe import ClusterNames, LedgerState, forget_missing, observe
from gpucommons.ledger import UsageInterval

Sink = Callable[[UsageInterval], None]
#: The server ends each watch after this long; we then continue from the last version seen.
WATCH_TIMEOUT_S = 300


class _Relist(Exception):
    """The watch cannot continue from where it was: list again."""


def _list(
    api: KubeApi, state: LedgerState, names: ClusterNames, sink: Sink, clock: Callable[[], datetime]
) -> str:
    body = api.request("GET", KINDS["Workload"].collection_path()).body
    now = clock()
    present = set()
    for obj in body.get("items", []):
        present.add(obj.get("metadata", {}).get("uid", ""))
        for interval in observe(state, "ADDED", obj, now, names):
            sink(interval)
    for interval in forget_missing(state, present, now):
        sink(interval)
    return str(body.get("metadata", {}).get("resourceVersion", ""))


def _watch(
    api: KubeApi,
    state: LedgerState,
    version: str,
    names: ClusterNames,
    sink: Sink,
    clock: Callable[[], datetime],
    stop: threading.Event,
) -> str:
    query = [
        ("watch", "1"),
        ("resourceVersion", version),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", str(WATCH_TIMEOUT_S)),
    ]
    response = api.stream(KINDS["Workload"].collection_path(), query)
    try:
        for line in response:
            if stop.is_set():
                break
            if not line.strip():
                continue
            event = json.loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise _Relist(obj.get("message", "watch error"))
            version = str(obj.get("metadata", {}).get("resourceVersion", version))
            if kind == "BOOKMARK":
                continue
            for interval in observe(state, kind, obj, clock(), names):
                sink(interval)
    finally:
        response.release_conn()
    return version


def watch_workloads(
    api: KubeApi,
    names: ClusterNames,
    sink: Sink,
    clock: Callable[[], datetime],
    stop: threading.Event | None = None,
    state: LedgerState | None = None,
    once: bool = False,
) -> LedgerState:
    """Feed `sink` every interval Kueue's Workloads close, until `stop` is set (or, with `once`,
    after one list and one watch stream). Returns the state, whose open holds are the running tasks."""
    stop = stop or threading.Event()
    state = state if state is not None else LedgerState()
    version = ""
    while not stop.is_set():
        try:
            if not version:
                version = _list(api, state, names, sink, clock)
            version = _watch(api, state, version, names, sink, clock, stop)
        except (_Relist, ValueError):
            version = ""
        except ApiStatus as status:
            if status.code != 410:
                raise
            version = ""
        except Unreachable:
            if once:
                raise
            stop.wait(5.0)  # the API server restarts or fails over: try again shortly
            version = ""
        if once:
            break
    return state
