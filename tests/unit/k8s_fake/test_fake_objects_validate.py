"""Everything the fake cluster writes is a valid object: Kueue's against the v1beta2 CRD schemas
(and no field the API server would prune), Jobs and Pods against Kubernetes' schemas (strict)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from fake_k8s_helpers import JOB, NAMESPACE, crd_schema, job_from_shape, setup_nlp
from tests.unit.k8s_render.k8s_render_helpers import unknown_fields

from gpucommons.testing.fake_k8s import FakeCluster

pytestmark = pytest.mark.timeout(120)
PLURALS = {
    "Workload": "workloads",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "AdmissionCheck": "admissionchecks",
    "Cohort": "cohorts",
}


@pytest.fixture(scope="module")
def written() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every object written during a preemption story and a rejected admission check."""
    objects: list[tuple[str, dict[str, Any]]] = []
    for with_check in (False, True):
        with FakeCluster(time_scale=0) as cluster:
            setup_nlp(cluster, with_check=with_check)
            cluster.program(NAMESPACE, JOB, run_seconds=300)
            cluster.create(job_from_shape())
            cluster.advance(5)
            if with_check:
                workload = cluster.workload_of(NAMESPACE, JOB)
                assert workload is not None
                entry = {
                    "name": "gpucommons-governance",
                    "state": "Rejected",
                    "message": "no budget",
                    "lastTransitionTime": cluster.now_text(),
                }
                cluster.patch(
                    "Workload",
                    workload["metadata"]["name"],
                    {"status": {"admissionChecks": [entry]}},
                    NAMESPACE,
                    status=True,
                )
            else:
                preemptor = job_from_shape(job="commons-urgent", gpus=32)
                preemptor["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
                cluster.create(preemptor)
            cluster.advance(400)
            objects += [(kind, obj) for _, kind, obj in cluster.journal or []]
    yield objects


def _distinct(objects: list[tuple[str, dict[str, Any]]], kinds: set[str]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for kind, obj in objects:
        text = json.dumps({k: v for k, v in obj.items() if k != "metadata"}, sort_keys=True)
        if kind in kinds and text not in seen:
            seen.add(text)
            out.append(obj)
    return out


def test_every_kueue_object_written_validates_against_its_crd(
    written: list[tuple[str, dict[str, Any]]],
) -> None:
    objects = _distinct(written, set(PLURALS))
    assert {o["kind"] for o in objects} >= {"Workload", "ClusterQueue", "LocalQueue", "ResourceFlavor"}
    for obj in objects:
        schema = crd_schema(PLURALS[obj["kind"]])
        jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(obj)
        assert unknown_fields(obj, schema) == [], obj["metadata"]["name"]


def test_every_job_and_pod_written_validates_against_kubernetes(
    written: list[tuple[str, dict[str, Any]]],
) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    objects = _distinct(written, {"Job", "Pod", "Node", "Namespace"})
    assert {o["kind"] for o in objects} >= {"Job", "Pod"}
    for obj in objects:
        kubernetes_validate.validate(obj, "1.36.0", strict=True)
