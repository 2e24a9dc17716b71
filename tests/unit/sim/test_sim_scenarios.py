"""Small traces checked by hand, for each engine: what a person would compute on paper.

The cluster is one node of 8 GPUs unless said otherwise; teams `a` and `b` have 4 GPUs of quota
each, reclaim any, and a 0 s grace period unless said otherwise.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucommons.domain.model import DEFAULT_COHORT, Cohort, Quota
from gpucommons.domain.resources import Resources
from gpucommons.sim import SimConfig, simulate
from gpucommons.sim.simulator import JobRun, RunOutcome
from gpucommons.testing.sim import job, policy, team

SHARING = ("commons", "kueue")


def runs(outcome: RunOutcome) -> dict[str, JobRun]:
    return {r.job.job_id: r for r in outcome.runs}


def timeline(outcome: RunOutcome) -> dict[str, tuple[float | None, float | None, int]]:
    return {r.job.job_id: (r.first_start_s, r.finish_s, r.preemptions) for r in outcome.runs}


@pytest.mark.parametrize("engine", SHARING)
def test_borrow_then_reclaim_returns_the_lenders_gpus(engine: str) -> None:
    p = policy(team("a", 4), team("b", 4))
    out = simulate(p, [job("a1", "a", 0, 100, 8), job("b1", "b", 10, 10, 4)], SimConfig(engine=engine))
    # a1 borrows b's idle 4 GPUs; b reclaims them at t=10; a1 saved on the signal and resumes at 20.
    assert timeline(out) == {"a1": (0, 110, 1), "b1": (10, 20, 0)}
    assert runs(out)["a1"].lost_unit_s == 0
    assert out.preemptions == 1


@pytest.mark.parametrize("engine", SHARING)
def test_the_victim_holds_its_gpus_for_its_grace_period(engine: str) -> None:
    p = policy(team("a", 4), team("b", 4), grace_period_s=5)
    out = simulate(p, [job("a1", "a", 0, 100, 8), job("b1", "b", 10, 10, 4)], SimConfig(engine=engine))
    # a1 is told to stop at 10, holds its GPUs until 15; b1 runs 15–25; a1 resumes with 90 s left.
    assert timeline(out) == {"a1": (0, 115, 1), "b1": (15, 25, 0)}
    a1 = runs(out)["a1"]
    assert a1.overhead_unit_s == 5 * 8  # the grace period was spent saving, holding 8 GPUs
    # b waited 5 s for its own quota, within the grace period: not a broken guarantee.
    assert out.meter.teams["b"].violation_s == 0


def test_static_never_borrows_even_when_the_other_team_is_idle() -> None:
    p = policy(team("a", 4), team("b", 4))
    jobs = [job("a1", "a", 0, 10, 4), job("a2", "a", 0, 10, 4)]
    static = simulate(p, jobs, SimConfig(engine="static"))
    assert timeline(static) == {"a1": (0, 10, 0), "a2": (10, 20, 0)}
    assert static.meter.teams["a"].borrowed_unit_s == 0
    # b's 4 idle GPUs could have run a2 for those 10 s: capacity left idle while work waited.
    assert static.meter.idle_while_waiting_unit_s == 40
    for engine in SHARING:
        shared = simulate(p, jobs, SimConfig(engine=engine))
        assert timeline(shared) == {"a1": (0, 10, 0), "a2": (0, 10, 0)}
        assert shared.meter.teams["a"].borrowed_unit_s == 40
        assert shared.meter.idle_while_waiting_unit_s == 0


def test_static_keeps_jobs_larger_than_the_quota_as_never_fitting() -> None:
    p = policy(team("a", 4), team("b", 4))
    out = simulate(p, [job("big", "a", 0, 10, 8), job("ok", "a", 0, 10, 4)], SimConfig(engine="static"))
    assert runs(out)["big"].state == JobRun.NEVER
    assert timeline(out) == {"big": (None, None, 0), "ok": (0, 10, 0)}


@pytest.mark.parametrize("engine", SHARING)
def test_a_borrow_limit_caps_what_a_team_takes_from_idle_quota(engine: str) -> None:
    p = policy(team("a", 4, borrow_limit=2), team("b", 4))
    jobs = [job("a1", "a", 0, 10, 4), job("a2", "a", 0, 10, 2), job("a3", "a", 0, 10, 2)]
    out = simulate(p, jobs, SimConfig(engine=engine))
    # 4 + 2 = nominal + borrow limit; a3 would make 8 and waits although 2 GPUs are free.
    assert timeline(out) == {"a1": (0, 10, 0), "a2": (0, 10, 0), "a3": (10, 20, 0)}


@pytest.mark.parametrize("engine", SHARING)
def test_a_lend_limit_caps_what_a_team_lends(engine: str) -> None:
    p = policy(team("a", 4), team("b", 4, lend_limit=2))
    jobs = [job("a1", "a", 0, 10, 4), job("a2", "a", 0, 10, 2), job("a3", "a", 0, 10, 2)]
    out = simulate(p, jobs, SimConfig(engine=engine))
    # b lends at most 2 of its 4 idle GPUs.
    assert timeline(out) == {"a1": (0, 10, 0), "a2": (0, 10, 0), "a3": (10, 20, 0)}


@pytest.mark.parametrize("engine", SHARING)
def test_a_preempted_job_loses_the_work_since_its_last_checkpoint(engine: str) -> None:
    p = policy(team("a", 4), team("b", 4))
    jobs = [job("a1", "a", 0, 100, 8, checkpoint_interval_s=30), job("b1", "b", 70, 10, 4)]
    out = simulate(p, jobs, SimConfig(engine=engine))
    a1 = runs(out)["a1"]
    # Stopped at 70 with its last checkpoint at 60: 10 s × 8 GPUs lost; 40 s of work left at 80.
    assert a1.lost_unit_s == 80
    assert timeline(out) == {"a1": (0, 120, 1), "b1": (70, 80, 0)}


@pytest.mark.parametrize("engine", SHARING)
def test_restart_overhead_is_paid_when_a_preempted_job_starts_again(engine: str) -> None:
    p = policy(team("a", 4), team("b", 4))
    jobs = [job("a1", "a", 0, 100, 8, checkpoint_interval_s=30), job("b1", "b", 70, 10, 4)]
    out = simulate(p, jobs, SimConfig(engine=engine, restart_overhead_s=5))
    assert timeline(out)["a1"] == (0, 125, 1)
    assert runs(out)["a1"].overhead_unit_s == 5 * 8


@pytest.mark.parametrize("engine", SHARING)
def test_a_checkpointing_job_keeps_working_through_its_grace_period(engine: str) -> None:
    p = policy(team("a", 4), team("b", 4), grace_period_s=25)
    jobs = [job("a1", "a", 0, 100, 8, checkpoint_interval_s=30), job("b1", "b", 70, 10, 4)]
    out = simulate(p, jobs, SimConfig(engine=engine))
    # Told to stop at 70, it reaches its checkpoint at 90 during the grace period, stops at 95
    # (5 s × 8 lost), and resumes with 10 s left when b1 (95–105) is done.
    assert runs(out)["a1"].lost_unit_s == 40
    assert timeline(out) == {"a1": (0, 115, 1), "b1": (95, 105, 0)}


@pytest.mark.parametrize("engine", SHARING)
def test_a_job_that_completes_within_its_grace_period_simply_finishes(engine: str) -> None:
    p = policy(team("a", 4), team("b", 4), grace_period_s=10)
    jobs = [job("a1", "a", 0, 75, 8, checkpoint_interval_s=30), job("b1", "b", 70, 10, 4)]
    out = simulate(p, jobs, SimConfig(engine=engine))
    assert timeline(out) == {"a1": (0, 75, 1), "b1": (75, 85, 0)}
    assert runs(out)["a1"].lost_unit_s == 0


def test_commons_evicts_the_victim_with_the_least_unsaved_work_kueue_the_newest() -> None:
    p = policy(team("a", 4), team("b", 4))
    jobs = [
        job("old", "a", 0, 200, 4, checkpoint_interval_s=30),  # at t=60: just saved, 0 unsaved
        job("new", "a", 1, 200, 4, checkpoint_interval_s=50),  # at t=60: 9 s × 4 GPUs unsaved
        job("b1", "b", 60, 10, 4),
    ]
    commons = runs(simulate(p, jobs, SimConfig(engine="commons")))
    kueue = runs(simulate(p, jobs, SimConfig(engine="kueue")))
    assert (commons["old"].preemptions, commons["new"].preemptions) == (1, 0)
    assert commons["old"].lost_unit_s + commons["new"].lost_unit_s == 0
    assert (kueue["old"].preemptions, kueue["new"].preemptions) == (0, 1)
    assert kueue["new"].lost_unit_s == 36


@pytest.mark.parametrize("engine", SHARING)
def test_without_reclaim_the_lender_waits_and_its_guarantee_is_broken(engine: str) -> None:
    from gpucommons.domain import ReclaimPolicy

    p = policy(team("a", 4), team("b", 4, reclaim=ReclaimPolicy.NEVER))
    out = simulate(p, [job("a1", "a", 0, 100, 8), job("b1", "b", 10, 10, 4)], SimConfig(engine=engine))
    assert timeline(out) == {"a1": (0, 100, 0), "b1": (100, 110, 0)}
    # b asked for 4 GPUs of its 4-GPU quota from 10 to 100 and did not get them.
    assert out.meter.teams["b"].violation_s == 90


@pytest.mark.parametrize("engine", ("commons", "kueue", "static"))
def test_a_higher_priority_job_preempts_its_own_teams_lower_priority_work(engine: str) -> None:
    p = policy(team("a", 8))
    jobs = [job("low", "a", 0, 100, 8), job("high", "a", 10, 10, 8, priority="high")]
    out = simulate(p, jobs, SimConfig(engine=engine))
    assert timeline(out) == {"low": (0, 110, 1), "high": (10, 20, 0)}


def test_utilization_counts_gpu_seconds_held_within_the_submission_window() -> None:
    p = policy(team("a", 4), team("b", 4))
    out = simulate(p, [job("a1", "a", 0, 50, 4), job("a2", "a", 100, 10, 4)], SimConfig(engine="commons"))
    assert out.window == (0, 100)
    assert out.meter.held_in_window_unit_s / (8 * 100) == 0.25
    assert out.makespan_s == 110


def test_only_the_grace_periods_of_classes_the_trace_uses_excuse_a_wait() -> None:
    from gpucommons.domain import PriorityClass, ReclaimPolicy

    classes = (
        PriorityClass("training", 500, grace_period_s=3600),  # in the policy, used by no job
        PriorityClass("low", 100, grace_period_s=0, min_runtime_s=0),
    )
    p = policy(team("a", 4), team("b", 4, reclaim=ReclaimPolicy.NEVER), classes=classes)
    out = simulate(p, [job("a1", "a", 0, 100, 8), job("b1", "b", 10, 10, 4)], SimConfig(engine="commons"))
    assert out.meter.teams["b"].violation_s == 90


@pytest.mark.parametrize("engine", SHARING)
def test_a_cohort_quota_is_borrowed_while_idle_and_reclaimed_by_its_own_team(engine: str) -> None:
    # research owns 4 of the 8 GPUs; its team r has no nominal quota; o, outside, owns the other 4.
    base = policy(replace(team("r", 0), cohort="research"), team("o", 4))
    research = Cohort("research", DEFAULT_COHORT, (Quota("gpu", Resources(4)),))
    p = replace(base, cohorts=(Cohort(DEFAULT_COHORT), research), _index={})
    out = simulate(p, [job("o1", "o", 0, 100, 8), job("r1", "r", 10, 10, 4)], SimConfig(engine=engine))
    # o1 borrows research's idle 4 GPUs; r reclaims them at t=10 (hierarchical reclaim, its nominal
    # being 0); o1 saved on the signal and resumes at 20.
    assert timeline(out) == {"o1": (0, 110, 1), "r1": (10, 20, 0)}
    assert out.meter.teams["r"].borrowed_unit_s == 40  # above r's own (zero) nominal quota
