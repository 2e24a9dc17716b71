"""The shipped example passes, maps onto the domain exactly, round-trips, and its JSON Schema holds."""

from __future__ import annotations

import json
from decimal import Decimal

import jsonschema
import pytest
import yaml
from policy_helpers import EXAMPLE, MINIMAL, REPO

from gpucommons.domain import UNLIMITED, Cohort, Resources
from gpucommons.policy import dump_policy, load_policy, parse_policy, policy_json_schema


def test_example_policy_passes_and_maps_onto_the_domain() -> None:
    policy = load_policy(EXAMPLE)
    assert [(p.name, p.nodes, p.gpus_per_node) for p in policy.pools] == [("h100", 4, 8), ("a100", 2, 8)]
    assert policy.pool("h100").price_per_gpu_hour == Decimal("2.50")
    assert [c.name for c in sorted(policy.priority_classes, key=lambda c: -c.value)] == [
        "production",
        "interactive",
        "training",
        "experiment",
    ]
    assert policy.priority_class("training").grace_period_s == 300
    assert policy.priority_class("training").min_runtime_s == 600
    assert policy.priority_class("interactive").max_runtime_s == 8 * 3600
    assert policy.default_priority_class == "experiment"
    assert policy.cohorts == (Cohort("company", None), Cohort("research", "company"))
    assert policy.team_names == ("nlp", "vision", "recsys")
    nlp = policy.team("nlp")
    assert [q.pool for q in nlp.quotas] == ["h100", "a100"]  # the order the team lists them
    assert nlp.quotas[0].nominal == Resources(16)
    assert nlp.quotas[0].borrow_limit == Resources(8, UNLIMITED, UNLIMITED)
    assert nlp.quotas[0].lend_limit == Resources(12, UNLIMITED, UNLIMITED)
    assert [q.pool for q in policy.team("vision").quotas] == ["a100", "h100"]
    for pool in policy.pools:  # guaranteed quota fits in every pool
        assert sum(t.nominal(pool.name).gpus for t in policy.teams) <= pool.capacity.gpus
    assert policy.chargeback.borrowed_rate == Decimal("0.8")
    assert policy.identity.finance_groups == ("finance",)


@pytest.mark.parametrize("text", [EXAMPLE.read_text(), MINIMAL], ids=["example", "minimal"])
def test_dump_then_parse_gives_the_same_policy(text: str) -> None:
    policy = parse_policy(text)
    dumped = dump_policy(policy)
    assert parse_policy(dumped) == policy
    assert dump_policy(parse_policy(dumped)) == dumped


def test_dump_keeps_exact_prices_fixed_percentages_and_per_resource_limits() -> None:
    text = (
        MINIMAL.replace("price_per_gpu_hour: 2.50", "price_per_gpu_hour: 0.10").replace(
            "h100: {gpus: 8}",
            "h100: {gpus: 8, cpus: 1.5, borrow_limit: {cpus: 0.25, memory_gib: 0.5}, lend_limit: 3}",
        )
        + "chargeback:\n  admin_cost: {monthly: 1000.5, split: {nlp: 100}}\n  borrowed_rate: 0.75\n"
    )
    policy = parse_policy(text)
    dumped = dump_policy(policy)
    assert "price_per_gpu_hour: 0.10" in dumped
    assert parse_policy(dumped) == policy
    assert policy.chargeback.admin_percentages == (("nlp", Decimal(100)),)


def _example_as_json_data() -> object:
    return yaml.safe_load(EXAMPLE.read_text())


def test_json_schema_validates_the_example() -> None:
    schema = policy_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(_example_as_json_data(), schema, cls=jsonschema.Draft202012Validator)


def test_json_schema_rejects_a_typo() -> None:
    data = _example_as_json_data()
    assert isinstance(data, dict)
    data["teams"][0]["cohrt"] = data["teams"][0].pop("cohort")
    with pytest.raises(jsonschema.ValidationError, match="cohrt"):
        jsonschema.validate(data, policy_json_schema(), cls=jsonschema.Draft202012Validator)


def test_json_schema_describes_every_key() -> None:
    schema = policy_json_schema()
    missing = [
        f"{name}.{key}"
        for name, definition in schema["$defs"].items()
        for key, prop in definition.get("properties", {}).items()
        if "description" not in prop
    ]
    missing += [key for key, prop in schema["properties"].items() if "description" not in prop]
    assert missing == []


def test_shipped_schema_file_is_up_to_date() -> None:
    shipped = json.loads((REPO / "examples" / "commons.schema.json").read_text())
    assert shipped == policy_json_schema(), "run: commons policy schema --out examples/commons.schema.json"
