"""Folds of the validation days and the floor for quiet teams: the choice by the worst fold."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest

from gpucommons.planning.objectives import Objective, Rules, judge
from gpucommons.planning.quota_space import QuotaSpace, build_space
from gpucommons.planning.replay_advice import AdviceSettings, Judged, _choose
from gpucommons.planning.replay_score import (
    ReplayScore,
    SplitError,
    TeamScore,
    Window,
    pooled_score,
    split_folds,
)
from gpucommons.sim.stats import percentile
from gpucommons.testing.sim import job, policy, team

H = 3600.0
DAY = 86400.0


def _window(n_jobs: int, start: float = 0.0, end: float = 3 * DAY) -> Window:
    step = (end - start) / n_jobs
    return Window(
        "validation", start, end, tuple(job(f"j{k}", "a", start + k * step, 60, 1) for k in range(n_jobs))
    )


def test_the_folds_cut_the_validation_days_into_equal_consecutive_parts() -> None:
    validation = _window(30)
    folds = split_folds(validation, 3)
    assert [f.name for f in folds] == ["fold 1", "fold 2", "fold 3"]
    assert folds[0].start_s == validation.start_s and folds[-1].end_s == validation.end_s
    assert all(a.end_s == b.start_s for a, b in pairwise(folds))
    assert [len(f.jobs) for f in folds] == [10, 10, 10]
    assert sum((f.jobs for f in folds), ()) == validation.jobs  # every job in one fold, in order
    assert all(f.half_life_s is None for f in folds)  # every job weighs 1 where the choice is made


def test_one_fold_is_the_validation_window_itself() -> None:
    validation = _window(5)
    assert split_folds(validation, 1) == (validation,)


def test_a_fold_without_jobs_is_refused_with_a_reason() -> None:
    validation = Window(
        "validation", 0.0, 3 * DAY, (job("a", "a", 10.0, 60, 1), job("b", "a", 2.9 * DAY, 60, 1))
    )
    with pytest.raises(SplitError, match=r"fold 2 .* has no jobs"):
        split_folds(validation, 3)
    with pytest.raises(SplitError, match="at least 1"):
        split_folds(validation, 0)


def _team_score(waits: list[float], violation: float = 0.0, never: int = 0) -> TeamScore:
    return TeamScore(
        len(waits) + never, float(len(waits)), 0.0, percentile(waits, 95), violation, never, 4.0, 8.0
    )


def _fold(name: str, waits: dict[str, list[float]], violation: float = 0.0) -> ReplayScore:
    samples = tuple((team, float(k), w, 1.0) for team, ws in waits.items() for k, w in enumerate(ws))
    return ReplayScore(name, {t: _team_score(ws, violation) for t, ws in waits.items()}, samples, days=1.0)


def test_pooled_folds_take_percentiles_of_the_jobs_together_and_add_up_what_was_owed() -> None:
    one = _fold("fold 1", {"a": [0.0, 10.0, 20.0], "b": [5.0]}, violation=30.0)
    two = _fold("fold 2", {"a": [100.0, 200.0]}, violation=12.0)
    pooled = pooled_score([one, two], Window("validation", 0.0, 2 * DAY, ()))
    assert pooled.teams["a"].wait_p95_s == pytest.approx(percentile([0.0, 10.0, 20.0, 100.0, 200.0], 95))
    assert pooled.teams["a"].jobs == 5 and pooled.teams["b"].jobs == 1
    assert pooled.teams["a"].violation_s == 42.0 and pooled.violation_s == 42.0 + 30.0
    assert pooled.days == 2.0 and len(pooled.samples) == 6
    assert pooled_score([one], Window("validation", 0.0, DAY, ())) is one


def _space() -> QuotaSpace:
    return build_space(
        policy(team("a", 16), team("b", 16), nodes=4, gpus_per_node=8), {"a": {"gpu"}, "b": {"gpu"}}
    )


def _judged(
    label: str,
    vector: tuple[int, ...],
    folds: list[ReplayScore],
    today: list[ReplayScore],
    rules: Rules = Rules(Objective.BALANCED),
) -> Judged:
    window = Window("validation", 0.0, len(folds) * DAY, ())
    pooled, base = pooled_score(folds, window), pooled_score(today, window)
    fit = folds[0]  # its fit days as its first fold: ahead of today's there when it is ahead on fold 1
    return Judged(
        label,
        vector,
        fit,
        pooled,
        judge(fit, today[0], rules),
        judge(pooled, base, rules),
        tuple(folds),
        tuple(judge(f, t, rules) for f, t in zip(folds, today, strict=True)),
    )


def _two_folds(a1: float, a2: float, n1: int = 5, n2: int = 5) -> list[ReplayScore]:
    return [
        _fold("fold 1", {"a": [a1] * n1, "b": [0.0] * 5}),
        _fold("fold 2", {"a": [a2] * n2, "b": [0.0] * 5}),
    ]


def test_the_candidate_whose_worst_fold_is_best_wins_over_a_better_mean() -> None:
    """`spiky` is far better on busy fold 1 and barely better on fold 2; `steady` is better on both."""
    space = _space()
    base = _two_folds(1800.0, 1800.0)
    today = _judged("today", (16, 16), base, base)
    spiky = _judged("spiky", (24, 8), _two_folds(60.0, 1750.0, n1=19, n2=1), base)
    steady = _judged("steady", (20, 12), _two_folds(1500.0, 1500.0), base)
    assert spiky.validation.mean_p95_s < steady.validation.mean_p95_s  # the pooled mean favours spiky
    chosen, why = _choose(today, [spiky, steady], space, Rules(Objective.BALANCED))
    assert chosen is steady, why
    assert "worst of 2 folds" in why and "on any fold" in why


def test_a_candidate_worse_than_today_on_a_fold_by_hours_is_never_chosen() -> None:
    """`wait` has no per-team rules, so only the fold's own mean can refuse `spiky`."""
    space = _space()
    rules = Rules(Objective.WAIT)
    base = _two_folds(2 * H, 2 * H)
    today = _judged("today", (16, 16), base, base, rules)
    spiky = _judged("spiky", (24, 8), _two_folds(60.0, 3 * H), base, rules)
    assert sum(f.mean_p95_s for f in spiky.folds) < sum(f.mean_p95_s for f in today.folds)
    chosen, why = _choose(today, [spiky], space, rules)
    assert chosen is None
    assert why.startswith("keep today's quotas: nothing beat them on the validation days without being worse")


def test_a_fold_worse_by_minutes_when_all_wait_minutes_does_not_refuse_a_candidate() -> None:
    space = _space()
    rules = Rules(Objective.BALANCED)
    base = _two_folds(1800.0, 1800.0)
    today = _judged("today", (16, 16), base, base, rules)
    spiky = _judged("spiky", (24, 8), _two_folds(60.0, 1900.0), base, rules)
    chosen, why = _choose(today, [spiky], space, rules)
    assert chosen is spiky, why


def test_a_team_that_regresses_on_one_fold_keeps_today_and_the_fold_is_named() -> None:
    space = _space()
    base = _two_folds(2 * H, 2 * H)
    today = _judged("today", (16, 16), base, base)
    bad = _judged("bad", (24, 8), _two_folds(0.0, 3 * H), base)
    chosen, why = _choose(today, [bad], space, Rules(Objective.BALANCED))
    assert chosen is None
    assert "would make a wait longer (2.0h → 3.0h at p95) on fold 2 of 2" in why


def test_with_one_fold_the_choice_is_the_best_validation_score() -> None:
    space = _space()
    base = [_fold("validation", {"a": [1800.0] * 5, "b": [0.0] * 5})]
    today = _judged("today", (16, 16), base, base)
    good = _judged("good", (20, 12), [_fold("validation", {"a": [600.0] * 5, "b": [0.0] * 5})], base)
    better = _judged("better", (24, 8), [_fold("validation", {"a": [60.0] * 5, "b": [0.0] * 5})], base)
    chosen, why = _choose(today, [good, better], space, Rules(Objective.BALANCED))
    assert chosen is better and "worst of" not in why and "on any fold" not in why


def test_the_floor_keeps_every_team_at_a_share_of_an_equal_split_but_never_above_today() -> None:
    p = policy(team("big", 40), team("quiet", 16), team("tiny", 8), nodes=8, gpus_per_node=8)
    demand = {"big": {"gpu"}, "quiet": {"gpu"}, "tiny": {"gpu"}}
    largest = {("big", "gpu"): 8, ("quiet", "gpu"): 2, ("tiny", "gpu"): 1}
    plain = build_space(p, demand, largest_job=largest)
    assert [e.lower for e in plain.entries] == [8, 2, 1]  # the job floor alone
    floored = build_space(p, demand, largest_job=largest, floor_share=0.5)
    # Half of an equal split of 64 GPUs among three teams is 10; tiny has only 8 today.
    assert [e.lower for e in floored.entries] == [10, 10, 8]
    assert floored.contains(floored.project([10.0, 1.0, 1.0]))
    assert floored.project([10.0, 1.0, 1.0])[1] >= 10
    with pytest.raises(ValueError, match="--floor"):
        build_space(p, demand, floor_share=1.5)


def test_settings_refuse_folds_and_floors_that_mean_nothing() -> None:
    with pytest.raises(ValueError, match="--folds"):
        AdviceSettings(folds=0)
    with pytest.raises(ValueError, match="--floor"):
        AdviceSettings(floor_share=-0.1)


def test_a_candidate_ahead_only_on_the_validation_days_is_not_chosen() -> None:
    """Ahead on both folds, but its fit days are exactly today's: no evidence but validation."""
    space = _space()
    base = _two_folds(1800.0, 1800.0)
    lucky = _judged("lucky", (24, 8), _two_folds(1500.0, 1500.0), base)
    lucky = replace(lucky, fit=base[0], fit_verdict=judge(base[0], base[0], Rules(Objective.BALANCED)))
    today = _judged("today", (16, 16), base, base)
    chosen, why = _choose(today, [lucky], space, Rules(Objective.BALANCED))
    assert chosen is None
    assert why.startswith("keep today's quotas") and "no better than today's on the fit days" in why
