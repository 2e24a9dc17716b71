"""Shared data for the render tests: the Kueue CRD schemas and a policy that uses every feature."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpucommons.testing.repo_data import kueue_file

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "commons.yaml"

#: Everything the renderer can express: nested cohorts with quotas of their own, CPU/memory quotas,
#: a dedicated team,
#: every preemption word, fair share, strict FIFO.
FULL = """\
cluster:
  name: full
  pools:
    - {name: h100, gpu_type: H100, nodes: 4, gpus_per_node: 8, cpus_per_node: 96, memory_gib_per_node: 1024}
    - {name: A100_80g, gpu_type: A100, nodes: 2, gpus_per_node: 8}
priority_classes:
  - name: production
    value: 1000
    preemptible: false
    teams: [nlp, recsys]
    roles: [team_admin, platform_admin]
  - {name: batch, value: -5, grace_period: 2m, checkpoint_required: true, budget_exempt: true}
cohorts:
  - name: company
    quotas: {A100_80g: {gpus: 2}}
  - name: research
    parent: company
    quotas: {h100: {gpus: 8, cpus: 16, borrow_limit: 4, lend_limit: {gpus: 6, memory_gib: 64}}}
  - {name: Vision_Lab, parent: research}
teams:
  - name: nlp
    groups: [ml-nlp]
    cohort: research
    quota:
      h100: {gpus: 8, cpus: 64.5, memory_gib: 512,
             borrow_limit: {gpus: 8, cpus: 0.5}, lend_limit: {memory_gib: 256}}
      A100_80g: {gpus: 4}
    preemption:
      {reclaim: any, borrow_within_cohort: lower_priority, within_team: lower_or_newer_equal_priority}
    fair_share_weight: 2.5
  - name: vision
    cohort: Vision_Lab
    quota:
      A100_80g: {gpus: 4, lend_limit: 0}
    preemption: {reclaim: lower_priority, within_team: lower_priority}
  - name: recsys
    isolation: dedicated
    admin_groups: [recsys-leads]
    quota:
      h100: {gpus: 16, cpus: 128}
  - name: etl
    quota:
      h100: {gpus: 0}
scheduling: {mode: fair_share, queueing: strict_fifo}
identity: {admin_groups: [platform-admins], finance_groups: [finance]}
"""


@cache
def crd_schema(kind_plural: str) -> dict[str, Any]:
    """The v1beta2 openAPIV3Schema of a Kueue CRD, e.g. `clusterqueues`."""
    crd = yaml.safe_load(kueue_file("crds", f"kueue.x-k8s.io_{kind_plural}.yaml").read_text())
    for version in crd["spec"]["versions"]:
        if version["name"] == "v1beta2":
            schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
            return schema
    raise LookupError(f"no v1beta2 schema for {kind_plural}")


KUEUE_PLURALS = {
    "AdmissionCheck": "admissionchecks",
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "LocalQueue": "localqueues",
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys of `obj` that `schema` does not declare. The API server prunes them silently, so a typo in
    the renderer would vanish without this check."""
    found: list[str] = []
    if isinstance(obj, dict) and "properties" in schema:
        for key, value in obj.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(value, schema["properties"][key], f"{path}.{key}")
    elif isinstance(obj, list) and "items" in schema:
        for index, item in enumerate(obj):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found
