"""Objective-driven advice: windows, weighted waits, the rules, the curves, and the decision it makes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucommons.domain import Policy, PriorityClass
from gpucommons.planning.block_bootstrap import week_block_bootstrap
from gpucommons.planning.objectives import Objective, Rules, judge
from gpucommons.planning.quota_search import SearchSettings
from gpucommons.planning.quota_space import QuotaSpace
from gpucommons.planning.replay_advice import AdviceSettings, ReplayAdvice, advise_by_replay
from gpucommons.planning.replay_cache import CachedReplays, ReplayContext, serial_replays
from gpucommons.planning.replay_score import (
    ReplayScore,
    SplitError,
    TeamScore,
    ValidationSplit,
    Window,
    split_history,
    weighted_percentile,
)
from gpucommons.planning.wait_curves import non_increasing
from gpucommons.sim import SimJob
from gpucommons.sim.stats import percentile
from gpucommons.testing.sim import job, policy, team

H = 3600


def _score(waits: dict[str, float], violation: float = 0.0) -> ReplayScore:
    teams = {
        name: TeamScore(10, 10.0, 0.0, wait, violation / len(waits), 0, 0.0, 8.0)
        for name, wait in waits.items()
    }
    return ReplayScore("fit", teams, ())


def test_equal_weights_give_the_simulators_own_percentile() -> None:
    values = [0.0, 3.0, 7.0, 7.5, 20.0, 400.0, 9.0]
    assert weighted_percentile([(v, 1.0) for v in values], 95) == pytest.approx(percentile(values, 95))
    assert weighted_percentile([(v, 2.5) for v in values], 50) == pytest.approx(percentile(values, 50))


def test_newer_jobs_weigh_more_so_an_old_spike_counts_less() -> None:
    old_spike = [(100.0, 0.1)] * 10
    recent_calm = [(1.0, 1.0)] * 30
    assert weighted_percentile(old_spike + recent_calm, 95) < percentile([100.0] * 10 + [1.0] * 30, 95)


def test_the_validation_window_is_the_newest_share_of_the_history() -> None:
    jobs = [job(f"j{i}", "a", i * 100.0, 10, 1) for i in range(100)]
    fit, validation = split_history(jobs, ValidationSplit.parse("last:25%"), 14 * 86400.0)
    assert len(fit.jobs) == 75 and len(validation.jobs) == 25
    assert fit.end_s == validation.start_s
    assert fit.weight(fit.end_s) == 1.0 and fit.weight(fit.end_s - 14 * 86400.0) == pytest.approx(0.5)
    assert validation.weight(0.0) == 1.0  # every job counts fully where the choice is made
    _, last_day = split_history(jobs, ValidationSplit.parse("last:1h"), None)
    assert len(last_day.jobs) == 36


def test_the_fit_window_keeps_only_the_newest_days_before_validation() -> None:
    day = 86400.0
    jobs = [job(f"j{i}", "a", i * day / 4, 10, 1) for i in range(4 * 40)]  # 40 days, 4 jobs a day
    fit, validation = split_history(jobs, ValidationSplit.parse("last:10d"), 14 * day, 7 * day)
    assert fit.end_s == validation.start_s and fit.start_s == pytest.approx(fit.end_s - 7 * day)
    assert len(fit.jobs) == 28 and min(j.submit_s for j in fit.jobs) >= fit.start_s
    whole, _ = split_history(jobs, ValidationSplit.parse("last:10d"), 14 * day, None)
    assert len(whole.jobs) == 120 and whole.start_s == 0.0


@pytest.mark.parametrize("text", ["25%", "last:", "last:0%", "last:100%", "last:-3d", "first:10%"])
def test_a_validation_split_it_cannot_read_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--validate"):
        ValidationSplit.parse(text)


def test_a_history_too_short_to_split_is_refused_with_a_reason() -> None:
    with pytest.raises(SplitError, match="leaves no jobs to validate on"):
        split_history([job("a", "a", 0, 10, 1)], ValidationSplit.parse("last:50%"), None)


def test_minutes_either_way_are_no_regression_but_hours_are() -> None:
    rules = Rules(Objective.BALANCED)
    assert not rules.regressed(600, 3000)  # 10 min → 50 min: both under an hour
    assert rules.regressed(2 * H, 2.3 * H)
    assert not rules.regressed(2 * H, 2.2 * H)
    assert rules.regressed(50 * 60, 2 * H)


def test_balanced_refuses_more_violations_and_wait_ignores_them() -> None:
    today = _score({"a": H, "b": 0.0}, violation=600)
    worse = _score({"a": 0.5 * H, "b": 0.0}, violation=4000)
    assert not judge(worse, today, Rules(Objective.BALANCED)).feasible
    assert judge(worse, today, Rules(Objective.WAIT)).feasible
    guarantee = judge(worse, today, Rules(Objective.GUARANTEE))
    assert guarantee.feasible and guarantee.key(Objective.GUARANTEE)[1] == 4000


def test_wait_curves_never_rise_with_quota() -> None:
    levels = non_increasing([(8, 100.0, 1), (16, 150.0, 1), (24, 10.0, 2), (32, 20.0, 1)])
    waits = [lv.wait_s for lv in levels]
    assert waits == sorted(waits, reverse=True)
    assert waits[0] == waits[1] == 125.0  # the two violators pooled


def _starved() -> tuple[Policy, list[SimJob]]:
    """nlp runs 4-GPU jobs all the time on 8 GPUs of quota; cv holds 24 and uses 16 a few hours a day."""
    p = policy(
        team("nlp", 8),
        team("cv", 24),
        team("rl", 0),
        nodes=4,
        gpus_per_node=8,
        classes=(PriorityClass("low", 100, grace_period_s=60, min_runtime_s=0),),
    )
    jobs = [job(f"n{k}", "nlp", k * 1800, 2 * H, 4) for k in range(8 * 48)]
    jobs += [job(f"c{d}-{i}", "cv", d * 6 * H + 7, 4 * H, 8) for d in range(8 * 4) for i in range(2)]
    jobs += [job(f"r{k}", "rl", k * 4 * H + 11, H, 2) for k in range(8 * 6)]
    return p, jobs


def _advise(p: Policy, jobs: list[SimJob], **kwargs: object) -> ReplayAdvice:
    settings = AdviceSettings(search=SearchSettings(max_replays=10), bootstrap_resamples=50, **kwargs)  # type: ignore[arg-type]

    def evaluate_for(space: QuotaSpace, windows: dict[str, Window]) -> CachedReplays:
        return CachedReplays(serial_replays(ReplayContext(p, space, windows, settings.engine)))

    return advise_by_replay(p, jobs, settings, evaluate_for)


def test_a_starved_team_gets_quota_from_one_that_lends_it_and_validation_confirms_it() -> None:
    p, jobs = _starved()
    advice = _advise(p, jobs)
    assert advice.chosen is not None, advice.why
    nominal = {t.team: t.proposed for t in advice.teams}
    assert nominal["nlp"] > 8 and nominal["cv"] < 24 and sum(nominal.values()) == 32
    assert advice.chosen.validation.mean_p95_s < advice.today.validation.mean_p95_s
    assert advice.chosen.validation_verdict.feasible and advice.chosen.fit_verdict.feasible
    assert set(advice.baselines) == {"today", "equal split", "proportional to mean demand", "median rule"}
    nlp = next(t for t in advice.teams if t.team == "nlp")
    assert nlp.reason.startswith("nlp: 8 → ") and "because its jobs waited" in nlp.reason
    assert advice.bootstrap is not None and 0 <= advice.bootstrap.better_share <= 1
    assert advice.proposed.team("nlp").nominal("gpu").gpus == nominal["nlp"]


def test_when_nothing_beats_today_on_the_validation_days_the_advice_is_to_keep_them() -> None:
    p = policy(team("nlp", 16), team("cv", 16), nodes=4, gpus_per_node=8)
    jobs = [job(f"n{k}", "nlp", k * 600, 300, 1) for k in range(200)]  # never more than 1 GPU at once
    jobs += [job(f"c{k}", "cv", k * 600 + 5, 300, 1) for k in range(200)]
    advice = _advise(p, jobs)
    assert advice.chosen is None
    assert advice.why.startswith("keep today's quotas")
    assert advice.proposed is p
    assert all(t.today == t.proposed for t in advice.teams)


def test_max_change_caps_how_far_one_run_moves_a_team() -> None:
    from gpucommons.planning.quota_space import MaxChange

    p, jobs = _starved()
    advice = _advise(p, jobs, max_change=MaxChange(gpus=4))
    for t in advice.teams:
        assert abs(t.proposed - t.today) <= 4


def test_the_bootstrap_is_the_same_for_the_same_seed() -> None:
    p, jobs = _starved()
    advice = _advise(p, jobs)
    assert advice.chosen is not None
    args = ([advice.today.fit, advice.today.validation], [advice.chosen.fit, advice.chosen.validation])
    windows = [advice.fit, advice.validation]
    one = week_block_bootstrap(*args, windows, resamples=40, seed=7)
    two = week_block_bootstrap(*args, windows, resamples=40, seed=7)
    assert one == two and one is not None and one.blocks == 2


def test_a_seed_that_makes_a_team_regress_is_repaired_toward_that_team_from_the_one_with_slack() -> None:
    from gpucommons.planning.quota_search import Scored, repairs
    from gpucommons.planning.quota_space import build_space

    p = policy(team("a", 16), team("b", 8), team("c", 8), nodes=4, gpus_per_node=8)
    space = build_space(p, {"a": {"gpu"}, "b": {"gpu"}, "c": {"gpu"}}, whole_nodes=True)
    rules = Rules()
    today = _score({"a": 2 * H, "b": 3 * H, "c": 60.0})
    # An equal-ish split: a's wait doubles (it regresses), b is near its own limit, c has hours to spare.
    seed = _score({"a": 4 * H, "b": 3.2 * H, "c": 120.0})
    point = Scored((8, 16, 8), "equal split", seed, judge(seed, today, rules))
    assert set(point.verdict.regressions) == {"a"}
    moves = repairs(space, point, today, rules, SearchSettings(levels=(2, 1)))
    # One node from c, whose p95 is minutes (the most headroom); two nodes only b can give.
    assert moves == [(24, 0, 8), (16, 16, 0)]
    assert (
        repairs(space, replace(point, verdict=judge(today, today, rules)), today, rules, SearchSettings())
        == []
    )
