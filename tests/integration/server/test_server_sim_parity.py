"""The live scheduler decides exactly as the simulator does for the same inputs (docs/design.md: "a what-if
run predicts the live system"), reclaims and preemptions included.

The same jobs go through the real worker (`Scheduler` on a real SQLite store, the timer executor, a
hand-driven clock, one `cycle()` per second as its tick would run it) and through `sim`; every
admission (instant, pool, GPUs, borrowing) and every preemption (instant, victim, preemptor, reason)
is compared. The live side's decisions are read from what its cycles reported and checked against
what the store recorded (ledger intervals, preemption records).

The job model is chosen so that both sides do the same work: grace periods of 0s (the timer
executor ends a signalled task at once), and trace jobs that checkpoint too rarely to keep anything
(a preempted `sleep N` starts over from the beginning, as a job that falls back to its last
checkpoint at 0 does). `min_runtime: 0s` keeps decisions from depending on time alone: the server
also cycles at instants where nothing happened, and the simulator does not (docs/decisions/0010).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select

from gpucommons.api import schemas
from gpucommons.backends.clock import ManualClock
from gpucommons.domain.resources import Resources
from gpucommons.engine.types import Decisions
from gpucommons.identity.principal import Principal
from gpucommons.policy import parse_policy
from gpucommons.server.app import build_context
from gpucommons.server.executors import TimerExecutor
from gpucommons.server.services import tasks as task_service
from gpucommons.server.settings import Settings
from gpucommons.server.workers.outputs import SchedulerHooks
from gpucommons.server.workers.scheduler import Scheduler
from gpucommons.sim.jobs import SimJob
from gpucommons.sim.simulator import SimConfig, simulate
from gpucommons.store.history_models import PreemptionRow
from gpucommons.store.models import UsageIntervalRow
from gpucommons.testing.sim import job as sim_job

POLICY = """
cluster:
  name: parity
  pools:
    - {name: gpu, gpu_type: H100, nodes: 2, gpus_per_node: 4}
priority_classes:
  - {name: low, value: 100, grace_period: 0s, min_runtime: 0s}
  - {name: high, value: 500, grace_period: 0s, min_runtime: 0s}
default_priority_class: low
teams:
  - name: a
    quota: {gpu: {gpus: 3, borrow_limit: 3}}
    preemption: {reclaim: any, within_team: lower_priority}
  - name: b
    quota: {gpu: {gpus: 3}}
    preemption: {reclaim: any, within_team: lower_priority}
  - name: c
    quota: {gpu: {gpus: 2, borrow_limit: 0}}
    preemption: {reclaim: lower_priority}
"""

#: Longer than any job: a preempted job keeps nothing, as a restarted `sleep N` does.
NEVER_CHECKPOINTS = 1e9


@dataclass(frozen=True, order=True)
class Decision:
    """One decision as both sides can state it; instants first, so a sorted list reads in time."""

    at: float
    kind: str  # "admit" or "preempt"
    task: str
    #: admit: pool, GPUs (node, pool-wide indices), borrowed GPUs; preempt: preemptor and reason.
    detail: tuple[object, ...]


def decisions_of(now: float, decisions: Decisions, name: dict[str, str]) -> list[Decision]:
    out = [
        Decision(
            now,
            "admit",
            name[a.task_id],
            (
                a.admission.pool,
                tuple((s.node, s.gpu_indices) for s in a.admission.placement),
                a.admission.borrowed.gpus,
            ),
        )
        for a in decisions.admit
    ]
    out += [
        Decision(now, "preempt", name[p.victim_id], (name[p.preemptor_id], p.reason.value))
        for p in decisions.preempt
    ]
    return out


def workload(seed: int, n: int = 60) -> list[SimJob]:
    """Whole-second times and durations, so both sides see the very same instants."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        team = rng.choice("abc")
        most = 2 if team == "c" else 4  # c may never hold more than 2: the server refuses that at submit
        jobs.append(
            SimJob(
                job_id=f"j{i}",
                team=team,
                submit_s=float(rng.randrange(0, 20)),
                duration_s=float(rng.randrange(1, 8)),
                resources=Resources(gpus=min(most, rng.choice((1, 1, 2, 3, 4)))),
                priority_class=rng.choice(("low", "low", "high")),
                checkpoint_interval_s=NEVER_CHECKPOINTS,
            )
        )
    jobs.sort(key=lambda j: (j.submit_s, j.job_id))
    return jobs


def simulated(jobs: list[SimJob]) -> list[Decision]:
    journal: list[Decision] = []
    identity = {j.job_id: j.job_id for j in jobs}
    simulate(
        parse_policy(POLICY),
        jobs,
        SimConfig(engine="commons"),
        on_decisions=lambda now, d: journal.extend(decisions_of(now, d, identity)),
    )
    return sorted(journal)


class Recorder(SchedulerHooks):
    """The live scheduler's decisions, as each `cycle()` reports them."""

    def __init__(self, names: dict[str, str], clock: ManualClock) -> None:
        self.names, self.clock = names, clock
        self.journal: list[Decision] = []

    def cycle_done(self, seconds: float, decisions: Decisions) -> None:
        self.journal += decisions_of(self.clock.now(), decisions, self.names)


def live(jobs: list[SimJob], home: Path, tick_s: float = 0.5) -> list[Decision]:
    """The jobs through the real worker: submitted at their instant, one scheduler cycle per second
    (its tick supervising every attempt each `tick_s`)."""
    home.mkdir(parents=True)
    (home / "policy.yaml").write_text(POLICY)
    clock = ManualClock(0.0)
    settings = Settings(
        home=home,
        policy=home / "policy.yaml",
        run_scheduler=False,
        isolation="logical",
        scheduler_tick_s=tick_s,
    )
    ctx = build_context(settings, executor=TimerExecutor(clock), clock=clock)
    scheduler, who = ctx.scheduler, Principal(subject="parity", platform_admin=True)
    assert isinstance(scheduler, Scheduler)
    names: dict[str, str] = {}
    scheduler.hooks = recorder = Recorder(names, clock)
    waiting = list(jobs)
    t = 0.0
    while waiting or scheduler.state.running_count() or scheduler.state.pending_count():
        clock.set(t)
        while waiting and waiting[0].submit_s == t:
            job = waiting.pop(0)
            body = schemas.TaskSubmit(
                team=job.team,
                gpus=job.resources.gpus,
                command=["sleep", f"{job.duration_s:g}"],
                priority=job.priority_class,
                name=job.job_id,
                # As the trace job: it declares saves (so consolidation may move it), too rare to
                # keep anything (a live task that never saved has all its run unsaved, as here).
                checkpoint="every:9999999s",
            )
            with ctx.db.session() as session:
                task = task_service.submit(
                    session, ctx.policies.policy, body, who, t, lambda: ctx.seq.next(session)
                )
                names[task.id] = job.job_id
            scheduler.task_submitted(task.id)
        scheduler.cycle()
        t += 1.0
        assert t < 1000, "the live run did not drain"
    with ctx.db.session() as session:
        stored_admits = sorted(
            (iv.start, names[iv.task_id], iv.pool, iv.borrowed_gpus)
            for iv in session.scalars(select(UsageIntervalRow))
        )
        stored_preempts = sorted(
            (p.at, names[p.victim_task_id], names[p.preemptor_task_id], p.reason)
            for p in session.scalars(select(PreemptionRow))
        )
    ctx.db.dispose()
    journal = sorted(recorder.journal)
    # What the cycles reported is what the store holds.
    assert stored_admits == [(d.at, d.task, d.detail[0], d.detail[2]) for d in journal if d.kind == "admit"]
    assert stored_preempts == [(d.at, d.task, *d.detail) for d in journal if d.kind == "preempt"]
    return journal


#: The default tick supervises every attempt (and refreshes its unsaved work) at each second; a
#: 60 s tick does not, so the checkpoint-aware choice of victims relies on the refresh the loop asks
#: for when a cycle proposes preemptions, as a cycle woken between ticks does.
@pytest.mark.parametrize("tick_s", [0.5, 60.0], ids=["tick-0.5s", "tick-60s"])
def test_live_scheduler_decides_as_the_simulator_through_reclaims_and_preemptions(
    tmp_path: Path, tick_s: float
) -> None:
    for seed in (1, 4, 8):
        jobs = workload(seed)
        expected = simulated(jobs)
        got = live(jobs, tmp_path / f"seed{seed}", tick_s)
        first_difference = next(
            (f"live {g} / sim {e}" for g, e in zip(got, expected, strict=False) if g != e), "lengths"
        )
        assert got == expected, f"seed {seed}: first difference: {first_difference}"
        admits = [d for d in expected if d.kind == "admit"]
        reasons = [d.detail[1] for d in expected if d.kind == "preempt"]
        # The comparison proves little unless the workload borrows, reclaims and preempts.
        assert sum(1 for d in admits if d.detail[2]) >= 3, f"seed {seed}: too little borrowing"
        assert reasons.count("reclaim") >= 3, f"seed {seed}: too few reclaims: {reasons}"
        assert reasons.count("within_team") >= 1, f"seed {seed}: no preemption within a team: {reasons}"
        assert len(admits) > len(jobs), f"seed {seed}: no preempted job was admitted again"


def test_live_scheduler_consolidates_as_the_simulator(tmp_path: Path) -> None:
    """Issue 9, item 3: two long 2-GPU tasks end up on different nodes (their neighbour ended), and a
    4-GPU task then fits on no node: both sides move the same cheap task (ran past its move wait,
    640 GPU-s unsaved) for it, at the same instant, and admit it and the moved task elsewhere."""

    def job(name: str, team: str, at: float, gpus: int, duration: float) -> SimJob:
        return sim_job(name, team, at, duration, gpus, priority="low", checkpoint_interval_s=1e9)

    jobs = [
        job("long0", "a", 0.0, 2, 400.0),
        job("short", "b", 0.0, 2, 10.0),
        job("long1", "b", 0.0, 2, 400.0),
        job("big", "a", 320.0, 4, 5.0),
    ]
    expected = simulated(jobs)
    moves = [d for d in expected if d.kind == "preempt"]
    assert moves == [Decision(320.0, "preempt", "long0", ("big", "consolidation"))], expected
    later = {d.task: d.detail[1] for d in expected if d.kind == "admit" and d.at >= 320.0}
    assert set(later) == {"big", "long0"} and later["big"][0][0] != later["long0"][0][0]  # two nodes
    assert live(jobs, tmp_path / "live") == expected
