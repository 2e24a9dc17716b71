"""Fluent builders for policies, tasks and engine states, so a test reads like its scenario.

    policy = (make_policy().pool("h100", nodes=4, gpus_per_node=8)
              .team("nlp", h100=16, borrow_limit=8).team("cv", h100=16).build())
    task = make_task("t1").team("nlp").gpus(8).priority(500).obj()
    state = make_state(policy).running(make_task("r1").team("cv").gpus(24), at=0).pending(task).obj()

Defaults follow docs/design.md: the four priority classes (production, interactive, training,
experiment), every team in the `cluster` cohort, Kueue's preemption defaults (never).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from decimal import Decimal

from gpucommons.domain.model import (
    DEFAULT_COHORT,
    BorrowWithinCohortPolicy,
    Budget,
    BudgetEnforcement,
    Cohort,
    Isolation,
    Policy,
    Pool,
    PreemptionPolicy,
    PriorityClass,
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
from gpucommons.engine.cycle import decide
from gpucommons.engine.state import ClusterState
from gpucommons.engine.types import Admission, Decisions, EngineConfig, NodeSlice, RunningTask, TaskRequest

#: docs/design.md's four priority classes.
DEFAULT_CLASSES = (
    PriorityClass("production", 1000, preemptible=False, grace_period_s=30),
    PriorityClass("interactive", 800, grace_period_s=30, max_runtime_s=8 * 3600),
    PriorityClass("training", 500, grace_period_s=300, checkpoint_required=True, min_runtime_s=600),
    PriorityClass("experiment", 100, grace_period_s=60),
)
_CLASS_VALUES = {c.name: c.value for c in DEFAULT_CLASSES}

_seq = itertools.count(1)


def _limit(value: int | None) -> Resources:
    if value is None:
        return Resources(UNLIMITED, UNLIMITED, UNLIMITED)
    return Resources(value, UNLIMITED, UNLIMITED)


class PolicyBuilder:
    def __init__(self) -> None:
        self._pools: list[Pool] = []
        self._teams: list[Team] = []
        self._cohorts: dict[str, Cohort] = {}
        self._classes: list[PriorityClass] = []
        self._scheduling = SchedulingConfig()

    def pool(
        self, name: str, nodes: int = 4, gpus_per_node: int = 8, gpu_type: str | None = None
    ) -> PolicyBuilder:
        self._pools.append(Pool(name, gpu_type or name.upper(), nodes, gpus_per_node, Decimal("2.50")))
        return self

    def cohort(
        self,
        name: str,
        parent: str | None = None,
        borrow_limit: int | None = None,
        lend_limit: int | None = None,
        **gpus_by_pool: int,
    ) -> PolicyBuilder:
        """A cohort, with `pool=gpus` quotas of its own (limits apply to each pool, towards the parent)."""
        quotas = tuple(
            Quota(pool, Resources(gpus), _limit(borrow_limit), _limit(lend_limit))
            for pool, gpus in gpus_by_pool.items()
        )
        self._cohorts[name] = Cohort(name, parent, quotas)
        return self

    def priority_class(
        self,
        name: str,
        value: int,
        preemptible: bool = True,
        min_runtime_s: int = 300,
        budget_exempt: bool = False,
        grace_period_s: int = 30,
    ) -> PolicyBuilder:
        self._classes.append(
            PriorityClass(
                name,
                value,
                preemptible=preemptible,
                min_runtime_s=min_runtime_s,
                budget_exempt=budget_exempt,
                grace_period_s=grace_period_s,
            )
        )
        return self

    def team(
        self,
        name: str,
        cohort: str = DEFAULT_COHORT,
        borrow_limit: int | None = None,
        lend_limit: int | None = None,
        reclaim: str = "never",
        borrow_within_cohort: str = "never",
        within_team: str = "never",
        weight: float | int | str = 1,
        dedicated: bool = False,
        budget: int | None = None,
        hard_budget: bool = True,
        **gpus_by_pool: int,
    ) -> PolicyBuilder:
        """A team with `pool=gpus` nominal quotas (in the order given); limits apply to each pool."""
        quotas = tuple(
            Quota(pool, Resources(gpus), _limit(borrow_limit), _limit(lend_limit))
            for pool, gpus in gpus_by_pool.items()
        )
        self._teams.append(
            Team(
                name=name,
                quotas=quotas,
                cohort=cohort,
                preemption=PreemptionPolicy(
                    ReclaimPolicy(reclaim),
                    BorrowWithinCohortPolicy(borrow_within_cohort),
                    WithinTeamPolicy(within_team),
                ),
                fair_share_weight=Decimal(str(weight)),
                isolation=Isolation.DEDICATED if dedicated else Isolation.SHARED,
                budget=Budget(
                    Decimal(budget), BudgetEnforcement.HARD if hard_budget else BudgetEnforcement.SOFT
                )
                if budget is not None
                else None,
            )
        )
        if cohort not in self._cohorts:
            self._cohorts[cohort] = Cohort(cohort)
        return self

    def quota(
        self, pool: str, gpus: int, borrow_limit: int | None = None, lend_limit: int | None = None
    ) -> PolicyBuilder:
        """Add a pool quota to the team added last (its pools are tried in the order added)."""
        last = self._teams[-1]
        q = Quota(pool, Resources(gpus), _limit(borrow_limit), _limit(lend_limit))
        self._teams[-1] = replace(last, quotas=(*last.quotas, q))
        return self

    def preemption(
        self, reclaim: str = "any", borrow_within_cohort: str = "never", within_team: str = "lower_priority"
    ) -> PolicyBuilder:
        """Set the preemption words of every team added so far."""
        p = PreemptionPolicy(
            ReclaimPolicy(reclaim),
            BorrowWithinCohortPolicy(borrow_within_cohort),
            WithinTeamPolicy(within_team),
        )
        self._teams = [replace(t, preemption=p) for t in self._teams]
        return self

    def fair_share(self, half_life_s: int = 0) -> PolicyBuilder:
        self._scheduling = replace(
            self._scheduling, mode=SchedulingMode.FAIR_SHARE, usage_half_life_s=half_life_s
        )
        return self

    def strict_fifo(self) -> PolicyBuilder:
        self._scheduling = replace(self._scheduling, queueing=QueueingStrategy.STRICT_FIFO)
        return self

    def checkpoint_aware(self, on: bool) -> PolicyBuilder:
        self._scheduling = replace(self._scheduling, checkpoint_aware=on)
        return self

    def build(self) -> Policy:
        classes = tuple(self._classes) or DEFAULT_CLASSES
        return Policy(
            cluster_name="test",
            pools=tuple(self._pools),
            priority_classes=classes,
            default_priority_class=classes[-1].name,
            teams=tuple(self._teams),
            cohorts=tuple(self._cohorts.values()) or (Cohort(DEFAULT_COHORT),),
            scheduling=self._scheduling,
        )


def make_policy() -> PolicyBuilder:
    return PolicyBuilder()


class TaskBuilder:
    def __init__(self, task_id: str) -> None:
        self._id = task_id
        self._team = "team"
        self._res = Resources(gpus=1)
        self._priority: int | None = None
        self._class = "experiment"
        self._seq: int | None = None
        self._queued_at = 0.0
        self._pools: tuple[str, ...] = ()
        self._preemptible = True
        self._checkpointed = True

    def team(self, name: str) -> TaskBuilder:
        self._team = name
        return self

    def gpus(self, n: int) -> TaskBuilder:
        self._res = Resources(n, self._res.cpu_milli, self._res.memory_mib)
        return self

    def cpus(self, milli: int) -> TaskBuilder:
        self._res = Resources(self._res.gpus, milli, self._res.memory_mib)
        return self

    def priority(self, value: int) -> TaskBuilder:
        self._priority = value
        return self

    def klass(self, name: str) -> TaskBuilder:
        """The priority class (its value in docs/design.md unless `priority()` says otherwise)."""
        self._class = name
        if name == "production":
            self._preemptible = False
        return self

    def at(self, queued_at: float) -> TaskBuilder:
        self._queued_at = queued_at
        return self

    def seq(self, n: int) -> TaskBuilder:
        self._seq = n
        return self

    def pools(self, *names: str) -> TaskBuilder:
        self._pools = names
        return self

    def nonpreemptible(self) -> TaskBuilder:
        self._preemptible = False
        return self

    def no_checkpoint(self) -> TaskBuilder:
        """A task that declared no way to save its state (builders' tasks save on their signal)."""
        self._checkpointed = False
        return self

    def obj(self) -> TaskRequest:
        return TaskRequest(
            id=self._id,
            team=self._team,
            resources=self._res,
            priority=self._priority if self._priority is not None else _CLASS_VALUES.get(self._class, 100),
            priority_class=self._class,
            seq=self._seq if self._seq is not None else next(_seq),
            queued_at=self._queued_at,
            pools=self._pools,
            preemptible=self._preemptible,
            checkpointed=self._checkpointed,
        )


def make_task(task_id: str) -> TaskBuilder:
    return TaskBuilder(task_id)


class StateBuilder:
    """A `ClusterState` with tasks already running (admitted as the engine would place them)."""

    def __init__(self, policy: Policy) -> None:
        self._state = ClusterState(policy)

    def running(
        self,
        task: TaskBuilder | TaskRequest,
        pool: str | None = None,
        at: float = 0.0,
        unsaved_gpu_s: float = 0.0,
        placement: tuple[NodeSlice, ...] | None = None,
        place: bool = True,
    ) -> StateBuilder:
        t = task.obj() if isinstance(task, TaskBuilder) else task
        state = self._state
        team = state.policy.team(t.team)
        pool = pool or (t.pools[0] if t.pools else team.quotas[0].pool)
        if placement is None:
            found = state.nodes.find(t.team, pool, t.resources.gpus) if place else ()
            if found is None:
                raise ValueError(f"no room to place {t.id} ({t.resources.gpus} GPUs) in {pool}")
            placement = found
        q = team.quota(pool)
        nominal = q.nominal if q is not None else Resources()
        borrowed = (state.usage(t.team, pool) + t.resources - nominal).clamp_nonnegative().min(t.resources)
        state.add_pending(t)
        state.admit(t.id, Admission(pool, placement, borrowed), at)
        if unsaved_gpu_s:
            state.set_unsaved_work(t.id, unsaved_gpu_s)
        return self

    def preempting(self, task_id: str, preemptor_id: str | None = None) -> StateBuilder:
        self._state.mark_preempting(task_id, preemptor_id)
        return self

    def pending(self, *tasks: TaskBuilder | TaskRequest) -> StateBuilder:
        for task in tasks:
            self._state.add_pending(task.obj() if isinstance(task, TaskBuilder) else task)
        return self

    def spend(self, team: str, cents: int) -> StateBuilder:
        self._state.set_team_spend(team, cents)
        return self

    def obj(self) -> ClusterState:
        return self._state


def make_state(policy: Policy) -> StateBuilder:
    return StateBuilder(policy)


def running_task(task: TaskRequest, pool: str, at: float = 0.0) -> RunningTask:
    """A bare `RunningTask` (no state) for tests of pure helpers."""
    return RunningTask(task=task, admission=Admission(pool), admitted_at=at)


def decide_checked(state: ClusterState, now: float = 100.0, config: EngineConfig | None = None) -> Decisions:
    """`decide()`, asserting it left the state exactly as it found it."""
    before = state.fingerprint()
    decisions = decide(state, now, config or EngineConfig.commons())
    after = state.fingerprint()
    if before != after:
        raise AssertionError("decide() changed the state it was given")
    return decisions


def settle(
    state: ClusterState, now: float, config: EngineConfig | None = None, max_rounds: int = 100
) -> list[Decisions]:
    """Call `decide` and apply its decisions at `now` until a cycle decides nothing (as a caller
    must with Kueue's one admission per team per cycle). Victims are marked preempting, not
    requeued: they stop later."""
    rounds = []
    for _ in range(max_rounds):
        d = decide_checked(state, now, config)
        if d.empty:
            break
        apply_decisions(state, d, now)
        rounds.append(d)
    return rounds
