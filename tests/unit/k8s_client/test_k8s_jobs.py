"""Tasks as batch/v1 Jobs: valid against the built-in schema, queued by Kueue, limited by their class."""

from __future__ import annotations

from typing import Any

import pytest
from k8s_client_helpers import EXAMPLE

from gpucommons.backends.kubernetes import RenderOptions
from gpucommons.backends.kubernetes.jobs import JobError, JobOptions, JobTask, task_id_of_job, task_job
from gpucommons.domain.model import Policy
from gpucommons.domain.task import CheckpointMode, CheckpointSpec
from gpucommons.policy import load_policy, parse_policy

kubernetes_validate = pytest.importorskip("kubernetes_validate")

DEDICATED = """\
cluster:
  name: d
  pools:
    - {name: h100, gpu_type: H100, nodes: 4, gpus_per_node: 8}
priority_classes:
  - {name: batch, value: 1, grace_period: 2m}
default_priority_class: batch
teams:
  - name: recsys
    isolation: dedicated
    quota:
      h100: {gpus: 16}
"""


def _policy() -> Policy:
    return load_policy(EXAMPLE)


def _task(**changes: Any) -> JobTask:
    fields: dict[str, Any] = {
        "task_id": "t0a1b2c3d4e",
        "team": "nlp",
        "command": ("python", "train.py", "--epochs", "3"),
        "image": "ghcr.io/acme/train:1.4",
        "gpus": 8,
        "priority_class": "training",
        "checkpoint": CheckpointSpec(CheckpointMode.EVERY, 1800),
    }
    return JobTask(**{**fields, **changes})


def _validate(job: dict[str, Any]) -> None:
    kubernetes_validate.validate(job, kubernetes_validate.latest_version(), strict=True)


def _env(job: dict[str, Any]) -> dict[str, str]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"]}


def test_a_job_is_valid_batch_v1_suspended_and_queued_in_the_team_namespace() -> None:
    job = task_job(_policy(), _task())
    _validate(job)
    assert job["metadata"]["namespace"] == "team-nlp"
    assert job["metadata"]["name"] == "commons-t0a1b2c3d4e"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "training"
    assert job["spec"]["suspend"] is True
    assert task_id_of_job(job["metadata"]["name"]) == "t0a1b2c3d4e"


def test_the_class_sets_grace_period_and_deadline() -> None:
    training = task_job(_policy(), _task())
    interactive = task_job(_policy(), _task(priority_class="interactive", checkpoint=CheckpointSpec()))
    assert training["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    assert "activeDeadlineSeconds" not in training["spec"]
    assert interactive["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    assert interactive["spec"]["activeDeadlineSeconds"] == 8 * 3600


def test_the_default_class_applies_when_none_is_named() -> None:
    job = task_job(_policy(), _task(priority_class=None, checkpoint=CheckpointSpec()))
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "experiment"
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 60


def test_gpus_are_limits_of_the_sites_gpu_resource() -> None:
    options = JobOptions(render=RenderOptions(gpu_resource="amd.com/gpu"))
    job = task_job(_policy(), _task(gpus=4, cpu_milli=16500, memory_mib=65536), options)
    _validate(job)
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"amd.com/gpu": 4}, "requests": {"cpu": "16500m", "memory": "64Gi"}}
    assert _env(job)["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


def test_the_environment_is_contract_6_and_the_task_cannot_override_it() -> None:
    job = task_job(_policy(), _task(env={"WANDB_PROJECT": "x", "COMMONS_TEAM": "vision"}, restart_count=2))
    assert _env(job) == {
        "WANDB_PROJECT": "x",
        "COMMONS_TASK_ID": "t0a1b2c3d4e",
        "COMMONS_TEAM": "nlp",
        "COMMONS_CHECKPOINT_DIR": "/commons/checkpoint",
        "COMMONS_RESTART_COUNT": "2",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        "COMMONS_CHECKPOINT_REQUEST_FILE": "/commons/podinfo/annotations",
    }


def test_checkpointing_tasks_keep_their_own_directory_on_the_team_claim() -> None:
    pod = task_job(_policy(), _task())["spec"]["template"]["spec"]
    assert pod["volumes"][0] == {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "checkpoints"}}
    mount = pod["containers"][0]["volumeMounts"][0]
    assert mount == {
        "name": "checkpoint",
        "mountPath": "/commons/checkpoint",
        "subPath": "commons-t0a1b2c3d4e",
    }
    scratch = task_job(_policy(), _task(priority_class="experiment", checkpoint=CheckpointSpec()))
    assert scratch["spec"]["template"]["spec"]["volumes"][0] == {"name": "checkpoint", "emptyDir": {}}
    assert scratch["metadata"]["annotations"]["gpucommons.io/checkpoint"] == "none"


def test_the_pods_annotations_are_a_file_where_a_checkpoint_request_appears() -> None:
    pod = task_job(_policy(), _task())["spec"]["template"]["spec"]
    assert pod["volumes"][1] == {
        "name": "podinfo",
        "downwardAPI": {
            "items": [{"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]
        },
    }
    assert {"name": "podinfo", "mountPath": "/commons/podinfo", "readOnly": True} in pod["containers"][0][
        "volumeMounts"
    ]
    assert (
        _env(task_job(_policy(), _task()))["COMMONS_CHECKPOINT_REQUEST_FILE"]
        == "/commons/podinfo/annotations"
    )


def test_a_pinned_pool_selects_its_flavor_nodes_and_an_unpinned_task_lets_kueue_choose() -> None:
    pinned = task_job(_policy(), _task(pool="a100", gpus=4))
    assert pinned["spec"]["template"]["spec"]["nodeSelector"] == {"gpucommons.io/pool": "a100"}
    free = task_job(_policy(), _task())
    assert "nodeSelector" not in free["spec"]["template"]["spec"]


def test_a_dedicated_team_gets_its_flavors_selector_and_toleration() -> None:
    task = _task(team="recsys", pool="h100", priority_class="batch", checkpoint=CheckpointSpec())
    job = task_job(parse_policy(DEDICATED), task)
    _validate(job)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpucommons.io/pool": "h100", "gpucommons.io/dedicated-to": "recsys"}
    assert pod["tolerations"] == [
        {"key": "gpucommons.io/dedicated-to", "value": "recsys", "effect": "NoSchedule", "operator": "Equal"}
    ]


def test_a_task_larger_than_a_node_is_an_indexed_job_of_whole_nodes() -> None:
    job = task_job(_policy(), _task(pool="h100", gpus=16, cpu_milli=3000))
    _validate(job)
    spec = job["spec"]
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (2, 2, "Indexed")
    resources = spec["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"nvidia.com/gpu": 8}, "requests": {"cpu": "1500m"}}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"team": "ops"}, "unknown team 'ops'"),
        ({"priority_class": "urgent"}, "unknown priority class 'urgent'"),
        ({"checkpoint": CheckpointSpec()}, "priority class 'training' requires checkpoints"),
        ({"pool": "h200"}, "unknown pool 'h200'"),
        ({"gpus": 16}, "name a pool for a multi-node task"),
        ({"pool": "h100", "gpus": 12}, "not a multiple of its 8 GPUs per node"),
        ({"command": ()}, "needs a command"),
        ({"image": " "}, "needs a container image"),
        ({"task_id": "T_" + "x" * 60}, "does not make a valid Job name"),
        ({"gpus": -1}, "cannot be negative"),
    ],
)
def test_tasks_that_cannot_run_as_jobs_are_refused_with_the_reason(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(JobError, match=message):
        task_job(_policy(), _task(**changes))


def test_a_pool_without_the_teams_quota_is_refused() -> None:
    text = EXAMPLE.read_text().replace("      a100: {gpus: 4, borrow_limit: 4}\n", "", 1)
    with pytest.raises(JobError, match="team 'nlp' has no quota in pool 'a100'"):
        task_job(parse_policy(text), _task(pool="a100", gpus=4))
