"""The Kubernetes backend: tasks as Jobs that Kueue admits, watched back into GPU Commons.

`KubernetesBackend` is the `ports.ClusterBackend` of a cluster governed by Kueue:

- `submit` creates the task's Job (`jobs.task_job`: suspended, in the team's LocalQueue); Kueue
  admits it, or not, by its own quota arithmetic;
- `run` list-watches Workloads, Jobs and Pods across the team namespaces (`informer`), and after
  each change reports the task's state (`task_state.view_task`) together with the ledger holds
  that change opened or closed (`observe`); Jobs nobody submitted through GPU Commons (kubectl)
  are reported too, with `task_id` None, so they are shown and billed to their namespace's team;
- `delete` (cancel) deletes the Job in the background: Kubernetes gives its pods the class's grace
  period (SIGTERM, then SIGKILL) and Kueue releases the quota;
- `request_checkpoint` annotates the task's pods (`gpucommons.io/checkpoint-requested`), which
  the container reads from its downward-API annotations file;
- `positions` asks Kueue's visibility API where each pending task is in its team's queue;
- `run` also answers the `gpucommons.io/governance` AdmissionCheck (`admission_check`): budgets
  and class rules hold every Workload in the team namespaces, kubectl's too. `use_spend` gives it
  each team's spend this month; the Jobs the server creates carry a class grant signed with
  `grant_key`, which is how the check knows the server already checked the submitter's roles.

Nothing is reported before all three kinds have been listed once, so a Workload is never judged
without its Job (which would look deleted).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from gpucommons.backends.kubernetes.admission_check import GovernanceController
from gpucommons.backends.kubernetes.connection import ApiStatus, KubeApi, KubeError, Unreachable
from gpucommons.backends.kubernetes.informer import Informer
from gpucommons.backends.kubernetes.jobs import (
    CHECKPOINT_REQUEST_ANNOTATION,
    JobError,
    JobOptions,
    JobTask,
    job_name,
    task_job,
)
from gpucommons.backends.kubernetes.kinds import KINDS
from gpucommons.backends.kubernetes.names import LOCAL_QUEUE
from gpucommons.backends.kubernetes.observe import ClusterNames, LedgerState, observe
from gpucommons.backends.kubernetes.task_state import TaskView, view_task
from gpucommons.backends.ports import (
    Admitter,
    BackendTraits,
    BackendUnavailable,
    ClusterTask,
    HoldReport,
    LaunchError,
    QueuePosition,
    StopStyle,
    TaskReport,
)
from gpucommons.domain.model import Policy
from gpucommons.domain.task import TaskState
from gpucommons.ledger import UsageInterval

log = logging.getLogger(__name__)

Manifest = dict[str, Any]
JobKey = tuple[str, str]
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"
#: Pods of Jobs carry this label (set by the Job controller); only those concern us.
POD_SELECTOR = "batch.kubernetes.io/job-name"


def _ts(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def _owner_job(obj: Manifest) -> str | None:
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("kind") == "Job":
            name = owner.get("name")
            return str(name) if name else None
    return None


class KubernetesBackend:
    """`ports.ClusterBackend` on a Kueue cluster, through one `KubeApi` connection."""

    traits = BackendTraits(
        name="kubernetes", admits=Admitter.CLUSTER, stops=StopStyle.DELETE, attempts_outlive_server=True
    )

    def __init__(
        self,
        api: KubeApi,
        policy: Policy,
        *,
        options: JobOptions | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        resync_s: float = 600.0,
        positions_every_s: float = 5.0,
        grant_key: bytes | None = None,
        governance: bool = True,
    ) -> None:
        self.api = api
        self.options = options or JobOptions()
        if grant_key is not None:
            self.options = dataclasses.replace(self.options, grant_key=grant_key)
        self._spend: Callable[[], Mapping[str, int]] = dict
        self.clock = clock
        self.positions_every_s = positions_every_s
        self._lock = threading.RLock()
        self._policy = policy
        self._names = ClusterNames.from_policy(policy, self.options.render)
        self._jobs: dict[JobKey, Manifest] = {}
        self._workloads: dict[JobKey, Manifest] = {}
        self._pods: dict[JobKey, dict[str, Manifest]] = {}
        self._job_refs_by_uid: dict[str, str] = {}
        #: Jobs whose end we reported: their deletion afterwards is clean-up, not a cancellation.
        self._ended: set[JobKey] = set()
        #: Jobs seen deleted (or gone at the first look): a Workload without its Job is a cancel only then.
        self._deleted: set[JobKey] = set()
        self._ledger = LedgerState()
        self._positions: dict[str, QueuePosition] = {}
        self._report: Callable[[TaskReport], None] | None = None
        self.informers = [
            Informer(api, KINDS["Job"], self._on_job, resync_s=resync_s),
            Informer(api, KINDS["Workload"], self._on_workload, resync_s=resync_s),
            Informer(api, KINDS["Pod"], self._on_pod, label_selector=POD_SELECTOR, resync_s=resync_s),
        ]
        self._synced = False
        self.governance = (
            GovernanceController(
                api,
                lambda: self._policy,
                lambda: self._spend(),
                clock,
                self.options.render,
                grant_key=self.options.grant_key,
            )
            if governance
            else None
        )

    # --- the policy ---------------------------------------------------------------------------------

    def use_policy(self, policy: Policy) -> None:
        with self._lock:
            self._policy = policy
            self._names = ClusterNames.from_policy(policy, self.options.render)

    def use_spend(self, spend: Callable[[], Mapping[str, int]]) -> None:
        """Each team's spend this month in cents (by policy team name), for the budget check."""
        self._spend = spend

    def apply_policy(self, policy: Policy) -> None:
        """Server-side apply of what `commons k8s render` makes of `policy` (every object dry-run
        first; nothing is written if one would be refused). Raises `BackendUnavailable` saying why."""
        from gpucommons.backends.kubernetes.apply import ApplyOptions, apply_manifests
        from gpucommons.backends.kubernetes.files import checked_render

        try:
            apply_manifests(self.api, checked_render(policy, self.options.render), ApplyOptions(force=True))
        except KubeError as exc:
            raise BackendUnavailable(f"the cluster did not take the policy: {exc}") from None

    # --- commands -----------------------------------------------------------------------------------

    def submit(self, task: ClusterTask) -> str:
        with self._lock:
            policy = self._policy
        try:
            job = task_job(
                policy,
                JobTask(
                    task.task_id,
                    task.team,
                    task.command,
                    task.image,
                    task.gpus,
                    task.priority_class,
                    task.pool,
                    checkpoint=task.checkpoint,
                    restart_count=task.restart_count,
                    cpu_milli=task.cpu_milli,
                    memory_mib=task.memory_mib,
                    env=dict(task.env or {}),
                ),
                self.options,
            )
        except JobError as exc:
            raise LaunchError(f"cannot run it as a Kubernetes Job: {exc}") from None
        namespace = job["metadata"]["namespace"]
        ref = f"{namespace}/{job['metadata']['name']}"
        try:
            self.api.request("POST", KINDS["Job"].collection_path(namespace), body=job)
        except ApiStatus as status:
            if status.code == 409 and status.reason == "AlreadyExists":
                return ref  # created before a restart, or by a retry whose answer was lost
            if status.code >= 500 or status.code == 429:
                raise BackendUnavailable(f"the API server answered {status.code}: {status.message}") from None
            raise LaunchError(f"the API server refused the Job {ref}: {status.message}") from None
        except Unreachable as exc:
            raise BackendUnavailable(str(exc)) from None
        return ref

    def delete(self, ref: str) -> None:
        namespace, _, name = ref.partition("/")
        try:
            self.api.request(
                "DELETE",
                KINDS["Job"].object_path(name, namespace),
                [("propagationPolicy", "Background")],
            )
        except ApiStatus as status:
            if status.code == 404:
                return
            if status.code >= 500 or status.code == 429:
                raise BackendUnavailable(f"deleting {ref}: {status.message}") from None
            raise LaunchError(f"the API server refused to delete the Job {ref}: {status.message}") from None
        except Unreachable as exc:
            raise BackendUnavailable(str(exc)) from None

    def request_checkpoint(self, ref: str, at: float) -> None:
        namespace, _, name = ref.partition("/")
        with self._lock:
            pods = list(self._pods.get((namespace, name), {}))
        stamp = datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"metadata": {"annotations": {CHECKPOINT_REQUEST_ANNOTATION: stamp}}}
        for pod in pods:
            with contextlib.suppress(KubeError):
                self.api.request(
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/pods/{pod}",
                    body=patch,
                    content_type="application/merge-patch+json",
                )

    def read_log(self, ref: str) -> bytes | None:
        namespace, _, name = ref.partition("/")
        with self._lock:
            pods = sorted(
                self._pods.get((namespace, name), {}).values(),
                key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
            )
        chunks = []
        for pod in pods:
            pod_name = pod["metadata"]["name"]
            try:
                response = self.api.stream(f"/api/v1/namespaces/{namespace}/pods/{pod_name}/log", [])
            except KubeError:
                continue  # not started yet (400 while ContainerCreating), or gone
            try:
                text = b"".join(response)
            finally:
                response.release_conn()
            if len(pods) > 1:
                chunks.append(f"--- pod {pod_name}\n".encode())
            chunks.append(text if text.endswith(b"\n") or not text else text + b"\n")
        return b"".join(chunks) if chunks else None

    def positions(self) -> Mapping[str, QueuePosition]:
        with self._lock:
            return dict(self._positions)

    # --- watching -----------------------------------------------------------------------------------

    def run(
        self,
        report: Callable[[TaskReport], None],
        stop: threading.Event,
        synced: Callable[[frozenset[str]], None] | None = None,
    ) -> None:
        self._report = report
        threads = [
            threading.Thread(target=i.run, args=(stop,), name=f"commons-k8s-{i.kind.plural}", daemon=True)
            for i in self.informers
        ]
        if self.governance is not None:
            threads.append(
                threading.Thread(
                    target=self.governance.run, args=(stop,), name="commons-k8s-governance", daemon=True
                )
            )
        for thread in threads:
            thread.start()
        for informer in self.informers:
            while not informer.stats.synced.wait(0.2):
                if stop.is_set():
                    return
        with self._lock:
            self._synced = True
            keys = set(self._jobs) | set(self._workloads)
            # Workloads whose Job the first look did not find: deleted while nobody watched.
            self._deleted |= set(self._workloads) - set(self._jobs)
        for key in sorted(keys):
            self._publish(key)
        if synced is not None:
            synced(frozenset(f"{ns}/{name}" for ns, name in keys))
        while not stop.wait(self.positions_every_s):
            self.refresh_positions()
        for thread in threads:
            thread.join(timeout=5)

    def refresh_positions(self) -> None:
        """Ask Kueue's visibility API where the pending tasks are (quietly empty when it cannot)."""
        with self._lock:
            namespaces = sorted(self._names.teams_by_namespace)
        found: dict[str, QueuePosition] = {}
        for namespace in namespaces:
            path = f"{VISIBILITY}/namespaces/{namespace}/localqueues/{LOCAL_QUEUE}/pendingworkloads"
            try:
                body = self.api.request("GET", path).body
            except KubeError:
                continue
            for item in body.get("items") or []:
                job = _owner_job(item)
                if job is None:
                    continue
                found[f"{namespace}/{job}"] = QueuePosition(
                    int(item.get("positionInClusterQueue", 0)) + 1,
                    int(item.get("positionInLocalQueue", 0)) + 1,
                )
        with self._lock:
            self._positions = found

    def _on_job(self, event: str, obj: Manifest) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta.get("name", ""))
        with self._lock:
            if key[0] not in self._names.teams_by_namespace:
                return
            if event == "DELETED":
                log.info("Job %s/%s deleted", *key)
                self._jobs.pop(key, None)
                self._deleted.add(key)
            else:
                self._jobs[key] = obj
                self._deleted.discard(key)
                if meta.get("uid"):
                    self._job_refs_by_uid[meta["uid"]] = f"{key[0]}/{key[1]}"
        self._publish(key)

    def _on_pod(self, event: str, obj: Manifest) -> None:
        meta = obj["metadata"]
        job = (meta.get("labels") or {}).get(POD_SELECTOR)
        if not job:
            return
        key = (meta.get("namespace", ""), job)
        with self._lock:
            if key[0] not in self._names.teams_by_namespace:
                return
            pods = self._pods.setdefault(key, {})
            if event == "DELETED":
                pods.pop(meta["name"], None)
                if not pods:
                    del self._pods[key]
            else:
                pods[meta["name"]] = obj
        self._publish(key)

    def _on_workload(self, event: str, obj: Manifest) -> None:
        meta = obj["metadata"]
        job = _owner_job(obj)
        namespace = meta.get("namespace", "")
        with self._lock:
            names = self._names
            if namespace not in names.teams_by_namespace or job is None:
                return
            key = (namespace, job)
            closed = observe(self._ledger, event, obj, self.clock(), names)
            if event == "DELETED":
                self._workloads.pop(key, None)
            else:
                self._workloads[key] = obj
            hold = self._ledger.holds.get(meta.get("uid", ""))
            holds = [_hold_report(i) for i in closed]
            if hold is not None:
                holds.append(HoldReport(hold.start.timestamp(), None, hold.pool, hold.gpus, hold.priority))
        self._publish(key, tuple(holds))

    def _publish(self, key: JobKey, holds: tuple[HoldReport, ...] = ()) -> None:
        with self._lock:
            if not self._synced or self._report is None:
                return
            log.debug("publish %s/%s (Job known: %s)", key[0], key[1], key in self._jobs)
            view = view_task(
                key[0],
                key[1],
                self._jobs.get(key),
                self._workloads.get(key),
                self._pods.get(key, {}).values(),
                self._names,
                finished_before=key in self._ended,
                job_deleted=key in self._deleted,
            )
            if view is None:
                return
            if view.state.is_terminal:
                self._ended.add(key)
                if key not in self._jobs:
                    self._forget(key)
            preemptor = self._job_refs_by_uid.get(view.preempted_by_job_uid or "")
            # Delivered under the lock: the three watches' threads must not overtake each other
            # with older views of the same task.
            self._report(_report(view, preemptor, holds))

    def _forget(self, key: JobKey) -> None:
        """The Job is gone for good: drop what is left of it (not its ended mark: a late Workload
        event must not revive it as cancelled)."""
        self._workloads.pop(key, None)
        self._pods.pop(key, None)


def _hold_report(interval: UsageInterval) -> HoldReport:
    return HoldReport(
        interval.start.timestamp(),
        interval.end.timestamp(),
        interval.pool,
        interval.gpus,
        interval.priority,
        interval.end_reason.value,
    )


def _report(view: TaskView, preemptor: str | None, holds: tuple[HoldReport, ...]) -> TaskReport:
    return TaskReport(
        ref=view.ref,
        team=view.team,
        task_id=view.task_id,
        state=view.state,
        at=_ts(view.since),
        pool=view.pool,
        gpus=view.gpus,
        priority=view.priority,
        message=view.message,
        exit_code=view.exit_code,
        attempt=view.attempt,
        started_at=_ts(view.started_at),
        preempted_by=preemptor,
        preempt_reason=view.preempt_reason,
        uid=view.uid,
        holds=holds,
    )


def job_ref(task_id: str, namespace: str) -> str:
    """`team-nlp/commons-t3f9a2b1c0d`: the ref of one of our tasks."""
    return f"{namespace}/{job_name(task_id)}"


__all__ = ["KubernetesBackend", "TaskState", "job_ref"]
