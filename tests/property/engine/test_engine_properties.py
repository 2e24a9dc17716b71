"""Properties of the engine on random small policies and workloads (hypothesis).

Each example runs a workload through `MiniSim`, which after every cycle checks: capacity never
exceeded; usage ≤ nominal + borrow limit; what a cohort lends ≤ what its members may lend; a team
within its nominal quota is never preempted by another team; a preemption happens only if it lets
the preemptor fit; and no task is preempted twice at one instant (a zero-time loop). Examples per
test: ENGINE_FUZZ_EXAMPLES (default 40).
"""

from __future__ import annotations

import os
from dataclasses import replace

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from gpucommons.domain.model import Policy
from gpucommons.engine import ClusterState, EngineConfig, Placement, decide
from gpucommons.testing.strategies import Job, MiniSim, MiniSimResult, ZeroTimeLoop, policies, workloads

EXAMPLES = int(os.environ.get("ENGINE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CONFIGS = {
    "commons": EngineConfig.commons(),
    "kueue": EngineConfig.kueue(),
    "static": EngineConfig.static_partition(),
    "commons_unplaced": EngineConfig(placement=Placement.NONE),
    "commons_spread": EngineConfig(placement=Placement.SPREAD),
    "kueue_spread": replace(EngineConfig.kueue(), placement=Placement.SPREAD),
    "kueue_pack": replace(EngineConfig.kueue(), placement=Placement.PACK),
}


def assert_no_loop_with_protection(result: MiniSimResult, config: EngineConfig) -> None:
    """A loop across instants (a task preempted over and over, a moment apart) ends the run early.
    Kueue's rules can enter one — fair-share preemption takes a higher-priority task of another team,
    whose team then takes back its lower-priority one within the team, and so on — and Kueue has no
    guard against it; min-runtime protection (a task preempted before waits out its class's
    `min_runtime` since readmission) is ours, and with it no run may loop."""
    if config.min_runtime_protection:
        assert result.looped is None, f"{result.looped} preempted {result.preemptions[result.looped]} times"


@st.composite
def scenario(draw: st.DrawFn) -> tuple[Policy, list[Job], str]:
    policy = draw(policies())
    return policy, draw(workloads(policy)), draw(st.sampled_from(sorted(CONFIGS)))


@FUZZ
@given(scenario(), st.sampled_from([0.0, 30.0]))
def test_invariants_hold_through_a_run(sc: tuple[Policy, list[Job], str], grace: float) -> None:
    policy, jobs, config = sc
    result = MiniSim(policy, CONFIGS[config], grace_s=grace).run(jobs)
    assert all(n <= 1 for n in result.per_instant.values()), result.per_instant
    assert_no_loop_with_protection(result, CONFIGS[config])


@FUZZ
@given(scenario())
def test_a_victim_requeued_at_the_same_instant_does_not_loop(sc: tuple[Policy, list[Job], str]) -> None:
    """Trap 3 of docs/design.md made worse on purpose: zero grace and requeue at the very instant of
    preemption. The preemptor's reservation still keeps the freed GPUs from going back to the victim:
    no preemptor takes the same victim twice at an instant, and the instant ends (`MiniSim` raises
    after 200 cycles at one instant). With min-runtime protection no task is preempted twice at an
    instant at all; under Kueue's rules another head of the preemptor's team may take the victim
    again once it is back (`test_kueue_may_preempt_a_requeued_victim_again_at_the_same_instant`),
    and fair share's `LessThanOrEqualToFinalShare` may make two teams take tasks from each other
    back and forth, as Kueue has no guard against (found at 3,000 examples): with min-runtime
    protection neither happens."""
    policy, jobs, config = sc
    protected = CONFIGS[config].min_runtime_protection
    try:
        result = MiniSim(policy, CONFIGS[config], grace_s=0.0, requeue_same_instant=True).run(jobs)
    except ZeroTimeLoop:
        if protected:
            raise
        return
    assert all(n <= 1 for n in result.per_preemptor.values()), result.per_preemptor
    if protected:
        assert all(n <= 1 for n in result.per_instant.values()), result.per_instant


def _state_mid_run(policy: Policy, jobs: list[Job], config: EngineConfig) -> tuple[ClusterState, float]:
    """Run half the workload, then queue the rest: a state with running, preempting and pending tasks."""
    half = len(jobs) // 2
    sim = MiniSim(policy, config, grace_s=60.0, check=False)
    sim.run(jobs[:half], until=300.0)
    for job in jobs[half:]:
        if sim.state.pending(job.task.id) is None and sim.state.running(job.task.id) is None:
            sim.state.add_pending(job.task)
    return sim.state, 300.0


@FUZZ
@given(scenario())
def test_decide_never_mutates_its_input(sc: tuple[Policy, list[Job], str]) -> None:
    policy, jobs, config = sc
    state, now = _state_mid_run(policy, jobs, CONFIGS[config])
    before = state.fingerprint()
    decide(state, now, CONFIGS[config])
    assert state.fingerprint() == before


@FUZZ
@given(scenario())
def test_same_input_same_output(sc: tuple[Policy, list[Job], str]) -> None:
    policy, jobs, config = sc
    state, now = _state_mid_run(policy, jobs, CONFIGS[config])
    twin, _ = _state_mid_run(policy, jobs, CONFIGS[config])  # built again, not copied: same input
    assert decide(state, now, CONFIGS[config]) == decide(twin, now, CONFIGS[config])
    assert decide(state, now, CONFIGS[config]) == decide(state, now, CONFIGS[config])


@FUZZ
@given(scenario())
def test_a_replica_of_a_state_decides_what_the_state_decides(sc: tuple[Policy, list[Job], str]) -> None:
    """`testing.strategies.replica` rebuilds a state through its own methods (the preemption
    checks try their plans on one): it must carry everything `decide` reads, the teams' decayed
    usage included, or a check would judge a different cluster from the one the engine saw."""
    from gpucommons.testing.strategies import replica

    policy, jobs, config = sc
    state, now = _state_mid_run(policy, jobs, CONFIGS[config])
    assert decide(replica(state), now, CONFIGS[config]) == decide(state, now, CONFIGS[config])


@FUZZ
@given(scenario())
def test_fair_share_runs_keep_the_invariants(sc: tuple[Policy, list[Job], str]) -> None:
    policy, jobs, config = sc
    from dataclasses import replace

    from gpucommons.domain.model import SchedulingMode

    fair = replace(policy, scheduling=replace(policy.scheduling, mode=SchedulingMode.FAIR_SHARE), _index={})
    result = MiniSim(fair, CONFIGS[config], grace_s=0.0).run(jobs)
    assert all(n <= 1 for n in result.per_instant.values())
    assert_no_loop_with_protection(result, CONFIGS[config])


@st.composite
def fragmenting(draw: st.DrawFn) -> tuple[Policy, list[Job]]:
    """Small long tasks first, node-sized and larger ones after their move wait: the shape that
    fragments nodes and makes consolidation move tasks (a plain workload rarely does)."""
    policy = draw(policies())
    jobs = draw(workloads(policy))
    gpn = max(p.gpus_per_node for p in policy.pools)

    def sized(job: Job, gpus: int) -> Job:
        return replace(job, task=replace(job.task, resources=replace(job.task.resources, gpus=gpus)))

    small = [replace(sized(j, 1 + j.task.resources.gpus % 3), duration_s=j.duration_s + 1200.0) for j in jobs]
    later = [
        Job(replace(j.task, id=f"{j.task.id}b", seq=j.task.seq + 100), j.submit_s + 900.0, j.duration_s)
        for j in jobs[: draw(st.integers(1, 4))]
    ]
    big = [sized(j, gpn) for j in later]
    return policy, small + big


@FUZZ
@given(fragmenting(), st.sampled_from([0.0, 30.0]))
def test_consolidation_keeps_the_invariants_and_never_moves_a_task_twice_at_once(
    sc: tuple[Policy, list[Job]], grace: float
) -> None:
    """Every cycle's checks (capacity, quotas, `check_consolidation`: only cheap tasks, for a head its
    quota allows) hold through runs that fragment nodes; no task is moved twice at one instant."""
    policy, jobs = sc
    result = MiniSim(policy, EngineConfig.commons(), grace_s=grace).run(jobs)
    assert all(n <= 1 for n in result.per_instant.values()), result.per_instant


@FUZZ
@given(st.data())
def test_static_reasons_kept_for_unchanged_teams_are_what_the_cycle_decides_afresh(
    data: st.DataObject,
) -> None:
    """Under `static` a team whose heads all failed on its own quota is not examined again while
    `ClusterState.team_version` stands (engine/cycle.py): every cycle of a run must decide exactly
    what the same cycle decides with nothing remembered (`failed_teams` emptied)."""
    from gpucommons.testing import strategies

    policy = data.draw(policies())
    jobs = data.draw(workloads(policy))
    kept = 0

    def decide_both(state: ClusterState, now: float, config: EngineConfig) -> object:
        nonlocal kept
        remembered = dict(state.failed_teams)
        kept += len(remembered)
        state.failed_teams.clear()
        afresh = decide(state, now, config)
        state.failed_teams.clear()
        state.failed_teams.update(remembered)
        decisions = decide(state, now, config)
        assert decisions == afresh
        return decisions

    original = strategies.decide
    strategies.decide = decide_both  # type: ignore[assignment]
    try:
        MiniSim(policy, CONFIGS["static"], check=False).run(jobs)
    finally:
        strategies.decide = original
    note(f"reasons kept for {kept} team-cycles")
