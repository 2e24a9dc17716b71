"""Invariants of any simulation, on random small policies and traces, for every engine.

- capacity is never exceeded at any event (the meter refuses an over-admission: CapacityExceeded);
- every job that can fit finishes exactly once, after it started, and never before it was submitted;
- GPU-seconds are conserved: what the meter integrated equals work done + lost work + overhead;
- the same inputs give byte-identical reports.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucommons.domain import Policy, PriorityClass, ReclaimPolicy
from gpucommons.sim import SimConfig, SimJob, dumps, run_simulation, simulate
from gpucommons.sim.simulator import JobRun
from gpucommons.testing.sim import job, policy, team

#: Per-test settings, not a loaded profile: a profile would change every other module's tests too.
SIM = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ENGINES = st.sampled_from(["commons", "kueue", "static"])


@st.composite
def cases(draw: st.DrawFn) -> tuple[Policy, list[SimJob]]:
    nodes = draw(st.integers(1, 3))
    per_node = draw(st.sampled_from([4, 8]))
    capacity = nodes * per_node
    n_teams = draw(st.integers(1, 3))
    quotas = draw(st.lists(st.integers(0, capacity), min_size=n_teams, max_size=n_teams))
    while sum(quotas) > capacity:
        quotas[quotas.index(max(quotas))] -= 1
    teams = []
    for i, nominal in enumerate(quotas):
        teams.append(
            team(
                f"t{i}",
                nominal,
                borrow_limit=draw(st.one_of(st.none(), st.integers(0, capacity))),
                lend_limit=draw(st.one_of(st.none(), st.integers(0, nominal))),
                reclaim=draw(st.sampled_from(list(ReclaimPolicy))),
            )
        )
    grace = draw(st.sampled_from([0, 0, 5, 30]))
    classes = (
        PriorityClass("high", 1000, grace_period_s=grace, min_runtime_s=draw(st.sampled_from([0, 20]))),
        PriorityClass("low", 100, grace_period_s=grace, min_runtime_s=0),
    )
    p = policy(*teams, nodes=nodes, gpus_per_node=per_node, classes=classes)
    jobs = []
    for k in range(draw(st.integers(1, 14))):
        jobs.append(
            job(
                f"j{k}",
                f"t{draw(st.integers(0, n_teams - 1))}",
                draw(st.integers(0, 200)),
                draw(st.integers(0, 120)),
                draw(st.sampled_from([1, 1, 2, 4, 8])),
                priority=draw(st.sampled_from([None, "high"])),
                checkpoint_interval_s=draw(st.sampled_from([None, 10, 45])),
            )
        )
    return p, jobs


@SIM
@given(cases(), ENGINES, st.sampled_from([0.0, 3.0]))
def test_every_job_that_fits_finishes_exactly_once_and_gpu_seconds_are_conserved(
    case: tuple[Policy, list[SimJob]], engine: str, overhead: float
) -> None:
    p, jobs = case
    out = simulate(p, jobs, SimConfig(engine=engine, restart_overhead_s=overhead))
    assert len(out.runs) == len(jobs)
    assert not out.stuck, f"jobs never admitted: {out.stuck}"
    work = lost = waste = 0.0
    for run in out.runs:
        if run.state == JobRun.NEVER:
            assert run.first_start_s is None and run.finish_s is None
            continue
        assert run.state == JobRun.DONE
        assert run.first_start_s is not None and run.finish_s is not None
        assert run.job.submit_s <= run.first_start_s <= run.finish_s
        assert run.finish_s - run.first_start_s >= run.job.duration_s - 1e-9
        assert run.lost_unit_s >= -1e-9 and run.overhead_unit_s >= -1e-9
        work += run.job.duration_s * run.units
        lost += run.lost_unit_s
        waste += run.overhead_unit_s
    assert math.isclose(out.meter.held_total_unit_s, work + lost + waste, rel_tol=1e-9, abs_tol=1e-6)
    assert all(abs(free - out.meter.capacity[pool]) < 1e-9 for pool, free in out.meter.free.items())


@settings(SIM, max_examples=15)
@given(cases(), ENGINES)
def test_the_same_inputs_give_byte_identical_reports(case: tuple[Policy, list[SimJob]], engine: str) -> None:
    p, jobs = case
    first = dumps(run_simulation(p, jobs, SimConfig(engine=engine)).report)
    second = dumps(run_simulation(p, list(jobs), SimConfig(engine=engine)).report)
    assert first == second
