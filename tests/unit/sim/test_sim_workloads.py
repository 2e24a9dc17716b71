"""Kueue's scheduler benchmark as a generated workload (the numbers of its baseline generator.yaml)."""

from __future__ import annotations

from collections import Counter

from gpucommons.domain import Resources
from gpucommons.sim import SimConfig, simulate
from gpucommons.sim.workloads import kueue_baseline_figures, kueue_baseline_jobs, kueue_baseline_policy


def test_the_workload_has_15000_tasks_of_three_sizes_over_30_teams_in_5_cohorts() -> None:
    jobs = kueue_baseline_jobs()
    assert len(jobs) == 15_000
    assert len({j.team for j in jobs}) == 30
    sizes = Counter((j.priority_class, j.resources, j.duration_s) for j in jobs)
    assert sizes == {
        ("small", Resources(cpu_milli=1000), 0.2): 30 * 350,
        ("medium", Resources(cpu_milli=5000), 0.5): 30 * 100,
        ("large", Resources(cpu_milli=20000), 1.0): 30 * 50,
    }
    one_team = [j for j in jobs if j.team == "cohort0-cq0" and j.priority_class == "large"]
    assert [j.submit_s for j in one_team[:3]] == [0, 1.2, 2.4] and one_team[-1].submit_s == 58.8
    assert [j.submit_s for j in jobs] == sorted(j.submit_s for j in jobs)


def test_fewer_cohorts_scale_the_workload_and_the_cluster_together() -> None:
    assert len(kueue_baseline_jobs(cohorts=1)) == 3_000
    assert kueue_baseline_policy(cohorts=1).pools[0].capacity == Resources(cpu_milli=120_000)


def test_the_policy_gives_each_team_20_cpus_a_borrow_limit_of_100_and_reclaim_any() -> None:
    policy = kueue_baseline_policy()
    assert len(policy.teams) == 30 and len({t.cohort for t in policy.teams}) == 5
    quota = policy.teams[0].quotas[0]
    assert quota.nominal == Resources(cpu_milli=20_000) and quota.borrow_limit == Resources(cpu_milli=100_000)
    assert policy.pools[0].capacity == Resources(cpu_milli=600_000)
    assert [c.value for c in policy.priority_classes] == [50, 100, 200]


def test_figures_of_a_run_of_the_first_cohort_alone() -> None:
    policy = kueue_baseline_policy(cohorts=1)
    jobs = [j for j in kueue_baseline_jobs(cohorts=1) if j.submit_s < 5]
    out = simulate(policy, jobs, SimConfig(engine="kueue"))
    figures = kueue_baseline_figures(out.runs, out.capacity_units, out.meter.held_total_unit_s)
    assert figures["unfinished"] == 0
    cpu_s = sum(j.duration_s * j.resources.cpu_milli / 1000 for j in jobs)
    assert figures["capacity_bound_s"] == round(cpu_s / 120, 3)  # one cohort: 6 teams × 20 CPUs
    assert set(figures["time_to_admission_s"]) == {"small", "medium", "large"}
    # Everything submitted in the first 5 s is done within a few seconds of the last submission.
    assert 4.9 <= figures["makespan_s"] < 10
