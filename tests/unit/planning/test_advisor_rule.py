"""The advisor's rule: targets, filling the pool, borrow and lend limits, and a valid proposed policy."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucommons.domain.model import Policy
from gpucommons.domain.resources import Resources
from gpucommons.planning.advisor import (
    Advice,
    AdvisorRule,
    TeamAdvice,
    advise,
    proposed_policy_text,
    samples_history,
    trace_history,
)
from gpucommons.planning.advisor_report import advice_to_data
from gpucommons.planning.usage_history import Demand, UsageFileError, UsageHistory
from gpucommons.policy import parse_policy
from gpucommons.sim.jobs import SimJob
from gpucommons.testing.builders import make_policy

Histogram = tuple[tuple[int, float], ...]


def history(*demands: tuple[str, Histogram], pool: str | None = None) -> UsageHistory:
    return UsageHistory(
        "samples", 0, 300, tuple(Demand(team, pool, hist) for team, hist in demands), step_s=1
    )


def team_advice(advice: Advice, team: str, pool: str | None = None) -> TeamAdvice:
    return next(t for t in advice.teams if t.team == team and (pool is None or t.pool == pool))


def nominal(advice: Advice) -> dict[str, int]:
    return {t.team: t.proposed.nominal for t in advice.teams}


def test_targets_that_fit_are_given_and_the_spare_goes_where_demand_exceeds_them() -> None:
    policy = make_policy().pool("gpu", nodes=5, gpus_per_node=8).team("a", gpu=8).team("b", gpu=8).build()
    # a: idle 1/3, 8 GPUs 1/3, 16 GPUs 1/3 → active p50 8, p95 16.  b: always 4.
    a: Histogram = ((0, 100.0), (8, 100.0), (16, 100.0))
    b: Histogram = ((4, 300.0),)
    advice = advise(policy, history(("a", a), ("b", b)))
    # Σ targets 12 of 40. a is raised to its p95 (16); no peak is above a p95, and the 20 GPUs
    # left are split 2:1 by the targets (8:4): 13.3 and 6.7, so a 16 + 13, b 4 + 7.
    assert nominal(advice) == {"a": 29, "b": 11}
    assert sum(nominal(advice).values()) == 40
    ta = team_advice(advice, "a")
    assert ta.demand is not None
    assert (ta.demand.target, ta.demand.p50, ta.demand.p95, ta.demand.peak) == (8, 8, 16, 16)
    assert (ta.borrow_at_peak, ta.proposed.lend_limit) == (0, 29)  # never needed more; lends all
    tb = team_advice(advice, "b")
    # b asked for 4 GPUs all of the time: it keeps them and lends the other 7.
    assert (tb.borrow_at_peak, tb.proposed.lend_limit) == (0, 7)
    assert ta.proposed.borrow_limit is tb.proposed.borrow_limit is None  # left as the policy had them


def test_spare_gpus_follow_p95_above_target_before_anything_else() -> None:
    policy = make_policy().pool("gpu", nodes=1, gpus_per_node=8).team("a", gpu=4).team("b", gpu=4).build()
    a: Histogram = ((2, 50.0), (6, 50.0))  # p50 2, p95 6
    b: Histogram = ((2, 100.0),)  # p50 = p95 = 2
    advice = advise(policy, history(("a", a), ("b", b)))
    assert nominal(advice) == {"a": 6, "b": 2}  # spare 4 → all to a, the only one above its target


def test_targets_above_capacity_are_scaled_down_by_largest_remainder() -> None:
    policy = (
        make_policy().pool("gpu", nodes=1, gpus_per_node=8).team("a", gpu=3).team("b", gpu=3).team("c", gpu=2)
    ).build()
    advice = advise(policy, history(("a", ((6, 10.0),)), ("b", ((4, 10.0),)), ("c", ((2, 10.0),))))
    # Exact shares 4, 2.67, 1.33: floors 4, 2, 1 and the last GPU to the largest remainder (b).
    assert nominal(advice) == {"a": 4, "b": 3, "c": 1}
    assert team_advice(advice, "a").borrow_at_peak == 2  # peak 6 − nominal 4


def test_rounding_ties_go_to_the_team_name_that_sorts_first() -> None:
    policy = make_policy().pool("gpu", nodes=1, gpus_per_node=3).team("b", gpu=1).team("a", gpu=1).build()
    advice = advise(policy, history(("a", ((1, 10.0),)), ("b", ((1, 10.0),))))
    assert nominal(advice) == {"a": 2, "b": 1}
    assert advise(policy, history(("b", ((1, 10.0),)), ("a", ((1, 10.0),)))).teams == advice.teams


def test_borrow_limits_are_left_alone_unless_asked_for() -> None:
    policy = (
        make_policy().pool("gpu", nodes=2, gpus_per_node=8).team("a", gpu=8, borrow_limit=3).team("b", gpu=8)
    ).build()
    a: Histogram = ((4, 96.0), (30, 4.0))  # p95 4, a rare peak of 30 (above the pool)
    advice = advise(policy, history(("a", a), ("b", ((4, 100.0),))))
    ta = team_advice(advice, "a")
    assert ta.proposed.nominal == 12  # its target 4 + the 8 spare GPUs (only a peaks above its p95)
    assert ta.proposed.borrow_limit == 3
    assert ta.borrow_at_peak == 4  # up to the whole pool
    assert "borrow limit of 3 keeps it below its peak" in ta.reason


def test_asked_for_borrow_limits_reach_the_peak_but_never_past_what_the_others_hold() -> None:
    policy = make_policy().pool("gpu", nodes=2, gpus_per_node=8).team("a", gpu=8).team("b", gpu=8).build()
    a: Histogram = ((4, 90.0), (100, 10.0))  # a peak far above the pool (demand can queue)
    advice = advise(policy, history(("a", a), ("b", ((4, 100.0),))), AdvisorRule(limit_borrowing=True))
    ta = team_advice(advice, "a")
    assert ta.proposed.borrow_limit == ta.borrow_at_peak == 16 - ta.proposed.nominal
    assert ta.proposed.ceiling == 16
    assert team_advice(advice, "b").proposed.borrow_limit == 0  # never asked for more than its nominal


def test_peak_and_reserve_percentiles_are_knobs() -> None:
    policy = make_policy().pool("gpu", nodes=4, gpus_per_node=8).team("a", gpu=16).team("b", gpu=16).build()
    a: Histogram = ((2, 10.0), (4, 80.0), (30, 10.0))
    rule = AdvisorRule(peak_percentile=90, reserve_percentile=10)
    ta = team_advice(advise(policy, history(("a", a), ("b", ((8, 100.0),))), rule), "a")
    assert ta.demand is not None
    assert (ta.demand.peak, ta.demand.reserve) == (4, 2)
    assert ta.proposed.lend_limit == ta.proposed.nominal - 2


def test_include_idle_takes_percentiles_over_all_of_the_time() -> None:
    policy = make_policy().pool("gpu", nodes=2, gpus_per_node=8).team("a", gpu=8).team("b", gpu=8).build()
    a: Histogram = ((0, 80.0), (8, 20.0))  # a busy team 20% of the time
    b: Histogram = ((2, 100.0),)
    active = advise(policy, history(("a", a), ("b", b)))
    overall = advise(policy, history(("a", a), ("b", b)), AdvisorRule(include_idle=True))
    assert team_advice(active, "a").demand.target == 8  # type: ignore[union-attr]
    assert team_advice(overall, "a").demand.target == 0  # type: ignore[union-attr]
    # Active: targets 8 and 2, the 6 spare GPUs split 4:1 → a 13, b 3. Over all of the time a's
    # target is 0: it gets only its p95 (8) and b the rest.
    assert nominal(active) == {"a": 13, "b": 3}
    assert nominal(overall) == {"a": 8, "b": 8}


def test_whole_nodes_hands_out_multiples_of_the_node_size() -> None:
    policy = (
        make_policy().pool("gpu", nodes=4, gpus_per_node=8).team("a", gpu=8).team("b", gpu=8).team("c", gpu=8)
    ).build()
    hist = history(("a", ((11, 10.0),)), ("b", ((9, 10.0),)), ("c", ((3, 10.0),)))
    advice = advise(policy, hist, AdvisorRule(whole_nodes=True))
    assert all(n % 8 == 0 for n in nominal(advice).values())
    assert sum(nominal(advice).values()) == 32


def test_dedicated_teams_and_teams_without_history_keep_their_quota() -> None:
    policy = (
        make_policy()
        .pool("gpu", nodes=4, gpus_per_node=8)
        .team("a", gpu=8)
        .team("quiet", gpu=8)
        .team("own", gpu=8, dedicated=True)
        .build()
    )
    advice = advise(policy, history(("a", ((20, 10.0),)), ("own", ((30, 10.0),)), ("stranger", ((5, 10.0),))))
    assert {t.team: t.status for t in advice.teams} == {"a": "sized", "quiet": "kept", "own": "kept"}
    assert nominal(advice) == {"a": 16, "quiet": 8, "own": 8}  # a gets what the kept quotas leave
    assert "no demand for pool gpu" in team_advice(advice, "quiet").reason
    assert "dedicated" in team_advice(advice, "own").reason
    assert [(i.team, i.why) for i in advice.ignored] == [("stranger", "not a team of the policy")]
    assert advice.pools[0].kept == 16


def test_trace_jobs_without_a_pool_count_in_the_teams_first_pool_and_new_pools_get_an_entry() -> None:
    policy = (
        make_policy()
        .pool("h100", nodes=1, gpus_per_node=8)
        .pool("a100", nodes=1, gpus_per_node=8)
        .team("a", h100=4)
        .team("b", h100=4, a100=8)
        .build()
    )
    jobs = [
        SimJob("1", "a", 0, 100, Resources(gpus=2)),
        SimJob("2", "a", 0, 100, Resources(gpus=3), pool="a100"),
        SimJob("3", "b", 0, 100, Resources(gpus=1)),
    ]
    advice = advise(policy, trace_history(policy, jobs))
    assert team_advice(advice, "a", "h100").demand.peak == 2  # type: ignore[union-attr]
    assert team_advice(advice, "a", "a100").current.nominal == 0  # no quota there before
    proposed = advice.proposed.team("a")
    assert [q.pool for q in proposed.quotas] == ["h100", "a100"]  # the new pool is tried last
    assert team_advice(advice, "b", "a100").status == "kept"  # b asked for nothing in a100


def test_the_proposed_policy_changes_only_gpu_quotas_and_passes_the_policy_checks() -> None:
    base = (
        make_policy().pool("gpu", nodes=2, gpus_per_node=8).team("a", gpu=8, borrow_limit=2).team("b", gpu=8)
    )
    policy = base.build()
    with_cpus = replace(
        policy.teams[0],
        quotas=(replace(policy.teams[0].quotas[0], nominal=Resources(gpus=8, cpu_milli=16000)),),
    )
    policy = replace(policy, teams=(with_cpus, policy.teams[1]), _index={})
    advice = advise(policy, history(("a", ((12, 10.0),)), ("b", ((4, 10.0),))))
    text = proposed_policy_text(advice)
    reread = parse_policy(text)
    assert reread == advice.proposed
    assert reread.priority_classes == policy.priority_classes
    assert reread.team("a").quotas[0].nominal.cpu_milli == 16000
    assert reread.team("a").quotas[0].nominal.gpus == nominal(advice)["a"]


def test_the_reason_says_the_figures_in_words() -> None:
    policy = make_policy().pool("gpu", nodes=2, gpus_per_node=8).team("a", gpu=8).team("b", gpu=8).build()
    demand = Demand("a", None, ((0, 10.0), (6, 45.0), (10, 45.0)), censored_s=20.0)
    advice = advise(policy, UsageHistory("samples", 0, 100, (demand, Demand("b", None, ((2, 100.0),)))))
    reason = team_advice(advice, "a").reason
    assert reason.startswith("a: asks for GPUs 90% of the time; demand while active p50 6, p95 10, peak 10")
    assert "pending 20% of the time" in reason
    assert f"nominal 8 → {nominal(advice)['a']}" in reason


def test_the_json_form_carries_every_figure() -> None:
    policy = make_policy().pool("gpu", nodes=1, gpus_per_node=8).team("a", gpu=8).build()
    data = advice_to_data(advise(policy, history(("a", ((3, 10.0),)))))
    assert data["pools"] == [
        {
            "pool": "gpu",
            "capacity_gpus": 8,
            "kept_gpus": 0,
            "targets_gpus": 3,
            "nominal_before": 8,
            "nominal_after": 8,
        }
    ]
    team = data["teams"][0]
    assert team["current"] == {"nominal": 8, "borrow_limit": None, "lend_limit": None}
    assert team["proposed"] == {"nominal": 8, "borrow_limit": None, "lend_limit": 5}
    assert team["borrow_at_peak"] == 0
    assert team["demand"]["p50"] == 3 and team["covered_after"] == 1


def test_a_percentile_outside_0_to_100_is_refused() -> None:
    with pytest.raises(ValueError, match="percentile must be between 0 and 100"):
        AdvisorRule(percentile=120)


@st.composite
def policies_and_histories(draw: st.DrawFn) -> tuple[Policy, UsageHistory, AdvisorRule]:
    builder = make_policy()
    pools = []
    for index in range(draw(st.integers(1, 2))):
        name, nodes, per_node = f"p{index}", draw(st.integers(1, 6)), draw(st.sampled_from([1, 4, 8]))
        builder.pool(name, nodes=nodes, gpus_per_node=per_node)
        pools.append((name, nodes * per_node))
    left = {name: capacity for name, capacity in pools}
    demands = []
    for index in range(draw(st.integers(1, 6))):
        team = f"t{index}"
        builder.team(team)
        for name, _ in pools:
            if draw(st.booleans()):
                gpus = draw(st.integers(0, left[name]))
                left[name] -= gpus
                builder.quota(name, gpus)
        for name, capacity in pools:
            if draw(st.booleans()):
                levels = draw(st.lists(st.integers(0, 2 * capacity), min_size=1, max_size=5, unique=True))
                hist = tuple((g, float(draw(st.integers(1, 100)))) for g in sorted(levels))
                demands.append(Demand(team, name, hist))
    rule = AdvisorRule(
        percentile=draw(st.sampled_from([10.0, 50.0, 90.0])),
        include_idle=draw(st.booleans()),
        peak_percentile=draw(st.sampled_from([90.0, 100.0])),
        whole_nodes=draw(st.booleans()),
        limit_borrowing=draw(st.booleans()),
    )
    return builder.build(), UsageHistory("trace", 0, 100, tuple(demands)), rule


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies_and_histories())
def test_any_history_gives_a_policy_within_capacity_that_passes_the_checks(
    case: tuple[Policy, UsageHistory, AdvisorRule],
) -> None:
    policy, usage, rule = case
    advice = advise(policy, usage, rule)
    for pool in policy.pools:
        entries = [t for t in advice.teams if t.pool == pool.name]
        assert sum(t.proposed.nominal for t in entries) <= pool.capacity.gpus
        for t in entries:
            if t.status == "kept":
                assert t.proposed == t.current
                continue
            assert t.proposed.lend_limit is not None
            assert 0 <= t.proposed.lend_limit <= t.proposed.nominal
            assert 0 <= t.borrow_at_peak <= pool.capacity.gpus - t.proposed.nominal
            if rule.limit_borrowing:
                assert t.proposed.borrow_limit == t.borrow_at_peak
            else:
                assert t.proposed.borrow_limit == t.current.borrow_limit
            if rule.whole_nodes:
                assert t.proposed.nominal % pool.gpus_per_node == 0
    assert parse_policy(proposed_policy_text(advice)) == advice.proposed


def test_a_usage_file_with_a_pool_column_is_sized_per_pool() -> None:
    policy = (
        make_policy()
        .pool("h100", nodes=1, gpus_per_node=8)
        .pool("a100", nodes=1, gpus_per_node=8)
        .team("a", h100=4, a100=4)
        .team("b", h100=4, a100=4)
        .build()
    )
    lines = [
        "time_s,team,pool,running_gpus,pending_gpus\n",
        "0,a,,6,0\n",  # no pool: a's first pool, h100
        "0,a,a100,1,0\n",
        "0,b,h100,2,0\n",
        "0,b,a100,7,0\n",
    ]
    usage = samples_history(policy, lines, "usage.csv")
    assert {(d.team, d.pool, d.peak) for d in usage.demands} == {
        ("a", "h100", 6),
        ("a", "a100", 1),
        ("b", "h100", 2),
        ("b", "a100", 7),
    }
    advice = advise(policy, usage)
    assert {(t.team, t.pool): t.proposed.nominal for t in advice.teams} == {
        ("a", "h100"): 6,
        ("b", "h100"): 2,
        ("a", "a100"): 1,
        ("b", "a100"): 7,
    }


def test_a_row_repeating_a_team_in_the_same_pool_is_refused() -> None:
    policy = make_policy().pool("h100", nodes=1, gpus_per_node=8).team("a", h100=4).build()
    lines = ["time_s,team,pool,running_gpus,pending_gpus\n", "0,a,,1,0\n", "0,a,h100,2,0\n"]
    with pytest.raises(UsageFileError, match="line 3: team 'a' in pool 'h100' at time_s 0 already on line 2"):
        samples_history(policy, lines, "usage.csv")
