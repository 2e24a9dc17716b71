"""One scheduling cycle: `decide(state, now, config) -> Decisions`. Pure: the state is unchanged.

The pipeline (Kueue `scheduler.go`, `schedule()`):

1. **Heads.** Each team's head: first the tasks that preempted others and still wait for them
   (they keep their place — docs/design.md, trap 2), then its queue in `queue_key` order.
2. **Order.** Heads across teams: waiting preemptors first, then (classic) tasks that fit without
   borrowing, higher priority, older; (fair share) lower dominant share after admission first.
3. **Admit or preempt**, one head at a time, on a what-if snapshot that already holds every
   admission and reservation made earlier in the cycle:
   - fits in a pool (the team's pools in order) → admit;
   - else fits once the victims already planned this cycle stop → wait for them, holding its
     request (Kueue's DeferredFit);
   - else victims that let it fit, sought in every pool (v1beta2 flavor fungibility) and the best
     plan taken (reclaim before own-team preemption, then least borrowing, then pool order) →
     preempt them and *reserve* its request: its usage is held and the GPUs its victims free are
     its own for the rest of this cycle and in every later cycle until it is admitted
     (docs/design.md, trap 1). As in Kueue, several teams of a cohort may plan in one cycle: each
     plan is made on a view where earlier plans' victims are gone (Kueue `fits` with the preempted
     workloads removed), and victims never overlap;
   - else, with node placement, if quota allows it and only fragmentation stops it, cheap tasks
     that fit again elsewhere at once are moved to make room (`engine/consolidation.py`; not in
     Kueue) → preempt them and reserve, as above;
   - else it waits, with a reason.
4. **Next.** With `multi_admit` a team's next task becomes a head in the same cycle after an
   admission; Kueue admits one head per team per cycle, so with it off the caller calls
   `decide()` again at the same `now` until it returns no admissions or preemptions. With
   best-effort FIFO a head that cannot go is set aside and the next task is tried (strict FIFO:
   the team waits behind it); tasks that ask for at least what a failed task asked for are set
   aside without evaluation, so a cycle examines heads, not the whole queue, when nothing fits.
5. **Unchanged teams (`static`).** A team confined to its own quota sees nothing of the others
   but the nodes; when all its heads failed on its quota alone, the state keeps the reasons, and
   later cycles give them again without examining it until the team changes
   (`ClusterState.team_version`, `failed_teams`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from gpucommons.domain.model import BudgetEnforcement, QueueingStrategy, SchedulingMode
from gpucommons.domain.money import to_cents
from gpucommons.domain.resources import ZERO, Resources
from gpucommons.engine.consolidation import plan_consolidation, tasks_by_node
from gpucommons.engine.context import Cycle
from gpucommons.engine.fairshare import dominant_share
from gpucommons.engine.placement import PoolNodes
from gpucommons.engine.preemption import (
    Target,
    get_targets,
    may_find_candidates,
    preemption_gate,
    targets_of_candidates,
)
from gpucommons.engine.quota import UsageView
from gpucommons.engine.reasons import (
    admitted_message,
    budget_reason,
    deferred_message,
    inherited_reason,
    never_fits_limit,
    pending_reason,
    preempt_message,
    waiting_message,
    with_gate,
)
from gpucommons.engine.state import ClusterState, queue_key
from gpucommons.engine.types import (
    Admission,
    Admit,
    Decisions,
    EngineConfig,
    NodeSlice,
    Pending,
    PendingCode,
    Preempt,
    PreemptReason,
    RunningTask,
    TaskRequest,
)

EntryKey = tuple[int, float, int, float, int]


def decide(state: ClusterState, now: float, config: EngineConfig) -> Decisions:
    """One admission cycle over `state` at time `now`. Never mutates `state`."""
    cy = Cycle(state, now, config)
    scheduler = _Scheduler(cy)
    try:
        return scheduler.run()
    finally:
        scheduler.close()
        cy.whatif.rollback(0)


@dataclass(slots=True)
class _Failure:
    task_id: str
    pools: tuple[str, ...]
    request: Resources
    pending: Pending
    #: `inherited()`, built once: a cycle may hand it to thousands of queued tasks.
    _inherited: Pending | None = None
    #: `_Scheduler._rest_cannot_go` without its `cursor.waiting` part, once known (the state does
    #: not change during a cycle).
    rest_covered: bool | None = None

    def __init__(self, task_id: str, pools: tuple[str, ...], request: Resources, pending: Pending) -> None:
        # By hand, as `Resources.__init__` (compiled, a generated one stays interpreted): a cycle
        # builds one for every head that fails, which under `static` is every team every cycle.
        self.task_id = task_id
        self.pools = pools
        self.request = request
        self.pending = pending
        self._inherited = None
        self.rest_covered = None

    def inherited(self) -> Pending:
        """The reason for a task that asks at least as much and so waits for the same cause."""
        if self._inherited is None:
            self._inherited = inherited_reason(self.task_id, self.pending)
        return self._inherited


#: A memo entry for a request that matches no failure: it must be evaluated as a head.
_NO_MATCH: tuple[None, None] = (None, None)

#: Reasons that, under `static`, depend on the team's own quota and queue alone (not on the nodes,
#: other teams or the clock): a team whose heads all fail with one of these fails the same way
#: until `ClusterState.team_version` changes.
_OWN_QUOTA_CODES = frozenset({PendingCode.QUOTA_EXHAUSTED, PendingCode.NEVER_FITS, PendingCode.UNKNOWN_POOL})


@dataclass(slots=True)
class _PoolPlans:
    """The victims planned in one pool this cycle, which of their GPUs are spoken for, and the
    view later plans are made on.

    The view is kept, not rebuilt: built once on the first victim, then each new victim is
    released into it and each claim held there once, while every other change of the cycle is
    applied to it too (`follow`). Entering it is a swap, so a cycle's plans cost what they touch
    rather than a re-release of every earlier victim per plan (issue 12: quadratic in the plans).
    Usage and free GPUs depend on what is held, not on the order it was taken in, so the view is
    exactly the one a re-release would build."""

    ids: list[str] = field(default_factory=list)
    victim_gpus: set[int] = field(default_factory=set)
    #: The pool's free GPUs as a plan sees them: the victims' GPUs free, except those a preemptor
    #: (or a deferred task) claimed to take once they stop.
    view: PoolNodes | None = None
    #: The cycle's own node map of the pool, while the plan view stands in for it.
    real: PoolNodes | None = None
    #: Likewise the usage as a plan sees it (the victims' usage gone), and the cycle's own.
    usage_view: UsageView | None = None
    real_usage: UsageView | None = None

    def __init__(self) -> None:
        # By hand (compiled, a generated `__init__` stays interpreted).
        self.ids = []
        self.victim_gpus = set()
        self.view = None
        self.real = None
        self.usage_view = None
        self.real_usage = None


@dataclass(slots=True)
class _TeamCursor:
    team: str
    waiting: list[str] = field(default_factory=list)
    index: int = 0
    done: bool = False
    failures: list[_Failure] = field(default_factory=list)
    #: (pools, gpus, cpu, memory) of a set-aside request -> the failure it matches and its
    #: reason, or `_NO_MATCH`; valid while `failures` is unchanged (`_fail` clears it).
    memo: dict[tuple[tuple[str, ...], int, int, int], tuple[_Failure | None, Pending | None]] = field(
        default_factory=dict
    )
    #: Every head so far failed on the team's own quota alone (`_OWN_QUOTA_CODES`), without a
    #: possible victim: the next cycle may give the same reasons while the team is unchanged.
    own_quota_only: bool = True

    def __init__(self, team: str) -> None:
        # By hand (compiled, a generated `__init__` stays interpreted): one per team per cycle.
        self.team = team
        self.waiting = []
        self.index = 0
        self.done = False
        self.failures = []
        self.memo = {}
        self.own_quota_only = True


class _Scheduler:
    def __init__(self, cy: Cycle) -> None:
        self.cy = cy
        self.state = cy.state
        sched = cy.policy.scheduling
        self.fair = sched.mode is SchedulingMode.FAIR_SHARE
        self.strict = sched.queueing is QueueingStrategy.STRICT_FIFO
        self.admits: list[Admit] = []
        self.preempts: list[Preempt] = []
        self.pending: dict[str, Pending] = {}
        self.heap: list[tuple[EntryKey, int, str, str, int]] = []
        #: Bumped whenever a team's usage changes in the cycle: a head's key is stale only then.
        self.version: dict[str, int] = {}
        self._never_fits_cache: dict[tuple[str, tuple[str, ...], Resources], Pending] = {}
        self.cursors: dict[str, _TeamCursor] = {}
        self.waiting = cy.state.waiting_preemptors()
        #: Per pool, the victims of this cycle's preemption plans (new ones, and those of waiting
        #: preemptors from earlier cycles): a later plan counts them as gone (Kueue `fits` with the
        #: preempted workloads removed); admissions still see them hold their quota and GPUs.
        self.plans: dict[str, _PoolPlans] = {}
        #: The pool and undo mark of the plan view entered, if one is.
        self._in_view: tuple[str, int] | None = None
        self._tick = 0
        #: Consolidation: per pool, the running tasks on each node (they do not change within a
        #: cycle), and per (pool, partition) the fewest GPUs no plan could make room for.
        self._on_nodes: dict[str, dict[int, list[RunningTask]]] = {}
        self._no_room: dict[tuple[str, str], int] = {}

    # --- the loop --------------------------------------------------------------------------------

    def run(self) -> Decisions:
        waiting_by_team: dict[str, list[TaskRequest]] = {}
        for task_id in self.waiting:
            task = self.state.pending(task_id)
            if task is not None:
                waiting_by_team.setdefault(task.team, []).append(task)
        # Under `static` a team sees nothing of the others but the nodes: if its heads all failed
        # on its own quota last time and nothing of it changed since, they fail the same way now.
        failed = self.state.failed_teams if self.cy.isolated else None
        config = self.cy.config
        for team in self.cy.team_names:
            if self.state.queue_length(team) == 0:
                continue
            if failed is not None and team not in waiting_by_team:
                known = failed.get(team)
                if known is not None and known[0] == self.state.team_version(team) and known[1] is config:
                    self.pending.update(known[2])
                    continue
            cursor = _TeamCursor(team)
            cursor.waiting = [t.id for t in sorted(waiting_by_team.get(team, []), key=queue_key)]
            cursor.own_quota_only = failed is not None and not cursor.waiting
            self.cursors[team] = cursor
            self._push_next(cursor)
        while self.heap:
            key, _, team, task_id, version = heapq.heappop(self.heap)
            task = self.state.pending(task_id)
            if task is None:
                continue
            is_waiting = task_id in self.waiting
            if self.cy.config.multi_admit and version != self._version_of(task.team):
                # Keys go stale as the cycle admits: re-rank lazily (each head moves at most a few times).
                fresh = self._key(task, is_waiting)
                if fresh > key and self.heap and fresh > self.heap[0][0]:
                    self._push(fresh, task)
                    continue
            self._process(self.cursors[team], task, is_waiting)
        if failed is not None:
            self._remember_failed(failed)
        return Decisions(tuple(self.admits), tuple(self.preempts), self.pending)

    def _remember_failed(self, failed: dict[str, tuple[int, object, dict[str, Pending]]]) -> None:
        """Keep the reasons of each team whose heads all failed on its own quota (`static`), for the
        next cycles to give while the team is unchanged; forget the others'."""
        pending, plans = self.pending, bool(self.plans)
        for team, cursor in self.cursors.items():
            if cursor.own_quota_only and not plans:
                reasons = {t: pending[t] for t in self.state.queue_ids(team) if t in pending}
                failed[team] = (self.state.team_version(team), self.cy.config, reasons)
            else:
                failed.pop(team, None)

    def _push(self, key: EntryKey, task: TaskRequest) -> None:
        self._tick += 1
        heapq.heappush(self.heap, (key, self._tick, task.team, task.id, self._version_of(task.team)))

    def _version_of(self, team: str) -> int:
        """Changes when anything a head's key depends on changes: its team's usage (classic), or
        any usage in its root cohort (fair share, where lendable capacity is shared)."""
        if self.fair:
            return self.version.get(self.cy.root(team) or team, 0)
        return self.version.get(team, 0)

    def _bump(self, team: str) -> None:
        scope = (self.cy.root(team) or team) if self.fair else team
        self.version[scope] = self.version.get(scope, 0) + 1

    def _push_next(self, cursor: _TeamCursor) -> None:
        """Make the team's next task to consider a head."""
        if cursor.done:
            return
        if cursor.waiting:
            task = self.state.pending(cursor.waiting.pop(0))
            if task is not None:
                self._push(self._key(task, True), task)
                return
        team = cursor.team
        budget_blocked = self._budget_blocked(team)
        # The walk over tasks set aside behind failed ones runs for every queued task of every
        # team each cycle: names bound once here, not looked up per task; and the answer for a
        # request (same pools, same amounts) is worked out once per list of failures (`memo`).
        waiting, taken, pending = self.waiting, self.cy.taken, self.pending
        failures, memo = cursor.failures, cursor.memo
        # The answer for the previous task's request: queues are runs of equal requests, and
        # comparing four values costs less than building and hashing the memo's key.
        prev_pools: tuple[str, ...] | None = None
        prev_gpus = prev_cpu = prev_mem = 0
        prev_found: tuple[_Failure | None, Pending | None] = _NO_MATCH
        queue, tasks = self.state.queue_entries(team), self.state.pending_tasks()
        while cursor.index < len(queue):
            task = tasks[queue[cursor.index][3]]
            cursor.index += 1
            task_id = task.id
            if task_id in waiting or task_id in taken:
                continue
            if budget_blocked is not None and not self._budget_exempt(task):
                pending[task_id] = budget_blocked
                if self.state.exempt_pending(team) == 0 or self.strict:
                    cursor.done = True
                    return
                continue
            if failures:
                req = task.resources
                pools = task.pools
                if (
                    pools is prev_pools
                    and req.gpus == prev_gpus
                    and req.cpu_milli == prev_cpu
                    and req.memory_mib == prev_mem
                ):
                    found = prev_found
                else:
                    key = (pools, req.gpus, req.cpu_milli, req.memory_mib)
                    memo_found = memo.get(key)
                    if memo_found is None:
                        failure = self._matching_failure(cursor, task)
                        memo_found = memo[key] = (
                            (failure, self._never_fits(task) or failure.inherited())
                            if failure is not None
                            else _NO_MATCH
                        )
                    found = prev_found = memo_found
                    prev_pools, prev_gpus, prev_cpu, prev_mem = pools, req.gpus, req.cpu_milli, req.memory_mib
                failure, reason = found
                if failure is not None and reason is not None:
                    pending[task_id] = reason
                    if self._rest_cannot_go(cursor, failure):
                        cursor.done = True
                        return
                    continue
            self._push(self._key(task, False), task)
            return
        cursor.done = True

    # --- ordering --------------------------------------------------------------------------------

    def _key(self, task: TaskRequest, is_waiting: bool) -> EntryKey:
        """Waiting preemptors first; then not borrowing (classic) or lower share (fair); then
        higher priority; then older."""
        cy = self.cy
        pools, _ = cy.pools_for(task.team, task.pools)
        req = task.resources
        if is_waiting:
            pool = self.waiting.get(task.id, pools[0] if pools else "")
            own = ZERO
            for vid in self.state.victims_of(task.id):
                rt = self.state.running(vid)
                if rt is not None and rt.task.team == task.team and rt.admission.pool == pool:
                    own = own + rt.task.resources
            pools = [pool]
            req = req - own
        tier = 0 if is_waiting else 1
        if self.fair:
            fitting = [p for p in pools if cy.quota.allows(task.team, p, req, cy.isolated)]
            pool = fitting[0] if fitting else (pools[0] if pools else "")
            share = float(dominant_share(cy, task.team, pool, req, decayed=True)) if pool else 0.0
            return (tier, share, -task.priority, task.queued_at, task.seq)
        borrows = 1.0
        for p in pools:
            if cy.within_nominal(task.team, p, req):
                borrows = 0.0
                break
        return (tier, borrows, -task.priority, task.queued_at, task.seq)

    # --- one head --------------------------------------------------------------------------------

    def _process(self, cursor: _TeamCursor, task: TaskRequest, is_waiting: bool) -> None:
        cy = self.cy
        pools, unusable = cy.pools_for(task.team, task.pools)
        if not pools:
            names = ", ".join(unusable) or "any pool"
            self._fail(
                cursor, task, Pending(PendingCode.UNKNOWN_POOL, f"team {task.team} has no quota in {names}")
            )
            return
        own_quota_only = cursor.own_quota_only
        cursor.own_quota_only = False  # until this head is known to fail on its own quota alone
        if is_waiting and self._resume_waiting(task):
            self._after_preemption(cursor)
            return
        # Whether quota allows the request in each pool: asked once, as the state is the same for
        # the steps below until the head goes (each rolls back what it tried) — a head that fails
        # would otherwise ask it again for consolidation and for its reason.
        allowed = [cy.quota.allows(task.team, pool, task.resources, cy.isolated) for pool in pools]
        for i, pool in enumerate(pools):
            placement = cy.place(task.team, pool, task.resources) if allowed[i] else None
            if placement is not None:
                self._admit(task, pool, placement)
                if cy.config.multi_admit:
                    self._push_next(cursor)
                else:
                    cursor.done = True
                return
        if self._deferred_fit(task, pools):
            self._after_preemption(cursor)
            return
        best = self._best_preemption(task, pools)
        if best is not None:
            self._reserve(task, best[0], [], best[1])
            self._after_preemption(cursor)
            return
        if self._consolidate(task, pools, allowed):
            self._after_preemption(cursor)
            return
        reason = pending_reason(cy, task, pools[0], allowed[0])
        gate = preemption_gate(cy, task, pools[0], self.fair)
        if gate is not None and reason.code is not PendingCode.NEVER_FITS:
            reason = with_gate(cy, task, pools[0], gate, reason)
        cursor.own_quota_only = (
            own_quota_only
            and not is_waiting
            and self._fails_on_own_quota(task, pools, allowed, reason)
            and not may_find_candidates(cy, task)
        )
        self._fail(cursor, task, reason)

    def _fails_on_own_quota(
        self, task: TaskRequest, pools: list[str], allowed: list[bool], first: Pending
    ) -> bool:
        """Whether the head failed on its own quota in every pool it may use (`allowed`: whether
        quota allows it in each, as `_process` asked). The reason given is the first pool's; in
        another the head may have failed on the nodes, which other teams' tasks hold, and leaving
        them frees it without any change to the head's team."""
        if first.code not in _OWN_QUOTA_CODES:
            return False
        return all(
            pending_reason(self.cy, task, pools[i], allowed[i]).code in _OWN_QUOTA_CODES
            for i in range(1, len(pools))
        )

    # --- preemption plans ------------------------------------------------------------------------

    def _plan_view(self, pool: str) -> int:
        """Enter the view a preemption plan is made on: the victims of the cycle's earlier plans
        in the pool are gone, except for the GPUs their preemptors will take (with node
        placement). A swap to the pool's `_PoolPlans` views; `_leave_view` swaps back. Returns
        the mark to roll back to."""
        whatif = self.cy.whatif
        mark = whatif.mark()
        plans = self.plans.get(pool)
        if plans is not None:
            if plans.usage_view is not None:
                plans.real_usage = self.state.quota.swap(plans.usage_view)
            if plans.view is not None:
                pools = self.state.nodes.pools
                plans.real = pools[pool]
                pools[pool] = plans.view
            self._in_view = (pool, mark)
        return mark

    def _leave_view(self, pool: str, mark: int) -> None:
        """Undo what was done in the plan view since `mark`, and give the cycle its own usage and
        nodes back."""
        self.cy.whatif.rollback(mark)
        plans = self.plans.get(pool)
        if plans is not None and plans.real is not None:
            self.state.nodes.pools[pool] = plans.real
            plans.real = None
        if plans is not None and plans.real_usage is not None:
            self.state.quota.swap(plans.real_usage)
            plans.real_usage = None
        self._in_view = None

    def _plan_nodes(self, pool: str, plans: _PoolPlans) -> PoolNodes | None:
        """The plan view's nodes of the pool, made on the first victim there."""
        if plans.view is None:
            nodes = self.state.nodes.pools.get(pool)
            if nodes is not None:
                plans.view = nodes.follow(plans.victim_gpus)
        return plans.view

    def close(self) -> None:
        """Leave any plan view (an error may have left one entered) and stop the views following
        the cycle's node map: `decide()` then rolls the state back to what it was."""
        if self._in_view is not None:
            self._leave_view(*self._in_view)  # changes made in the view are undone on its nodes
        for pool in self.plans:
            nodes = self.state.nodes.pools.get(pool)
            if nodes is not None:
                nodes.unfollow()
        self.state.quota.unfollow()

    def _add_victims(self, victims: list[RunningTask]) -> None:
        for rt in victims:
            pool = rt.admission.pool
            plans = self.plans.get(pool)
            if plans is None:
                plans = self.plans[pool] = _PoolPlans()
            if plans.usage_view is None:
                plans.usage_view = self.state.quota.follow()
            self.state.quota.add_view_usage(plans.usage_view, rt.task.team, pool, ZERO - rt.task.resources)
            plans.ids.append(rt.task.id)
            view = self._plan_nodes(pool, plans)
            freed: list[NodeSlice] = []
            for sl in rt.admission.placement:
                # A GPU already a victim's is free in the view, or claimed there: left as it is.
                new = tuple(g for g in sl.gpu_indices if g not in plans.victim_gpus)
                if new:
                    freed.append(NodeSlice(sl.node, new))
                plans.victim_gpus.update(sl.gpu_indices)
            if view is not None and freed:
                view.give_back(tuple(freed))

    def _hold_claim(self, task: TaskRequest, pool: str, placement: tuple[NodeSlice, ...]) -> None:
        """Hold the task's request in the cycle's view: its quota, the free GPUs of `placement`
        now, and (as a claim the plan view honours) the GPUs of `placement` that victims hold."""
        plans = self.plans.get(pool)
        busy = plans.victim_gpus if plans is not None else set()
        pool_obj = self.cy.pool(pool)
        gpn = pool_obj.gpus_per_node if pool_obj is not None else 0
        if gpn and task.resources.gpus > gpn:
            # A gang on several whole nodes: hold them whole, else a small task admitted later in
            # the cycle lands on the last one and the gang no longer fits when its turn comes.
            placement = tuple(
                NodeSlice(sl.node, tuple(range(sl.node * gpn, (sl.node + 1) * gpn))) for sl in placement
            )
        free: list[NodeSlice] = []
        for sl in placement:
            now_free = tuple(g for g in sl.gpu_indices if g not in busy)
            later = tuple(g for g in sl.gpu_indices if g in busy)
            if now_free:
                free.append(NodeSlice(sl.node, now_free))
            if later and plans is not None:
                view = self._plan_nodes(pool, plans)
                if view is not None:
                    view.take((NodeSlice(sl.node, later),))
        self.cy.add_held(task.team, pool, task.resources, tuple(free))
        self._bump(task.team)

    def _deferred_fit(self, task: TaskRequest, pools: list[str]) -> bool:
        """Kueue's DeferredFit: a task that fits once the victims already planned in this cycle
        (or still stopping for waiting preemptors) are gone waits for them, holding its request,
        rather than preempting anyone else."""
        cy = self.cy
        for pool in pools:
            plans = self.plans.get(pool)
            if plans is None:
                continue
            mark = self._plan_view(pool)
            placement = cy.fits(task.team, pool, task.resources)
            self._leave_view(pool, mark)
            if placement is None:
                continue
            self._hold_claim(task, pool, placement)
            cy.taken.add(task.id)
            self.pending[task.id] = Pending.later(
                PendingCode.WAITING_FOR_PREEMPTION, deferred_message, (tuple(plans.ids),)
            )
            return True
        return False

    def _best_preemption(self, task: TaskRequest, pools: list[str]) -> tuple[str, list[Target]] | None:
        """Victims in every pool where preemption could make room (v1beta2 flavor fungibility,
        `whenCanPreempt: TryNextFlavor`), and the best plan by Kueue's default preference
        (`BorrowingOverPreemption`, `isPreferred`): reclaiming only other teams' tasks before
        preempting any of the team's own, then the least borrowing once the victims are gone
        (Kueue's borrowing level), then the pool listed first."""
        cy = self.cy
        if not may_find_candidates(cy, task):
            return None  # `get_targets` would say so in every pool: spare the plan views
        best: tuple[tuple[int, int], str, list[Target]] | None = None
        for pool in pools:
            if never_fits_limit(cy, task, pool) is not None:
                continue
            mark = self._plan_view(pool)
            targets = targets_of_candidates(cy, task, pool, self.fair)
            rank = (0, 0)
            if targets:
                for t in targets:
                    cy.release(t.victim)
                own = any(t.victim.task.team == task.team for t in targets)
                rank = (int(own), cy.quota.borrowing_level(task.team, pool, task.resources, cy.isolated))
            self._leave_view(pool, mark)
            if targets and (best is None or rank < best[0]):
                best = (rank, pool, targets)
                if rank == (0, 0):
                    break  # nothing ranks better
        return (best[1], best[2]) if best is not None else None

    def _consolidate(self, task: TaskRequest, pools: list[str], allowed: list[bool]) -> bool:
        """Move cheap tasks so that a head its quota allows (`allowed`, per pool), but no node
        holds, fits (engine/consolidation.py); the head then waits for them like any preemptor."""
        cy = self.cy
        if not cy.config.consolidation or not cy.config.node_placement:
            return False
        partition = cy.state.nodes.partition
        for i, pool in enumerate(pools):
            if not allowed[i]:
                continue
            scope = (pool, partition.get(task.team, ""))
            failed = self._no_room.get(scope)
            if failed is not None and failed <= task.resources.gpus:
                continue  # asks no less than a head no plan could make room for in this cycle
            by_node = self._on_nodes.get(pool)
            if by_node is None:
                by_node = self._on_nodes[pool] = tasks_by_node(cy, pool)
            plan = plan_consolidation(cy, task, pool, by_node)
            if plan is None:
                self._no_room[scope] = task.resources.gpus
                continue
            targets = [Target(rt, PreemptReason.CONSOLIDATION) for rt in plan.moved]
            self._reserve(task, pool, [], targets)
            self._no_room.clear()
            return True
        return False

    def _after_preemption(self, cursor: _TeamCursor) -> None:
        """The team's head waits for its victims: others of the team may still use what is left
        (best effort, several admissions per cycle); with strict FIFO or Kueue's one head per team,
        the team is done for this cycle."""
        if (self.cy.config.multi_admit and not self.strict) or cursor.waiting:
            self._push_next(cursor)
        else:
            cursor.done = True

    def _fail(self, cursor: _TeamCursor, task: TaskRequest, reason: Pending) -> None:
        self.pending[task.id] = reason
        if self.strict:
            nxt = self.state.queue_entry(task.team, cursor.index)
            if nxt is not None and nxt.id not in self.pending:
                self.pending[nxt.id] = Pending(
                    PendingCode.BEHIND_HEAD,
                    f"strict FIFO: waits behind {task.id}, the head of team {task.team}'s queue",
                )
            if cursor.waiting:
                self._push_next(cursor)
            else:
                cursor.done = True
            return
        cursor.failures.append(_Failure(task.id, task.pools, task.resources, reason))
        if len(cursor.failures) > 8:
            cursor.failures.pop(0)
        cursor.memo.clear()  # which failure a request matches may have changed
        if not self._rest_cannot_go(cursor, cursor.failures[-1]):
            self._push_next(cursor)
        else:
            cursor.done = True

    def _never_fits(self, task: TaskRequest) -> Pending | None:
        """The reason if the task fits in none of its pools even with every other team idle.

        Runs for every queued task a cycle sets aside, so the common answer (it may fit) is found
        from the cycle's cached limits, without building a key; only never-fitting requests are
        looked up or explained."""
        cy = self.cy
        pools, _ = cy.pools_for(task.team, task.pools)
        if not pools:
            return None
        req = task.resources
        for p in pools:
            most = cy.most_ever(task.team, p)
            if (
                req.gpus <= most.gpus
                and req.cpu_milli <= most.cpu_milli
                and req.memory_mib <= most.memory_mib
            ):
                return None
        key = (task.team, task.pools, req)
        reason = self._never_fits_cache.get(key)
        if reason is None:
            reason = pending_reason(cy, task, pools[0])
            self._never_fits_cache[key] = reason
        return reason

    def _matching_failure(self, cursor: _TeamCursor, task: TaskRequest) -> _Failure | None:
        """A task asking at least what a failed task of the same team asked, in the same pools,
        fails the same way: it has no higher priority (queue order), so no more victims."""
        pools, req = task.pools, task.resources
        for f in cursor.failures:
            r = f.request
            if (
                f.pools == pools
                and r.gpus <= req.gpus
                and r.cpu_milli <= req.cpu_milli
                and r.memory_mib <= req.memory_mib
            ):
                return f
        return None

    def _rest_cannot_go(self, cursor: _TeamCursor, failure: _Failure) -> bool:
        """True if every remaining task of the team asks at least what `failure` asked."""
        if failure.rest_covered is None:
            r = failure.request
            failure.rest_covered = (
                not failure.pools
                and r.cpu_milli == 0
                and r.memory_mib == 0
                and r.gpus <= self.state.min_pending_gpus(cursor.team)
                and self.state.explicit_pool_pending(cursor.team) == 0
            )
        return failure.rest_covered and not cursor.waiting

    # --- budgets ---------------------------------------------------------------------------------

    def _budget_blocked(self, team: str) -> Pending | None:
        if not self.cy.config.enforce_budgets:
            return None
        budget = self.cy.team(team).budget
        if budget is None or budget.enforce is not BudgetEnforcement.HARD:
            return None
        limit = to_cents(budget.monthly)
        spent = self.state.team_spend(team)
        if spent < limit:
            return None
        return budget_reason(self.cy, team, spent, limit)

    def _budget_exempt(self, task: TaskRequest) -> bool:
        cls = self.cy.priority_class(task.priority_class)
        return cls is not None and cls.budget_exempt

    # --- outcomes --------------------------------------------------------------------------------

    def _admit(self, task: TaskRequest, pool: str, placement: tuple[NodeSlice, ...]) -> None:
        cy = self.cy
        borrowed = cy.borrowed_after(task.team, pool, task.resources)
        admission = Admission(pool=pool, placement=placement, borrowed=borrowed)
        cy.add_held(task.team, pool, task.resources, placement)
        self._bump(task.team)
        cy.taken.add(task.id)
        self.admits.append(Admit(task.id, admission, admitted_message(cy, admission, task.resources)))

    def _resume_waiting(self, task: TaskRequest) -> bool:
        """A preemptor from an earlier cycle: admit it if room is there, else keep its claim on
        what its victims will free (and take more victims only if they no longer suffice)."""
        cy = self.cy
        pool = self.waiting[task.id]
        own = [
            rt for v in sorted(self.state.victims_of(task.id)) if (rt := self.state.running(v)) is not None
        ]
        placement = cy.fits(task.team, pool, task.resources)
        if placement is not None:
            self._admit(task, pool, placement)
            return True
        if not own:
            return False  # its victims are gone yet it does not fit: an ordinary head again
        mark = self._plan_view(pool)
        for rt in own:
            cy.release(rt)
        enough = cy.fits(task.team, pool, task.resources) is not None
        targets: list[Target] | None = None
        if not enough:
            targets = get_targets(cy, task, pool, self.fair)
        self._leave_view(pool, mark)
        if enough or targets:
            self._reserve(task, pool, own, targets or [])
            return True
        return False

    def _reserve(
        self, task: TaskRequest, pool: str, leaving: list[RunningTask], targets: list[Target]
    ) -> None:
        """Issue the preemptions and hold the preemptor's request in the snapshot.

        Victims keep their usage and GPUs (they still run); the preemptor's usage is added and any
        further free GPUs it will need are held for it, so nobody else in this cycle takes them;
        the victims' GPUs it will take are claimed, so a later plan of the cycle counts only the
        rest of them as freed.
        """
        cy = self.cy
        victims = leaving + [t.victim for t in targets]
        mark = self._plan_view(pool)
        for rt in victims:
            cy.release(rt)
        placement = cy.fits(task.team, pool, task.resources)
        self._leave_view(pool, mark)
        self._add_victims(victims)
        self._hold_claim(task, pool, placement or ())
        for t in targets:
            cy.taken.add(t.victim.task.id)
            if not t.leaving:
                self.preempts.append(
                    Preempt(
                        victim_id=t.victim.task.id,
                        preemptor_id=task.id,
                        reason=t.reason,
                        message=preempt_message(cy, t.victim, task, t.reason),
                    )
                )
        cy.taken.add(task.id)
        self.pending[task.id] = Pending.later(
            PendingCode.WAITING_FOR_PREEMPTION, waiting_message, (tuple(rt.task.id for rt in victims),)
        )
