"""A policy with every rule the governance check enforces, and Workloads as Kueue makes them."""

from __future__ import annotations

import copy
import json
from typing import Any

from gpucommons.domain.model import Policy
from gpucommons.policy import parse_policy
from gpucommons.testing.repo_data import KUEUE_DATA

#: nlp: hard budget of 1,000 USD; vision: soft budget; recsys: none. `production` is open to team
#: admins of recsys only, `vision_only` to vision, `hotfix` is budget exempt.
POLICY = """\
cluster:
  name: gov
  pools:
    - {name: h100, gpu_type: H100, nodes: 2, gpus_per_node: 8, price_per_gpu_hour: 2.50}
priority_classes:
  - {name: production, value: 1000, preemptible: false, teams: [recsys], roles: [team_admin]}
  - {name: training, value: 500}
  - {name: hotfix, value: 900, budget_exempt: true}
  - {name: vision_only, value: 600, teams: [vision]}
default_priority_class: training
teams:
  - name: nlp
    quota: {h100: {gpus: 8}}
    budget: {monthly: 1000, enforce: hard}
  - name: vision
    quota: {h100: {gpus: 4}}
    budget: {monthly: 1000, enforce: soft}
  - name: recsys
    quota: {h100: {gpus: 4}}
"""

#: 1,000 USD in cents: nlp's budget exactly.
SPENT = 100_000


def policy(text: str = POLICY) -> Policy:
    return parse_policy(text)


def workload(
    namespace: str = "team-nlp", priority_class: str | None = "training", **ref: str
) -> dict[str, Any]:
    """The recorded Workload with its check Pending (10-admission-check-pending.json), moved to
    `namespace` and `priority_class` (None: a Job without the priority-class label)."""
    obj: dict[str, Any] = json.loads((KUEUE_DATA / "shapes" / "10-admission-check-pending.json").read_text())
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = namespace
    if priority_class is None:
        obj["spec"].pop("priorityClassRef")
    else:
        obj["spec"]["priorityClassRef"]["name"] = priority_class
        obj["spec"]["priorityClassRef"].update(ref)
    return obj
