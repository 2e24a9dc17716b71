"""Rendered objects → YAML files: one for the cluster-scoped objects, one per team, a kustomization.

`kubectl apply -k DIR` (or `kubectl apply -f DIR`) creates them all; the file of a team holds
everything that lives in its namespace, so a team's objects can be reviewed on their own.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpucommons.backends.kubernetes.kueue_rules import kueue_rule_violations
from gpucommons.backends.kubernetes.render import Manifest, RenderError, RenderOptions, render
from gpucommons.domain.model import Policy

CLUSTER_FILE = "cluster.yaml"
KUSTOMIZATION_FILE = "kustomization.yaml"

_HEADER = (
    "# Rendered by `commons k8s render` from the GPU Commons policy of cluster {cluster!r}.\n"
    "# Do not edit: change the policy and render again. Needs Kueue serving kueue.x-k8s.io/v1beta2.\n"
)


def checked_render(policy: Policy, options: RenderOptions | None = None) -> list[Manifest]:
    """`render`, refusing output that Kueue's CEL rules or webhooks would reject."""
    objects = render(policy, options)
    violations = kueue_rule_violations(objects)
    if violations:
        raise RenderError([f"rendered objects break a Kueue rule: {v}" for v in violations])
    return objects


#: libyaml's emitter when PyYAML has it (several times faster on large policies).
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _NoAliasDumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """Shared sub-objects would otherwise come out as `&id001` anchors, which reviewers misread."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(objects: list[Manifest]) -> str:
    text: str = yaml.dump_all(
        objects, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False, width=110
    )
    return text


def render_files(policy: Policy, options: RenderOptions | None = None) -> dict[str, str]:
    """File name → YAML text: `cluster.yaml`, `<namespace>.yaml` per team, `kustomization.yaml`."""
    objects = checked_render(policy, options)
    header = _HEADER.format(cluster=policy.cluster_name)
    cluster_scoped = [o for o in objects if "namespace" not in o["metadata"] and o["kind"] != "Namespace"]
    by_namespace: dict[str, list[Manifest]] = {}
    for obj in objects:
        ns = obj["metadata"]["name"] if obj["kind"] == "Namespace" else obj["metadata"].get("namespace")
        if ns is not None:
            by_namespace.setdefault(ns, []).append(obj)
    files = {CLUSTER_FILE: header + to_yaml(cluster_scoped)}
    for ns, team_objects in by_namespace.items():
        files[f"{ns}.yaml"] = header + to_yaml(team_objects)
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(files),
    }
    files[KUSTOMIZATION_FILE] = header + to_yaml([kustomization])
    return files


def render_stream(policy: Policy, options: RenderOptions | None = None) -> str:
    """All objects as one multi-document YAML stream (for `kubectl apply -f -`)."""
    return _HEADER.format(cluster=policy.cluster_name) + to_yaml(checked_render(policy, options))
