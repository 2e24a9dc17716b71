"""The quota search's space: Σ per pool, units, --max-change bounds, and policies built from a vector."""

from __future__ import annotations

import pytest

from gpucommons.planning.quota_space import MaxChange, apply_vector, build_space
from gpucommons.policy import dump_policy, parse_policy
from gpucommons.testing.builders import make_policy


def _policy(dedicated: bool = False):  # type: ignore[no-untyped-def]
    return (
        make_policy()
        .pool("gpu", nodes=4, gpus_per_node=8)
        .team("nlp", gpu=8, lend_limit=6)
        .team("cv", gpu=16)
        .team("ops", gpu=4, dedicated=dedicated)
        .preemption()
        .build()
    )


DEMAND = {"nlp": {"gpu"}, "cv": {"gpu"}, "ops": {"gpu"}}


def test_projection_hands_out_the_whole_pool_in_proportion() -> None:
    space = build_space(_policy(), DEMAND)
    vector = space.project([1.0, 1.0, 2.0])
    assert sum(vector) == 32
    assert vector == (8, 8, 16)
    assert space.contains(vector)


def test_whole_nodes_make_every_quota_a_multiple_of_the_node() -> None:
    space = build_space(_policy(), DEMAND, whole_nodes=True)
    vector = space.project([3.0, 3.0, 1.0])
    assert all(g % 8 == 0 for g in vector) and sum(vector) == 32
    assert space.move(vector, 0, 1, 1) is not None
    assert all(g % 8 == 0 for g in space.move(vector, 0, 1, 1) or ())


def test_dedicated_teams_and_teams_without_demand_keep_their_quota_outside_the_space() -> None:
    space = build_space(_policy(dedicated=True), {"nlp": {"gpu"}, "ops": {"gpu"}})
    assert [e.team for e in space.entries] == ["nlp"]  # cv: no demand; ops: dedicated
    assert space.pools[0].kept == 20 and space.pools[0].available == 12


def test_max_change_bounds_every_team_around_today_and_unassigned_gpus_go_on_top() -> None:
    space = build_space(_policy(), DEMAND, max_change=MaxChange.parse("25%"))
    bounds = [(e.lower, e.upper) for e in space.entries]
    # 25% of 8, 16, 4 either way, plus the 4 GPUs in nobody's quota today, which anyone may take.
    assert bounds == [(6, 14), (12, 24), (3, 9)]
    vector = space.project([0.0, 0.0, 100.0])  # wants everything for ops: the bounds hold it back
    assert space.contains(vector)
    assert vector[2] == 9 and sum(vector) == 32


def test_moves_keep_the_sum_and_refuse_to_leave_the_bounds() -> None:
    space = build_space(_policy(), DEMAND, max_change=MaxChange(gpus=4))
    today = (8, 16, 8)
    assert space.move(today, 0, 1, 4) == (4, 20, 8)
    assert space.move(today, 0, 1, 5) is None


@pytest.mark.parametrize(("text", "gpus", "fraction"), [("32", 32, None), ("25%", None, 0.25)])
def test_max_change_reads_gpus_or_a_share(text: str, gpus: int | None, fraction: float | None) -> None:
    assert MaxChange.parse(text) == MaxChange(gpus=gpus, fraction=fraction)


@pytest.mark.parametrize("text", ["-1", "lots", "0%", "%"])
def test_max_change_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError, match="--max-change"):
        MaxChange.parse(text)


def test_a_vector_becomes_a_policy_the_checks_accept_with_lend_limits_at_most_nominal() -> None:
    policy = _policy()
    space = build_space(policy, DEMAND)
    proposed = apply_vector(policy, space, (4, 20, 8))
    nlp = proposed.team("nlp").quota("gpu")
    assert nlp is not None and nlp.nominal.gpus == 4 and nlp.lend_limit.gpus == 4  # was 6 > 4
    again = parse_policy(dump_policy(proposed))
    assert [t.nominal("gpu").gpus for t in again.teams] == [4, 20, 8]


def test_no_team_is_cut_below_its_largest_job_unless_it_already_has_less() -> None:
    space = build_space(_policy(), DEMAND, largest_job={("nlp", "gpu"): 12, ("cv", "gpu"): 8})
    lower = {e.team: e.lower for e in space.entries}
    assert lower == {"nlp": 8, "cv": 8, "ops": 0}  # nlp has 8 today: its floor is today's quota
    assert all(v >= 8 for v in space.project([0.0, 0.0, 1.0])[:2])
