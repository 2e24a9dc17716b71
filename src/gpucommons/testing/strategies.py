"""Hypothesis strategies for random small policies and workloads, and a tiny event loop to run
the engine on them (the fuzzing docs/design.md asks for to catch zero-time preemption loops).

`MiniSim` is deliberately simpler than `gpucommons.sim`: tasks are work of a fixed duration, lose
all progress when preempted, stop `grace_s` after the preemption, and the engine is settled after
every instant (decide + apply until nothing changes). It checks the engine's invariants after each
cycle and counts preemptions per task per instant.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field, replace
from decimal import Decimal

from hypothesis import strategies as st

from gpucommons.domain.model import (
    DEFAULT_COHORT,
    BorrowWithinCohortPolicy,
    Cohort,
    Isolation,
    Policy,
    Pool,
    PreemptionPolicy,
    QueueingStrategy,
    Quota,
    ReclaimPolicy,
    SchedulingConfig,
    SchedulingMode,
    Team,
    WithinTeamPolicy,
)
from gpucommons.domain.resources import UNLIMITED, Resources
from gpucommons.engine.apply import apply_decisions
from gpucommons.engine.context import Cycle
from gpucommons.engine.cycle import decide
from gpucommons.engine.state import ClusterState, pending_key
from gpucommons.engine.types import Admission, Decisions, EngineConfig, PreemptReason, TaskRequest
from gpucommons.testing.builders import DEFAULT_CLASSES

_UNL = Resources(UNLIMITED, UNLIMITED, UNLIMITED)


@st.composite
def policies(draw: st.DrawFn, max_teams: int = 4, fair_share: bool | None = None) -> Policy:
    """A valid small policy: 1–2 pools, 2–`max_teams` teams in 1–3 (possibly nested) cohorts."""
    n_pools = draw(st.integers(1, 2))
    pools = tuple(
        Pool(f"p{i}", f"G{i}", draw(st.integers(1, 4)), draw(st.sampled_from([2, 4, 8])))
        for i in range(n_pools)
    )
    cohort_shape = draw(st.sampled_from(["one", "two", "nested"]))
    cohorts: tuple[Cohort, ...]
    if cohort_shape == "one":
        cohorts = (Cohort(DEFAULT_COHORT),)
    elif cohort_shape == "two":
        cohorts = (Cohort("a"), Cohort("b"))
    else:
        cohorts = (Cohort("root"), Cohort("a", "root"), Cohort("b", "root"))
    leaf_cohorts = [c.name for c in cohorts if cohort_shape == "one" or c.name != "root"]
    n_teams = draw(st.integers(2, max_teams))
    left = {p.name: p.nodes * p.gpus_per_node for p in pools}
    if draw(st.booleans()):  # cohorts with quota of their own (limits only towards a parent)
        cohorts = tuple(_with_quota(draw, c, pools, left) for c in cohorts)
    teams = []
    for i in range(n_teams):
        quotas = []
        pool_order = draw(st.permutations([p.name for p in pools]))
        for pool in pool_order[: draw(st.integers(1, len(pool_order)))]:
            nominal = draw(st.integers(0, left[pool]))
            left[pool] -= nominal
            borrow = draw(st.one_of(st.none(), st.integers(0, 16)))
            lend = draw(st.one_of(st.none(), st.integers(0, nominal)))
            quotas.append(
                Quota(
                    pool,
                    Resources(nominal),
                    _UNL if borrow is None else Resources(borrow, UNLIMITED, UNLIMITED),
                    _UNL if lend is None else Resources(lend, UNLIMITED, UNLIMITED),
                )
            )
        dedicated = draw(st.booleans()) if i == n_teams - 1 and n_teams > 2 else False
        if dedicated:
            quotas = [Quota(q.pool, q.nominal) for q in quotas]
        teams.append(
            Team(
                name=f"t{i}",
                quotas=tuple(quotas),
                cohort=draw(st.sampled_from(leaf_cohorts)),
                preemption=PreemptionPolicy(
                    draw(st.sampled_from(list(ReclaimPolicy))),
                    draw(st.sampled_from(list(BorrowWithinCohortPolicy))),
                    draw(st.sampled_from(list(WithinTeamPolicy))),
                ),
                fair_share_weight=Decimal(draw(st.sampled_from([1, 2]))),
                isolation=Isolation.DEDICATED if dedicated else Isolation.SHARED,
            )
        )
    mode = (
        draw(st.sampled_from(list(SchedulingMode)))
        if fair_share is None
        else (SchedulingMode.FAIR_SHARE if fair_share else SchedulingMode.CLASSIC)
    )
    return Policy(
        cluster_name="fuzz",
        pools=pools,
        priority_classes=DEFAULT_CLASSES,
        default_priority_class="experiment",
        teams=tuple(teams),
        cohorts=cohorts,
        scheduling=SchedulingConfig(
            mode=mode,
            queueing=draw(st.sampled_from(list(QueueingStrategy))),
            usage_half_life_s=draw(st.sampled_from([0, 600])),
        ),
    )


def _with_quota(draw: st.DrawFn, cohort: Cohort, pools: tuple[Pool, ...], left: dict[str, int]) -> Cohort:
    """The cohort with a random quota of its own in some pools, taken from what is `left`."""
    quotas = []
    for pool in pools:
        if not draw(st.booleans()):
            continue
        nominal = draw(st.integers(0, left[pool.name]))
        left[pool.name] -= nominal
        borrow = lend = None
        if cohort.parent is not None:
            borrow = draw(st.one_of(st.none(), st.integers(0, 16)))
            lend = draw(st.one_of(st.none(), st.integers(0, nominal + 8)))
        quotas.append(
            Quota(
                pool.name,
                Resources(nominal),
                _UNL if borrow is None else Resources(borrow, UNLIMITED, UNLIMITED),
                _UNL if lend is None else Resources(lend, UNLIMITED, UNLIMITED),
            )
        )
    return replace(cohort, quotas=tuple(quotas))


@dataclass(frozen=True)
class Job:
    task: TaskRequest
    submit_s: float
    duration_s: float


@st.composite
def workloads(draw: st.DrawFn, policy: Policy, max_jobs: int = 14) -> list[Job]:
    """Jobs for the policy's teams: sizes up to two nodes, the four classes of docs/design.md."""
    max_gpn = max(p.gpus_per_node for p in policy.pools)
    n = draw(st.integers(1, max_jobs))
    jobs = []
    for i in range(n):
        team = draw(st.sampled_from(policy.teams))
        cls = draw(st.sampled_from(DEFAULT_CLASSES))
        pools: tuple[str, ...] = ()
        if draw(st.integers(0, 4)) == 0:
            pools = (draw(st.sampled_from([p.name for p in policy.pools])),)
        task = TaskRequest(
            id=f"j{i}",
            team=team.name,
            resources=Resources(draw(st.integers(1, 2 * max_gpn))),
            priority=cls.value,
            priority_class=cls.name,
            seq=i,
            queued_at=0.0,
            pools=pools,
            preemptible=cls.preemptible,
            # Some tasks never save their state: consolidation must leave them where they are.
            checkpointed=draw(st.integers(0, 3)) > 0,
        )
        jobs.append(Job(task, float(draw(st.integers(0, 20)) * 30), float(draw(st.integers(1, 40)) * 30)))
    return jobs


class ZeroTimeLoop(AssertionError):
    """`MiniSim` found no fixed point at one instant: tasks preempt each other back and forth."""


@dataclass
class MiniSimResult:
    preemptions: Counter[str] = field(default_factory=Counter)
    #: (task, preemptor, instant) -> preemptions of that task by that preemptor at that instant.
    per_preemptor: Counter[tuple[str, str, float]] = field(default_factory=Counter)
    finished: int = 0
    cycles: int = 0
    decisions: list[Decisions] = field(default_factory=list)
    #: The task whose preemptions passed `MiniSim.max_preemptions_per_task`, ending the run early:
    #: a loop across instants (each preemption a moment after the last), which only an engine
    #: without min-runtime protection can enter (Kueue: fair share beside within-team preemption).
    looped: str | None = None

    @property
    def per_instant(self) -> Counter[tuple[str, float]]:
        """(task, instant) -> preemptions of that task at that instant, by any preemptor."""
        out: Counter[tuple[str, float]] = Counter()
        for (task, _, at), n in self.per_preemptor.items():
            out[(task, at)] += n
        return out


class MiniSim:
    """Run jobs through the engine; stop at `until` or when everything finished."""

    def __init__(
        self,
        policy: Policy,
        config: EngineConfig,
        grace_s: float = 0.0,
        requeue_same_instant: bool = False,
        check: bool = True,
        max_rounds_per_instant: int = 200,
        max_preemptions_per_task: int = 100,
    ) -> None:
        self.state = ClusterState(policy)
        self.config = config
        self.grace_s = grace_s
        self.requeue_same_instant = requeue_same_instant
        self.check = check
        self.max_rounds = max_rounds_per_instant
        self.max_preemptions = max_preemptions_per_task
        self._events: list[tuple[float, int, str, str]] = []
        self._seq = 0
        self._jobs: dict[str, Job] = {}
        self._finish_token: dict[str, int] = {}
        self.result = MiniSimResult()

    def _push(self, t: float, kind: str, task_id: str) -> int:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, kind, task_id))
        return self._seq

    def run(self, jobs: list[Job], until: float = 1e9) -> MiniSimResult:
        for job in jobs:
            self._jobs[job.task.id] = job
            self._push(job.submit_s, "submit", job.task.id)
        while self._events and self._events[0][0] <= until and self.result.looped is None:
            now = self._events[0][0]
            while self._events and self._events[0][0] == now:
                _, token, kind, task_id = heapq.heappop(self._events)
                self._handle(now, kind, task_id, token)
            self._settle(now)
        return self.result

    def _handle(self, now: float, kind: str, task_id: str, token: int) -> None:
        state = self.state
        if kind == "submit":
            state.add_pending(replace(self._jobs[task_id].task, queued_at=now))
        elif kind == "finish":
            if self._finish_token.get(task_id) == token and state.running(task_id) is not None:
                state.finish(task_id, now)
                self.result.finished += 1
        elif kind == "stop":
            rt = state.running(task_id)
            if rt is not None and rt.preempting:
                self._finish_token.pop(task_id, None)
                state.requeue(task_id, now)

    def _settle(self, now: float) -> None:
        for _ in range(self.max_rounds):
            usage_before = {k: v for k, v in self.state.quota.usage.items()}
            d = decide(self.state, now, self.config)
            self.result.cycles += 1
            if d.empty:
                return
            if self.check:
                check_cycle(self.state, d, usage_before)
                check_subtrees_within_quota_kept(self.state, d)
                check_preemptions_make_room(self.state, d, now, self.config)
                check_consolidation(self.state, d, now, self.config)
            apply_decisions(self.state, d, now)
            self.result.decisions.append(d)
            for a in d.admit:
                self._finish_token[a.task_id] = self._push(
                    now + self._jobs[a.task_id].duration_s, "finish", a.task_id
                )
            for p in d.preempt:
                self.result.preemptions[p.victim_id] += 1
                if self.result.preemptions[p.victim_id] > self.max_preemptions:
                    self.result.looped = p.victim_id
                self.result.per_preemptor[(p.victim_id, p.preemptor_id, now)] += 1
                if self.grace_s == 0 and self.requeue_same_instant:
                    self._finish_token.pop(p.victim_id, None)
                    self.state.requeue(p.victim_id, now)
                else:
                    # Zero grace: the victim rejoins at the next event, never at this instant
                    # (docs/design.md, trap 3).
                    self._push(now + max(self.grace_s, 1e-3), "stop", p.victim_id)
            if self.check:
                check_state(self.state)
        raise ZeroTimeLoop(f"no fixed point after {self.max_rounds} cycles at t={now}: a zero-time loop")


def check_state(state: ClusterState) -> None:
    """Invariants of any state the engine's decisions lead to."""
    policy = state.policy
    walked: dict[tuple[str, str], tuple[int, int]] = {}
    for task in state.iter_pending():
        n, gpus = walked.get(pending_key(task), (0, 0))
        walked[pending_key(task)] = (n + 1, gpus + task.resources.gpus)
    assert state.pending_totals() == walked, "the kept pending totals differ from the queues"
    for p in policy.pools:
        used = sum(state.usage(t.name, p.name).gpus for t in policy.teams)
        assert used <= p.nodes * p.gpus_per_node, f"pool {p.name} over capacity: {used}"
    for (team, pool_name), q in state.quota.quotas.items():
        usage = state.usage(team, pool_name)
        assert usage.fits_in(q.nominal + q.borrow_limit), (
            f"{team} in {pool_name} above nominal + borrow limit"
        )
    for (cohort, pool_name), lendable in state.quota.subtree_quota.items():
        if state.quota.cohort_parent.get(cohort) is not None:
            continue  # a child cohort without limits may use its siblings' quota via the root
        lent = state.quota.cohort_usage[(cohort, pool_name)]
        assert lent.fits_in(lendable), f"cohort {cohort} lends more {pool_name} than its members may lend"
    for (cohort, pool_name), own in state.quota.cohort_quota.items():
        if state.quota.cohort_parent.get(cohort) is None or own.borrow_limit.gpus >= UNLIMITED:
            continue
        used = state.quota.cohort_usage[(cohort, pool_name)].gpus
        most = state.quota.subtree_quota[(cohort, pool_name)].gpus + own.borrow_limit.gpus
        assert used <= most, f"cohort {cohort} uses {used} {pool_name} GPUs, above its quota + borrow limit"


def check_cycle(state: ClusterState, d: Decisions, usage_before: dict[tuple[str, str], Resources]) -> None:
    """Invariants of one cycle's decisions against the state it was made on."""
    # What other teams take from each team. A victim of its own team's preemptor (within-team) or
    # a moved task (consolidation) leaves the team's usage where it was once the preemptor is in.
    victims_by_team: dict[tuple[str, str], list[Resources]] = {}
    for p in d.preempt:
        rt = state.running(p.victim_id)
        if rt is not None and p.reason not in (PreemptReason.WITHIN_TEAM, PreemptReason.CONSOLIDATION):
            victims_by_team.setdefault((rt.task.team, rt.admission.pool), []).append(rt.task.resources)
    for p in d.preempt:
        rt = state.running(p.victim_id)
        assert rt is not None and not rt.preempting, f"{p.victim_id} preempted twice or not running"
        assert rt.task.preemptible, f"non-preemptible {p.victim_id} chosen as a victim"
        preemptor = state.pending(p.preemptor_id)
        assert preemptor is not None
        if p.reason is PreemptReason.CONSOLIDATION:
            continue  # a move of any team's task, with rules of its own: `check_consolidation`
        if p.reason is not PreemptReason.WITHIN_TEAM:
            assert rt.task.team != preemptor.team
            key = (rt.task.team, rt.admission.pool)
            q = state.quota.quotas[key]
            taken = victims_by_team[key]
            total = sum((r.gpus for r in taken), 0)
            largest = max(r.gpus for r in taken)
            # Some order of taking them keeps the team borrowing before each: the largest last.
            used = usage_before[key].gpus - total + largest
            assert used > q.nominal.gpus or rt.task.resources.cpu_milli or rt.task.resources.memory_mib, (
                f"{p.victim_id} of team {rt.task.team}, within its nominal quota, "
                f"preempted by {preemptor.team} ({p.reason}; usage before {usage_before[key].gpus}, "
                f"nominal {q.nominal.gpus}, victims {[r.gpus for r in taken]}; {d})"
            )


def check_consolidation(state: ClusterState, d: Decisions, now: float, config: EngineConfig) -> None:
    """A consolidation move takes only a cheap task (engine/consolidation.py: checkpointed, one node,
    little unsaved work, run long enough, never a non-preemptible class) for a preemptor its quota
    already allowed."""
    for p in d.preempt:
        if p.reason is not PreemptReason.CONSOLIDATION:
            continue
        assert config.consolidation and config.node_placement, f"{p.victim_id} moved by an engine without it"
        rt = state.running(p.victim_id)
        preemptor = state.pending(p.preemptor_id)
        assert rt is not None and preemptor is not None
        cls = state.priority_class(rt.task.priority_class)
        min_runtime = cls.min_runtime_s if cls is not None else 300
        ran = now - rt.admitted_at
        assert rt.task.checkpointed, f"{p.victim_id} saves no state and was moved"
        assert len(rt.admission.placement) == 1, f"{p.victim_id} on several nodes was moved"
        assert rt.unsaved_gpu_s <= config.consolidation_max_unsaved_gpu_s, f"{p.victim_id} lost too much"
        assert ran >= config.consolidation_min_run_s and ran >= min_runtime, f"{p.victim_id} moved too soon"
        available = state.quota.available(preemptor.team, rt.admission.pool, config.static)
        assert preemptor.resources.fits_in(available), f"{p.preemptor_id} moved others beyond its quota"


def check_subtrees_within_quota_kept(state: ClusterState, d: Decisions) -> None:
    """Classic mode: reclaim from another team goes through their lowest common cohort, and takes only from a
    side of the tree that uses more than its quota: every cohort between the victim's team and that
    common cohort was above its subtree quota before the cycle (Kueue `collectCandidatesInSubtree`
    and `candidateIsValid`). So a cohort's teams running on the cohort's own quota are never
    preempted from outside, whatever their own nominal quotas."""
    if state.policy.scheduling.mode is SchedulingMode.FAIR_SHARE:
        return  # fair sharing reaches every borrowing team of the root (Kueue `findCandidates`)
    tree = state.quota
    for p in d.preempt:
        rt = state.running(p.victim_id)
        preemptor = state.pending(p.preemptor_id)
        if (
            p.reason in (PreemptReason.WITHIN_TEAM, PreemptReason.CONSOLIDATION)
            or rt is None
            or preemptor is None
        ):
            continue
        if rt.task.resources.cpu_milli or rt.task.resources.memory_mib:
            continue  # GPUs only: a CPU or memory shortage reaches other components
        theirs = set(tree.ancestors(preemptor.team))
        pool = rt.admission.pool
        for cohort in tree.ancestors(rt.task.team):
            if cohort in theirs:
                break
            used = tree.cohort_usage[(cohort, pool)].gpus
            quota = tree.subtree_quota[(cohort, pool)].gpus
            assert used > quota, (
                f"{p.victim_id} of team {rt.task.team} preempted by team {preemptor.team} ({p.reason}) "
                f"although cohort {cohort} used {used} of its {quota} {pool} GPUs"
            )


def replica(state: ClusterState) -> ClusterState:
    """A new state holding what `state` holds, built through the state's own methods.

    Not `copy.deepcopy`: the engine may be compiled (gpucommons._native), and compiled classes
    cannot be copied field by field from outside."""
    trial = ClusterState(state.policy)
    for pool in (p.name for p in state.policy.pools):
        trial.set_out_of_service(pool, state.out_of_service(pool))
    running = sorted(state.iter_running(), key=lambda rt: (rt.admitted_at, rt.task.seq))
    for rt in running:
        trial.add_pending(rt.task)
        trial.admit(rt.task.id, rt.admission, rt.admitted_at)
    for task in state.iter_pending():
        trial.add_pending(task)
    for rt in running:
        if rt.preempting:
            trial.mark_preempting(rt.task.id, state.preemptor_of(rt.task.id))
        if rt.unsaved_gpu_s:
            trial.set_unsaved_work(rt.task.id, rt.unsaved_gpu_s)
    for task_id, count in state.preempted_before().items():
        if trial.pending(task_id) is not None or trial.running(task_id) is not None:
            trial.set_preemption_count(task_id, count)
    for team in state.policy.team_names:
        trial.set_team_spend(team, state.team_spend(team))
    remembered_at, remembered = state.usage_memory()
    if remembered_at is not None:
        trial.restore_usage_memory(remembered_at, remembered)
    return trial


def check_preemptions_make_room(state: ClusterState, d: Decisions, now: float, config: EngineConfig) -> None:
    """Every preemptor fits once the victims have stopped, even with this cycle's admissions in
    place. As in Kueue (scheduler.go `fits`, with every preempted workload removed), a plan may
    count on the victims of the cycle's earlier plans too, so the preemptors are admitted one by
    one, in the order they planned, once all victims (this cycle's and earlier ones) are gone."""
    order: list[str] = []
    planned: dict[str, str] = {}  # preemptor -> the pool of its victims, where it resumes
    for p in d.preempt:
        if p.preemptor_id not in order:
            order.append(p.preemptor_id)
        victim = state.running(p.victim_id)
        if victim is not None:
            planned[p.preemptor_id] = victim.admission.pool
    if not order:
        return
    trial = replica(state)
    for a in d.admit:
        trial.admit(a.task_id, a.admission, now)
    victims = {p.victim_id for p in d.preempt}
    for preemptor_id in trial.waiting_preemptors():
        victims |= set(trial.victims_of(preemptor_id))
    for preemptor_id in order:
        victims |= set(trial.victims_of(preemptor_id))
    for v in sorted(victims):
        if trial.running(v) is not None:
            trial.finish(v)
    for preemptor_id in order:
        task = trial.pending(preemptor_id)
        assert task is not None
        cy = Cycle(trial, now, config)
        # Once its victims are gone a preemptor is admitted in their pool only (`_resume_waiting`):
        # were it tried in the first pool with room, it could take what another plan freed.
        pools = [planned[preemptor_id]] if preemptor_id in planned else cy.pools_for(task.team, task.pools)[0]
        found = [(pool, pl) for pool in pools if (pl := cy.fits(task.team, pool, task.resources)) is not None]
        assert found, f"{preemptor_id} preempted, but would still not fit once all victims stopped"
        pool, placement = found[0]
        trial.admit(preemptor_id, Admission(pool, placement), now)
