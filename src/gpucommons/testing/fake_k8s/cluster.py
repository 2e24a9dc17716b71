"""`FakeCluster`: the object store, the HTTP API server, Kueue, the Job controller, the kubelet and
the garbage collector of a fake Kubernetes cluster, for tests.

    with FakeCluster(time_scale=60) as cluster:
        kubeconfig = cluster.kubeconfig(tmp_path)          # the real client connects with this
        cluster.apply_objects(kueue_objects)               # what `commons k8s render` emits
        cluster.create(job)                                # or any client through HTTP
        cluster.wait_for(lambda: cluster.workload_of("team-nlp", "commons-t1"), "a Workload")

Controllers run on one thread, in the order the writes happened, so the same calls give the same
writes. Time is the cluster's own clock (`clock.py`): `time_scale=0` stops it and `advance()` moves it.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import heapq
import itertools
import json
import random
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from gpucommons.testing.fake_k8s import statuses
from gpucommons.testing.fake_k8s.admission import admit_object
from gpucommons.testing.fake_k8s.apiserver import Answer, ApiServer, Request, Stream
from gpucommons.testing.fake_k8s.clock import DEFAULT_START, FakeClock, timestamp
from gpucommons.testing.fake_k8s.controllers import Controllers
from gpucommons.testing.fake_k8s.faults import Faults
from gpucommons.testing.fake_k8s.fields import path_text
from gpucommons.testing.fake_k8s.kubelet import Kubelet, Program
from gpucommons.testing.fake_k8s.kueue import QUEUE_LABEL
from gpucommons.testing.fake_k8s.resources import ResourceType, resource_for
from gpucommons.testing.fake_k8s.store import Store, StoreEvent

T = TypeVar("T")
_KUEUE_CONFIG = {
    "ClusterQueue",
    "LocalQueue",
    "ResourceFlavor",
    "Cohort",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "Namespace",
}
_GC_FINALIZERS = ("orphan", "foregroundDeletion")


class FakeCluster:
    def __init__(
        self,
        *,
        time_scale: float = 1.0,
        start: datetime = DEFAULT_START,
        kueue: bool = True,
        emulate: bool = True,
        namespaces: Iterable[str] = (),
        validate: bool = True,
        excluded_resource_prefixes: tuple[str, ...] = (),
        local_queue_defaulting: bool = True,
        pod_start_seconds: float = 2.0,
        history: int = 10_000,
        journal: bool = True,
        bookmark_interval: float = 1.0,
        user: str = "alice@example.com",
        token: str = "fake-token",
        forbidden: set[tuple[str, str]] | None = None,
        refusals: dict[str, tuple[str, dict[str, str]]] | None = None,
        write_refusals: dict[str, tuple[str, dict[str, str]]] | None = None,
    ) -> None:
        self.clock = FakeClock(start, time_scale)
        self.store = Store(self.clock, history=history)
        self.faults = Faults()
        self.kueue_enabled = kueue
        self.emulate = emulate
        self.validate = validate
        self.local_queue_defaulting = local_queue_defaulting
        self._names = random.Random(7)
        runtime = _Runtime(self)
        self.kubelet = Kubelet(runtime, start_seconds=pod_start_seconds)
        self.controllers = Controllers(runtime, excluded_resource_prefixes)
        self.api = ApiServer(
            self.store,
            self.clock,
            self.faults,
            admission=self._admission,
            deleter=self,
            logs=self.kubelet,
            visibility=self,
            kueue=kueue,
            user=user,
            token=token,
            forbidden=set(forbidden or ()),
            refusals=dict(refusals or {}),
            write_refusals=dict(write_refusals or {}),
            bookmark_interval=bookmark_interval,
        )
        #: every write, in order, as (type, kind, object): what a watcher of everything saw.
        self.journal: builtins.list[tuple[str, str, dict[str, Any]]] | None = [] if journal else None
        self._queue: builtins.list[StoreEvent] = []
        self._timers: builtins.list[tuple[datetime, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._wake = threading.Condition()
        self._stopping = threading.Event()
        self._busy = False
        self._thread: threading.Thread | None = None
        self.errors: builtins.list[BaseException] = []
        self.store.on_write(self._on_write)
        self.clock.on_change(self._poke)
        for namespace in namespaces:
            self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    # === lifecycle =====================================================================================

    def __enter__(self) -> FakeCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.api.start()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fake-k8s-controllers")
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._poke()
        self.api.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return self.api.url

    def kubeconfig(self, directory: Path, context: str = "fake", namespace: str | None = None) -> Path:
        """Write `directory/kubeconfig` (a token user, the fake's URL) and return its path."""
        path = directory / "kubeconfig" if directory.is_dir() or not directory.suffix else directory
        ctx: dict[str, Any] = {"cluster": "fake", "user": "alice"}
        if namespace:
            ctx["namespace"] = namespace
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "alice", "user": {"token": self.api.token}}],
                    "contexts": [{"name": context, "context": ctx}],
                    "current-context": context,
                }
            )
        )
        return path

    # === what the recorded fake offered (kept for the apply tests) =====================================

    @property
    def token(self) -> str:
        return self.api.token

    @token.setter
    def token(self, value: str) -> None:
        self.api.token = value

    @property
    def requests(self) -> builtins.list[Request]:
        return self.api.requests

    def writes(self) -> builtins.list[Request]:
        """Requests that change the store: PATCH, PUT, POST, DELETE without dryRun."""
        return [
            r
            for r in self.api.requests
            if r.method in ("PATCH", "PUT", "POST", "DELETE") and r.param("dryRun") is None
        ]

    @property
    def objects(self) -> dict[str, dict[str, Any]]:
        """Every stored object by its API path (a snapshot)."""
        out = {}
        for plural, namespace, name in self.store.all_keys():
            obj = self.store.get(plural, namespace, name)
            if obj is not None:
                resource = resource_for(obj["kind"])
                out[resource.path(namespace or None, name)] = obj
        return out

    def field_owners(self, kind: str, name: str, namespace: str = "") -> dict[str, set[str]]:
        """`.spec.queueingStrategy` → the field managers owning it."""
        resource = resource_for(kind)
        return {path_text(p): m for p, m in self.store.owners_of((resource.plural, namespace, name)).items()}

    def seed(self, path: str, obj: dict[str, Any], manager: str = "kubectl-edit") -> dict[str, Any]:
        """An object some other tool wrote (through an ordinary create): `manager` owns its fields."""
        target = self.api.parse(path)
        assert target is not None, path
        resource = target.resource
        with self.store.lock:
            return self.store.create(resource, copy.deepcopy(obj), manager)

    # === reading =======================================================================================

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The stored object (a copy), or None."""
        obj = self.store.get(resource_for(kind).plural, namespace, name)
        return copy.deepcopy(obj) if obj is not None else None

    def list(
        self, kind: str, namespace: str | None = None, labels: dict[str, str] | None = None
    ) -> builtins.list[dict[str, Any]]:
        items = self.store.list(resource_for(kind).plural, namespace)
        if labels:
            items = [
                o
                for o in items
                if all((o["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())
            ]
        return [
            copy.deepcopy(o)
            for o in sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        ]

    def workload_of(self, namespace: str, job_name: str) -> dict[str, Any] | None:
        """The Workload Kueue made for a Job (by owner), or None."""
        job = self.store.get("jobs", namespace, job_name)
        if job is None:
            return None
        owned = self.owned(job["metadata"]["uid"], "Workload")
        return copy.deepcopy(owned[0]) if owned else None

    def pods_of(self, namespace: str, job_name: str) -> builtins.list[dict[str, Any]]:
        job = self.store.get("jobs", namespace, job_name)
        return [copy.deepcopy(p) for p in self.owned(job["metadata"]["uid"], "Pod")] if job else []

    def history(
        self, kind: str, name: str | None = None, namespace: str | None = None
    ) -> builtins.list[tuple[str, dict[str, Any]]]:
        """Every (event type, object) written for that kind (and name), from the journal."""
        assert self.journal is not None, "this cluster keeps no journal (journal=False)"
        return [
            (event, obj)
            for event, k, obj in list(self.journal)
            if k == kind
            and (name is None or obj["metadata"]["name"] == name)
            and (namespace is None or obj["metadata"].get("namespace") == namespace)
        ]

    def pod_log(self, namespace: str, name: str) -> builtins.list[str]:
        return self.kubelet.pod_log(namespace, name, None)[0]

    # === writing as a user would (through the API server's own code) ===================================

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json", **query: str
    ) -> Any:
        """One request to the API server without HTTP; returns the answer's body, raises ApiError."""
        request = Request(
            method,
            path,
            {k: [v] for k, v in query.items()},
            {
                "authorization": f"Bearer {self.api.token}",
                "content-type": content_type,
                "user-agent": "kubectl/v1.36.2",
            },
            json.dumps(body).encode() if body is not None else b"",
        )
        answer = self.api.handle(request)
        if isinstance(answer, Stream):
            raise ValueError("call() does not follow streams")
        assert isinstance(answer, Answer)
        return answer.body

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = resource_for(obj["kind"])
        result: dict[str, Any] = self.call("POST", resource.path(obj["metadata"].get("namespace")), obj)
        return result

    def apply(self, obj: dict[str, Any], manager: str = "kubectl", force: bool = True) -> dict[str, Any]:
        resource = resource_for(obj["kind"])
        path = resource.path(obj["metadata"].get("namespace"), obj["metadata"]["name"])
        query = {"fieldManager": manager, **({"force": "true"} if force else {})}
        result: dict[str, Any] = self.call("PATCH", path, obj, "application/apply-patch+yaml", **query)
        return result

    def apply_objects(self, objects: Iterable[dict[str, Any]], manager: str = "gpucommons") -> None:
        """Apply rendered manifests in dependency order (namespaces and cohorts first)."""
        order = {
            "Namespace": 0,
            "ClusterRole": 0,
            "ResourceFlavor": 1,
            "WorkloadPriorityClass": 1,
            "AdmissionCheck": 1,
            "Cohort": 2,
            "ClusterQueue": 3,
            "LocalQueue": 4,
        }
        items = sorted(objects, key=lambda o: order.get(o["kind"], 3))
        cohorts = [o for o in items if o["kind"] == "Cohort"]
        done: set[str] = set()
        while cohorts:  # parents before children
            ready = [
                c
                for c in cohorts
                if (c.get("spec") or {}).get("parentName") in (None, *done)
                or (c.get("spec") or {}).get("parentName") not in {x["metadata"]["name"] for x in cohorts}
            ]
            for cohort in ready:
                done.add(cohort["metadata"]["name"])
                cohorts.remove(cohort)
            if not ready:
                break
        for obj in items:
            self.apply(obj, manager)

    def patch(
        self,
        kind: str,
        name: str,
        patch: Any,
        namespace: str = "",
        status: bool = False,
        content_type: str = "application/merge-patch+json",
    ) -> dict[str, Any]:
        resource = resource_for(kind)
        path = resource.path(namespace or None, name) + ("/status" if status else "")
        result: dict[str, Any] = self.call("PATCH", path, patch, content_type)
        return result

    def delete_object(self, kind: str, name: str, namespace: str = "", propagation: str | None = None) -> Any:
        resource = resource_for(kind)
        query = {"propagationPolicy": propagation} if propagation else {}
        return self.call("DELETE", resource.path(namespace or None, name), **query)

    def put(self, obj: dict[str, Any], manager: str = "test") -> dict[str, Any]:
        """Store `obj` as it is, status included, with no admission and no controller reasoning
        about how it got there: a scripted state (e.g. a recorded Workload) for a watcher to see."""
        resource = resource_for(obj["kind"])
        meta = obj["metadata"]
        with self.store.lock:
            live = self.store.get(resource.plural, meta.get("namespace", ""), meta["name"])
            if live is None:
                return self.store.create(resource, obj, manager)
            new = copy.deepcopy(obj)
            new["metadata"]["uid"] = live["metadata"]["uid"]
            return self.store.replace(resource, new, manager)

    def remove(self, kind: str, namespace: str, name: str) -> None:
        """Take an object out at once (no finalizers, no grace): it is DELETED for watchers."""
        self.store.remove(resource_for(kind), namespace, name)

    def add_node(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        gpus: int = 8,
        gpu_resource: str = "nvidia.com/gpu",
        taints: builtins.list[dict[str, Any]] | None = None,
        cpu: str = "96",
        memory: str = "1Ti",
    ) -> dict[str, Any]:
        capacity = {"cpu": cpu, "memory": memory, "pods": "110", gpu_resource: str(gpus)}
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints} if taints else {},
            "status": {
                "capacity": capacity,
                "allocatable": dict(capacity),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": timestamp(self.clock.now()),
                        "lastTransitionTime": timestamp(self.clock.now()),
                    }
                ],
            },
        }
        return self.put(node, "kubelet")

    def program(
        self,
        namespace: str,
        job_name: str,
        run_seconds: float | None = None,
        exit_code: int = 0,
        sigterm_seconds: float | None = None,
        ignore_sigterm: bool = False,
        lines: Iterable[str] = (),
    ) -> None:
        """How the containers of that Job's pods behave (run time, exit code, SIGTERM handling,
        log lines), without annotating the Job; set it before the pods start."""
        self.kubelet.programs[(namespace, job_name)] = Program(
            run_seconds, exit_code, sigterm_seconds, ignore_sigterm, tuple(lines)
        )

    def now(self) -> datetime:
        """The cluster's time."""
        return self.clock.now()

    def now_text(self) -> str:
        """The cluster's time as a `metav1.Time` string."""
        return timestamp(self.clock.now())

    # === time and waiting ==============================================================================

    def advance(self, seconds: float, timeout: float = 30.0) -> None:
        """Move the cluster's clock forward, stopping at each timer due on the way so that what it
        sets off happens at its own time (a pod that starts at t+2 and runs 60 s ends at t+62),
        and let the controllers settle after each step."""
        target = self.clock.now() + timedelta(seconds=seconds)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.settle(timeout)
            with self._wake:
                due = self._timers[0][0] if self._timers else None
            if due is None or due > target:
                break
            self.clock.advance(max(0.0, (due - self.clock.now()).total_seconds()))
        self.clock.advance(max(0.0, (target - self.clock.now()).total_seconds()))
        self.settle(timeout)

    def wait_for(
        self, predicate: Callable[[], T], what: str = "", timeout: float = 10.0, interval: float = 0.01
    ) -> T:
        """Poll `predicate` until it returns something truthy (returned); AssertionError after
        `timeout` real seconds, naming `what`."""
        deadline = time.monotonic() + timeout
        while True:
            if self.errors:
                raise AssertionError(
                    f"the fake cluster's controllers failed: {self.errors[0]!r}"
                ) from self.errors[0]
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what or predicate}")
            time.sleep(interval)

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until the controllers have handled every write and no timer is due now."""

        def idle() -> bool:
            with self._wake:
                due = bool(self._timers) and self._timers[0][0] <= self.clock.now()
                return not self._queue and not self._busy and not due

        self.wait_for(idle, "the controllers to settle", timeout)

    # === the Runtime the controllers and the kubelet use ===============================================

    def owned(self, owner_uid: str, kind: str) -> builtins.list[dict[str, Any]]:
        plural = resource_for(kind).plural
        out = []
        for key in self.store.dependents(owner_uid):
            if key[0] == plural:
                obj = self.store.get(*key)
                if obj is not None:
                    out.append(obj)
        return sorted(out, key=lambda o: o["metadata"]["creationTimestamp"] + o["metadata"]["name"])

    def write(self, kind: str, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        resource = resource_for(kind)
        with self.store.lock:
            stored = self.store.replace(resource, obj, manager)
            meta = stored["metadata"]
            if meta.get("deletionTimestamp") and not meta.get("finalizers") and kind != "Pod":
                self.store.remove(resource, meta.get("namespace", ""), meta["name"])
            return stored

    def _internal_create(self, kind: str, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        resource = resource_for(kind)
        with self.store.lock:
            meta = obj["metadata"]
            if not meta.get("name"):
                meta["name"] = meta["generateName"] + "".join(
                    self._names.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5)
                )
            obj = self._admission("CREATE", resource, obj, None, False)
            return self.store.create(resource, obj, manager)

    def after(self, seconds: float, action: Callable[[], None]) -> None:
        due = self.clock.now() + timedelta(seconds=seconds)
        with self._wake:
            heapq.heappush(self._timers, (due, next(self._seq), action))
            self._wake.notify_all()

    # === admission, deletion and garbage collection =====================================================

    def _admission(
        self,
        operation: str,
        resource: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
        status: bool,
    ) -> dict[str, Any]:
        if operation == "CREATE" and resource.kind == "Job" and not obj["metadata"].get("uid"):
            obj["metadata"]["uid"] = self.store.next_uid()
        return admit_object(
            operation,
            resource,
            obj,
            old,
            status,
            names=self._names,
            kueue=self.kueue_enabled and self.emulate,
            local_queue_exists=lambda ns, name: (
                self.local_queue_defaulting and self.store.get("localqueues", ns, name) is not None
            ),
            validate=self.validate,
        )

    def delete(
        self,
        resource: ResourceType | str,
        namespace: str,
        name: str,
        propagation: str | None = None,
        grace: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE as the API server does it: graceful for pods, finalizers respected, and the
        garbage collector's propagation (`Orphan` is batch/v1 Job's default, README §7)."""
        if isinstance(resource, str):
            resource = resource_for(resource)
        with self.store.lock:
            obj = self.store.get(resource.plural, namespace, name)
            if obj is None:
                raise statuses.not_found(resource, name)
            uid = obj["metadata"]["uid"]
            if dry_run:
                return statuses.success(resource, name, uid)
            if resource.kind == "Namespace":
                for plural, ns, other in list(self.store.all_keys()):
                    if ns == name:
                        self.store.remove(resource_for(plural), ns, other)
                self.store.remove(resource, namespace, name)
                return statuses.success(resource, name, uid)
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(obj)
            new = copy.deepcopy(obj)
            now = self.clock.now()
            if resource.kind == "Pod":
                phase = (obj.get("status") or {}).get("phase", "Pending")
                seconds = (
                    grace if grace is not None else int(obj["spec"].get("terminationGracePeriodSeconds", 30))
                )
                if seconds == 0 or phase in ("Succeeded", "Failed") or not obj["spec"].get("nodeName"):
                    seconds = 0
                if seconds == 0 and not meta.get("finalizers"):
                    self.store.remove(resource, namespace, name)
                    return copy.deepcopy(obj)
                new["metadata"]["deletionTimestamp"] = timestamp(now + timedelta(seconds=seconds))
                new["metadata"]["deletionGracePeriodSeconds"] = seconds
                return self.store.replace(resource, new, "kube-apiserver")
            policy = propagation or ("Orphan" if resource.kind == "Job" else "Background")
            if policy in ("Orphan", "Foreground") and self.store.dependents(uid):
                new["metadata"].setdefault("finalizers", []).append(
                    "orphan" if policy == "Orphan" else "foregroundDeletion"
                )
            if not new["metadata"].get("finalizers"):
                self.store.remove(resource, namespace, name)
                return statuses.success(resource, name, uid)
            new["metadata"]["deletionTimestamp"] = timestamp(now)
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self.store.replace(resource, new, "kube-apiserver")

    def _collect(self, obj: dict[str, Any], gone: bool) -> None:
        """The garbage collector: dependents of a removed owner are deleted (background); an owner
        deleting with `orphan` lets its dependents go, with `foregroundDeletion` waits for them."""
        uid = obj["metadata"]["uid"]
        found = [self.store.get(*key) for key in self.store.dependents(uid)]
        dependents = [d for d in found if d is not None]
        finalizers = obj["metadata"].get("finalizers") or []
        if gone:
            for dep in dependents:
                if dep["kind"] == "Pod" and "batch.kubernetes.io/job-tracking" in (
                    dep["metadata"].get("finalizers") or []
                ):
                    # the Job controller lets go of the pods of a Job that is gone
                    dep = copy.deepcopy(dep)
                    dep["metadata"]["finalizers"] = [
                        f for f in dep["metadata"]["finalizers"] if f != "batch.kubernetes.io/job-tracking"
                    ]
                    if not dep["metadata"]["finalizers"]:
                        del dep["metadata"]["finalizers"]
                    dep = self.write("Pod", dep, "kube-controller-manager")
                if not dep["metadata"].get("deletionTimestamp"):
                    self.delete(
                        resource_for(dep["kind"]),
                        dep["metadata"].get("namespace", ""),
                        dep["metadata"]["name"],
                        "Background",
                    )
            return
        if "orphan" in finalizers:
            for dep in dependents:
                new = copy.deepcopy(dep)
                new["metadata"]["ownerReferences"] = [
                    r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") != uid
                ]
                if not new["metadata"]["ownerReferences"]:
                    del new["metadata"]["ownerReferences"]
                if dep["kind"] == "Pod" and "batch.kubernetes.io/job-tracking" in (
                    dep["metadata"].get("finalizers") or []
                ):
                    new["metadata"]["finalizers"] = [
                        f for f in dep["metadata"]["finalizers"] if f != "batch.kubernetes.io/job-tracking"
                    ]
                    if not new["metadata"]["finalizers"]:
                        del new["metadata"]["finalizers"]
                self.write(dep["kind"], new, "generic-garbage-collector")
            self._drop_gc_finalizer(obj, "orphan")
        elif "foregroundDeletion" in finalizers:
            if dependents:
                for dep in dependents:
                    if not dep["metadata"].get("deletionTimestamp"):
                        self.delete(
                            resource_for(dep["kind"]),
                            dep["metadata"].get("namespace", ""),
                            dep["metadata"]["name"],
                            "Background",
                        )
            else:
                self._drop_gc_finalizer(obj, "foregroundDeletion")

    def _drop_gc_finalizer(self, obj: dict[str, Any], finalizer: str) -> None:
        current = self.store.get(
            resource_for(obj["kind"]).plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        )
        if current is None:
            return
        new = copy.deepcopy(current)
        new["metadata"]["finalizers"] = [
            f for f in current["metadata"].get("finalizers") or [] if f != finalizer
        ]
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
        self.write(obj["kind"], new, "generic-garbage-collector")

    # === visibility ====================================================================================

    def pending_workloads(
        self,
        cluster_queue: str | None,
        namespace: str | None,
        local_queue: str | None,
        limit: int,
        offset: int,
    ) -> dict[str, Any]:
        """`PendingWorkloadsSummary` (tests/data/kueue/shapes/visibility-pendingworkloads.json)."""
        if cluster_queue is not None and self.store.get("clusterqueues", "", cluster_queue) is None:
            raise statuses.not_found(resource_for("ClusterQueue"), cluster_queue)
        if local_queue is not None and self.store.get("localqueues", namespace or "", local_queue) is None:
            raise statuses.not_found(resource_for("LocalQueue"), local_queue)
        with self.store.lock:
            items = self.controllers.pending_workloads(cluster_queue, namespace, local_queue)
        return {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
            "metadata": {},
            "items": items[offset : offset + limit],
        }

    # === the controller loop ===========================================================================

    def _on_write(self, event: StoreEvent) -> None:
        if self.journal is not None:
            self.journal.append((event.type, event.resource.kind, event.obj))
        with self._wake:
            self._queue.append(event)
            self._wake.notify_all()

    def _poke(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._wake:
                events, self._queue = self._queue, []
                due: builtins.list[Callable[[], None]] = []
                now = self.clock.now()
                while self._timers and self._timers[0][0] <= now:
                    due.append(heapq.heappop(self._timers)[2])
                if not events and not due:
                    wait = 0.5
                    if self._timers:
                        real = self.clock.real_seconds_until(self._timers[0][0])
                        wait = min(wait, real) if real is not None else wait
                    self._wake.wait(max(wait, 0.001))
                    continue
                self._busy = True
            try:
                if self.emulate:
                    self._handle(events)
                    for action in due:
                        action()
            except Exception as exc:  # a bug in the fake: keep it for wait_for to report
                self.errors.append(exc)
            finally:
                with self._wake:
                    self._busy = False

    def _handle(self, events: builtins.list[StoreEvent]) -> None:
        jobs: dict[tuple[str, str], None] = {}
        workloads: dict[tuple[str, str], None] = {}
        pods: dict[tuple[str, str], None] = {}
        schedule = False
        retry_pending_pods = False
        for event in events:
            kind, meta = event.resource.kind, event.obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if event.type == "DELETED":
                self._collect(event.obj, gone=True)
            elif meta.get("deletionTimestamp") and any(
                f in (meta.get("finalizers") or []) for f in _GC_FINALIZERS
            ):
                self._collect(event.obj, gone=False)
            owner = next((r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Job"), None)
            if owner is not None:
                jobs[(key[0], owner["name"])] = None
            if kind == "Job":
                jobs[key] = None
            elif kind == "Pod":
                if event.type != "DELETED":
                    pods[key] = None
                else:
                    retry_pending_pods = True
            elif kind == "Workload":
                workloads[key] = None
                schedule = True
            elif kind in _KUEUE_CONFIG:
                schedule = True
                for job in self.store.list("jobs"):
                    if (job["metadata"].get("labels") or {}).get(QUEUE_LABEL):
                        jobs[(job["metadata"]["namespace"], job["metadata"]["name"])] = None
            elif kind == "Node":
                retry_pending_pods = True
        if retry_pending_pods and self.store.list("nodes"):
            for pod in self.store.list("pods"):
                if not pod["spec"].get("nodeName"):
                    pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = None
        for namespace, name in pods:
            stored = self.store.get("pods", namespace, name)
            if stored is not None:
                self.kubelet.reconcile(stored)
        for namespace, name in jobs:
            self.controllers.reconcile_job(namespace, name)
        if self.kueue_enabled:
            for namespace, name in workloads:
                self.controllers.reconcile_workload(namespace, name)
            if schedule:
                self.controllers.schedule()


class _Runtime:
    """The controllers' and the kubelet's view of the cluster: stored objects by reference (never
    changed in place), writes without admission, timers on the cluster's clock."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.store = cluster.store

    def now(self) -> datetime:
        return self.cluster.clock.now()

    def now_text(self) -> str:
        return timestamp(self.cluster.clock.now())

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get(resource_for(kind).plural, namespace, name)

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[dict[str, Any]]:
        return self.store.list(resource_for(kind).plural, namespace)

    def owned(self, owner_uid: str, kind: str) -> builtins.list[dict[str, Any]]:
        return self.cluster.owned(owner_uid, kind)

    def write(self, kind: str, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        return self.cluster.write(kind, obj, manager)

    def create(self, kind: str, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        return self.cluster._internal_create(kind, obj, manager)

    def delete(self, kind: str, namespace: str, name: str, propagation: str | None = None) -> None:
        with contextlib.suppress(statuses.ApiError):  # already gone
            self.cluster.delete(resource_for(kind), namespace, name, propagation)

    def remove(self, kind: str, namespace: str, name: str) -> None:
        self.store.remove(resource_for(kind), namespace, name)

    def after(self, seconds: float, action: Callable[[], None]) -> None:
        self.cluster.after(seconds, action)
