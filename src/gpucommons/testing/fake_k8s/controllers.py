"""The controllers of the fake cluster: Kubernetes' Job controller and Kueue's Job reconciler,
Workload controller and scheduler, level-triggered on the store's objects.

Each reconcile looks at the current objects and makes the next write of the recorded sequences
(tests/data/kueue/shapes/sequences.json; README §4–§7), so a multi-write step of Kueue (stop a Job:
suspend, clear startTime, restore the template) is several writes, seen by watchers in that order.
"""

from __future__ import annotations

import builtins
import copy
from datetime import timedelta
from typing import Any, Protocol

from gpucommons.testing.fake_k8s import kueue as kq
from gpucommons.testing.fake_k8s.clock import parse_timestamp, timestamp
from gpucommons.testing.fake_k8s.kueue import (
    FINALIZER,
    JOB_UID_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    STOPPING_ANNOTATION,
    WORKLOAD_ANNOTATION,
    condition,
    is_true,
    remove_condition,
    set_condition,
)

JOB_TRACKING = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
KUEUE_MANAGER = "kueue-admission"
JOB_MANAGER = "kueue-job-controller"
K8S_JOB_MANAGER = "kube-controller-manager"


class Runtime(Protocol):
    def now(self) -> Any: ...
    def now_text(self) -> str: ...
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...
    def list(self, kind: str, namespace: str | None = None) -> builtins.list[dict[str, Any]]: ...
    def owned(self, owner_uid: str, kind: str) -> builtins.list[dict[str, Any]]: ...
    def write(self, kind: str, obj: dict[str, Any], manager: str) -> dict[str, Any]: ...
    def create(self, kind: str, obj: dict[str, Any], manager: str) -> dict[str, Any]: ...
    def delete(self, kind: str, namespace: str, name: str, propagation: str | None = None) -> None: ...
    def after(self, seconds: float, action: Any) -> None: ...


def _finished_job(job: dict[str, Any]) -> dict[str, Any] | None:
    for kind in ("Complete", "Failed"):
        cond = condition(job, kind)
        if cond is not None and cond.get("status") == "True":
            return cond
    return None


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", "Pending"))


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


class Controllers:
    def __init__(self, runtime: Runtime, excluded_prefixes: tuple[str, ...] = ()) -> None:
        self.rt = runtime
        self.excluded_prefixes = excluded_prefixes
        #: Job uid → its pod template before Kueue started it (restored when Kueue stops it).
        self.original_templates: dict[str, dict[str, Any]] = {}

    # === Kubernetes' Job controller ======================================================================

    def reconcile_job(self, namespace: str, name: str) -> None:
        job = self.rt.get("Job", namespace, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        pods = self.rt.owned(job["metadata"]["uid"], "Pod")
        if self._job_controller(job, pods):
            return
        if (job["metadata"].get("labels") or {}).get(QUEUE_LABEL):
            job = self.rt.get("Job", namespace, name) or job
            self._kueue_job(job, self.rt.owned(job["metadata"]["uid"], "Pod"))

    def _job_controller(self, job: dict[str, Any], pods: builtins.list[dict[str, Any]]) -> bool:
        """One step of `pkg/controller/job`; True when it wrote something."""
        spec = job["spec"]
        status = copy.deepcopy(job.get("status") or {})
        now = self.rt.now_text()
        finished = _finished_job(job)
        # count terminal pods once (the job-tracking finalizer marks the uncounted ones)
        counted = False
        for pod in pods:
            finalizers = pod["metadata"].get("finalizers") or []
            if _phase(pod) in ("Succeeded", "Failed") and JOB_TRACKING in finalizers:
                field = "succeeded" if _phase(pod) == "Succeeded" else "failed"
                status[field] = int(status.get(field, 0)) + 1
                counted = True
        live = [p for p in pods if _phase(p) not in ("Succeeded", "Failed")]
        active = [p for p in live if not p["metadata"].get("deletionTimestamp")]
        terminating = [p for p in live if p["metadata"].get("deletionTimestamp")]
        new = copy.deepcopy(job)
        new["status"] = status
        stop_pods: builtins.list[dict[str, Any]] = []
        if finished is None and spec.get("suspend"):
            stop_pods = active
            if not is_true(job, "Suspended"):
                set_condition(
                    new,
                    "Suspended",
                    "True",
                    "JobSuspended",
                    "Job suspended",
                    now,
                    generation=False,
                    probe=True,
                )
        elif finished is None:
            if is_true(job, "Suspended"):
                set_condition(
                    new, "Suspended", "False", "JobResumed", "Job resumed", now, generation=False, probe=True
                )
            status.setdefault("startTime", now)
            deadline = spec.get("activeDeadlineSeconds")
            completions = int(spec.get("completions", spec.get("parallelism", 1)))
            if (
                deadline is not None
                and parse_timestamp(status["startTime"]) + timedelta(seconds=int(deadline)) <= self.rt.now()
            ):
                set_condition(
                    new,
                    "FailureTarget",
                    "True",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                    now,
                    generation=False,
                    probe=True,
                )
                set_condition(
                    new,
                    "Failed",
                    "True",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                    now,
                    generation=False,
                    probe=True,
                )
                stop_pods = active
            elif int(status.get("succeeded", 0)) >= completions:
                if not is_true(job, "SuccessCriteriaMet"):
                    set_condition(
                        new,
                        "SuccessCriteriaMet",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                        now,
                        generation=False,
                        probe=True,
                    )
                else:
                    set_condition(
                        new,
                        "Complete",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                        now,
                        generation=False,
                        probe=True,
                    )
                    status["completionTime"] = now
            elif int(status.get("failed", 0)) > int(spec.get("backoffLimit", 6)):
                if not is_true(job, "FailureTarget"):
                    set_condition(
                        new,
                        "FailureTarget",
                        "True",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                        now,
                        generation=False,
                        probe=True,
                    )
                    stop_pods = active
                elif not terminating and not active:
                    set_condition(
                        new,
                        "Failed",
                        "True",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                        now,
                        generation=False,
                        probe=True,
                    )
            else:
                replacing = spec.get("podReplacementPolicy", "TerminatingOrFailed") == "Failed"
                busy = len(active) + (len(terminating) if replacing else 0)
                wanted = (
                    min(int(spec.get("parallelism", 1)), completions - int(status.get("succeeded", 0))) - busy
                )
                if wanted > 0 and not counted:
                    self._create_pods(job, pods, wanted)
        deadline_timer = spec.get("activeDeadlineSeconds")
        started_now = "startTime" in status and "startTime" not in (job.get("status") or {})
        if deadline_timer and finished is None and not spec.get("suspend") and started_now:
            self.rt.after(
                float(deadline_timer),
                lambda: self.reconcile_job(job["metadata"]["namespace"], job["metadata"]["name"]),
            )
        status["active"] = len(active) - len(stop_pods)
        status["ready"] = sum(1 for p in active if _ready(p) and p not in stop_pods)
        status["terminating"] = len(terminating) + len(stop_pods)
        for field in ("active", "succeeded", "failed"):
            if not status.get(field):
                status.pop(field, None)  # omitempty (README §8)
        status.setdefault("uncountedTerminatedPods", {})
        wrote = False
        if new != job:
            self.rt.write("Job", new, K8S_JOB_MANAGER)
            wrote = True
        for pod in pods:  # counted: drop the tracking finalizer
            if _phase(pod) in ("Succeeded", "Failed") and JOB_TRACKING in (
                pod["metadata"].get("finalizers") or []
            ):
                self._drop_tracking(pod)
        for pod in stop_pods:  # the suspend path: finalizer first, then delete (README §8)
            self._drop_tracking(pod)
            self.rt.delete("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
        return wrote or bool(stop_pods)

    def _drop_tracking(self, pod: dict[str, Any]) -> None:
        current = self.rt.get("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
        if current is None:
            return
        new = copy.deepcopy(current)
        new["metadata"]["finalizers"] = [
            f for f in new["metadata"].get("finalizers") or [] if f != JOB_TRACKING
        ]
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
        self.rt.write("Pod", new, K8S_JOB_MANAGER)

    def _create_pods(self, job: dict[str, Any], pods: builtins.list[dict[str, Any]], count: int) -> None:
        meta, template = job["metadata"], job["spec"]["template"]
        indexed = job["spec"].get("completionMode") == "Indexed"
        used = {
            (p["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
            for p in pods
            if _phase(p) != "Failed" and not p["metadata"].get("deletionTimestamp")
        }
        free = [str(i) for i in range(int(job["spec"].get("completions", 1))) if str(i) not in used]
        for n in range(count):
            pod_meta = copy.deepcopy(template.get("metadata") or {})
            pod_meta.update(
                {
                    "generateName": f"{meta['name']}-",
                    "namespace": meta["namespace"],
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": meta["name"],
                            "uid": meta["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                    "finalizers": [JOB_TRACKING],
                }
            )
            if indexed and n < len(free):
                pod_meta.setdefault("annotations", {})[COMPLETION_INDEX] = free[n]
                pod_meta.setdefault("labels", {})[COMPLETION_INDEX] = free[n]
            self.rt.create(
                "Pod",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": pod_meta,
                    "spec": copy.deepcopy(template.get("spec") or {}),
                },
                K8S_JOB_MANAGER,
            )

    # === Kueue's Job reconciler (jobframework/reconciler.go) ===========================================

    def _workload_of(self, job: dict[str, Any]) -> dict[str, Any] | None:
        owned = self.rt.owned(job["metadata"]["uid"], "Workload")
        alive = [w for w in owned if not w["metadata"].get("deletionTimestamp")]
        chosen = alive or owned
        return chosen[0] if chosen else None

    def _kueue_job(self, job: dict[str, Any], pods: builtins.list[dict[str, Any]]) -> None:
        workload = self._workload_of(job)
        now = self.rt.now_text()
        active = [
            p
            for p in pods
            if _phase(p) not in ("Succeeded", "Failed") and not p["metadata"].get("deletionTimestamp")
        ]
        finished = _finished_job(job)
        if finished is not None:
            if workload is None:
                return
            if finished["type"] == "Failed" and is_true(workload, "PodsReady"):
                new = copy.deepcopy(workload)  # 09: the failed pod first, then Finished
                set_condition(
                    new,
                    "PodsReady",
                    "False",
                    "WaitForRecovery",
                    "At least one pod has failed, waiting for recovery",
                    now,
                )
                self.rt.write("Workload", new, JOB_MANAGER + "-PodsReady")
            elif not is_true(workload, "Finished"):
                new = copy.deepcopy(workload)
                reason = "Succeeded" if finished["type"] == "Complete" else "Failed"
                set_condition(new, "Finished", "True", reason, finished.get("message", ""), now)
                self.rt.write("Workload", new, JOB_MANAGER)
            elif FINALIZER in (workload["metadata"].get("finalizers") or []):
                self._drop_finalizer(workload)
            return
        if workload is None:
            if active:
                if not job["spec"].get("suspend"):
                    self._stop_job(job)
                return
            priority = self._priority(job)
            if priority is False:
                return  # the WorkloadPriorityClass does not exist (yet): Kueue retries
            chosen = priority if isinstance(priority, tuple) else None
            self.rt.create("Workload", kq.workload_for_job(job, chosen), JOB_MANAGER)
            return
        if workload["metadata"].get("deletionTimestamp"):
            if not job["spec"].get("suspend"):
                self._stop_job(job)
            elif FINALIZER in (workload["metadata"].get("finalizers") or []):
                self._drop_finalizer(workload)
            return
        if condition(workload, "PodsReady") is None:  # 01b: waitForPodsReady is on by default
            new = copy.deepcopy(workload)
            set_condition(
                new, "PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded", now
            )
            self.rt.write("Workload", new, JOB_MANAGER + "-PodsReady")
            return
        reserved = bool((workload.get("status") or {}).get("admission"))
        if is_true(workload, "Evicted") and reserved:
            if not job["spec"].get("suspend"):
                self._stop_job(job)
                return
            if "startTime" in (job.get("status") or {}):
                new = copy.deepcopy(job)
                del new["status"]["startTime"]
                self.rt.write("Job", new, JOB_MANAGER)
                return
            if STOPPING_ANNOTATION in (job["metadata"].get("annotations") or {}):
                self._restore_job(job)
                return
            if is_true(workload, "PodsReady"):  # the pods go while the quota is still held
                new = copy.deepcopy(workload)
                set_condition(
                    new,
                    "PodsReady",
                    "False",
                    "WaitForRecovery",
                    "At least one pod has failed, waiting for recovery",
                    now,
                )
                self.rt.write("Workload", new, JOB_MANAGER + "-PodsReady")
                return
            if not (job.get("status") or {}).get("active"):
                self._release(workload)
            return
        if is_true(workload, "Admitted") and not is_true(workload, "Evicted"):
            if job["spec"].get("suspend"):
                self._start_job(job, workload)
                return
            self._pods_ready(job, workload)

    def _priority(self, job: dict[str, Any]) -> tuple[str, int] | bool | None:
        name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if not name:
            return None
        wpc = self.rt.get("WorkloadPriorityClass", "", name)
        if wpc is None:
            return False
        return (name, int(wpc.get("value", 0)))

    def _drop_finalizer(self, workload: dict[str, Any]) -> None:
        new = copy.deepcopy(workload)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or [] if f != FINALIZER]
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
        self.rt.write("Workload", new, JOB_MANAGER)

    def _stop_job(self, job: dict[str, Any]) -> None:
        """Step 1 of §4 "Evicted + Preempted": suspend, with the transient stopping annotation."""
        new = copy.deepcopy(job)
        new["spec"]["suspend"] = True
        new["metadata"].setdefault("annotations", {})[STOPPING_ANNOTATION] = "true"
        self.rt.write("Job", new, JOB_MANAGER)

    def _restore_job(self, job: dict[str, Any]) -> None:
        """Step 3: the original template back, the annotation gone (job-suspended-after-eviction)."""
        new = copy.deepcopy(job)
        original = self.original_templates.get(job["metadata"]["uid"])
        if original is not None:
            new["spec"]["template"] = copy.deepcopy(original)
        annotations = new["metadata"].get("annotations") or {}
        annotations.pop(STOPPING_ANNOTATION, None)
        if annotations:
            new["metadata"]["annotations"] = annotations
        else:
            new["metadata"].pop("annotations", None)
        self.rt.write("Job", new, JOB_MANAGER)

    def _start_job(self, job: dict[str, Any], workload: dict[str, Any]) -> None:
        """§4 "Job unsuspended": one write with the flavor's node labels and tolerations, Kueue's
        labels and annotation, and the admission checks' podSetUpdates."""
        admission = workload["status"]["admission"]
        assignment = (admission.get("podSetAssignments") or [{}])[0]
        flavor_names = sorted(set((assignment.get("flavors") or {}).values()))
        new = copy.deepcopy(job)
        self.original_templates[job["metadata"]["uid"]] = copy.deepcopy(job["spec"]["template"])
        template = new["spec"]["template"]
        pod = template.setdefault("spec", {})
        for name in flavor_names:
            flavor = self.rt.get("ResourceFlavor", "", name) or {}
            fspec = flavor.get("spec") or {}
            if fspec.get("nodeLabels"):
                pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **fspec["nodeLabels"]}
            for toleration in fspec.get("tolerations") or []:
                if toleration not in pod.setdefault("tolerations", []):
                    pod["tolerations"].append(copy.deepcopy(toleration))
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels["kueue.x-k8s.io/podset"] = assignment.get("name", "main")
        labels["kueue.x-k8s.io/local-queue-name"] = workload["spec"]["queueName"]
        labels["kueue.x-k8s.io/cluster-queue-name"] = admission["clusterQueue"]
        template["metadata"].setdefault("annotations", {})[WORKLOAD_ANNOTATION] = workload["metadata"]["name"]
        for check in (workload.get("status") or {}).get("admissionChecks") or []:
            for update in check.get("podSetUpdates") or []:
                for key in ("labels", "annotations"):
                    template["metadata"].setdefault(key, {}).update(update.get(key) or {})
                if update.get("nodeSelector"):
                    pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **update["nodeSelector"]}
                pod.setdefault("tolerations", []).extend(update.get("tolerations") or [])
        if not pod.get("tolerations"):
            pod.pop("tolerations", None)
        new["spec"]["suspend"] = False
        self.rt.write("Job", new, JOB_MANAGER)

    def _pods_ready(self, job: dict[str, Any], workload: dict[str, Any]) -> None:
        status = job.get("status") or {}
        count = sum(int(p.get("count", 1)) for p in workload["spec"].get("podSets") or [])
        now = self.rt.now_text()
        new = copy.deepcopy(workload)
        if int(status.get("ready", 0)) + int(status.get("succeeded", 0)) >= count:
            if not is_true(workload, "PodsReady"):
                set_condition(
                    new,
                    "PodsReady",
                    "True",
                    "Started",
                    "All pods reached readiness and the workload is running",
                    now,
                )
        elif status.get("failed"):
            set_condition(
                new,
                "PodsReady",
                "False",
                "WaitForRecovery",
                "At least one pod has failed, waiting for recovery",
                now,
            )
        if new != workload:
            self.rt.write("Workload", new, JOB_MANAGER + "-PodsReady")

    def _release(self, workload: dict[str, Any]) -> None:
        """06: the Job has no active pod left; the admission goes, the Workload is requeued."""
        now = self.rt.now_text()
        evicted = condition(workload, "Evicted") or {}
        reason, message = evicted.get("reason", ""), evicted.get("message", "")
        new = copy.deepcopy(workload)
        status = new["status"]
        admitted = condition(workload, "Admitted")
        set_condition(new, "PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded", now)
        set_condition(new, "QuotaReserved", "False", "Pending", message, now)
        if admitted is not None:
            set_condition(new, "Admitted", "False", "NoReservation", "The workload has no reservation", now)
        requeued = "True" if reason in ("Preempted", "NodeFailures") else "False"
        set_condition(new, "Requeued", requeued, reason, message, now)
        status.pop("admission", None)
        if admitted is not None and admitted.get("status") == "True":
            ran = (self.rt.now() - parse_timestamp(admitted["lastTransitionTime"])).total_seconds()
            status["accumulatedPastExecutionTimeSeconds"] = int(
                status.get("accumulatedPastExecutionTimeSeconds", 0)
            ) + int(ran)
        ordered = [c for c in status["conditions"] if c["type"] != "Requeued"] + [
            c for c in status["conditions"] if c["type"] == "Requeued"
        ]
        status["conditions"] = ordered
        if "schedulingStats" in status:  # keep the recorded key order: stats last
            status["schedulingStats"] = status.pop("schedulingStats")
        self.rt.write("Workload", new, JOB_MANAGER)

    # === Kueue's Workload controller ===================================================================

    def _cluster_queue_of(self, workload: dict[str, Any]) -> dict[str, Any] | None:
        lq = self.rt.get(
            "LocalQueue", workload["metadata"]["namespace"], workload["spec"].get("queueName", "")
        )
        if lq is None:
            return None
        return self.rt.get("ClusterQueue", "", (lq.get("spec") or {}).get("clusterQueue", ""))

    @staticmethod
    def _checks_of(cq: dict[str, Any] | None) -> builtins.list[str]:
        strategy = ((cq or {}).get("spec") or {}).get("admissionChecksStrategy") or {}
        return [c["name"] for c in strategy.get("admissionChecks") or []]

    def reconcile_workload(self, namespace: str, name: str) -> None:
        workload = self.rt.get("Workload", namespace, name)
        if workload is None or is_true(workload, "Finished"):
            return
        now = self.rt.now_text()
        meta, spec = workload["metadata"], workload["spec"]
        owner = next((r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Job"), None)
        job = self.rt.get("Job", namespace, owner["name"]) if owner else None
        if job is None or job["metadata"]["uid"] != (owner or {}).get("uid"):
            if meta.get("deletionTimestamp") and FINALIZER in (meta.get("finalizers") or []):
                self._drop_finalizer(workload)  # the Job went with Background propagation
            elif not meta.get(
                "deletionTimestamp"
            ):  # orphaned (Job deleted with Orphan): FinishOrphanedWorkloads
                new = copy.deepcopy(workload)
                set_condition(
                    new, "Finished", "True", "OwnerNotFound", "The workload's owner no longer exists", now
                )
                new["metadata"].pop("finalizers", None)
                self.rt.write("Workload", new, JOB_MANAGER)
            return
        if meta.get("deletionTimestamp") or condition(workload, "PodsReady") is None:
            return
        cq = self._cluster_queue_of(workload)
        status = workload.get("status") or {}
        checks = self._checks_of(cq)
        present = {c["name"]: c for c in status.get("admissionChecks") or []}
        missing = [c for c in checks if c not in present]
        if missing:  # §4 "Created": Kueue adds the CQ's checks as Pending with an empty message
            new = copy.deepcopy(workload)
            entries = new["status"].setdefault("admissionChecks", [])
            for check in missing:
                entries.append(
                    {
                        "name": check,
                        "state": "Pending",
                        "lastTransitionTime": meta["creationTimestamp"]
                        if not status.get("admission")
                        else now,
                        "message": "",
                    }
                )
            self.rt.write("Workload", new, KUEUE_MANAGER)
            return
        reserved = bool(status.get("admission"))
        evicted = condition(workload, "Evicted") or {}
        if spec.get("active") is False:
            self._deactivate(workload, evicted, reserved, now)
            return
        if (
            evicted.get("status") == "True"
            and evicted.get("reason") == "Deactivated"
            and (condition(workload, "Requeued") or {}).get("reason") == "Deactivated"
        ):
            new = copy.deepcopy(workload)
            set_condition(new, "Requeued", "True", "Reactivated", "The workload was reactivated", now)
            new["status"].pop("requeueState", None)
            self.rt.write("Workload", new, KUEUE_MANAGER)
            return
        if reserved and present and evicted.get("status") != "True":
            states = [(c, present[c]) for c in checks]
            rejected = next((e for _, e in states if e.get("state") == "Rejected"), None)
            retry = next((e for _, e in states if e.get("state") == "Retry"), None)
            if rejected is not None:
                if not is_true(workload, "DeactivationTarget"):  # 11
                    new = copy.deepcopy(workload)
                    set_condition(
                        new,
                        "DeactivationTarget",
                        "True",
                        "AdmissionCheck",
                        f'AdmissionCheck in Rejected state: "{rejected["name"]}" '
                        f"({rejected.get('message', '')})",
                        now,
                    )
                    self.rt.write("Workload", new, KUEUE_MANAGER)
                else:
                    new = copy.deepcopy(workload)
                    new["spec"]["active"] = False
                    self.rt.write("Workload", new, KUEUE_MANAGER)
                return
            if retry is not None:
                self._evict_for_retry(workload, retry, now)
                return
            if all(e.get("state") == "Ready" for _, e in states) and not is_true(workload, "Admitted"):
                new = copy.deepcopy(workload)  # 10b: admitted later than QuotaReserved
                set_condition(new, "Admitted", "True", "Admitted", "The workload is admitted", now)
                self.rt.write("Workload", new, KUEUE_MANAGER)
                return
        requeued = condition(workload, "Requeued") or {}
        if (
            not reserved
            and requeued.get("status") == "False"
            and not str(requeued.get("reason", "")).startswith("Deactivated")
        ):
            state = status.get("requeueState") or {}
            if state.get("requeueAt"):
                due = parse_timestamp(state["requeueAt"])
                if due <= self.rt.now():
                    new = copy.deepcopy(workload)  # 06c: requeueAt dropped first, count kept
                    new["status"]["requeueState"] = {"count": state.get("count", 1)}
                    self.rt.write("Workload", new, KUEUE_MANAGER)
                else:
                    self.rt.after(
                        (due - self.rt.now()).total_seconds(),
                        lambda: self.reconcile_workload(namespace, name),
                    )
                return
            new = copy.deepcopy(workload)
            set_condition(
                new, "Requeued", "True", "BackoffFinished", "The workload backoff was finished", now
            )
            self.rt.write("Workload", new, KUEUE_MANAGER)

    def _deactivate(
        self, workload: dict[str, Any], evicted: dict[str, Any], reserved: bool, now: str
    ) -> None:
        """§5 Rejected / §6: Evicted=True Deactivated[DueTo…], checks reset to Pending."""
        if not (evicted.get("status") == "True" and str(evicted.get("reason", "")).startswith("Deactivated")):
            new = copy.deepcopy(workload)
            target = condition(workload, "DeactivationTarget")
            if target is not None and target.get("status") == "True":
                reason = "Deactivated" + "DueTo" + str(target.get("reason"))
                message = f"The workload is deactivated due to {target.get('message', '')}"
                cause = str(target.get("reason"))
                remove_condition(new, "DeactivationTarget")
            else:
                reason, message, cause = "Deactivated", "The workload is deactivated", ""
            set_condition(new, "Evicted", "True", reason, message, now)
            self._reset_checks(new, now)
            self._count_eviction(new, "Deactivated", cause)
            new["status"].pop("requeueState", None)
            self.rt.write("Workload", new, KUEUE_MANAGER)
            return
        requeued = condition(workload, "Requeued") or {}
        if not reserved and not (
            requeued.get("status") == "False" and requeued.get("reason") == evicted.get("reason")
        ):
            new = copy.deepcopy(workload)
            set_condition(new, "QuotaReserved", "False", "Pending", str(evicted.get("message", "")), now)
            set_condition(
                new, "Requeued", "False", str(evicted.get("reason")), str(evicted.get("message", "")), now
            )
            self.rt.write("Workload", new, JOB_MANAGER)

    def _evict_for_retry(self, workload: dict[str, Any], retry: dict[str, Any], now: str) -> None:
        """§5 Retry: Evicted=True AdmissionCheck, the check reset to Pending, retryCount + 1."""
        new = copy.deepcopy(workload)
        message = (
            f'Evicted due to AdmissionCheck in Retry state: "{retry["name"]}" ({retry.get("message", "")})'
        )
        set_condition(new, "Evicted", "True", "AdmissionCheck", message, now)
        after = retry.get("requeueAfterSeconds")
        self._reset_checks(new, now)
        if after:
            state = new["status"].get("requeueState") or {}
            count = int(state.get("count", 0)) + 1
            due = self.rt.now() + timedelta(seconds=int(after))
            new["status"]["requeueState"] = {"count": count, "requeueAt": timestamp(due)}
        self._count_eviction(new, "AdmissionCheck", "")
        self.rt.write("Workload", new, KUEUE_MANAGER)

    @staticmethod
    def _reset_checks(workload: dict[str, Any], now: str) -> None:
        for check in workload["status"].get("admissionChecks") or []:
            if check.get("state") != "Pending":
                previous = check.get("state")
                check.update(
                    state="Pending",
                    lastTransitionTime=now,
                    message=f"Reset to Pending after eviction. Previously: {previous}",
                )
                if previous == "Retry":
                    check["retryCount"] = int(check.get("retryCount", 0)) + 1
                check.pop("podSetUpdates", None)

    @staticmethod
    def _count_eviction(workload: dict[str, Any], reason: str, cause: str) -> None:
        stats = workload["status"].setdefault("schedulingStats", {}).setdefault("evictions", [])
        for entry in stats:
            if entry.get("reason") == reason and entry.get("underlyingCause", "") == cause:
                entry["count"] = int(entry.get("count", 0)) + 1
                return
        stats.append({"reason": reason, "underlyingCause": cause, "count": 1})

    # === Kueue's scheduler ===============================================================================

    def pending_by_queue(
        self,
    ) -> tuple[dict[str, builtins.list[dict[str, Any]]], builtins.list[tuple[dict[str, Any], str, str]]]:
        """Workloads waiting in each ClusterQueue, in queue order, and the inadmissible ones with
        their (reason, message)."""
        queues: dict[str, builtins.list[dict[str, Any]]] = {}
        inadmissible: builtins.list[tuple[dict[str, Any], str, str]] = []
        for workload in self.rt.list("Workload"):
            meta, status = workload["metadata"], workload.get("status") or {}
            if meta.get("deletionTimestamp") or status.get("admission") or is_true(workload, "Finished"):
                continue
            if workload["spec"].get("active") is False or condition(workload, "PodsReady") is None:
                continue
            if (condition(workload, "Requeued") or {}).get("status") == "False":
                continue
            if any(c.get("state") in ("Retry", "Rejected") for c in status.get("admissionChecks") or []):
                continue
            lq = self.rt.get("LocalQueue", meta["namespace"], workload["spec"].get("queueName", ""))
            if lq is None:
                inadmissible.append(
                    (
                        workload,
                        "Inadmissible",
                        f"LocalQueue {workload['spec'].get('queueName', '')} doesn't exist",
                    )
                )
                continue
            cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
            cq = self.rt.get("ClusterQueue", "", cq_name)
            if cq is None:
                inadmissible.append((workload, "Inadmissible", f"ClusterQueue {cq_name} doesn't exist"))
                continue
            if not self._namespace_matches(cq, meta["namespace"]):
                inadmissible.append(
                    (workload, "Pending", "workload namespace doesn't match ClusterQueue selector")
                )
                continue
            queues.setdefault(cq_name, []).append(workload)
        for items in queues.values():
            items.sort(key=kq.queue_order_key)
        return queues, inadmissible

    def _namespace_matches(self, cq: dict[str, Any], namespace: str) -> bool:
        selector = (cq.get("spec") or {}).get("namespaceSelector")
        if selector is None:
            return False  # a nil selector matches nothing (Kueue's ClusterQueue API)
        ns = self.rt.get("Namespace", "", namespace) or {
            "metadata": {"labels": {"kubernetes.io/metadata.name": namespace}}
        }
        labels = ns["metadata"].get("labels") or {}
        for key, value in (selector.get("matchLabels") or {}).items():
            if labels.get(key) != value:
                return False
        for expr in selector.get("matchExpressions") or []:
            key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
            if (op == "In" and labels.get(key) not in values) or (
                op == "NotIn" and labels.get(key) in values
            ):
                return False
            if (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
                return False
        return True

    def schedule(self) -> None:
        cqs = {cq["metadata"]["name"]: cq for cq in self.rt.list("ClusterQueue")}
        flavors = {f["metadata"]["name"]: f for f in self.rt.list("ResourceFlavor")}
        tree = kq.QuotaTree(list(cqs.values()), self.rt.list("Cohort"))
        admitted: builtins.list[kq.Candidate] = []
        for workload in self.rt.list("Workload"):
            admission = (workload.get("status") or {}).get("admission")
            if not admission or is_true(workload, "Finished") or admission.get("clusterQueue") not in cqs:
                continue
            usage = kq.usage_of(workload)
            tree.add(admission["clusterQueue"], usage)
            reserved = condition(workload, "QuotaReserved") or {}
            admitted.append(
                kq.Candidate(
                    workload,
                    admission["clusterQueue"],
                    int(workload["spec"].get("priority", 0)),
                    reserved.get("lastTransitionTime", ""),
                    usage,
                )
            )
        queues, inadmissible = self.pending_by_queue()
        now = self.rt.now_text()
        for workload, reason, message in inadmissible:
            self._mark_pending(workload, reason, message, now)
        attempted: set[str] = set()
        while True:
            heads: builtins.list[tuple[dict[str, Any], dict[str, Any], kq.Assignment]] = []
            for cq_name, items in queues.items():
                strict = (cqs[cq_name].get("spec") or {}).get("queueingStrategy") == "StrictFIFO"
                for workload in items:
                    if workload["metadata"]["uid"] in attempted:
                        if strict:
                            break
                        continue
                    heads.append(
                        (
                            cqs[cq_name],
                            workload,
                            kq.assign_flavors(workload, cqs[cq_name], flavors, tree, self.excluded_prefixes),
                        )
                    )
                    break
            if not heads:
                return
            heads.sort(key=lambda h: (h[2].mode != "fit" or h[2].borrows, kq.queue_order_key(h[1])))
            cq, workload, assignment = heads[0]
            cq_name = cq["metadata"]["name"]
            attempted.add(workload["metadata"]["uid"])
            if assignment.mode == "fit":
                self._admit(workload, cq, assignment, now)
                tree.add(cq_name, assignment.usage)
                queues[cq_name] = [w for w in queues[cq_name] if w is not workload]
                continue
            message = assignment.message
            if assignment.mode == "preempt":
                targets = kq.preemption_targets(workload, cq, assignment, admitted, tree)
                if targets:
                    for target, reason in targets:
                        if not is_true(target.workload, "Evicted"):
                            self._preempt(target, reason, workload, tree, cq_name, now)
                    message += f". Pending the preemption of {len(targets)} workload(s)"
            self._mark_pending(workload, "Pending", message, now)

    def _mark_pending(self, workload: dict[str, Any], reason: str, message: str, now: str) -> None:
        """02: QuotaReserved=False with the scheduler's message, and status.resourceRequests."""
        current = condition(workload, "QuotaReserved") or {}
        requests = kq.resource_requests_status(workload)
        status = workload.get("status") or {}
        if (current.get("status"), current.get("reason"), current.get("message")) == (
            "False",
            reason,
            message,
        ) and (status.get("resourceRequests") == requests or reason != "Pending"):
            return
        new = copy.deepcopy(workload)
        set_condition(new, "QuotaReserved", "False", reason, message, now)
        if reason == "Pending":
            new["status"]["resourceRequests"] = requests
        self.rt.write("Workload", new, KUEUE_MANAGER)

    def _admit(
        self, workload: dict[str, Any], cq: dict[str, Any], assignment: kq.Assignment, now: str
    ) -> None:
        """03 (checks pending) or 04 (QuotaReserved and Admitted in one write); on readmission
        Evicted/Preempted flip to False with `Previously: …` (07)."""
        cq_name = cq["metadata"]["name"]
        new = copy.deepcopy(workload)
        status = new.setdefault("status", {})
        set_condition(
            new, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}", now
        )
        if not self._checks_of(cq):
            set_condition(new, "Admitted", "True", "Admitted", "The workload is admitted", now)
        for kind in ("Evicted", "Preempted"):
            old = condition(workload, kind)
            if old is not None and old.get("status") == "True":
                set_condition(
                    new, kind, "False", "QuotaReserved", f"Previously: {old.get('message', '')}", now
                )
        status.pop("resourceRequests", None)
        admission = kq.assignment_status(workload, assignment, cq_name)
        rebuilt: dict[str, Any] = {}
        for key, value in status.items():  # the recorded key order: conditions, admission, the rest
            rebuilt[key] = value
            if key == "conditions":
                rebuilt["admission"] = admission
        rebuilt.setdefault("admission", admission)
        new["status"] = rebuilt
        self.rt.write("Workload", new, KUEUE_MANAGER)

    def _preempt(
        self,
        target: kq.Candidate,
        reason: str,
        preemptor: dict[str, Any],
        tree: kq.QuotaTree,
        cq_name: str,
        now: str,
    ) -> None:
        """05: Evicted=True Preempted and Preempted=True <reason> in one write; quota still held."""
        message = kq.preemption_message(preemptor, reason, tree.path(cq_name), tree.path(target.cq))
        current = self.rt.get("Workload", *target.key)
        if current is None:
            return
        new = copy.deepcopy(current)
        set_condition(new, "Evicted", "True", "Preempted", message, now)
        set_condition(new, "Preempted", "True", reason, message, now, generation=False)
        self._reset_checks(new, now)
        self._count_eviction(new, "Preempted", "")
        self.rt.write("Workload", new, KUEUE_MANAGER)

    # === the visibility API (§9) =======================================================================

    def pending_workloads(
        self, cluster_queue: str | None, namespace: str | None, local_queue: str | None
    ) -> builtins.list[dict[str, Any]]:
        queues, _ = self.pending_by_queue()
        if local_queue is not None:
            lq = self.rt.get("LocalQueue", namespace or "", local_queue)
            if lq is None:
                return []
            cluster_queue = (lq.get("spec") or {}).get("clusterQueue", "")
        items = []
        positions: dict[tuple[str, str], int] = {}
        for index, workload in enumerate(queues.get(cluster_queue or "", [])):
            meta = workload["metadata"]
            lq_key = (meta["namespace"], workload["spec"].get("queueName", ""))
            local = positions.get(lq_key, 0)
            positions[lq_key] = local + 1
            if local_queue is not None and lq_key != (namespace, local_queue):
                continue
            items.append(
                {
                    "metadata": {
                        "name": meta["name"],
                        "namespace": meta["namespace"],
                        "creationTimestamp": meta["creationTimestamp"],
                        "ownerReferences": [
                            {k: r[k] for k in ("apiVersion", "kind", "name", "uid") if k in r}
                            for r in meta.get("ownerReferences") or []
                        ],
                    },
                    "priority": int(workload["spec"].get("priority", 0)),
                    "localQueueName": workload["spec"].get("queueName", ""),
                    "positionInClusterQueue": index,
                    "positionInLocalQueue": local,
                }
            )
        return items


__all__ = ["JOB_UID_LABEL", "Controllers"]
