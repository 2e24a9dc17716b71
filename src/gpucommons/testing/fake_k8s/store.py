"""The object store: etcd's role in the fake cluster.

One global counter gives every write its `resourceVersion` (as etcd's revision does), every object a
`uid`, `creationTimestamp` and, for kinds that have one, a `generation` that moves when anything
outside `metadata` and `status` changes. Each write is an event (ADDED, MODIFIED, DELETED) kept in a
history window; a watch resumes from any version still in the window, and a version older than the
window is "too old" (410 Gone), as after etcd's compaction. Field ownership for server-side apply is
kept per object and shown as `metadata.managedFields`.

Stored objects are never changed in place: every write stores a new dict, so an event's object is a
snapshot that readers may serialise without copying.
"""

from __future__ import annotations

import builtins
import copy
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gpucommons.testing.fake_k8s.clock import FakeClock, timestamp
from gpucommons.testing.fake_k8s.fields import Path, fields_v1, leaves, owned_content
from gpucommons.testing.fake_k8s.resources import ResourceType

Key = tuple[str, str, str]  # plural, namespace ("" when cluster-scoped), name
#: Kinds whose objects carry no metadata.generation (the recorded Pod shapes have none).
NO_GENERATION = frozenset({"Pod", "Node", "Event", "Namespace", "Lease"})


@dataclass(frozen=True, slots=True)
class StoreEvent:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: ResourceType
    obj: dict[str, Any]

    @property
    def key(self) -> Key:
        meta = self.obj["metadata"]
        return (self.resource.plural, meta.get("namespace", ""), meta["name"])


@dataclass
class _Ownership:
    #: field path → the (manager, subresource) pairs owning it
    paths: dict[Path, set[tuple[str, str]]] = field(default_factory=dict)
    #: (manager, subresource) → (operation, time)
    managers: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)


def _spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Store:
    def __init__(self, clock: FakeClock, history: int = 100_000, first_rv: int = 1000) -> None:
        self.clock = clock
        self.history = history
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._rv = first_rv
        self._uid = 0
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self._ownership: dict[Key, _Ownership] = {}
        self._events: deque[StoreEvent] = deque()
        self.compacted_rv = 0
        self._by_owner: dict[str, set[Key]] = {}
        self._listeners: builtins.list[Callable[[StoreEvent], None]] = []
        self.writes = 0

    # --- reading ------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object (do not change it: write a copy back)."""
        return self._objects.get(plural, {}).get((namespace, name))

    def list(self, plural: str, namespace: str | None = None) -> builtins.list[dict[str, Any]]:
        with self.lock:
            items = self._objects.get(plural, {})
            if namespace is None:
                return list(items.values())
            return [o for (ns, _), o in items.items() if ns == namespace]

    def dependents(self, owner_uid: str) -> builtins.list[Key]:
        with self.lock:
            return sorted(self._by_owner.get(owner_uid, ()))

    def owners_of(self, key: Key) -> dict[Path, set[str]]:
        with self.lock:
            ownership = self._ownership.get(key)
            if ownership is None:
                return {}
            return {p: {manager for manager, _ in owners} for p, owners in ownership.paths.items()}

    def on_write(self, listener: Callable[[StoreEvent], None]) -> None:
        self._listeners.append(listener)

    # --- writing ------------------------------------------------------------------------------------

    def next_uid(self) -> str:
        with self.lock:
            self._uid += 1
            return f"00000000-0000-4000-8000-{self._uid:012d}"

    def _bump(self) -> int:
        self._rv += 1
        return self._rv

    def create(
        self,
        resource: ResourceType,
        obj: dict[str, Any],
        manager: str,
        operation: str = "Update",
        dry_run: bool = False,
        ownership: _Ownership | None = None,
    ) -> dict[str, Any]:
        """Store a new object (the caller checked it does not exist); returns what was stored.
        `manager` owns every field, unless `ownership` (an apply's: only the applied fields) says."""
        with self.lock:
            stored = copy.deepcopy(obj)
            stored["apiVersion"] = resource.group_version
            stored["kind"] = resource.kind
            meta = stored.setdefault("metadata", {})
            meta["uid"] = self.next_uid()
            meta["resourceVersion"] = str(self._rv + 1)
            meta["creationTimestamp"] = timestamp(self.clock.now())
            if resource.kind not in NO_GENERATION:
                meta["generation"] = 1
            for drop in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
                meta.pop(drop, None)
            key: Key = (resource.plural, meta.get("namespace", ""), meta["name"])
            if ownership is None:
                ownership = _Ownership()
                every = leaves(owned_content(stored, "all"))
                self._take_split(ownership, resource, every, manager, operation)
            meta["managedFields"] = self._managed_fields(ownership, stored["apiVersion"])
            if dry_run:
                return stored
            self._bump()
            self._ownership[key] = ownership
            self._store(resource, key, stored, "ADDED")
            return stored

    def replace(
        self,
        resource: ResourceType,
        new: dict[str, Any],
        manager: str,
        operation: str = "Update",
        ownership: _Ownership | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Store `new` in place of the object of the same key. `ownership` (from an apply) replaces
        the field owners; otherwise `manager` takes the fields this write changed. An identical
        object is not written again (no new resourceVersion, no event)."""
        with self.lock:
            meta = new["metadata"]
            key: Key = (resource.plural, meta.get("namespace", ""), meta["name"])
            old = self.get(*key)
            assert old is not None, key
            stored = copy.deepcopy(new)
            stored["apiVersion"], stored["kind"] = resource.group_version, resource.kind
            smeta = stored["metadata"]
            for name in ("uid", "creationTimestamp"):
                smeta[name] = old["metadata"][name]
            if "generation" in old["metadata"]:
                generation = old["metadata"]["generation"]
                if _spec_part(stored) != _spec_part(old) or (
                    "deletionTimestamp" in smeta and "deletionTimestamp" not in old["metadata"]
                ):
                    generation += 1
                smeta["generation"] = generation
            if ownership is None:
                ownership = copy.deepcopy(self._ownership.get(key)) or _Ownership()
                before = leaves(owned_content(old, "all"))
                after = leaves(owned_content(stored, "all"))
                for path in before.keys() - after.keys():
                    ownership.paths.pop(path, None)
                changed = {p: v for p, v in after.items() if before.get(p, _MISSING) != v}
                self._take_split(ownership, resource, changed, manager, operation)
            smeta["managedFields"] = self._managed_fields(ownership, stored["apiVersion"])
            comparable_old = {
                **old,
                "metadata": {k: v for k, v in old["metadata"].items() if k != "resourceVersion"},
            }
            comparable_new = {
                **stored,
                "metadata": {k: v for k, v in smeta.items() if k != "resourceVersion"},
            }
            if comparable_old == comparable_new:
                return old
            smeta["resourceVersion"] = old["metadata"]["resourceVersion"] if dry_run else str(self._rv + 1)
            if dry_run:
                return stored
            self._bump()
            self._ownership[key] = ownership
            self._store(resource, key, stored, "MODIFIED")
            return stored

    def remove(self, resource: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        """Take the object out of the store (its finalizers are the caller's business)."""
        with self.lock:
            key: Key = (resource.plural, namespace, name)
            old = self._objects.get(resource.plural, {}).pop((namespace, name), None)
            if old is None:
                return None
            self._ownership.pop(key, None)
            self._unindex(key, old)
            gone = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self._bump())}}
            self._emit(StoreEvent(self._rv, "DELETED", resource, gone))
            return gone

    def _store(self, resource: ResourceType, key: Key, stored: dict[str, Any], kind: str) -> None:
        previous = self._objects.setdefault(resource.plural, {}).get(key[1:])
        if previous is not None:
            self._unindex(key, previous)
        self._objects[resource.plural][key[1:]] = stored
        for ref in stored["metadata"].get("ownerReferences") or []:
            self._by_owner.setdefault(ref.get("uid", ""), set()).add(key)
        self._emit(StoreEvent(self._rv, kind, resource, stored))

    def _unindex(self, key: Key, obj: dict[str, Any]) -> None:
        for ref in obj["metadata"].get("ownerReferences") or []:
            keys = self._by_owner.get(ref.get("uid", ""))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_owner[ref.get("uid", "")]

    def _emit(self, event: StoreEvent) -> None:
        self.writes += 1
        self._events.append(event)
        while len(self._events) > self.history:
            self.compacted_rv = self._events.popleft().rv
        self.changed.notify_all()
        for listener in list(self._listeners):
            listener(event)

    # --- field ownership ----------------------------------------------------------------------------

    def _take(
        self,
        ownership: _Ownership,
        paths: dict[Path, Any],
        manager: str,
        operation: str,
        subresource: str,
        exclusive: bool = True,
    ) -> None:
        if not paths:
            return
        owner = (manager, subresource)
        for path in paths:
            if exclusive:
                ownership.paths[path] = {owner}
            else:
                ownership.paths.setdefault(path, set()).add(owner)
        ownership.managers[(manager, subresource)] = (operation, timestamp(self.clock.now()))

    def _take_split(
        self,
        ownership: _Ownership,
        resource: ResourceType,
        paths: dict[Path, Any],
        manager: str,
        operation: str,
    ) -> None:
        """`manager` takes `paths`; status fields through the status subresource when there is one."""
        status = {p: v for p, v in paths.items() if resource.status and p[:1] == (("f", "status"),)}
        self._take(ownership, {p: v for p, v in paths.items() if p not in status}, manager, operation, "")
        self._take(ownership, status, manager, operation, "status")

    def ownership(self, key: Key) -> _Ownership:
        with self.lock:
            return copy.deepcopy(self._ownership.get(key)) or _Ownership()

    @staticmethod
    def _managed_fields(ownership: _Ownership, api_version: str) -> builtins.list[dict[str, Any]]:
        entries = []
        for (manager, subresource), (operation, time) in ownership.managers.items():
            owned = {p for p, owners in ownership.paths.items() if (manager, subresource) in owners}
            if not owned:
                continue
            entry: dict[str, Any] = {
                "manager": manager,
                "operation": operation,
                "apiVersion": api_version,
                "time": time,
                "fieldsType": "FieldsV1",
                "fieldsV1": fields_v1(owned),
            }
            if subresource:
                entry["subresource"] = subresource
            entries.append(entry)
        return entries

    # --- watch history ------------------------------------------------------------------------------

    def too_old(self, rv: int) -> bool:
        return rv < self.compacted_rv

    def compact(self) -> int:
        """Forget the whole history, as etcd's compaction does: a watch from any version before now
        gets 410 Gone. Returns the version compacted to."""
        with self.lock:
            self.compacted_rv = self._rv
            self._events.clear()
            return self._rv

    def events_after(self, rv: int) -> builtins.list[StoreEvent]:
        with self.lock:
            if not self._events or self._events[-1].rv <= rv:
                return []
            if self._events[0].rv > rv:
                return list(self._events)
            # the deque is ordered by rv: find the first event after rv from the right
            out: builtins.list[StoreEvent] = []
            for event in reversed(self._events):
                if event.rv <= rv:
                    break
                out.append(event)
            out.reverse()
            return out

    def wait_after(self, rv: int, timeout: float) -> None:
        with self.changed:
            if self._rv <= rv:
                self.changed.wait(timeout)

    def all_keys(self) -> Iterator[Key]:
        with self.lock:
            for plural, items in list(self._objects.items()):
                for ns, name in list(items):
                    yield (plural, ns, name)


_MISSING = object()
