"""Rendered Kueue objects: valid against the v1beta2 CRD schemas and the CEL/webhook rules, and a
one-to-one image of the policy."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from k8s_render_helpers import EXAMPLE, FULL, KUEUE_PLURALS, crd_schema, unknown_fields

from gpucommons.backends.kubernetes import RenderError, RenderOptions, kueue_rule_violations, render
from gpucommons.policy import load_policy, parse_policy

POLICIES = {"example": lambda: load_policy(EXAMPLE), "full": lambda: parse_policy(FULL)}


def _objects(which: str) -> list[dict[str, Any]]:
    return render(POLICIES[which]())


def _one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


@pytest.mark.parametrize("which", POLICIES)
def test_every_kueue_object_validates_against_its_crd_schema(which: str) -> None:
    kueue = [o for o in _objects(which) if o["apiVersion"] == "kueue.x-k8s.io/v1beta2"]
    assert {o["kind"] for o in kueue} == set(KUEUE_PLURALS)
    for obj in kueue:
        schema = crd_schema(KUEUE_PLURALS[obj["kind"]])
        # Not `jsonschema.validate`: it first checks the schema, and the AdmissionCheck CRD has a Go
        # regex (`^(?i)…`, for `parameters.kind`) that Python's `re` refuses.
        jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(obj)
        assert unknown_fields(obj, schema) == [], obj["metadata"]["name"]


@pytest.mark.parametrize("which", POLICIES)
def test_rendered_objects_pass_the_cel_and_webhook_rules(which: str) -> None:
    assert kueue_rule_violations(_objects(which)) == []


def test_cluster_queue_maps_quota_and_limits_one_to_one() -> None:
    nlp = _one(_objects("example"), "ClusterQueue", "nlp")["spec"]
    assert nlp["cohortName"] == "research"
    assert nlp["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-nlp"}}
    group = nlp["resourceGroups"][0]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    assert [f["name"] for f in group["flavors"]] == ["h100", "a100"]  # the team's order
    assert group["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 8, "lendingLimit": 12}
    ]
    # absent lend limit = lends all: no lendingLimit at all
    assert group["flavors"][1]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 4}
    ]


def test_cpu_and_memory_quotas_become_kubernetes_quantities_in_every_queue() -> None:
    objects = _objects("full")
    nlp = _one(objects, "ClusterQueue", "nlp")["spec"]["resourceGroups"][0]
    assert nlp["coveredResources"] == ["nvidia.com/gpu", "cpu", "memory"]
    h100 = nlp["flavors"][0]["resources"]
    assert h100 == [
        {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 8},
        {"name": "cpu", "nominalQuota": "64500m", "borrowingLimit": "500m"},
        {"name": "memory", "nominalQuota": "512Gi", "lendingLimit": "256Gi"},
    ]
    vision = _one(objects, "ClusterQueue", "vision")["spec"]["resourceGroups"][0]
    assert [r["name"] for r in vision["flavors"][0]["resources"]] == ["nvidia.com/gpu", "cpu", "memory"]
    assert vision["flavors"][0]["resources"][0] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 4,
        "lendingLimit": 0,
    }


@pytest.mark.parametrize(
    ("words", "kueue"),
    [
        (
            {
                "reclaim": "any",
                "borrow_within_cohort": "lower_priority",
                "within_team": "lower_or_newer_equal_priority",
            },
            {
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority"},
                "withinClusterQueue": "LowerOrNewerEqualPriority",
            },
        ),
        (
            {"reclaim": "lower_priority", "within_team": "lower_priority"},
            {
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": {"policy": "Never"},
                "withinClusterQueue": "LowerPriority",
            },
        ),
        (
            {},
            {
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "Never"},
                "withinClusterQueue": "Never",
            },
        ),
    ],
)
def test_preemption_words_map_one_to_one_onto_kueue(words: dict[str, str], kueue: dict[str, Any]) -> None:
    flow = ", ".join(f"{k}: {v}" for k, v in words.items())
    rules = "{reclaim: any, borrow_within_cohort: lower_priority, within_team: lower_or_newer_equal_priority}"
    text = FULL.replace(f"preemption:\n      {rules}", f"preemption: {{{flow}}}")
    assert text != FULL
    assert _one(render(parse_policy(text)), "ClusterQueue", "nlp")["spec"]["preemption"] == kueue


def test_cohorts_nest_with_kubernetes_names() -> None:
    objects = _objects("full")
    assert _one(objects, "Cohort", "research")["spec"]["parentName"] == "company"
    assert _one(objects, "Cohort", "vision-lab")["spec"] == {"parentName": "research"}
    assert "parentName" not in _one(objects, "Cohort", "company")["spec"]
    assert _one(objects, "Cohort", "cluster")["spec"] == {}  # etl names no cohort
    assert _one(objects, "ClusterQueue", "vision")["spec"]["cohortName"] == "vision-lab"
    assert _one(objects, "ClusterQueue", "etl")["spec"]["cohortName"] == "cluster"


def test_cohort_quota_becomes_the_cohorts_resource_groups_with_its_limits() -> None:
    objects = _objects("full")
    research = _one(objects, "Cohort", "research")["spec"]["resourceGroups"]
    assert research == [
        {
            "coveredResources": ["nvidia.com/gpu", "cpu", "memory"],
            "flavors": [
                {
                    "name": "h100",
                    "resources": [
                        {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4, "lendingLimit": 6},
                        {"name": "cpu", "nominalQuota": 16},  # a number as limit is GPUs only
                        {"name": "memory", "nominalQuota": "0Gi", "lendingLimit": "64Gi"},
                    ],
                }
            ],
        }
    ]
    company = _one(objects, "Cohort", "company")["spec"]["resourceGroups"][0]["flavors"]
    assert company == [
        {
            "name": "a100-80g",
            "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": 2},
                {"name": "cpu", "nominalQuota": 0},
                {"name": "memory", "nominalQuota": "0Gi"},
            ],
        }
    ]


def test_dedicated_team_gets_its_own_tainted_flavor_and_no_cohort() -> None:
    objects = _objects("full")
    cq = _one(objects, "ClusterQueue", "recsys")["spec"]
    assert "cohortName" not in cq
    flavor = cq["resourceGroups"][0]["flavors"][0]
    assert flavor["name"] == "h100-recsys"
    assert all("borrowingLimit" not in r and "lendingLimit" not in r for r in flavor["resources"])
    rf = _one(objects, "ResourceFlavor", "h100-recsys")["spec"]
    assert rf["nodeLabels"] == {"gpucommons.io/pool": "h100", "gpucommons.io/dedicated-to": "recsys"}
    assert rf["nodeTaints"] == [
        {"key": "gpucommons.io/dedicated-to", "value": "recsys", "effect": "NoSchedule"}
    ]
    assert rf["tolerations"][0]["operator"] == "Equal"


def test_flavors_select_their_pool_nodes_by_label() -> None:
    options = RenderOptions(pool_label="example.com/pool", gpu_resource="amd.com/gpu")
    objects = render(parse_policy(FULL), options)
    assert _one(objects, "ResourceFlavor", "a100-80g")["spec"] == {
        "nodeLabels": {"example.com/pool": "a100-80g"}
    }
    assert (
        _one(objects, "ClusterQueue", "nlp")["spec"]["resourceGroups"][0]["coveredResources"][0]
        == "amd.com/gpu"
    )


def test_priority_classes_and_scheduling_settings() -> None:
    objects = _objects("full")
    batch = _one(objects, "WorkloadPriorityClass", "batch")
    assert batch["value"] == -5
    assert "checkpoint required" in batch["description"] and "grace period 2m" in batch["description"]
    assert "never preempted" in _one(objects, "WorkloadPriorityClass", "production")["description"]
    nlp = _one(objects, "ClusterQueue", "nlp")["spec"]
    assert nlp["queueingStrategy"] == "StrictFIFO"
    assert nlp["fairSharing"] == {"weight": "2.5"}


def test_who_may_use_a_class_travels_as_annotations_for_the_admission_check() -> None:
    objects = _objects("full")
    production = _one(objects, "WorkloadPriorityClass", "production")
    assert production["metadata"]["annotations"] == {
        "gpucommons.io/allowed-teams": "nlp,recsys",
        "gpucommons.io/allowed-namespaces": "team-nlp,team-recsys",
        "gpucommons.io/allowed-roles": "team_admin,platform_admin",
    }
    assert "teams nlp recsys" in production["description"]
    assert "annotations" not in _one(objects, "WorkloadPriorityClass", "batch")["metadata"]


def test_every_cluster_queue_lists_the_governance_admission_check() -> None:
    objects = _objects("full")
    check = _one(objects, "AdmissionCheck", "gpucommons-governance")
    assert check["spec"] == {"controllerName": "gpucommons.io/governance"}
    assert check["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpucommons"}
    queues = [o for o in objects if o["kind"] == "ClusterQueue"]
    assert len(queues) == 4
    strategy = {"admissionChecks": [{"name": "gpucommons-governance"}]}
    for cq in queues:  # the recorded shape: cfg-clusterqueue-nlp-with-admission-check.json
        assert cq["spec"]["admissionChecksStrategy"] == strategy
    kinds = [o["kind"] for o in objects]
    assert kinds.index("AdmissionCheck") < kinds.index("ClusterQueue")


def test_the_governance_check_can_be_turned_off() -> None:
    objects = render(parse_policy(FULL), RenderOptions(governance_check=False))
    assert not [o for o in objects if o["kind"] == "AdmissionCheck"]
    assert not [o for o in objects if "admissionChecksStrategy" in o.get("spec", {})]
    assert kueue_rule_violations(objects) == []


def test_each_team_namespace_has_a_default_local_queue_for_its_cluster_queue() -> None:
    objects = _objects("example")
    queues = [o for o in objects if o["kind"] == "LocalQueue"]
    assert {
        (q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in queues
    } == {
        ("team-nlp", "default", "nlp"),
        ("team-vision", "default", "vision"),
        ("team-recsys", "default", "recsys"),
    }


def test_names_that_collide_in_kubernetes_are_refused() -> None:
    text = FULL.replace("  - name: etl\n", "  - name: NLP\n")
    with pytest.raises(RenderError, match="'nlp' and 'NLP' both become 'nlp'"):
        render(parse_policy(text))


def test_too_long_namespace_is_refused() -> None:
    with pytest.raises(RenderError, match="namespace"):
        render(parse_policy(FULL), RenderOptions(namespace_prefix="x" * 60 + "-"))


def test_render_does_not_depend_on_anything_but_its_input() -> None:
    assert render(parse_policy(FULL)) == render(parse_policy(FULL))


# --- the rule checker catches what the schemas miss -------------------------------------------------


def _mutated(change: Any) -> list[str]:
    objects = copy.deepcopy(_objects("full"))
    change(objects)
    return kueue_rule_violations(objects)


def _cq(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return _one(objects, "ClusterQueue", name)["spec"]


def test_rule_borrowing_limit_without_cohort_is_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        _cq(objects, "recsys")["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 1

    assert any("borrowingLimit without a cohort" in v for v in _mutated(change))


def test_rule_borrow_within_cohort_without_reclaim_is_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        _cq(objects, "nlp")["preemption"]["reclaimWithinCohort"] = "Never"

    assert any("borrowWithinCohort without reclaimWithinCohort" in v for v in _mutated(change))


def test_rule_lending_limit_above_nominal_is_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        _cq(objects, "nlp")["resourceGroups"][0]["flavors"][0]["resources"][2]["lendingLimit"] = "513Gi"

    assert any("lendingLimit above nominalQuota" in v for v in _mutated(change))


def test_rule_flavor_resources_out_of_order_are_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        resources = _cq(objects, "nlp")["resourceGroups"][0]["flavors"][0]["resources"]
        resources.reverse()

    assert any("not coveredResources" in v for v in _mutated(change))


def test_rule_dangling_references_are_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        _cq(objects, "nlp")["cohortName"] = "nowhere"
        _cq(objects, "nlp")["resourceGroups"][0]["flavors"][0]["name"] = "h200"

    found = _mutated(change)
    assert any("unknown cohort nowhere" in v for v in found)
    assert any("unknown flavor h200" in v for v in found)


def test_rule_a_queue_naming_a_check_that_is_not_rendered_is_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        objects[:] = [o for o in objects if o["kind"] != "AdmissionCheck"]

    assert "ClusterQueue nlp: unknown admission check gpucommons-governance" in _mutated(change)


def test_rule_cohort_cycle_is_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        _one(objects, "Cohort", "company")["spec"]["parentName"] = "vision-lab"

    assert any("cycle" in v for v in _mutated(change))


def test_rule_cohort_limits_without_a_parent_are_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        company = _one(objects, "Cohort", "company")["spec"]
        company["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = 1

    assert "Cohort company: lendingLimit without a parent" in _mutated(change)


def test_rule_cohort_flavor_resources_out_of_order_are_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        _one(objects, "Cohort", "research")["spec"]["resourceGroups"][0]["flavors"][0]["resources"].reverse()

    assert any(v.startswith("Cohort research flavor h100") for v in _mutated(change))


def test_rule_bad_toleration_is_caught() -> None:
    def change(objects: list[dict[str, Any]]) -> None:
        _one(objects, "ResourceFlavor", "h100-recsys")["spec"]["tolerations"][0]["operator"] = "Exists"

    assert any("Exists has a value" in v for v in _mutated(change))
