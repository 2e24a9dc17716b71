"""The recorded Kueue shapes (tests/data/kueue/shapes) still validate against the v1beta2 CRD
schemas in tests/data/kueue/crds, and the Job and Pod shapes against Kubernetes' own schemas: the
fake cluster answers with these shapes, so they must stay true to Kueue's API."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
import pytest
import yaml

from gpucommons.testing.repo_data import KUEUE_DATA

SHAPES = KUEUE_DATA / "shapes"
PLURALS = {
    "Workload": "workloads",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "AdmissionCheck": "admissionchecks",
}


@cache
def _schema(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((KUEUE_DATA / "crds" / f"kueue.x-k8s.io_{plural}.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _shapes(api_version: str) -> list[str]:
    names = []
    for path in sorted(SHAPES.glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("apiVersion") == api_version:
            names.append(path.name)
    return names


@pytest.mark.parametrize("name", _shapes("kueue.x-k8s.io/v1beta2"))
def test_every_recorded_kueue_object_validates_against_its_crd(name: str) -> None:
    obj = json.loads((SHAPES / name).read_text())
    schema = _schema(PLURALS[obj["kind"]])
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(obj)


def test_there_are_seventeen_workloads_and_six_setup_objects() -> None:
    kinds = [json.loads((SHAPES / n).read_text())["kind"] for n in _shapes("kueue.x-k8s.io/v1beta2")]
    assert kinds.count("Workload") == 17 and len(kinds) - kinds.count("Workload") == 6


@pytest.mark.parametrize("name", _shapes("batch/v1") + _shapes("v1"))
def test_recorded_jobs_and_pods_validate_against_kubernetes(name: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    kubernetes_validate.validate(json.loads((SHAPES / name).read_text()), "1.36.0", strict=True)


def test_a_broken_shape_is_refused() -> None:
    obj = json.loads((SHAPES / "04-admitted.json").read_text())
    obj["status"]["conditions"][0]["status"] = "Maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(_schema("workloads")).validate(obj)
