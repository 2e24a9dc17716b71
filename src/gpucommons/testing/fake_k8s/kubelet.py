"""A kubelet (and kube-scheduler) emulator: pods get a node, start, run, stop and log.

Pod statuses follow tests/data/kueue/shapes/pod-succeeded.json and pod-terminated-preempted.json
(Kubernetes 1.36; README §8): Pending → Running after `start_seconds`; a container "runs" for the
seconds its pod annotation `fake-k8s.gpucommons.io/run-seconds` says, else the N of a `sleep N` in its
command and args, else until it is stopped; it then ends with exit code 0 (or the annotation
`fake-k8s.gpucommons.io/exit-code`): phase Succeeded (reason Completed) or Failed (reason Error).

A deleted running pod gets SIGTERM: it ends with exit code 143 after its
`terminationGracePeriodSeconds` (the whole grace period, as a trainer that saves a checkpoint uses
it), or after `fake-k8s.gpucommons.io/sigterm-seconds`; with `fake-k8s.gpucommons.io/ignore-sigterm:
"true"` it is killed at the end of the grace period with 137. No DisruptionTarget condition is added
(README §8). The pod is then removed once its finalizers are gone. Every duration is in cluster
seconds, so the clock's scale speeds all of it up.

Nodes: when the cluster has Node objects, a pod goes to the first node whose labels match its
nodeSelector, whose taints it tolerates and whose allocatable resources fit it; otherwise it stays
Pending with PodScheduled=False Unschedulable. Without any Node object every pod lands on
`fake-node`.
"""

from __future__ import annotations

import builtins
import copy
import hashlib
import re
import shlex
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from gpucommons.testing.fake_k8s import statuses
from gpucommons.testing.fake_k8s.kueue import tolerated
from gpucommons.testing.fake_k8s.quantity import parse_quantity, pod_requests
from gpucommons.testing.fake_k8s.resources import resource_for

ANNOTATION = "fake-k8s.gpucommons.io/"
RUN_SECONDS = ANNOTATION + "run-seconds"
EXIT_CODE = ANNOTATION + "exit-code"
SIGTERM_SECONDS = ANNOTATION + "sigterm-seconds"
IGNORE_SIGTERM = ANNOTATION + "ignore-sigterm"
PODS = resource_for("Pod")
_SLEEP = re.compile(r"(?:^|[\s;&|(])sleep\s+([0-9]+(?:\.[0-9]+)?)")


class Runtime(Protocol):
    def now_text(self) -> str: ...
    def write(self, kind: str, obj: dict[str, Any], manager: str) -> dict[str, Any]: ...
    def remove(self, kind: str, namespace: str, name: str) -> None: ...
    def after(self, seconds: float, action: Any) -> None: ...
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...
    def list(self, kind: str, namespace: str | None = None) -> builtins.list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class Program:
    """How the containers of a Job's pods behave, set by a test without touching the Job
    (`FakeCluster.program`); a pod annotation still wins."""

    run_seconds: float | None = None
    exit_code: int = 0
    sigterm_seconds: float | None = None
    ignore_sigterm: bool = False
    lines: tuple[str, ...] = ()


def run_seconds(pod: dict[str, Any], program: Program | None = None) -> float | None:
    annotations = pod["metadata"].get("annotations") or {}
    if RUN_SECONDS in annotations:
        return float(annotations[RUN_SECONDS])
    if program is not None and program.run_seconds is not None:
        return program.run_seconds
    for container in pod["spec"].get("containers") or []:
        words = [*(container.get("command") or []), *(container.get("args") or [])]
        match = _SLEEP.search(" ".join(words))
        if match:
            return float(match.group(1))
    return None


@dataclass
class Kubelet:
    runtime: Runtime
    start_seconds: float = 2.0
    #: pod uid → log lines ("<RFC 3339 time> <text>")
    logs: dict[str, builtins.list[str]] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)
    stopping: set[str] = field(default_factory=set)
    #: (namespace, Job name) → how its pods' containers behave
    programs: dict[tuple[str, str], Program] = field(default_factory=dict)
    _ips: int = 0

    def program_of(self, pod: dict[str, Any]) -> Program:
        job = (pod["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name", "")
        return self.programs.get((pod["metadata"].get("namespace", ""), job), Program())

    # --- reacting to pods ----------------------------------------------------------------------------

    def reconcile(self, pod: dict[str, Any]) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        phase = status.get("phase", "Pending")
        if meta.get("deletionTimestamp"):
            self._on_deleted(pod, phase)
            return
        if phase in ("Succeeded", "Failed"):
            return
        if not pod["spec"].get("nodeName"):
            self._schedule(pod)

    def _schedule(self, pod: dict[str, Any]) -> None:
        node, why = self._pick_node(pod)
        now = self.runtime.now_text()
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {"phase": "Pending"})
        status.setdefault("phase", "Pending")
        if node is None:
            conditions = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastTransitionTime": now,
                    "reason": "Unschedulable",
                    "message": why,
                }
            ]
            if status.get("conditions") != conditions:
                status["conditions"] = conditions
                self.runtime.write("Pod", new, "kube-scheduler")
            return
        new["spec"]["nodeName"] = node
        status["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}]
        stored = self.runtime.write("Pod", new, "kube-scheduler")
        uid = stored["metadata"]["uid"]
        self.logs.setdefault(uid, [])
        self.runtime.after(
            self.start_seconds,
            lambda: self._start(stored["metadata"]["namespace"], stored["metadata"]["name"], uid),
        )

    def _pick_node(self, pod: dict[str, Any]) -> tuple[str | None, str]:
        nodes = sorted(self.runtime.list("Node"), key=lambda n: n["metadata"]["name"])
        if not nodes:
            return "fake-node", ""
        wants = pod_requests(pod["spec"])
        selector = pod["spec"].get("nodeSelector") or {}
        tolerations = pod["spec"].get("tolerations") or []
        used: dict[str, dict[str, Fraction]] = {}
        for other in self.runtime.list("Pod"):
            name = other["spec"].get("nodeName")
            if name and (other.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                for r, q in pod_requests(other["spec"]).items():
                    used.setdefault(name, {})[r] = used.get(name, {}).get(r, Fraction(0)) + q
        short: dict[str, int] = {}
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            if any(labels.get(k) != v for k, v in selector.items()):
                short["node(s) didn't match Pod's node affinity/selector"] = (
                    short.get("node(s) didn't match Pod's node affinity/selector", 0) + 1
                )
                continue
            taints = [
                t
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("effect") in ("NoSchedule", "NoExecute")
            ]
            if any(not tolerated(t, tolerations) for t in taints):
                key = "node(s) had untolerated taint(s)"
                short[key] = short.get(key, 0) + 1
                continue
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            lacking = [
                r
                for r, q in wants.items()
                if used.get(node["metadata"]["name"], {}).get(r, Fraction(0)) + q
                > parse_quantity(allocatable.get(r, 0))
            ]
            if lacking:
                key = f"Insufficient {sorted(lacking)[0]}"
                short[key] = short.get(key, 0) + 1
                continue
            return node["metadata"]["name"], ""
        reasons = ", ".join(f"{n} {k}" for k, n in sorted(short.items()))
        return None, f"0/{len(nodes)} nodes are available: {reasons}."

    def _start(self, namespace: str, name: str, uid: str) -> None:
        pod = self.runtime.get("Pod", namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase") != "Pending" or not pod["spec"].get("nodeName"):
            return
        now = self.runtime.now_text()
        self._ips += 1
        new = copy.deepcopy(pod)
        status = new["status"]
        status.update(
            {
                "phase": "Running",
                "conditions": [
                    {
                        "type": "PodReadyToStartContainers",
                        "status": "True",
                        "lastTransitionTime": now,
                    },
                    {
                        "type": "Initialized",
                        "status": "True",
                        "lastTransitionTime": now,
                    },
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    {
                        "type": "ContainersReady",
                        "status": "True",
                        "lastTransitionTime": now,
                    },
                    status["conditions"][0],
                ],
                "hostIP": "10.0.3.17",
                "hostIPs": [{"ip": "10.0.3.17"}],
                "podIP": f"10.42.{self._ips // 250}.{self._ips % 250 + 1}",
                "podIPs": [{"ip": f"10.42.{self._ips // 250}.{self._ips % 250 + 1}"}],
                "startTime": now,
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "state": {"running": {"startedAt": now}},
                        "lastState": {},
                        "ready": True,
                        "restartCount": 0,
                        "image": c.get("image", ""),
                        "imageID": f"{c.get('image', '').split(':')[0]}@sha256:{_digest(c.get('image', ''))}",
                        "containerID": f"containerd://{_digest(uid + c['name'])}",
                        "started": True,
                    }
                    for c in pod["spec"].get("containers") or []
                ],
            }
        )
        self.runtime.write("Pod", new, "kubelet")
        for container in pod["spec"].get("containers") or []:
            words = [*(container.get("command") or []), *(container.get("args") or [])]
            self.log(uid, f"fake kubelet: container {container['name']} started: {shlex.join(words)}")
        program = self.program_of(pod)
        for line in program.lines:
            self.log(uid, line)
        seconds = run_seconds(pod, program)
        if seconds is not None:
            annotations = pod["metadata"].get("annotations") or {}
            code = int(annotations.get(EXIT_CODE, program.exit_code))
            self.runtime.after(seconds, lambda: self._finish(namespace, name, uid, code, deleted=False))

    def _on_deleted(self, pod: dict[str, Any], phase: str) -> None:
        uid = pod["metadata"]["uid"]
        meta = pod["metadata"]
        if phase in ("Succeeded", "Failed") or phase == "Pending":
            if not meta.get("finalizers"):
                self.runtime.remove("Pod", meta["namespace"], meta["name"])
            return
        if uid in self.stopping:
            return
        self.stopping.add(uid)
        annotations = meta.get("annotations") or {}
        grace = float(
            meta.get("deletionGracePeriodSeconds", pod["spec"].get("terminationGracePeriodSeconds", 30))
        )
        self.log(uid, f"fake kubelet: sending SIGTERM (pod deleted, grace period {grace:g}s)")
        program = self.program_of(pod)
        if annotations.get(IGNORE_SIGTERM) == "true" or program.ignore_sigterm:
            self.runtime.after(
                grace, lambda: self._finish(meta["namespace"], meta["name"], uid, 137, deleted=True)
            )
            return
        default = program.sigterm_seconds if program.sigterm_seconds is not None else grace
        seconds = min(grace, float(annotations.get(SIGTERM_SECONDS, default)))
        self.runtime.after(
            seconds, lambda: self._finish(meta["namespace"], meta["name"], uid, 143, deleted=True)
        )

    def _finish(self, namespace: str, name: str, uid: str, code: int, deleted: bool) -> None:
        pod = self.runtime.get("Pod", namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or (pod["metadata"].get("deletionTimestamp") and not deleted):
            return
        now = self.runtime.now_text()
        reason = "PodCompleted" if code == 0 else "PodFailed"
        new = copy.deepcopy(pod)
        st = new["status"]
        st["phase"] = "Succeeded" if code == 0 else "Failed"
        scheduled = next((c for c in st["conditions"] if c["type"] == "PodScheduled"), None)
        initialized = next((c for c in st["conditions"] if c["type"] == "Initialized"), None)
        st["conditions"] = [
            {
                "type": "PodReadyToStartContainers",
                "status": "False",
                "lastTransitionTime": now,
            },
            {**(initialized or {}), **({"reason": "PodCompleted"} if code == 0 else {})},
            {
                "type": "Ready",
                "status": "False",
                "lastTransitionTime": now,
                "reason": reason,
            },
            {
                "type": "ContainersReady",
                "status": "False",
                "lastTransitionTime": now,
                "reason": reason,
            },
            *([scheduled] if scheduled else []),
        ]
        for cs in st.get("containerStatuses") or []:
            started = (cs.get("state") or {}).get("running", {}).get("startedAt", now)
            cs["state"] = {
                "terminated": {
                    "exitCode": code,
                    "reason": "Completed" if code == 0 else "Error",
                    "startedAt": started,
                    "finishedAt": now,
                    "containerID": cs.get("containerID", ""),
                }
            }
            cs["ready"] = False
            cs["started"] = False
            self.log(uid, f"fake kubelet: container {cs['name']} exited with code {code}")
        self.ended.add(uid)
        stored = self.runtime.write("Pod", new, "kubelet")
        if deleted and not stored["metadata"].get("finalizers"):
            self.runtime.remove("Pod", namespace, name)

    # --- logs ----------------------------------------------------------------------------------------

    def log(self, uid: str, text: str) -> None:
        self.logs.setdefault(uid, []).append(f"{self.runtime.now_text()} {text}")

    def pod_log(self, namespace: str, name: str, container: str | None) -> tuple[builtins.list[str], bool]:
        pod = self.runtime.get("Pod", namespace, name)
        if pod is None:
            raise statuses.not_found(PODS, name)
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        if container is None and len(names) > 1:
            raise statuses.bad_request(
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
            )
        chosen = container or names[0]
        if chosen not in names:
            raise statuses.bad_request(f"container {chosen} is not valid for pod {name}")
        status = pod.get("status") or {}
        if status.get("phase", "Pending") == "Pending":
            raise statuses.bad_request(
                f'container "{chosen}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        uid = pod["metadata"]["uid"]
        return list(self.logs.get(uid, [])), uid in self.ended


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
