"""Against a real cluster with Kueue: only with COMMONS_K8S_LIVE=1 and a working kubeconfig.

Nothing here writes: the policy and a task's Job go through the API server's and Kueue's webhooks as
server-side dry runs. Point KUBECONFIG (and optionally COMMONS_K8S_CONTEXT) at a test cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucommons.backends.kubernetes import checked_render
from gpucommons.backends.kubernetes.apply import ApplyOptions, apply_manifests, server_side_apply
from gpucommons.backends.kubernetes.connection import KubeApi, KubeError, connect
from gpucommons.backends.kubernetes.jobs import JobTask, task_job
from gpucommons.domain.task import CheckpointMode, CheckpointSpec
from gpucommons.policy import load_policy

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "commons.yaml"
pytestmark = [pytest.mark.k8s_live, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def live_api() -> KubeApi:
    if os.environ.get("COMMONS_K8S_LIVE") != "1":
        pytest.skip(
            "live Kubernetes tests run only with COMMONS_K8S_LIVE=1 (and a kubeconfig for a test cluster)"
        )
    kubeconfig = os.environ.get("KUBECONFIG")
    try:
        api = connect(Path(kubeconfig) if kubeconfig else None, os.environ.get("COMMONS_K8S_CONTEXT"))
        api.request("GET", "/version")
    except KubeError as error:
        pytest.skip(f"COMMONS_K8S_LIVE=1 but no usable cluster: {error}")
    return api


def test_the_example_policy_passes_the_clusters_dry_run(live_api: KubeApi) -> None:
    objects = checked_render(load_policy(EXAMPLE))
    report = apply_manifests(live_api, objects, ApplyOptions(dry_run=True))
    assert len(report.results) == len(objects)


def test_a_task_job_passes_the_clusters_dry_run_when_its_namespace_exists(live_api: KubeApi) -> None:
    policy = load_policy(EXAMPLE)
    job = task_job(
        policy,
        JobTask(
            task_id="tlivecheck01",
            team="nlp",
            command=("sleep", "1"),
            image="busybox:1.36",
            gpus=1,
            priority_class="training",
            checkpoint=CheckpointSpec(CheckpointMode.ON_SIGNAL),
        ),
    )
    try:
        live_api.request("GET", "/api/v1/namespaces/team-nlp")
    except KubeError:
        pytest.skip("namespace team-nlp does not exist: apply the example policy first")
    answer = server_side_apply(live_api, job, ApplyOptions(), dry_run=True)
    assert answer["spec"]["suspend"] is True
    assert answer["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
