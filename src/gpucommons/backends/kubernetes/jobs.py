"""A task as a `batch/v1` Job that Kueue admits (pure: a task and the policy in, a dict out).

The Job is created suspended and labelled with the team's LocalQueue and the task's
WorkloadPriorityClass; Kueue unsuspends it when it admits the task and suspends it again to preempt
it. What the policy says about the task's class becomes Job fields Kubernetes enforces itself:

- grace period → `terminationGracePeriodSeconds` (SIGTERM, then the grace period to save state);
- max runtime → `activeDeadlineSeconds`;
- a task pinned to a pool → the pool's ResourceFlavor `nodeLabels` as `nodeSelector` (and the
  dedicated flavor's toleration), so Kueue only considers that flavor. An unpinned task carries
  none: Kueue tries the team's flavors in order and injects the chosen one's labels at admission;
- GPUs → `nvidia.com/gpu` limits (the site's GPU resource name); a task larger than one node of its
  pool becomes an Indexed Job of whole-node pods, which Kueue admits all-or-nothing.

The environment is docs/design.md, contract 6. The pod's annotations are a file in the container
(`COMMONS_CHECKPOINT_REQUEST_FILE`, a downward-API volume): when Kueue evicts the task, GPU Commons
writes `gpucommons.io/checkpoint-requested` there, next to the SIGTERM the pod's deletion brings.
Checkpoints go to a per-task directory on the team's
checkpoint claim (a PersistentVolumeClaim the platform provisions), so a preempted task resumes from
them on whatever node it is readmitted; a task that declared no checkpointing gets an `emptyDir`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucommons.backends.kubernetes.grants import CLASS_GRANT_ANNOTATION, class_grant
from gpucommons.backends.kubernetes.names import (
    LOCAL_QUEUE,
    MANAGED_BY,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    TEAM_LABEL,
    is_dns_label,
    k8s_name,
    namespace_name,
)
from gpucommons.backends.kubernetes.render import Manifest, RenderOptions, quantity, resource_flavors
from gpucommons.domain.model import Isolation, Policy, PriorityClass, Team
from gpucommons.domain.task import CheckpointMode, CheckpointSpec

JOB_PREFIX = "commons-"
TASK_ID_LABEL = "gpucommons.io/task-id"
CHECKPOINT_ANNOTATION = "gpucommons.io/checkpoint"
#: Set on a task's pods (to the time, RFC 3339) when it should save its state now.
CHECKPOINT_REQUEST_ANNOTATION = "gpucommons.io/checkpoint-requested"
#: Where the pod's annotations appear in the container (downward API).
PODINFO_MOUNT = "/commons/podinfo"
CONTAINER = "task"
#: Variables the control plane owns (docs/design.md, contract 6): a task's own `env` cannot override them.
CONTRACT_ENV = (
    "COMMONS_TASK_ID",
    "COMMONS_TEAM",
    "COMMONS_CHECKPOINT_DIR",
    "COMMONS_RESTART_COUNT",
    "CUDA_VISIBLE_DEVICES",
    "COMMONS_CHECKPOINT_REQUEST_FILE",
)


class JobError(ValueError):
    """The task cannot run as a Job under this policy; the message names what is wrong."""


@dataclass(frozen=True, slots=True)
class JobTask:
    """What a Job needs to know about one task."""

    task_id: str
    team: str
    command: tuple[str, ...]
    image: str
    gpus: int
    #: None: the policy's default class.
    priority_class: str | None = None
    #: None: any of the team's pools, in the team's order (Kueue's flavor order).
    pool: str | None = None
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    restart_count: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobOptions:
    render: RenderOptions = field(default_factory=RenderOptions)
    #: The PersistentVolumeClaim, in each team namespace, that holds the team's checkpoints.
    checkpoint_claim: str = "checkpoints"
    #: Where the task's checkpoint directory is mounted (COMMONS_CHECKPOINT_DIR).
    checkpoint_mount: str = "/commons/checkpoint"
    #: The key shared with the governance controller: with one, the pod template carries
    #: `gpucommons.io/class-grant`, which proves that the server checked the class's `roles` rule
    #: (`governance.class_grant`). None: no grant, and classes with a `roles` rule are refused.
    grant_key: bytes | None = None


def job_name(task_id: str) -> str:
    """`commons-t3f9a2b1c0d`: the Job's name (also the prefix of its pods' and Workload's names)."""
    return JOB_PREFIX + k8s_name(task_id)


def task_id_of_job(name: str) -> str | None:
    """The inverse of `job_name` for the ids the control plane issues (lower-case already)."""
    return name[len(JOB_PREFIX) :] if name.startswith(JOB_PREFIX) else None


def _team(policy: Policy, task: JobTask) -> Team:
    try:
        return policy.team(task.team)
    except KeyError:
        raise JobError(f"unknown team {task.team!r}") from None


def _priority_class(policy: Policy, task: JobTask) -> PriorityClass:
    try:
        cls = policy.priority_class(task.priority_class)
    except KeyError:
        names = ", ".join(c.name for c in policy.priority_classes)
        raise JobError(f"unknown priority class {task.priority_class!r} (classes: {names})") from None
    if cls.checkpoint_required and not task.checkpoint.saves_state:
        raise JobError(
            f"priority class {cls.name!r} requires checkpoints: declare on-signal or every:<duration>"
        )
    return cls


def _pods(policy: Policy, team: Team, task: JobTask) -> int:
    """How many whole-node pods the task needs: 1 when it fits one node of every pool it may use."""
    if task.pool is not None and task.pool not in {p.name for p in policy.pools}:
        raise JobError(f"unknown pool {task.pool!r} (pools: {', '.join(p.name for p in policy.pools)})")
    pools = [task.pool] if task.pool is not None else [q.pool for q in team.quotas]
    per_node = {p: policy.pool(p).gpus_per_node for p in pools}
    if all(task.gpus <= n for n in per_node.values()):
        return 1
    if task.pool is None:
        raise JobError(
            f"{task.gpus} GPUs do not fit on one node of every pool of team {team.name!r} "
            f"({', '.join(f'{p}: {n} per node' for p, n in per_node.items())}): "
            "name a pool for a multi-node task"
        )
    node = per_node[task.pool]
    if node <= 0 or task.gpus % node:
        raise JobError(
            f"{task.gpus} GPUs span several nodes of pool {task.pool!r} but are not a multiple of its "
            f"{node} GPUs per node: a multi-node task takes whole nodes"
        )
    return task.gpus // node


def _placement(policy: Policy, team: Team, task: JobTask, options: RenderOptions) -> dict[str, Any]:
    """nodeSelector and tolerations of the pool's ResourceFlavor (the team's dedicated one if any)."""
    if task.pool is None:
        return {}
    if team.quota(task.pool) is None:
        raise JobError(f"team {team.name!r} has no quota in pool {task.pool!r}")
    wanted = k8s_name(task.pool)
    if team.isolation is Isolation.DEDICATED:
        wanted = f"{wanted}-{k8s_name(team.name)}"
    flavor = next(f for f in resource_flavors(policy, options) if f["metadata"]["name"] == wanted)
    placement: dict[str, Any] = {"nodeSelector": dict(flavor["spec"]["nodeLabels"])}
    if flavor["spec"].get("tolerations"):
        placement["tolerations"] = [dict(t) for t in flavor["spec"]["tolerations"]]
    return placement


def _env(task: JobTask, gpus_per_pod: int, checkpoint_dir: str) -> list[dict[str, str]]:
    env = {k: v for k, v in task.env.items() if k not in CONTRACT_ENV}
    env.update(
        {
            "COMMONS_TASK_ID": task.task_id,
            "COMMONS_TEAM": task.team,
            "COMMONS_CHECKPOINT_DIR": checkpoint_dir,
            "COMMONS_RESTART_COUNT": str(task.restart_count),
            # The device plugin shows a container only its own GPUs, numbered from 0.
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(gpus_per_pod)),
            "COMMONS_CHECKPOINT_REQUEST_FILE": f"{PODINFO_MOUNT}/annotations",
        }
    )
    return [{"name": k, "value": v} for k, v in env.items()]


def _checkpoint_volume(task: JobTask, options: JobOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """(volume, mount): the task's own directory on the team's claim, or scratch space."""
    if task.checkpoint.mode is CheckpointMode.NONE:
        return {"name": "checkpoint", "emptyDir": {}}, {
            "name": "checkpoint",
            "mountPath": options.checkpoint_mount,
        }
    volume = {"name": "checkpoint", "persistentVolumeClaim": {"claimName": options.checkpoint_claim}}
    # subPath: kubelet creates the directory, and the task cannot see its teammates' checkpoints.
    mount = {"name": "checkpoint", "mountPath": options.checkpoint_mount, "subPath": job_name(task.task_id)}
    return volume, mount


def _checkpoint_text(spec: CheckpointSpec) -> str:
    if spec.mode is CheckpointMode.EVERY:
        return f"every:{spec.interval_s}s"
    return spec.mode.value


def _resources(task: JobTask, pods: int, gpu_resource: str) -> dict[str, Any]:
    """Per pod: whole GPUs as a limit (extended resources need no request), CPU and memory as
    requests rounded up, so the pods together ask for at least the task's request."""
    requests: dict[str, int | str] = {}
    if task.cpu_milli:
        requests["cpu"] = quantity("cpu_milli", -(-task.cpu_milli // pods))
    if task.memory_mib:
        requests["memory"] = quantity("memory_mib", -(-task.memory_mib // pods))
    resources: dict[str, Any] = {}
    if task.gpus:
        resources["limits"] = {gpu_resource: task.gpus // pods}
    if requests:
        resources["requests"] = requests
    return resources


def _check_task(task: JobTask) -> None:
    name = job_name(task.task_id)
    if not task.task_id or not is_dns_label(name):
        raise JobError(f"task id {task.task_id!r} does not make a valid Job name ({name!r})")
    if not task.command:
        raise JobError("a task needs a command")
    if not task.image.strip():
        raise JobError("a task on Kubernetes needs a container image")
    if task.gpus < 0 or task.cpu_milli < 0 or task.memory_mib < 0:
        raise JobError("resource requests cannot be negative")


def task_job(policy: Policy, task: JobTask, options: JobOptions | None = None) -> Manifest:
    """The Job for `task` in its team's namespace, suspended until Kueue admits it."""
    options = options or JobOptions()
    _check_task(task)
    team = _team(policy, task)
    cls = _priority_class(policy, task)
    pods = _pods(policy, team, task)
    placement = _placement(policy, team, task, options.render)
    volume, mount = _checkpoint_volume(task, options)
    name = job_name(task.task_id)
    labels = {
        **MANAGED_BY,
        TEAM_LABEL: k8s_name(team.name),
        TASK_ID_LABEL: k8s_name(task.task_id),
    }
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": task.image,
        "command": list(task.command),
        "env": _env(task, task.gpus // pods, options.checkpoint_mount),
        "resources": _resources(task, pods, options.render.gpu_resource),
        "volumeMounts": [mount, {"name": "podinfo", "mountPath": PODINFO_MOUNT, "readOnly": True}],
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": cls.grace_period_s,
        **placement,
        "containers": [container],
        "volumes": [
            volume,
            {
                "name": "podinfo",
                "downwardAPI": {
                    "items": [{"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]
                },
            },
        ],
    }
    spec: dict[str, Any] = {
        # Kueue admits a suspended Job by unsuspending it; created running, it would start unqueued.
        "suspend": True,
        "parallelism": pods,
        "completions": pods,
        "backoffLimit": 0,
        # A pod evicted by preemption or a node drain is not the task's failure.
        "podFailurePolicy": {
            "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
        },
        "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
    }
    namespace = namespace_name(team.name, options.render.namespace_prefix)
    if options.grant_key is not None:  # the pod template: Kueue copies it into the Workload
        grant = class_grant(options.grant_key, namespace, name, cls.name)
        spec["template"]["metadata"]["annotations"] = {CLASS_GRANT_ANNOTATION: grant}
    if pods > 1:
        spec["completionMode"] = "Indexed"
    if cls.max_runtime_s is not None:
        spec["activeDeadlineSeconds"] = cls.max_runtime_s
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**labels, QUEUE_NAME_LABEL: LOCAL_QUEUE, PRIORITY_CLASS_LABEL: k8s_name(cls.name)},
            "annotations": {
                TASK_ID_LABEL: task.task_id,
                CHECKPOINT_ANNOTATION: _checkpoint_text(task.checkpoint),
            },
        },
        "spec": spec,
    }
