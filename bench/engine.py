"""Benchmark: one engine decision cycle at cluster scale.

1,000 nodes × 8 GPUs (one pool), 100 teams in 10 cohorts (80 GPUs nominal each), 10,000 pending
tasks of mixed sizes (1–32 GPUs) and priorities, in two variants:

- fit-heavy: half the cluster is idle, so the cycle admits until it is full, then finds that
  nothing else fits;
- preemption-heavy: the cluster is full, half the teams borrow with low-priority work, and the
  other half's queues want their nominal quota back (reclaim and borrow-within-cohort).

`decide()` does not mutate its state, so the same state is decided `--repeat` times; the figures
are milliseconds per cycle, CPU time of this process and wall clock. That is the cold cycle: the
first one after every task arrived at once, which admits and preempts hundreds.

Then, per variant, the steady cycles a live scheduler runs after that one: the cold cycle's
decisions are carried out (victims requeued at the next instant, as after their grace period) until
a cycle changes nothing, and then `--steady` times one running task ends (seeded choice) and one
cycle is decided and carried out, with the 10,000-odd tasks still queued. Their CPU time is the
`steady` line of each variant and the line before the last.

The last line is `engine cycle p50_ms=… p99_ms=…` for the slower variant's cold cycle, in CPU time
unless `--clock wall`. Run: `python bench/engine.py [--repeat 30] [--steady 200] [--seed 1]
[--engine commons|kueue|static] [--clock cpu|wall]`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass

from gpucommons.domain.model import (
    BorrowWithinCohortPolicy,
    Cohort,
    Policy,
    Pool,
    PreemptionPolicy,
    Quota,
    ReclaimPolicy,
    Team,
    WithinTeamPolicy,
)
from gpucommons.domain.resources import Resources
from gpucommons.engine import Admission, ClusterState, Decisions, EngineConfig, TaskRequest, decide
from gpucommons.engine.apply import apply_decisions
from gpucommons.testing.builders import DEFAULT_CLASSES

NODES, GPN, TEAMS, COHORTS, PENDING = 1000, 8, 100, 10, 10_000
SIZES = (1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 32)
PRIORITIES = ((100, "experiment"), (500, "training"), (800, "interactive"))


def make_policy() -> Policy:
    nominal = NODES * GPN // TEAMS
    preempt = PreemptionPolicy(
        ReclaimPolicy.ANY, BorrowWithinCohortPolicy.LOWER_PRIORITY, WithinTeamPolicy.LOWER_PRIORITY
    )
    teams = tuple(
        Team(
            name=f"team{i:03d}",
            quotas=(Quota("h100", Resources(nominal)),),
            cohort=f"dept{i // (TEAMS // COHORTS)}",
            preemption=preempt,
        )
        for i in range(TEAMS)
    )
    return Policy(
        cluster_name="bench",
        pools=(Pool("h100", "H100", NODES, GPN),),
        priority_classes=DEFAULT_CLASSES,
        default_priority_class="experiment",
        teams=teams,
        cohorts=tuple(Cohort(f"dept{i}") for i in range(COHORTS)),
    )


@dataclass
class Variant:
    name: str
    state: ClusterState


def _task(i: int, team: str, gpus: int, prio: tuple[int, str], at: float) -> TaskRequest:
    return TaskRequest(f"t{i}", team, Resources(gpus), prio[0], prio[1], seq=i, queued_at=at)


def _run(state: ClusterState, task: TaskRequest, at: float) -> bool:
    """Admit `task` where the engine would place it; False if there is no room."""
    placement = state.nodes.find(task.team, "h100", task.resources.gpus)
    if placement is None:
        return False
    q = state.quota.quota(task.team, "h100")
    assert q is not None
    used = state.usage(task.team, "h100")
    borrowed = (used + task.resources - q.nominal).clamp_nonnegative().min(task.resources)
    if not task.resources.fits_in(state.quota.available(task.team, "h100")):
        return False
    state.add_pending(task)
    state.admit(task.id, Admission("h100", placement, borrowed), at)
    return True


def fit_heavy(rng: random.Random, policy: Policy) -> Variant:
    state = ClusterState(policy)
    seq = 0
    # Half the cluster busy, spread over every team within nominal.
    for team in policy.teams:
        for _ in range(5):
            seq += 1
            _run(state, _task(seq, team.name, 8, PRIORITIES[1], 0.0), 0.0)
    for _ in range(PENDING):
        seq += 1
        team = policy.teams[rng.randrange(TEAMS)].name
        state.add_pending(_task(seq, team, rng.choice(SIZES), rng.choice(PRIORITIES), rng.uniform(0, 3600)))
    return Variant("fit-heavy", state)


def preemption_heavy(rng: random.Random, policy: Policy) -> Variant:
    state = ClusterState(policy)
    seq = 0
    lenders = [t.name for i, t in enumerate(policy.teams) if i % 2 == 0]
    borrowers = [t.name for i, t in enumerate(policy.teams) if i % 2 == 1]
    # Lenders run a little; borrowers fill the rest of the cluster with low-priority work.
    for team in lenders:
        seq += 1
        _run(state, _task(seq, team, 8, PRIORITIES[1], 0.0), 0.0)
    progress = True
    while progress:
        progress = False
        for team in borrowers:
            seq += 1
            if _run(state, _task(seq, team, 8, PRIORITIES[0], rng.uniform(0, 1800)), rng.uniform(0, 1800)):
                progress = True
    for _ in range(PENDING):
        seq += 1
        if rng.random() < 0.7:
            team, prio = rng.choice(lenders), rng.choice(PRIORITIES[1:])
        else:
            team, prio = rng.choice(borrowers), PRIORITIES[0]
        state.add_pending(_task(seq, team, rng.choice(SIZES), prio, rng.uniform(1800, 3600)))
    return Variant("preemption-heavy", state)


def measure(
    variant: Variant, repeat: int, config: EngineConfig
) -> tuple[list[float], list[float], Decisions]:
    """Milliseconds per cycle: CPU time of this process (what the engine costs, even on a machine
    shared with other work) and wall-clock time."""
    cpu, wall = [], []
    decisions = decide(variant.state, 4000.0, config)
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        decisions = decide(variant.state, 4000.0, config)
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    return cpu, wall, decisions


def carry_out(state: ClusterState, decisions: Decisions, now: float) -> None:
    """What the server does with a cycle's decisions: admit, signal the victims, and requeue each
    victim once it has stopped (here at the next instant, the end of a zero grace period)."""
    apply_decisions(state, decisions, now)
    for p in decisions.preempt:
        state.requeue(p.victim_id, now + 1.0)


def measure_steady(
    state: ClusterState, cycles: int, config: EngineConfig, rng: random.Random
) -> tuple[list[float], int, int]:
    """CPU milliseconds of each of `cycles` cycles after one task's end apiece, once the cold
    cycle's decisions are carried out and a cycle changes nothing; with the admissions and
    preemptions those cycles made. Mutates `state`."""
    now = 4000.0
    for _ in range(100):  # settle: the cold cycle and whatever its victims' requeues bring
        d = decide(state, now, config)
        carry_out(state, d, now)
        now += 2.0
        if not d.admit and not d.preempt:
            break
    cpu: list[float] = []
    admitted = preempted = 0
    for _ in range(cycles):
        running = sorted(rt.task.id for rt in state.iter_running() if not rt.preempting)
        state.finish(rng.choice(running), now)
        c0 = time.process_time()
        d = decide(state, now, config)
        cpu.append((time.process_time() - c0) * 1000)
        admitted, preempted = admitted + len(d.admit), preempted + len(d.preempt)
        carry_out(state, d, now)
        now += 2.0
    return cpu, admitted, preempted


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--steady", type=int, default=200, help="steady cycles per variant (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engine", default="commons", choices=["commons", "kueue", "static"])
    ap.add_argument(
        "--clock",
        default="cpu",
        choices=["cpu", "wall"],
        help="what the last line reports: CPU time of this process (default; stable on a shared "
        "machine) or wall-clock time",
    )
    args = ap.parse_args(argv)
    config = EngineConfig.named(args.engine)
    rng = random.Random(args.seed)
    policy = make_policy()
    print(
        f"{NODES} nodes x {GPN} GPUs, {TEAMS} teams in {COHORTS} cohorts, {PENDING} pending; "
        f"engine={args.engine}"
    )
    worst: tuple[float, float, str] = (0.0, 0.0, "")
    worst_steady: tuple[float, float, str] = (0.0, 0.0, "")
    for build in (fit_heavy, preemption_heavy):
        variant = build(rng, policy)
        cpu, wall, d = measure(variant, args.repeat, config)
        times = cpu if args.clock == "cpu" else wall
        p50, p99 = pct(times, 0.5), pct(times, 0.99)
        used = sum(variant.state.usage(t.name, "h100").gpus for t in policy.teams)
        print(
            f"{variant.name:17s} running={variant.state.running_count():5d} busy_gpus={used:5d} "
            f"pending={variant.state.pending_count():5d} -> admit={len(d.admit):4d} "
            f"preempt={len(d.preempt):4d} "
            f"reasons={len(d.pending):5d} | cpu p50_ms={pct(cpu, 0.5):.1f} p99_ms={pct(cpu, 0.99):.1f} "
            f"mean_ms={statistics.fmean(cpu):.1f}"
            f" | wall p50_ms={pct(wall, 0.5):.1f} p99_ms={pct(wall, 0.99):.1f}"
        )
        if p50 > worst[0]:
            worst = (p50, p99, variant.name)
        if args.steady > 0:
            steady, admitted, preempted = measure_steady(
                variant.state, args.steady, config, random.Random(f"{args.seed}-{variant.name}")
            )
            sp50, sp99 = pct(steady, 0.5), pct(steady, 0.99)
            print(
                f"{'':17s} steady: {args.steady} cycles, one task ending before each, "
                f"pending={variant.state.pending_count():5d} -> admit={admitted:4d} preempt={preempted:4d} "
                f"| cpu p50_ms={sp50:.1f} p99_ms={sp99:.1f} mean_ms={statistics.fmean(steady):.1f}"
            )
            if sp50 > worst_steady[0]:
                worst_steady = (sp50, sp99, variant.name)
    print(f"slower variant: {worst[2]} (last line: {args.clock} time)")
    if args.steady > 0:
        sp50, sp99, name = worst_steady
        print(f"engine steady cycle p50_ms={sp50:.1f} p99_ms={sp99:.1f} (cpu time, {name})")
    print(f"engine cycle p50_ms={worst[0]:.1f} p99_ms={worst[1]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
