"""Property: for any valid policy, dump → parse gives the same `Policy` (nothing is lost or rounded)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucommons.policy import dump_policy, parse_policy

NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f"])
PRICES = st.decimals(min_value=0, max_value=100, places=2, allow_nan=False, allow_infinity=False)
DURATIONS = st.sampled_from(["0s", "30s", "90s", "5m", "2h", "7d", 45, 600])


def SLURM_KEYS(pool: str) -> st.SearchStrategy[dict[str, Any]]:
    """A pool's `slurm` key: its own partition, features, or both (never two pools on the same nodes)."""
    features = st.lists(st.sampled_from(["ib", "nvlink", "h100"]), max_size=2, unique=True)
    return st.one_of(
        st.builds(lambda f: {"partition": f"part-{pool}", "features": f}, features),
        st.just({"features": [f"only-{pool}"]}),
    )


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    pool_names = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    pools = [
        {
            "name": f"pool-{name}",
            "gpu_type": "H100",
            "nodes": draw(st.integers(0, 4)),
            "gpus_per_node": draw(st.integers(0, 8)),
            "price_per_gpu_hour": draw(PRICES),
            **({"cpus_per_node": draw(st.integers(0, 64))} if draw(st.booleans()) else {}),
            **({"slurm": draw(SLURM_KEYS(name))} if draw(st.booleans()) else {}),
        }
        for name in pool_names
    ]
    free = {p["name"]: p["nodes"] * p["gpus_per_node"] for p in pools}
    cohort_names = draw(st.lists(NAMES, max_size=3, unique=True))
    cohorts = [
        {"name": f"co-{name}", "parent": f"co-{cohort_names[i - 1]}" if i and draw(st.booleans()) else None}
        for i, name in enumerate(cohort_names)
    ]
    teams = []
    for team_name in draw(st.lists(NAMES, min_size=1, max_size=4, unique=True)):
        quota: dict[str, Any] = {}
        for pool in draw(st.permutations([p["name"] for p in pools])):
            gpus = draw(st.integers(0, free[pool]))
            free[pool] -= gpus
            entry: dict[str, Any] = {"gpus": gpus}
            if draw(st.booleans()):
                entry["borrow_limit"] = draw(st.integers(0, 16))
            if draw(st.booleans()):
                entry["lend_limit"] = {"gpus": draw(st.integers(0, gpus))}
            if draw(st.booleans()):
                entry["memory_gib"] = draw(st.sampled_from([Decimal("0.5"), Decimal(1), Decimal(64)]))
            quota[pool] = entry
        team: dict[str, Any] = {"name": f"team-{team_name}", "quota": quota}
        if cohorts and draw(st.booleans()):
            team["cohort"] = draw(st.sampled_from([c["name"] for c in cohorts]))
        teams.append(team)
    classes = [
        {"name": "high", "value": 10, "grace_period": draw(DURATIONS), "preemptible": draw(st.booleans())},
        {"name": "low", "value": draw(st.integers(-5, 5)), "max_runtime": "7d"},
    ]
    return {
        "cluster": {"name": "prop", "pools": pools},
        "priority_classes": classes,
        "cohorts": cohorts,
        "teams": teams,
        "scheduling": {"usage_half_life": draw(DURATIONS)},
        "chargeback": {"borrowed_rate": draw(st.sampled_from([Decimal("0.5"), Decimal("0.85"), Decimal(1)]))},
    }


class _DecimalDumper(yaml.SafeDumper):
    pass


_DecimalDumper.add_representer(
    Decimal, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:float", f"{value:f}")
)


def _to_yaml(data: dict[str, Any]) -> str:
    return yaml.dump(data, Dumper=_DecimalDumper, sort_keys=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies())
def test_dump_then_parse_is_the_identity_on_valid_policies(data: dict[str, Any]) -> None:
    policy = parse_policy(_to_yaml(data))
    assert parse_policy(dump_policy(policy)) == policy
