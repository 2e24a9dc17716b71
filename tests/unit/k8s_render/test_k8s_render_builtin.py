"""Rendered built-in objects (Namespace, RBAC, NetworkPolicy) validate against Kubernetes' own schemas,
and they isolate teams: deny by default, members bound to their own namespace only."""

from __future__ import annotations

from typing import Any

import pytest
from k8s_render_helpers import EXAMPLE, FULL

from gpucommons.backends.kubernetes import RenderOptions, render
from gpucommons.policy import load_policy, parse_policy

kubernetes_validate = pytest.importorskip("kubernetes_validate")

BUILT_IN = {"Namespace", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "NetworkPolicy"}


@pytest.mark.parametrize("text", [EXAMPLE.read_text(), FULL], ids=["example", "full"])
def test_built_in_kinds_validate_strictly(text: str) -> None:
    objects = [o for o in render(parse_policy(text)) if o["kind"] in BUILT_IN]
    assert {o["kind"] for o in objects} == BUILT_IN
    version = kubernetes_validate.latest_version()
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


def _team_objects(team_ns: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"].get("namespace") == team_ns]


def test_team_namespace_denies_by_default_and_allows_only_its_own_pods_and_dns() -> None:
    objects = render(load_policy(EXAMPLE))
    policies = {
        o["metadata"]["name"]: o["spec"]
        for o in _team_objects("team-nlp", objects)
        if o["kind"] == "NetworkPolicy"
    }
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert policies["allow-same-namespace"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    assert policies["allow-dns"]["egress"][0]["ports"] == [
        {"protocol": "UDP", "port": 53},
        {"protocol": "TCP", "port": 53},
    ]
    internet = policies["allow-internet-egress"]["egress"][0]["to"][0]["ipBlock"]
    assert internet["cidr"] == "0.0.0.0/0" and "10.0.0.0/8" in internet["except"]


def test_internet_egress_can_be_switched_off() -> None:
    objects = render(load_policy(EXAMPLE), RenderOptions(internet_egress=False))
    assert not [o for o in objects if o["metadata"]["name"] == "allow-internet-egress"]


def test_team_groups_are_bound_in_their_own_namespace_only() -> None:
    objects = render(load_policy(EXAMPLE), RenderOptions(group_prefix="oidc:"))
    bindings = [o for o in objects if o["kind"] == "RoleBinding"]
    members = {
        (b["metadata"]["namespace"], b["roleRef"]["name"], s["name"]) for b in bindings for s in b["subjects"]
    }
    assert ("team-nlp", "gpucommons-team-member", "oidc:ml-nlp") in members
    assert ("team-nlp", "gpucommons-team-admin", "oidc:ml-nlp-leads") in members
    assert not any(ns != "team-nlp" and group == "oidc:ml-nlp" for ns, _, group in members)
    namespace = next(o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == "team-nlp")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_finance_reads_queues_but_not_workloads_and_admins_are_cluster_wide() -> None:
    objects = render(load_policy(EXAMPLE))
    finance = next(
        o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gpucommons-finance"
    )
    resources = {r for rule in finance["rules"] for r in rule["resources"]}
    assert "workloads" not in resources and "pods" not in resources  # no task contents
    assert {"clusterqueues", "cohorts"} <= resources
    crbs = {o["metadata"]["name"]: o["subjects"] for o in objects if o["kind"] == "ClusterRoleBinding"}
    assert [s["name"] for s in crbs["gpucommons-platform-admin"]] == ["platform-admins"]
    assert [s["name"] for s in crbs["gpucommons-finance"]] == ["finance"]
