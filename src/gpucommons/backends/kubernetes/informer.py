"""List-then-watch of one kind, the way client-go's informers do it, for the backend's watchers.

A LIST gives every object and a resourceVersion; a WATCH from that version streams the changes
(one JSON event per line) with BOOKMARK events that move the version on while nothing changes.
When the server says the version is too old (410 Gone, as an HTTP status or an `ERROR` event) or
the stream breaks, we list again; every `resync_s` we list again anyway. After each list the
informer reports what it found as ADDED (or MODIFIED) events and what vanished unseen as DELETED,
so a handler sees one consistent story whatever was dropped on the way.

The handler is called from the informer's thread; it must not block for long.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpucommons.backends.kubernetes.connection import ApiStatus, KubeApi
from gpucommons.backends.kubernetes.kinds import Kind

log = logging.getLogger(__name__)

Manifest = dict[str, Any]
#: (event type, object): ADDED, MODIFIED or DELETED.
Handler = Callable[[str, Manifest], None]
#: The server ends each watch after this long; we then continue from the last version seen.
WATCH_TIMEOUT_S = 300


class _Relist(Exception):
    """The watch cannot continue from where it was: list again."""


def object_key(obj: Manifest) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


@dataclass
class InformerStats:
    """What the informer did, for /metrics, tests and benchmarks."""

    lists: int = 0
    watches: int = 0
    events: int = 0
    relists_after_gone: int = 0
    errors: int = 0
    last_error: str = ""
    synced: threading.Event = field(default_factory=threading.Event)


class Informer:
    """Keeps `handler` told of every change to `kind` (across namespaces, or in `namespace`)."""

    def __init__(
        self,
        api: KubeApi,
        kind: Kind,
        handler: Handler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        resync_s: float = 600.0,
        backoff_s: tuple[float, float] = (0.5, 10.0),
        page_size: int = 500,
    ) -> None:
        self.api = api
        self.kind = kind
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        self.resync_s = resync_s
        self.backoff_s = backoff_s
        self.page_size = page_size
        self.stats = InformerStats()
        #: The last version of every object seen (to report deletions found by a re-list).
        self.known: dict[tuple[str, str], Manifest] = {}
        self._version = ""

    # --- the loop -----------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """List and watch until `stop` is set; API errors are retried with a growing pause."""
        pause = self.backoff_s[0]
        listed_at = 0.0
        while not stop.is_set():
            try:
                if not self._version or time.monotonic() - listed_at >= self.resync_s:
                    self.relist()
                    listed_at = time.monotonic()
                self._watch(stop, deadline=listed_at + self.resync_s)
                pause = self.backoff_s[0]
            except _Relist as why:
                log.info("%s watch must list again: %s", self.kind.plural, why)
                self._version = ""
            except Exception as exc:  # a broken stream (urllib3), or anything else:
                # an informer that stops is the one failure that loses everything after it.
                gone = isinstance(exc, ApiStatus) and exc.code == 410
                self.stats.relists_after_gone += int(gone)
                if not gone:
                    self.stats.errors += 1
                    self.stats.last_error = str(exc)
                    log.warning("%s watch failed (%s); again in %.1fs", self.kind.plural, exc, pause)
                    stop.wait(pause)
                    pause = min(self.backoff_s[1], pause * 2)
                self._version = ""

    def relist(self) -> None:
        """LIST (in pages), report every object, and DELETED for those gone since the last look."""
        items: list[Manifest] = []
        cont = ""
        version = ""
        while True:
            query = [("limit", str(self.page_size))]
            if cont:
                query.append(("continue", cont))
            if self.label_selector:
                query.append(("labelSelector", self.label_selector))
            body = self.api.request("GET", self.kind.collection_path(self.namespace), query).body
            items += body.get("items") or []
            meta = body.get("metadata") or {}
            version = str(meta.get("resourceVersion", version))
            cont = str(meta.get("continue") or "")
            if not cont:
                break
        self.stats.lists += 1
        present = {}
        for obj in items:
            obj.setdefault("kind", self.kind.kind)
            present[object_key(obj)] = obj
        for key, old in list(self.known.items()):
            if key not in present:
                del self.known[key]
                self._emit("DELETED", old)
        for key, obj in present.items():
            seen = self.known.get(key)
            same = seen is not None and _version_of(seen) == _version_of(obj)
            self.known[key] = obj
            if not same:
                self._emit("MODIFIED" if seen is not None else "ADDED", obj)
        self._version = version
        self.stats.synced.set()

    def _watch(self, stop: threading.Event, deadline: float) -> None:
        timeout = max(1, min(WATCH_TIMEOUT_S, int(deadline - time.monotonic())))
        query = [
            ("watch", "1"),
            ("resourceVersion", self._version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
        ]
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        response = self.api.stream(self.kind.collection_path(self.namespace), query)
        self.stats.watches += 1
        try:
            for line in response:
                if stop.is_set():
                    return
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        self.stats.relists_after_gone += 1
                    raise _Relist(obj.get("message", "watch error"))
                self._version = str((obj.get("metadata") or {}).get("resourceVersion", self._version))
                if kind == "BOOKMARK":
                    continue
                obj.setdefault("kind", self.kind.kind)
                key = object_key(obj)
                if kind == "DELETED":
                    self.known.pop(key, None)
                else:
                    self.known[key] = obj
                self._emit(str(kind), obj)
        finally:
            response.release_conn()

    def _emit(self, kind: str, obj: Manifest) -> None:
        self.stats.events += 1
        try:
            self.handler(kind, obj)
        except Exception:  # a handler's bug must not stop the watch of everything else
            log.exception("handling %s %s %s failed", kind, self.kind.kind, object_key(obj))


def _version_of(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
