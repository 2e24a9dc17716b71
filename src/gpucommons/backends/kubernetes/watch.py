"""The thin I/O loop around `observe`: list Kueue Workloads, then watch them, feeding a ledger sink.
`list_and_watch` is the loop itself, for any collection (the governance controller uses it too).

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
from typing import Any

from gpucommons.backends.kubernetes.connection import (
    ApiStatus,
    KubeApi,
    StreamBroken,
    Unreachable,
    stream_lines,
)
from gpucommons.backends.kubernetes.kinds import KINDS
from gpucommons.backends.kubernetes.observe import ClusterNames, LedgerState, forget_missing, observe
from gpucommons.ledger import UsageInterval

Sink = Callable[[UsageInterval], None]
Manifest = dict[str, Any]
#: The server ends each watch after this long; we then continue from the last version seen.
WATCH_TIMEOUT_S = 300


class _Relist(Exception):
    """The watch cannot continue from where it was: list again."""


def _list(api: KubeApi, path: str, listed: Callable[[list[Manifest]], None]) -> str:
    body = api.request("GET", path).body
    listed(list(body.get("items", [])))
    return str(body.get("metadata", {}).get("resourceVersion", ""))


def _watch(
    api: KubeApi,
    path: str,
    version: str,
    changed: Callable[[str, Manifest], None],
    stop: threading.Event,
    timeout_s: int,
) -> str:
    query = [
        ("watch", "1"),
        ("resourceVersion", version),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", str(timeout_s)),
    ]
    response = api.stream(path, query)
    try:
        for line in stream_lines(response):
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
            changed(kind, obj)
    finally:
        response.release_conn()
    return version


def list_and_watch(
    api: KubeApi,
    path: str,
    listed: Callable[[list[Manifest]], None],
    changed: Callable[[str, Manifest], None],
    stop: threading.Event,
    once: bool = False,
    timeout_s: int = WATCH_TIMEOUT_S,
    after_watch: Callable[[], None] | None = None,
) -> None:
    """List the collection at `path` (`listed` gets every object), then watch it from the list's
    resourceVersion (`changed` gets each `ADDED`/`MODIFIED`/`DELETED` event; bookmarks only move the
    resume point), and watch again from the last version seen each time a stream ends, calling
    `after_watch` in between. A 410 Gone, an `ERROR` event or a broken stream lists again; an
    unreachable server is retried after 5 s. Other `ApiStatus` errors are raised. Runs until `stop`
    is set or, with `once`, for one list and one watch stream (then an unreachable server raises)."""
    version = ""
    while not stop.is_set():
        try:
            if not version:
                version = _list(api, path, listed)
            version = _watch(api, path, version, changed, stop, timeout_s)
        except (_Relist, StreamBroken, ValueError):
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
        if after_watch is not None and not stop.is_set():
            after_watch()


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
    ledger = state if state is not None else LedgerState()

    def listed(items: list[Manifest]) -> None:
        now = clock()
        present = set()
        for obj in items:
            present.add(obj.get("metadata", {}).get("uid", ""))
            for interval in observe(ledger, "ADDED", obj, now, names):
                sink(interval)
        for interval in forget_missing(ledger, present, now):
            sink(interval)

    def changed(kind: str, obj: Manifest) -> None:
        for interval in observe(ledger, kind, obj, clock(), names):
            sink(interval)

    list_and_watch(api, KINDS["Workload"].collection_path(), listed, changed, stop, once)
    return ledger
